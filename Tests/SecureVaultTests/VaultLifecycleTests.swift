import Foundation
import Testing

import PrefsKV
import SecureVault

/// A vault's life as an app sees it (issue 38): `Vault.exists`, `Vault.services(in:)`, `Vault.destroy` and
/// `Vault.temporary`.
@Suite struct VaultLifecycleTests {
    @Test func existsAndServicesListVaultsOnly() throws {
        let dir = try VaultDirectory()
        let missing = dir.path + "/not-made"
        #expect(try Vault.services(in: missing) == [])
        #expect(try !Vault.exists(service: "a", directory: missing))

        for service in ["user-2", "user-1"] { try dir.vault(service).set("tok", for: "session") }
        // Neighbours that are not vaults: a plain store, encrypted preferences kept in the same directory.
        try PrefsStore(id: "ui", directory: dir.path).set(1, forKey: "x")
        try dir.vault("user-1").encryptedPreferences(id: "account", directory: dir.path).set("a", forKey: "email")
        // A vault file whose header is garbage is still listed: it can be destroyed.
        try dir.writeFile([UInt8](repeating: 0x5A, count: 8192), "user-3")

        #expect(try Vault.services(in: dir.path) == ["user-1", "user-2", "user-3"])
        #expect(try Vault.exists(service: "user-1", directory: dir.path))
        #expect(try !Vault.exists(service: "user-4", directory: dir.path))
        #expect(throws: VaultError.self) { try Vault.exists(service: "../user-1", directory: dir.path) }
    }

    @Test func destroyRemovesTheFileAndTheMasterKey() throws {
        let dir = try VaultDirectory()
        try dir.vault("user-1").set("tok", for: "session")
        try dir.vault("user-2").set("tok", for: "session")
        #expect(dir.keys.count == 2)

        let report = try Vault.destroy(service: "user-1", configuration: dir.configuration())

        #expect(report.removedKey)
        #expect(dir.keys.count == 1)
        #expect(try Vault.services(in: dir.path) == ["user-2"])
        #expect(try dir.vault("user-2").string(for: "session") == "tok")
    }

    @Test func aTemporaryVaultIsRealAndLeavesNothing() throws {
        var directories: [String] = []
        do {
            let first = try Vault.temporary()
            let second = try Vault.temporary()
            directories = [first.configuration.directory, second.configuration.directory]
            #expect(directories[0] != directories[1])
            try first.set("s3cr3t", for: "apiToken")
            #expect(try first.string(for: "apiToken") == "s3cr3t")
            #expect(try second.string(for: "apiToken") == nil)
            // Sealed on disk: the secret is not in the file.
            let bytes = try Data(contentsOf: URL(fileURLWithPath: first.path))
            #expect(bytes.range(of: Data("s3cr3t".utf8)) == nil)
            #expect(try Vault.services(in: directories[0]) == ["test"])
        }
        for directory in directories {
            #expect(!FileManager.default.fileExists(atPath: directory), "\(directory) is removed with its handle")
        }
    }
}
