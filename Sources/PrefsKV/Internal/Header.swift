// The header page: its static part (written once, covered by its own CRC32C), its dynamic words, and the copy
// of the static part that starts a version-3 log. Documentation/FileFormat.md, "Header".
import SystemLayer

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
    /// Whether an index record authenticates its table in pieces (a sealed store of version 8 or later).
    var authenticatesTablePieces: Bool { isEncrypted && version >= Format.tablePiecesVersion }
    /// Whether the pending word names a synchronous write past the log end (version 7 and later).
    var hasPendingWord: Bool { version >= Format.pendingVersion }
    /// Whether the log starts with a copy of this header (version 3 and later).
    var hasHeaderCopy: Bool { version >= Format.headerCopyVersion }
    /// Whether index records may be appended to the log (version 4 and later).
    var hasIndexRecords: Bool { version >= Format.indexVersion }
    /// Where the checksum of every record of this image starts (`RecordSeed`).
    var recordSeed: RecordSeed { version >= Format.seededVersion ? RecordSeed(generation: generation) : .unseeded }
    /// The generation of the image `<id>.prefs.prev` must hold when this image was renamed into place by a buffered
    /// store's automatic compaction without being flushed (FileProtocols.md, "Compaction"): until a `sync()` makes this
    /// one durable, the store's durable state is that base image's. Nil for every other image.
    var baseGeneration: UInt64? { baseWord == 0 ? nil : baseWord - 1 }
    /// Where the first record after the header copy goes in a new image of this header.
    var firstRecordOffset: Int {
        Format.logStart + (hasHeaderCopy ? Format.headerCopyLength(authenticated: authenticatesRecords) : 0)
    }

    /// Whether a sealer's key check is the one a header holds, compared in constant time (how much of a guessed key
    /// check matched is not told by the time the comparison takes).
    static func sameKeyCheck(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        a.withUnsafeBytes { x in b.withUnsafeBytes { y in Sys.constantTimeEqual(x, y) } }
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
