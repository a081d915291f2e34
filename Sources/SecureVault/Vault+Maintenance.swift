package import FoundationEssentials
public import PrefsKV
import Synchronization
import SystemLayer

extension Vault {
    /// Re-encrypts every item under a new master key, atomically (a new file image swapped in), then deletes
    /// the old key from the key store. Other processes pick the new key up on their next access.
    ///
    /// Only a file that proves it is this vault's is rotated: its key check must verify, for this service, with
    /// the key it names (a file copied or renamed from another vault is ``VaultError/Code/wrongKey`` and left
    /// untouched). A legacy vault (written before identity format 2) gets a format-2 identity; its old keyring
    /// item is deleted only if it carries the label this vault writes (see `wipe()`).
    ///
    /// ```swift
    /// let report = try vault.rotateKey()
    /// if let copy = report.remainingCopy { print(copy) }   // KeePassXC's Recycle Bin may keep the old key
    /// ```
    ///
    /// The old key is deleted as `wipe()` deletes one (overwritten, deleted, checked gone); a delete the key
    /// store does not complete leaves the data safe under the new key and is retried by the next rotation or
    /// wipe, never by an open. Also retries such deletes left by earlier calls. A vault with no file has nothing
    /// to rotate and returns at once.
    @discardableResult
    public func rotateKey() throws -> VaultRotationReport {
        try perform("rotating the master key of vault '\(service)'") { () throws(VaultError) -> VaultRotationReport in
            try rekey(to: keys, moving: false)
        }
    }

    /// Moves the vault to another key store: every item is re-encrypted under a new master key made in `target`
    /// (atomically, as `rotateKey()` does), then the old key is deleted from this vault's key store. Crash-safe
    /// like a rotation: the vault always opens under exactly one of the two keys, and the journal deletes the
    /// other whichever key store it is in. Afterwards open the vault with a configuration naming `target`: this
    /// handle forgets the key, and its key store no longer opens the file (``VaultError/Code/wrongKey``) unless
    /// `target` is that same key store.
    ///
    /// ```swift
    /// try vault.migrateKey(to: .systemdCredential(name: "app-vault"))
    /// var configuration = vault.configuration
    /// configuration.keyStore = .systemdCredential(name: "app-vault")
    /// let migrated = try Vault(service: vault.service, configuration: configuration)
    /// ```
    ///
    /// A vault with no file has nothing to move and returns at once. `target` may be the key store the vault
    /// is in (a rotation). The report says what happened to the old key, as for a rotation.
    @discardableResult
    public func migrateKey(to target: KeyStore) throws -> VaultRotationReport {
        try perform("moving the master key of vault '\(service)' to the \(target) key store") {
            () throws(VaultError) -> VaultRotationReport in
            if case .systemdCredential(let name, _) = target.storage {
                try Self.validate(name: name, what: "systemd credential name", as: .fileName)
            }
            var targetKeys = keys
            targetKeys.store = target
            targetKeys.cache = nil
            return try rekey(to: targetKeys, moving: true)
        }
    }

    /// Re-encrypts every item under a new key made by `targetKeys` (this vault's own for a rotation), then
    /// deletes the old key. Both keys are journaled before the new one is made: whichever one the file does not
    /// use after a crash is garbage, and the next open deletes it from its own key store.
    private func rekey(to targetKeys: MasterKeys, moving: Bool) throws(VaultError) -> VaultRotationReport {
        try withVaultLock { () throws(VaultError) -> VaultRotationReport in
            try finishIntents(retryingDeferred: true)
            guard let store = try openStore(create: false), let old = opened.withLock({ $0?.sealer }) else {
                return VaultRotationReport()
            }
            if keys.cache != nil {
                // The key may have come from the per-session cache: the key store itself must still yield it,
                // or a passphrase typed wrong would re-key the vault under the typo.
                guard let direct = try keys.load(old.identity, file: path),
                    VaultSealer(masterKey: direct, identity: old.identity, service: service)
                        .verifiesKeyCheck(old.keyCheck)
                else {
                    throw VaultError(
                        code: .wrongKey,
                        message: "vault '\(service)': the \(configuration.keyStore) key store does not yield the "
                            + "vault's current key (a wrong passphrase?), which the per-session cache alone "
                            + "cannot stand in for in a rotation; nothing was changed", path: path)
                }
            }
            var next = KeyIdentity.random(kind: targetKeys.store.kind, vaultID: old.identity.vaultID)
            // Should we die before the re-key, the new key is garbage; after it, the old one is.
            try recordIntents([
                VaultIntent(.drop, next, store: moving ? targetKeys.store.spelling : nil),
                VaultIntent(.drop, old.identity, store: moving ? keys.store.spelling : nil),
            ])
            let masterKey: SecretBytes
            do throws(VaultError) {
                masterKey = try targetKeys.create(&next)
            } catch {
                settleFailedKeyChange(made: next, in: targetKeys)
                throw error
            }
            let sealer = VaultSealer(masterKey: masterKey, identity: next, service: service)
            do throws(VaultError) {
                try prefs { try store.rekey(to: sealer) }
            } catch {
                settleFailedKeyChange(made: next, in: targetKeys)
                // A re-key that failed after its rename (the image changed under it) left the file under the new
                // key: this handle forgets the old one and reads the file's header again at its next access.
                forgetKey()
                throw error
            }
            forgetKey()
            if moving {
                opened.withLock { $0 = nil }  // this handle's key store no longer opens the file
            } else {
                remember(sealer)
                opened.withLock { $0 = OpenVault(store: store, sealer: sealer) }
            }
            // The open above proved the file owns the old key (its key check verified for this service); a
            // legacy item labelled for another vault is still left (MasterKeys.delete).
            var report = VaultRotationReport()
            let deletion: MasterKeys.Deletion
            do throws(VaultError) {
                // The re-keyed file's name durable before the old key goes: a re-key whose directory flush failed
                // has taken effect, but a power cut could bring the old-key file back, which its key must still
                // open. (`sync()` flushes the directory again and throws while it fails.) Kept, its delete is
                // journaled for the next rotation or wipe, as a delete the key store refused.
                try prefs { try store.sync() }
                deletion = try keys.delete(old.identity)
            } catch {
                deletion = MasterKeys.Deletion(removed: false, leftReason: error.message)
            }
            report.removedOldKey = deletion.removed
            report.remainingCopy = deletion.keptCopy
            if let reason = deletion.leftReason {
                // The data is safe under the new key; the old one is retried by the next rotation or wipe.
                try recordIntents([
                    VaultIntent(.drop, old.identity, deferred: true, store: moving ? keys.store.spelling : nil)
                ])
                report.keptKeyReason = reason
                logger.warning(
                    "vault '\(service)' was re-keyed, but its old master key was not deleted yet (the next rotation or wipe retries): \(reason)"
                )
            } else {
                clearIntents()
                if !deletion.removed, old.identity.format < 2, case .secretService = configuration.keyStore.storage {
                    report.keptKeyReason =
                        "its old (legacy) keyring item is not labelled \"\(keys.label)\", so it was left"
                    logger.notice(
                        "vault '\(service)' was re-keyed; its old (legacy) keyring item is not labelled \"\(keys.label)\", so it was left"
                    )
                }
            }
            if let copy = report.remainingCopy {
                logger.notice("vault '\(service)' was re-keyed; the key store may keep a copy of the old key: \(copy)")
            }
            return report
        }
    }

    /// After a re-key that failed part way, the journal decides as after a crash: whichever of the two keys the
    /// file does not name is deleted, and a delete the key store cannot complete stays as a deferred line for the
    /// next rotation or wipe. A failed call may still have made the new key (a D-Bus reply lost when the bus went:
    /// the keyring made the item), so its line is dropped only once the key store confirms the key gone; and the
    /// file is asked which key it uses rather than assumed to use the old one.
    /// The deferred deletes of earlier calls are not retried again (the re-key did that first: on a dead bus each
    /// costs a deadline), and no delete prompt is performed.
    private func settleFailedKeyChange(made next: KeyIdentity, in targetKeys: MasterKeys) {
        _ = try? finishIntents(made: (next, targetKeys))
    }

    /// Removes everything: the master key from the key store first (so nothing left on disk can ever be
    /// decrypted), then the vault's files. Works when the key is already gone (a keyring reset).
    ///
    /// ```swift
    /// try vault.wipe()     // logout: nothing of the vault remains
    /// ```
    ///
    /// Deletes only a key the file in hand proves it owns: the key is loaded and the file's key check must
    /// verify with it for this service, so wiping a file copied or renamed from another vault removes that file
    /// and leaves the other vault's key. A legacy file (identity format 1, whose key check names no service) has
    /// its keyring item deleted only if the item carries the label this vault writes, `SecureVault master key
    /// for '<service>'`.
    ///
    /// A Secret Service key is overwritten with random bytes, deleted, and a fresh search checks that it is
    /// gone. A delete the key store does not complete (KeePassXC asking to confirm it, and nobody confirming
    /// within the deadline) does not stop the wipe: the file is removed, the report says the key was left and
    /// why, and the next `wipe()` or `rotateKey()` of this service retries (a wipe with no file left does
    /// only that). The report also says when the key store may keep a copy of a deleted key (KeePassXC's
    /// Recycle Bin and entry History). A delete whose answer was lost (a timeout, an I/O error: the key may be
    /// overwritten, or not) is one of those: the file is removed and the report says the key may be left.
    ///
    /// - Returns: what happened to the master key.
    @discardableResult
    public func wipe() throws -> VaultWipeReport {
        try perform("wiping vault '\(service)'") { () throws(VaultError) -> VaultWipeReport in
            try withVaultLock { () throws(VaultError) -> VaultWipeReport in
                let retried = try finishIntents(retryingDeferred: true)
                let inspection: PrefsInspection?
                do {
                    inspection = try PrefsStore.inspect(id: service, directory: storeDirectory)
                } catch {
                    // An unreadable file has no key we can name: remove the file all the same.
                    inspection = nil
                }
                var report = VaultWipeReport()
                // A wipe with no file left finishes the deletes an earlier one could not complete.
                if inspection == nil, !retried.isEmpty {
                    report.removedKey = retried.contains { $0.removed }
                    report.keptKeyReason = retried.compactMap(\.leftReason).first
                    report.remainingCopy = retried.compactMap(\.keptCopy).first
                }
                if let inspection, let identity = KeyIdentity(encoded: inspection.keyCheck) {
                    keys.dropCached(identity)  // whatever happens to the key store's copy
                    switch try keys.ownership(of: identity, keyCheck: inspection.keyCheck, file: path) {
                    case .absent:
                        break
                    case .notOwned(let reason):
                        report.keptKeyReason = reason
                    case .owned:
                        // Once the key is gone the wipe must finish, even if we die: journal it first.
                        try recordIntents([VaultIntent(.wipe, identity)])
                        let deletion: MasterKeys.Deletion
                        do throws(VaultError) {
                            deletion = try keys.delete(identity)
                        } catch {
                            // A refusal changed nothing (MasterKeys.delete): the vault is intact and the caller
                            // learns why. A delete whose outcome is unknown (its reply lost: the key may already
                            // hold random bytes, and the file may no longer open) is a delete that could not be
                            // confirmed: the wipe goes on, as for a delete left undone below.
                            guard keys.outcomeUnknown(failingWith: error) else {
                                clearIntents()
                                throw error
                            }
                            deletion = MasterKeys.Deletion(
                                removed: false,
                                leftReason: "the key store's answer to the delete was lost (\(error.message)): the key "
                                    + "may be left; the next wipe or rotation retries")
                        }
                        report.removedKey = deletion.removed
                        report.remainingCopy = deletion.keptCopy
                        if let reason = deletion.leftReason {
                            // The file goes all the same (its key now holds random bytes); the key is retried. The
                            // wipe line stays until the file is gone, so a crash before that still removes it.
                            report.keptKeyReason = reason
                            try recordIntents([
                                VaultIntent(.wipe, identity), VaultIntent(.drop, identity, deferred: true),
                            ])
                        } else if !deletion.removed, identity.format < 2,
                            case .secretService = configuration.keyStore.storage
                        {
                            report.keptKeyReason =
                                "the legacy keyring item of the key \(path) names is not labelled "
                                + "\"\(keys.label)\" (the file was copied or renamed from another vault, whose key "
                                + "it is), so it was left"
                        }
                    }
                }
                if let reason = report.keptKeyReason {
                    logger.notice("wiping vault '\(service)' left a master key: \(reason)")
                }
                if let copy = report.remainingCopy {
                    logger.notice("wiping vault '\(service)': the key store may keep a copy of its key: \(copy)")
                }
                forgetKey()
                _ = try prefs { try PrefsStore.destroy(id: service, directory: storeDirectory, evenIfOpen: true) }
                keys.fileKeys?.removeStrays()
                clearIntents()  // deferred deletes stay for the next maintenance call
                if !hasPendingIntents {
                    // Nothing of the vault is left but its lock file: it goes too (withVaultLock's waiters
                    // lock the new one).
                    _ = Sys.removeIfPresent(lockPath)
                    Sys.syncDirectory(storeDirectory)
                }
                return report
            }
        }
    }

    /// Creates the vault now (its file, and its master key in the key store) instead of at its first write:
    /// for `vaultctl vault init`, which provisions a vault before an app runs.
    ///
    /// - Returns: true when it was created, false when it already existed (then it is opened, which checks
    ///   that its key is there).
    package func initialize() throws -> Bool {
        try perform("creating vault '\(service)'") { () throws(VaultError) -> Bool in
            if try openStore(create: false) != nil { return false }
            _ = try openStore(create: true)
            return true
        }
    }

    /// Asks the key store, through its prompts, for what this vault needs: the default keyring unlocked and,
    /// when the vault has a file, this program's access to its key (KeePassXC approves per item and per
    /// program, until the program exits). For `vaultctl vault unlock`; an app sets
    /// ``Configuration/prompting`` instead.
    ///
    /// - Returns: whether the vault's key was read (false: no file yet, or a key store that is not the
    ///   Secret Service). A file whose key is not in the keyring is ``VaultError/Code/keyMissing``.
    package func unlockKeyStore(deadline: Duration) throws -> Bool {
        try perform("unlocking the keyring of vault '\(service)'") { () throws(VaultError) -> Bool in
            guard case .secretService = configuration.keyStore.storage else { return false }
            do throws(SecretServiceFailure) {
                try LibSecret.unlock(deadline: deadline)
            } catch {
                throw VaultError(error, operation: "unlocking the keyring of vault '\(service)'")
            }
            var prompting = keys
            prompting.prompting = .allowed(deadline: deadline)
            guard let identity = try existingIdentity() else { return false }
            guard try prompting.load(identity, file: path) != nil else {
                throw VaultError(
                    code: .keyMissing,
                    message: "vault '\(service)': the keyring is unlocked, but the master key \(path) names is not "
                        + "in it (deleted, or the keyring was reset)", path: path)
            }
            return true
        }
    }

    /// Salvages a damaged vault file: keeps every item whose record still verifies, moves the damaged original
    /// aside read-only, and reports what was kept and lost. A clean vault is left as it is.
    ///
    /// ```swift
    /// if case .unavailable(.corrupted) = vault.sessionToken() {
    ///     let report = try vault.recover()
    ///     print(report?.recordsLost ?? 0, "items lost")
    /// }
    /// ```
    ///
    /// - Returns: the recovery report, or nil when there was nothing to recover.
    @discardableResult
    public func recover() throws -> PrefsRecoveryReport? {
        try perform("recovering vault '\(service)'") { () throws(VaultError) -> PrefsRecoveryReport? in
            forgetKey()
            guard let identity = try existingIdentity() else { return nil }
            guard let masterKey = try keys.load(identity, file: path) else {
                throw VaultError(
                    code: .keyMissing,
                    message: "vault '\(service)' cannot be recovered: its master key is not in the key store",
                    path: path)
            }
            var storeConfiguration = PrefsStore.Configuration()
            storeConfiguration.sealer = VaultSealer(masterKey: masterKey, identity: identity, service: service)
            storeConfiguration.durability = .synchronous
            storeConfiguration.recovery = .salvage
            storeConfiguration.useLogger(of: configuration)
            let store = try prefs {
                try PrefsStore(id: service, directory: storeDirectory, configuration: storeConfiguration)
            }
            return store.lastRecovery
        }
    }

    /// The identity in the header of the vault's file (which key store, vault id, key id), nil when there is no
    /// file. Reads the header only: needs no key and never asks the key store.
    package func existingIdentity() throws(VaultError) -> KeyIdentity? {
        let inspection: PrefsInspection?
        do {
            inspection = try PrefsStore.inspect(id: service, directory: storeDirectory)
        } catch {
            throw VaultError.wrapping(error, vault: service)
        }
        guard let inspection else { return nil }
        guard let identity = KeyIdentity(encoded: inspection.keyCheck) else {
            throw VaultError(
                code: .corrupted,
                message: "vault '\(service)': \(path) is not a SecureVault file this version reads ("
                    + "\(KeyIdentity.unreadableReason(inspection.keyCheck)))", path: path)
        }
        return identity
    }
}

/// One item as `vaultctl vault list` shows it: never its value.
package struct VaultItemInfo: Sendable, Equatable {
    package var key: String
    package var kind: String
    package var size: Int
    package var createdAt: Date
    package var updatedAt: Date
    package var expiresAt: Date?
}

/// What `verify` found.
package struct VaultVerifyReport: Sendable {
    package var itemsOpened: Int
    package var failures: [(key: String, error: VaultError)]
    package var damage: [PrefsDamage]
    package var isClean: Bool { failures.isEmpty && damage.isEmpty }
}

extension Vault {
    /// Every item's metadata (opening each item, never returning its value).
    package func items() throws -> [VaultItemInfo] {
        try allKeys().compactMap { key in try item(key) }
    }

    /// One item's metadata (opening the item, never returning its value); nil when there is no such item.
    package func item(_ key: String) throws -> VaultItemInfo? {
        try read(key, "reading item '\(key)'") { envelope, payload in
            VaultItemInfo(
                key: key, kind: envelope.kind.name, size: payload.count,
                createdAt: Date(timeIntervalSince1970: Double(envelope.createdAt) / 1000),
                updatedAt: Date(timeIntervalSince1970: Double(envelope.updatedAt) / 1000),
                expiresAt: envelope.expiresAt == 0
                    ? nil : Date(timeIntervalSince1970: Double(envelope.expiresAt) / 1000))
        }
    }

    /// Checks every record's checksum and opens every item with the key.
    package func verify() throws -> VaultVerifyReport {
        // The key, not an open store: a file whose damage or tampering keeps it from opening is what verify
        // must still describe. The scan authenticates every record with the key.
        guard let sealer = try opened.withLock({ $0?.sealer }) ?? existingSealer() else {
            throw VaultError(code: .notFound, message: "vault '\(service)' has no file at \(path)")
        }
        let damage: [PrefsDamage]
        do {
            damage = try PrefsStore.verify(id: service, directory: storeDirectory, sealer: sealer).damage
        } catch {
            throw VaultError.wrapping(error, vault: service)
        }
        // A damaged vault does not open (it never salvages on its own): no item is opened then.
        guard damage.isEmpty else { return VaultVerifyReport(itemsOpened: 0, failures: [], damage: damage) }
        guard let store = try openStore(create: false) else {
            throw VaultError(code: .notFound, message: "vault '\(service)' has no file at \(path)")
        }
        var opened = 0
        var failures: [(key: String, error: VaultError)] = []
        let names = try prefs { try store.allKeys.sorted() }
        for key in names {
            do {
                _ = try read(key, "verifying item '\(key)'") { _, payload in payload.count }
                opened += 1
            } catch let error as VaultError {
                failures.append((key, error))
            }
        }
        return VaultVerifyReport(itemsOpened: opened, failures: failures, damage: damage)
    }
}
