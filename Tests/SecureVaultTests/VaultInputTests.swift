import Foundation
import Testing
import TestSupport

@testable import PrefsKV
@testable import SecureVault

/// Input the vault refuses instead of storing: an empty token or secret (most often an unset variable) unless
/// the call allows it explicitly, and key material of the wrong length, which must be an answer, never a trap.
@Suite struct VaultInputTests {
    @Test func anEmptyValueOfEveryKindIsInvalidValueAndNothingIsWritten() throws {
        let dir = try VaultDirectory()
        let log = LogCapture()
        let vault = try dir.vault(logger: log.logger)
        expectVaultError(.invalidValue) { try vault.set("", for: "text") }
        expectVaultError(.invalidValue) { try vault.set(Data(), for: "bytes") }
        expectVaultError(.invalidValue) { try vault.set(SecretBytes([]), for: "secret") }
        expectVaultError(.invalidValue) { try vault.setSessionToken("", expiresAt: nil) }
        expectVaultError(.invalidValue) { try vault.setSessionToken("", expiresAt: Date(timeIntervalSinceNow: 60)) }
        // Nothing was created: no file, no key, and the launch still finds no token.
        #expect(!FileManager.default.fileExists(atPath: dir.path + "/app.prefs"))
        #expect(dir.keys.count == 0)
        #expect(try dir.vault().sessionToken() == .absent)
        #expect(log.errors.count == 5, "one logged error per refused write: \(log.errors)")
    }

    @Test func anEmptyValueDoesNotReplaceAStoredOne() throws {
        let dir = try VaultDirectory()
        let vault = try dir.vault()
        try vault.setSessionToken("tok-1", expiresAt: nil)
        let before = try dir.fileBytes()
        expectVaultError(.invalidValue) { try vault.setSessionToken("", expiresAt: nil) }
        expectVaultError(.invalidValue) { try vault.set("", for: Vault.defaultSessionTokenKey) }
        #expect(try dir.fileBytes() == before)
        #expect(try dir.vault().sessionToken() == .valid(token: "tok-1", expiresAt: nil))
    }

    @Test func anEmptyValueIsStoredWhenTheCallAllowsIt() throws {
        let dir = try VaultDirectory()
        let vault = try dir.vault()
        try vault.set("", for: "text", allowEmpty: true)
        try vault.set(Data(), for: "bytes", allowEmpty: true)
        try vault.set(SecretBytes([]), for: "secret", allowEmpty: true)
        try vault.setSessionToken("", expiresAt: nil, for: "blank", allowEmpty: true)
        let reopened = try dir.vault()
        #expect(try reopened.string(for: "text") == "")
        #expect(try reopened.data(for: "bytes") == Data())
        #expect(try reopened.secret(for: "secret")?.count == 0)
        #expect(reopened.sessionToken(for: "blank") == .valid(token: "", expiresAt: nil))
        #expect(try reopened.allKeys() == ["blank", "bytes", "secret", "text"])
    }

    @Test func theAsyncTwinsRefuseAndAllowAlike() async throws {
        let dir = try VaultDirectory()
        let vault = try dir.vault()
        await #expect(throws: VaultError.self) { try await vault.set("", for: "text") }
        await #expect(throws: VaultError.self) { try await vault.setSessionToken("", expiresAt: nil) }
        try await vault.set("", for: "text", allowEmpty: true)
        try await vault.setSessionToken("", expiresAt: nil, allowEmpty: true)
        #expect(try await vault.allKeys() == ["session", "text"])
    }

    @Test func signingInWithAnEmptyTokenIsInvalidValueAndChangesNothing() throws {
        let dir = try VaultDirectory()
        let log = LogCapture()
        let router = SessionRouter(vault: try dir.vault(logger: log.logger))
        expectVaultError(.invalidValue) { try router.signIn(token: "", expiresAt: nil) }
        #expect(router.session == nil)
        #expect(!FileManager.default.fileExists(atPath: dir.path + "/app.prefs"))
        #expect(log.errors.count == 1, "\(log.errors)")
        #expect(SessionRouter(vault: try dir.vault()).route() == .signIn(reason: .absent))
    }

    @Test(arguments: [0, 5, 31, 33, 64])
    func anEncryptedStoreKeyItemOfTheWrongLengthIsWrongKeyNeverATrap(length: Int) throws {
        let dir = try VaultDirectory()
        let prefs = dir.path + "-prefs"
        let vault = try dir.vault()
        // The key item written under the store's name, by hand, before the store exists and after.
        try vault.set(SecretBytes([UInt8](repeating: 7, count: length)), for: "prefskv.account", allowEmpty: true)
        expectVaultError(.wrongKey) { try vault.encryptedPreferences(id: "account", directory: prefs) }
        #expect(!FileManager.default.fileExists(atPath: prefs + "/account.prefs"), "a store was created")

        try vault.remove("prefskv.account")
        try vault.encryptedPreferences(id: "account", directory: prefs).set("alice", forKey: "email")
        let before = try Data(contentsOf: URL(fileURLWithPath: prefs + "/account.prefs"))
        try vault.set(SecretBytes([UInt8](repeating: 7, count: length)), for: "prefskv.account", allowEmpty: true)
        expectVaultError(.wrongKey) { try dir.vault().encryptedPreferences(id: "account", directory: prefs) }
        #expect(try Data(contentsOf: URL(fileURLWithPath: prefs + "/account.prefs")) == before)
    }
}
