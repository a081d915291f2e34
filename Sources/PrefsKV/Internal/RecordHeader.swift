// A record's fixed fields, read from bytes and checked (plausible, then verified by its CRC32C), and where that
// CRC starts (`RecordSeed`). Documentation/FileFormat.md, "Records".

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
            let kind = RecordKind.decoding(bytes[offset + 4])
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
        case .set: guard ValueType.isValid(valueType), keyLength > 0 else { return nil }
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

/// Private copies of a sealed store's bytes. The mapping is shared with every process that can write the file, so a
/// byte checked there may have changed when it is read again: in a sealed store a record is copied here first,
/// checked as a copy, and every field and byte used afterwards is the copy's (the scan, `LogScanner.scan`; the
/// table's lookups, `IndexTable.probe`; a sealed value's open and re-seal, `SealedValue`). Records are written the
/// other way round: built in private memory and copied into the mapping, their magic last (`RecordWriter`).
enum PrivateCopy {
    /// Passes `body` a private copy of `bytes[range]`: on the stack when small, else a temporary allocation.
    @inline(__always)
    static func of<R>(
        _ bytes: UnsafeRawBufferPointer, _ range: Range<Int>, _ body: (UnsafeRawBufferPointer) throws -> R
    ) rethrows -> R {
        try withUnsafeTemporaryAllocation(byteCount: max(range.count, 1), alignment: 16) { buffer in
            let copy = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<range.count])
            if !range.isEmpty { copy.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[range])) }
            return try body(UnsafeRawBufferPointer(copy))
        }
    }

    /// Passes `body` a private copy of `bytes[range]` at the same offsets: a buffer of `range.upperBound` bytes of
    /// which only `range` is copied (and touched: the rest is never read), so that records keep their file offsets.
    static func atOffsets<R>(
        _ bytes: UnsafeRawBufferPointer, _ range: Range<Int>, _ body: (UnsafeRawBufferPointer) throws -> R
    ) rethrows -> R {
        let copy = UnsafeMutableRawBufferPointer.allocate(byteCount: max(range.upperBound, 1), alignment: 16)
        defer { copy.deallocate() }
        if !range.isEmpty {
            UnsafeMutableRawBufferPointer(rebasing: copy[range]).copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[range]))
        }
        return try body(UnsafeRawBufferPointer(rebasing: copy[0..<range.upperBound]))
    }
}

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
