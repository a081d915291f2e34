import Foundation
import Testing

@testable import SecureVault

/// A wipe whose key delete failed with an unknown outcome (the key store deleted or overwrote the key, and its reply
/// was lost) keeps its journal line: the next open finishes the wipe. Before, the line was cleared and the error
/// said nothing changed, while the file was left with a key gone: `keyMissing` at every later open.
@Suite struct WipeFailureTests {
    @Test func aWipeWhoseDeleteReplyWasLostIsFinishedByTheNextOpen() throws {
        let (dir, vault) = try RekeyFailureTests.vaultWithOneItem()
        dir.keys.inject(.init(deletesDoneThenFailed: 1))
        do {
            try vault.wipe()
            Issue.record("the wipe did not fail")
        } catch let error as VaultError {
            #expect(error.code == .timeout && error.message.contains("next open, or wipe, finishes it"), "\(error)")
        }
        #expect(dir.keys.count == 0)
        #expect(RekeyFailureTests.journal(dir).first?.hasPrefix("wipe ") == true)

        // The next open finishes the wipe: no item, no file, no journal; the vault starts over.
        #expect(try dir.vault().string(for: "a") == nil)
        #expect(!FileManager.default.fileExists(atPath: dir.path + "/app.prefs"))
        #expect(RekeyFailureTests.journal(dir).isEmpty)
        try dir.vault().set("two", for: "a")
        #expect(try dir.vault().string(for: "a") == "two")
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
