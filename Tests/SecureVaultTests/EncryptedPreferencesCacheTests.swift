// Issue 39: encrypted preferences with the plaintext cache an app opts into (`PrefsStore.Configuration
// .cachesPlaintext`), through SecureVault as an app reaches it. The vault's own items (tokens) are never cached,
// whatever the app asks of its preferences.
import Foundation
import Testing

@testable import PrefsKV
@_spi(Testing) @testable import SecureVault

@Suite struct EncryptedPreferencesCacheTests {
    @Test func encryptedPreferencesCacheWhenAskedAndFollowOtherHandlesWrites() throws {
        let dir = try VaultDirectory()
        let prefs = dir.path + "-prefs"
        var configuration = PrefsStore.Configuration()
        configuration.cachesPlaintext = true
        let vault = try dir.vault()
        try vault.set("token-value", for: "token")
        let ui = try vault.encryptedPreferences(id: "ui", directory: prefs, configuration: configuration)
        try ui.set("dark", forKey: "theme")
        #expect(try ui.string(forKey: "theme") == "dark")
        #expect(ui.configuration.cachesPlaintext)
        #expect(
            ui.engine.withLock { e in
                guard case .sealed(let codec) = e.codec else { return 0 }
                return codec.plaintexts?.count ?? 0
            } == 1, "the theme's value is cached")
        // Another handle, as another window of the app opens it (without the cache), writes.
        let other = try dir.vault().encryptedPreferences(id: "ui", directory: prefs)
        #expect(!other.configuration.cachesPlaintext)
        try other.set("light", forKey: "theme")
        #expect(try ui.string(forKey: "theme") == "light")
        // The vault's own store: its configuration is the vault's, never the cache.
        let items = try #require(vault.opened.withLock { $0?.store })
        #expect(!items.configuration.cachesPlaintext)
        #expect(
            items.engine.withLock { e in
                guard case .sealed(let codec) = e.codec else { return false }
                return codec.plaintexts == nil
            }, "a vault's items are never cached")
        #expect(try vault.string(for: "token") == "token-value")
    }
}
