import PrefsKV

/// SecureVault's implementation of PrefsKV's sealing seam: XChaCha20-Poly1305 under a data key derived from the
/// master key, key names replaced on disk by a keyed BLAKE2b tag, and associated data binding every value to
/// the vault, the key and the item's name.
///
/// Associated data of a value: a prefix naming the vault and the key, then PrefsKV's own (store UUID | tag of
/// the name | value type | expiry). The prefix depends on the identity's format:
///
/// - format 2: `"SVLT" | 2 | vault id (16) | key id (8) | service length (u16 LE) | service (UTF-8)`;
/// - format 1 (legacy): `"SVLT" | 1 | vault id (16) | key id (8)`.
///
/// A ciphertext copied under another name, into another vault (or, format 2, under another service name), or
/// kept across a key rotation does not open. The key check (``KeyIdentity``) binds the service the same way, so
/// a format-2 file copied or renamed under another service is refused before any record is read.
final class VaultSealer: PrefsSealer {
    let identity: KeyIdentity
    let keyCheck: [UInt8]
    private let dataKey: SecretBytes
    private let tagKey: SecretBytes
    /// The key of the records' authenticators (PrefsKV format 2).
    private let recordKey: SecretBytes
    private let associatedPrefix: [UInt8]

    /// Derives the subkeys of `masterKey` (32 bytes) for `identity` of the vault (or encrypted store) named
    /// `service`, which a format-2 identity binds into the key check and the associated data. Costs four
    /// guarded allocations (about 80 µs): build one sealer per key and keep it.
    init(masterKey: SecretBytes, identity: KeyIdentity, service: String) {
        precondition(masterKey.count == 32, "a master key is 32 bytes")
        self.identity = identity
        dataKey = Sodium.deriveSubkey(from: masterKey, id: 1, context: "SVLTdata")
        tagKey = Sodium.deriveSubkey(from: masterKey, id: 2, context: "SVLTname")
        let checkKey = Sodium.deriveSubkey(from: masterKey, id: 3, context: "SVLTkchk")
        recordKey = Sodium.deriveSubkey(from: masterKey, id: 4, context: "SVLTrmac")
        let body = identity.body
        let name = Array(service.utf8)
        // Service names are at most 128 bytes (Vault's naming rule) and store ids 120: a u16 length holds them.
        precondition(name.count <= Int(UInt16.max), "a service name fits a 16-bit length")
        if identity.format < 2 {
            keyCheck = body + Sodium.keyedHash(body, key: checkKey, length: 16)
            associatedPrefix = Array("SVLT".utf8) + [1] + identity.vaultID + identity.keyID
        } else {
            keyCheck = body + Sodium.keyedHash(body + name, key: checkKey, length: 16)
            associatedPrefix =
                Array("SVLT".utf8) + [identity.format] + identity.vaultID + identity.keyID
                + [UInt8(name.count & 0xFF), UInt8(name.count >> 8)] + name
        }
    }

    func tag(forKey key: String) -> [UInt8] {
        Sodium.keyedHash(Array(key.utf8), key: tagKey, length: 16)
    }

    var overhead: Int { Sodium.AEAD.overhead }

    /// Keyed BLAKE2b-128 under its own subkey of the master key.
    func authenticate(
        context: UnsafeRawBufferPointer, record: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer
    ) {
        Sodium.keyedHash(context, record, key: recordKey, into: output)
    }

    /// A vault created or rotated since record authentication (identity format 2) never had unauthenticated
    /// records: its header rewritten to format 1 is refused as tampered.
    var acceptsUnauthenticatedLog: Bool { identity.format < 2 }

    func seal(
        _ plaintext: UnsafeRawBufferPointer, associatedData: UnsafeRawBufferPointer,
        into output: UnsafeMutableRawBufferPointer
    ) throws {
        withAssociatedData(associatedData) { ad in
            Sodium.AEAD.seal(plaintext, associatedData: ad, key: dataKey, into: output)
        }
    }

    func open<R>(
        _ sealed: UnsafeRawBufferPointer, associatedData: UnsafeRawBufferPointer,
        _ body: (UnsafeRawBufferPointer) throws -> R
    ) throws -> R {
        guard sealed.count >= Sodium.AEAD.overhead else { throw Sodium.AEAD.OpenFailure() }
        let length = sealed.count - Sodium.AEAD.overhead
        // The plaintext lives in a temporary buffer that is wiped before it is released: a guarded allocation
        // per read would cost 20 µs, ten times the whole read.
        return try withUnsafeTemporaryAllocation(byteCount: max(length, 1), alignment: 16) { buffer in
            let plain = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<length])
            defer { Sodium.zero(buffer) }
            try withAssociatedData(associatedData) { ad in
                try Sodium.AEAD.open(sealed, associatedData: ad, key: dataKey, into: plain)
            }
            return try body(UnsafeRawBufferPointer(plain))
        }
    }

    private func withAssociatedData<R>(
        _ prefsAD: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer) throws -> R
    ) rethrows -> R {
        // On the stack: no heap allocation per seal or open.
        try withUnsafeTemporaryAllocation(byteCount: associatedPrefix.count + prefsAD.count, alignment: 8) { ad in
            associatedPrefix.withUnsafeBytes { ad.copyMemory(from: $0) }
            if !prefsAD.isEmpty {
                UnsafeMutableRawBufferPointer(rebasing: ad[associatedPrefix.count...]).copyMemory(from: prefsAD)
            }
            return try body(UnsafeRawBufferPointer(ad))
        }
    }
}
