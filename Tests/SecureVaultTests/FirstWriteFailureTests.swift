import Foundation
import Testing

@testable import SecureVault

/// A vault's first write that fails part way: its master key is journaled before it is made, so that a key made by a
/// call whose reply was lost, or whose file could not be made after it, is deleted (at once, or by the next open)
/// instead of being left in the key store with no file naming it, and a second first write does not add a second.
/// The kill at any instant of the same window is `VaultCrashTests` (the key stores' keys counted after every kill).
@Suite struct FirstWriteFailureTests {
    /// A first write whose key store made the key but whose reply was lost (a timeout) leaves the key journaled; the
    /// next open deletes it, and the next first write makes the vault's only key.
    @Test func aKeyMadeByAFirstWriteWhoseReplyWasLostIsDeletedByTheNextOpen() throws {
        let dir = try VaultDirectory()
        dir.keys.inject(.init(savesKeptThenFailed: 1))
        do {
            try dir.vault().set("one", for: "a")
            Issue.record("the first write did not fail")
        } catch let error as VaultError {
            #expect(error.code == .timeout, "\(error)")
        }
        #expect(dir.keys.count == 1)  // made, and the reply lost
        #expect(!FileManager.default.fileExists(atPath: dir.path + "/app.prefs"))
        let lines = RekeyFailureTests.journal(dir)
        #expect(lines.count == 1 && lines[0].hasPrefix("drop ") && !lines[0].hasSuffix("deferred"), "\(lines)")

        // A read (a new process's first) finds no vault, and deletes the key no file names.
        #expect(try dir.vault().string(for: "a") == nil)
        #expect(dir.keys.count == 0)
        #expect(RekeyFailureTests.journal(dir).isEmpty)

        try dir.vault().set("two", for: "a")
        #expect(dir.keys.count == 1)
        #expect(try dir.vault().string(for: "a") == "two")
        #expect(RekeyFailureTests.journal(dir).isEmpty)
    }

    /// A first write whose file cannot be made after its key was (here the store's lock path is taken by a
    /// directory) deletes that key before it throws, and leaves no journal: nothing of the attempt is left.
    @Test func aKeyWhoseFileCouldNotBeMadeIsDeletedAtOnce() throws {
        let dir = try VaultDirectory()
        try FileManager.default.createDirectory(
            atPath: dir.path + "/app.prefs.lock", withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700])
        try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: dir.path)
        #expect(throws: VaultError.self) { try dir.vault().set("one", for: "a") }
        #expect(dir.keys.count == 0)
        #expect(RekeyFailureTests.journal(dir).isEmpty)
        #expect(!FileManager.default.fileExists(atPath: dir.path + "/app.prefs"))

        try FileManager.default.removeItem(atPath: dir.path + "/app.prefs.lock")
        try dir.vault().set("two", for: "a")
        #expect(dir.keys.count == 1)
        #expect(try dir.vault().string(for: "a") == "two")
    }

    /// A first write the key store refused (it made nothing) leaves no journal line: the next read pays nothing.
    @Test func aRefusedFirstWriteLeavesNoJournal() throws {
        let dir = try VaultDirectory()
        try FileManager.default.createDirectory(atPath: dir.path, withIntermediateDirectories: true)
        try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: dir.path)
        var configuration = dir.configuration()
        configuration.keyStore = .keyFile(dir.path + "/no-such-root.key")  // never created silently: keyMissing
        #expect(throws: VaultError.self) {
            try Vault(service: "app", configuration: configuration).set("one", for: "a")
        }
        #expect(RekeyFailureTests.journal(dir).isEmpty)
        // The vault's lock file stays in a directory the write did not make, as before.
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted() == ["app.vault.lock"])
    }

    /// Encrypted preferences opened through a vault with no file yet, whose key store refuses: the vault's lock
    /// made the directory and the lock file, and the failure removes them, as a failed first write does (before,
    /// both were left).
    @Test func encryptedPreferencesThatFailOnANewVaultLeaveNoVaultDirectory() throws {
        let dir = try VaultDirectory()
        let parent = (dir.path as NSString).deletingLastPathComponent
        try FileManager.default.createDirectory(
            atPath: parent, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        var configuration = dir.configuration()
        configuration.keyStore = .keyFile(parent + "/no-such-root.key")  // never created silently: keyMissing
        let vault = try Vault(service: "app", configuration: configuration)
        #expect(throws: VaultError.self) { try vault.encryptedPreferences(id: "account", directory: parent + "/prefs") }
        #expect(try FileManager.default.contentsOfDirectory(atPath: parent) == [], "nothing of the vault is left")
    }
}
