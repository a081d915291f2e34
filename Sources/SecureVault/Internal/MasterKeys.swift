import SystemLayer

/// Loads, creates and deletes master keys in the configured key store, and answers "may I use it now?".
///
/// Every failure is a `VaultError` naming the vault; a key that is simply not there is `nil`.
///
/// How a key is named depends on the identity's format. Format 2 names the service: Secret Service attributes
/// `vault`, `key`, `format` "2" and `service`; in-memory name `<vault id>/<key id>/<service>`. Format 1 (legacy)
/// keeps exactly the old names: attributes `vault`, `key`, `format` "1"; in-memory `<vault id>/<key id>`.
struct MasterKeys: Sendable {
    var store: KeyStore
    let service: String
    /// The vault's directory (a key file's or systemd credential's wrapped keys live there).
    let directory: String
    /// The deadline of a call that may not prompt.
    let deadline: Duration
    /// Whether the key store may prompt, and the deadline of a call that may.
    var prompting: Vault.Prompting = .never
    /// The per-session cache in front of the key store, when the app opted in.
    var cache: KeyCache?

    /// The Secret Service's prompting, and the deadline of each call under it.
    var secretService: (prompting: LibSecret.Prompting, deadline: Duration) {
        switch prompting {
        case .never: return (.never, deadline)
        case .allowed(let promptDeadline): return (.allowed, promptDeadline)
        }
    }

    /// The length of every master key: 256 bits.
    static let keyLength = 32

    private var operation: String { "the master key of vault '\(service)'" }

    /// The label of the keyring item that holds the key of vault `service`. For a legacy (format 1) key, whose
    /// attributes do not name the service, it is the only proof that the item is this vault's.
    var label: String { "SecureVault master key for '\(service)'" }

    /// Whether a wipe or a rotation may delete the key a file's header names.
    enum Ownership: Equatable {
        /// The key is in the key store and the file's key check verifies with it for this service.
        case owned
        /// The key store holds no key for the file (already deleted; a passphrase vault stores none).
        case absent
        /// A key the file names may be there, but the file does not prove it is this vault's: why.
        case notOwned(String)
    }

    /// The key for `identity` (read from the header of `file`), or nil when the key store does not have it.
    ///
    /// Key material is checked here, where it enters: anything but exactly one key of ``keyLength`` bytes in the
    /// place the vault keeps it (another app of the user can store an item with the vault's attributes) is
    /// ``VaultError/Code/wrongKey``, never handed on to the crypto, whose length checks trap.
    func load(_ identity: KeyIdentity, file: String) throws(VaultError) -> SecretBytes? {
        let key: SecretBytes
        switch store.storage {
        case .secretService:
            let found: LibSecret.LookupResult
            do {
                found = try LibSecret.lookup(
                    schema: .vaultMasterKey, attributes: attributes(identity), prompting: secretService.prompting,
                    deadline: secretService.deadline)
            } catch {
                throw VaultError(error, operation: "reading \(operation)")
            }
            switch found {
            case .absent:
                if identity.format >= 2, try existsForAnotherService(identity) { throw copied(file) }
                return nil
            case .found(let secret):
                key = secret.bytes
            case .several(let paths):
                throw VaultError(
                    code: .wrongKey,
                    message: "reading \(operation): \(paths.count) keyring items claim to be it "
                        + "(\(paths.joined(separator: ", "))): another app may have stored one, so none is used; "
                        + "remove the ones that are not the vault's (secret-tool search --all vault "
                        + "\(identity.vaultIDHex))")
            case .elsewhere(let path, let expected):
                throw VaultError(
                    code: .wrongKey,
                    message: "reading \(operation): the only keyring item that claims to be it, \(path), is not in "
                        + "the default collection (\(expected ?? "none")) where the vault keeps its key: another app "
                        + "may have stored it, so it is not used")
            }
        case .passphrase(let passphrase, _, let maximum):
            try checkCost(of: identity, file: file, maximum: maximum)
            key = try derive(passphrase, identity)
        case .kernelKeyring(let keyring):
            // The kernel finds keys by exact name only, so a file copied under another service finds none here:
            // `keyMissing`, not `wrongKey` (the key check, bound to the service, would refuse it all the same).
            guard let found = try kernelKey(identity, in: keyring) else { return nil }
            key = found
        case .keyFile, .systemdCredential, .secretPortal:
            guard let found = try fileKeys!.load(identity) else { return nil }
            key = found
        case .inMemory(let keys):
            guard let found = keys.load(name(identity)) else {
                if identity.format >= 2, keys.contains(prefix: identity.vaultIDHex + "/" + identity.keyIDHex + "/") {
                    throw copied(file)
                }
                return nil
            }
            key = found
        }
        guard key.count == Self.keyLength else {
            throw VaultError(
                code: .wrongKey,
                message: "reading \(operation): the \(store.kind.name) key store returned \(key.count) bytes, "
                    + "not a \(Self.keyLength)-byte key (another app may have stored it); it is not used")
        }
        return key
    }

    /// Creates a key for `identity` (filling in a passphrase's salt and cost) and saves it.
    func create(_ identity: inout KeyIdentity) throws(VaultError) -> SecretBytes {
        switch store.storage {
        case .secretService:
            let key = SecretBytes.random(count: Self.keyLength)
            do {
                // Where the vault lives goes with the key (not used to find it): `vaultctl vault keys` looks there
                // for the vault when its key may have been orphaned.
                var attributes = attributes(identity)
                attributes["directory"] = Sys.canonicalPath(directory)
                try LibSecret.store(
                    schema: .vaultMasterKey, attributes: attributes, label: label, secret: key,
                    prompting: secretService.prompting, deadline: secretService.deadline)
            } catch {
                throw VaultError(error, operation: "saving \(operation)")
            }
            return key
        case .passphrase(let passphrase, let cost, _):
            identity.salt = Sodium.randomBytes(count: Sodium.passwordSaltBytes)
            identity.argonPasses = cost.passes
            identity.argonMemoryKiB = cost.memoryKiB
            return try derive(passphrase, identity)
        case .kernelKeyring(let keyring):
            identity.argonPasses = keyring.code  // which keyring, in the header (authenticated by the key check)
            let key = SecretBytes.random(count: Self.keyLength)
            let serial = try kernelSerial(keyring, "saving")
            if case .failure(let error) = KernelKeys.store(key, as: kernelName(identity), in: serial) {
                throw kernelError(error, "saving", keyring)
            }
            return key
        case .keyFile, .systemdCredential, .secretPortal:
            return try fileKeys!.create(identity)
        case .inMemory(let keys):
            let key = SecretBytes.random(count: Self.keyLength)
            keys.save(key, as: name(identity))
            // A save that made the key and then failed is a reply lost: a timeout.
            if keys.failing(\.savesKeptThenFailed) { throw injectedFault("saving", code: .timeout) }
            return key
        }
    }

    /// Whether this key store keeps a key `create` makes (a passphrase's is derived again at every open).
    var storesKeys: Bool {
        if case .passphrase = store.storage { return false }
        return true
    }

    /// Whether a `create` or `delete` that failed with `error` may still have done its work: its outcome is unknown.
    /// A timeout or an I/O error of a key store call (a D-Bus reply lost to a timeout or a broken connection, a
    /// kernel call cut short); for the wrapped keys of a key file, a credential or the portal, only an I/O error
    /// (a file written whose directory could not be flushed: a timeout is the root secret's read, before anything
    /// is written). A refusal (unavailable, locked, not approved, no space) changed nothing.
    func outcomeUnknown(failingWith error: VaultError) -> Bool {
        switch store.storage {
        case .passphrase: return false
        case .keyFile, .systemdCredential, .secretPortal: return error.code == .io
        case .secretService, .kernelKeyring, .inMemory: return error.code == .timeout || error.code == .io
        }
    }

    /// What deleting a key did.
    struct Deletion: Equatable {
        /// The key store no longer holds the key (a fresh search finds no item).
        var removed = false
        /// Why a key that was there is still there (a delete the provider asked to confirm and nobody did, an
        /// item the provider did not delete); nil when none was left.
        var leftReason: String?
        /// What the key store may still keep of a removed key, and how to purge it (KeePassXC's Recycle Bin
        /// and entry History); nil when its deletion is final.
        var keptCopy: String?
    }

    /// Deletes the key for `identity`; deleting an absent key succeeds. Format 2 names the service, so only this
    /// vault's key can match. A legacy (format 1) keyring item is deleted only when its label is exactly
    /// ``label``: a legacy file copied under another name names the original's item, labelled for the original.
    ///
    /// A Secret Service key is overwritten with random bytes before it is deleted, and a fresh search checks
    /// that it is gone. Once the key was overwritten every problem is an answer (``Deletion/leftReason``: a
    /// delete prompt skipped (`deletePrompt: .skip`, what an open uses) or not confirmed in time, a delete
    /// that failed), never an error: the caller's data may already depend on it. An error means nothing
    /// changed, unless its outcome is unknown (`outcomeUnknown(failingWith:)`: the overwrite's reply lost, the key may
    /// already hold random bytes).
    ///
    /// Call it only for a key the vault proved it owns (``ownership(of:keyCheck:file:)``) or created itself.
    @discardableResult
    func delete(_ identity: KeyIdentity, deletePrompt: LibSecret.DeletePrompt = .perform) throws(VaultError)
        -> Deletion
    {
        dropCached(identity)
        switch store.storage {
        case .secretService:
            let outcome: LibSecret.ClearOutcome
            do {
                outcome = try LibSecret.clear(
                    schema: .vaultMasterKey, attributes: attributes(identity),
                    label: identity.format < 2 ? label : nil, prompting: secretService.prompting,
                    deletePrompt: deletePrompt, deadline: secretService.deadline)
            } catch {
                throw VaultError(error, operation: "deleting \(operation)")
            }
            let provider = outcome.provider
            if let unfinished = outcome.unfinished {
                var reason = "the keyring item \"\(label)\" of \(provider?.description ?? "the Secret Service") was "
                    + "overwritten with random bytes but not deleted: \(unfinished)"
                if provider?.kind == .keePassXC { reason += " (KeePassXC keeps the previous secret in the entry's History)" }
                reason += "; the next wipe or rotation retries (with --interactive, Vault.Configuration.prompting, the "
                    + "keyring may ask to confirm), or delete the item in the keyring app"
                return Deletion(removed: false, leftReason: reason)
            }
            guard outcome.deleted > 0 else { return Deletion() }
            return Deletion(removed: true, keptCopy: provider?.keptAfterDelete)
        case .passphrase:
            return Deletion()  // nothing is stored: the salt goes with the file
        case .kernelKeyring(let keyring):
            let serial = try kernelSerial(keyring, "deleting")
            switch KernelKeys.delete(kernelName(identity), in: serial) {
            case .success(let removed): return Deletion(removed: removed)
            case .failure(let error): throw kernelError(error, "deleting", keyring)
            }
        case .keyFile, .systemdCredential, .secretPortal:
            return Deletion(removed: try fileKeys!.delete(identity))
        case .inMemory(let keys):
            if keys.failing(\.deletesFailed) { throw injectedFault("deleting") }
            let removed = keys.delete(name(identity))
            if keys.failing(\.deletesDoneThenFailed) { throw injectedFault("deleting", code: .timeout) }
            return Deletion(removed: removed)
        }
    }

    private func injectedFault(_ verb: String, code: VaultError.Code = .unavailable) -> VaultError {
        VaultError(code: code, message: "\(verb) \(operation): the in-memory key store failed (a test's fault)")
    }

    /// The wrapped keys of a key file, a systemd credential or the Secret portal; nil for other key stores.
    var fileKeys: FileKeys? {
        switch store.storage {
        case .keyFile(let path):
            return FileKeys(
                root: .keyFile(path: path), kind: .keyFile, service: service, directory: directory, deadline: deadline)
        case .systemdCredential(let name, let file):
            return FileKeys(
                root: .systemdCredential(name: name, file: file ?? Sys.joinPath(directory, name + ".cred")),
                kind: .systemdCredential, service: service, directory: directory, deadline: deadline)
        case .secretPortal:
            return FileKeys(
                root: .secretPortal, kind: .secretPortal, service: service, directory: directory, deadline: deadline)
        default:
            return nil
        }
    }

    // MARK: The per-session cache

    func cacheName(_ identity: KeyIdentity) -> String {
        "securevault-cache:\(service):\(identity.vaultIDHex):\(identity.keyIDHex)"
    }

    /// The cached key for `identity`, nil without a cache, on a miss, or when the cache cannot be read (then
    /// the key store is asked as without one). The caller checks it against the file's key check.
    func cachedKey(_ identity: KeyIdentity) -> SecretBytes? {
        guard let cache, case .success(let serial) = KernelKeys.serial(of: cache.keyring),
            case .success(let key?) = KernelKeys.load(cacheName(identity), in: serial), key.count == Self.keyLength
        else { return nil }
        return key
    }

    /// Caches `key` for `identity` (best effort: a cache that cannot take it is skipped).
    func cache(_ key: SecretBytes, for identity: KeyIdentity) {
        guard let cache, case .success(let serial) = KernelKeys.serial(of: cache.keyring) else { return }
        _ = KernelKeys.store(key, as: cacheName(identity), in: serial, timeoutSeconds: cache.timeoutSeconds)
    }

    /// Removes the cached key for `identity` (a rotation, a wipe, a cached key that does not check).
    func dropCached(_ identity: KeyIdentity) {
        guard let cache, case .success(let serial) = KernelKeys.serial(of: cache.keyring) else { return }
        _ = KernelKeys.delete(cacheName(identity), in: serial)
    }

    /// The key's name in a kernel keyring (the service is always bound in: this key store is newer than
    /// identity format 2).
    func kernelName(_ identity: KeyIdentity) -> String {
        KernelKeys.description(service: service, vaultIDHex: identity.vaultIDHex, keyIDHex: identity.keyIDHex)
    }

    private func kernelSerial(_ keyring: KeyStore.KernelKeyring, _ verb: String) throws(VaultError) -> Int32 {
        switch KernelKeys.serial(of: keyring) {
        case .success(let serial): return serial
        case .failure(let error): throw kernelError(error, verb, keyring)
        }
    }

    private func kernelKey(_ identity: KeyIdentity, in keyring: KeyStore.KernelKeyring) throws(VaultError)
        -> SecretBytes?
    {
        let serial = try kernelSerial(keyring, "reading")
        switch KernelKeys.load(kernelName(identity), in: serial) {
        case .success(let key): return key
        case .failure(let error): throw kernelError(error, "reading", keyring)
        }
    }

    /// The typed error of a kernel keyring call.
    private func kernelError(_ error: Errno, _ verb: String, _ keyring: KeyStore.KernelKeyring) -> VaultError {
        let operation = "\(verb) \(operation) in the kernel's \(keyring.rawValue) keyring"
        switch error {
        case .keyRevoked:
            return VaultError(
                code: .keyMissing, message: "\(operation): the key was revoked (keyctl revoke); the vault's data "
                    + "cannot be decrypted without it", cause: .errno(error.rawValue))
        case .keyExpired:
            return VaultError(
                code: .keyMissing, message: "\(operation): the key expired (its keyring timeout passed); the "
                    + "vault's data cannot be decrypted without it", cause: .errno(error.rawValue))
        case .quotaExceeded:
            let quota = KernelKeys.quotaBytes.map { " of \($0) bytes" } ?? ""
            return VaultError(
                code: .diskFull, message: "\(operation): this user's kernel key quota is full: its bytes\(quota) "
                    + "(/proc/sys/kernel/keys/maxbytes) or its number of keys (maxkeys); remove unused keys or "
                    + "raise the quota", cause: .errno(error.rawValue))
        case .noKey where keyring == .session, .notSupported, .noSystemCall, .notPermitted:
            let reason = KernelKeys.unavailability(error, keyring) ?? error.text
            let advice = keyring == .persistent ? "use the user keyring" : "use the user or persistent keyring"
            return VaultError(
                code: .unavailable, message: "\(operation): \(reason); \(advice)", cause: .errno(error.rawValue))
        case .accessDenied:
            return VaultError(
                code: .permissionDenied, message: "\(operation): \(error.text) (the key's permissions, or a "
                    + "keyring this process does not possess)", cause: .errno(error.rawValue))
        default:
            return VaultError(code: .io, message: "\(operation): \(error.text)", cause: .errno(error.rawValue))
        }
    }

    /// Whether the file whose header holds `keyCheck` (naming `identity`) proves it owns the key: the key is
    /// loaded and the key check must verify with it for this service. Format 2 binds the service into the check,
    /// so a copy under another name cannot prove it. Deletes nothing; throws what a load throws (a locked
    /// keyring, no Secret Service), except `wrongKey`, which is an answer here (`notOwned`).
    func ownership(of identity: KeyIdentity, keyCheck: [UInt8], file: String) throws(VaultError) -> Ownership {
        if case .passphrase = store.storage { return .absent }  // nothing is stored: the salt goes with the file
        if let fileKeys {
            // A wrapped key is named by this vault's service: it is this vault's to delete, whether or not the root
            // secret can be read now (a wipe needs no systemd-creds).
            return Sys.exists(fileKeys.wrappedPath(identity)) ? .owned : .absent
        }
        let key: SecretBytes?
        do {
            key = try load(identity, file: file)
        } catch {
            // A key the store holds but can no longer use (a revoked or expired kernel key) is as good as gone.
            if error.code == .keyMissing { return .absent }
            guard error.code == .wrongKey else { throw error }
            return .notOwned(error.message)
        }
        guard let key else { return .absent }
        guard VaultSealer(masterKey: key, identity: identity, service: service).verifiesKeyCheck(keyCheck) else {
            return .notOwned(
                "the key the \(store.kind.name) key store holds under the ids of \(file) does not verify its key "
                    + "check for vault '\(service)' (the file was copied or renamed from another vault, or another "
                    + "app stored that key), so it is not this vault's to delete")
        }
        return .owned
    }

    /// Whether a format-2 key with `identity`'s ids is kept for another service (the file in hand was copied or
    /// renamed from that vault's file).
    private func existsForAnotherService(_ identity: KeyIdentity) throws(VaultError) -> Bool {
        var any = attributes(identity)
        any["service"] = nil
        do {
            return try LibSecret.lookup(schema: .vaultMasterKey, attributes: any, deadline: deadline) != .absent
        } catch where error.kind == .notApproved {
            return true  // an item with these ids exists (this program may not read it): another vault's key
        } catch {
            throw VaultError(error, operation: "reading \(operation)")
        }
    }

    /// The answer for a format-2 file whose key is kept for another service.
    private func copied(_ file: String) -> VaultError {
        VaultError(
            code: .wrongKey,
            message: "vault '\(service)': \(file) belongs to another vault (it was copied or renamed from another "
                + "service's file): the master key it names is kept for that vault, not for '\(service)', so it is "
                + "not used", path: file)
    }

    /// For `whenUnlocked`: throws `locked` when the keyring holding the key is locked now, even if the key is
    /// already in memory.
    func checkUnlocked() throws(VaultError) {
        guard case .secretService = store.storage else { return }
        let state: LibSecret.CollectionState
        do {
            state = try LibSecret.collectionState(deadline: deadline)
        } catch {
            throw VaultError(error, operation: "checking the keyring of vault '\(service)'")
        }
        switch state {
        case .unlocked: return
        case .locked:
            throw VaultError(SecretServiceFailure(.locked, message: "locked"), operation: "using vault '\(service)'")
        case .missing:
            throw VaultError(
                SecretServiceFailure(.noDefaultCollection, message: "no default collection"),
                operation: "using vault '\(service)'")
        }
    }

    private func attributes(_ identity: KeyIdentity) -> [String: String] {
        if identity.format < 2 { return ["vault": identity.vaultIDHex, "key": identity.keyIDHex, "format": "1"] }
        return [
            "vault": identity.vaultIDHex, "key": identity.keyIDHex, "format": String(identity.keyStoreFormat),
            "service": service,
        ]
    }

    private func name(_ identity: KeyIdentity) -> String {
        let ids = identity.vaultIDHex + "/" + identity.keyIDHex
        return identity.format < 2 ? ids : ids + "/" + service
    }

    /// A header's Argon2id cost is chosen by whoever wrote the file: refuse one above `maximum` (passes or
    /// memory) or below libsodium's minimum before deriving anything. No SecureVault writes such a header under
    /// this configuration, so it is `corrupted`, like any other header field that is out of range.
    private func checkCost(of identity: KeyIdentity, file: String, maximum: PassphraseCost) throws(VaultError) {
        let asked = identity.passphraseCost
        let problem: String
        if !asked.covers(.minimum) {
            problem = "less than libsodium's minimum (\(PassphraseCost.minimum.text))"
        } else if !maximum.covers(asked) {
            problem =
                "more than this key store accepts (at most \(maximum.text); a vault written at a higher cost needs "
                + "a larger maximumCost)"
        } else {
            return
        }
        throw VaultError(
            code: .corrupted,
            message: "vault '\(service)': the header of \(file) asks Argon2id for \(asked.text), \(problem); "
                + "nothing was derived and the file was left untouched", path: file)
    }

    private func derive(_ passphrase: SecretBytes, _ identity: KeyIdentity) throws(VaultError) -> SecretBytes {
        let cost = Sodium.PasswordHashCost(
            operations: UInt64(identity.argonPasses), memoryBytes: Int(identity.argonMemoryKiB) * 1024)
        do {
            return try Sodium.argon2id(password: passphrase, salt: identity.salt, cost: cost)
        } catch {
            throw VaultError(
                code: .io,
                message: "deriving \(operation) from the passphrase failed: Argon2id could not get "
                    + "\(identity.argonMemoryKiB) KiB of memory or its cost is out of range")
        }
    }
}
