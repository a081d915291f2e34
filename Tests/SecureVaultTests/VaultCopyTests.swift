import Foundation
import Glibc
import Testing

@testable import PrefsKV
@_spi(Testing) @testable import SecureVault

/// A vault file copied (or renamed) under another service name belongs to the vault it was made for: it is
/// refused under the other name, and wiping or rotating it never deletes the original's key (issue 14, point
/// 4). With the passphrase and the in-memory key stores; the Secret Service has its own suite.
@Suite struct VaultCopyTests {
    enum Store: String, CaseIterable, CustomTestStringConvertible {
        case passphrase, inMemory
        var testDescription: String { rawValue }
    }

    /// `app` with one item and its file copied, mode and all, to `appcopy.prefs`.
    static func vaultAndCopy(_ store: Store) throws -> (VaultDirectory, (String) throws -> Vault) {
        let dir = try VaultDirectory()
        let open = { (service: String) throws -> Vault in
            var configuration = dir.configuration()
            if store == .passphrase {
                configuration.keyStore = .passphrase(SecretBytes(utf8: "correct horse"), cost: .insecureForTesting)
            }
            let vault = try Vault(service: service, configuration: configuration)
            vault.forgetKey()
            return vault
        }
        try open("app").set("v1", for: "k")
        try dir.writeFile(try dir.fileBytes("app"), "appcopy")
        #expect(chmod(dir.path + "/appcopy.prefs", 0o600) == 0)
        return (dir, open)
    }

    @Test(arguments: Store.allCases)
    func aCopyOpenedUnderAnotherNameIsWrongKeyNamingTheCopyAndIsLeftUntouched(_ store: Store) throws {
        let (dir, open) = try Self.vaultAndCopy(store)
        let before = try dir.fileBytes("appcopy")
        do {
            let value = try open("appcopy").string(for: "k")
            Issue.record("the copy opened under another name and read \(value ?? "nil")")
        } catch let error as VaultError {
            #expect(error.code == .wrongKey, "\(error)")
            #expect(error.message.contains("copied"), "the message does not name the cause: \(error)")
        }
        expectVaultError(.wrongKey) { try open("appcopy").set("v2", for: "k2") }
        #expect(try dir.fileBytes("appcopy") == before, "the refused copy was changed")
        #expect(try open("app").string(for: "k") == "v1")
    }

    @Test(arguments: Store.allCases)
    func wipingACopyUnderAnotherNameKeepsTheOriginalsKey(_ store: Store) throws {
        let (dir, open) = try Self.vaultAndCopy(store)
        try open("appcopy").wipe()
        #expect(!FileManager.default.fileExists(atPath: dir.path + "/appcopy.prefs"), "the copy was not removed")
        #expect(try open("app").string(for: "k") == "v1")
        if store == .inMemory { #expect(dir.keys.count == 1) }
    }

    @Test(arguments: Store.allCases)
    func rotatingACopyUnderAnotherNameIsRefusedAndKeepsTheOriginalsKey(_ store: Store) throws {
        let (dir, open) = try Self.vaultAndCopy(store)
        let before = try dir.fileBytes("appcopy")
        expectVaultError(.wrongKey) { try open("appcopy").rotateKey() }
        #expect(try dir.fileBytes("appcopy") == before, "the refused copy was changed")
        #expect(try open("app").string(for: "k") == "v1")
    }
}

/// What whole-file rollback does (issue 14, point 3; Documentation/ThreatModel.md, "Whole-file rollback").
@Suite struct VaultRollbackTests {
    /// Not covered, on purpose: an old copy of the file put back while its key is still the vault's key reads
    /// as the vault did then, and verify finds nothing wrong with it.
    @Test func anOldCopyPutBackUnderTheSameKeyReturnsTheOldValueAndVerifiesClean() throws {
        let dir = try VaultDirectory()
        try dir.vault().set("v1", for: "k")
        let old = try dir.fileBytes()
        try dir.vault().set("v2", for: "k")
        try dir.writeFile(old)
        let vault = try dir.vault()
        #expect(try vault.string(for: "k") == "v1")
        #expect(try vault.verify().isClean)
    }

    /// Covered: once the key has been rotated (or the vault wiped), an old copy put back cannot be read, and is
    /// left as it is.
    @Test func anOldCopyPutBackAfterRotationOrWipeIsKeyMissingAndLeftUntouched() throws {
        let dir = try VaultDirectory()
        try dir.vault().set("v1", for: "k")
        let old = try dir.fileBytes()
        try dir.vault().set("v2", for: "k")
        try dir.vault().rotateKey()
        try dir.writeFile(old)
        expectVaultError(.keyMissing) { try dir.vault().string(for: "k") }
        #expect(try dir.fileBytes() == old)

        try dir.vault("other").set("v1", for: "k")
        let oldOther = try dir.fileBytes("other")
        try dir.vault("other").wipe()
        try dir.writeFile(oldOther, "other")
        #expect(chmod(dir.path + "/other.prefs", 0o600) == 0)
        expectVaultError(.keyMissing) { try dir.vault("other").string(for: "k") }
        #expect(try dir.fileBytes("other") == oldOther)
    }
}
