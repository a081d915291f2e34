import Foundation
import TestSupport
import Testing

/// `vaultctl prefs quarantine ls|prune` (issue 40, point 8): the copies recoveries keep, listed oldest first and
/// removed with `--keep N`, never without `--yes`, never touching a store.
@Suite struct PrefsQuarantineTests {
    /// Quarantine copies of `ui` (three, one a second copy in the same second) and of `st` (one), with the bytes
    /// of a store; and a store whose id looks like a quarantine copy of `ui`, which is no copy.
    static func sandboxWithCopies() throws -> PrefsSandbox {
        let sandbox = try PrefsSandbox()
        try sandbox.makeStore("ui")
        try sandbox.makeStore("st")
        try sandbox.makeStore("ui.prefs.corrupt-20260101T000000Z")
        let bytes = try sandbox.bytes("ui.prefs")
        for name in [
            "ui.prefs.corrupt-20261128T101010Z-1", "ui.prefs.corrupt-20261127T090000Z",
            "ui.prefs.corrupt-20261128T101010Z", "st.prefs.corrupt-20261126T000000Z",
        ] {
            try sandbox.write(bytes, to: name)
        }
        return sandbox
    }

    @Test func lsListsCopiesOldestFirst() throws {
        let sandbox = try Self.sandboxWithCopies()
        let before = try sandbox.snapshot()
        let all = try jsonObject(sandbox.succeed(["--json", "prefs", "quarantine", "ls"]).standardOutput)
        let copies = try #require(all["copies"] as? [[String: Any]])
        #expect(
            copies.map { ($0["path"] as? String ?? "").split(separator: "/").last.map(String.init) ?? "" } == [
                "st.prefs.corrupt-20261126T000000Z", "ui.prefs.corrupt-20261127T090000Z",
                "ui.prefs.corrupt-20261128T101010Z", "ui.prefs.corrupt-20261128T101010Z-1",
            ])
        #expect(copies.map { $0["store"] as? String } == ["st", "ui", "ui", "ui"])
        #expect(copies.allSatisfy { number($0["fileBytes"]) == Int64(before["ui.prefs"]?.count ?? -1) })
        let ui = try sandbox.succeed(["prefs", "quarantine", "ls", "ui"])
        #expect(ui.lines.count == 4 && ui.lines[0].hasPrefix("STORE"), "\(ui)")
        #expect(!ui.standardOutput.contains("st.prefs"), "\(ui)")
        #expect(try sandbox.snapshot() == before, "ls changes nothing")
    }

    @Test func pruneKeepsTheNewestOfEachStoreAndNeedsYes() throws {
        let sandbox = try Self.sandboxWithCopies()
        let before = try sandbox.snapshot()
        let refused = try sandbox.run(["prefs", "quarantine", "prune", "--keep", "1"])
        #expect(refused.status == 64, "\(refused)")
        #expect(try sandbox.snapshot() == before, "nothing removed without --yes")
        let negative = try sandbox.run(["prefs", "quarantine", "prune", "--keep", "-1", "--yes"])
        #expect(negative.status == 64, "\(negative)")

        let pruned = try jsonObject(
            sandbox.succeed(["--json", "prefs", "quarantine", "prune", "--keep", "1", "--yes"]).standardOutput)
        #expect(
            (pruned["removed"] as? [String]) == [
                sandbox.path("ui.prefs.corrupt-20261127T090000Z"), sandbox.path("ui.prefs.corrupt-20261128T101010Z"),
            ])
        #expect(
            (pruned["kept"] as? [String])
                == [sandbox.path("st.prefs.corrupt-20261126T000000Z"), sandbox.path("ui.prefs.corrupt-20261128T101010Z-1")])
        // The stores, the look-alike store included, are byte for byte as they were.
        let after = try sandbox.snapshot()
        for name in ["ui.prefs", "st.prefs", "ui.prefs.corrupt-20260101T000000Z.prefs"] {
            #expect(after[name] == before[name], "\(name)")
        }

        try sandbox.succeed(["prefs", "quarantine", "prune", "st", "--yes"])
        #expect(!sandbox.files.contains("st.prefs.corrupt-20261126T000000Z"))
        #expect(sandbox.files.contains("ui.prefs.corrupt-20261128T101010Z-1"), "another store's copy is kept")
    }

    @Test func aRealRecoverysCopyIsListedAndAMissingDirectoryIs66() throws {
        let sandbox = try PrefsSandbox()
        try sandbox.makeDamagedStore()
        try sandbox.succeed(["prefs", "repair", "ui"])
        let listed = try sandbox.succeed(["prefs", "quarantine", "ls"])
        #expect(listed.lines.count == 2 && listed.lines[1].hasPrefix("ui "), "\(listed)")
        let missing = try ChildProcess.run(
            PrefsSandbox.vaultctl, ["--dir", sandbox.path("nowhere"), "prefs", "quarantine", "ls"])
        #expect(missing.status == 66, "\(missing)")
        let badID = try sandbox.run(["prefs", "quarantine", "ls", "../ui"])
        #expect(badID.status == 64, "\(badID)")
    }
}
