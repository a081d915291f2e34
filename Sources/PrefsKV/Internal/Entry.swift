// An index entry: where a key's current value lives in the mapping, and what the index knows of it.

/// Where a key's current value lives in the mapping: 32 bytes, so that an index of 10,000 keys stays in cache.
struct Entry {
    var recordOffset: Int
    var expiresAt: Int64
    private var keyLength32: UInt32
    private var valueLength32: UInt32
    /// Sealed stores only, memory only: CRC32C of the plaintext value, when `hasPlainCRC`.
    private var plainCRC32: UInt32 = 0
    var type: ValueType
    var sealed: Bool
    /// The record ends with an authenticator (a version-2 sealed store).
    var authenticated: Bool
    private var hasPlainCRC = false

    init(_ record: RecordHeader) {
        recordOffset = record.offset
        keyLength32 = UInt32(record.keyLength)
        valueLength32 = UInt32(record.valueLength)
        expiresAt = record.expiresAt
        type = ValueType(rawValue: record.valueType)!
        sealed = record.isSealed
        authenticated = record.isAuthenticated
    }

    var keyLength: Int { Int(keyLength32) }
    var valueLength: Int { Int(valueLength32) }
    var plainCRC: UInt32? {
        get { hasPlainCRC ? plainCRC32 : nil }
        set {
            hasPlainCRC = newValue != nil
            plainCRC32 = newValue ?? 0
        }
    }
    var recordLength: Int {
        Format.recordLength(keyLength: keyLength, valueLength: valueLength, authenticated: authenticated)
    }
    var valueOffset: Int { recordOffset + Format.recordHeaderSize + keyLength }
    var keyOffset: Int { recordOffset + Format.recordHeaderSize }

    @inline(__always)
    func isExpired(now: @autoclosure () -> Int64) -> Bool { expiresAt != 0 && expiresAt <= now() }
}
