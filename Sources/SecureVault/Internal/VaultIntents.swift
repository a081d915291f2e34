import PrefsKV
import SystemLayer

/// A small journal that lets a wipe or a key rotation finish after a crash.
///
/// `<service>.vault.intent` holds one line per intent, written durably before the step it protects:
/// - `wipe <vault id> <key id> <format>`: a wipe was under way: delete that key, then the vault file.
/// - `drop <vault id> <key id> <format>`: that key is garbage (the unused half of a rotation): delete it,
///   unless the vault file turns out to use it.
/// `<format>` is the identity's key-store format (`KeyIdentity.keyStoreFormat`: 2 for identity formats 2 and 3),
/// which decides how the key is named in the key store (a line without it, from before format 2, is format 1). A line may end with `store=<hex>`: the key is in that key store (the
/// hex of its `KeyStore.spelling`, as `vaultctl --key-store` spells it), not the configured one: the two keys
/// of a migration (``Vault/migrateKey(to:)``) are in two key stores, and the next open may be configured with
/// either. Only keys the vault proved it owns are journaled, and a replay deletes
/// with the same rules as the first attempt (the service attribute for format 2, the label for format 1).
/// The next process to open the vault (under the vault lock) finishes what the journal says, then removes the
/// lines it finished. An open never performs a delete prompt (KeePassXC returns one for every delete): such a
/// delete is dismissed unperformed and kept as a deferred line.
///
/// A delete the key store could not complete (a locked keyring, an access not approved, a delete the provider
/// asked to confirm) is kept as `drop <vault id> <key id> <format> deferred`: an open never retries it (it
/// would cost every launch a deadline, and on a desktop a dialog each time); the next explicit maintenance
/// call (`Vault.wipe()`, `Vault.rotateKey()`) does. A wipe whose key could not be deleted still removes
/// the vault file, and leaves such a line for its key.
struct VaultIntent: Equatable {
    enum Kind: String { case wipe, drop }

    var kind: Kind
    var vaultIDHex: String
    var keyIDHex: String
    var format: UInt8
    /// A delete the key store could not complete: retried by maintenance calls only, never by an open.
    var deferred = false
    /// The key store holding the key (its spelling), when it is not the configured one.
    var store: String?

    init(_ kind: Kind, _ identity: KeyIdentity, deferred: Bool = false, store: String? = nil) {
        self.kind = kind
        vaultIDHex = identity.vaultIDHex
        keyIDHex = identity.keyIDHex
        format = identity.keyStoreFormat
        self.deferred = deferred
        self.store = store
    }

    init?(line: Substring) {
        var parts = line.split(separator: " ")
        if let last = parts.last, last.hasPrefix("store=") {
            guard let bytes = KeyIdentity.bytes(hex: String(last.dropFirst("store=".count))) else { return nil }
            store = String(decoding: bytes, as: UTF8.self)
            parts.removeLast()
        }
        if parts.count == 5, parts[4] == "deferred" {
            deferred = true
            parts.removeLast()
        }
        guard parts.count == 3 || parts.count == 4, let kind = Kind(rawValue: String(parts[0])) else { return nil }
        self.kind = kind
        vaultIDHex = String(parts[1])
        keyIDHex = String(parts[2])
        guard let format = parts.count == 4 ? UInt8(parts[3]) : 1 else { return nil }
        self.format = format
    }

    var line: String {
        "\(kind.rawValue) \(vaultIDHex) \(keyIDHex) \(format)" + (deferred ? " deferred" : "")
            + (store.map { " store=" + hex($0.utf8) } ?? "")
    }

    /// Whether the line names `identity`'s key: by its ids alone. The format is left out because a key file's
    /// and a kernel key's names do not carry it: a line naming the live key under another format must not
    /// delete it.
    func matches(_ identity: KeyIdentity) -> Bool {
        identity.vaultIDHex == vaultIDHex && identity.keyIDHex == keyIDHex
    }
}

extension Vault {
    var intentPath: String { Sys.joinPath(storeDirectory, service + ".vault.intent") }

    /// Records `intents` durably, replacing earlier ones except the deferred deletes (which stay until a
    /// maintenance call completes them).
    func recordIntents(_ intents: [VaultIntent]) throws(VaultError) {
        let deferred = deferredIntentsOnDisk().filter { !intents.contains($0) }
        try writeJournal(deferred + intents)
    }

    /// Forgets the intents of the step that just completed, keeping the deferred deletes.
    func clearIntents() {
        let deferred = deferredIntentsOnDisk()
        if deferred.isEmpty || (try? writeJournal(deferred)) == nil { removeJournal() }
    }

    private func writeJournal(_ intents: [VaultIntent]) throws(VaultError) {
        let text = intents.map(\.line).joined(separator: "\n") + "\n"
        if case .failure(let error) = Sys.writeFileDurably(intentPath, Array(text.utf8), directory: storeDirectory) {
            throw fileError(error, "cannot record an intent in", intentPath)
        }
    }

    private func removeJournal() {
        _ = Sys.removeIfPresent(intentPath)
        Sys.syncDirectory(storeDirectory)
    }

    /// The deferred deletes the journal holds (only rewritten here: `finishIntents` checks the journal's owner
    /// before it acts on a line).
    private func deferredIntentsOnDisk() -> [VaultIntent] {
        guard let bytes = Sys.readSmallFile(intentPath) else { return [] }
        return String(decoding: bytes, as: UTF8.self).split(separator: "\n").compactMap(VaultIntent.init(line:))
            .filter(\.deferred)
    }

    /// Whether a crashed wipe or rotation left work to finish (one `lstat`).
    package var hasPendingIntents: Bool { Sys.exists(intentPath) }

    /// Finishes what a crashed wipe or rotation left, and, when `retryingDeferred` (a maintenance call),
    /// retries the deletes the key store could not complete before. Call with the vault lock held.
    ///
    /// - Parameter made: a key this process just made and the key store object that holds it (a failed re-key
    ///   settling its journal): its line is acted on with that object, not one parsed from the line's spelling
    ///   (which cannot name an in-memory key store, nor tell two apart).
    /// - Returns: what each attempted delete did (empty when the journal held nothing to attempt).
    @discardableResult
    func finishIntents(retryingDeferred: Bool = false, made: (identity: KeyIdentity, keys: MasterKeys)? = nil)
        throws(VaultError) -> [MasterKeys.Deletion]
    {
        let fd: Int32
        switch Sys.open(intentPath, .readOnly) {
        case .success(let opened): fd = opened
        case .failure(let error) where error == .noEntry: return []
        case .failure(let error): throw fileError(error, "cannot open the intent journal", intentPath)
        }
        // A journal planted by another user (or one others may write) is refused before a line of it is read:
        // it names master keys to delete.
        let read: [UInt8]?
        do throws(VaultError) {
            switch Sys.fstat(fd) {
            case .success(let info): try checkOwnership(info, intentPath, what: "vault intent journal")
            case .failure(let error): throw fileError(error, "cannot inspect", intentPath)
            }
            read = Sys.readSmallFile(fd)
            Sys.close(fd)
        } catch {
            Sys.close(fd)
            throw error
        }
        guard let bytes = read else { return [] }
        let intents = String(decoding: bytes, as: UTF8.self).split(separator: "\n").compactMap(VaultIntent.init(line:))
        // The identity the vault file names; when the file exists but its header cannot be read (damaged,
        // unreadable), which key it uses is unknown, and no `drop` line is acted on: deleting a key on a guess
        // could delete the one the file needs (recover() may still salvage it).
        var current: KeyIdentity?
        var headerKnown = true
        do {
            current = try existingIdentity()
        } catch {
            headerKnown = false
        }
        var kept: [VaultIntent] = []
        var attempted: [MasterKeys.Deletion] = []
        /// Deletes the key, or keeps a deferred line for it (a delete the key store could not complete).
        func drop(_ identity: KeyIdentity, _ intent: VaultIntent, from keys: MasterKeys) {
            let deletion: MasterKeys.Deletion
            do throws(VaultError) {
                // An open never shows the provider's delete prompt; a maintenance call performs it.
                deletion = try keys.delete(identity, deletePrompt: retryingDeferred ? .perform : .skip)
            } catch {
                deletion = MasterKeys.Deletion(removed: false, leftReason: error.message)
            }
            attempted.append(deletion)
            if let reason = deletion.leftReason {
                let line = VaultIntent(.drop, identity, deferred: true, store: intent.store)
                if !kept.contains(line) { kept.append(line) }
                logger.warning(
                    "vault '\(service)': a master key that is no longer used (key id \(intent.keyIDHex)) was not deleted yet; the next rotation or wipe retries: \(reason)"
                )
            }
        }
        for intent in intents {
            // The key store the line names (a migration's other key store), else the configured one.
            var keys = self.keys
            if let made, intent.matches(made.identity) {
                keys = made.keys
            } else if let spelling = intent.store, spelling != keys.store.spelling {
                guard let store = KeyStore(spelling: spelling) else {
                    if !kept.contains(intent) { kept.append(intent) }  // a key store only the app can name
                    continue
                }
                keys.store = store
                keys.cache = nil
            }
            guard
                let identity = KeyIdentity(
                    vaultIDHex: intent.vaultIDHex, keyIDHex: intent.keyIDHex, kind: keys.store.kind,
                    format: intent.format)
            else { continue }
            if intent.deferred && !retryingDeferred {
                if !kept.contains(intent) { kept.append(intent) }
                continue
            }
            switch intent.kind {
            case .wipe:
                // The wipe goes on even when its key cannot be deleted now: the file goes, the key is retried.
                drop(identity, intent, from: keys)
                forgetKey()
                if let identity = current, identity.vaultIDHex == intent.vaultIDHex {
                    _ = try prefs { try PrefsStore.destroy(id: service, directory: storeDirectory, evenIfOpen: true) }
                    current = nil
                }
                logger.notice("finished wiping vault '\(service)' after an interruption")
            case .drop:
                guard headerKnown else {
                    if !kept.contains(intent) { kept.append(intent) }
                    continue
                }
                if let current, intent.matches(current) {
                    // The file uses this key: a rotation's new key that made it (the line is done), or a
                    // deferred line a crash left before its wipe removed the file (kept, never acted on).
                    if intent.deferred, !kept.contains(intent) { kept.append(intent) }
                    continue
                }
                if kept.contains(VaultIntent(.drop, identity, deferred: true, store: intent.store)) { continue }
                drop(identity, intent, from: keys)
            }
        }
        if kept.isEmpty {
            removeJournal()
        } else if kept != intents {
            try writeJournal(kept)
        }
        return attempted
    }
}

extension KeyIdentity {
    /// An identity naming a key by its ids (enough to delete it from a key store).
    init?(vaultIDHex: String, keyIDHex: String, kind: Kind, format: UInt8) {
        guard let vault = Self.bytes(hex: vaultIDHex), vault.count == 16, let key = Self.bytes(hex: keyIDHex),
            key.count == 8, (1...Self.currentFormat).contains(format)
        else { return nil }
        self.init(kind: kind, vaultID: vault, keyID: key)
        self.format = format
    }

    static func bytes(hex text: String) -> [UInt8]? {
        let utf8 = Array(text.utf8)
        guard utf8.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        var index = 0
        while index < utf8.count {
            guard let byte = UInt8(String(decoding: utf8[index..<index + 2], as: UTF8.self), radix: 16) else {
                return nil
            }
            bytes.append(byte)
            index += 2
        }
        return bytes
    }
}
