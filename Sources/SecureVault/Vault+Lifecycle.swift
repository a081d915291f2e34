// A vault's life as an app sees it: does it exist, which vaults a directory holds, removing one (per-account
// vaults at sign-out), and a vault for the app's own tests that leaves nothing behind and needs no keyring.
import PrefsKV
import SystemLayer

extension Vault {
    /// Whether the vault `service` exists in `directory`: its file, `<directory>/<service>.prefs`, is there.
    /// Touches neither the key store nor the file's contents.
    ///
    /// ```swift
    /// if try !Vault.exists(service: "user-\(account.id)", directory: directory) { showSignIn() }
    /// ```
    ///
    /// - Throws: ``VaultError/Code/invalidKey`` for a service name no vault may have.
    public static func exists(service: String, directory: String = Vault.defaultDirectory) throws -> Bool {
        try validate(name: service, what: "service name", as: .fileName)
        do {
            return try PrefsStore.exists(id: service, directory: directory)
        } catch {
            throw VaultError.wrapping(error, vault: service)
        }
    }

    /// The services of the vaults in `directory`, sorted: each `<service>.prefs` that is a vault's file (a sealed
    /// store under a vault master key) or whose header cannot be read at all (a damaged vault is listed, so that
    /// it can be destroyed). Plain stores and encrypted preferences (``encryptedPreferences(id:directory:configuration:)``)
    /// kept in the same directory are not vaults. Touches no key store; a missing directory holds none.
    ///
    /// ```swift
    /// for service in try Vault.services(in: directory) where service.hasPrefix("user-") { ... }
    /// ```
    public static func services(in directory: String = Vault.defaultDirectory) throws -> [String] {
        let ids: [String]
        do {
            ids = try PrefsStore.storeIDs(in: directory)
        } catch {
            throw VaultError.wrapping(error, vault: "")
        }
        return ids.filter { id in
            guard Names.isValid(id, as: .fileName) else { return false }
            guard let inspection = try? PrefsStore.inspect(id: id, directory: directory) else {
                // Unreadable (or gone since the listing, which `inspect` answers with nil: not listed).
                return (try? PrefsStore.exists(id: id, directory: directory)) == true
            }
            guard inspection.isSealed, let identity = KeyIdentity(encoded: inspection.keyCheck) else { return false }
            return identity.kind != .vaultItem
        }
    }

    /// Removes the vault `service`: `wipe()` on a handle opened with `configuration` (the file, then its master
    /// key, overwritten and deleted from the key store the configuration names).
    ///
    /// ```swift
    /// // At sign-out: the account's vault goes with it.
    /// try Vault.destroy(service: "user-\(account.id)", configuration: configuration)
    /// ```
    ///
    /// - Returns: what happened to the master key.
    @discardableResult
    public static func destroy(service: String, configuration: Configuration = Configuration()) throws
        -> VaultWipeReport
    {
        try Vault(service: service, configuration: configuration).wipe()
    }

    /// A vault in a new private temporary directory (in `$TMPDIR`, or `/tmp`) whose master key is kept in memory:
    /// no keyring, no D-Bus, nothing left behind (the directory goes when this handle is released). For an app's
    /// own tests: it is the real vault (sealing, file, recovery), and each call makes a new directory and key, so
    /// parallel tests never share one.
    ///
    /// ```swift
    /// @Test func signingOutForgetsTheToken() throws {
    ///     let vault = try Vault.temporary()
    ///     try vault.set("s3cr3t", for: "apiToken")
    ///     try vault.removeAll()
    ///     #expect(try vault.string(for: "apiToken") == nil)
    /// }
    /// ```
    ///
    /// Encrypted preferences of this vault belong in its directory too:
    /// `vault.encryptedPreferences(id: "account", directory: vault.configuration.directory)`.
    public static func temporary(service: String = "test") throws -> Vault {
        try validate(name: service, what: "service name", as: .fileName)
        let directory: TemporaryDirectory
        do {
            directory = try TemporaryDirectory()
        } catch {
            throw VaultError.wrapping(error, vault: service)
        }
        var configuration = Configuration(directory: directory.path)
        configuration.keyStore = .inMemory(InMemoryKeys())
        return try Vault(service: service, configuration: configuration, temporaryDirectory: directory)
    }

    /// The key store the file of vault `service` in `directory` says it was sealed with, as far as the file can
    /// tell without its key: nil when there is no file (or no file this library reads). A kernel keyring vault
    /// names its keyring (nil for one written before it did); a key file's path and a systemd credential's name
    /// are not in the file. vaultctl follows it, so that a command needs `--key-store` only for what the file
    /// cannot say.
    package static func recordedKeyStore(service: String, directory: String) -> RecordedKeyStore? {
        guard let vault = try? Vault(service: service, configuration: Configuration(directory: directory)),
            let identity = (try? vault.existingIdentity()) ?? nil
        else { return nil }
        switch identity.kind {
        case .secretService: return .secretService
        case .passphrase: return .passphrase
        case .inMemory, .vaultItem: return nil
        case .kernelKeyring:
            return .kernelKeyring(KeyStore.KernelKeyring.allCases.first { $0.code == identity.argonPasses })
        case .keyFile: return .keyFile
        case .systemdCredential: return .systemdCredential
        case .secretPortal: return .secretPortal
        }
    }
}

/// Where a vault's file says its key is (``Vault/recordedKeyStore(service:directory:)``).
package enum RecordedKeyStore: Equatable, Sendable {
    case secretService
    case passphrase
    /// The keyring the file names; nil for a file written before vaults named theirs.
    case kernelKeyring(KeyStore.KernelKeyring?)
    /// A key file: its path is not in the vault's file.
    case keyFile
    /// A systemd credential: its name is not in the vault's file.
    case systemdCredential
    /// The Secret portal of the app's Flatpak sandbox.
    case secretPortal
}
