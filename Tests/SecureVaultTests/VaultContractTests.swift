import Foundation
import Testing
import TestSupport

@_spi(Testing) @testable import SecureVault

/// The contract every key store keeps, run against each real one in this process (the Secret Service: the
/// gnome-keyring of the session `make test` runs in): a round trip, a rotation that leaves the old key nowhere,
/// a wipe after which no copy of the file opens, distinct errors for a missing and a wrong key (the file left
/// byte for byte as it was), and a migration to another key store.
@Suite struct VaultContractTests {
    enum Store: String, CaseIterable, CustomTestStringConvertible {
        case keyFile, systemdCredential, kernelKeyring, passphrase, inMemory, secretService
        var testDescription: String { rawValue }

        /// Every key store this run can reach: the Secret Service inside the private keyring session that
        /// `make test` (scripts/with-keyring.sh) runs every suite in, the others everywhere.
        static var reachable: [Store] {
            ProcessInfo.processInfo.environment["VAULT_TEST_KEYRING"] == "1"
                ? allCases : allCases.filter { $0 != .secretService }
        }
    }

    /// One vault of `store` in a scratch directory, under a service name of its own (the kernel keyring and
    /// the systemd credential are shared with the rest of the machine).
    final class Subject {
        let store: Store
        let directory: VaultDirectory
        let service = "contract-" + UUID().uuidString.prefix(8).lowercased()
        let keys = InMemoryKeys()
        var passphrase = "correct horse"
        /// Keys a test moved the file away from (a copy from before a rotation put back): removed at the end.
        var orphans: [KeyIdentity] = []

        init(_ store: Store) throws {
            self.store = store
            directory = try VaultDirectory()
            try FileManager.default.createDirectory(
                atPath: directory.path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            try KeyStore.createKeyFile(at: keyFilePath)
        }

        var keyFilePath: String { directory.path + "/../vault.key" }
        var credentialPath: String { directory.path + "/\(service).cred" }

        var configuration: Vault.Configuration { configuration(store) }

        func configuration(_ store: Store) -> Vault.Configuration {
            var configuration = Vault.Configuration(directory: directory.path)
            configuration.keyStore = keyStore(store)
            // A guard against a hang, not a measure: the Secret Service and systemd-creds answer within the default
            // 2 s on a quiet machine, not always beside a loaded test run.
            configuration.deadline = KeyringSession.deadline
            return configuration
        }

        func keyStore(_ store: Store) -> KeyStore {
            switch store {
            case .keyFile: return .keyFile(keyFilePath)
            case .systemdCredential: return .systemdCredential(name: service)
            case .kernelKeyring: return .kernelKeyring(.user)
            case .passphrase: return .passphrase(SecretBytes(utf8: passphrase), cost: .insecureForTesting)
            case .inMemory: return .inMemory(keys)
            case .secretService: return .secretService
            }
        }

        /// A fresh handle, as a new process has: no key cached.
        func vault(_ other: Store? = nil) throws -> Vault {
            let vault = try Vault(service: service, configuration: configuration(other ?? store))
            vault.forgetKey()
            return vault
        }

        var file: String { directory.path + "/\(service).prefs" }
        func fileBytes() throws -> [UInt8] { try directory.fileBytes(service) }

        /// Whether the key store still holds the key of `identity` (nil: it stores none, a passphrase).
        func holds(_ identity: KeyIdentity) throws -> Bool? {
            if store == .passphrase { return nil }
            do {
                return try vault().keys.load(identity, file: file) != nil
            } catch let error as VaultError where error.code == .keyMissing {
                return false  // a kernel key being removed reads "revoked" until the kernel unlinks it
            }
        }

        /// Makes the key store lose the vault's key, as a reset keyring or a deleted secret does.
        func loseKey() throws {
            let vault = try vault()
            let identity = try #require(try vault.existingIdentity())
            switch store {
            case .keyFile: try FileManager.default.removeItem(atPath: keyFilePath)
            case .systemdCredential: try FileManager.default.removeItem(atPath: credentialPath)
            case .kernelKeyring, .inMemory, .secretService: try vault.keys.delete(identity)
            case .passphrase: Issue.record("a passphrase cannot be lost by the key store")
            }
        }

        /// Puts another key where the vault's key is.
        func replaceKey() throws {
            switch store {
            case .keyFile:
                try FileManager.default.removeItem(atPath: keyFilePath)
                try KeyStore.createKeyFile(at: keyFilePath)
            case .systemdCredential:
                let key = try ChildProcess.run(
                    "/bin/bash", ["-c", "head -c 32 /dev/urandom | systemd-creds encrypt --name=\(service) - \(credentialPath) && chmod 600 \(credentialPath)"])
                try #require(key.status == 0, "\(key)")
            case .kernelKeyring, .secretService:
                // Another random key saved under the vault's name, where the key store keeps it.
                let vault = try vault()
                var identity = try #require(try vault.existingIdentity())
                try vault.keys.delete(identity)
                _ = try vault.keys.create(&identity)
            case .passphrase:
                passphrase = "wrong horse"
            case .inMemory:
                let identity = try #require(try vault().existingIdentity())
                keys.save(SecretBytes.random(count: 32), as: "\(identity.vaultIDHex)/\(identity.keyIDHex)/\(service)")
            }
        }

        /// Wipes the vault, and removes a kernel key the wipe would not (one planted by ``replaceKey()``).
        func cleanUp() {
            let identity = (try? vault().existingIdentity()) ?? nil
            _ = try? vault().wipe()
            guard store == .kernelKeyring || store == .secretService else { return }
            for identity in orphans + (identity.map { [$0] } ?? []) { _ = try? vault().keys.delete(identity) }
        }
    }

    static func code(_ body: () throws -> Void) -> VaultError.Code? {
        do {
            try body()
            return nil
        } catch let error as VaultError {
            return error.code
        } catch {
            return .io
        }
    }

    @Test(arguments: Store.reachable)
    func itemsRoundTripAcrossHandles(store: Store) throws {
        let subject = try Subject(store)
        defer { subject.cleanUp() }
        try subject.vault().set("tok-1", for: "token")
        #expect(try subject.vault().string(for: "token") == "tok-1")
        #expect(try subject.vault().status().keyStore == subject.configuration.keyStore.description)
    }

    @Test(arguments: Store.reachable)
    func rotationReencryptsAndLeavesTheOldKeyNowhere(store: Store) throws {
        let subject = try Subject(store)
        defer { subject.cleanUp() }
        try subject.vault().set("tok-1", for: "token")
        let before = try subject.fileBytes()
        let old = try #require(try subject.vault().existingIdentity())
        let report = try subject.vault().rotateKey()
        let new = try #require(try subject.vault().existingIdentity())
        subject.orphans.append(new)
        #expect(new.keyIDHex != old.keyIDHex && new.vaultIDHex == old.vaultIDHex)
        #expect(try subject.vault().string(for: "token") == "tok-1")
        #expect(report.keptKeyReason == nil)
        if let held = try subject.holds(old) {
            #expect(!held, "the old key is gone from the key store")
            #expect(report.removedOldKey)
            #expect(try subject.holds(new) == true)
            // A copy of the file from before the rotation needs the old key: it no longer opens.
            try subject.directory.writeFile(before, subject.service)
            #expect(Self.code { _ = try subject.vault().string(for: "token") } == .keyMissing)
        }
    }

    @Test(arguments: Store.reachable)
    func aWipeLeavesNoKeyAndNoCopyOfTheFileOpens(store: Store) throws {
        let subject = try Subject(store)
        defer { subject.cleanUp() }
        try subject.vault().set("tok-1", for: "token")
        let copy = try subject.fileBytes()
        let identity = try #require(try subject.vault().existingIdentity())
        let report = try subject.vault().wipe()
        #expect(!FileManager.default.fileExists(atPath: subject.file))
        #expect(try subject.vault().string(for: "token") == nil)
        if let held = try subject.holds(identity) {
            #expect(!held)
            #expect(report.removedKey)
            try subject.directory.writeFile(copy, subject.service)
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: subject.file)
            #expect(Self.code { _ = try subject.vault().string(for: "token") } == .keyMissing)
            #expect(try subject.fileBytes() == copy, "left untouched")
        }
    }

    @Test(arguments: Store.reachable.filter { $0 != .passphrase })
    func aMissingKeyIsKeyMissingAndTheFileIsLeftAsItWas(store: Store) throws {
        let subject = try Subject(store)
        defer { subject.cleanUp() }
        try subject.vault().set("tok-1", for: "token")
        let before = try subject.fileBytes()
        try subject.loseKey()
        #expect(Self.code { _ = try subject.vault().string(for: "token") } == .keyMissing)
        #expect(Self.code { try subject.vault().set("tok-2", for: "token") } == .keyMissing)
        #expect(try subject.fileBytes() == before)
    }

    @Test(arguments: Store.reachable)
    func aWrongKeyIsWrongKeyAndTheFileIsLeftAsItWas(store: Store) throws {
        let subject = try Subject(store)
        defer { subject.cleanUp() }
        try subject.vault().set("tok-1", for: "token")
        let before = try subject.fileBytes()
        try subject.replaceKey()
        #expect(Self.code { _ = try subject.vault().string(for: "token") } == .wrongKey)
        #expect(Self.code { try subject.vault().rotateKey() } == .wrongKey)
        #expect(try subject.fileBytes() == before)
    }

    /// `migrateKey(to:)` from every key store to another: the items move, the old key is gone from the old key
    /// store, and the old key store no longer opens the file.
    @Test(arguments: Store.reachable)
    func migrationMovesTheVaultAndLeavesTheOldKeyNowhere(store: Store) throws {
        let subject = try Subject(store)
        let target: Store = store == .keyFile ? .kernelKeyring : .keyFile
        defer {
            _ = try? subject.vault(target).wipe()
            subject.cleanUp()
        }
        try subject.vault().set("tok-1", for: "token")
        let old = try #require(try subject.vault().existingIdentity())
        let report = try subject.vault().migrateKey(to: subject.keyStore(target))
        let new = try #require(try subject.vault(target).existingIdentity())
        #expect(new.kind == subject.keyStore(target).kind && new.vaultIDHex == old.vaultIDHex)
        #expect(try subject.vault(target).string(for: "token") == "tok-1")
        #expect(Self.code { _ = try subject.vault().string(for: "token") } == .wrongKey)
        #expect(report.keptKeyReason == nil)
        if let held = try subject.holds(old) {
            #expect(!held, "the old key is gone from the old key store")
            #expect(report.removedOldKey)
        }
        #expect(!FileManager.default.fileExists(atPath: subject.directory.path + "/\(subject.service).vault.intent"))
    }
}
