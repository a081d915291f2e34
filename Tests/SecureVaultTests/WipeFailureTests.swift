import Foundation
import Testing

@testable import SecureVault

/// A wipe whose key delete failed with an unknown outcome (the key store deleted or overwrote the key, and its reply
/// was lost) is a delete that could not be confirmed: the wipe goes on (the file goes, the report says the key may be
/// left, the journal keeps it for the next wipe or rotation). Before, the journal was cleared and the error said
/// nothing changed, while the file was left with a key gone: `keyMissing` at every later open.
@Suite struct WipeFailureTests {
    @Test func aWipeWhoseDeleteAnswerWasLostGoesOnAndSaysTheKeyMayBeLeft() throws {
        let (dir, vault) = try RekeyFailureTests.vaultWithOneItem()
        dir.keys.inject(.init(deletesDoneThenFailed: 1))
        let report = try vault.wipe()
        #expect(!report.removedKey)
        #expect(report.keptKeyReason?.contains("answer to the delete was lost") == true, "\(report)")
        #expect(dir.keys.count == 0)  // it was deleted: only the answer was lost
        #expect(!FileManager.default.fileExists(atPath: dir.path + "/app.prefs"))
        let lines = RekeyFailureTests.journal(dir)
        #expect(lines.count == 1 && lines[0].hasPrefix("drop ") && lines[0].hasSuffix(" deferred"), "\(lines)")

        // The same handle and a new one find no item; the vault starts over; the next wipe retries the delete.
        #expect(try vault.string(for: "a") == nil)
        #expect(try dir.vault().string(for: "a") == nil)
        try dir.vault().set("two", for: "a")
        #expect(try dir.vault().string(for: "a") == "two")
        #expect(RekeyFailureTests.journal(dir) == lines)
        let second = try dir.vault().wipe()
        #expect(second.removedKey)
        #expect(RekeyFailureTests.journal(dir).isEmpty)
        #expect(dir.keys.count == 0)
    }

    /// A wipe the key store refused (nothing deleted) changes nothing: the vault reads as before.
    @Test func aRefusedWipeChangesNothing() throws {
        let (dir, vault) = try RekeyFailureTests.vaultWithOneItem()
        dir.keys.inject(.init(deletesFailed: 1))
        #expect(throws: VaultError.self) { try vault.wipe() }
        #expect(RekeyFailureTests.journal(dir).isEmpty)
        #expect(try dir.vault().string(for: "a") == "one")
    }
}
