// The only caller of the kernel key retention service (CKeyring: add_key(2), keyctl(2)). Keys are "user"
// keys named `securevault:<service>:<vault id>:<key id>`: random ids and the vault's name, never material.
internal import CKeyring
import SystemLayer

/// Typed access to the Linux kernel keyrings.
enum KernelKeys {
    /// The name of a vault's key in a keyring.
    static func description(service: String, vaultIDHex: String, keyIDHex: String) -> String {
        "securevault:\(service):\(vaultIDHex):\(keyIDHex)"
    }

    /// The serial of `keyring`. A session keyring is never created here (one made for this process would die
    /// with it, and the key with it), nor replaced by the user-session keyring: `ENOKEY` then.
    static func serial(of keyring: KeyStore.KernelKeyring) -> Result<Int32, Errno> {
        let serial: Int32
        switch keyring {
        case .session:
            serial = vault_keyring_id(VAULT_KEYRING_SESSION, 0)
            // A process outside a login session has no session keyring: the kernel hands it the user-session
            // keyring instead, which lives as long as the user's keyrings. Not what "session" promises.
            if serial >= 0, serial == vault_keyring_id(VAULT_KEYRING_USER_SESSION, 0) {
                return .failure(.noKey)
            }
        case .user:
            serial = vault_keyring_id(VAULT_KEYRING_USER, 1)
            // A process whose keyrings do not link the user keyring (a systemd service's private keyring, a
            // `keyctl session`) may add and find keys there but not read them: the default permissions give
            // the user "view" only, the possessor the rest. Linking it into the process keyring possesses it.
            // Best effort: where the user keyring is already linked (a login session) nothing is needed, and
            // where the link cannot be made (the quota is full) a read that then fails says so (EACCES).
            if serial >= 0 { _ = vault_keyring_possess(serial) }
        case .persistent: serial = vault_keyring_persistent()
        }
        return serial < 0 ? .failure(Errno(rawValue: -serial)) : .success(serial)
    }

    /// The key named `description` in `keyring` (searched recursively), nil when there is none.
    ///
    /// - Throws: the errno of a key that is there but unusable (`EKEYREVOKED`, `EKEYEXPIRED`), of a keyring
    ///   that cannot be reached, or of a read that failed.
    static func load(_ description: String, in keyring: Int32) -> Result<SecretBytes?, Errno> {
        let key: Int32
        switch search(description, in: keyring) {
        case .success(let found): key = found
        case .failure(.noKey): return .success(nil)
        case .failure(let error): return .failure(error)
        }
        // The payload's length first (a read into no buffer), then at most 64 bytes of it: a vault key is 32,
        // and anything else planted under the name is refused by its length.
        let length = vault_keyring_read(key, nil, 0)
        guard length >= 0 else { return .failure(Errno(rawValue: Int32(-length))) }
        let count = min(Int(length), 64)
        var failure: Errno?
        let bytes = SecretBytes(count: count) { buffer in
            guard count > 0 else { return }
            let read = vault_keyring_read(key, buffer.baseAddress, count)
            if read < 0 {
                failure = Errno(rawValue: Int32(-read))
            } else if read != length {
                failure = .interrupted  // replaced between the two reads: the caller may ask again
            }
        }
        if let failure { return .failure(failure) }
        return .success(bytes)
    }

    /// Whether the key named `description` is there, without reading it: "present", "absent", "revoked",
    /// "expired", or the errno's text.
    static func state(_ description: String, in keyring: Int32) -> String {
        switch search(description, in: keyring) {
        case .success: return "present"
        case .failure(.noKey): return "absent"
        case .failure(.keyRevoked): return "revoked"
        case .failure(.keyExpired): return "expired"
        case .failure(let error): return error.text
        }
    }

    /// Adds the key (replacing one with the same name) to `keyring`, expiring after `timeoutSeconds` when set.
    static func store(
        _ secret: SecretBytes, as description: String, in keyring: Int32, timeoutSeconds: UInt32? = nil
    ) -> Result<Void, Errno> {
        let serial = secret.withUnsafeBytes { bytes in
            if let timeoutSeconds {
                // Never present in `keyring` without its timeout (CKeyring: made in the thread keyring first).
                return vault_keyring_add_expiring(
                    description, bytes.baseAddress, bytes.count, keyring, max(timeoutSeconds, 1))
            }
            return vault_keyring_add(description, bytes.baseAddress, bytes.count, keyring)
        }
        return serial < 0 ? .failure(Errno(rawValue: -serial)) : .success(())
    }

    /// Invalidates the key named `description` (gone at once for every process). Returns whether there was one.
    static func delete(_ description: String, in keyring: Int32) -> Result<Bool, Errno> {
        switch search(description, in: keyring) {
        case .success(let key): return status(vault_keyring_invalidate(key)).map { true }
        // Gone, or unusable (revoked, expired: the kernel reaps those itself).
        case .failure(.noKey), .failure(.keyRevoked), .failure(.keyExpired): return .success(false)
        case .failure(let error): return .failure(error)
        }
    }

    /// The names of the vault keys linked straight into `keyring` (`securevault:...` "user" keys; the per-session
    /// cache's `securevault-cache:` keys are not vault keys). A key this process may not view is skipped.
    static func vaultKeyNames(in keyring: Int32) -> Result<[String], Errno> {
        // A keyring reads as the serials it links, four bytes each; room for a few added meanwhile.
        let length = vault_keyring_read(keyring, nil, 0)
        guard length >= 0 else { return .failure(Errno(rawValue: Int32(-length))) }
        var serials = [Int32](repeating: 0, count: Int(length) / 4 + 16)
        let read = serials.withUnsafeMutableBytes { vault_keyring_read(keyring, $0.baseAddress, $0.count) }
        guard read >= 0 else { return .failure(Errno(rawValue: Int32(-read))) }
        var names: [String] = []
        var buffer = [CChar](repeating: 0, count: 4096 + 64)
        for serial in serials.prefix(min(Int(read), serials.count * 4) / 4) {
            let described = buffer.withUnsafeMutableBufferPointer {
                vault_keyring_describe(serial, $0.baseAddress, $0.count)
            }
            guard described > 0, Int(described) <= buffer.count else { continue }
            // "type;uid;gid;perm;description": the description may itself hold ';'.
            let text = buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
            let fields = text.split(separator: ";", maxSplits: 4, omittingEmptySubsequences: false)
            guard fields.count == 5, fields[0] == "user", fields[4].hasPrefix("securevault:") else { continue }
            names.append(String(fields[4]))
        }
        return .success(names)
    }

    /// The service, vault id and key id a vault key's name holds (``description(service:vaultIDHex:keyIDHex:)``),
    /// nil for any other name. The ids are the last two fields: a service name may hold ':'.
    static func parse(_ description: String) -> (service: String, vaultIDHex: String, keyIDHex: String)? {
        guard description.hasPrefix("securevault:") else { return nil }
        let fields = description.dropFirst("securevault:".count).split(separator: ":", omittingEmptySubsequences: false)
        guard fields.count >= 3 else { return nil }
        let vault = String(fields[fields.count - 2])
        let key = String(fields[fields.count - 1])
        guard vault.utf8.count == 32, key.utf8.count == 16, isHex(vault), isHex(key) else { return nil }
        return (fields.dropLast(2).joined(separator: ":"), vault, key)
    }

    /// For tests: revokes or sets the timeout of the key named `description`.
    static func revoke(_ description: String, in keyring: Int32) -> Result<Void, Errno> {
        search(description, in: keyring).flatMap { status(vault_keyring_revoke($0)) }
    }

    static func expire(_ description: String, in keyring: Int32, afterSeconds seconds: UInt32) -> Result<Void, Errno> {
        search(description, in: keyring).flatMap { status(vault_keyring_set_timeout($0, seconds)) }
    }

    /// The serial of the "user" key named `description` in `keyring` (searched recursively).
    private static func search(_ description: String, in keyring: Int32) -> Result<Int32, Errno> {
        let key = vault_keyring_search(keyring, description)
        return key < 0 ? .failure(Errno(rawValue: -key)) : .success(key)
    }

    /// A keyctl status (0, or -errno) as a result.
    private static func status(_ value: Int32) -> Result<Void, Errno> {
        value < 0 ? .failure(Errno(rawValue: -value)) : .success(())
    }

    /// Why a keyring cannot be used, in a few words (the messages of MasterKeys and of doctor's probe); nil
    /// for an errno that is not about the keyring's availability.
    static func unavailability(_ error: Errno, _ keyring: KeyStore.KernelKeyring) -> String? {
        switch error {
        case .noKey where keyring == .session: return "no session keyring: this is not a login session"
        case .notSupported: return "this kernel has no persistent keyrings"
        case .noSystemCall, .notPermitted:
            return "the key system calls are blocked (a container's seccomp profile?): \(error.text)"
        default: return nil
        }
    }

    /// For tests: gives this process a new session keyring, which its children inherit (what a login does).
    static func joinNewSession() -> Result<Int32, Errno> {
        let serial = vault_keyring_join_new_session()
        return serial < 0 ? .failure(Errno(rawValue: -serial)) : .success(serial)
    }

    /// The per-user byte quota of the keyrings (`/proc/sys/kernel/keys/maxbytes`, root's `root_maxbytes`).
    static var quotaBytes: Int? {
        let file = Sys.userID == 0 ? "/proc/sys/kernel/keys/root_maxbytes" : "/proc/sys/kernel/keys/maxbytes"
        guard let bytes = Sys.readSmallFile(file) else { return nil }
        return Int(String(decoding: bytes, as: UTF8.self).filter(\.isNumber))
    }
}
