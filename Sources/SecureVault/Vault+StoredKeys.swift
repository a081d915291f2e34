// The master keys the key stores keep for this library's vaults, and what became of each one's vault: a vault
// directory deleted by hand (an uninstall, `rm -rf`) leaves its key in the user's keyring for ever. For
// `vaultctl vault keys`, `vault forget-key` and `doctor`.
import Glibc
import PrefsKV
import SystemLayer

/// A master key that a key store keeps for a vault of this library, and whether its vault is still there.
package struct StoredVaultKey: Sendable, Equatable {
    /// Where the key is kept.
    package enum Place: Sendable, Equatable {
        /// An item of the Secret Service's default collection (its object path), of schema `dev.securevault.MasterKey`.
        case secretService(item: String)
        /// A "user" key `securevault:<service>:<vault id>:<key id>` linked into a kernel keyring.
        case kernelKeyring(KeyStore.KernelKeyring)
        /// A key file's or systemd credential's wrapped key, `<service>.<key id>.vaultkey` beside the vault file.
        case wrappedKeyFile(path: String)

        /// "secretService", "kernelKeyring:user", "wrappedKeyFile": the spelling of `Vault.status()`'s key stores.
        package var kind: String {
            switch self {
            case .secretService: return "secretService"
            case .kernelKeyring(let keyring): return "kernelKeyring:\(keyring.rawValue)"
            case .wrappedKeyFile: return "wrappedKeyFile"
            }
        }

        /// The item's object path, or the wrapped key's path; nil for a kernel key (its name says it all).
        package var location: String? {
            switch self {
            case .secretService(let item): return item
            case .kernelKeyring: return nil
            case .wrappedKeyFile(let path): return path
            }
        }
    }

    /// What became of the key's vault, as far as the directories looked in can tell.
    package enum Use: Sendable, Equatable {
        /// The vault's file names this key.
        case inUse(file: String)
        /// The vault's file is there and names another key of it: this one is left from a rotation or a key store
        /// migration that could not delete it (the vault's next rotation or wipe retries).
        case superseded(file: String)
        /// The key records where its vault lived, and no vault file there (or in the other directories looked in)
        /// names it: the vault was deleted by hand or moved. Why, in words.
        case orphaned(String)
        /// The key records no directory (a Secret Service key made before 0.2.0, a kernel keyring's key), and no vault
        /// in the directories looked in names it: its vault is gone, or lives in a directory not looked in.
        case unplaced(String)
        /// A file that may be its vault cannot be read: the key may be all that can ever open it again.
        case unreadable(file: String, reason: String)

        /// "inUse", "superseded", "orphaned", "unplaced" or "unreadable".
        package var name: String {
            switch self {
            case .inUse: return "inUse"
            case .superseded: return "superseded"
            case .orphaned: return "orphaned"
            case .unplaced: return "unplaced"
            case .unreadable: return "unreadable"
            }
        }

        /// Whether the directories looked in prove that no vault needs it (its vault names another key, or the
        /// directory it records holds no vault naming it): what `doctor` reports. An unplaced key is not: its vault
        /// may live in a directory not looked in.
        package var isUnused: Bool {
            switch self {
            case .superseded, .orphaned: return true
            case .inUse, .unreadable, .unplaced: return false
            }
        }

        /// In words, for a listing.
        package var detail: String {
            switch self {
            case .inUse(let file): return "\(file) names it"
            case .superseded(let file): return "\(file) names another key of this vault"
            case .orphaned(let why), .unplaced(let why): return why
            case .unreadable(let file, let reason): return "\(file) may be its vault and cannot be read: \(reason)"
            }
        }
    }

    /// The vault's service name.
    package var service: String
    /// The vault's random id (32 hex digits); nil for a wrapped key file, whose name holds the key id only.
    package var vaultID: String?
    /// The key's random id (16 hex digits).
    package var keyID: String
    /// The directory the key records for its vault: a Secret Service key made since 0.2.0, a wrapped key's own; nil
    /// when it records none.
    package var directory: String?
    package var place: Place
    package var use: Use
    /// The identity format the key is kept under (1: a legacy keyring item, whose attributes name no service).
    var format: UInt8 = 2
}

/// What ``Vault/storedKeys(searching:deadline:)`` found.
package struct StoredVaultKeys: Sendable {
    /// Every key found, sorted by service, then key store, then key id.
    package var keys: [StoredVaultKey] = []
    /// The key stores that could not be listed, and why (a locked keyring, no Secret Service).
    package var unlisted: [Unlisted] = []

    package struct Unlisted: Sendable {
        /// "secretService", "kernelKeyring:persistent".
        package var store: String
        package var error: VaultError
    }
}

/// What ``Vault/forgetKey(service:keyID:searching:prompting:deadline:)`` did to one key.
package struct ForgottenVaultKey: Sendable {
    package var key: StoredVaultKey
    /// The key store no longer holds it (a fresh listing finds it no more).
    package var removed: Bool
    /// Why a key that was there is still there (a delete the keyring asked to confirm and nobody did).
    package var keptKeyReason: String?
    /// What the key store may still keep of it, and how to purge that (KeePassXC's Recycle Bin).
    package var remainingCopy: String?
}

extension Vault {
    /// Every master key the reachable key stores keep for this library's vaults, each with what became of its
    /// vault: the Secret Service's items of schema `dev.securevault.MasterKey` (never another application's), the
    /// `securevault:` keys of the session, user and persistent kernel keyrings, and the wrapped key files in
    /// `directories`. A key's vault is looked for in the directory the key records and in `directories`. Reads
    /// no secret and never prompts; a key store that cannot be listed is named in ``StoredVaultKeys/unlisted``.
    package static func storedKeys(
        searching directories: [String], deadline: Duration = VaultDefaults.deadline
    ) -> StoredVaultKeys {
        var found = StoredVaultKeys()
        let searched = canonicalDirectories(directories)
        do throws(VaultError) {
            found.keys += try secretServiceKeys(deadline: deadline)
        } catch {
            found.unlisted.append(StoredVaultKeys.Unlisted(store: "secretService", error: error))
        }
        for keyring in KeyStore.KernelKeyring.allCases {
            let serial: Int32
            switch KernelKeys.serial(of: keyring) {
            case .success(let value): serial = value
            case .failure(let error):
                // No session keyring outside a login session, no persistent keyrings in this kernel: nothing kept.
                if KernelKeys.unavailability(error, keyring) != nil { continue }
                found.unlisted.append(kernelUnlisted(keyring, error))
                continue
            }
            switch KernelKeys.vaultKeyNames(in: serial) {
            case .success(let names):
                for name in names {
                    guard let parsed = KernelKeys.parse(name),
                        !found.keys.contains(where: {
                            $0.place == .kernelKeyring(keyring) && $0.keyID == parsed.keyIDHex
                        })
                    else { continue }
                    found.keys.append(
                        StoredVaultKey(
                            service: parsed.service, vaultID: parsed.vaultIDHex, keyID: parsed.keyIDHex,
                            directory: nil, place: .kernelKeyring(keyring), use: .unplaced("")))
                }
            case .failure(let error):
                found.unlisted.append(kernelUnlisted(keyring, error))
            }
        }
        found.keys += wrappedKeys(in: searched)
        for index in found.keys.indices {
            found.keys[index].use = use(of: found.keys[index], searching: searched)
        }
        found.keys.sort { ($0.service, $0.place.kind, $0.keyID) < ($1.service, $1.place.kind, $1.keyID) }
        return found
    }

    /// Deletes the master key `keyID` of vault `service` from every key store that keeps it, as a wipe deletes a
    /// key (a Secret Service item overwritten with random bytes, deleted, and searched for again; a kernel key
    /// invalidated; a wrapped key overwritten, flushed and removed), then lists the key stores again to check it
    /// is gone. Refuses a key a vault still uses: what becomes of its vault is decided again under the vault's
    /// lock in each directory looked in (so a rotation or a first write in progress is waited for).
    ///
    /// An unplaced key (it records no directory, and no vault in `directories` names it) is refused unless
    /// `allowingUnplaced`: its vault may live in a directory not looked in.
    ///
    /// - Throws: ``VaultError/Code/notFound`` when no reachable key store keeps it;
    ///   ``VaultError/Code/invalidKey`` when its vault's file names it (wipe that vault instead), or it is
    ///   unplaced and `allowingUnplaced` is false;
    ///   ``VaultError/Code/corrupted`` when a file that may be its vault cannot be read (the key may be all that
    ///   can open it); what listing a key store throws (`locked`, `unavailable`) when the key was not found and a
    ///   key store could not be listed; what a delete throws before anything changed.
    package static func forgetKey(
        service: String, keyID: String, searching directories: [String], allowingUnplaced: Bool = false,
        prompting: Prompting = .never, deadline: Duration = VaultDefaults.deadline
    ) throws(VaultError) -> [ForgottenVaultKey] {
        let matches: (StoredVaultKeys) -> [StoredVaultKey] = { listing in
            listing.keys.filter { $0.service == service && $0.keyID == keyID }
        }
        let listing = storedKeys(searching: directories, deadline: deadline)
        let chosen = matches(listing)
        guard !chosen.isEmpty else {
            // A keyring that could not be listed (locked) may hold it: its answer, not "none".
            if let unlisted = listing.unlisted.first(where: { $0.store == "secretService" }),
                unlisted.error.code != .unavailable
            {
                throw unlisted.error
            }
            throw VaultError(
                code: .notFound,
                message:
                    "no reachable key store keeps master key \(keyID) of vault '\(service)' (`vaultctl vault keys` "
                    + "lists the keys there are)")
        }
        let searched = canonicalDirectories(directories)
        var forgotten: [ForgottenVaultKey] = []
        for key in chosen {
            // Decided again under the lock of every directory its vault may be in: a vault being created or
            // rotated there is finished first.
            let lockDirectories = canonicalDirectories((key.directory.map { [$0] } ?? []) + directories)
            var deletion = try withVaultLocks(service: service, directories: lockDirectories) {
                () throws(VaultError) -> MasterKeys.Deletion in
                try refuseUnlessUnused(use(of: key, searching: searched), key, allowingUnplaced: allowingUnplaced)
                return try delete(key, prompting: prompting, deadline: deadline)
            }
            // Then checked: a fresh listing must no longer find it where it was.
            let after = storedKeys(searching: directories, deadline: deadline)
            if deletion.leftReason == nil, matches(after).contains(where: { $0.place == key.place }) {
                deletion.removed = false
                deletion.leftReason = "the \(key.place.kind) key store still keeps it after the delete"
            }
            forgotten.append(
                ForgottenVaultKey(
                    key: key, removed: deletion.removed, keptKeyReason: deletion.leftReason,
                    remainingCopy: deletion.keptCopy))
        }
        return forgotten
    }

    /// Throws unless `current` lets `forgetKey` delete `key`.
    private static func refuseUnlessUnused(
        _ current: StoredVaultKey.Use, _ key: StoredVaultKey, allowingUnplaced: Bool
    )
        throws(VaultError)
    {
        let (service, keyID) = (key.service, key.keyID)
        switch current {
        case .inUse(let file):
            throw VaultError(
                code: .invalidKey,
                message:
                    "master key \(keyID) of vault '\(service)' is in use: \(file) names it; nothing was deleted "
                    + "(to remove that vault and its key, wipe it)", path: file)
        case .unreadable(let file, let reason):
            throw VaultError(
                code: .corrupted,
                message:
                    "master key \(keyID) of vault '\(service)' was kept: \(file) may be its vault and cannot be "
                    + "read (\(reason)), and the key may be all that can open it again; nothing was deleted",
                path: file)
        case .unplaced(let why) where !allowingUnplaced:
            throw VaultError(
                code: .invalidKey,
                message:
                    "master key \(keyID) of vault '\(service)' was kept: \(why); give the directory its vault "
                    + "lived in (--dir), or forget it anyway only if you know that vault is gone (--unplaced)")
        case .superseded, .orphaned, .unplaced:
            break
        }
    }

    // MARK: Listing

    /// The vault master keys of the Secret Service's default collection.
    private static func secretServiceKeys(deadline: Duration) throws(VaultError) -> [StoredVaultKey] {
        let items: [LibSecret.ItemInfo]
        do {
            items = try LibSecret.items(schema: .vaultMasterKey, deadline: deadline)
        } catch {
            throw VaultError(error, operation: "listing the vault master keys of the Secret Service")
        }
        return items.compactMap { item -> StoredVaultKey? in
            guard let vault = item.attributes["vault"], vault.utf8.count == 32, isHex(vault),
                let key = item.attributes["key"], key.utf8.count == 16, isHex(key)
            else { return nil }
            let format: UInt8 = item.attributes["format"] == "1" ? 1 : 2
            // A legacy item names its service in its label only.
            let prefix = "SecureVault master key for '"
            let service =
                item.attributes["service"]
                ?? (item.label.hasPrefix(prefix) && item.label.hasSuffix("'")
                    ? String(item.label.dropFirst(prefix.count).dropLast()) : "")
            return StoredVaultKey(
                service: service, vaultID: vault, keyID: key, directory: item.attributes["directory"],
                place: .secretService(item: item.path), use: .unplaced(""), format: format)
        }
    }

    private static func kernelUnlisted(_ keyring: KeyStore.KernelKeyring, _ error: Errno) -> StoredVaultKeys.Unlisted {
        StoredVaultKeys.Unlisted(
            store: "kernelKeyring:\(keyring.rawValue)",
            error: VaultError(
                code: error == .accessDenied ? .permissionDenied : .unavailable,
                message: "listing the \(keyring.rawValue) kernel keyring: \(error.text)", cause: .errno(error.rawValue))
        )
    }

    /// The wrapped key files (`<service>.<16 hex digits>.vaultkey`) in `directories`.
    private static func wrappedKeys(in directories: [String]) -> [StoredVaultKey] {
        var keys: [StoredVaultKey] = []
        let suffix = ".vaultkey"
        for directory in directories {
            guard case .success(let names) = Sys.directoryEntries(directory) else { continue }
            for name in names where name.hasSuffix(suffix) {
                let stem = name.dropLast(suffix.count)
                guard let dot = stem.lastIndex(of: "."), dot != stem.startIndex else { continue }
                let keyID = String(stem[stem.index(after: dot)...])
                guard keyID.utf8.count == 16, isHex(keyID) else { continue }
                keys.append(
                    StoredVaultKey(
                        service: String(stem[..<dot]), vaultID: nil, keyID: keyID, directory: directory,
                        place: .wrappedKeyFile(path: Sys.joinPath(directory, name)), use: .unplaced("")))
            }
        }
        return keys
    }

    /// What became of `key`'s vault: its file looked for in the directory the key records, then in `searched`.
    private static func use(of key: StoredVaultKey, searching searched: [String]) -> StoredVaultKey.Use {
        guard Names.isValid(key.service, as: .fileName) else {
            return .orphaned("no vault can be named '\(key.service)' (it is no file name)")
        }
        let recorded = key.directory.flatMap { Sys.canonicalPath($0) }
        if let directory = key.directory, recorded == nil, case .failure(let error) = Sys.stat(directory),
            error != .noEntry, error.rawValue != ENOTDIR
        {
            // Not there to look at (a parent closed to us, an I/O error), which is not gone.
            return .unreadable(file: directory, reason: "its directory cannot be looked at: \(error.text)")
        }
        let directories = canonicalDirectories((recorded.map { [$0] } ?? []) + searched)
        var superseded: String?
        var unreadable: (file: String, reason: String)?
        for directory in directories {
            let inspection: PrefsInspection?
            do {
                inspection = try PrefsStore.inspect(id: key.service, directory: directory)
            } catch {
                let file = Sys.joinPath(directory, key.service + ".prefs")
                if unreadable == nil { unreadable = (file, VaultError.wrapping(error, vault: key.service).message) }
                continue
            }
            guard let inspection, let identity = KeyIdentity(encoded: inspection.keyCheck) else {
                if let inspection, inspection.isSealed, unreadable == nil {
                    unreadable = (inspection.path, KeyIdentity.unreadableReason(inspection.keyCheck))
                }
                continue  // no file, or a plain store of the same name
            }
            let sameVault = key.vaultID == nil || key.vaultID == identity.vaultIDHex
            if sameVault, identity.keyIDHex == key.keyID { return .inUse(file: inspection.path) }
            if sameVault, superseded == nil { superseded = inspection.path }
        }
        if let unreadable { return .unreadable(file: unreadable.file, reason: unreadable.reason) }
        if let superseded { return .superseded(file: superseded) }
        let looked = directories.isEmpty ? "no directory" : directories.joined(separator: ", ")
        if let directory = key.directory {
            let place =
                recorded == nil
                ? "its directory \(directory) is gone" : "no vault file in its directory \(directory) names it"
            return .orphaned(place + (directories.count > 1 ? " (nor in \(looked))" : ""))
        }
        return .unplaced(
            "it records no directory, and no vault file in \(looked) names it: its vault is gone, or lives in a "
                + "directory not looked in (--dir)")
    }

    /// The existing directories among `paths`, canonical, without repeats, in their order.
    private static func canonicalDirectories(_ paths: [String]) -> [String] {
        var seen: [String] = []
        for path in paths {
            guard let canonical = Sys.canonicalPath(path), !seen.contains(canonical) else { continue }
            seen.append(canonical)
        }
        return seen
    }

    /// Runs `body` holding the lock of vault `service` in each of `directories` that has its file or its lock file
    /// (taken in sorted order). A directory with neither has no vault of `service`, and none being made (a vault
    /// is made under its lock).
    private static func withVaultLocks<R>(
        service: String, directories: [String], _ body: () throws(VaultError) -> R
    ) throws(VaultError) -> R {
        let present = directories.filter { directory in
            Sys.exists(Sys.joinPath(directory, service + ".prefs"))
                || Sys.exists(Sys.joinPath(directory, service + ".vault.lock"))
        }
        guard let first = present.sorted().first else { return try body() }
        let vault: Vault
        do {
            vault = try Vault(service: service, configuration: Configuration(directory: first))
        } catch {
            throw VaultError.wrapping(error, vault: service)
        }
        return try vault.withVaultLock { () throws(VaultError) -> R in
            try withVaultLocks(service: service, directories: present.sorted().dropFirst().map { $0 }, body)
        }
    }

    // MARK: Deleting

    /// Deletes `key` as a wipe deletes its vault's key (``MasterKeys/delete(_:deletePrompt:)``).
    private static func delete(
        _ key: StoredVaultKey, prompting: Prompting, deadline: Duration
    ) throws(VaultError)
        -> MasterKeys.Deletion
    {
        let store: KeyStore
        let kind: KeyIdentity.Kind
        switch key.place {
        case .secretService:
            store = .secretService
            kind = .secretService
        case .kernelKeyring(let keyring):
            store = .kernelKeyring(keyring)
            kind = .kernelKeyring
        case .wrappedKeyFile:
            store = .keyFile("")  // a wrapped key is deleted by its path alone; the root secret is not read
            kind = .keyFile
        }
        var keys = MasterKeys(
            store: store, service: key.service, directory: key.directory ?? ".", deadline: deadline)
        keys.prompting = prompting
        var identity = KeyIdentity(
            kind: kind, vaultID: key.vaultID.flatMap { bytes(hex: $0) } ?? Array(repeating: 0, count: 16),
            keyID: bytes(hex: key.keyID)!)
        identity.format = key.format
        return try keys.delete(identity)
    }
}
