import Foundation
import Testing

@testable import SecureVault

/// A rotation or migration whose key store call fails part way. A failed call may still have made the new key (the
/// D-Bus reply of a keyring that made the item, lost when the bus went: found by the portal crash torture, two
/// keyring items and no journal line), and the delete that should undo it may fail too: the journal then keeps a
/// deferred delete, which the next rotation or wipe performs. The vault file never loses the key it uses.
@Suite struct RekeyFailureTests {
    /// The vault's journal lines (empty without a journal).
    static func journal(_ dir: VaultDirectory, _ service: String = "app") -> [String] {
        let text = (try? String(contentsOfFile: dir.path + "/\(service).vault.intent", encoding: .utf8)) ?? ""
        return text.split(separator: "\n").map(String.init)
    }

    @Test(arguments: [false, true])
    func aKeyMadeByAFailedSaveIsDeletedOrJournaled(deleteFails: Bool) throws {
        let dir = try VaultDirectory()
        let vault = try dir.vault()
        try vault.set("one", for: "a")
        let before = try #require(try vault.existingIdentity())
        dir.keys.inject(.init(savesKeptThenFailed: 1, deletesFailed: deleteFails ? 1 : 0))
        #expect(throws: VaultError.self) { try vault.rotateKey() }

        // The file still uses its key, and reads back in a new process's handle.
        #expect(try vault.existingIdentity() == before)
        #expect(try dir.vault().string(for: "a") == "one")
        if deleteFails {
            // The key the failed save made is still there, and the journal names it for the next maintenance call.
            #expect(dir.keys.count == 2)
            let lines = Self.journal(dir)
            #expect(
                lines.count == 1 && lines[0].hasPrefix("drop \(before.vaultIDHex) ") && lines[0].hasSuffix(" deferred"))
            #expect(lines.first?.contains(before.keyIDHex) == false)
        } else {
            #expect(dir.keys.count == 1)
            #expect(Self.journal(dir).isEmpty)
        }

        // An open leaves a deferred delete alone; the next rotation performs it: one key left, the data kept.
        #expect(try dir.vault().string(for: "a") == "one")
        try dir.vault().rotateKey()
        #expect(dir.keys.count == 1)
        #expect(Self.journal(dir).isEmpty)
        #expect(try dir.vault().string(for: "a") == "one")
    }

    @Test func aWipeAfterAFailedRotationDeletesBothKeys() throws {
        let dir = try VaultDirectory()
        let vault = try dir.vault()
        try vault.set("one", for: "a")
        dir.keys.inject(.init(savesKeptThenFailed: 1, deletesFailed: 1))
        #expect(throws: VaultError.self) { try vault.rotateKey() }
        #expect(dir.keys.count == 2)
        try dir.vault().wipe()
        #expect(dir.keys.count == 0)
        #expect(Self.journal(dir).isEmpty)
    }
}
