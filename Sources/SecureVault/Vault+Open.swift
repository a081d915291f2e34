import PrefsKV
import Synchronization
import SystemLayer

extension Vault {
    /// The vault's store, opened with its master key; nil when the vault has no file and `create` is false.
    ///
    /// Never mints a key over existing data: a file whose key is gone is ``VaultError/Code/keyMissing`` and is
    /// left untouched. Creation happens under the vault's lock file, so two processes creating the same vault
    /// at once end up sharing one file and one key.
    func openStore(create: Bool) throws(VaultError) -> PrefsStore? {
        if configuration.accessibility == .whenUnlocked { try keys.checkUnlocked() }
        if let open = opened.withLock({ $0 }) { return open.store }
        var createdDirectory = try checkDirectory(create: create)
        if hasPendingIntents {
            // Never retries a delete the key store could not complete: that is for maintenance calls. The journal
            // may be another process's first write, rotation or wipe under way: this waits for it (bounded by its
            // deadline). A failing first write removes the directory, which the lock then makes again: a read
            // removes it, and a first write of ours that fails too must not leave it.
            let made = try withVaultLockNotingDirectory { (made: Bool) throws(VaultError) -> Bool in
                try finishIntents(retryingDeferred: false)
                if made, !create, !Sys.exists(path), !hasPendingIntents {
                    removeFirstWriteLeftovers()
                    return false
                }
                return made
            }
            createdDirectory = createdDirectory || made
        }
        if let existing = try openExisting() { return existing }
        guard create else { return nil }

        return try withVaultLockNotingDirectory { (madeDirectory: Bool) throws(VaultError) -> PrefsStore in
            // Another process may have created it while we waited for the lock, or failed to and left its key
            // journaled: that line is settled before ours replaces the journal.
            if hasPendingIntents { try finishIntents(retryingDeferred: false) }
            if let existing = try openExisting() { return existing }
            do throws(VaultError) {
                return try createFirstKey()
            } catch {
                // A first write that failed (no key store, say) leaves nothing behind: not the directory it made
                // (unless it holds a journal naming a key the failure may have made). Still holding the lock: a
                // waiter finds the lock file gone and locks a new one (withVaultLock).
                if createdDirectory || madeDirectory, !Sys.exists(path) { removeFirstWriteLeftovers() }
                throw error
            }
        }
    }

    /// Makes the vault's master key and its file, the key journaled first: a kill (or a key store reply lost)
    /// between the key's creation and the file's would otherwise leave a key no file names, and a second first
    /// write a second key. The journal's `drop` line names the new key before it is made; the next open deletes
    /// it unless the file turned out to use it (`finishIntents`). Call with the vault lock held.
    ///
    /// A creation that failed with an unknown outcome (the key store may have made the key:
    /// `MasterKeys.outcomeUnknown(failingWith:)`) keeps the line for the next open, which tries the delete once (not
    /// now: a second deadline on the same call); one the key store refused (unavailable, locked) made nothing and
    /// clears it. A file that could not be made after the key was has its key deleted at once. A passphrase
    /// stores nothing: no line.
    private func createFirstKey() throws(VaultError) -> PrefsStore {
        var identity = KeyIdentity.random(kind: configuration.keyStore.kind)
        let journaled = keys.storesKeys
        if journaled { try recordIntents([VaultIntent(.drop, identity)]) }
        let masterKey: SecretBytes
        do throws(VaultError) {
            masterKey = try keys.create(&identity)
        } catch {
            if journaled, !keys.outcomeUnknown(failingWith: error) { clearIntents() }
            throw error
        }
        let store: PrefsStore
        do throws(VaultError) {
            store = try adopt(sealer: VaultSealer(masterKey: masterKey, identity: identity, service: service))
        } catch {
            if journaled { _ = try? finishIntents(made: (identity, keys)) }
            throw error
        }
        if journaled { clearIntents() }
        return store
    }

    /// Opens the vault file if there is one: reads which key it needs from its header, asks the key store.
    private func openExisting() throws(VaultError) -> PrefsStore? {
        guard let sealer = try existingSealer() else { return nil }
        return try adopt(sealer: sealer)
    }

    /// The sealer of the vault file, if there is one: which key it needs is read from its header, the key from
    /// the key store (or this process's cache), and checked against the header. Opens nothing: `verify` uses
    /// it on a file too damaged to open.
    func existingSealer() throws(VaultError) -> VaultSealer? {
        // The file's owner and mode are checked before its header is read (and again, on the descriptor, by the
        // store's open: PrefsKV's FileTrust).
        try checkFile()
        let inspection: PrefsInspection
        do {
            guard let found = try PrefsStore.inspect(id: service, directory: storeDirectory) else { return nil }
            inspection = found
        } catch let error as PrefsError {
            throw VaultError(error, vault: service)
        } catch {
            throw VaultError.wrapping(error, vault: service)
        }
        guard inspection.isSealed, let identity = KeyIdentity(encoded: inspection.keyCheck) else {
            let newer = inspection.isSealed && KeyIdentity.isNewerFormat(inspection.keyCheck)
            throw VaultError(
                code: newer ? .unsupportedVersion : .corrupted,
                message: "vault '\(service)': \(path) is not a SecureVault file this version reads ("
                    + "\(inspection.isSealed ? KeyIdentity.unreadableReason(inspection.keyCheck) : "it is not sealed")); "
                    + "it was left untouched", path: path)
        }
        guard identity.kind == configuration.keyStore.kind else {
            throw VaultError(
                code: .wrongKey,
                message: "vault '\(service)' was created with the \(identity.kind.name) key store, not "
                    + "\(configuration.keyStore.kind.name); the file was left untouched", path: path)
        }
        // A kernel keyring vault names its keyring: a search from another keyring could find the key (a session
        // keyring links the user keyring), and a rotation would then move it where it does not belong.
        if case .kernelKeyring(let keyring) = configuration.keyStore.storage, identity.argonPasses != 0,
            identity.argonPasses != keyring.code
        {
            let named = KeyStore.KernelKeyring.allCases.first { $0.code == identity.argonPasses }
            throw VaultError(
                code: .wrongKey,
                message:
                    "vault '\(service)' keeps its key in the kernel's \(named?.rawValue ?? "unknown") keyring, not "
                    + "the \(keyring.rawValue) keyring; the file was left untouched", path: path)
        }
        let sealer: VaultSealer
        let cacheKey = SealerCacheKey(path: path, identity: identity)
        if let cached = Self.sealers.withLock({ $0?.sealer(for: cacheKey) }) {
            sealer = cached
        } else if let fromCache = keys.cachedKey(identity).map({
            VaultSealer(masterKey: $0, identity: identity, service: service)
        }), fromCache.verifiesKeyCheck(inspection.keyCheck) {
            sealer = fromCache  // the per-session cache (Configuration.keyCache): a key that checks against this file
        } else {
            keys.dropCached(identity)  // a miss, or a cached key that does not check: never used
            guard let masterKey = try keys.load(identity, file: path) else {
                throw VaultError(
                    code: .keyMissing,
                    message: "vault '\(service)' has data in \(path) but its master key is not in the "
                        + "\(identity.kind.name) key store (deleted, or the keyring was reset); the file was left "
                        + "untouched: restore the key, or wipe the vault to start over", path: path)
            }
            sealer = VaultSealer(masterKey: masterKey, identity: identity, service: service)
            guard sealer.verifiesKeyCheck(inspection.keyCheck) else {
                throw VaultError(
                    code: .wrongKey,
                    message: "vault '\(service)': the \(identity.kind.name) key store returned a key that does not "
                        + "match the key check of \(path): a wrong passphrase or key, or the file was copied or "
                        + "renamed from another vault; the file was left untouched",
                    path: path)
            }
            keys.cache(masterKey, for: identity)
        }
        return sealer
    }

    /// Opens (or creates) the PrefsKV store with `sealer` and keeps it for later calls.
    private func adopt(sealer: VaultSealer) throws(VaultError) -> PrefsStore {
        var storeConfiguration = PrefsStore.Configuration()
        storeConfiguration.sealer = sealer
        storeConfiguration.durability = .synchronous
        // A vault never salvages silently: a damaged item would read as absent ("no token"), which is the
        // one answer it must not give. Damage is reported as corrupted; `recover()` salvages on request.
        storeConfiguration.recovery = .fail
        storeConfiguration.useLogger(of: configuration)
        let store = try prefs {
            try PrefsStore(id: service, directory: storeDirectory, configuration: storeConfiguration)
        }
        remember(sealer)
        return opened.withLock { open in
            if let existing = open { return existing.store }
            open = OpenVault(store: store, sealer: sealer)
            return store
        }
    }

    /// Forgets the open store and this process's cached key for the vault (after a rotation or a wipe).
    package func forgetKey() {
        opened.withLock { $0 = nil }
        let path = path
        Self.sealers.withLock { cache in cache = cache?.removing(path: path) }
    }

    /// Keeps `sealer` as this process's key for the vault file, so that later opens skip the key store.
    func remember(_ sealer: VaultSealer) {
        let key = SealerCacheKey(path: path, identity: sealer.identity)
        Self.sealers.withLock { cache in
            cache = CachedSealer(key: key, sealer: sealer, next: cache?.removing(key))
        }
    }

    /// Master keys read in this process, by vault file and key id: read once per process. A chain, newest first, as
    /// `lockHolders` is (one entry per vault file a process opened; a dictionary's or array's first use costs a
    /// fresh process the runtime's instantiation of its type; PerformanceIssues36-39.md, issue 39).
    static let sealers = SanitizedMutex<CachedSealer?>(nil)

    // MARK: Permissions

    /// The directory must be ours and closed to others; it is created 0700 when absent and `create` is set.
    ///
    /// - Returns: whether this call created it.
    @discardableResult
    func checkDirectory(create: Bool) throws(VaultError) -> Bool {
        switch Sys.lstat(storeDirectory) {
        case .success(let info):
            guard info.isDirectory else {
                throw VaultError(
                    code: .permissionDenied, message: "vault directory \(storeDirectory) is not a directory",
                    path: storeDirectory)
            }
            try checkOwnership(info, storeDirectory, what: "vault directory")
            return false
        case .failure(let error) where error == .noEntry:
            guard create else { return false }
            if case .failure(let error) = Sys.makePrivateDirectory(storeDirectory) {
                throw fileError(error, "cannot create the vault directory", storeDirectory)
            }
            return true
        case .failure(let error):
            throw fileError(error, "cannot inspect the vault directory", storeDirectory)
        }
    }

    /// The vault file must be a regular file of ours, closed to others.
    func checkFile() throws(VaultError) {
        switch Sys.lstat(path) {
        case .success(let info):
            guard info.isRegular else {
                throw VaultError(
                    code: .permissionDenied, message: "vault file \(path) is not a regular file",
                    path: path)
            }
            try checkOwnership(info, path, what: "vault file")
        case .failure(let error) where error == .noEntry:
            return
        case .failure(let error):
            throw fileError(error, "cannot inspect the vault file", path)
        }
    }

    /// Throws `permissionDenied` unless `info` (the `fstat` or `lstat` of `path`) shows a file of this user
    /// that other users cannot read or write.
    func checkOwnership(_ info: FileStatus, _ path: String, what: String) throws(VaultError) {
        try VaultError.requirePrivate(info, path, what: what)
    }
}

/// A sealer this process keeps for a vault file, and those cached before it (`Vault.sealers`). A chain is never
/// changed in place: a removal copies the nodes before the ones it drops.
final class CachedSealer: Sendable {
    let key: SealerCacheKey
    let sealer: VaultSealer
    let next: CachedSealer?

    init(key: SealerCacheKey, sealer: VaultSealer, next: CachedSealer?) {
        self.key = key
        self.sealer = sealer
        self.next = next
    }

    /// The sealer this chain keeps for `key`, if any.
    func sealer(for key: SealerCacheKey) -> VaultSealer? {
        var node: CachedSealer? = self
        while let cached = node {
            if cached.key == key { return cached.sealer }
            node = cached.next
        }
        return nil
    }

    /// This chain without the sealers of `key`.
    func removing(_ key: SealerCacheKey) -> CachedSealer? { removing { $0.key == key } }

    /// This chain without the sealers of the vault file `path`.
    func removing(path: String) -> CachedSealer? { removing { $0.key.path == path } }

    private func removing(where dropped: (CachedSealer) -> Bool) -> CachedSealer? {
        let rest = next?.removing(where: dropped)
        if dropped(self) { return rest }
        return rest === next ? self : CachedSealer(key: key, sealer: sealer, next: rest)
    }
}

/// Which cached sealer: the vault file and the key its header names.
struct SealerCacheKey: Equatable {
    var path: String
    var vaultIDHex: String
    var keyIDHex: String

    init(path: String, identity: KeyIdentity) {
        self.path = path
        vaultIDHex = identity.vaultIDHex
        keyIDHex = identity.keyIDHex
    }
}

extension PrefsStore.Configuration {
    /// The vault file's store logs where its vault does: the app's logger, else a default one labelled
    /// "securevault", made when something is logged.
    mutating func useLogger(of configuration: Vault.Configuration) {
        if let chosen = configuration.chosenLogger {
            logger = chosen
        } else {
            defaultLoggerLabel = VaultDefaults.loggerLabel
        }
    }
}
