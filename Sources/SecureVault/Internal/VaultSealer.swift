import CPrefsKV
import PrefsKV
import Synchronization
import SystemLayer

/// SecureVault's implementation of PrefsKV's sealing seam: XChaCha20-Poly1305 under a data key derived from the
/// master key, key names replaced on disk by a keyed tag, and associated data binding every value to the vault,
/// the key and the item's name.
///
/// The name tag is a pseudo-random function of the name under its own subkey of the master key, 16 bytes: keyed
/// BLAKE2b-128 for identity formats 1 and 2, SipHash-2-4-128 (a PRF built for short inputs, a tenth of the cost;
/// `Sodium.shortHash128`) from format 3. Either way nobody without the master key can tell a name from its tag,
/// and equal names give equal tags (which the index needs).
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
    /// The name tags' key: 32 bytes for keyed BLAKE2b (formats 1 and 2), 16 for SipHash-2-4-128 (format 3).
    private let tagKey: SecretBytes
    /// Whether names are tagged with SipHash-2-4-128 (identity format 3 and later).
    private let shortTags: Bool
    /// The key of the records' authenticators (PrefsKV format 2).
    private let recordKey: SecretBytes
    /// The associated data's prefix (below), in memory of its own: read on every seal and open without the retain
    /// and release an array's buffer costs.
    private let associatedPrefix: ConstantBytes
    /// XChaCha20's per-prefix subkeys of `dataKey` (`Sodium.AEAD.deriveSubkey`): the one of this process's nonce
    /// prefix, for seals, and the one of the last other prefix a record was opened under. Derived on first use.
    private let subkeys = SanitizedMutex(PrefixSubkeys())
    /// The seal subkey of this process's nonce prefix, read by seals without the lock: a record in guarded memory,
    /// `prefix (16) | subkey (32)`, never written once published and kept until the sealer goes (`PrefixSubkeys`
    /// holds every record it published). A seal whose nonce has another prefix (the first seal, or the first after
    /// a `fork()` drew a new one) derives and publishes a new record under the lock. Taking the lock and copying the
    /// subkey out at every seal was a tenth of a sealed write.
    /// (The record's address as an integer, 0 for none: `Atomic` of a pointer is not `Sendable`.)
    private let sealRecord = Atomic<UInt>(0)

    /// Derives the subkeys of `masterKey` (32 bytes) for `identity` of the vault (or encrypted store) named
    /// `service`, which a format-2 identity binds into the key check and the associated data. The three subkeys it
    /// keeps share one guarded allocation (about 20 µs; they took one each; guard pages at the region's ends, all
    /// three read-only), and the key check's subkey is on the stack, wiped once used: build one sealer per key and
    /// keep it.
    init(masterKey: SecretBytes, identity: KeyIdentity, service: String) {
        precondition(masterKey.count == 32, "a master key is 32 bytes")
        self.identity = identity
        let shortTags = identity.format >= 3
        self.shortTags = shortTags
        (dataKey, tagKey, recordKey) = SecretBytes.allocatedTogether(32, shortTags ? 16 : 32, 32) { data, tag, record in
            Sodium.deriveSubkey(from: masterKey, id: 1, context: "SVLTdata", into: data)
            Sodium.deriveSubkey(from: masterKey, id: 2, context: shortTags ? "SVLTntag" : "SVLTname", into: tag)
            Sodium.deriveSubkey(from: masterKey, id: 4, context: "SVLTrmac", into: record)
        }
        let body = identity.body
        let name = Array(service.utf8)
        // Service names are at most 128 bytes (Vault's naming rule) and store ids 120: a u16 length holds them.
        precondition(name.count <= Int(UInt16.max), "a service name fits a 16-bit length")
        // The key check's subkey, used once here: on the stack, wiped.
        var checkKey = (UInt64(0), UInt64(0), UInt64(0), UInt64(0))
        let check = withUnsafeMutableBytes(of: &checkKey) { checkKey in
            defer { Sodium.zero(checkKey) }
            Sodium.deriveSubkey(from: masterKey, id: 3, context: "SVLTkchk", into: checkKey)
            let checked = identity.format < 2 ? body : body + name
            return checked.withUnsafeBytes {
                Sodium.keyedHash($0, keyBytes: UnsafeRawBufferPointer(checkKey), length: 16)
            }
        }
        keyCheck = body + check
        if identity.format < 2 {
            associatedPrefix = ConstantBytes(Array("SVLT".utf8) + [1] + identity.vaultID + identity.keyID)
        } else {
            associatedPrefix = ConstantBytes(
                Array("SVLT".utf8) + [identity.format] + identity.vaultID + identity.keyID
                    + [UInt8(name.count & 0xFF), UInt8(name.count >> 8)] + name)
        }
    }

    deinit { associatedPrefix.deallocate() }

    /// Whether `stored` (a file header's key check, or another sealer's) is this sealer's key check. Compared in
    /// constant time (`sodium_memcmp`): its last 16 bytes are a MAC under the master key, and how far a comparison
    /// got must not tell someone who can write the header how many of its bytes they guessed.
    func verifiesKeyCheck(_ stored: [UInt8]) -> Bool {
        keyCheck.withUnsafeBytes { mine in stored.withUnsafeBytes { Sodium.constantTimeEqual(mine, $0) } }
    }

    func tag(forKey key: String) -> [UInt8] {
        guard shortTags else { return Sodium.keyedHash(Array(key.utf8), key: tagKey, length: 16) }
        return [UInt8](unsafeUninitializedCapacity: 16) { out, initialized in
            tag(forKey: key, into: UnsafeMutableRawBufferPointer(out))
            initialized = 16
        }
    }

    /// The SipHash tag (format 3) written into `output` (16 bytes); format 1 and 2 tags go through an array.
    func tag(forKey key: String, into output: UnsafeMutableRawBufferPointer) {
        guard shortTags else {
            let tag = tag(forKey: key)
            precondition(tag.count == output.count, "a name tag is 16 bytes")
            output.copyBytes(from: tag)
            return
        }
        // The name's own UTF-8 where it is contiguous (a native string): no copy of the string, no retain.
        let hashed: Void? = key.utf8.withContiguousStorageIfAvailable {
            Sodium.shortHash128(UnsafeRawBufferPointer($0), key: tagKey, into: output)
        }
        guard hashed == nil else { return }
        var name = key
        name.withUTF8 { Sodium.shortHash128(UnsafeRawBufferPointer($0), key: tagKey, into: output) }
    }

    /// SipHash tags (format 3) cost less than PrefsKV's lookup of a name in a map of tags.
    var tagsAreCheap: Bool { shortTags }

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

    /// XChaCha20-Poly1305 with a nonce from `prefs_nonce_next` (this process's random 16-byte prefix and a
    /// counter: no system call per seal, never repeated, a child after fork draws its own prefix) under the
    /// prefix's subkey, derived once; the bytes are XChaCha20-Poly1305's. Where the kernel cannot make such
    /// nonces, a random one per seal, as before.
    func seal(
        _ plaintext: UnsafeRawBufferPointer, associatedData: UnsafeRawBufferPointer,
        into output: UnsafeMutableRawBufferPointer
    ) throws {
        // The nonce is made and used in this stack buffer, then copied out (Sodium.AEAD.withNonceBuffer).
        Sodium.AEAD.withNonceBuffer { nonce in
            guard prefs_nonce_next(nonce) == 0 else {
                Sodium.fillRandom(UnsafeMutableRawBufferPointer(start: nonce, count: Sodium.AEAD.nonceBytes))
                withAssociatedData(associatedData) { ad in
                    Sodium.AEAD.seal(plaintext, associatedData: ad, key: dataKey, nonce: nonce, into: output)
                }
                return
            }
            seal(plaintext, associatedData: associatedData, nonce: nonce, into: output)
        }
    }

    /// `seal` under `nonce` (24 bytes of private memory, from `prefs_nonce_next`), through the published seal record
    /// of its prefix, published first when the record is another prefix's. (Internal for the tests, which give
    /// nonces of changing prefixes, as a process after `fork()` has.)
    @inline(__always)
    func seal(
        _ plaintext: UnsafeRawBufferPointer, associatedData: UnsafeRawBufferPointer, nonce: UnsafePointer<UInt8>,
        into output: UnsafeMutableRawBufferPointer
    ) {
        let noncePrefix = PrefixSubkeys.prefix(of: nonce)
        var record = UnsafeRawPointer(bitPattern: sealRecord.load(ordering: .acquiring))
        if record == nil || !PrefixSubkeys.record(record.unsafelyUnwrapped, holds: noncePrefix) {
            record = publishSealRecord(for: noncePrefix)
        }
        // The associated data's prefix and PrefsKV's part go to the seal apart: it assembles them once.
        Sodium.AEAD.sealDerived(
            plaintext, associatedPrefix: associatedPrefix.bytes, associatedData: associatedData,
            subkey: record.unsafelyUnwrapped + PrefixSubkeys.recordPrefixBytes, nonce: nonce, into: output)
    }

    /// Derives the seal subkey of `prefix` (into the cache's seal slot, which opens of this process's values use
    /// too), copies it into a new published record and returns the record.
    @inline(never)
    private func publishSealRecord(for prefix: PrefixSubkeys.Prefix) -> UnsafeRawPointer {
        let dataKey = self.dataKey
        return subkeys.withLock { cache in
            let record = cache.newSealRecord(for: prefix, key: dataKey)
            sealRecord.store(UInt(bitPattern: record), ordering: .releasing)
            return record
        }
    }

    /// Seals as a process whose nonce prefix is `noncePrefix` (16 bytes) would, with plain XChaCha20-Poly1305:
    /// values "from another process", for the tests of the open path's subkey slots.
    func sealForTesting(
        _ plaintext: UnsafeRawBufferPointer, associatedData: UnsafeRawBufferPointer, noncePrefix: [UInt8],
        into output: UnsafeMutableRawBufferPointer
    ) {
        precondition(noncePrefix.count == Sodium.AEAD.prefixBytes)
        Sodium.AEAD.withNonceBuffer { nonce in
            UnsafeMutableRawBufferPointer(start: nonce, count: 16).copyBytes(from: noncePrefix)
            Sodium.fillRandom(UnsafeMutableRawBufferPointer(start: nonce + 16, count: 8))
            withAssociatedData(associatedData) { ad in
                Sodium.AEAD.seal(plaintext, associatedData: ad, key: dataKey, nonce: nonce, into: output)
            }
        }
    }

    /// Passes `body` a copy of the subkey of `prefix` (this process's own seal slot, or for an open of another
    /// prefix the open slot, derived there when it holds another), on the stack and wiped after `body`. The lock
    /// is held only for the copy: seals and opens of other threads run meanwhile.
    private func withSubkey<R>(
        for prefix: PrefixSubkeys.Prefix, opening: Bool, _ body: (UnsafeRawPointer) throws -> R
    ) rethrows -> R {
        try withUnsafeTemporaryAllocation(byteCount: 32, alignment: 16) { copy in
            defer { Sodium.zero(copy) }
            let dataKey = self.dataKey
            subkeys.withLock { cache in
                let slot: PrefixSubkeys.Slot = !opening || cache.holds(prefix, in: .seal) ? .seal : .open
                copy.copyMemory(
                    from: UnsafeRawBufferPointer(
                        start: cache.subkey(for: prefix, slot: slot, key: dataKey), count: Sodium.AEAD.subkeyBytes))
            }
            return try body(UnsafeRawPointer(copy.baseAddress!))
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
            try open(sealed, associatedData: associatedData, into: plain)
            return try body(UnsafeRawBufferPointer(plain))
        }
    }

    /// Opens under the subkey of the nonce's prefix: this process's own (its records), or the last other one
    /// seen (records written by one earlier session share theirs), derived again when it changes. The nonce is
    /// read once from `sealed`, into a private copy.
    func open(
        _ sealed: UnsafeRawBufferPointer, associatedData: UnsafeRawBufferPointer,
        into plaintext: UnsafeMutableRawBufferPointer
    ) throws {
        guard sealed.count >= Sodium.AEAD.overhead else { throw Sodium.AEAD.OpenFailure() }
        try Sodium.AEAD.withNonceBuffer { nonce throws in
            nonce.update(from: sealed.baseAddress!.assumingMemoryBound(to: UInt8.self), count: Sodium.AEAD.nonceBytes)
            try withAssociatedData(associatedData) { ad throws in
                try withSubkey(for: PrefixSubkeys.prefix(of: nonce), opening: true) { subkey throws in
                    try Sodium.AEAD.openDerived(
                        sealed, associatedData: ad, subkey: subkey, nonce: nonce, into: plaintext)
                }
            }
        }
    }

    private func withAssociatedData<R>(
        _ prefsAD: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer) throws -> R
    ) rethrows -> R {
        // On the stack: no heap allocation per seal or open.
        let prefix = associatedPrefix.bytes
        return try withUnsafeTemporaryAllocation(byteCount: prefix.count + prefsAD.count, alignment: 8) { ad in
            ad.copyMemory(from: prefix)
            if !prefsAD.isEmpty {
                UnsafeMutableRawBufferPointer(rebasing: ad[prefix.count...]).copyMemory(from: prefsAD)
            }
            return try body(UnsafeRawBufferPointer(ad))
        }
    }
}

/// The subkeys of two nonce prefixes, in guarded memory: `.seal` for this process's prefix, `.open` for the last
/// other prefix a value was opened under. `@unchecked Sendable`: accessed only under `VaultSealer.subkeys`' lock.
final class PrefixSubkeys: @unchecked Sendable {
    enum Slot: Int { case seal = 0, open = 1 }
    typealias Prefix = (UInt64, UInt64)

    private var sealPrefix: Prefix?
    private var openPrefix: Prefix?
    /// Allocated at the first seal or open (a guarded allocation costs system calls; a vault that never opens
    /// a value pays nothing).
    private var keys: WritableGuardedBuffer?
    /// Every seal record published (`VaultSealer.sealRecord`): one per nonce prefix this process sealed under (a
    /// new one after each `fork()` that seals), kept until the sealer goes, as a seal may still read any of them.
    private var sealRecords: [WritableGuardedBuffer] = []
    static let recordPrefixBytes = 16

    /// Whether the published seal record at `record` is that of `prefix`.
    @inline(__always)
    static func record(_ record: UnsafeRawPointer, holds prefix: Prefix) -> Bool {
        record.load(as: UInt64.self) == prefix.0 && record.load(fromByteOffset: 8, as: UInt64.self) == prefix.1
    }

    /// A new seal record of `prefix`: its subkey derived from `key` into the seal slot (unless the slot holds it)
    /// and copied after the prefix.
    func newSealRecord(for prefix: Prefix, key: SecretBytes) -> UnsafeRawPointer {
        let subkey = self.subkey(for: prefix, slot: .seal, key: key)
        let record = WritableGuardedBuffer(count: PrefixSubkeys.recordPrefixBytes + Sodium.AEAD.subkeyBytes)
        record.pointer.storeBytes(of: prefix.0, as: UInt64.self)
        record.pointer.storeBytes(of: prefix.1, toByteOffset: 8, as: UInt64.self)
        (record.pointer + PrefixSubkeys.recordPrefixBytes).copyMemory(from: subkey, byteCount: Sodium.AEAD.subkeyBytes)
        sealRecords.append(record)
        return UnsafeRawPointer(record.pointer)
    }

    static func prefix(of nonce: UnsafeRawPointer) -> Prefix {
        (nonce.loadUnaligned(as: UInt64.self), nonce.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
    }

    func holds(_ prefix: Prefix, in slot: Slot) -> Bool {
        guard let held = slot == .seal ? sealPrefix : openPrefix else { return false }
        return held == prefix
    }

    /// The subkey of `prefix` in `slot`, derived from `key` into that slot unless it holds it already.
    func subkey(for prefix: Prefix, slot: Slot, key: SecretBytes) -> UnsafeRawPointer {
        if keys == nil { keys = WritableGuardedBuffer(count: 2 * Sodium.AEAD.subkeyBytes) }
        // Unretained: `keys` holds the buffer, and is never replaced once set.
        let subkey =
            Unmanaged.passUnretained(keys.unsafelyUnwrapped)._withUnsafeGuaranteedRef { $0.pointer }
            + slot.rawValue * Sodium.AEAD.subkeyBytes
        if !holds(prefix, in: slot) {
            var bytes = prefix
            withUnsafeBytes(of: &bytes) { Sodium.AEAD.deriveSubkey(prefix: $0.baseAddress!, key: key, into: subkey) }
            if slot == .seal { sealPrefix = prefix } else { openPrefix = prefix }
        }
        return UnsafeRawPointer(subkey)
    }
}

/// Bytes fixed at initialisation, in an allocation of their own, read without the retain and release of an array's
/// buffer; their owner deallocates them. `@unchecked Sendable`: never written after `init`.
struct ConstantBytes: @unchecked Sendable {
    let bytes: UnsafeRawBufferPointer

    init(_ array: [UInt8]) {
        let storage = UnsafeMutableRawBufferPointer.allocate(byteCount: max(array.count, 1), alignment: 8)
        storage.copyBytes(from: array)
        bytes = UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(storage)[0..<array.count])
    }

    func deallocate() { bytes.baseAddress.map { UnsafeMutableRawPointer(mutating: $0).deallocate() } }
}
