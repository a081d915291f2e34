// The on-disk layout: header page and records. Documentation/FileFormat.md is the prose version of this file;
// the two must agree (FileFormatTests checks the worked example there against bytes produced here).
import SystemLayer

/// Layout constants of format versions 1 to 6.
///
/// - Version 1: plain stores, and sealed stores whose records are not authenticated.
/// - Version 2: sealed stores whose every record carries an authenticator (a MAC under the sealer's key, binding
///   the record to its store, file generation and offset).
/// - Version 3 (written now, plain and sealed): version 2's rules, and the log starts with a copy of the header's
///   static part (a `header` record at offset 4096), so that a damaged header page is no single point of failure.
/// - Version 4: version 3's rules, and the log may hold index records (kind 6), a hash table of the store's keys
///   that an open uses instead of reading the whole log (IndexTable.swift); the header's index word names the
///   newest.
/// - Version 5: version 4's rules, and every record's CRC32C starts with the image's generation (`RecordSeed`): a
///   record of another image of the store, left in a file or copied into it, does not verify in this one.
/// - Version 6 (written now): version 5's rules, and a sealed store's set records are bound to their place by their
///   value's AEAD instead of an authenticator: its associated data is the record's context (store, image, offset)
///   and its header and key (`RecordAuth.withBindingData`). Plain stores are laid out as in version 5.
///
/// Older versions are read as they are and written as version 6 by their next compaction, recovery, restore or
/// rekey.
enum Format {
    /// "PREFSKV\0" (`50 52 45 46 53 4b 56 00`), read as one little-endian word.
    static let fileMagic: UInt64 = 0x0056_4B53_4645_5250
    static let fileMagicLength = 8
    /// The newest version this library reads, and the one it writes.
    static let version: UInt16 = 6
    /// Plain stores, and sealed stores whose records are not authenticated.
    static let unauthenticatedVersion: UInt16 = 1
    /// Sealed stores whose records are authenticated (this version and later).
    static let authenticatedVersion: UInt16 = 2
    /// Stores whose log starts with a copy of the header (this version and later).
    static let headerCopyVersion: UInt16 = 3
    /// Stores whose log may hold index records (this version and later).
    static let indexVersion: UInt16 = 4
    /// Stores whose record checksums start with the image's generation (this version and later).
    static let seededVersion: UInt16 = 5
    /// Sealed stores whose set records are bound by their value's AEAD (this version and later).
    static let boundVersion: UInt16 = 6
    /// The header occupies the first page; the log starts right after it.
    static let headerSize = 4096
    static let logStart = headerSize

    // Static part: written once, covered by its own CRC32C.
    static let versionOffset = 8
    static let headerSizeOffset = 10
    static let flagsOffset = 12
    static let uuidOffset = 16
    static let generationOffset = 32
    static let createdAtOffset = 40
    static let keyCheckLengthOffset = 48
    static let keyCheckOffset = 50
    static let maxKeyCheckLength = 64
    /// Version 4: 1 + the generation of the store's base image (`<id>.prefs.prev`) in an image a buffered store's
    /// automatic compaction renamed into place without flushing it; 0 in every other image.
    static let baseOffset = 114
    static let staticCRCOffset = 124
    static let staticSize = 128

    // Dynamic part: aligned 8-byte words stored atomically through the mapping, not covered by the header CRC.
    static let logEndOffset = 256
    static let supersededOffset = 264
    static let watchedOffset = 272
    /// The offset of the newest index record, encoded as the log end is (`encodeLogEnd`); 0 when there is none.
    static let indexWordOffset = 280

    static let flagEncrypted: UInt32 = 1

    // Records.
    /// "PKVr" read as a little-endian UInt32.
    static let recordMagic: UInt32 = 0x7256_4B50
    static let recordHeaderSize = 32
    static let recordTrailerSize = 4
    /// The authenticator of a record of a version-2 sealed store, stored right before its CRC.
    static let authenticatorSize = 16

    static let maxKeyLength = 16 * 1024
    static let maxValueLength = 64 * 1024 * 1024
    /// Sealing adds a 4-byte name length, the name and the sealer's overhead (at most 1 KiB).
    static let maxSealerOverhead = 1024
    static let maxStoredValueLength = maxValueLength + 4 + maxKeyLength + maxSealerOverhead

    /// The length of the header-copy record that starts a version-3 log: no key, the header's static part as its
    /// value (168 bytes, or 184 with an authenticator).
    static func headerCopyLength(authenticated: Bool) -> Int {
        recordLength(keyLength: 0, valueLength: staticSize, authenticated: authenticated)
    }

    /// The length of a record with the given key and value lengths: header, key, value, zero padding to a
    /// multiple of 8 that leaves room for the 16-byte authenticator (authenticated records) and the 4-byte CRC at
    /// its end.
    @inline(__always)
    static func recordLength(keyLength: Int, valueLength: Int, authenticated: Bool = false) -> Int {
        (recordHeaderSize + keyLength + valueLength + recordTrailerSize + (authenticated ? authenticatorSize : 0) + 7)
            & ~7
    }

    /// The stored form of the log end: the offset in the low 48 bits, 16 bits of its CRC32C in the high 16.
    /// A torn or flipped word is then detected instead of silently cutting the log short.
    static func encodeLogEnd(_ offset: Int) -> UInt64 {
        let value = UInt64(offset)
        precondition(value < 1 << 48)
        return value | UInt64(logEndCheck(value)) << 48
    }

    /// The offset stored in a log-end word, or nil when its check bits do not match.
    static func decodeLogEnd(_ raw: UInt64) -> Int? {
        let value = raw & 0xFFFF_FFFF_FFFF
        return UInt16(truncatingIfNeeded: raw >> 48) == logEndCheck(value) ? Int(value) : nil
    }

    private static func logEndCheck(_ value: UInt64) -> UInt16 {
        withUnsafeBytes(of: value.littleEndian) { UInt16(truncatingIfNeeded: CRC32C.checksum($0)) }
    }
}

/// What a record does.
enum RecordKind: UInt8 {
    case set = 1
    case delete = 2
    case removeAll = 3
    case commit = 4
    /// The copy of the header's static part that starts a version-3 log (only at offset 4096).
    case header = 5
    /// A hash table of the keys of the log before it (version 4): IndexTable.swift. Holds no data.
    case index = 6
}

/// Record flag bits.
enum RecordFlags {
    /// The last record of its transaction: a single-change write, or a kind-4 commit record.
    static let commit: UInt8 = 1
    /// The key field is the sealer's tag and the value field is sealed.
    static let sealed: UInt8 = 2
    /// The record ends with an authenticator before its CRC (every record of a version-2 sealed store but the set
    /// records of version 6).
    static let authenticated: UInt8 = 4
    /// A sealed set record of a version-6 store, bound to its place by its value's AEAD (no authenticator).
    static let bound: UInt8 = 8
    static let known: UInt8 = commit | sealed | authenticated | bound
}

/// The type of a stored value, as recorded on disk.
enum ValueType: UInt8, CaseIterable {
    case bool = 1
    case int64 = 2
    case double = 3
    case string = 4
    case bytes = 5
    case stringArray = 6
    case json = 7

    /// The name used in exports and by vaultctl.
    var name: String {
        switch self {
        case .bool: "bool"
        case .int64: "int"
        case .double: "double"
        case .string: "string"
        case .bytes: "bytes"
        case .stringArray: "strings"
        case .json: "json"
        }
    }

    init?(name: String) {
        guard let t = ValueType.allCases.first(where: { $0.name == name }) else { return nil }
        self = t
    }
}

/// The static part of the header.
struct Header: Equatable {
    var version: UInt16 = Format.unauthenticatedVersion
    var flags: UInt32
    var uuid: StoreUUID
    var generation: UInt64
    var createdAt: Int64
    var keyCheck: [UInt8]
    /// 0, or 1 + the generation of the base image in an image renamed into place unflushed (`baseGeneration`).
    var baseWord: UInt64 = 0

    var isEncrypted: Bool { flags & Format.flagEncrypted != 0 }
    /// Whether every record of the log is authenticated (a sealed store of version 2 or later): by an authenticator,
    /// or a set record of version 6 by its value's AEAD (`bindsValues`).
    var authenticatesRecords: Bool { isEncrypted && version >= Format.authenticatedVersion }
    /// Whether the set records of the log are bound by their value's AEAD (a sealed store of version 6 or later).
    var bindsValues: Bool { isEncrypted && version >= Format.boundVersion }
    /// Whether the log starts with a copy of this header (version 3 and later).
    var hasHeaderCopy: Bool { version >= Format.headerCopyVersion }
    /// Whether index records may be appended to the log (version 4 and later).
    var hasIndexRecords: Bool { version >= Format.indexVersion }
    /// Where the checksum of every record of this image starts (`RecordSeed`).
    var recordSeed: RecordSeed { version >= Format.seededVersion ? RecordSeed(generation: generation) : .unseeded }
    /// The generation of the image `<id>.prefs.prev` must hold when this image was renamed into place by a buffered
    /// store's automatic compaction without being flushed (FileFormat.md, "Compaction"): until a `sync()` makes this
    /// one durable, the store's durable state is that base image's. Nil for every other image.
    var baseGeneration: UInt64? { baseWord == 0 ? nil : baseWord - 1 }
    /// Where the first record after the header copy goes in a new image of this header.
    var firstRecordOffset: Int {
        Format.logStart + (hasHeaderCopy ? Format.headerCopyLength(authenticated: authenticatesRecords) : 0)
    }

    /// A new header with a random store UUID.
    static func new(keyCheck: [UInt8]?) -> Header {
        var rng = SystemRandomNumberGenerator()
        let uuid = StoreUUID(low: rng.next(), high: rng.next())
        return Header(
            version: Format.version, flags: keyCheck == nil ? 0 : Format.flagEncrypted, uuid: uuid, generation: 0,
            createdAt: Sys.nowMilliseconds(), keyCheck: keyCheck ?? [])
    }

    /// The header of a new image of this store (compaction, recovery, backup, restore, rekey): the next
    /// generation, in the current version (an older store is upgraded).
    func nextImage(generation: UInt64? = nil) -> Header {
        var next = self
        next.generation = generation ?? self.generation + 1
        next.version = Format.version
        next.baseWord = 0
        return next
    }

    /// The whole header page: the static part with its CRC, then the dynamic part (log end, flags).
    func page(logEnd: Int, watched: Bool = false) -> [UInt8] {
        var page = [UInt8](repeating: 0, count: Format.headerSize)
        page.withUnsafeMutableBytes { p in
            writeStaticPart(into: p)
            p.storeBytes(
                of: Format.encodeLogEnd(logEnd).littleEndian, toByteOffset: Format.logEndOffset, as: UInt64.self)
            p.storeBytes(of: UInt64(watched ? 1 : 0), toByteOffset: Format.watchedOffset, as: UInt64.self)
        }
        return page
    }

    /// Writes the static part (magic to CRC, `Format.staticSize` bytes, the rest of them zero) at the start of `p`:
    /// the header page's first bytes, or the value of the header-copy record.
    func writeStaticPart(into p: UnsafeMutableRawBufferPointer) {
        precondition(keyCheck.count <= Format.maxKeyCheckLength && p.count >= Format.staticSize)
        p.baseAddress!.initializeMemory(as: UInt8.self, repeating: 0, count: Format.staticSize)
        p.storeBytes(of: Format.fileMagic.littleEndian, as: UInt64.self)
        p.storeBytes(of: version.littleEndian, toByteOffset: Format.versionOffset, as: UInt16.self)
        p.storeBytes(
            of: UInt16(Format.headerSize).littleEndian, toByteOffset: Format.headerSizeOffset, as: UInt16.self)
        p.storeBytes(of: flags.littleEndian, toByteOffset: Format.flagsOffset, as: UInt32.self)
        p.storeBytes(of: uuid.low.littleEndian, toByteOffset: Format.uuidOffset, as: UInt64.self)
        p.storeBytes(of: uuid.high.littleEndian, toByteOffset: Format.uuidOffset + 8, as: UInt64.self)
        p.storeBytes(of: generation.littleEndian, toByteOffset: Format.generationOffset, as: UInt64.self)
        p.storeBytes(of: createdAt.littleEndian, toByteOffset: Format.createdAtOffset, as: Int64.self)
        p.storeBytes(
            of: UInt16(keyCheck.count).littleEndian, toByteOffset: Format.keyCheckLengthOffset, as: UInt16.self)
        for (i, b) in keyCheck.enumerated() { p[Format.keyCheckOffset + i] = b }
        p.storeBytes(of: baseWord.littleEndian, toByteOffset: Format.baseOffset, as: UInt64.self)
        let crc = CRC32C.checksum(UnsafeRawBufferPointer(rebasing: p[0..<Format.staticCRCOffset]))
        p.storeBytes(of: crc.littleEndian, toByteOffset: Format.staticCRCOffset, as: UInt32.self)
    }

    /// Why a header could not be read.
    enum Problem: Error {
        case notAStore(String)
        case unsupportedVersion(UInt16)
        case damaged(String)
    }

    /// Parses the first bytes of a file (up to a page; `bytes.count` is what the file holds), or with
    /// `wholePage: false` the static part alone (the value of a header-copy record).
    static func parse(_ bytes: UnsafeRawBufferPointer, wholePage: Bool = true) throws(Problem) -> Header {
        guard bytes.count >= Format.fileMagicLength else {
            throw .notAStore("the file is \(bytes.count) bytes long, too short for a header")
        }
        guard UInt64(littleEndian: bytes.loadUnaligned(as: UInt64.self)) == Format.fileMagic else {
            throw .notAStore("the file does not start with the PrefsKV magic")
        }
        // The version is read before the checksum: a newer format may lay out its header differently.
        guard bytes.count >= Format.staticSize else {
            throw .damaged("the header is truncated (\(bytes.count) of \(Format.headerSize) bytes)")
        }
        let version = UInt16(littleEndian: bytes.loadUnaligned(fromByteOffset: Format.versionOffset, as: UInt16.self))
        if version > Format.version { throw .unsupportedVersion(version) }
        let crc = UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: Format.staticCRCOffset, as: UInt32.self))
        guard crc == CRC32C.checksum(UnsafeRawBufferPointer(rebasing: bytes[0..<Format.staticCRCOffset])) else {
            throw .damaged("the header checksum does not match")
        }
        guard version >= 1 else { throw .damaged("the header names format version \(version)") }
        let size = UInt16(littleEndian: bytes.loadUnaligned(fromByteOffset: Format.headerSizeOffset, as: UInt16.self))
        guard Int(size) == Format.headerSize else { throw .damaged("the header size field is \(size)") }
        guard !wholePage || bytes.count >= Format.headerSize else {
            throw .damaged("the header page is truncated (\(bytes.count) of \(Format.headerSize) bytes)")
        }
        let keyCheckLength = Int(
            UInt16(littleEndian: bytes.loadUnaligned(fromByteOffset: Format.keyCheckLengthOffset, as: UInt16.self)))
        guard keyCheckLength <= Format.maxKeyCheckLength else { throw .damaged("the key check length is invalid") }
        let flags = UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: Format.flagsOffset, as: UInt32.self))
        // Version 2 means authenticated records, which only a sealed store has (version 3 adds the header copy
        // to both kinds).
        guard version != Format.authenticatedVersion || flags & Format.flagEncrypted != 0 else {
            throw .damaged("the header names format version \(version) for a store that is not sealed")
        }
        return Header(
            version: version,
            flags: flags,
            uuid: StoreUUID(
                low: UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: Format.uuidOffset, as: UInt64.self)),
                high: UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: Format.uuidOffset + 8, as: UInt64.self))),
            generation: UInt64(
                littleEndian: bytes.loadUnaligned(fromByteOffset: Format.generationOffset, as: UInt64.self)),
            createdAt: Int64(littleEndian: bytes.loadUnaligned(fromByteOffset: Format.createdAtOffset, as: Int64.self)),
            // No array at all for a plain store (an empty one allocates nothing).
            keyCheck: keyCheckLength == 0
                ? []
                : Array(
                    UnsafeRawBufferPointer(
                        rebasing: bytes[Format.keyCheckOffset..<Format.keyCheckOffset + keyCheckLength])),
            baseWord: version >= Format.indexVersion
                ? UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: Format.baseOffset, as: UInt64.self)) : 0)
    }
}

extension Header {
    /// The header read from the copy that starts a version-3 log, when the header-copy record at offset 4096
    /// verifies its checksum and holds a header of version 3 or later (its authenticator, in a sealed store, is
    /// for the caller to check: `copyRecord`). Nil otherwise: older stores have no copy. Throws
    /// `unsupportedVersion` for a copy that verifies and names a newer version: a newer format.
    static func fromCopy(in bytes: UnsafeRawBufferPointer) throws(Problem) -> Header? {
        guard let record = copyRecord(in: bytes) else { return nil }
        let header: Header
        do throws(Problem) {
            header = try Header.parse(record.value(in: bytes), wholePage: false)
        } catch {
            if case .unsupportedVersion = error { throw error }
            return nil
        }
        guard header.hasHeaderCopy, record.isAuthenticated == header.authenticatesRecords else { return nil }
        return header
    }

    /// The header-copy record at offset 4096, when one verifies its checksum under the version and generation of
    /// the header it holds (from version 5 the checksum starts with that generation).
    static func copyRecord(in bytes: UnsafeRawBufferPointer) -> RecordHeader? {
        let limit = bytes.count & ~7
        guard let shape = RecordHeader.plausible(in: bytes, at: Format.logStart, limit: limit), shape.kind == .header
        else { return nil }
        let seed = RecordSeed(headerPage: shape.value(in: bytes))
        return RecordHeader.verified(in: bytes, at: Format.logStart, limit: limit, seed: seed)
    }

    /// Writes the header-copy record at the start of a version-3 image's log and returns where the next record
    /// goes; writes nothing for an older version.
    static func writeCopy(
        of header: Header, into bytes: UnsafeMutableRawBufferPointer, auth: RecordAuth?
    ) -> Int {
        guard header.hasHeaderCopy else { return Format.logStart }
        precondition((auth != nil) == header.authenticatesRecords, "a sealed image's records are authenticated")
        let record = RecordWriter.write(
            into: bytes, at: Format.logStart, kind: .header, valueType: 0, flags: RecordFlags.commit, seq: 0,
            expiresAt: 0, key: UnsafeRawBufferPointer(start: nil, count: 0), valueLength: Format.staticSize,
            auth: auth, seed: header.recordSeed
        ) { value in header.writeStaticPart(into: value) }
        return Format.logStart + record.length
    }
}

/// A store's 16-byte random id, as two words (no array to build when a header is read).
struct StoreUUID: Equatable {
    /// Bytes 0..<8 and 8..<16, little-endian.
    var low: UInt64
    var high: UInt64

    init(low: UInt64, high: UInt64) {
        self.low = low
        self.high = high
    }

    init(bytes: some Collection<UInt8>) {
        precondition(bytes.count == 16, "a store UUID is 16 bytes")
        var words: (UInt64, UInt64) = (0, 0)
        withUnsafeMutableBytes(of: &words) { out in
            for (i, b) in bytes.enumerated() { out[i] = b }
        }
        self.init(low: UInt64(littleEndian: words.0), high: UInt64(littleEndian: words.1))
    }

    /// The 16 bytes as stored in the header.
    var bytes: [UInt8] { withUnsafeBytes { Array($0) } }

    func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        let words = (low.littleEndian, high.littleEndian)
        return try Swift.withUnsafeBytes(of: words) { try body($0) }
    }
}

/// The fixed fields of a record that verified (magic, plausible lengths, CRC).
struct RecordHeader {
    var offset: Int
    var kind: RecordKind
    var valueType: UInt8
    var flags: UInt8
    var keyLength: Int
    var valueLength: Int
    var seq: UInt64
    var expiresAt: Int64
    /// The CRC32C stored at the record's end (what the index keeps to recognise the record later).
    var crc: UInt32 = 0

    var length: Int {
        Format.recordLength(keyLength: keyLength, valueLength: valueLength, authenticated: isAuthenticated)
    }
    var keyOffset: Int { offset + Format.recordHeaderSize }
    var valueOffset: Int { offset + Format.recordHeaderSize + keyLength }
    var isCommit: Bool { flags & RecordFlags.commit != 0 }
    var isSealed: Bool { flags & RecordFlags.sealed != 0 }
    var isAuthenticated: Bool { flags & RecordFlags.authenticated != 0 }
    var isBound: Bool { flags & RecordFlags.bound != 0 }

    /// Reads the header at `offset` if its fields are plausible and the record fits below `limit`; does not
    /// check the CRC.
    @inline(__always)
    static func plausible(in bytes: UnsafeRawBufferPointer, at offset: Int, limit: Int) -> RecordHeader? {
        guard offset + Format.recordHeaderSize + Format.recordTrailerSize <= limit else { return nil }
        guard UInt32(littleEndian: bytes.load(fromByteOffset: offset, as: UInt32.self)) == Format.recordMagic,
            let kind = RecordKind(rawValue: bytes[offset + 4])
        else { return nil }
        let valueType = bytes[offset + 5]
        let flags = bytes[offset + 6]
        guard bytes[offset + 7] == 0, flags & ~RecordFlags.known == 0 else { return nil }
        // Only a sealed set record is bound, and then it has no authenticator.
        if flags & RecordFlags.bound != 0 {
            guard kind == .set, flags & (RecordFlags.sealed | RecordFlags.authenticated) == RecordFlags.sealed
            else { return nil }
        }
        let keyLength = Int(UInt32(littleEndian: bytes.load(fromByteOffset: offset + 8, as: UInt32.self)))
        let valueLength = Int(UInt32(littleEndian: bytes.load(fromByteOffset: offset + 12, as: UInt32.self)))
        guard keyLength <= Format.maxKeyLength, valueLength <= Format.maxStoredValueLength else { return nil }
        switch kind {
        case .set: guard ValueType(rawValue: valueType) != nil, keyLength > 0 else { return nil }
        case .delete: guard valueType == 0, keyLength > 0, valueLength == 0 else { return nil }
        case .removeAll: guard valueType == 0, keyLength == 0, valueLength == 0 else { return nil }
        case .commit:
            guard valueType == 0, keyLength == 0, valueLength == 4,
                flags & ~RecordFlags.authenticated == RecordFlags.commit
            else { return nil }
        case .header:
            guard offset == Format.logStart, valueType == 0, keyLength == 0, valueLength == Format.staticSize,
                flags & ~RecordFlags.authenticated == RecordFlags.commit
            else { return nil }
        case .index:
            guard valueType == 0, keyLength == 0, valueLength >= IndexTable.headerSize,
                (valueLength - IndexTable.headerSize) % 8 == 0, flags & ~RecordFlags.authenticated == RecordFlags.commit
            else { return nil }
        }
        var header = RecordHeader(
            offset: offset, kind: kind, valueType: valueType, flags: flags, keyLength: keyLength,
            valueLength: valueLength,
            seq: UInt64(littleEndian: bytes.load(fromByteOffset: offset + 16, as: UInt64.self)),
            expiresAt: Int64(littleEndian: bytes.load(fromByteOffset: offset + 24, as: Int64.self)))
        let end = offset + header.length
        guard end <= limit else { return nil }
        header.crc = UInt32(littleEndian: bytes.load(fromByteOffset: end - 4, as: UInt32.self))
        return header
    }

    /// Reads and verifies the record at `offset` (8-aligned) below `limit`, whose checksum starts with `seed`
    /// (the image's `Header.recordSeed`: `.unseeded` before version 5).
    @inline(__always)
    static func verified(
        in bytes: UnsafeRawBufferPointer, at offset: Int, limit: Int, seed: RecordSeed
    ) -> RecordHeader? {
        guard let h = plausible(in: bytes, at: offset, limit: limit) else { return nil }
        let end = offset + h.length
        guard h.crc == seed.checksum(UnsafeRawBufferPointer(rebasing: bytes[offset..<end - 4])) else { return nil }
        return h
    }

    /// The key bytes of the record.
    func key(in bytes: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(rebasing: bytes[keyOffset..<keyOffset + keyLength])
    }

    /// The value bytes of the record.
    func value(in bytes: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(rebasing: bytes[valueOffset..<valueOffset + valueLength])
    }
}

/// Writes records into a mutable buffer (the mapping, beyond the published log end, or a new image).
/// Where the CRC32C of a record starts: after the record magic (every version), then, from version 5, the
/// generation of the image the record belongs to (8 bytes, little-endian). The generation is not stored in the
/// record: it is the header's, so a record verifies only in the image it was written for. When a file holds bytes of
/// an earlier image of the store (a file reused for a newer image, then cut by a power loss before all of it
/// reached the disk; a page written in the wrong place), those records fail their checksum instead of being taken
/// for records of the image. The header-copy record at 4096 holds the generation its checksum starts with: it is
/// verified on its own under the version and generation it holds (`Header.copyRecord`), and by a scan of the log
/// under the image's, so a header copy left by an earlier image does not verify as part of a newer one.
struct RecordSeed {
    let start: CRC32C
    /// The generation the checksums start with; nil when unseeded.
    let generation: UInt64?

    /// The CRC32C state after the record magic: the header copy, and every record before version 5.
    static let unseeded = RecordSeed(start: CRC32C.afterPrefix(littleEndian: Format.recordMagic), generation: nil)

    private init(start: CRC32C, generation: UInt64?) {
        self.start = start
        self.generation = generation
    }

    /// The seed of the records of the image of generation `generation` (version 5 and later).
    init(generation: UInt64) {
        var crc = RecordSeed.unseeded.start
        withUnsafeBytes(of: generation.littleEndian) { crc.update($0) }
        self.init(start: crc, generation: generation)
    }

    /// The seed of the records of a store file whose header page is `page` (its version and generation fields,
    /// read without checking the header's CRC): for tools and tests that write records into a file by hand.
    init(headerPage page: UnsafeRawBufferPointer) {
        let version = UInt16(littleEndian: page.loadUnaligned(fromByteOffset: Format.versionOffset, as: UInt16.self))
        let generation = UInt64(
            littleEndian: page.loadUnaligned(fromByteOffset: Format.generationOffset, as: UInt64.self))
        self = version >= Format.seededVersion ? RecordSeed(generation: generation) : .unseeded
    }

    /// The checksum of a record whose bytes, from its magic up to its CRC, are `record`.
    func checksum(_ record: UnsafeRawBufferPointer) -> UInt32 {
        var crc = start
        crc.update(UnsafeRawBufferPointer(rebasing: record[4...]))
        return crc.value
    }
}

enum RecordWriter {
    /// Writes one record at `offset` and returns its header (its `length` is the bytes it took). The value is
    /// produced by `fillValue` directly in place. With `auth` (a version-2 sealed store) the record is flagged
    /// authenticated and its authenticator is computed before the CRC, which starts with `seed` (the image's
    /// `Header.recordSeed`). The magic is stored last, after the CRC, so a half-written record never starts with it.
    /// A set record of an image that binds values is written with `writeBound` instead.
    @inline(__always)
    static func write(
        into bytes: UnsafeMutableRawBufferPointer, at offset: Int, kind: RecordKind, valueType: UInt8, flags: UInt8,
        seq: UInt64, expiresAt: Int64, key: UnsafeRawBufferPointer, valueLength: Int, auth: RecordAuth? = nil,
        seed: RecordSeed, fillValue: (UnsafeMutableRawBufferPointer) throws -> Void
    ) rethrows -> RecordHeader {
        precondition(kind != .set || !(auth?.bindsValues ?? false), "a bound set record is written by writeBound")
        return try write(
            into: bytes, at: offset, kind: kind, valueType: valueType, flags: flags, seq: seq, expiresAt: expiresAt,
            key: key, valueLength: valueLength, auth: auth, binding: nil, seed: seed
        ) { out, _ in try fillValue(out) }
    }

    /// Writes a sealed set record of `image`, an image that binds values (`RecordAuth.bindsValues`, version 6):
    /// flagged bound, with no authenticator; `sealValue` seals the value in place with the associated data it is
    /// given, the record's binding (`RecordAuth.withBindingData`: its context, header and key, as written here).
    /// Takes the image alone, not the `RecordAuth` (copying one, with its sealer, cost a sealed write 650
    /// instructions).
    @inline(__always)
    static func writeBound(
        into bytes: UnsafeMutableRawBufferPointer, at offset: Int, valueType: UInt8, flags: UInt8, seq: UInt64,
        expiresAt: Int64, key: UnsafeRawBufferPointer, valueLength: Int, image: ImageIdentity, seed: RecordSeed,
        sealValue: (UnsafeMutableRawBufferPointer, UnsafeRawBufferPointer) throws -> Void
    ) rethrows -> RecordHeader {
        try write(
            into: bytes, at: offset, kind: .set, valueType: valueType, flags: flags | RecordFlags.sealed, seq: seq,
            expiresAt: expiresAt, key: key, valueLength: valueLength, auth: nil, binding: image, seed: seed,
            fill: sealValue)
    }

    @inline(__always)
    private static func write(
        into bytes: UnsafeMutableRawBufferPointer, at offset: Int, kind: RecordKind, valueType: UInt8, flags: UInt8,
        seq: UInt64, expiresAt: Int64, key: UnsafeRawBufferPointer, valueLength: Int, auth: RecordAuth?,
        binding: ImageIdentity?, seed: RecordSeed,
        fill: (UnsafeMutableRawBufferPointer, UnsafeRawBufferPointer) throws -> Void
    ) rethrows -> RecordHeader {
        precondition(auth == nil || binding == nil, "a record is either authenticated or bound")
        let signed = auth != nil
        var flags = flags & ~(RecordFlags.authenticated | RecordFlags.bound)
        if signed { flags |= RecordFlags.authenticated }
        if binding != nil { flags |= RecordFlags.bound }
        let length = Format.recordLength(keyLength: key.count, valueLength: valueLength, authenticated: signed)
        precondition(offset & 7 == 0 && offset + length <= bytes.count, "record does not fit its buffer")
        let base = bytes.baseAddress! + offset
        base.storeBytes(of: 0, toByteOffset: 0, as: UInt32.self)
        storeFields(
            into: base, kind: kind, valueType: valueType, flags: flags, valueLength: valueLength, seq: seq,
            expiresAt: expiresAt, key: key)
        let valueStart = Format.recordHeaderSize + key.count
        let value = UnsafeMutableRawBufferPointer(start: base + valueStart, count: valueLength)
        if let binding {
            // The binding is made from this writer's own values, never read back from the record: `bytes` may be a
            // shared mapping that someone else writes meanwhile.
            try RecordAuth.withBindingData(
                image: binding, offset: offset, kind: kind, valueType: valueType, flags: flags,
                valueLength: valueLength, seq: seq, expiresAt: expiresAt, key: key
            ) { ad in try fill(value, ad) }
        } else {
            try fill(value, UnsafeRawBufferPointer(start: nil, count: 0))
        }
        let padStart = valueStart + valueLength
        (base + padStart).initializeMemory(as: UInt8.self, repeating: 0, count: length - padStart)
        if signed { auth.unsafelyUnwrapped.sign(UnsafeMutableRawBufferPointer(start: base, count: length), at: offset) }
        var crc = seed.start
        crc.update(UnsafeRawBufferPointer(start: base + 4, count: length - 8))
        base.storeBytes(of: crc.value.littleEndian, toByteOffset: length - 4, as: UInt32.self)
        base.storeBytes(of: Format.recordMagic.littleEndian, toByteOffset: 0, as: UInt32.self)
        return RecordHeader(
            offset: offset, kind: kind, valueType: valueType, flags: flags, keyLength: key.count,
            valueLength: valueLength, seq: seq, expiresAt: expiresAt, crc: crc.value)
    }

    /// Stores a record's bytes 4..<32 (kind, value type, flags, a zero byte, key length, value length, sequence
    /// number, expiry) and its key at `base`, the record's magic: what `write` lays out, and what a bound value's
    /// associated data repeats (`RecordAuth.withBindingData`, at its own offset).
    @inline(__always)
    static func storeFields(
        into base: UnsafeMutableRawPointer, kind: RecordKind, valueType: UInt8, flags: UInt8, valueLength: Int,
        seq: UInt64, expiresAt: Int64, key: UnsafeRawBufferPointer
    ) {
        base.storeBytes(of: kind.rawValue, toByteOffset: 4, as: UInt8.self)
        base.storeBytes(of: valueType, toByteOffset: 5, as: UInt8.self)
        base.storeBytes(of: flags, toByteOffset: 6, as: UInt8.self)
        base.storeBytes(of: 0, toByteOffset: 7, as: UInt8.self)
        base.storeBytes(of: UInt32(key.count).littleEndian, toByteOffset: 8, as: UInt32.self)
        base.storeBytes(of: UInt32(valueLength).littleEndian, toByteOffset: 12, as: UInt32.self)
        base.storeBytes(of: seq.littleEndian, toByteOffset: 16, as: UInt64.self)
        base.storeBytes(of: expiresAt.littleEndian, toByteOffset: 24, as: Int64.self)
        if !key.isEmpty {
            (base + Format.recordHeaderSize).copyMemory(from: key.baseAddress!, byteCount: key.count)
        }
    }

    /// Copies a verified record into `bytes` at `offset` with sequence number `seq`, setting its commit flag
    /// (a new image holds only single committed records, numbered 1, 2, 3...), and returns its length. With
    /// `auth` the copy gets a new authenticator, for its new image and offset; its checksum starts with `seed`, the
    /// new image's. A sealed set record copied into an image that binds values is sealed again, bound to its new
    /// place under a fresh nonce: it is opened with the associated data it was sealed with in `source`, an image of
    /// `sourceImage` (its store and generation). Nil when it does not open there (its bytes changed).
    static func copy(
        _ record: RecordHeader, from source: UnsafeRawBufferPointer, sourceImage: ImageIdentity,
        into bytes: UnsafeMutableRawBufferPointer, at offset: Int, seq: UInt64, auth: RecordAuth?, seed: RecordSeed
    ) -> Int? {
        let key = record.key(in: source)
        let value = record.value(in: source)
        let flags = record.flags | RecordFlags.commit
        if let auth, auth.bindsValues, record.kind == .set {
            guard record.isSealed else { return nil }
            // The record's header and key copied once into private memory: the open checks this copy, and the new
            // record is written from it (the source may be a shared mapping).
            return withUnsafeTemporaryAllocation(byteCount: record.valueOffset - record.offset, alignment: 8) { head in
                head.copyMemory(from: UnsafeRawBufferPointer(rebasing: source[record.offset..<record.valueOffset]))
                let head = UnsafeRawBufferPointer(head)
                return try? SealedRecordCodec.withPlaintext(
                    of: value, head: head, bound: record.isBound, in: sourceImage, offset: record.offset,
                    type: record.valueType, expiresAt: record.expiresAt, sealer: auth.sealer
                ) { plain in
                    try writeBound(
                        into: bytes, at: offset, valueType: record.valueType, flags: flags, seq: seq,
                        expiresAt: record.expiresAt, key: UnsafeRawBufferPointer(rebasing: head[Format.recordHeaderSize...]),
                        valueLength: value.count, image: ImageIdentity(uuid: auth.uuid, generation: auth.generation),
                        seed: seed
                    ) { out, ad in
                        try auth.sealer.seal(plain, associatedData: ad, into: out)
                    }.length
                }
            }
        }
        return write(
            into: bytes, at: offset, kind: record.kind, valueType: record.valueType, flags: flags, seq: seq,
            expiresAt: record.expiresAt, key: key, valueLength: value.count, auth: auth, seed: seed
        ) { out in
            if !value.isEmpty { out.baseAddress!.copyMemory(from: value.baseAddress!, byteCount: value.count) }
        }.length
    }
}

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
/// associated data `withBindingData` makes, the same context under the domain `"PKVv"` and version 6, followed by
/// the record's bytes from its kind byte to the end of its key. What the authenticator bound (store, image, offset,
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
    /// "PKVv", little-endian: the context of a bound value's associated data.
    private static let bindingDomain: UInt32 = 0x7656_4B50

    @inline(__always)
    private func withContext<R>(offset: Int, _ body: (UnsafeRawBufferPointer) -> R) -> R {
        withUnsafeTemporaryAllocation(byteCount: RecordAuth.contextSize, alignment: 8) { context in
            RecordAuth.storeContext(
                into: context, domain: RecordAuth.domain, version: Format.authenticatedVersion,
                image: ImageIdentity(uuid: uuid, generation: generation), offset: offset)
            return body(UnsafeRawBufferPointer(context))
        }
    }

    @inline(__always)
    private static func storeContext(
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

    /// Passes `body` the associated data that binds a sealed set record at file offset `offset` of this image:
    /// `"PKVv" | version u8 (6) | 3 zero bytes | store UUID | generation u64 | offset u64`, then the record's bytes
    /// from its kind byte to the end of its key (`head`: the record from its magic to the end of its key). Built on
    /// the stack: `head` may lie in a shared mapping, and what is sealed or checked is this copy.
    @inline(__always)
    func withBindingData<R>(
        head: UnsafeRawBufferPointer, offset: Int, _ body: (UnsafeRawBufferPointer) throws -> R
    ) rethrows -> R {
        try RecordAuth.withBindingData(
            image: ImageIdentity(uuid: uuid, generation: generation), head: head, offset: offset, body)
    }

    /// `withBindingData` for a record of `image`.
    @inline(__always)
    static func withBindingData<R>(
        image: ImageIdentity, head: UnsafeRawBufferPointer, offset: Int,
        _ body: (UnsafeRawBufferPointer) throws -> R
    ) rethrows -> R {
        precondition(head.count >= Format.recordHeaderSize, "a record's head is its header and key")
        let covered = head.count - 4
        return try withUnsafeTemporaryAllocation(byteCount: contextSize + covered, alignment: 8) { data in
            storeContext(
                into: data, domain: bindingDomain, version: Format.boundVersion, image: image, offset: offset)
            UnsafeMutableRawBufferPointer(rebasing: data[contextSize...]).copyMemory(
                from: UnsafeRawBufferPointer(rebasing: head[4...]))
            return try body(UnsafeRawBufferPointer(data))
        }
    }

    /// `withBindingData` of the set record a writer is about to seal at `offset` of `image`, made from its own
    /// values (the bytes `RecordWriter` stores from them, by the same `RecordWriter.storeFields`): what is sealed is
    /// never read back from a file another process can write.
    @inline(__always)
    static func withBindingData<R>(
        image: ImageIdentity, offset: Int, kind: RecordKind, valueType: UInt8, flags: UInt8, valueLength: Int,
        seq: UInt64, expiresAt: Int64, key: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer) throws -> R
    ) rethrows -> R {
        let size = contextSize + Format.recordHeaderSize - 4 + key.count
        return try withUnsafeTemporaryAllocation(byteCount: size, alignment: 8) { data in
            storeContext(into: data, domain: bindingDomain, version: Format.boundVersion, image: image, offset: offset)
            // Record bytes 4..<32 and the key, laid out as in the record: its magic would lie 4 bytes before them.
            RecordWriter.storeFields(
                into: data.baseAddress! + (contextSize - 4), kind: kind, valueType: valueType, flags: flags,
                valueLength: valueLength, seq: seq, expiresAt: expiresAt, key: key)
            return try body(UnsafeRawBufferPointer(data))
        }
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
            guard record.isBound else { return false }
            // Its padding is zeros (the seal does not cover it), and its value opens with the associated data of
            // its place (into a buffer wiped after).
            let valueEnd = record.valueOffset + record.valueLength
            for i in valueEnd..<record.offset + record.length - Format.recordTrailerSize where bytes[i] != 0 {
                return false
            }
            let value = record.value(in: bytes)
            let head = UnsafeRawBufferPointer(rebasing: bytes[record.offset..<record.valueOffset])
            return
                (try? SealedRecordCodec.withPlaintext(
                    of: value, head: head, bound: true, in: ImageIdentity(uuid: uuid, generation: generation),
                    offset: fileOffset ?? record.offset, type: record.valueType, expiresAt: record.expiresAt,
                    sealer: sealer
                ) { _ in () }) != nil
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
            var difference: UInt8 = 0
            for i in 0..<Format.authenticatorSize { difference |= expected[i] ^ bytes[macStart + i] }
            return difference == 0
        }
    }
}
