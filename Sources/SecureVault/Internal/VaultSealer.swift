import PrefsKV

/// SecureVault's implementation of PrefsKV's sealing seam: XChaCha20-Poly1305 under a data key derived from the
/// master key, key names replaced on disk by a keyed BLAKE2b tag, and associated data binding every value to
/// the vault, the key and the item's name.
///
/// Associated data of a value: `"SVLT" | 1 | vault id (16) | key id (8) | PrefsKV's own (store UUID | tag of
/// the name | value type | expiry)`. A ciphertext copied under another name, into another vault, or kept
/// across a key rotation does not open.
final class VaultSealer: PrefsSealer {
    let identity: KeyIdentity
    let keyCheck: [UInt8]
    private let dataKey: SecretBytes
    private let tagKey: SecretBytes
    /// The key of the records' authenticators (PrefsKV format 2).
    private let recordKey: SecretBytes
    private let associatedPrefix: [UInt8]

    /// Derives the subkeys of `masterKey` (32 bytes) for `identity`. Costs three guarded allocations (about
    /// 60 µs): build one sealer per key and keep it.
    init(masterKey: SecretBytes, identity: KeyIdentity) {
        precondition(masterKey.count == 32, "a master key is 32 bytes")
        self.identity = identity
        dataKey = Sodium.deriveSubkey(from: masterKey, id: 1, context: "SVLTdata")
        tagKey = Sodium.deriveSubkey(from: masterKey, id: 2, context: "SVLTname")
        let checkKey = Sodium.deriveSubkey(from: masterKey, id: 3, context: "SVLTkchk")
        recordKey = Sodium.deriveSubkey(from: masterKey, id: 4, context: "SVLTrmac")
        let body = identity.body
        keyCheck = body + Sodium.keyedHash(body, key: checkKey, length: 16)
        associatedPrefix = Array("SVLT".utf8) + [1] + identity.vaultID + identity.keyID
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
