// An index entry: where a key's current value lives in the mapping, and what the index knows of it.

/// Where a key's current value lives in the mapping: 32 bytes, so that an index of 10,000 keys stays in cache.
struct Entry {
    var recordOffset: Int
    var expiresAt: Int64
    private var keyLength32: UInt32
    private var valueLength32: UInt32
    /// A plain record: the CRC32C stored at its end, which a read checks to know the record is still the one this
    /// entry means. A sealed record (whose value the sealer authenticates): memory only, CRC32C of the plaintext
    /// value, when `hasPlainCRC`.
    private var check32: UInt32
    var type: ValueType
    var sealed: Bool
    /// The record ends with an authenticator (a version-2 sealed store; not a set record of version 6). A field of its
    /// own: every read's record check computes the record's length from it.
    var authenticated: Bool
    /// `boundBit`, `plainCRCBit` (one byte, so that an entry stays 32 bytes).
    private var bits: UInt8 = 0
    private static let boundBit: UInt8 = 1
    private static let plainCRCBit: UInt8 = 2

    init(_ record: RecordHeader) {
        recordOffset = record.offset
        keyLength32 = UInt32(record.keyLength)
        valueLength32 = UInt32(record.valueLength)
        expiresAt = record.expiresAt
        type = ValueType(rawValue: record.valueType)!
        sealed = record.isSealed
        check32 = record.isSealed ? 0 : record.crc
        authenticated = record.isAuthenticated
        bits = record.isBound ? Entry.boundBit : 0
    }

    /// The record's sealed value is bound to its place by its AEAD (a set record of a version-6 sealed store).
    var bound: Bool {
        get { bits & Entry.boundBit != 0 }
        set { bits = newValue ? bits | Entry.boundBit : bits & ~Entry.boundBit }
    }
    private var hasPlainCRC: Bool {
        get { bits & Entry.plainCRCBit != 0 }
        set { bits = newValue ? bits | Entry.plainCRCBit : bits & ~Entry.plainCRCBit }
    }

    var keyLength: Int { Int(keyLength32) }
    var valueLength: Int { Int(valueLength32) }
    /// A sealed record's plaintext CRC32C, when known.
    var plainCRC: UInt32? {
        get { hasPlainCRC ? check32 : nil }
        set {
            precondition(sealed, "a plain entry keeps its record's CRC")
            hasPlainCRC = newValue != nil
            check32 = newValue ?? 0
        }
    }
    /// A plain record's stored CRC32C.
    var recordCRC: UInt32 {
        get { check32 }
        set {
            precondition(!sealed, "a sealed entry keeps its plaintext's CRC")
            check32 = newValue
        }
    }
    /// Where the record's stored CRC32C is.
    var crcOffset: Int { recordOffset + recordLength - Format.recordTrailerSize }
    var recordLength: Int {
        Format.recordLength(keyLength: keyLength, valueLength: valueLength, authenticated: authenticated)
    }
    var valueOffset: Int { recordOffset + Format.recordHeaderSize + keyLength }
    var keyOffset: Int { recordOffset + Format.recordHeaderSize }

    @inline(__always)
    func isExpired(now: @autoclosure () -> Int64) -> Bool { expiresAt != 0 && expiresAt <= now() }
}
