// What authenticates the records of a sealed store: the image a record lies in, and the authenticator (a MAC
// under the sealer's key) every record of a version-2 sealed store carries but the bound set records of version 6.
import SystemLayer

/// The store and image a record lies in, which a sealed record's associated data names: its store UUID, and its
/// image's generation (a bound record's, version 6).
struct ImageIdentity {
    let uuid: StoreUUID
    let generation: UInt64

    init(uuid: StoreUUID, generation: UInt64) {
        self.uuid = uuid
        self.generation = generation
    }

    init(_ header: Header) { self.init(uuid: header.uuid, generation: header.generation) }
}

/// What authenticates the records of a version-2 sealed store: the sealer's MAC over a context that binds a
/// record to its store (UUID), its file (generation: a new image renumbers and re-authenticates everything) and its
/// offset, followed by the record's bytes from its kind byte to its padding. A record forged without the key,
/// replayed from an older file or another store, or moved (reordered, or shifted by a record dropped before it)
/// fails. The magic is not covered (it is constant, and written last); the CRC that follows covers the
/// authenticator, so random damage is still found without the key.
///
/// Context (40 bytes): `"PKVa" | version u8 (2) | 3 zero bytes | store UUID (16) | generation u64 | offset u64`.
///
/// From version 6 a set record has no authenticator: its value's AEAD binds it instead (`bindsValues`), with the
/// associated data `SealedValue.withBindingData` makes, the same context under the domain `"PKVv"` and version 6,
/// followed by the record's bytes from its kind byte to the end of its key. What the authenticator bound (store, image, offset,
/// header, key) is then bound by the seal itself, and the value's ciphertext with it; a record is checked by
/// opening its value (into a buffer that is wiped). Every other record keeps its authenticator.
struct RecordAuth {
    let sealer: any PrefsSealer
    let uuid: StoreUUID
    let generation: UInt64
    /// Whether set records are bound by their value's AEAD (version 6) rather than authenticated.
    let bindsValues: Bool

    /// The authentication of records under `header`, when the store is sealed, of version 2, and a sealer is given.
    init?(header: Header, sealer: (any PrefsSealer)?) {
        guard let sealer, header.isEncrypted, header.authenticatesRecords else { return nil }
        self.sealer = sealer
        uuid = header.uuid
        generation = header.generation
        bindsValues = header.bindsValues
    }

    /// Whether set records of an image authenticated by `auth` carry an authenticator (their lengths count it).
    @inline(__always)
    static func signsSets(_ auth: RecordAuth?) -> Bool { auth.map { !$0.bindsValues } ?? false }

    static let contextSize = 40
    /// "PKVa", little-endian.
    private static let domain: UInt32 = 0x6156_4B50

    @inline(__always)
    private func withContext<R>(offset: Int, _ body: (UnsafeRawBufferPointer) -> R) -> R {
        withUnsafeTemporaryAllocation(byteCount: RecordAuth.contextSize, alignment: 8) { context in
            RecordAuth.storeContext(
                into: context, domain: RecordAuth.domain, version: Format.authenticatedVersion,
                image: ImageIdentity(uuid: uuid, generation: generation), offset: offset)
            return body(UnsafeRawBufferPointer(context))
        }
    }

    /// Stores the 40-byte context of a record at `offset` of `image` under `domain` and `version`: the authenticator's
    /// (`"PKVa"`, 2), or a bound value's associated data (`"PKVv"`, 6: `SealedValue`).
    @inline(__always)
    static func storeContext(
        into context: UnsafeMutableRawBufferPointer, domain: UInt32, version: UInt16, image: ImageIdentity, offset: Int
    ) {
        context.storeBytes(of: domain.littleEndian, as: UInt32.self)
        context.storeBytes(of: UInt32(version).littleEndian, toByteOffset: 4, as: UInt32.self)
        image.uuid.withUnsafeBytes {
            context.baseAddress!.advanced(by: 8).copyMemory(from: $0.baseAddress!, byteCount: 16)
        }
        context.storeBytes(of: image.generation.littleEndian, toByteOffset: 24, as: UInt64.self)
        context.storeBytes(of: UInt64(offset).littleEndian, toByteOffset: 32, as: UInt64.self)
    }

    /// Computes the authenticator of the record whose `length` bytes start `record` (at file offset `offset`)
    /// and stores it in its place, before the CRC.
    @inline(__always)
    func sign(_ record: UnsafeMutableRawBufferPointer, at offset: Int) {
        let macStart = record.count - Format.recordTrailerSize - Format.authenticatorSize
        let covered = UnsafeRawBufferPointer(rebasing: record[4..<macStart])
        let out = UnsafeMutableRawBufferPointer(rebasing: record[macStart..<macStart + Format.authenticatorSize])
        withContext(offset: offset) { context in sealer.authenticate(context: context, record: covered, into: out) }
    }

    /// Whether the record (which verified its CRC) is flagged authenticated and its authenticator matches.
    /// `fileOffset`: where the record lies in the file, when `bytes` is a copy of it elsewhere (its offset there
    /// is `record.offset`).
    func isAuthentic(_ record: RecordHeader, in bytes: UnsafeRawBufferPointer, fileOffset: Int? = nil) -> Bool {
        if bindsValues && record.kind == .set {
            // A bound record is checked by opening its value (`SealedValue.isAuthentic`).
            return SealedValue.isAuthentic(
                record, in: bytes, image: ImageIdentity(uuid: uuid, generation: generation),
                fileOffset: fileOffset ?? record.offset, sealer: sealer)
        }
        guard record.isAuthenticated, !record.isBound else { return false }
        let end = record.offset + record.length
        let macStart = end - Format.recordTrailerSize - Format.authenticatorSize
        let covered = UnsafeRawBufferPointer(rebasing: bytes[record.offset + 4..<macStart])
        return withUnsafeTemporaryAllocation(byteCount: Format.authenticatorSize, alignment: 8) { expected in
            withContext(offset: fileOffset ?? record.offset) { context in
                sealer.authenticate(context: context, record: covered, into: expected)
            }
            // Constant time: the comparison does not stop at the first differing byte.
            return Sys.constantTimeEqual(
                UnsafeRawBufferPointer(expected),
                UnsafeRawBufferPointer(rebasing: bytes[macStart..<macStart + Format.authenticatorSize]))
        }
    }
}
