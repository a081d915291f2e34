/// Which master key a sealed store needs, stored in the store's header (PrefsKV's 64-byte key check): the
/// vault reads it before it has any key, to ask the right key store for the right key.
///
/// Layout (little-endian, 64 bytes):
///
/// | offset | size | field |
/// |---|---|---|
/// | 0 | 1 | format: 1 (before record authentication), 2, 3 (SipHash name tags) |
/// | 1 | 1 | key store kind: 1 Secret Service, 2 passphrase, 3 in-memory, 4 a vault item, 5 kernel keyring, 6 key file, 7 systemd credential, 8 Secret portal |
/// | 2 | 2 | Argon2id passes (passphrase); the kernel keyring (1 session, 2 user, 3 persistent); else 0 |
/// | 4 | 4 | Argon2id memory in KiB (passphrase), else 0 |
/// | 8 | 16 | vault id (random) |
/// | 24 | 8 | key id (random, new on every rotation) |
/// | 32 | 16 | Argon2id salt (passphrase), else zeros |
/// | 48 | 16 | key check value (below) |
///
/// The key check value is keyed BLAKE2b-128, under a subkey of the master key, of bytes 0..<48 (format 1), or
/// of bytes 0..<48 followed by the service name's UTF-8 (format 2: the vault's name is bound in, so a file
/// copied or renamed under another service does not check). It tells a wrong key (or passphrase) from damage
/// before any record is read. The service name itself is not stored in the header: the file's name gives it.
package struct KeyIdentity: Equatable, Sendable {
    enum Kind: UInt8, Sendable {
        case secretService = 1
        case passphrase = 2
        case inMemory = 3
        case vaultItem = 4
        case kernelKeyring = 5
        case keyFile = 6
        case systemdCredential = 7
        case secretPortal = 8

        var name: String {
            switch self {
            case .secretService: return "secretService"
            case .passphrase: return "passphrase"
            case .inMemory: return "inMemory"
            case .vaultItem: return "vaultItem"
            case .kernelKeyring: return "kernelKeyring"
            case .keyFile: return "keyFile"
            case .systemdCredential: return "systemdCredential"
            case .secretPortal: return "secretPortal"
            }
        }
    }

    /// The format of identities made now (3: format 2 with SipHash-2-4-128 name tags).
    static let currentFormat: UInt8 = 3
    static let encodedLength = 64

    /// 1: written before record authentication (legacy); 2: every record of the vault's log is authenticated,
    /// and the service name is bound into the key check, the associated data and the key store's lookup; 3: as 2,
    /// with names tagged by SipHash-2-4-128 instead of keyed BLAKE2b (``VaultSealer``). A new vault, and every key
    /// rotation (which re-tags every record), writes the current format; a vault of an older one keeps opening.
    var format: UInt8 = KeyIdentity.currentFormat
    /// How key stores name and bind the key: 1 (legacy) or 2 (the service name bound in), the value of the Secret
    /// Service item's `format` attribute and of the format byte a wrapped key file binds. Format 3 changed only how
    /// the vault tags names, not how its key is kept, so its keys are kept as format 2's.
    var keyStoreFormat: UInt8 { min(format, 2) }
    var kind: Kind
    var argonPasses: UInt16 = 0
    var argonMemoryKiB: UInt32 = 0
    // The ids and the salt are kept in fixed-size words, so that an identity is plain bytes: copying a
    // `KeyIdentity` or an optional one then needs no type metadata, which a fresh process's first sealed open
    // otherwise built at run time for `Optional<KeyIdentity>` (about 40,000 instructions; issue 39).
    private var vaultIDWords: (UInt64, UInt64) = (0, 0)
    private var keyIDWord: UInt64 = 0
    private var saltWords: (UInt64, UInt64) = (0, 0)

    /// The vault's random id (16 bytes).
    var vaultID: [UInt8] {
        get { withUnsafeBytes(of: vaultIDWords) { Array($0) } }
        set { Self.store(newValue, into: &vaultIDWords) }
    }
    /// The master key's random id (8 bytes).
    var keyID: [UInt8] {
        get { withUnsafeBytes(of: keyIDWord) { Array($0) } }
        set { Self.store(newValue, into: &keyIDWord) }
    }
    /// The Argon2id salt (16 bytes; zeros but for a passphrase).
    var salt: [UInt8] {
        get { withUnsafeBytes(of: saltWords) { Array($0) } }
        set { Self.store(newValue, into: &saltWords) }
    }

    /// Copies `bytes` into `words`, which must be exactly as long (our own callers': a programmer error otherwise).
    private static func store<Words>(_ bytes: [UInt8], into words: inout Words) {
        withUnsafeMutableBytes(of: &words) { destination in
            precondition(bytes.count == destination.count, "a key identity field is \(destination.count) bytes")
            destination.copyBytes(from: bytes)
        }
    }

    package static func == (lhs: KeyIdentity, rhs: KeyIdentity) -> Bool {
        lhs.format == rhs.format && lhs.kind == rhs.kind && lhs.argonPasses == rhs.argonPasses
            && lhs.argonMemoryKiB == rhs.argonMemoryKiB && lhs.vaultIDWords == rhs.vaultIDWords
            && lhs.keyIDWord == rhs.keyIDWord && lhs.saltWords == rhs.saltWords
    }

    /// A new identity with random ids.
    static func random(kind: Kind, vaultID: [UInt8]? = nil) -> KeyIdentity {
        KeyIdentity(kind: kind, vaultID: vaultID ?? Sodium.randomBytes(count: 16), keyID: Sodium.randomBytes(count: 8))
    }

    /// The same vault with a fresh key id (rotation). A passphrase's salt and cost are not carried over:
    /// `MasterKeys.create` fills them in from the configuration.
    func rotated() -> KeyIdentity {
        KeyIdentity(kind: kind, vaultID: vaultID, keyID: Sodium.randomBytes(count: 8))
    }

    /// The Argon2id cost the header asks for (passphrase).
    var passphraseCost: PassphraseCost { PassphraseCost(passes: argonPasses, memoryKiB: argonMemoryKiB) }

    /// The vault's random id in hex (32 digits): not a secret, it names the master key in the key store.
    package var vaultIDHex: String { hex(vaultID) }
    /// The master key's random id in hex (16 digits), new on every rotation: not a secret.
    package var keyIDHex: String { hex(keyID) }

    /// Bytes 0..<48: everything but the check value.
    var body: [UInt8] {
        var bytes: [UInt8] = [format, kind.rawValue]
        withUnsafeBytes(of: argonPasses.littleEndian) { bytes.append(contentsOf: $0) }
        withUnsafeBytes(of: argonMemoryKiB.littleEndian) { bytes.append(contentsOf: $0) }
        bytes += vaultID + keyID + salt
        precondition(bytes.count == 48)
        return bytes
    }

    /// Parses a header's key check; nil when it is not one of ours.
    init?(encoded bytes: [UInt8]) {
        guard bytes.count == Self.encodedLength, (1...Self.currentFormat).contains(bytes[0]),
            let kind = Kind(rawValue: bytes[1])
        else {
            return nil
        }
        format = bytes[0]
        self.kind = kind
        argonPasses = UInt16(bytes[2]) | UInt16(bytes[3]) << 8
        argonMemoryKiB = bytes[4..<8].reversed().reduce(0) { $0 << 8 | UInt32($1) }
        bytes.withUnsafeBytes { raw in
            withUnsafeMutableBytes(of: &vaultIDWords) { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: raw[8..<24])) }
            withUnsafeMutableBytes(of: &keyIDWord) { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: raw[24..<32])) }
            withUnsafeMutableBytes(of: &saltWords) { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: raw[32..<48])) }
        }
    }

    /// Why a header's key check that `init(encoded:)` refused is not an identity this library reads: one of a
    /// newer format (a newer SecureVault wrote the file), or none of ours.
    static func unreadableReason(_ bytes: [UInt8]) -> String {
        if isNewerFormat(bytes) {
            return "its vault identity is format \(bytes[0]), written by a newer SecureVault (this one reads formats "
                + "1 to \(currentFormat))"
        }
        return "its header names no vault key"
    }

    /// Whether a header's key check is a vault identity of a newer format than this library reads.
    static func isNewerFormat(_ bytes: [UInt8]) -> Bool {
        bytes.count == encodedLength && bytes[0] > currentFormat && Kind(rawValue: bytes[1]) != nil
    }

    init(kind: Kind, vaultID: [UInt8], keyID: [UInt8]) {
        precondition(vaultID.count == 16 && keyID.count == 8)
        self.kind = kind
        self.vaultID = vaultID
        self.keyID = keyID
    }
}

func hex(_ bytes: some Sequence<UInt8>) -> String {
    let digits = Array("0123456789abcdef".utf8)
    var out: [UInt8] = []
    for byte in bytes {
        out.append(digits[Int(byte >> 4)])
        out.append(digits[Int(byte & 0xF)])
    }
    return String(decoding: out, as: UTF8.self)
}

/// Whether `text` is lowercase hexadecimal digits only (how ids are spelled in key stores).
func isHex(_ text: String) -> Bool {
    !text.isEmpty && text.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
}

/// The bytes a lowercase hex string spells, nil when it is not one (odd length, another character).
func bytes(hex text: String) -> [UInt8]? {
    guard isHex(text), text.utf8.count % 2 == 0 else { return nil }
    let digits = Array(text.utf8).map { $0 <= 57 ? $0 - 48 : $0 - 87 }
    return stride(from: 0, to: digits.count, by: 2).map { digits[$0] << 4 | digits[$0 + 1] }
}
