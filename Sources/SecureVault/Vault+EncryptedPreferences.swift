public import PrefsKV
import SystemLayer

extension Vault {
    /// Opens a PrefsKV store whose keys and values are sealed with a key held in this vault: MMKV's `cryptKey`,
    /// but authenticated, and with the key kept in the keyring rather than in the app.
    ///
    /// The store's 256-bit key is created on first use and kept as the vault item `prefskv.<id>`. A store whose
    /// key is gone is ``VaultError/Code/keyMissing``, a wrong key ``VaultError/Code/wrongKey``: never an empty
    /// store that the next write would overwrite. Opening an existing store reads its key as any read of an item
    /// does, without the vault's lock; making a new store's key takes it, and so does the answer that a key is
    /// missing or wrong (looked for again under the lock, where no rotation of another process is half done).
    ///
    /// ```swift
    /// let secrets = try vault.encryptedPreferences(id: "account")
    /// try secrets.set("alice@example.com", forKey: "email")
    /// ```
    ///
    /// - Parameters:
    ///   - id: the store id (`[A-Za-z0-9._-]`, at most 120 characters).
    ///   - directory: where the store's file lives. The default is `PrefsStore.defaultDirectory`.
    ///   - configuration: the store's configuration; its `sealer` is set by the vault.
    public func encryptedPreferences(
        id: String, directory: String = PrefsStore.defaultDirectory,
        configuration: PrefsStore.Configuration = PrefsStore.Configuration()
    ) throws -> PrefsStore {
        let itemName = Self.encryptedPreferencesKeyName(id)
        try Self.validate(name: itemName, what: "encrypted store id", as: .itemName)
        return try perform("opening encrypted preferences '\(id)'") { () throws(VaultError) -> PrefsStore in
            // An existing store: its key is read as any item is, without the vault's lock (the read itself makes
            // no change to the vault). A key found missing or wrong this way is not believed yet: another process
            // may hold the lock meanwhile, rotating the vault's key or removing and making this store again, and
            // the answer is given only once looked for again under the lock.
            if let inspection = try inspectEncrypted(id: id, directory: directory) {
                do throws(VaultError) {
                    return try openEncrypted(id: id, directory: directory, configuration, inspection, itemName)
                } catch where error.code == .keyMissing || error.code == .wrongKey {}
            }
            // A new store's key may be made: under the vault's lock, where a key store that refuses on a vault
            // with no file leaves nothing of the vault behind.
            return try withVaultLockLeavingNothingOnFailure { () throws(VaultError) -> PrefsStore in
                // (Another process may have made the store meanwhile.)
                if let inspection = try inspectEncrypted(id: id, directory: directory) {
                    return try openEncrypted(id: id, directory: directory, configuration, inspection, itemName)
                }
                let key: SecretBytes
                if let existing = try secretForPreferences(itemName) {
                    key = existing
                } else {
                    key = SecretBytes.random(count: MasterKeys.keyLength)
                    do {
                        try key.withUnsafeBytes {
                            try store(kind: .secret, payload: $0, for: itemName, expiresAt: 0, allowEmpty: false)
                        }
                    } catch {
                        throw VaultError.wrapping(error, vault: service)
                    }
                }
                let sealer = VaultSealer(masterKey: key, identity: .random(kind: .vaultItem), service: id)
                return try openSealed(id: id, directory: directory, configuration, sealer)
            }
        }
    }

    /// The header of encrypted store `id`, nil when it has no file.
    private func inspectEncrypted(id: String, directory: String) throws(VaultError) -> PrefsInspection? {
        do {
            return try PrefsStore.inspect(id: id, directory: directory)
        } catch {
            throw VaultError.wrapping(error, vault: service)
        }
    }

    /// Opens the existing encrypted store `inspection` describes with its key item, checked against its header.
    private func openEncrypted(
        id: String, directory: String, _ configuration: PrefsStore.Configuration, _ inspection: PrefsInspection,
        _ itemName: String
    ) throws(VaultError) -> PrefsStore {
        guard inspection.isSealed, let identity = KeyIdentity(encoded: inspection.keyCheck),
            identity.kind == .vaultItem
        else {
            throw VaultError(
                code: .corrupted,
                message: "store '\(id)' at \(inspection.path) is not sealed by a vault; it was left untouched",
                path: inspection.path)
        }
        guard let key = try secretForPreferences(itemName) else {
            throw VaultError(
                code: .keyMissing,
                message: "encrypted store '\(id)' exists at \(inspection.path) but its key '\(itemName)' is not "
                    + "in vault '\(service)'; the file was left untouched",
                path: inspection.path)
        }
        let sealer = VaultSealer(masterKey: key, identity: identity, service: id)
        guard sealer.verifiesKeyCheck(inspection.keyCheck) else {
            throw VaultError(
                code: .wrongKey,
                message: "the key '\(itemName)' in vault '\(service)' does not open store '\(id)' (a "
                    + "wrong key, or the file was copied or renamed from another store); the file was "
                    + "left untouched", path: inspection.path)
        }
        return try openSealed(id: id, directory: directory, configuration, sealer)
    }

    /// Opens store `id` sealed by `sealer`.
    private func openSealed(
        id: String, directory: String, _ configuration: PrefsStore.Configuration, _ sealer: VaultSealer
    ) throws(VaultError) -> PrefsStore {
        var storeConfiguration = configuration
        storeConfiguration.sealer = sealer
        do {
            return try PrefsStore(id: id, directory: directory, configuration: storeConfiguration)
        } catch {
            throw VaultError.wrapping(error, vault: service)
        }
    }

    /// Deletes an encrypted store made by ``encryptedPreferences(id:directory:configuration:)`` and its key.
    /// Removing a store that does not exist succeeds.
    ///
    /// ```swift
    /// try vault.removeEncryptedPreferences(id: "account")    // logout
    /// ```
    public func removeEncryptedPreferences(id: String, directory: String = PrefsStore.defaultDirectory) throws {
        let itemName = Self.encryptedPreferencesKeyName(id)
        try Self.validate(name: itemName, what: "encrypted store id", as: .itemName)
        try remove(itemName)
        try perform("removing encrypted preferences '\(id)'") { () throws(VaultError) in
            try prefs {
                do {
                    _ = try PrefsStore.destroy(id: id, directory: directory, evenIfOpen: true)
                } catch let error as PrefsError where error.code == .notFound {
                    // No directory, so no store: nothing to remove.
                }
            }
        }
    }

    static func encryptedPreferencesKeyName(_ id: String) -> String { "prefskv." + id }

    /// The key item of an encrypted store, nil when there is none. An item of another length (written with
    /// `set` under the key's name) is ``VaultError/Code/wrongKey``: it never reaches the crypto.
    private func secretForPreferences(_ itemName: String) throws(VaultError) -> SecretBytes? {
        let key: SecretBytes?
        do {
            key = try secret(for: itemName)
        } catch let error as VaultError {
            throw error
        } catch {
            throw VaultError.wrapping(error, vault: service)
        }
        if let key, key.count != MasterKeys.keyLength {
            throw VaultError(
                code: .wrongKey,
                message: "the key '\(itemName)' in vault '\(service)' is \(key.count) bytes, not a "
                    + "\(MasterKeys.keyLength)-byte key; it is not used and the store was left untouched")
        }
        return key
    }
}
