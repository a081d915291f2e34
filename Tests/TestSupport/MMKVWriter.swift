// MMKV stores written as MMKV 2.x writes them, for the importer's tests (PrefsKVTests' MMKVImportTests,
// VaultCtlTests' PrefsImportMMKVTests): shapes the fixtures in Tests/Fixtures/mmkv do not have (thousands of keys,
// damage with a matching checksum, an old meta version, hostile lengths).

/// One MMKV store's two files.
public struct MMKVWriter {
    /// Records in log order: a key's bytes and its value's bytes as MMKV encodes them (nil: a removal).
    public var records: [(key: [UInt8], value: [UInt8]?)] = []
    /// The meta file's version (4, MMKV 2.x's), flags (bit 0: auto key expiry) and IV.
    public var version: UInt32 = 4
    public var flags: UInt64 = 0
    public var iv = [UInt8](repeating: 0, count: 16)
    /// Applied to the log before its checksum is taken (MMKV's CRC covers the stored, encrypted bytes).
    public var encrypt: ([UInt8]) -> [UInt8] = { $0 }

    public init() {}

    /// A string value as MMKV's `set(std::string)` encodes it.
    public static func string(_ text: String) -> [UInt8] { varint(UInt64(text.utf8.count)) + Array(text.utf8) }

    /// A protobuf varint.
    public static func varint(_ value: UInt64) -> [UInt8] {
        var value = value
        var bytes: [UInt8] = []
        while value >= 0x80 {
            bytes.append(UInt8(value & 0x7F) | 0x80)
            value >>= 7
        }
        return bytes + [UInt8(value)]
    }

    /// The log as stored: the varint MMKV's readers skip, then the records, encrypted.
    public var payload: [UInt8] {
        var log = Self.varint(UInt64(records.count))
        for (key, value) in records {
            log += Self.varint(UInt64(key.count)) + key + Self.varint(UInt64(value?.count ?? 0)) + (value ?? [])
        }
        return encrypt(log)
    }

    /// The data file (a page multiple; before meta version 3 its first word is the log's length) and the meta file
    /// (CRC-32 of the stored log, version, sequence 1, IV, length, flags).
    public var files: (data: [UInt8], meta: [UInt8]) {
        let log = payload
        var data = [UInt8](repeating: 0, count: 4) + log
        if version < 3 { data.replaceSubrange(0..<4, with: Self.littleEndian(UInt32(log.count))) }
        data += [UInt8](repeating: 0, count: (4096 - data.count % 4096) % 4096)
        var meta = [UInt8](repeating: 0, count: 4096)
        meta.replaceSubrange(0..<4, with: Self.littleEndian(crc32IEEE(log)))
        meta.replaceSubrange(4..<8, with: Self.littleEndian(version))
        meta.replaceSubrange(8..<12, with: Self.littleEndian(1))
        meta.replaceSubrange(12..<28, with: iv)
        if version >= 3 { meta.replaceSubrange(28..<32, with: Self.littleEndian(UInt32(log.count))) }
        meta.replaceSubrange(104..<112, with: (0..<8).map { UInt8(truncatingIfNeeded: flags >> (8 * UInt64($0))) })
        return (data, meta)
    }

    static func littleEndian(_ value: UInt32) -> [UInt8] {
        (0..<4).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) }
    }
}

/// zlib's CRC-32 (IEEE, reflected, polynomial 0xEDB88320), bit by bit: what MMKV's meta file holds.
public func crc32IEEE(_ bytes: [UInt8]) -> UInt32 {
    var crc: UInt32 = 0xFFFF_FFFF
    for byte in bytes {
        crc ^= UInt32(byte)
        for _ in 0..<8 { crc = crc & 1 != 0 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
    }
    return ~crc
}
