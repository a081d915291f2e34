import Foundation
import TestSupport
import Testing

/// `vaultctl prefs export/import/wipe/ls/stats/compact`: whole stores, as a user moves, removes and surveys
/// them.
@Suite struct PrefsLifecycleTests {
    /// A store with every type and an expiring entry.
    static func makeRichStore(_ sandbox: PrefsSandbox) throws {
        try sandbox.makeStore()
        try sandbox.succeed(["prefs", "set", "ui", "zoom", "-0.0", "--type", "double"])
        try sandbox.succeed(["prefs", "set", "ui", "layout", #"{"columns":3}"#, "--type", "json"])
        try sandbox.succeed(["prefs", "set", "ui", "avatar", "AAEC/w==", "--type", "data"])
        try sandbox.succeed(["prefs", "set", "ui", "recent", #"["a","b"]"#, "--type", "strings"])
        let export = try sandbox.succeed(["prefs", "export", "ui"]).standardOutput
        let expiring = export.replacingOccurrences(
            of: #""key" : "width","#, with: #""expiresAt" : 4102444800000, "key" : "width","#)
        try sandbox.succeed(["prefs", "import", "ui", "-"], input: Data(expiring.utf8))
    }

    @Test func exportWipeImportExportIsByteIdentical() throws {
        let sandbox = try PrefsSandbox()
        try Self.makeRichStore(sandbox)
        let first = try sandbox.succeed(["prefs", "export", "ui"]).standardOutput
        #expect(first.contains("4102444800000") && first.contains("\"format\" : \"prefskv-export\""))
        let file = sandbox.path("ui-export.json")
        try Data(first.utf8).write(to: URL(fileURLWithPath: file))

        try sandbox.succeed(["prefs", "wipe", "ui", "--yes"])
        #expect(sandbox.files == ["ui-export.json"])
        let imported = try sandbox.succeed(["prefs", "import", "ui", file])
        #expect(imported.lines == ["imported 7 entries into store ui (\(sandbox.path("ui.prefs")))"], "\(imported)")
        #expect(try sandbox.succeed(["prefs", "export", "ui"]).standardOutput == first)

        // From standard input, into a store that already holds other keys: it holds exactly the document after.
        try sandbox.succeed(["prefs", "set", "ui", "stray", "x"])
        try sandbox.succeed(["prefs", "import", "ui", "-"], input: Data(first.utf8))
        #expect(try sandbox.succeed(["prefs", "export", "ui"]).standardOutput == first)
        // --json does not change the export document.
        #expect(try sandbox.succeed(["--json", "prefs", "export", "ui"]).standardOutput == first)
    }

    static let malformedDocuments: [String] = [
        "not json at all",
        #"{"format" : "something-else", "version" : 1, "store" : "ui", "entries" : []}"#,
        #"{"format" : "prefskv-export", "version" : 2, "store" : "ui", "entries" : []}"#,
        #"{"format" : "prefskv-export", "version" : 1, "store" : "ui", "entries" : [{"key" : "a", "type" : "bytes", "value" : "%%%"}]}"#,
        #"{"format" : "prefskv-export", "version" : 1, "store" : "ui", "entries" : [{"key" : "", "type" : "string", "value" : "x"}]}"#,
        #"{"format" : "prefskv-export", "version" : 1, "store" : "ui", "entries" : [{"key" : "a", "type" : "blob", "value" : "x"}]}"#,
    ]

    @Test(arguments: malformedDocuments)
    func importOfAMalformedDocumentExits64AndChangesOrCreatesNothing(_ document: String) throws {
        let sandbox = try PrefsSandbox()
        try sandbox.makeStore()
        let before = try sandbox.snapshot()

        let existing = try sandbox.run(["prefs", "import", "ui", "-"], input: Data(document.utf8))
        #expect(existing.status == 64, "\(existing)")
        #expect(existing.standardError.contains("cannot import standard input into store \"ui\""), "\(existing)")
        let absent = try sandbox.run(["--json", "prefs", "import", "new", "-"], input: Data(document.utf8))
        #expect(absent.status == 64, "\(absent)")
        let error = try #require(try jsonObject(absent.standardOutput)["error"] as? [String: Any])
        // An empty key is refused as invalidKey, everything else as invalidInput: both exit 64.
        #expect(["invalidInput", "invalidKey"].contains(error["code"] as? String ?? ""), "\(absent)")

        #expect(try sandbox.snapshot() == before, "nothing changed, and no store \"new\" was created")
    }

    @Test func importOfAMissingFileExits66() throws {
        let sandbox = try PrefsSandbox()
        let result = try sandbox.run(["prefs", "import", "ui", sandbox.path("nowhere.json")])
        #expect(result.status == 66, "\(result)")
        #expect(sandbox.files.isEmpty)
    }

    @Test func wipeWithoutYesIsRefusedAndRemovesNothing() throws {
        let sandbox = try PrefsSandbox()
        try sandbox.makeDamagedStore()
        try sandbox.succeed(["prefs", "repair", "ui"])
        let before = try sandbox.snapshot()
        #expect(before.count == 3)

        let plain = try sandbox.run(["prefs", "wipe", "ui"])
        #expect(plain.status == 64, "\(plain)")
        #expect(plain.standardError.contains("without --yes"), "\(plain)")
        let json = try sandbox.run(["--json", "prefs", "wipe", "ui"])
        #expect(json.status == 64, "\(json)")
        #expect(try jsonObject(json.standardOutput)["error"] != nil)
        #expect(try sandbox.snapshot() == before)
    }

    @Test func wipeWithYesRemovesDataLockTemporaryAndQuarantineFilesOfThatStoreOnly() throws {
        let sandbox = try PrefsSandbox()
        try sandbox.makeDamagedStore()
        try sandbox.succeed(["prefs", "repair", "ui"])
        try sandbox.write([1, 2, 3], to: "ui.prefs.tmp")
        try sandbox.makeStore("ui2")
        let quarantine = try #require(sandbox.files.first { $0.hasPrefix("ui.prefs.corrupt-") })

        let result = try sandbox.succeed(["--json", "prefs", "wipe", "ui", "--yes"])
        let report = try jsonObject(result.standardOutput)
        #expect(
            report["removed"] as? [String] == [
                sandbox.path("ui.prefs"), sandbox.path("ui.prefs.tmp"), sandbox.path(quarantine),
                sandbox.path("ui.prefs.lock"),
            ])
        #expect(report["lockKept"] as? Bool == false)
        #expect(sandbox.files == ["ui2.prefs", "ui2.prefs.lock"])
        #expect(try sandbox.succeed(["prefs", "get", "ui2", "theme"]).standardOutput == "dark\n")
        // Wiped means gone: reading answers 66, and wiping again too.
        #expect(try sandbox.run(["prefs", "get", "ui", "theme"]).status == 66)
        #expect(try sandbox.run(["prefs", "wipe", "ui", "--yes"]).status == 66)
    }

    @Test func wipeWhileAnotherProcessHasTheStoreOpenKeepsOnlyItsLockFile() throws {
        let sandbox = try PrefsSandbox()
        try sandbox.makeStore()
        // The helper opens the store and waits; wipe runs while it holds it open.
        let script = """
            coproc HOLDER { exec "$HELPER" prefs-hold "$DIR" ui multi; }
            read -r line <&"${HOLDER[0]}"
            echo "holder: $line"
            "$VAULTCTL" --dir "$DIR" prefs wipe ui --yes
            echo "exit $?"
            kill "$HOLDER_PID"
            """
        let result = try ChildProcess.bash(
            script,
            environment: [
                "HELPER": BuildProducts.executable("vault-test-helper"), "VAULTCTL": PrefsSandbox.vaultctl,
                "DIR": sandbox.directory,
            ])
        #expect(result.lines.first == "holder: open", "\(result)")
        #expect(result.lines.last == "exit 0", "\(result)")
        #expect(result.lines.contains("wiped store ui: removed 1 file"), "\(result)")
        #expect(result.standardError.contains("another process has store \"ui\" open"), "\(result)")
        #expect(sandbox.files == ["ui.prefs.lock"])
    }

    @Test func wipeWhileAProcessHoldsTheStoreExclusivelyExits75AndRemovesNothing() throws {
        let sandbox = try PrefsSandbox()
        try sandbox.makeStore()
        let before = try sandbox.snapshot()
        let script = """
            coproc HOLDER { exec "$HELPER" prefs-hold "$DIR" ui single; }
            read -r line <&"${HOLDER[0]}"
            echo "holder: $line"
            "$VAULTCTL" --dir "$DIR" --json prefs wipe ui --yes
            echo "exit $?"
            kill "$HOLDER_PID"
            """
        let result = try ChildProcess.bash(
            script,
            environment: [
                "HELPER": BuildProducts.executable("vault-test-helper"), "VAULTCTL": PrefsSandbox.vaultctl,
                "DIR": sandbox.directory,
            ])
        #expect(result.lines.first == "holder: open", "\(result)")
        #expect(result.lines.last == "exit 75", "\(result)")
        #expect(result.standardOutput.contains(#""code" : "busy""#), "\(result)")
        #expect(try sandbox.snapshot() == before)
    }

    @Test func lsShowsEachStoresSizeRecordsHealthAndQuarantineCopies() throws {
        let sandbox = try PrefsSandbox()
        try sandbox.makeStore("clean")
        try sandbox.makeDamagedStore("damaged")
        try sandbox.makeDamagedStore("repaired")
        try sandbox.succeed(["prefs", "repair", "repaired"])
        try sandbox.makeStore("sealed")
        try sandbox.markSealed("sealed")
        try sandbox.write(Array("not a store".utf8), to: "garbage.prefs")
        let before = try sandbox.snapshot()

        let plain = try sandbox.succeed(["prefs", "ls"])
        #expect(plain.lines.count == 6, "\(plain)")
        #expect(
            plain.lines.first?.split(separator: " ", omittingEmptySubsequences: true) == [
                "STORE", "SIZE", "RECORDS", "HEALTH",
            ])
        let rows = Dictionary(
            plain.lines.dropFirst().map { line in (String(line.prefix { $0 != " " }), line) },
            uniquingKeysWith: { a, _ in a })
        #expect(rows["clean"]?.hasSuffix("  3        clean") == true, "\(plain)")
        #expect(rows["damaged"]?.hasSuffix("  2        damaged (1 damaged range)") == true, "\(plain)")
        #expect(rows["repaired"]?.hasSuffix("  2        clean, 1 quarantined") == true, "\(plain)")
        #expect(rows["sealed"]?.hasSuffix("  3        encrypted") == true, "\(plain)")
        #expect(rows["garbage"]?.contains("unreadable: notAStore") == true, "\(plain)")

        let json = try jsonObject(try sandbox.succeed(["--json", "prefs", "ls"]).standardOutput)
        #expect(json["directory"] as? String == sandbox.directory)
        let stores = try #require(json["stores"] as? [[String: Any]])
        #expect(stores.map { $0["store"] as? String } == ["clean", "damaged", "garbage", "repaired", "sealed"])
        #expect(stores.map { $0["health"] as? String } == ["clean", "damaged", "unreadable", "clean", "encrypted"])
        #expect(stores.map { number($0["quarantined"]) } == [0, 0, 0, 1, 0])
        #expect(stores.map { number($0["damagedRanges"]) } == [0, 1, 0, 0, 0])
        #expect(stores[2]["records"] is NSNull)
        #expect(number(stores[2]["fileBytes"]) == 11)
        #expect(number(stores[0]["fileBytes"]) == Int64(try sandbox.bytes("clean.prefs").count))

        #expect(try sandbox.snapshot() == before, "ls opens, locks and changes nothing")
    }

    @Test func statsAndCompactReportSizesAndCompactShrinksTheLog() throws {
        let sandbox = try PrefsSandbox()
        for width in 0..<20 { try sandbox.succeed(["prefs", "set", "ui", "width", "\(width)", "--type", "int"]) }
        let before = try jsonObject(try sandbox.succeed(["--json", "prefs", "stats", "ui"]).standardOutput)
        #expect(number(before["keyCount"]) == 1)
        #expect(number(before["recordCount"]) == 20)
        #expect(number(before["logBytes"]) == Int64(20 * 56))
        #expect(number(before["liveBytes"]) == 56)
        #expect((before["garbageRatio"] as? Double).map { abs($0 - 0.95) < 1e-9 } == true, "\(before)")
        #expect(before["lastRecovery"] is NSNull)
        #expect(
            Set(before.keys) == [
                "store", "path", "keyCount", "liveBytes", "logBytes", "fileBytes", "recordCount", "garbageRatio",
                "generation", "lastRecovery",
            ])

        let compact = try jsonObject(try sandbox.succeed(["--json", "prefs", "compact", "ui"]).standardOutput)
        #expect(number(compact["logBytesBefore"]) == Int64(20 * 56))
        #expect(number(compact["logBytesAfter"]) == 56)
        #expect(number(compact["generation"]) == 1)

        let human = try sandbox.succeed(["prefs", "stats", "ui"])
        #expect(human.lines.contains { $0.hasPrefix("records") && $0.hasSuffix(" 1") }, "\(human)")
        #expect(human.lines.contains { $0.hasPrefix("garbage") && $0.hasSuffix(" 0%") }, "\(human)")
        #expect(try sandbox.succeed(["prefs", "get", "ui", "width"]).standardOutput == "19\n")
    }

    /// `--dir` relative to the working directory: `prefs set` creates `<cwd>/<dir>` (not `/<dir>`) and the store
    /// in it, and `prefs get` from the same working directory reads it back. vaultctl runs with its working
    /// directory set to the sandbox (through `sh -c 'cd ...'`; tests never change their own).
    @Test func aRelativeDirIsUnderTheWorkingDirectory() throws {
        let sandbox = try PrefsSandbox()
        let top = "rel-\(UInt32.random(in: 0...UInt32.max))"
        defer { _ = try? FileManager.default.removeItem(atPath: "/" + top) }
        func vaultctl(_ arguments: [String]) throws -> ChildResult {
            let inDirectory = ["-c", "cd \"$1\" && shift && exec \"$@\"", "sh", sandbox.directory]
            return try ChildProcess.run(
                "/bin/sh", inDirectory + [PrefsSandbox.vaultctl] + arguments,
                environment: ["XDG_DATA_HOME": sandbox.path("xdg"), "HOME": sandbox.path("home")])
        }
        // vaultctl creates the last level of --dir only: the first level is there.
        try FileManager.default.createDirectory(atPath: sandbox.path(top), withIntermediateDirectories: false)
        let set = try vaultctl(["--dir", top + "/prefs", "prefs", "set", "ui", "theme", "dark"])
        #expect(set.status == 0 && set.standardOutput.isEmpty && set.standardError.isEmpty, "\(set)")
        #expect(!FileManager.default.fileExists(atPath: "/" + top), "a relative --dir was created under /")
        #expect(sandbox.mode(top + "/prefs") == 0o700)
        #expect(sandbox.mode(top + "/prefs/ui.prefs") == 0o600)
        let get = try vaultctl(["prefs", "get", "ui", "theme", "--dir", top + "/prefs"])
        #expect(get.status == 0 && get.standardOutput == "dark\n", "\(get)")
        let absolute = try ChildProcess.run(
            PrefsSandbox.vaultctl, ["--dir", sandbox.path(top + "/prefs"), "prefs", "get", "ui", "theme"])
        #expect(absolute.status == 0 && absolute.standardOutput == "dark\n", "\(absolute)")
    }

}

/// Issue 14, point 5, through the CLI: in a shared (1777) directory, a store file another user planted with
/// mode 0666 is refused with exit 77 naming it, and the secret never reaches it.
@Suite struct PrefsPlantedFileTests {
    @Test func aPlantedWorldWritableStoreFileExits77AndIsLeftAsItWas() throws {
        try #require(geteuid() == 0, "only root can give a file away (make test runs as root)")
        let source = try PrefsSandbox()
        try source.makeStore()
        let shared = try PrefsSandbox()
        #expect(chmod(shared.directory, 0o1777) == 0)
        let planted = shared.path("ui.prefs")
        try Data(try source.bytes("ui.prefs")).write(to: URL(fileURLWithPath: planted))
        #expect(chown(planted, 65534, 65534) == 0 && chmod(planted, 0o666) == 0)
        let before = try shared.bytes("ui.prefs")
        let result = try shared.run(["prefs", "set", "ui", "token", "s3cret"])
        #expect(result.status == 77, "\(result)")
        #expect(result.standardError.contains(planted) && result.standardError.contains("belongs to uid 65534"))
        #expect(try shared.bytes("ui.prefs") == before)
    }
}
