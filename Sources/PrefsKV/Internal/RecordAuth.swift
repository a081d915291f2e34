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
    /// The image's format version (a sealed store's: 2 or later). One field rather than a flag for each rule: a
    /// sixth stored property made Swift copy an optional `RecordAuth` through its type metadata, built at run time in
    /// a fresh process's first open (about 40,000 instructions; `make audit-first-open`).
    private let version: UInt16
    /// Whether set records are bound by their value's AEAD (version 6) rather than authenticated.
    var bindsValues: Bool { version >= Format.boundVersion }
    /// Whether an index record's authenticator covers its head, and MACs its table's pieces (version 8).
    var signsTablePieces: Bool { version >= Format.tablePiecesVersion }

    /// The authentication of records under `header`, when the store is sealed, of version 2, and a sealer is given.
    init?(header: Header, sealer: (any PrefsSealer)?) {
        guard let sealer, header.isEncrypted, header.authenticatesRecords else { return nil }
        self.sealer = sealer
        uuid = header.uuid
        generation = header.generation
        version = header.version
    }

    /// Whether set records of an image authenticated by `auth` carry an authenticator (their lengths count it).
    @inline(__always)
    static func signsSets(_ auth: RecordAuth?) -> Bool { auth.map { !$0.bindsValues } ?? false }

    static let contextSize = 40
    /// "PKVa", little-endian.
    private static let domain: UInt32 = 0x6156_4B50
    /// "PKVt", little-endian: a table piece's MAC (version 8).
    private static let pieceDomain: UInt32 = 0x7456_4B50

    @inline(__always)
    private func withContext<R>(
        offset: Int, domain: UInt32 = RecordAuth.domain, version: UInt16 = Format.authenticatedVersion,
        _ body: (UnsafeRawBufferPointer) -> R
    ) -> R {
        withUnsafeTemporaryAllocation(byteCount: RecordAuth.contextSize, alignment: 8) { context in
            RecordAuth.storeContext(
                into: context, domain: domain, version: version,
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
    /// An index record of version 8 is covered up to its slots (`IndexTable.signedLength`), whose piece MACs it
    /// holds.
    @inline(__always)
    func sign(_ record: UnsafeMutableRawBufferPointer, at offset: Int) {
        let macStart = record.count - Format.recordTrailerSize - Format.authenticatorSize
        let coveredEnd =
            signsTablePieces && record.load(fromByteOffset: 4, as: UInt8.self) == RecordKind.index.rawValue
            ? IndexTable.signedLength(ofOwnRecord: UnsafeRawBufferPointer(record)) : macStart
        let covered = UnsafeRawBufferPointer(rebasing: record[4..<coveredEnd])
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
        if signsTablePieces && record.kind == .index {
            return IndexTable.isAuthentic(record, in: bytes, fileOffset: fileOffset ?? record.offset, auth: self)
        }
        let end = record.offset + record.length
        let macStart = end - Format.recordTrailerSize - Format.authenticatorSize
        return matches(
            UnsafeRawBufferPointer(rebasing: bytes[record.offset + 4..<macStart]),
            authenticator: UnsafeRawBufferPointer(rebasing: bytes[macStart..<macStart + Format.authenticatorSize]),
            offset: fileOffset ?? record.offset)
    }

    /// Whether `authenticator` (16 bytes) is the authenticator of `covered`, the bytes a record at file offset
    /// `offset` covers. Constant time: the comparison does not stop at the first differing byte.
    func matches(_ covered: UnsafeRawBufferPointer, authenticator: UnsafeRawBufferPointer, offset: Int) -> Bool {
        withUnsafeTemporaryAllocation(byteCount: Format.authenticatorSize, alignment: 8) { expected in
            withContext(offset: offset) { context in
                sealer.authenticate(context: context, record: covered, into: expected)
            }
            return Sys.constantTimeEqual(UnsafeRawBufferPointer(expected), authenticator)
        }
    }

    /// The 16-byte MAC of a table piece (version 8): the sealer's authenticator, under the context of the piece's
    /// file offset in domain `"PKVt"` and version 8, of the table's seed (u64) followed by the piece's bytes. The
    /// seed, random for each table, ties a piece to its table: a piece of another table written at the same offset
    /// of this image (one whose write a power cut took away) does not verify.
    func pieceMAC(seed: UInt64, piece: UnsafeRawBufferPointer, offset: Int, into output: UnsafeMutableRawBufferPointer) {
        withUnsafeTemporaryAllocation(byteCount: 8 + piece.count, alignment: 8) { input in
            input.storeBytes(of: seed.littleEndian, as: UInt64.self)
            if piece.count > 0 { (input.baseAddress! + 8).copyMemory(from: piece.baseAddress!, byteCount: piece.count) }
            withContext(offset: offset, domain: RecordAuth.pieceDomain, version: Format.tablePiecesVersion) { context in
                sealer.authenticate(context: context, record: UnsafeRawBufferPointer(input), into: output)
            }
        }
    }

    /// Whether `mac` (16 bytes) is the MAC of the table piece `piece` at file offset `offset` (`pieceMAC`); constant
    /// time.
    func pieceMatches(seed: UInt64, piece: UnsafeRawBufferPointer, mac: UnsafeRawBufferPointer, offset: Int) -> Bool {
        withUnsafeTemporaryAllocation(byteCount: Format.authenticatorSize, alignment: 8) { expected in
            pieceMAC(seed: seed, piece: piece, offset: offset, into: expected)
            return Sys.constantTimeEqual(UnsafeRawBufferPointer(expected), mac)
        }
    }
}
