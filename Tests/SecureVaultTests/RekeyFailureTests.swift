import Foundation
import Glibc
import SystemLayer
import TestSupport
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

    /// A vault holding "a" = "one", and a fresh handle on it.
    static func vaultWithOneItem() throws -> (VaultDirectory, Vault) {
        let dir = try VaultDirectory()
        let vault = try dir.vault()
        try vault.set("one", for: "a")
        return (dir, vault)
    }

    /// Runs `body`, which must fail with the in-memory key store's injected fault (not any other error).
    static func expectInjectedFault(_ body: () throws -> Void) {
        do {
            try body()
            Issue.record("no error")
        } catch let error as VaultError {
            #expect([.unavailable, .timeout].contains(error.code) && error.message.contains("a test's fault"), "\(error)")
        } catch {
            Issue.record("\(error)")
        }
    }

    /// A rotation whose re-key took effect but whose directory flush failed (the name of the re-keyed file not
    /// known durable: a power cut could bring the old-key file back) keeps the old key, journaled as a deferred
    /// delete, and reports why; the data reads under the new key; the next rotation, its directory flushed, deletes
    /// both old keys. Before, the old key was deleted at once: the file a power cut could bring back had no key
    /// left (found by the review of stop 59). The fault: the store's directory `fsync` fails, through the system
    /// layer's seam (PrefsKV's FlushFailureTests).
    @Test func aRotationWhoseDirectoryFlushFailsKeepsTheOldKey() throws {
        let (dir, vault) = try Self.vaultWithOneItem()
        let before = try #require(try vault.existingIdentity())
        let directory = resolvedPath(dir.path)
        FlushObserver.installFaults { call, fd in
            call == .flush && pathOfDescriptor(fd) == directory ? Errno(rawValue: EIO) : nil
        }
        let report: VaultRotationReport
        do {
            defer { FlushObserver.installFaults(nil) }
            report = try vault.rotateKey()
        }
        #expect(!report.removedOldKey, "\(report)")
        #expect(report.keptKeyReason?.contains("fsync") == true, "\(report)")
        #expect(dir.keys.count == 2)
        let lines = Self.journal(dir)
        #expect(lines.count == 1 && lines[0].contains(before.keyIDHex) && lines[0].hasSuffix(" deferred"), "\(lines)")
        #expect(try vault.existingIdentity() != before)
        #expect(try dir.vault().string(for: "a") == "one")
        try dir.vault().rotateKey()
        #expect(dir.keys.count == 1)
        #expect(Self.journal(dir).isEmpty)
        #expect(try dir.vault().string(for: "a") == "one")
    }

    @Test(arguments: [false, true])
    func aKeyMadeByAFailedSaveIsDeletedOrJournaled(deleteFails: Bool) throws {
        let (dir, vault) = try Self.vaultWithOneItem()
        let before = try #require(try vault.existingIdentity())
        dir.keys.inject(.init(savesKeptThenFailed: 1, deletesFailed: deleteFails ? 1 : 0))
        Self.expectInjectedFault { try vault.rotateKey() }
        #expect(dir.keys.remainingFaults == .init())  // the save failed, and the delete undoing it ran (and failed)

        // The file still uses its key, and reads back in a new process's handle.
        #expect(try vault.existingIdentity() == before)
        #expect(try dir.vault().string(for: "a") == "one")
        let lines = Self.journal(dir)
        if deleteFails {
            // The key the failed save made is still there, and the journal names it for the next maintenance call.
            #expect(dir.keys.count == 2)
            #expect(
                lines.count == 1 && lines[0].hasPrefix("drop \(before.vaultIDHex) ") && lines[0].hasSuffix(" deferred"))
            #expect(lines.first?.contains(before.keyIDHex) == false)
        } else {
            #expect(dir.keys.count == 1)
            #expect(lines.isEmpty)
        }

        // An open leaves a deferred delete alone; the next rotation performs it: one key left, the data kept.
        #expect(try dir.vault().string(for: "a") == "one")
        #expect(dir.keys.count == (deleteFails ? 2 : 1) && Self.journal(dir) == lines)
        try dir.vault().rotateKey()
        #expect(dir.keys.count == 1)
        #expect(Self.journal(dir).isEmpty)
        #expect(try dir.vault().string(for: "a") == "one")
    }

    /// The new key of a failed migration is deleted from the key store object that made it: the journal's spelling
    /// of an in-memory key store names no object (it deleted from the vault's own store, and the target kept it).
    @Test func aMigrationWhoseSaveFailsDeletesTheKeyItMadeFromItsTarget() throws {
        let (dir, vault) = try Self.vaultWithOneItem()
        let target = InMemoryKeys()
        target.inject(.init(savesKeptThenFailed: 1))
        Self.expectInjectedFault { try vault.migrateKey(to: .inMemory(target)) }
        #expect(target.remainingFaults == .init())
        #expect(target.count == 0 && dir.keys.count == 1)
        #expect(Self.journal(dir).isEmpty)
        #expect(try dir.vault().string(for: "a") == "one")
    }

    @Test func aWipeAfterAFailedRotationDeletesBothKeys() throws {
        let (dir, vault) = try Self.vaultWithOneItem()
        dir.keys.inject(.init(savesKeptThenFailed: 1, deletesFailed: 1))
        Self.expectInjectedFault { try vault.rotateKey() }
        #expect(dir.keys.count == 2)
        try dir.vault().wipe()
        #expect(dir.keys.count == 0)
        #expect(Self.journal(dir).isEmpty)
    }
}
