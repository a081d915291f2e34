import Foundation
import TestSupport
import Testing

/// `vaultctl prefs verify/repair` and every other command on damaged stores: real bytes flipped or cut off in
/// real files, and the files compared byte for byte before and after.
@Suite struct PrefsDamageTests {
    @Test func verifyOnACleanStoreExits0AndChangesNothing() throws {
        let sandbox = try PrefsSandbox()
        try sandbox.makeStore()
        let before = try sandbox.snapshot()

        let plain = try sandbox.succeed(["prefs", "verify", "ui"])
        #expect(plain.lines == ["store ui is clean: 3 records verified, \(sandbox.path("ui.prefs"))"], "\(plain)")
        #expect(plain.standardError.isEmpty)

        let json = try jsonObject(try sandbox.succeed(["--json", "prefs", "verify", "ui"]).standardOutput)
        #expect(json["clean"] as? Bool == true)
        #expect(json["sealed"] as? Bool == false)
        #expect(number(json["recordsVerified"]) == 3)
        #expect((json["damage"] as? [Any])?.isEmpty == true)
        #expect(try sandbox.snapshot() == before)
    }

    @Test func verifyOnAFlippedByteExits65NamingTheDamagedRecordAndChangesNothing() throws {
        let sandbox = try PrefsSandbox()
        try sandbox.makeDamagedStore()
        let before = try sandbox.snapshot()

        let plain = try sandbox.run(["prefs", "verify", "ui"])
        #expect(plain.status == 65, "\(plain)")
        #expect(
            plain.lines == [
                "store ui is DAMAGED: 1 damaged range, 1 record lost, 2 records verified, \(sandbox.path("ui.prefs"))",
                "OFFSET  LENGTH  RECORDS  KEYS  REASON",
                "4264    48      1        -     checksum mismatch",
            ], "\(plain)")
        #expect(plain.standardError.contains("prefs repair ui"), "\(plain)")

        let json = try sandbox.run(["--json", "prefs", "verify", "ui"])
        #expect(json.status == 65, "\(json)")
        #expect(json.standardError.isEmpty)
        let report = try jsonObject(json.standardOutput)
        #expect(report["clean"] as? Bool == false)
        #expect(number(report["recordsVerified"]) == 2)
        let damage = try #require(report["damage"] as? [[String: Any]])
        #expect(damage.count == 1)
        #expect(number(damage.first?["offset"]) == Int64(PrefsSandbox.firstRecordOffset))
        #expect(number(damage.first?["length"]) == Int64(PrefsSandbox.themeRecordLength))
        #expect(number(damage.first?["records"]) == 1)
        // The record failed its check: the bytes where its key lies are not a key anyone wrote (issue 35).
        #expect(damage.first?["keys"] as? [String] == [])
        #expect(damage.first?["reason"] as? String == "checksum mismatch")

        #expect(try sandbox.snapshot() == before, "verify changed a file")
    }

    @Test func verifyOnATruncatedFileExits65AndChangesNothing() throws {
        let sandbox = try PrefsSandbox()
        try sandbox.makeStore()
        // Cut the file in the middle of the second record: the log end now points past the end of the file.
        let data = try sandbox.bytes("ui.prefs")
        try sandbox.write(Array(data[0..<(PrefsSandbox.firstRecordOffset + PrefsSandbox.themeRecordLength + 20)]), to: "ui.prefs")
        let before = try sandbox.snapshot()

        let json = try sandbox.run(["--json", "prefs", "verify", "ui"])
        #expect(json.status == 65, "\(json)")
        let report = try jsonObject(json.standardOutput)
        #expect(report["clean"] as? Bool == false)
        #expect(number(report["recordsVerified"]) == 1)
        let damage = try #require(report["damage"] as? [[String: Any]])
        #expect(damage.contains { ($0["reason"] as? String)?.contains("ends before the log end") == true }, "\(report)")
        #expect(number(damage.first?["offset"]) == Int64(PrefsSandbox.firstRecordOffset + PrefsSandbox.themeRecordLength))

        let plain = try sandbox.run(["prefs", "verify", "ui"])
        #expect(plain.status == 65, "\(plain)")
        #expect(try sandbox.snapshot() == before)
    }

    static let commandsOnADamagedStore: [[String]] = [
        ["get", "ui", "width"], ["list", "ui"], ["stats", "ui"], ["export", "ui"], ["compact", "ui"],
        ["set", "ui", "width", "300", "--type", "int"], ["delete", "ui", "width"], ["import", "ui", "-"],
    ]

    @Test(arguments: commandsOnADamagedStore)
    func aDamagedStoreAnswers65PointingAtRepairAndStaysByteIdentical(_ command: [String]) throws {
        let sandbox = try PrefsSandbox()
        try sandbox.makeStore("other")
        let document = Data(try sandbox.succeed(["prefs", "export", "other"]).standardOutput.utf8)
        try sandbox.makeDamagedStore()
        let before = try sandbox.snapshot()

        let plain = try sandbox.run(["prefs"] + command, input: document)
        #expect(plain.status == 65, "\(plain)")
        #expect(plain.standardOutput.isEmpty)
        #expect(plain.standardError.contains("store \"ui\" (\(sandbox.path("ui.prefs"))) is damaged"), "\(plain)")
        #expect(plain.standardError.contains("prefs repair ui"), "\(plain)")
        // The damaged record failed its check: its key bytes are not a key anyone wrote (issue 35).
        #expect(!plain.standardError.contains("keys:"), "\(plain)")
        #expect(!plain.standardError.contains("dark"), "a value in a message: \(plain)")

        let json = try sandbox.run(["--json", "prefs"] + command, input: document)
        #expect(json.status == 65, "\(json)")
        let error = try #require(try jsonObject(json.standardOutput)["error"] as? [String: Any])
        #expect(error["code"] as? String == "corrupted")

        #expect(try sandbox.snapshot() == before, "no salvage, no quarantine copy, no change")
    }

    @Test func repairSalvagesQuarantinesTheOriginalReadOnlyAndThenVerifies() throws {
        let sandbox = try PrefsSandbox()
        try sandbox.makeDamagedStore()
        let damaged = try sandbox.bytes("ui.prefs")

        let result = try sandbox.succeed(["--json", "prefs", "repair", "ui"])
        let report = try jsonObject(result.standardOutput)
        #expect(report["clean"] as? Bool == false)
        #expect(report["repaired"] as? Bool == true)
        #expect(number(report["kept"]) == 2)
        #expect(number(report["lost"]) == 1)
        #expect(report["lostKeys"] as? [String] == [], "a record that failed its check names no key (issue 35)")
        let quarantine = try #require(report["quarantine"] as? String)
        let name = URL(fileURLWithPath: quarantine).lastPathComponent
        #expect(quarantine == sandbox.path(name))
        #expect(name.hasPrefix("ui.prefs.corrupt-"))
        #expect(sandbox.files == ["ui.prefs", name, "ui.prefs.lock"].sorted())
        #expect(sandbox.mode(name) == 0o400)
        #expect(try sandbox.bytes(name) == damaged, "the quarantine copy is the damaged original, byte for byte")

        #expect(try sandbox.succeed(["prefs", "verify", "ui"]).lines.first?.hasPrefix("store ui is clean") == true)
        #expect(try sandbox.succeed(["prefs", "get", "ui", "width"]).standardOutput == "240\n")
        #expect(try sandbox.run(["prefs", "get", "ui", "theme"]).status == 66)
    }

    /// Issue 40, point 8: repair names a key as lost only when its value is gone. `prefs import` writes theme and
    /// accent in one transaction, a later `prefs set` writes theme again, and one flipped bit in the import's commit
    /// record drops both of its writes: accent is lost, theme holds its newest value (it was named lost before).
    @Test func repairNamesOnlyTheKeysWhoseValueIsGone() throws {
        func damagedStore() throws -> PrefsSandbox {
            let sandbox = try PrefsSandbox()
            try sandbox.succeed(["prefs", "set", "ui", "width", "240", "--type", "int"])
            try sandbox.succeed(
                ["prefs", "import", "ui", "-", "--from", "json", "--replace"],
                input: Data(#"{"theme": "dark", "accent": "blue", "width": 300}"#.utf8))
            try sandbox.succeed(["prefs", "set", "ui", "theme", "light"])
            var data = try sandbox.bytes("ui.prefs")
            let commit = try #require(VaultSandbox.records(data).last { $0.kind == 4 })
            data[commit.offset + 32] ^= 0x01
            try sandbox.write(data, to: "ui.prefs")
            return sandbox
        }
        let sandbox = try damagedStore()
        let result = try sandbox.succeed(["--json", "prefs", "repair", "ui"])
        let report = try jsonObject(result.standardOutput)
        #expect(report["lostKeys"] as? [String] == ["accent"], "\(result)")
        #expect(report["revertedKeys"] as? [String] == ["width"], "\(result)")
        #expect(try sandbox.succeed(["prefs", "get", "ui", "theme"]).standardOutput == "light\n")
        #expect(try sandbox.succeed(["prefs", "get", "ui", "width"]).standardOutput == "240\n")
        #expect(try sandbox.run(["prefs", "get", "ui", "accent"]).status == 66)

        let plain = try damagedStore().succeed(["prefs", "repair", "ui"])
        #expect(
            plain.lines.first?.hasSuffix(
                "(keys: accent; reverted to an older value: width; replaced by a later write: theme)") == true,
            "\(plain)")
    }

    @Test func repairReportsKeptAndLostInPlainText() throws {
        let sandbox = try PrefsSandbox()
        try sandbox.makeDamagedStore()
        let result = try sandbox.succeed(["prefs", "repair", "ui"])
        let quarantine = try #require(sandbox.files.first { $0.hasPrefix("ui.prefs.corrupt-") })
        #expect(
            result.lines.first
                == "repaired store ui (\(sandbox.path("ui.prefs"))): kept 2 records, lost 1")
        #expect(result.lines.contains("damaged original kept at \(sandbox.path(quarantine))"), "\(result)")
    }

    @Test func repairOnACleanStoreSaysSoAndChangesNothing() throws {
        let sandbox = try PrefsSandbox()
        try sandbox.makeStore()
        let before = try sandbox.snapshot()

        let plain = try sandbox.succeed(["prefs", "repair", "ui"])
        #expect(plain.lines == ["store ui is clean; nothing was changed (\(sandbox.path("ui.prefs")))"])
        let json = try jsonObject(try sandbox.succeed(["--json", "prefs", "repair", "ui"]).standardOutput)
        #expect(json["clean"] as? Bool == true)
        #expect(json["repaired"] as? Bool == false)
        #expect(json["quarantine"] is NSNull)
        #expect(try sandbox.snapshot() == before)
    }

    /// Issue 15: a damaged header page is read from its copy. Every command but repair answers 65 pointing at
    /// repair and leaves the file byte-identical; repair keeps every record.
    @Test func aDamagedHeaderPageIsRepairedFromItsCopyKeepingEveryRecord() throws {
        let sandbox = try PrefsSandbox()
        try sandbox.makeStore()
        var data = try sandbox.bytes("ui.prefs")
        data[20] ^= 0xFF  // inside the store UUID: the header checksum no longer matches
        try sandbox.write(data, to: "ui.prefs")
        let before = try sandbox.snapshot()

        for command in [["verify", "ui"], ["get", "ui", "width"], ["set", "ui", "a", "b"]] {
            let result = try sandbox.run(["prefs"] + command)
            #expect(result.status == 65, "\(command): \(result)")
            #expect(result.standardError.contains("prefs repair ui"), "\(result)")
        }
        let verify = try jsonObject(try sandbox.run(["--json", "prefs", "verify", "ui"]).standardOutput)
        let damage = try #require(verify["damage"] as? [[String: Any]])
        #expect(damage.count == 1 && number(damage.first?["offset"]) == 0 && number(damage.first?["records"]) == 0)
        #expect(number(verify["recordsVerified"]) == 3, "\(verify)")
        #expect(try sandbox.snapshot() == before)

        let repair = try sandbox.succeed(["prefs", "repair", "ui"])
        #expect(repair.lines.first == "repaired store ui (\(sandbox.path("ui.prefs"))): kept 3 records, lost 0", "\(repair)")
        #expect(try sandbox.succeed(["prefs", "get", "ui", "width"]).standardOutput == "240\n")
        try sandbox.succeed(["prefs", "verify", "ui"])
    }

    /// Where no copy of the header verifies, every command but repair answers 65 naming the file and pointing at
    /// repair, and leaves it byte-identical; repair rebuilds the store from the records of its body.
    @Test func anUnreadableHeaderIsCorruptedEverywhereButRepairRebuildsIt() throws {
        let sandbox = try PrefsSandbox()
        try sandbox.makeStore()
        var data = try sandbox.bytes("ui.prefs")
        data[20] ^= 0xFF  // inside the store UUID: the header checksum no longer matches
        data[4096 + 60] ^= 0x01  // inside the header copy: its checksum no longer matches either
        try sandbox.write(data, to: "ui.prefs")
        let before = try sandbox.snapshot()

        for command in [["verify", "ui"], ["get", "ui", "width"], ["set", "ui", "a", "b"]] {
            let result = try sandbox.run(["prefs"] + command)
            #expect(result.status == 65, "\(command): \(result)")
            #expect(result.standardError.contains("the store header cannot be read"), "\(result)")
            #expect(result.standardError.contains(sandbox.path("ui.prefs")), "\(result)")
            #expect(result.standardError.contains("prefs repair ui` rebuilds it"), "\(result)")
        }
        #expect(try sandbox.snapshot() == before)

        let repair = try jsonObject(try sandbox.succeed(["--json", "prefs", "repair", "ui"]).standardOutput)
        #expect(repair["repaired"] as? Bool == true && number(repair["kept"]) == 3, "\(repair)")
        let quarantine = try #require(repair["quarantine"] as? String)
        #expect(try Array(Data(contentsOf: URL(fileURLWithPath: quarantine))) == data)
        #expect(try sandbox.succeed(["prefs", "get", "ui", "theme"]).standardOutput == "dark\n")
        try sandbox.succeed(["prefs", "verify", "ui"])
    }

    /// A file that is not a store at all: repair makes an empty store of it (kept 0), the original beside it.
    @Test func repairOfAFileThatIsNotAStoreEndsInAnEmptyStore() throws {
        let sandbox = try PrefsSandbox()
        let junk = Array("not a store at all".utf8)
        try sandbox.write(junk, to: "ui.prefs")
        #expect(chmod(sandbox.path("ui.prefs"), 0o600) == 0)  // the user's own file (another mode is refused)
        let repair = try jsonObject(try sandbox.succeed(["--json", "prefs", "repair", "ui"]).standardOutput)
        #expect(repair["repaired"] as? Bool == true && number(repair["kept"]) == 0, "\(repair)")
        let quarantine = try #require(repair["quarantine"] as? String)
        #expect(try Array(Data(contentsOf: URL(fileURLWithPath: quarantine))) == junk)
        let list = try jsonObject(try sandbox.succeed(["--json", "prefs", "list", "ui"]).standardOutput)
        #expect((list["entries"] as? [Any])?.isEmpty == true, "\(list)")
    }

    @Test func aSealedStoreAnswersEncryptedWithoutItsKey() throws {
        let sandbox = try PrefsSandbox()
        try sandbox.makeStore()
        try sandbox.markSealed("ui")
        let before = try sandbox.snapshot()

        let get = try sandbox.run(["--json", "prefs", "get", "ui", "width"])
        #expect(get.status == 78, "\(get)")
        let error = try #require(try jsonObject(get.standardOutput)["error"] as? [String: Any])
        #expect(error["code"] as? String == "encrypted")
        #expect((error["message"] as? String)?.contains(sandbox.path("ui.prefs")) == true)

        // verify checks a sealed store's checksums without a key.
        let verify = try jsonObject(try sandbox.succeed(["--json", "prefs", "verify", "ui"]).standardOutput)
        #expect(verify["sealed"] as? Bool == true)
        #expect(verify["clean"] as? Bool == true)
        #expect(try sandbox.snapshot() == before)
    }
}
