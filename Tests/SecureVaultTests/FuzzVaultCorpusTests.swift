import Foundation
import Testing

@_spi(Testing) @testable import SecureVault

/// Writes the vault fuzz target's seed corpus (committed under Fuzz/Corpus/vault-open) when
/// VAULT_FUZZ_CORPUS names the directory: `make fuzz-corpus`. Otherwise checks the committed seeds still open
/// with the fuzz target's passphrase and hold its values, so the corpus never silently goes stale.
@Suite struct FuzzVaultCorpusTests {
    static let passphrase = "fuzz-passphrase"
    static let values = ["alpha": "first", "bravo": "second"]

    func configuration(_ directory: String) -> Vault.Configuration {
        var configuration = Vault.Configuration(directory: directory)
        configuration.keyStore = .passphrase(SecretBytes(utf8: Self.passphrase), cost: .insecureForTesting)
        return configuration
    }

    @Test func theCommittedSeedsOpenWithTheFuzzersPassphrase() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Fuzz/Corpus/vault-open").path
        let seeds = try FileManager.default.contentsOfDirectory(atPath: root).sorted()
        #expect(seeds.count >= 2)
        for seed in seeds {
            let dir = try VaultDirectory()
            try FileManager.default.createDirectory(atPath: dir.path, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
            try FileManager.default.copyItem(atPath: root + "/" + seed, toPath: dir.path + "/app.prefs")
            chmod(dir.path + "/app.prefs", 0o600)
            let vault = try Vault(service: "app", configuration: configuration(dir.path))
            vault.forgetKey()
            for (key, value) in Self.values {
                #expect(try vault.string(for: key) == value, "\(seed): \(key)")
            }
            if seed.contains("token") {
                #expect(vault.sessionToken() == .valid(token: "token-123", expiresAt: nil), "\(seed)")
            }
        }
    }

    @Test(.enabled(if: ProcessInfo.processInfo.environment["VAULT_FUZZ_CORPUS"] != nil))
    func writeTheVaultSeedCorpus() throws {
        let out = ProcessInfo.processInfo.environment["VAULT_FUZZ_CORPUS"]! + "/vault-open"
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        func seed(_ name: String, _ fill: (Vault) throws -> Void) throws {
            let dir = try VaultDirectory()
            let vault = try Vault(service: "app", configuration: configuration(dir.path))
            try fill(vault)
            let bytes = try dir.fileBytes()
            let logEnd = VaultFileRecords(bytes).logEnd
            // Up to the end of the log: the preallocated zeros after it add nothing to mutate.
            try Data(bytes.prefix(logEnd)).write(to: URL(fileURLWithPath: out + "/" + name + ".prefs"))
        }
        try seed("items") { vault in
            for (key, value) in Self.values.sorted(by: { $0.key < $1.key }) { try vault.set(value, for: key) }
        }
        try seed("items-and-token") { vault in
            for (key, value) in Self.values.sorted(by: { $0.key < $1.key }) { try vault.set(value, for: key) }
            try vault.setSessionToken("token-123", expiresAt: nil)
        }
        try seed("rotated") { vault in
            for (key, value) in Self.values.sorted(by: { $0.key < $1.key }) { try vault.set(value, for: key) }
            try vault.rotateKey()
        }
    }
}
