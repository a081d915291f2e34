// The on-disk layout's constants, record kinds and flags, and value types. Documentation/FileFormat.md is the prose
// version of this file and of Header.swift, RecordHeader.swift, RecordWriter.swift, RecordAuth.swift and
// SealedValue.swift; they must agree (FileFormatTests checks the worked example there against bytes produced here).
import SystemLayer

/// Layout constants of format versions 1 to 8.
///
/// - Version 1: plain stores, and sealed stores whose records are not authenticated.
/// - Version 2: sealed stores whose every record carries an authenticator (a MAC under the sealer's key, binding
///   the record to its store, file generation and offset).
/// - Version 3 (plain and sealed): version 2's rules, and the log starts with a copy of the header's
///   static part (a `header` record at offset 4096), so that a damaged header page is no single point of failure.
/// - Version 4: version 3's rules, and the log may hold index records (kind 6), a hash table of the store's keys
///   that an open uses instead of reading the whole log (IndexTable.swift); the header's index word names the
///   newest.
/// - Version 5: version 4's rules, and every record's CRC32C starts with the image's generation (`RecordSeed`): a
///   record of another image of the store, left in a file or copied into it, does not verify in this one.
/// - Version 6: version 5's rules, and a sealed store's set records are bound to their place by their value's AEAD
///   instead of an authenticator: its associated data is the record's context (store, image, offset) and its header
///   and key (`RecordAuth.withBindingData`). Plain stores are laid out as in version 5.
/// - Version 7: version 6's layout, and the header's pending word (`pendingWordOffset`): a `.synchronous` write is
///   flushed once, its records and that word, before its log end (StoreLog.publish).
/// - Version 8 (written now): version 7's rules, and a sealed store's index record authenticates its table in
///   pieces (IndexTable.swift): its authenticator covers the record up to its slots, which hold one MAC for every
///   4 KiB of slots, so that an open checks the head and a lookup only the pieces it reads. Plain stores are laid
///   out as in version 7.
///
/// Older versions are read as they are and written as version 8 by their next compaction, recovery, restore or
/// rekey (a synchronous write into an image older than 7 flushes twice, as that version's readers expect).
enum Format {
    /// "PREFSKV\0" (`50 52 45 46 53 4b 56 00`), read as one little-endian word.
    static let fileMagic: UInt64 = 0x0056_4B53_4645_5250
    static let fileMagicLength = 8
    /// The newest version this library reads, and the one it writes.
    static let version: UInt16 = 8
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
    /// Stores whose header's pending word names a `.synchronous` write flushed before its log end (this version and
    /// later): an older release would ignore it, and lose that write after a power cut.
    static let pendingVersion: UInt16 = 7
    /// Sealed stores whose index records authenticate their tables in pieces (this version and later).
    static let tablePiecesVersion: UInt16 = 8
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
    /// The end of a `.synchronous` write flushed before its log end was stored (`encodePending`), or 0.
    static let pendingWordOffset = 288
    /// The checksum of that write's bytes (`pendingCheck`), stored with the pending word (the same sector).
    static let pendingCheckOffset = 296

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

    /// The pending word of a `.synchronous` write whose records are `[logEnd, end)`: `end` in the low 48 bits, and
    /// 16 bits of the CRC32C of both offsets in the high 16, so that the word names a write only beside the log end
    /// it extends (a word left by an earlier write, or torn beside a newer log end, names none).
    static func encodePending(end: Int, logEnd: Int) -> UInt64 {
        precondition(end > logEnd && end < 1 << 48)
        return UInt64(end) | UInt64(pendingCheck(end: UInt64(end), logEnd: UInt64(logEnd))) << 48
    }

    /// The end of the write a pending word names beside the log end `logEnd`, or nil when it names none.
    static func decodePending(_ raw: UInt64, logEnd: Int) -> Int? {
        let end = raw & 0xFFFF_FFFF_FFFF
        guard raw != 0, end > UInt64(logEnd), end & 7 == 0,
            UInt16(truncatingIfNeeded: raw >> 48) == pendingCheck(end: end, logEnd: UInt64(logEnd))
        else { return nil }
        return Int(end)
    }

    /// The pending check word of the write `[logEnd, end)` of `bytes` (the mapped file): a 64-bit hash of both
    /// offsets and of the write's 8-byte little-endian words, each folded in as `h = (h ^ w) &* p; h ^= h >> 32`
    /// (FNV-1a's 64-bit basis and prime, on words). A write is taken from the pending word only when its bytes still
    /// give it: bytes of another write left in that range (a killed writer's, one whose flush failed, one forgotten
    /// after a power cut), mixed with a newer one's sector by sector, do not. (Not a CRC: a CRC of records that end
    /// in their own CRC32C is blind to which records they are, CRC being linear.)
    static func pendingCheck(_ bytes: UnsafeRawBufferPointer, logEnd: Int, end: Int) -> UInt64 {
        precondition(logEnd & 7 == 0 && end & 7 == 0 && logEnd <= end && end <= bytes.count)
        var h: UInt64 = 0xCBF2_9CE4_8422_2325
        @inline(__always) func fold(_ word: UInt64) {
            h = (h ^ word) &* 0x0000_0100_0000_01B3
            h ^= h >> 32
        }
        fold(UInt64(logEnd))
        fold(UInt64(end))
        var offset = logEnd
        while offset < end {
            fold(UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self)))
            offset += 8
        }
        return h
    }

    private static func pendingCheck(end: UInt64, logEnd: UInt64) -> UInt16 {
        withUnsafeBytes(of: (logEnd.littleEndian, end.littleEndian)) {
            UInt16(truncatingIfNeeded: CRC32C.checksum($0) >> 16)
        }
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

    /// The kind a record's kind byte names, nil for none: what `init(rawValue:)` answers, spelled out so that the
    /// scanner's check of every record inlines it.
    @inline(__always)
    static func decoding(_ byte: UInt8) -> RecordKind? {
        switch byte {
        case 1: .set
        case 2: .delete
        case 3: .removeAll
        case 4: .commit
        case 5: .header
        case 6: .index
        default: nil
        }
    }
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

    /// Whether `byte` names a value type (`init(rawValue:)` would answer one), inlined into the scanner's check of
    /// every record.
    @inline(__always)
    static func isValid(_ byte: UInt8) -> Bool { byte >= ValueType.bool.rawValue && byte <= ValueType.json.rawValue }

    init?(name: String) {
        guard let t = ValueType.allCases.first(where: { $0.name == name }) else { return nil }
        self = t
    }
}
