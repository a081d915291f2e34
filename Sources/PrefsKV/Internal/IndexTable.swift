// The persisted index (format version 4): an index record holds a hash table of the store's keys as of its place
// in the log, so that an open reads that table and the records after it instead of the whole log. The table is
// an accelerator, never the truth: every slot is checked when read, every record it points to is verified before
// it is used, and anything that does not verify sends the handle back to reading the whole log (which finds the
// damage, and recovers from it as from any other). Documentation/FileFormat.md, "Index records".
import SystemLayer

/// An index record's table, read in place from the mapping.
///
/// The record (kind 6, no key, value type 0, flags `commit`, plus `authenticated` in a sealed store) has as its
/// value a 56-byte table header and then `slotCount` 8-byte slots, all little-endian:
///
/// | offset | field |
/// |---|---|
/// | 0 | slot count (a power of two, at least 8, at least twice the key count) |
/// | 8 | key count |
/// | 16 | live bytes (the bytes of the records the table points to) |
/// | 24 | records (the data records of the log before the index record) |
/// | 32 | hash seed (random for each table) |
/// | 40 | the index record's own offset |
/// | 48 | CRC32C of bytes 0..<48 followed by the index record's sequence number (u64) |
/// | 52 | zero |
///
/// A slot is `offset / 8` (bits 27..<64; 0 for an empty slot), 11 bits of the key's hash (bits 16..<27) and 16
/// check bits (bits 0..<16: the low 16 bits of CRC32C of the slot's number, its other 48 bits and the table's seed,
/// or 1 when those are 0), so a flipped bit, a torn or zeroed slot, or a slot of another table (left in place by a
/// table written over it that did not reach the disk whole) is found when the slot is read. Keys are placed by
/// linear probing from `hash & (slotCount - 1)`, the hash being `IndexTable.hash` of the index key's UTF-8 bytes
/// under the table's seed (part of the format: frozen, unlike the in-memory index's).
///
/// A sealed store's table is copied out of the mapping and authenticated as a copy, which the lookups then read:
/// slots changed in the file after the check (by someone without the key, while the store is open) are never read.
/// From version 8 it is authenticated in pieces: the value holds, between the table header and the slots, a 16-byte
/// MAC for every piece of 512 slots (4 KiB; `RecordAuth.pieceMAC`, over the table's seed and the piece, bound to its
/// offset in the file), and the record's authenticator covers the record up to the slots. An open copies and checks
/// that head alone; a lookup copies each piece it reads into the private copy and checks it against its MAC the first
/// time (a piece that does not verify is a damaged table). A full scan checks the head and every piece.
///
/// A final class, not a struct: an optional of it is a plain pointer, whose copies in a fresh process's first open
/// need no type metadata built at run time (an optional struct holding a reference would).
final class IndexTable {
    static let headerSize = 56
    /// The slots of a piece (version 8's sealed tables), 4 KiB of them.
    static let slotsPerPiece = 512
    static let pieceBytes = 8 * slotsPerPiece

    /// Where the index record starts, and its length.
    let recordOffset: Int
    let recordLength: Int
    let slotCount: Int
    let keyCount: Int
    let liveBytes: Int
    let recordCount: Int
    let seed: UInt64
    /// Where the checksums of the image's records start (the header's `recordSeed`): the records a lookup reads
    /// are verified with it, and the table header's CRC covers its generation.
    let recordSeed: RecordSeed
    /// The record's sequence number: the last commit's before it.
    let seq: UInt64
    /// The authenticated private copy of a sealed store's record, whose slots lookups read; nil: the mapping's. In
    /// a table of pieces only the head, and the pieces lookups verified (`verifiedPieces`), are copied.
    private let copy: UnsafeMutableRawBufferPointer?
    /// Where the slots start in the record's value (after the pieces' MACs, in a table of pieces).
    let slotsOffsetInValue: Int
    /// The pieces whose MACs the head holds (0: a table authenticated whole, or not at all).
    let pieceCount: Int
    /// One bit a piece: copied into `copy` and verified.
    private let verifiedPieces: UnsafeMutablePointer<UInt64>?
    /// How many pieces lookups copied and verified (what an open and its reads checked of the table).
    private(set) var piecesVerified = 0

    /// Where the records after the table start.
    var end: Int { recordOffset + recordLength }
    /// Where the slots start, in the record.
    private var slotsStart: Int { Format.recordHeaderSize + slotsOffsetInValue }

    private init(
        recordOffset: Int, recordLength: Int, slotCount: Int, keyCount: Int, liveBytes: Int, recordCount: Int,
        seed: UInt64, recordSeed: RecordSeed, seq: UInt64, copy: UnsafeMutableRawBufferPointer?, pieces: Bool
    ) {
        self.recordOffset = recordOffset
        self.recordLength = recordLength
        self.slotCount = slotCount
        self.keyCount = keyCount
        self.liveBytes = liveBytes
        self.recordCount = recordCount
        self.seed = seed
        self.recordSeed = recordSeed
        self.seq = seq
        self.copy = copy
        slotsOffsetInValue = IndexTable.slotsOffsetInValue(slotCount: slotCount, pieces: pieces)
        pieceCount = pieces ? IndexTable.pieceCount(slotCount: slotCount) : 0
        if pieces {
            let words = (pieceCount + 63) / 64
            verifiedPieces = UnsafeMutablePointer<UInt64>.allocate(capacity: words)
            verifiedPieces!.initialize(repeating: 0, count: words)
        } else {
            verifiedPieces = nil
        }
    }

    deinit {
        copy?.deallocate()
        verifiedPieces?.deallocate()
    }

    /// The pieces of a table of `slotCount` slots.
    static func pieceCount(slotCount: Int) -> Int { (slotCount + slotsPerPiece - 1) / slotsPerPiece }

    /// Where the slots start in an index record's value: after the table header, and in a table of pieces (a sealed
    /// store of version 8) after their MACs.
    static func slotsOffsetInValue(slotCount: Int, pieces: Bool) -> Int {
        headerSize + (pieces ? Format.authenticatorSize * pieceCount(slotCount: slotCount) : 0)
    }

    /// The value length of a table for `keyCount` keys.
    static func valueLength(keyCount: Int, pieces: Bool) -> Int {
        let slots = slotCount(for: keyCount)
        return slotsOffsetInValue(slotCount: slots, pieces: pieces) + 8 * slots
    }

    /// The whole length in the log of an index record of `keyCount` keys (`StoreLog.appendIndex`), `authenticated`
    /// in a sealed store of version 2 or later, of `pieces` in one of version 8. A compaction sizes its image with it
    /// (`StoreLog.compact`).
    static func recordLength(keyCount: Int, authenticated: Bool, pieces: Bool) -> Int {
        Format.recordLength(
            keyLength: 0, valueLength: valueLength(keyCount: keyCount, pieces: pieces), authenticated: authenticated)
    }

    /// Whether a table of `keyCount` keys fits in a record (`Format.maxStoredValueLength`): a store of more keys
    /// (about 4 million, or 2 million in a sealed store of version 8, whose pieces' MACs add 16 bytes a 4 KiB) gets
    /// no table, as a record that long would read as damage.
    static func fits(keyCount: Int, pieces: Bool) -> Bool {
        valueLength(keyCount: keyCount, pieces: pieces) <= Format.maxStoredValueLength
    }

    /// How much of a table of pieces its record's authenticator covers (the record from its start, up to its slots),
    /// for a value of `valueLength` bytes whose header gives `slotCount`; nil when they do not describe such a table.
    /// Sizes are compared by division, never multiplied.
    static func signedLength(slotCount: Int, valueLength: Int) -> Int? {
        guard slotCount >= 8, slotCount & (slotCount - 1) == 0, slotCount <= valueLength / 8 else { return nil }
        let slotsOffset = slotsOffsetInValue(slotCount: slotCount, pieces: true)
        guard valueLength - 8 * slotCount == slotsOffset else { return nil }
        return Format.recordHeaderSize + slotsOffset
    }

    /// `signedLength` of an index record this library is laying out (`RecordAuth.sign`): its fields are its own.
    static func signedLength(ofOwnRecord record: UnsafeRawBufferPointer) -> Int {
        let slotCount = Int(UInt64(littleEndian: record.load(fromByteOffset: Format.recordHeaderSize, as: UInt64.self)))
        return Format.recordHeaderSize + slotsOffsetInValue(slotCount: slotCount, pieces: true)
    }

    /// At least twice the keys (so probes stay short), a power of two, at least 8.
    static func slotCount(for keyCount: Int) -> Int {
        var slots = 8
        while slots < keyCount * 2 { slots *= 2 }
        return slots
    }

    // MARK: When tables are written

    /// A table is written (the engine's `writeIndexIfDue` and `maybeWriteIndex`, Engine+PersistedIndex.swift) for a
    /// store of at least `minimumKeys` keys: by a handle that read the whole log at its open, when any record
    /// followed the last table; by a handle that closes, when `closingTail` records did (half its keys, for a handle that opened from a table and must
    /// read the whole log first); and after any write once the records since the last table reach the larger of
    /// twice the key count and `tail`, so that writing tables costs a bounded share of writing (each is about 16
    /// bytes a key) and an open never reads much more of the log than the store has keys. `PREFSKV_INDEX_TAIL`
    /// (the torture suites) lowers all three.
    static let tail = policy(default: 1_024)
    static let minimumKeys = policy(default: 256)
    static let closingTail = policy(default: 64)

    private static func policy(default value: Int) -> Int {
        guard let text = Sys.environment("PREFSKV_INDEX_TAIL"), let lowered = Int(text), lowered > 0 else {
            return value
        }
        return min(value, lowered)
    }

    // MARK: Reading

    /// The table of the index record at `offset` of the mapping, when its record header is plausible, ends before
    /// `limit`, and its table header verifies. The slots are checked one by one when read; the record's CRC over
    /// the whole table is not computed here (the open of a large store would read all of it), but by every scan
    /// of the log. With `auth` (a sealed store), the record is copied out of the mapping first, and the copy must
    /// verify its CRC and authenticator (from version 8: its head, `readHead`); lookups then read the copy.
    /// `recordSeed`: the image header's.
    static func read(
        in bytes: UnsafeRawBufferPointer, at offset: Int, limit: Int, auth: RecordAuth?, recordSeed: RecordSeed
    ) -> IndexTable? {
        guard offset >= Format.logStart, offset & 7 == 0,
            let record = RecordHeader.plausible(in: bytes, at: offset, limit: limit), record.kind == .index
        else { return nil }
        guard let auth else {
            return parse(record, in: bytes, fileOffset: offset, recordSeed: recordSeed, copy: nil, pieces: false)
        }
        if auth.signsTablePieces { return readHead(record, in: bytes, at: offset, auth: auth, recordSeed: recordSeed) }
        let copy = UnsafeMutableRawBufferPointer.allocate(byteCount: record.length, alignment: 8)
        copy.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + record.length]))
        let copied = UnsafeRawBufferPointer(copy)
        guard let verified = RecordHeader.verified(in: copied, at: 0, limit: copied.count, seed: recordSeed),
            verified.kind == .index, auth.isAuthentic(verified, in: copied, fileOffset: offset),
            let table = parse(
                verified, in: copied, fileOffset: offset, recordSeed: recordSeed, copy: copy, pieces: false)
        else {
            copy.deallocate()
            return nil
        }
        return table
    }

    /// A table of pieces (version 8): its head (the record up to the slots) and its authenticator are copied into a
    /// private buffer as long as the record, whose slots stay unread until a lookup verifies their piece; the copy's
    /// head must give the same length and verify. The record's CRC, over the slots too, is left to full scans.
    private static func readHead(
        _ plausible: RecordHeader, in bytes: UnsafeRawBufferPointer, at offset: Int, auth: RecordAuth,
        recordSeed: RecordSeed
    ) -> IndexTable? {
        let length = plausible.length
        let slotCount = Int(
            truncatingIfNeeded: UInt64(littleEndian: bytes.load(fromByteOffset: plausible.valueOffset, as: UInt64.self)))
        guard plausible.isAuthenticated,
            let headLength = signedLength(slotCount: slotCount, valueLength: plausible.valueLength)
        else { return nil }
        let macStart = length - Format.recordTrailerSize - Format.authenticatorSize
        let copy = UnsafeMutableRawBufferPointer.allocate(byteCount: length, alignment: 8)
        copy.baseAddress!.copyMemory(from: bytes.baseAddress! + offset, byteCount: headLength)
        (copy.baseAddress! + macStart).copyMemory(
            from: bytes.baseAddress! + offset + macStart, byteCount: Format.authenticatorSize)
        let copied = UnsafeRawBufferPointer(copy)
        guard let record = RecordHeader.plausible(in: copied, at: 0, limit: length), record.kind == .index,
            record.length == length, record.isAuthenticated,
            signedLength(
                slotCount: Int(truncatingIfNeeded: UInt64(littleEndian: copied.load(
                    fromByteOffset: record.valueOffset, as: UInt64.self))),
                valueLength: record.valueLength) == headLength,
            auth.matches(
                UnsafeRawBufferPointer(rebasing: copied[4..<headLength]),
                authenticator: UnsafeRawBufferPointer(rebasing: copied[macStart..<macStart + Format.authenticatorSize]),
                offset: offset),
            let table = parse(record, in: copied, fileOffset: offset, recordSeed: recordSeed, copy: copy, pieces: true)
        else {
            copy.deallocate()
            return nil
        }
        return table
    }

    /// Whether a table of pieces is authentic as a whole (a full scan: `RecordAuth.isAuthentic`): its head's
    /// authenticator and every piece's MAC, in `bytes` (a private copy of the record).
    static func isAuthentic(_ record: RecordHeader, in bytes: UnsafeRawBufferPointer, fileOffset: Int, auth: RecordAuth)
        -> Bool
    {
        guard record.valueLength >= headerSize else { return false }
        let value = record.valueOffset
        let slotCount = Int(truncatingIfNeeded: UInt64(littleEndian: bytes.load(fromByteOffset: value, as: UInt64.self)))
        guard let headLength = signedLength(slotCount: slotCount, valueLength: record.valueLength) else { return false }
        let macStart = record.offset + record.length - Format.recordTrailerSize - Format.authenticatorSize
        guard
            auth.matches(
                UnsafeRawBufferPointer(rebasing: bytes[record.offset + 4..<record.offset + headLength]),
                authenticator: UnsafeRawBufferPointer(rebasing: bytes[macStart..<macStart + Format.authenticatorSize]),
                offset: fileOffset)
        else { return false }
        let seed = UInt64(littleEndian: bytes.load(fromByteOffset: value + 32, as: UInt64.self))
        for piece in 0..<pieceCount(slotCount: slotCount) {
            let start = headLength + piece * pieceBytes
            let count = min(pieceBytes, 8 * slotCount - piece * pieceBytes)
            let mac = value + headerSize + Format.authenticatorSize * piece
            guard
                auth.pieceMatches(
                    seed: seed, piece: UnsafeRawBufferPointer(rebasing: bytes[record.offset + start..<record.offset + start + count]),
                    mac: UnsafeRawBufferPointer(rebasing: bytes[mac..<mac + Format.authenticatorSize]),
                    offset: fileOffset + start)
            else { return false }
        }
        return true
    }

    /// The table of `record` (at `record.offset` of `bytes`, at `fileOffset` in the file), when its header
    /// verifies. No field is trusted before it is checked: sizes are compared by division, never multiplied.
    private static func parse(
        _ record: RecordHeader, in bytes: UnsafeRawBufferPointer, fileOffset: Int, recordSeed: RecordSeed,
        copy: UnsafeMutableRawBufferPointer?, pieces: Bool
    ) -> IndexTable? {
        let value = record.valueOffset
        let crc = UInt32(littleEndian: bytes.load(fromByteOffset: value + 48, as: UInt32.self))
        // The record's sequence number is covered too: the open takes it for the log's without the record's CRC.
        guard
            crc
                == headerCRC(
                    UnsafeRawBufferPointer(rebasing: bytes[value..<value + 48]), seq: record.seq,
                    generation: recordSeed.generation)
        else { return nil }
        func field(_ at: Int) -> Int {
            Int(truncatingIfNeeded: UInt64(littleEndian: bytes.load(fromByteOffset: value + at, as: UInt64.self)))
        }
        let slotCount = field(0)
        let keyCount = field(8)
        guard slotCount >= 8, slotCount & (slotCount - 1) == 0, slotCount <= record.valueLength / 8,
            record.valueLength - 8 * slotCount == slotsOffsetInValue(slotCount: slotCount, pieces: pieces),
            keyCount >= 0, keyCount <= slotCount / 2, field(40) == fileOffset, field(16) >= 0,
            field(16) <= fileOffset, field(24) >= 0
        else { return nil }
        return IndexTable(
            recordOffset: fileOffset, recordLength: record.length, slotCount: slotCount, keyCount: keyCount,
            liveBytes: field(16), recordCount: field(24), seed: UInt64(truncatingIfNeeded: field(32)),
            recordSeed: recordSeed, seq: record.seq, copy: copy, pieces: pieces)
    }

    /// Slot `slot`'s word: from the private copy of a sealed store's table (in a table of pieces, once its piece is
    /// copied and verified: nil when it does not verify), or from the mapping.
    @inline(__always)
    private func slotWord(_ slot: Int, in bytes: UnsafeRawBufferPointer, auth: RecordAuth?) -> UInt64? {
        if let copy {
            if pieceCount > 0, !verifyPiece(slot / IndexTable.slotsPerPiece, in: bytes, auth: auth) { return nil }
            return UInt64(littleEndian: copy.load(fromByteOffset: slotsStart + 8 * slot, as: UInt64.self))
        }
        return UInt64(littleEndian: bytes.load(fromByteOffset: recordOffset + slotsStart + 8 * slot, as: UInt64.self))
    }

    /// Copies piece `piece` of a table of pieces from the mapping into the private copy and checks it there against
    /// its MAC (in the authenticated head), unless a lookup did already: whether it verifies.
    private func verifyPiece(_ piece: Int, in bytes: UnsafeRawBufferPointer, auth: RecordAuth?) -> Bool {
        let (word, bit) = (piece >> 6, UInt64(1) << UInt64(piece & 63))
        if verifiedPieces.unsafelyUnwrapped[word] & bit != 0 { return true }
        guard let auth, let copy else { return false }
        let start = slotsStart + piece * IndexTable.pieceBytes
        let count = min(IndexTable.pieceBytes, 8 * slotCount - piece * IndexTable.pieceBytes)
        (copy.baseAddress! + start).copyMemory(from: bytes.baseAddress! + recordOffset + start, byteCount: count)
        let mac = Format.recordHeaderSize + IndexTable.headerSize + Format.authenticatorSize * piece
        guard
            auth.pieceMatches(
                seed: seed, piece: UnsafeRawBufferPointer(rebasing: copy[start..<start + count]),
                mac: UnsafeRawBufferPointer(rebasing: copy[mac..<mac + Format.authenticatorSize]),
                offset: recordOffset + start)
        else { return false }
        verifiedPieces.unsafelyUnwrapped[word] |= bit
        piecesVerified += 1
        return true
    }

    /// What a lookup in the table found.
    enum Probe {
        /// The key's record, verified (and authenticated, in a sealed store).
        case found(RecordHeader)
        /// The table holds no such key.
        case absent
        /// A slot or a record the lookup read does not verify.
        case damaged
    }

    /// Looks up an index key (a key's UTF-8, or the hex of a sealed key's tag).
    func probe(_ key: String, in bytes: UnsafeRawBufferPointer, sealed: Bool, auth: RecordAuth?) -> Probe {
        let hash = KeyIndex.withUTF8(key) { IndexTable.hash($0, seed: seed) }
        let mask = slotCount - 1
        var slot = Int(truncatingIfNeeded: hash) & mask
        for _ in 0..<slotCount {
            guard let word = slotWord(slot, in: bytes, auth: auth),
                IndexTable.check(slot: slot, word, seed: seed) == UInt16(truncatingIfNeeded: word)
            else {
                return .damaged
            }
            let offset = Int(word >> 27) << 3
            if offset == 0 { return .absent }
            if (word >> 16) & 0x7FF == hash >> 53 {
                guard offset >= Format.logStart, offset < recordOffset else { return .damaged }
                if let auth {
                    // A sealed store's record is checked as a private copy, and its key and fields are the copy's.
                    guard let plausible = RecordHeader.plausible(in: bytes, at: offset, limit: recordOffset) else {
                        return .damaged
                    }
                    let found = PrivateCopy.of(bytes, offset..<offset + plausible.length) { copy -> Probe? in
                        guard var record = RecordHeader.verified(in: copy, at: 0, limit: copy.count, seed: recordSeed),
                            record.kind == .set, record.isSealed == sealed,
                            auth.isAuthentic(record, in: copy, fileOffset: offset)
                        else { return .damaged }
                        guard IndexTable.record(record, in: copy, hasKey: key, sealed: sealed) else { return nil }
                        record.offset = offset
                        return .found(record)
                    }
                    if let found { return found }
                } else {
                    guard
                        let record = RecordHeader.verified(in: bytes, at: offset, limit: recordOffset, seed: recordSeed),
                        record.kind == .set, record.isSealed == sealed
                    else { return .damaged }
                    if IndexTable.record(record, in: bytes, hasKey: key, sealed: sealed) { return .found(record) }
                }
            }
            slot = (slot + 1) & mask
        }
        return .damaged  // a table is never written full
    }

    /// Whether a record's key is the index key `key`.
    private static func record(
        _ record: RecordHeader, in bytes: UnsafeRawBufferPointer, hasKey key: String, sealed: Bool
    ) -> Bool {
        if sealed { return KeyIndex.sameBytes(RecordCodec.indexKey(record.key(in: bytes), sealed: true), key) }
        return KeyIndex.withUTF8(key) { KeyIndex.equal($0, record.key(in: bytes)) }
    }

    // MARK: Writing

    /// Writes the table of `index` (whose entries' records all lie before `recordOffset`) into `value`, the
    /// value of the index record at `recordOffset`, in an image whose records' checksums start with `recordSeed`;
    /// with `pieces` (a sealed store of version 8), the MAC of each piece of its slots after the table header.
    static func write(
        _ index: KeyIndex, into value: UnsafeMutableRawBufferPointer, recordOffset: Int, seq: UInt64, liveBytes: Int,
        recordCount: Int, seed: UInt64, recordSeed: RecordSeed, pieces: RecordAuth?
    ) {
        let slotCount = slotCount(for: index.count)
        let slotsStart = slotsOffsetInValue(slotCount: slotCount, pieces: pieces != nil)
        precondition(value.count == slotsStart + 8 * slotCount, "an index record's value has the table's length")
        let header = UnsafeMutableRawBufferPointer(rebasing: value[0..<headerSize])
        for (at, field) in [
            (0, UInt64(slotCount)), (8, UInt64(index.count)), (16, UInt64(liveBytes)), (24, UInt64(recordCount)),
            (32, seed), (40, UInt64(recordOffset)),
        ] {
            header.storeBytes(of: field.littleEndian, toByteOffset: at, as: UInt64.self)
        }
        header.storeBytes(
            of: headerCRC(
                UnsafeRawBufferPointer(rebasing: header[0..<48]), seq: seq, generation: recordSeed.generation
            ).littleEndian, toByteOffset: 48, as: UInt32.self)
        header.storeBytes(of: UInt32(0), toByteOffset: 52, as: UInt32.self)
        let slots = (value.baseAddress! + slotsStart).bindMemory(to: UInt64.self, capacity: slotCount)
        slots.update(repeating: 0, count: slotCount)
        let mask = slotCount - 1
        for (key, entry) in index {
            precondition(entry.recordOffset < recordOffset && entry.recordOffset >= Format.logStart)
            let hash = KeyIndex.withUTF8(key) { IndexTable.hash($0, seed: seed) }
            var slot = Int(truncatingIfNeeded: hash) & mask
            while slots[slot] != 0 { slot = (slot + 1) & mask }
            slots[slot] = UInt64(entry.recordOffset >> 3) << 27 | (hash >> 53) << 16
        }
        for slot in 0..<slotCount {
            let word = slots[slot]
            slots[slot] = (word | UInt64(check(slot: slot, word, seed: seed))).littleEndian
        }
        guard let pieces else { return }
        // The value starts after the record's header (an index record has no key).
        let valueFileOffset = recordOffset + Format.recordHeaderSize
        for piece in 0..<pieceCount(slotCount: slotCount) {
            let start = slotsStart + piece * pieceBytes
            let count = min(pieceBytes, 8 * slotCount - piece * pieceBytes)
            let mac = headerSize + Format.authenticatorSize * piece
            pieces.pieceMAC(
                seed: seed, piece: UnsafeRawBufferPointer(rebasing: value[start..<start + count]),
                offset: valueFileOffset + start,
                into: UnsafeMutableRawBufferPointer(rebasing: value[mac..<mac + Format.authenticatorSize]))
        }
    }

    /// The hash of an index key's UTF-8 bytes under a table's seed: FNV-1a (64-bit) started from its offset basis
    /// XOR the seed, then MurmurHash3's 64-bit finalizer. Part of the format: a table written by one version is
    /// read by the next, so this never changes (`PersistedIndexTests` pins a value).
    static func hash(_ bytes: UnsafeRawBufferPointer, seed: UInt64) -> UInt64 {
        var h: UInt64 = 0xCBF2_9CE4_8422_2325 ^ seed
        for byte in bytes {
            h ^= UInt64(byte)
            h = h &* 0x0000_0100_0000_01B3
        }
        h ^= h >> 33
        h = h &* 0xFF51_AFD7_ED55_8CCD
        h ^= h >> 33
        h = h &* 0xC4CE_B9FE_1A85_EC53
        h ^= h >> 33
        return h
    }

    /// The check bits of a slot: the low 16 bits of CRC32C of its number, its word without them and the table's
    /// seed, never 0 (a zeroed slot never verifies; a slot of a table of another seed does not either).
    @inline(__always)
    static func check(slot: Int, _ word: UInt64, seed: UInt64) -> UInt16 {
        let words = (UInt64(slot).littleEndian, (word & ~0xFFFF).littleEndian, seed.littleEndian)
        let crc = withUnsafeBytes(of: words) { UInt16(truncatingIfNeeded: CRC32C.checksum($0)) }
        return crc == 0 ? 1 : crc
    }

    /// The table header's CRC: CRC32C of its first 48 bytes followed by the index record's sequence number and,
    /// from version 5, the image's generation (a table left in the file by an earlier image does not verify).
    static func headerCRC(_ header: UnsafeRawBufferPointer, seq: UInt64, generation: UInt64?) -> UInt32 {
        var crc = CRC32C()
        crc.update(header)
        withUnsafeBytes(of: seq.littleEndian) { crc.update($0) }
        if let generation { withUnsafeBytes(of: generation.littleEndian) { crc.update($0) } }
        return crc.value
    }
}
