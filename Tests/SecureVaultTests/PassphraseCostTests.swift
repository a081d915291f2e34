import CSodium
import Foundation
import Testing

@testable import PrefsKV
@_spi(Testing) @testable import SecureVault

/// The Argon2id cost of a passphrase vault is read from its file's header: whoever can write the file chooses it.
/// These tests write hostile costs into a real vault file and check what the vault does with them.
@Suite struct PassphraseCostTests {
    static let passphrase = SecretBytes(utf8: "correct horse")

    /// A passphrase vault at the test-only cost holding one item, and its file's bytes.
    static func makeVault(_ dir: VaultDirectory) throws -> Vault.Configuration {
        var configuration = Vault.Configuration(directory: dir.path)
        configuration.keyStore = .passphrase(passphrase, cost: .insecureForTesting)
        try Vault(service: "srv", configuration: configuration).set("secret", for: "k")
        return configuration
    }

    /// Writes `passes` and `memoryKiB` into the key check of the file's header (the vault identity's bytes 2..<8)
    /// and fixes the header CRC, as an attacker with write access to the file would: only the vault can object.
    static func rewriteCost(_ dir: VaultDirectory, passes: UInt16, memoryKiB: UInt32) throws {
        let path = dir.path + "/srv.prefs"
        var bytes = try dir.fileBytes("srv")
        #expect(bytes[Format.keyCheckOffset + 1] == 2, "not a passphrase vault's header")
        withUnsafeBytes(of: passes.littleEndian) {
            bytes.replaceSubrange(Format.keyCheckOffset + 2..<Format.keyCheckOffset + 4, with: $0)
        }
        withUnsafeBytes(of: memoryKiB.littleEndian) {
            bytes.replaceSubrange(Format.keyCheckOffset + 4..<Format.keyCheckOffset + 8, with: $0)
        }
        let crc = CRC32C.checksum(Array(bytes[0..<Format.staticCRCOffset]))
        withUnsafeBytes(of: crc.littleEndian) {
            bytes.replaceSubrange(Format.staticCRCOffset..<Format.staticCRCOffset + 4, with: $0)
        }
        try Data(bytes).write(to: URL(fileURLWithPath: path))
    }

    /// Header costs that no SecureVault writes under the default bound: far above it (65535 passes; 4 TiB, which
    /// Argon2id would try to allocate), just above it (4 passes; 256 MiB + 1 KiB), or below libsodium's minimum.
    static let hostileCosts: [(passes: UInt16, memoryKiB: UInt32)] = [
        (UInt16.max, 8), (1, UInt32.max), (UInt16.max, UInt32.max), (4, 8), (1, 256 * 1024 + 1), (0, 8), (1, 7), (0, 0),
    ]

    @Test(arguments: hostileCosts)
    func aHeaderAskingForACostOutsideTheBoundIsRefusedAsCorruptedAndLeftIntact(
        passes: UInt16, memoryKiB: UInt32
    ) throws {
        let dir = try VaultDirectory()
        let configuration = try Self.makeVault(dir)
        try Self.rewriteCost(dir, passes: passes, memoryKiB: memoryKiB)
        let before = try dir.fileBytes("srv")

        let vault = try Vault(service: "srv", configuration: configuration)
        vault.forgetKey()
        do {
            _ = try vault.string(for: "k")
            Issue.record("a header asking for \(passes) passes over \(memoryKiB) KiB was opened")
        } catch let error as VaultError {
            // corrupted, from the bound (not io from a failed allocation, not wrongKey after a derivation).
            #expect(error.code == .corrupted, "\(error)")
            #expect(error.path == vault.path)
            #expect(error.message.contains(vault.path), "\(error.message)")
            let asked = "\(passes) pass\(passes == 1 ? "" : "es") over \(memoryKiB) KiB"
            #expect(error.message.contains("asks Argon2id for \(asked)"), "\(error.message)")
        }
        #expect(vault.sessionToken() == .unavailable(.corrupted))
        expectVaultError(.corrupted) { try vault.recover() }
        #expect(try dir.fileBytes("srv") == before)
    }

    @Test func aRaisedMaximumCostLetsSuchAHeaderReachTheKeyCheck() throws {
        let dir = try VaultDirectory()
        var configuration = try Self.makeVault(dir)
        try Self.rewriteCost(dir, passes: 4, memoryKiB: 8)
        let before = try dir.fileBytes("srv")
        configuration.keyStore = .passphrase(Self.passphrase, cost: .insecureForTesting, maximumCost: .sensitive)
        let vault = try Vault(service: "srv", configuration: configuration)
        vault.forgetKey()
        // Derived at the header's cost; the key check covers the cost, so the rewrite shows as a wrong key.
        expectVaultError(.wrongKey) { try vault.string(for: "k") }
        #expect(try dir.fileBytes("srv") == before)
    }

    @Test func theMaximumCostIsNeverBelowTheKeyStoresOwnCost() throws {
        guard
            case .passphrase(_, let cost, let maximum) =
                KeyStore.passphrase(Self.passphrase, cost: .sensitive, maximumCost: .interactive).storage
        else { preconditionFailure("not a passphrase key store") }
        #expect(cost == .sensitive && maximum == .sensitive)
        guard case .passphrase(_, _, let defaultMaximum) = KeyStore.passphrase(Self.passphrase).storage else {
            preconditionFailure("not a passphrase key store")
        }
        #expect(defaultMaximum == .moderate)

        // The tightest bound still opens what the vault itself writes.
        let dir = try VaultDirectory()
        var configuration = Vault.Configuration(directory: dir.path)
        configuration.keyStore = .passphrase(
            Self.passphrase, cost: .insecureForTesting, maximumCost: .insecureForTesting)
        try Vault(service: "srv", configuration: configuration).set("secret", for: "k")
        let reopened = try Vault(service: "srv", configuration: configuration)
        reopened.forgetKey()
        #expect(try reopened.string(for: "k") == "secret")
    }

    @Test func thePresetsAreLibsodiumsAndTheTestCostItsMinimum() {
        let presets: [(PassphraseCost, some BinaryInteger, some BinaryInteger)] = [
            (.interactive, crypto_pwhash_argon2id_OPSLIMIT_INTERACTIVE, crypto_pwhash_argon2id_MEMLIMIT_INTERACTIVE),
            (.moderate, crypto_pwhash_argon2id_OPSLIMIT_MODERATE, crypto_pwhash_argon2id_MEMLIMIT_MODERATE),
            (.sensitive, crypto_pwhash_argon2id_OPSLIMIT_SENSITIVE, crypto_pwhash_argon2id_MEMLIMIT_SENSITIVE),
            (.insecureForTesting, crypto_pwhash_argon2id_OPSLIMIT_MIN, crypto_pwhash_argon2id_MEMLIMIT_MIN),
        ]
        for (preset, operations, memoryBytes) in presets {
            #expect(Int(preset.passes) == Int(operations) && Int(preset.memoryKiB) * 1024 == Int(memoryBytes))
        }
        #expect(PassphraseCost.insecureForTesting == .minimum)
    }

    @Test func rotationDerivesTheNewKeyAtTheConfiguredCostNotTheOldHeaders() throws {
        let dir = try VaultDirectory()
        var configuration = try Self.makeVault(dir)
        let old = try #require(try Vault(service: "srv", configuration: configuration).existingIdentity())
        #expect((old.argonPasses, old.argonMemoryKiB) == (1, 8))

        configuration.keyStore = .passphrase(Self.passphrase, cost: .interactive)
        let vault = try Vault(service: "srv", configuration: configuration)
        vault.forgetKey()
        try vault.rotateKey()

        let new = try #require(try vault.existingIdentity())
        #expect((new.argonPasses, new.argonMemoryKiB) == (2, 64 * 1024))
        #expect(new.salt != old.salt)
        let reopened = try Vault(service: "srv", configuration: configuration)
        reopened.forgetKey()
        #expect(try reopened.string(for: "k") == "secret")
    }
}
