import Foundation
import Glibc
import TestSupport
import Testing

/// `vaultctl prefs import --from mmkv` (issue 37, MMKV): real MMKV 2.4.2 files (Tests/Fixtures/mmkv) brought in as
/// a user runs it, the crypt key from a descriptor, refusals that create nothing, and a kill at any instant leaving
/// the old store or the whole import with the MMKV files untouched.
@Suite struct PrefsImportMMKVTests {
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Fixtures/mmkv").path

    static let types = """
        {"sidebar.expanded": "bool", "sidebar.*": "int32", "launches": "int64", "scale": "double", "theme": "string",
         "locale": "string", "blob": "bytes", "tags": "strings", "café": "string", "counter": "int32"}
        """

    /// `vaultctl --dir <sandbox> ARGUMENTS 3<KEYFILE` through a shell (the crypt key on descriptor 3).
    static func runWithKey(
        _ sandbox: PrefsSandbox, _ arguments: String, key: String, environment: [String: String?] = [:]
    ) throws -> ChildResult {
        try sandbox.write(Array(key.utf8), to: "crypt.key")
        return try ChildProcess.run(
            "/bin/sh", ["-c", #""$V" --dir "$D" "# + arguments + #" 3<"$D/crypt.key""#],
            environment: ["V": PrefsSandbox.vaultctl, "D": sandbox.directory, "XDG_DATA_HOME": sandbox.directory]
                .merging(environment) { $1 })
    }

    @Test func aPlainStoreComesInTypedAndARunAgainSaysUnchanged() throws {
        let sandbox = try PrefsSandbox()
        try sandbox.write(Array(Self.types.utf8), to: "types.json")
        let source = Self.fixtures + "/plain/ui"
        let before = try readBytesAt(source) + readBytesAt(source + ".crc")
        let arguments = ["prefs", "import", "ui", source, "--from", "mmkv", "--types", sandbox.path("types.json")]
        let first = try jsonObject(try sandbox.succeed(["--json"] + arguments).standardOutput)
        #expect((first["imported"] as? [String])?.count == 10 && first["untyped"] as? [String] == [], "\(first)")
        #expect(first["from"] as? String == "mmkv" && first["expired"] as? [String] == [], "\(first)")
        #expect(try sandbox.succeed(["prefs", "get", "ui", "counter"]).lines == ["3"])
        #expect(try sandbox.succeed(["prefs", "get", "ui", "tags"]).lines == [#"["alpha","beta","gamma"]"#])
        #expect(try sandbox.run(["prefs", "get", "ui", "removed"]).status == 66)
        let store = try sandbox.bytes("ui.prefs")
        let again = try sandbox.succeed(arguments)
        #expect(
            again.lines.first?.contains("imported 0 keys") == true
                && again.lines.first?.contains("10 unchanged") == true, "\(again)")
        #expect(try sandbox.bytes("ui.prefs") == store, "a second import wrote")
        #expect(try readBytesAt(source) + readBytesAt(source + ".crc") == before, "the MMKV files changed")

        // Without --types every key comes in as MMKV's bytes, and is named.
        let untyped = try sandbox.succeed(["prefs", "import", "raw", source, "--from", "mmkv"])
        #expect(untyped.lines.first?.contains("10 without a type came in as bytes") == true, "\(untyped)")
    }

    @Test func anEncryptedStoreReadsItsKeyFromADescriptor() throws {
        let sandbox = try PrefsSandbox()
        try sandbox.write(Array(Self.types.utf8), to: "types.json")
        let source = Self.fixtures + "/encrypted/secure"
        let common = "prefs import sec '\(source)' --from mmkv --types '\(sandbox.path("types.json"))'"

        let noKey = try sandbox.run(["prefs", "import", "sec", source, "--from", "mmkv"])
        #expect(noKey.status == 78 && noKey.standardError.contains("--crypt-key-fd"), "\(noKey)")
        let wrong = try Self.runWithKey(sandbox, common + " --crypt-key-fd 3", key: "fixture-key-0124")
        #expect(wrong.status == 78 && wrong.standardError.contains("wrongKey"), "\(wrong)")
        #expect(wrong.standardError.contains("offset"), "\(wrong)")
        #expect(!sandbox.files.contains("sec.prefs"), "a refused import created the store")

        let right = try Self.runWithKey(sandbox, common + " --crypt-key-fd 3", key: "fixture-key-0123\n")
        #expect(right.status == 0, "\(right)")
        #expect(try sandbox.succeed(["prefs", "get", "sec", "café"]).lines == ["au lait"])
        #expect(try sandbox.succeed(["prefs", "get", "sec", "sidebar.width"]).lines == ["280"])
    }

    /// OpenSSL's libcrypto is loaded by an encrypted import alone, not at vaultctl's start: a read and a plain
    /// import run without it, by the dynamic linker's own account (`LD_DEBUG=libs` names every library it loads).
    @Test func onlyAnEncryptedImportLoadsLibcrypto() throws {
        let sandbox = try PrefsSandbox()
        try sandbox.write(Array(Self.types.utf8), to: "types.json")
        let types = " --from mmkv --types '\(sandbox.path("types.json"))'"
        let runs = [
            ("a plain import", "prefs import ui '\(Self.fixtures)/plain/ui'" + types, false),
            ("a read", "prefs get ui theme", false),
            (
                "an encrypted import", "prefs import sec '\(Self.fixtures)/encrypted/secure' --crypt-key-fd 3" + types,
                true
            ),
        ]
        for (what, arguments, loads) in runs {
            let run = try Self.runWithKey(
                sandbox, arguments, key: "fixture-key-0123", environment: ["LD_DEBUG": "libs"])
            #expect(run.status == 0, "\(what): \(run)")
            #expect(run.standardError.contains("find library=libsodium"), "\(what): no account of the libraries")
            #expect(run.standardError.contains("libcrypto.so") == loads, "\(what): libcrypto loaded: \(!loads)")
        }
        #expect(try sandbox.succeed(["prefs", "get", "sec", "café"]).lines == ["au lait"])
    }

    @Test func aDamagedFileExits65AndCreatesNothingUnlessSalvaging() throws {
        let sandbox = try PrefsSandbox()
        var bytes = try readBytesAt(Self.fixtures + "/plain/ui")
        bytes[40] ^= 0x20
        try sandbox.write(bytes, to: "ui")
        try sandbox.write(try readBytesAt(Self.fixtures + "/plain/ui.crc"), to: "ui.crc")
        let arguments = ["prefs", "import", "st", sandbox.path("ui"), "--from", "mmkv"]
        let refused = try sandbox.run(arguments)
        #expect(refused.status == 65 && refused.standardError.contains("CRC-32"), "\(refused)")
        #expect(refused.standardError.contains(sandbox.path("ui")), "\(refused)")
        #expect(!sandbox.files.contains("st.prefs"), "a refused import created the store")
        let salvaged = try jsonObject(try sandbox.succeed(["--json"] + arguments + ["--salvage"]).standardOutput)
        #expect(number(salvaged["unreadableFrom"]) == 455, "\(salvaged)")
        let expiring = try sandbox.succeed(
            ["prefs", "import", "ex", Self.fixtures + "/expiring/expiring", "--from", "mmkv"])
        #expect(expiring.lines.first?.contains("skipped 1 expired: session.token") == true, "\(expiring)")
        #expect(try sandbox.run(["prefs", "import", "ex", "-", "--from", "mmkv"]).status == 64)
        #expect(try sandbox.run(["prefs", "import", "ex", "x", "--from", "json", "--salvage"]).status == 64)
    }

    /// 20 SIGKILLs spread over an import of a 3,000-key MMKV store (written here as MMKV writes one) into a store
    /// that holds a key of its own: afterwards the store holds its key and none or all of the MMKV keys, and the
    /// MMKV files are byte for byte what they were.
    @Test func aKillAtAnyInstantLeavesTheOldStoreOrTheWholeImport() throws {
        let sandbox = try PrefsSandbox()
        let keys = (0..<3000).map { "k\($0)" }
        var writer = MMKVWriter()
        writer.records = keys.map { (Array($0.utf8), MMKVWriter.string("v-\($0)")) }
        let (data, meta) = writer.files
        try sandbox.write(data, to: "big")
        try sandbox.write(meta, to: "big.crc")
        try sandbox.write(Array(#"{"*": "string"}"#.utf8), to: "types.json")
        let outcomes = try sandbox.killImports("big --from mmkv --types types.json", keys: keys) { round throws in
            #expect(try sandbox.bytes("big") == data && sandbox.bytes("big.crc") == meta, "round \(round): source")
        }
        print("prefs import --from mmkv kills: \(outcomes.sorted { $0.key < $1.key })")
    }
}

/// The bytes of the file at `path`.
func readBytesAt(_ path: String) throws -> [UInt8] { Array(try Data(contentsOf: URL(fileURLWithPath: path))) }

/// Progress lines of a long import (issue 37): on stderr when it is a terminal, never otherwise.
@Suite struct ImportProgressTests {
    @Test func progressLinesGoToATerminalOnly() throws {
        let sandbox = try PrefsSandbox()
        let text = "{" + (0..<5000).map { "\"k\($0)\": \($0)" }.joined(separator: ",") + "}"
        try sandbox.write(Array(text.utf8), to: "big.json")
        // VAULTCTL_PROGRESS_INTERVAL_MS=0: the first line at once, so the test sees one however fast the import.
        let environment = [
            "V": PrefsSandbox.vaultctl, "D": sandbox.directory, "VAULTCTL_PROGRESS_INTERVAL_MS": "0",
            "XDG_DATA_HOME": sandbox.directory,
        ]
        let command = #""$V" --dir "$D" prefs import "$S" "$D/big.json" --from json"#
        // script(1) runs the command on a pseudo-terminal: stdout and stderr both reach it.
        let terminal = try ChildProcess.run(
            "/usr/bin/script", ["-qec", command, "/dev/null"], environment: environment.merging(["S": "tty"]) { $1 })
        #expect(terminal.status == 0, "\(terminal)")
        #expect(
            terminal.standardOutput.contains(
                "vaultctl: importing \(sandbox.path("big.json")) into store tty: checking"),
            "\(terminal)")
        let piped = try ChildProcess.run(
            "/bin/sh", ["-c", command], environment: environment.merging(["S": "pipe"]) { $1 })
        #expect(
            piped.status == 0 && piped.standardError.isEmpty, "no progress line when stderr is no terminal: \(piped)")
        #expect(try sandbox.succeed(["prefs", "get", "tty", "k4999"]).lines == ["4999"])
    }
}
