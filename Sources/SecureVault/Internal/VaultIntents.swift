import PrefsKV
import SystemLayer

/// A small journal that lets a wipe or a key rotation finish after a crash.
///
/// `<service>.vault.intent` holds one line per intent, written durably before the step it protects:
/// - `wipe <vault id> <key id> <format>`: a wipe was under way: delete that key, then the vault file.
/// - `drop <vault id> <key id> <format>`: that key is garbage (the unused half of a rotation): delete it,
///   unless the vault file turns out to use it.
/// `<format>` is the identity format, which decides how the key is named in the key store (a line without it,
/// from before format 2, is format 1). Only keys the vault proved it owns are journaled, and a replay deletes
/// with the same rules as the first attempt (the service attribute for format 2, the label for format 1).
/// The next process to open the vault (under the vault lock) finishes what the journal says, then removes it.
struct VaultIntent: Equatable {
    enum Kind: String { case wipe, drop }

    var kind: Kind
    var vaultIDHex: String
    var keyIDHex: String
    var format: UInt8

    init(_ kind: Kind, _ identity: KeyIdentity) {
        self.kind = kind
        vaultIDHex = identity.vaultIDHex
        keyIDHex = identity.keyIDHex
        format = identity.format
    }

    init?(line: Substring) {
        let parts = line.split(separator: " ")
        guard parts.count == 3 || parts.count == 4, let kind = Kind(rawValue: String(parts[0])) else { return nil }
        self.kind = kind
        vaultIDHex = String(parts[1])
        keyIDHex = String(parts[2])
        guard let format = parts.count == 4 ? UInt8(parts[3]) : 1 else { return nil }
        self.format = format
    }

    var line: String { "\(kind.rawValue) \(vaultIDHex) \(keyIDHex) \(format)" }

    func matches(_ identity: KeyIdentity) -> Bool {
        identity.vaultIDHex == vaultIDHex && identity.keyIDHex == keyIDHex && identity.format == format
    }
}

extension Vault {
    var intentPath: String { Sys.joinPath(storeDirectory, service + ".vault.intent") }

    /// Records `intents` durably (replacing earlier ones).
    func recordIntents(_ intents: [VaultIntent]) throws(VaultError) {
        let text = intents.map(\.line).joined(separator: "\n") + "\n"
        if case .failure(let error) = Sys.writeFileDurably(intentPath, Array(text.utf8), directory: storeDirectory) {
            throw fileError(error, "cannot record an intent in", intentPath)
        }
    }

    func clearIntents() {
        _ = Sys.removeIfPresent(intentPath)
        Sys.syncDirectory(storeDirectory)
    }

    /// Whether a crashed wipe or rotation left work to finish (one `lstat`).
    var hasPendingIntents: Bool { Sys.exists(intentPath) }

    /// Finishes what a crashed wipe or rotation left. Call with the vault lock held.
    func finishIntents() throws(VaultError) {
        let fd: Int32
        switch Sys.open(intentPath, .readOnly) {
        case .success(let opened): fd = opened
        case .failure(let error) where error == .noEntry: return
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
        guard let bytes = read else { return }
        let intents = String(decoding: bytes, as: UTF8.self).split(separator: "\n").compactMap(VaultIntent.init(line:))
        let current = try? existingIdentity()
        for intent in intents {
            guard
                let identity = KeyIdentity(
                    vaultIDHex: intent.vaultIDHex, keyIDHex: intent.keyIDHex, kind: configuration.keyStore.kind,
                    format: intent.format)
            else { continue }
            switch intent.kind {
            case .wipe:
                try keys.delete(identity)
                forgetKey()
                if let current = current ?? nil, current.vaultIDHex == intent.vaultIDHex {
                    _ = try prefs { try PrefsStore.destroy(id: service, directory: storeDirectory) }
                }
                logger.notice("SecureVault: finished wiping vault '\(service)' after an interruption")
            case .drop:
                if let current = current ?? nil, intent.matches(current) { continue }
                do throws(VaultError) {
                    try keys.delete(identity)
                } catch {
                    // Only garbage is at stake: keep the journal and try again next time.
                    logger.warning(
                        "SecureVault: vault '\(service)': an unused master key could not be deleted yet: \(error.description)"
                    )
                    return
                }
            }
        }
        clearIntents()
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

    private static func bytes(hex text: String) -> [UInt8]? {
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
