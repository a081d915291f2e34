import Foundation
import Testing

@testable import PrefsKV
@testable import SecureVault

/// A vault's directory given as a file URL, or as an app's own directory.
@Suite struct VaultDirectoryURLTests {
    @Test func aVaultDirectoryMayBeAFileURLOrAnAppsVaultDirectory() throws {
        let dir = try VaultDirectory()
        var configuration = try Vault.Configuration(directory: URL(filePath: dir.path))
        #expect(configuration.directory == dir.path)
        configuration.keyStore = .inMemory(dir.keys)
        let vault = try Vault(service: "app", configuration: configuration)
        try vault.set("tok", for: "token")
        #expect(vault.path == dir.path + "/app.prefs")
        do {
            _ = try Vault.Configuration(directory: URL(string: "https://example.com/vault")!)
            Issue.record("a web URL was taken for a directory")
        } catch let error as VaultError {
            #expect(error.code == .invalidValue)
        }
        let app = try AppDirectory("com.example.notes")
        #expect(Vault.Configuration(directory: app.vaults).directory.hasSuffix("/com.example.notes/vault"))
    }
}
