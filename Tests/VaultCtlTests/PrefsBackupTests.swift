import Foundation
import TestSupport
import Testing

/// `vaultctl prefs backup` and `prefs restore`: the atomic way to put a backup in place under running apps (issue
/// 20), real files compared byte for byte.
@Suite struct PrefsBackupTests {
    @Test func backupThenRestoreBringsTheStoreBackAndADamagedBackupChangesNothing() throws {
        let sandbox = try PrefsSandbox()
        try sandbox.makeStore()
        let backup = sandbox.path("ui-backup.prefs")
        let made = try jsonObject(try sandbox.succeed(["--json", "prefs", "backup", "ui", backup]).standardOutput)
        #expect(made["entries"] as? Int == 3 && made["backup"] as? String == backup, "\(made)")
        try sandbox.succeed(["prefs", "set", "ui", "theme", "light"])
        try sandbox.succeed(["prefs", "delete", "ui", "width"])

        let restored = try sandbox.succeed(["prefs", "restore", "ui", backup])
        #expect(restored.lines.first?.hasPrefix("restored store ui from \(backup): 3 entries") == true, "\(restored)")
        #expect(try sandbox.succeed(["prefs", "get", "ui", "theme"]).standardOutput == "dark\n")
        #expect(try sandbox.succeed(["prefs", "get", "ui", "width"]).standardOutput == "240\n")

        // A backup with a flipped byte in a record: refused with 64, the store untouched.
        var damaged = try sandbox.bytes("ui-backup.prefs")
        damaged[PrefsSandbox.themeValueOffset] ^= 0x01
        try sandbox.write(damaged, to: "ui-backup.prefs")
        let before = try sandbox.snapshot()
        let refused = try sandbox.run(["--json", "prefs", "restore", "ui", backup])
        #expect(refused.status == 64, "\(refused)")
        #expect(try sandbox.snapshot() == before)
        let missing = try sandbox.run(["prefs", "restore", "ui", sandbox.path("absent.prefs")])
        #expect(missing.status == 66, "\(missing)")
        // Into a store that does not exist: refused, and nothing is left behind.
        let intoNew = try sandbox.run(["prefs", "restore", "fresh", backup])
        #expect(intoNew.status == 64, "\(intoNew)")
        #expect(try sandbox.snapshot() == before)
        // Never over the store's own data file.
        let overItself = try sandbox.run(["prefs", "backup", "ui", sandbox.path("ui.prefs")])
        #expect(overItself.status == 64, "\(overItself)")
        #expect(try sandbox.snapshot() == before)
    }
}
