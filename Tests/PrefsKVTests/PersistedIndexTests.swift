// Issue 18: an open reads the persisted index (an index record's hash table) and the records after it, not the
// whole log; the table is only ever an accelerator: every damage to it, and a forged one in a sealed store, is
// found and costs no value. Every case writes real bytes into a real store file and checks what comes back, value
// for value.
import Foundation
import Glibc
import TestSealer
import Testing

@testable import PrefsKV

/// The newest index record of a store file, decoded from the bytes by hand (FileFormat.md, "Index records").
private struct IndexRecordBytes {
    var offset: Int
    var valueOffset: Int
    var slotCount: Int
    var keyCount: Int
    var seed: UInt64
    /// The pieces' MACs before the slots: a sealed store of version 8 (FileFormat.md, "Index records").
    var macBytes: Int
    var slotsOffset: Int { valueOffset + 56 + macBytes }

    init(_ bytes: [UInt8]) throws {
        func u64(_ at: Int) -> UInt64 { bytes[at..<at + 8].reversed().reduce(0) { $0 << 8 | UInt64($1) } }
        func u32(_ at: Int) -> UInt32 { UInt32(truncatingIfNeeded: u64(at) & 0xFFFF_FFFF) }
        let word = u64(280)
        offset = Int(word & 0xFFFF_FFFF_FFFF)
        guard offset >= 4096, offset + 32 <= bytes.count else { throw TestFailure("no index word: \(word)") }
        guard u32(offset) == 0x7256_4B50, bytes[offset + 4] == 6 else { throw TestFailure("no index record") }
        valueOffset = offset + 32
        slotCount = Int(u64(valueOffset))
        keyCount = Int(u64(valueOffset + 8))
        seed = u64(valueOffset + 32)
        let sealedVersion8 = bytes[8] >= 8 && bytes[12] & 1 != 0
        macBytes = sealedVersion8 ? 16 * ((slotCount + 511) / 512) : 0
    }

    func slot(_ i: Int, in bytes: [UInt8]) -> UInt64 {
        let at = slotsOffset + 8 * i
        return bytes[at..<at + 8].reversed().reduce(0) { $0 << 8 | UInt64($1) }
    }

    /// The table's key hash, written out from FileFormat.md (FNV-1a 64 from its basis XOR the seed, then
    /// MurmurHash3's finalizer).
    static func hash(_ key: String, seed: UInt64) -> UInt64 {
        var h: UInt64 = 0xCBF2_9CE4_8422_2325 ^ seed
        for byte in key.utf8 { h = (h ^ UInt64(byte)) &* 0x100_0000_01B3 }
        h = (h ^ h >> 33) &* 0xFF51_AFD7_ED55_8CCD
        h = (h ^ h >> 33) &* 0xC4CE_B9FE_1A85_EC53
        return h ^ h >> 33
    }

    static func check(slot: Int, _ word: UInt64, seed: UInt64) -> UInt64 {
        var pair = [UInt8]()
        for v in [UInt64(slot), word & ~0xFFFF, seed] {
            for b in 0..<8 { pair.append(UInt8(truncatingIfNeeded: v >> (8 * b))) }
        }
        let crc = UInt64(pair.withUnsafeBytes { CRC32C.checksum($0) } & 0xFFFF)
        return crc == 0 ? 1 : crc
    }

    /// Recomputes the table header's CRC (FileFormat.md: value bytes 0..<48, then the record's sequence number and,
    /// from version 5, the header's generation).
    static func fixHeaderCRC(of table: IndexRecordBytes, in bytes: inout [UInt8]) {
        let generation = bytes[8] >= 5 ? Array(bytes[Format.generationOffset..<Format.generationOffset + 8]) : []
        let covered =
            Array(bytes[table.valueOffset..<table.valueOffset + 48]) + bytes[table.offset + 16..<table.offset + 24]
            + generation
        let crc = covered.withUnsafeBytes { CRC32C.checksum($0) }
        for b in 0..<4 { bytes[table.valueOffset + 48 + b] = UInt8(truncatingIfNeeded: crc >> (8 * b)) }
    }

    /// Stores `word` (its check bits recomputed when `fixCheck`) in slot `i`.
    func store(_ word: UInt64, slot i: Int, into bytes: inout [UInt8], fixCheck: Bool) {
        let value = fixCheck ? word & ~0xFFFF | Self.check(slot: i, word, seed: seed) : word
        for b in 0..<8 { bytes[slotsOffset + 8 * i + b] = UInt8(truncatingIfNeeded: value >> (8 * b)) }
    }
}

@Suite struct PersistedIndexTests {
    static let keys = 3_000

    static func value(_ i: Int) -> String { "value \(i) " + String(repeating: "x", count: i % 37) }

    /// A store of `keys` strings, closed (the close writes its table); `then` writes more before it closes.
    func makeStore(
        _ dir: TempDir, sealer: TestSealer? = nil, keys: Int = Self.keys, then: (PrefsStore) throws -> Void = { _ in }
    ) throws {
        let store = try openStore(dir) {
            $0.autoCompactionThreshold = nil
            $0.sealer = sealer
        }
        for i in 0..<keys { try store.set(Self.value(i), forKey: "key.\(i)") }
        try then(store)
    }

    func readsFromTable(_ store: PrefsStore) -> Bool { store.engine.withLock { $0.log.table != nil } }

    func expectEveryValue(_ store: PrefsStore, except changed: [Int: String] = [:], removed: Set<Int> = []) throws {
        for i in 0..<Self.keys {
            let expected = removed.contains(i) ? nil : changed[i] ?? Self.value(i)
            #expect(try store.string(forKey: "key.\(i)") == expected, "key.\(i)")
        }
    }

    // MARK: The format

    /// Before issue 18 an open read every record of the log; now a store of thousands of keys leaves a table
    /// behind when it closes, which the bytes show as FileFormat.md lays it out, and the next open reads it.
    @Test func aClosedStoreLeavesATableThatTheNextOpenReadsInsteadOfTheLog() throws {
        let dir = try TempDir("index-format", memory: true)
        try makeStore(dir)
        let bytes = try readBytes(dir.file("ui.prefs"))
        #expect(bytes[8] == 8, "format version 8")
        let table = try IndexRecordBytes(bytes)
        #expect(table.keyCount == Self.keys && table.slotCount == 8_192)
        // The table header's CRC covers its 48 bytes and the record's sequence number.
        var recomputed = bytes
        IndexRecordBytes.fixHeaderCRC(of: table, in: &recomputed)
        #expect(recomputed == bytes, "the header CRC is FileFormat.md's")
        // Every slot verifies its check bits; the non-empty ones point at the set records of exactly the keys, each
        // reached by linear probing from its hash (no empty slot in between) and holding its top 11 bits.
        var names: Set<String> = []
        let mask = table.slotCount - 1
        for i in 0..<table.slotCount {
            let word = table.slot(i, in: bytes)
            #expect(word & 0xFFFF == IndexRecordBytes.check(slot: i, word, seed: table.seed), "slot \(i)")
            let offset = Int(word >> 27) << 3
            if offset == 0 { continue }
            #expect(bytes[offset..<offset + 5] == [0x50, 0x4B, 0x56, 0x72, 1], "slot \(i) names a set record")
            let keyLength = Int(bytes[offset + 8]) | Int(bytes[offset + 9]) << 8
            let name = String(decoding: bytes[offset + 32..<offset + 32 + keyLength], as: UTF8.self)
            names.insert(name)
            let hash = IndexRecordBytes.hash(name, seed: table.seed)
            #expect((word >> 16) & 0x7FF == hash >> 53, "slot \(i) holds \(name)'s hash bits")
            var probe = Int(hash & UInt64(mask))
            while probe != i {
                #expect(table.slot(probe, in: bytes) >> 27 != 0, "\(name): an empty slot before its own")
                probe = (probe + 1) & mask
            }
        }
        #expect(names == Set((0..<Self.keys).map { "key.\($0)" }))
        // The hash is part of the format: the library's and this test's agree, and one value is pinned.
        #expect(Array("key.1".utf8).withUnsafeBytes { IndexTable.hash($0, seed: 1) } == 0xE01C_86ED_6D9D_D3AF)
        #expect(IndexRecordBytes.hash("theme", seed: 0x0123_4567_89AB_CDEF) == 0xFA6C_8C43_8B8E_1746)

        let store = try openStore(dir)
        #expect(readsFromTable(store))
        #expect(store.engine.withLock { $0.log.index.count } == 0, "nothing but the table was read")
        try expectEveryValue(store)
        #expect(try store.string(forKey: "key.absent") == nil)
        #expect(try store.count == Self.keys)  // counting reads the whole log
        #expect(!readsFromTable(store))
    }

    /// The log-end word of a store file.
    func logEndWord(_ dir: TempDir) throws -> ArraySlice<UInt8> { try readBytes(dir.file("ui.prefs"))[256..<264] }

    /// Writes after the table are read at the next open with it; deletes and clears send the open to the log.
    @Test func recordsAfterTheTableAreReadWithIt() throws {
        let dir = try TempDir("index-tail", memory: true)
        try makeStore(dir)
        do {
            let store = try openStore(dir)
            try store.set("new 5", forKey: "key.5")
            try store.set("brand new", forKey: "extra")
            let end = try logEndWord(dir)
            try store.set(Self.value(9), forKey: "key.9")  // unchanged (found in the table): nothing written
            #expect(try logEndWord(dir) == end)
        }
        var store = try openStore(dir)
        #expect(readsFromTable(store))
        try expectEveryValue(store, except: [5: "new 5"])
        #expect(try store.string(forKey: "extra") == "brand new")
        #expect(try store.count == Self.keys + 1)

        try store.removeValue(forKey: "key.7")
        store = try openStore(dir)
        #expect(!readsFromTable(store), "a delete after the table: the whole log is read")
        try expectEveryValue(store, except: [5: "new 5"], removed: [7])
        // That open left a new table: the next one reads it.
        store = try openStore(dir)
        #expect(readsFromTable(store))
        try expectEveryValue(store, except: [5: "new 5"], removed: [7])
        #expect(try store.string(forKey: "extra") == "brand new")

        try store.removeAll()
        store = try openStore(dir)
        #expect(!readsFromTable(store), "a clear after the table: the whole log is read")
        #expect(try store.string(forKey: "key.1") == nil && store.count == 0)
    }

    /// A store of fewer than 256 keys gets no table; a store's statistics count its newest table as live.
    @Test func smallStoresHaveNoTableAndStatisticsCountTheTable() throws {
        let small = try TempDir("index-small", memory: true)
        do {
            let store = try openStore(small)
            // (IndexTable.minimumKeys: 256, or lower in `make torture`'s pass with tables every few records.)
            for i in 0..<IndexTable.minimumKeys - 1 { try store.set(i, forKey: "k\(i)") }
        }
        #expect(try readBytes(small.file("ui.prefs"))[280..<288].allSatisfy { $0 == 0 }, "no index word")
        let dir = try TempDir("index-stats", memory: true)
        try makeStore(dir)
        let table = try IndexRecordBytes(readBytes(dir.file("ui.prefs")))
        let stats = try openStore(dir).stats()
        #expect(stats.logBytes == table.offset - 4096 - 168 + (8 * table.slotCount + 56 + 32 + 4 + 7) / 8 * 8)
        #expect(stats.garbageRatio == 0, "the records and the table are all live")
    }

    /// A handle reading the table while another removes and changes keys it has not read yet.
    @Test func anotherHandlesDeletesAndWritesAreSeenByAHandleReadingTheTable() throws {
        let dir = try TempDir("index-shared", memory: true)
        try makeStore(dir)
        let reader = try openStore(dir)
        let writer = try openStore(dir)
        #expect(readsFromTable(reader) && readsFromTable(writer))
        #expect(try reader.string(forKey: "key.1") == Self.value(1))
        // Sets: the reader applies them on top of its table.
        try writer.set("changed", forKey: "key.3")
        try writer.set("new", forKey: "fresh")
        #expect(try reader.string(forKey: "key.3") == "changed" && reader.string(forKey: "fresh") == "new")
        #expect(readsFromTable(reader))
        // A delete: the reader reopens the file.
        try writer.removeValue(forKey: "key.2")
        #expect(try reader.string(forKey: "key.2") == nil)
        #expect(try reader.string(forKey: "key.3") == "changed")
        try writer.removeAll()
        #expect(try reader.string(forKey: "key.1") == nil && reader.count == 0)
    }

    /// Writes after the table write the next one once they reach twice the keys: an open never reads much more
    /// log than that, however the app ends.
    @Test func writesAppendANewTableOnceTheyReachTwiceTheKeys() throws {
        let dir = try TempDir("index-rewrite", memory: true)
        try makeStore(dir)
        let store = try openStore(dir) { $0.autoCompactionThreshold = nil }
        let first = try IndexRecordBytes(readBytes(dir.file("ui.prefs"))).offset
        for i in 0..<Self.keys { try store.set("r0 \(i)", forKey: "key.\(i)") }
        #expect(try IndexRecordBytes(readBytes(dir.file("ui.prefs"))).offset == first, "as many records as keys")
        for i in 0..<Self.keys { try store.set("r1 \(i)", forKey: "key.\(i)") }
        let second = try IndexRecordBytes(readBytes(dir.file("ui.prefs"))).offset
        #expect(second > first)
        let reopened = try openStore(dir)
        #expect(readsFromTable(reopened))
        #expect(reopened.engine.withLock { $0.log.tailRecords } < Self.keys)
        for i in 0..<Self.keys { #expect(try reopened.string(forKey: "key.\(i)") == "r1 \(i)") }
    }

    // MARK: Damage

    /// A flipped bit in a used slot (each bit of the word, in turn, across the arguments): the read of its key sends
    /// the handle to the whole log, which finds the table's record damaged and salvages the store; every value
    /// comes back and nothing counts as lost.
    @Test(arguments: [(0, 0), (1, 17), (100, 27), (500, 40), (1_000, 63)])
    func aFlippedBitInASlotCostsNoValue(used: Int, bit: Int) throws {
        let dir = try TempDir("index-slot", memory: true)
        try makeStore(dir)
        var bytes = try readBytes(dir.file("ui.prefs"))
        let table = try IndexRecordBytes(bytes)
        let slot = (0..<table.slotCount).filter { table.slot($0, in: bytes) >> 27 != 0 }[used]
        bytes[table.slotsOffset + 8 * slot + bit / 8] ^= UInt8(1 << (bit % 8))
        try writeBytes(bytes, to: dir.file("ui.prefs"))
        let store = try openStore(dir)
        #expect(readsFromTable(store) && store.lastRecovery == nil, "the open reads the table's header only")
        try expectEveryValue(store)
        #expect(store.lastRecovery != nil, "a read found the damaged slot")
        #expect(try store.count == Self.keys)
        let report = try #require(store.lastRecovery, "the damaged table was found")
        #expect(report.recordsLost == 0, "\(report)")
        #expect(dir.files.contains { $0.hasPrefix("ui.prefs.corrupt-") })
        try expectEveryValue(try openStore(dir))
    }

    /// A zeroed page in the middle of the table, a damaged table header, a damaged index word, and an index word
    /// that names a data record: no value is lost, and no damage is made up where there was none.
    @Test(arguments: ["zeroed page", "table header", "index word", "word names a set record"])
    func otherDamageToTheTableCostsNoValue(damage: String) throws {
        let dir = try TempDir("index-damage", memory: true)
        try makeStore(dir)
        var bytes = try readBytes(dir.file("ui.prefs"))
        let table = try IndexRecordBytes(bytes)
        var isDamage = true
        switch damage {
        case "zeroed page":
            let page = (table.slotsOffset + 4096 * 3) & ~4095
            for i in page..<page + 4096 { bytes[i] = 0 }
        case "table header":
            bytes[table.valueOffset + 8] ^= 1
        case "index word":
            bytes[283] ^= 0x40
            isDamage = false
        default:
            let encoded = Format.encodeLogEnd(4096 + 168)  // the first set record, after the header copy
            for b in 0..<8 { bytes[280 + b] = UInt8(truncatingIfNeeded: encoded >> (8 * b)) }
            isDamage = false
        }
        try writeBytes(bytes, to: dir.file("ui.prefs"))
        let store = try openStore(dir)
        // Only a zeroed page leaves a table the open can read (its slots are checked when read).
        #expect(readsFromTable(store) == (damage == "zeroed page"))
        #expect((store.lastRecovery != nil) == (damage == "table header"), "a damaged table header: found at open")
        try expectEveryValue(store)
        #expect(try store.count == Self.keys)
        #expect((store.lastRecovery != nil) == isDamage, "\(String(describing: store.lastRecovery))")
        if let report = store.lastRecovery { #expect(report.recordsLost == 0, "\(report)") }
    }

    /// A store that must not salvage (a vault) answers `corrupted` for a damaged table, and leaves the file
    /// byte-identical.
    @Test func underFailADamagedTableIsCorruptedAndTheFileIsUntouched() throws {
        let dir = try TempDir("index-fail", memory: true)
        try makeStore(dir)
        var bytes = try readBytes(dir.file("ui.prefs"))
        let table = try IndexRecordBytes(bytes)
        for slot in 0..<table.slotCount { bytes[table.slotsOffset + 8 * slot] ^= 1 }
        try writeBytes(bytes, to: dir.file("ui.prefs"))
        let store = try openStore(dir) { $0.recovery = .fail }
        for _ in 0..<2 {
            #expect { try store.string(forKey: "key.1") } throws: { ($0 as? PrefsError)?.code == .corrupted }
        }
        #expect(try readBytes(dir.file("ui.prefs")) == bytes)
    }

    /// A damaged record found by a read (the table points at it) in a store that must not salvage: every read of
    /// that key throws `corrupted`, none returns the key's older value (which the log still holds), a write throws
    /// too and appends nothing (no record, no table to hide the damage), and the next open finds it again.
    @Test func underFailADamagedRecordFoundByAReadIsNeverAnsweredWithAnOlderValue() throws {
        let dir = try TempDir("index-fail-record", memory: true)
        let bytes = try storeWithItsNewestRecordBeforeTheTableDamaged(dir)
        do {
            let store = try openStore(dir) { $0.recovery = .fail }
            #expect(readsFromTable(store))
            #expect(try store.string(forKey: "key.6") == Self.value(6))
            for _ in 0..<3 {
                #expect { try store.string(forKey: "key.5") } throws: { ($0 as? PrefsError)?.code == .corrupted }
            }
            #expect { try store.set("more", forKey: "key.7") } throws: { ($0 as? PrefsError)?.code == .corrupted }
        }
        #expect(try readBytes(dir.file("ui.prefs")) == bytes, "nothing written, no table appended")
        #expect { try openStore(dir) { $0.recovery = .fail }.string(forKey: "key.5") } throws: {
            ($0 as? PrefsError)?.code == .corrupted
        }
    }

    /// Makes the standard store with key.5's newest value "newest", whose record is then the last data record before
    /// the table, damages a byte of that value in the file and returns the file's bytes as written.
    private func storeWithItsNewestRecordBeforeTheTableDamaged(_ dir: TempDir) throws -> [UInt8] {
        try makeStore(dir) { try $0.set("newest", forKey: "key.5") }
        var bytes = try readBytes(dir.file("ui.prefs"))
        let table = try IndexRecordBytes(bytes)
        let marker = Array("newest".utf8)
        let newest = try #require((4096..<table.offset - 6).last { Array(bytes[$0..<$0 + 6]) == marker })
        bytes[newest] ^= 0x20
        try writeBytes(bytes, to: dir.file("ui.prefs"))
        return bytes
    }

    /// A repair reads every record, not the table: damage before the table, which an open from the table never
    /// reads, is what verify and every whole-log read find, so the repair salvages it (issue 35: `repair` answered
    /// "clean" and `export` refused the store for ever). Afterwards the store opens under `.fail` and reads every
    /// key, and a second repair finds nothing.
    @Test func aRepairFindsDamageBeforeTheTableAndLeavesAStoreEveryReadOpens() throws {
        let dir = try TempDir("index-repair", memory: true)
        let bytes = try storeWithItsNewestRecordBeforeTheTableDamaged(dir)
        let verified = try PrefsStore.verify(id: "ui", directory: dir.path)
        #expect(!verified.isClean)
        #expect(verified.damage.allSatisfy { $0.keys.isEmpty }, "a record that failed its check names no key")
        let report = try #require(try PrefsStore.repair(id: "ui", directory: dir.path), "the damage was found")
        #expect(report.recordsLost == 1)
        let quarantine = try #require(report.quarantinePath)
        #expect(try readBytes(quarantine) == bytes, "the quarantine copy is the damaged file, byte for byte")
        #expect(try PrefsStore.verify(id: "ui", directory: dir.path).isClean)
        let store = try openStore(dir) { $0.recovery = .fail }
        #expect(try store.allKeys.count == Self.keys)
        try expectEveryValue(store, except: [5: Self.value(5)])
        #expect(try PrefsStore.repair(id: "ui", directory: dir.path) == nil)
    }

    /// Under `.fail` the refusal says the file was left untouched and where the salvage is, never a place the
    /// original was copied to (nothing was: "original kept at (nowhere: read-only directory)" was printed for a
    /// writable directory).
    @Test func aRefusalUnderFailSaysTheFileWasLeftUntouched() throws {
        let dir = try TempDir("index-fail-message", memory: true)
        _ = try storeWithItsNewestRecordBeforeTheTableDamaged(dir)
        let store = try openStore(dir) { $0.recovery = .fail }
        #expect { try store.allKeys } throws: { error in
            guard let error = error as? PrefsError, error.code == .corrupted else { return false }
            return error.message.contains("the file was left untouched") && !error.message.contains("nowhere")
                && !error.message.contains("read-only") && !error.message.contains("original kept at")
        }
    }

    /// A stale superseded flag (a compactor killed between flag and rename) on a file opened from its persisted table
    /// is cleared only once the whole log is known to be intact: when the log before the table is damaged, the file
    /// is quarantined byte for byte, flag included. (The open cleared the flag first, having read only the table and
    /// the records after it, and the quarantine copy differed in that word: found by make torture, seed
    /// 7504408272214365528.)
    @Test func aStaleSupersededFlagStaysInTheQuarantineCopyOfAFileOpenedFromItsTable() throws {
        let dir = try TempDir("index-stale-superseded", memory: true)
        var bytes = try storeWithItsNewestRecordBeforeTheTableDamaged(dir)
        // The flag raised (a dynamic header word: no checksum covers it).
        bytes[Format.supersededOffset + 4] = 8
        try writeBytes(bytes, to: dir.file("ui.prefs"))
        let store = try openStore(dir)
        #expect(try store.string(forKey: "key.6") == Self.value(6))
        #expect(try store.string(forKey: "key.5") != "newest")
        let report = try #require(store.lastRecovery, "the damage before the table was found")
        let quarantine = try #require(report.quarantinePath)
        #expect(try readBytes(quarantine) == bytes, "the quarantine copy is the damaged file, byte for byte")
        try store.set("after", forKey: "key.after")
        let reopened = try openStore(dir)
        #expect(reopened.lastRecovery == nil)
        #expect(try reopened.string(forKey: "key.after") == "after")
    }

    /// A table header crafted to overflow the sizes (a slot count of 2^61, its CRC made right) is not a table: no
    /// crash, the whole log is read, nothing is lost.
    @Test func aCraftedTableHeaderIsNeverTrustedNorACrash() throws {
        let dir = try TempDir("index-crafted", memory: true)
        try makeStore(dir)
        var bytes = try readBytes(dir.file("ui.prefs"))
        let table = try IndexRecordBytes(bytes)
        for (field, value) in [(0, UInt64(1) << 61), (8, UInt64(1) << 62)] {
            for b in 0..<8 { bytes[table.valueOffset + field + b] = UInt8(truncatingIfNeeded: value >> (8 * b)) }
        }
        IndexRecordBytes.fixHeaderCRC(of: table, in: &bytes)
        try writeBytes(bytes, to: dir.file("ui.prefs"))
        let store = try openStore(dir)
        #expect(!readsFromTable(store))
        try expectEveryValue(store)
    }

    /// One flipped bit in the index record's sequence number (a field of its record header, which an open does not
    /// check with the whole record's CRC) once lowered the sequence number new writes took, and the next read of the
    /// whole log dropped every write numbered at or below the table's real one. The table header's CRC covers it.
    @Test func aFlippedBitInTheTablesSequenceNumberCostsNoWrite() throws {
        let dir = try TempDir("index-seq", memory: true)
        try makeStore(dir)
        var bytes = try readBytes(dir.file("ui.prefs"))
        let table = try IndexRecordBytes(bytes)
        let seq = bytes[table.offset + 16..<table.offset + 24].reversed().reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        #expect(seq >= UInt64(Self.keys), "the table follows every set")
        bytes[table.offset + 17] ^= 0x08  // seq - 2048
        try writeBytes(bytes, to: dir.file("ui.prefs"))
        var changed: [Int: String] = [:]
        do {
            let store = try openStore(dir) { $0.autoCompactionThreshold = nil }
            for i in 0..<300 {
                changed[i] = "rewritten \(i)"
                try store.set(changed[i]!, forKey: "key.\(i)")
            }
            try store.set("added", forKey: "key.new")
        }
        // Whole reads of the log: a count, then a fresh open of every key.
        let store = try openStore(dir) { $0.autoCompactionThreshold = nil }
        #expect(try store.count == Self.keys + 1)
        #expect(try store.string(forKey: "key.new") == "added")
        try expectEveryValue(store, except: changed)
        let again = try openStore(dir)
        try expectEveryValue(again, except: changed)
    }

    /// A slot's check bits bind the table's seed: a slot word of another table (here, the same slots under another
    /// seed, the table header's CRC made right) never verifies, so a key is never read as absent because of it.
    @Test func aTablesSlotsVerifyOnlyUnderItsOwnSeed() throws {
        let dir = try TempDir("index-seed", memory: true)
        try makeStore(dir)
        var bytes = try readBytes(dir.file("ui.prefs"))
        let table = try IndexRecordBytes(bytes)
        let seed = table.seed ^ 0x5DEE_CE66_D1CE_F00D
        for b in 0..<8 { bytes[table.valueOffset + 32 + b] = UInt8(truncatingIfNeeded: seed >> (8 * b)) }
        IndexRecordBytes.fixHeaderCRC(of: table, in: &bytes)
        try writeBytes(bytes, to: dir.file("ui.prefs"))
        let store = try openStore(dir)
        #expect(readsFromTable(store), "the table header verifies")
        try expectEveryValue(store)
    }

    // MARK: Sealed stores

    /// Someone without the key rewrites every slot of the file as a valid empty slot while a handle reads the
    /// table: the handle reads its authenticated private copy, so no key goes missing.
    @Test func slotsRewrittenWhileASealedStoreIsOpenAreNeverRead() throws {
        let dir = try TempDir("index-live", memory: true)
        try makeStore(dir, sealer: TestSealer(key: 7))
        let store = try openStore(dir) { $0.sealer = TestSealer(key: 7) }
        #expect(readsFromTable(store))
        try emptyEverySlot(in: dir.file("ui.prefs"))
        try expectEveryValue(store)
    }

    @Test func aSealedStoreReadsItsAuthenticatedTable() throws {
        let dir = try TempDir("index-sealed", memory: true)
        try makeStore(dir, sealer: TestSealer(key: 7))
        let store = try openStore(dir) { $0.sealer = TestSealer(key: 7) }
        #expect(readsFromTable(store))
        try expectEveryValue(store)
        #expect(try store.string(forKey: "key.absent") == nil)
        #expect(try store.allKeys.count == Self.keys)
    }

    /// Someone without the key trades the record offsets of two slots (check bits and the record's CRC made right
    /// again), which would hide both keys. The table is checked in pieces (version 8): the open checks its head and
    /// opens; the piece's MAC fails at the first read that reaches it, which under `.fail` says `tampered` and leaves
    /// the file byte-identical, and no read answers a key missing or with another value; `verify` (which checks every
    /// piece) says `tampered`; a salvaging open keeps every authentic record.
    @Test func aForgedTableInASealedStoreIsTampering() throws {
        let dir = try TempDir("index-forged", memory: true)
        try makeStore(dir, sealer: TestSealer(key: 7))
        var bytes = try readBytes(dir.file("ui.prefs"))
        let table = try IndexRecordBytes(bytes)
        let used = (0..<table.slotCount).filter { table.slot($0, in: bytes) >> 27 != 0 }
        let (a, b) = (used[0], used[1])
        let (wordA, wordB) = (table.slot(a, in: bytes), table.slot(b, in: bytes))
        let offsetBits: UInt64 = ~0 << 27
        table.store(wordA & ~offsetBits | wordB & offsetBits, slot: a, into: &bytes, fixCheck: true)
        table.store(wordB & ~offsetBits | wordA & offsetBits, slot: b, into: &bytes, fixCheck: true)
        // The record's CRC over the forged table, so only the authenticator can tell.
        fixRecordCRC(of: table, in: &bytes)
        try writeBytes(bytes, to: dir.file("ui.prefs"))
        do {
            let strict = try openStore(dir) {
                $0.sealer = TestSealer(key: 7)
                $0.recovery = .fail
            }
            #expect(readsFromTable(strict), "the head verifies: the open reads the table")
            var refused = 0
            for i in 0..<Self.keys {
                do {
                    #expect(try strict.string(forKey: "key.\(i)") == Self.value(i), "never missing nor another value")
                } catch let error as PrefsError {
                    #expect(error.code == .tampered)
                    refused += 1
                }
            }
            #expect(refused > 0, "the forged piece is found by the reads that reach it")
            #expect(try strict.verify().damage.contains { $0.isTampering })
        }
        #expect(try readBytes(dir.file("ui.prefs")) == bytes)
        #expect(try PrefsStore.verify(id: "ui", directory: dir.path, sealer: TestSealer(key: 7)).damage.contains {
            $0.isTampering
        })
        // Salvaging keeps every authentic record: each key reads its own value.
        let salvaged = try openStore(dir) { $0.sealer = TestSealer(key: 7) }
        try expectEveryValue(salvaged)
    }

    /// Recomputes the index record's CRC over its bytes as they are (someone without the key can).
    fileprivate func fixRecordCRC(of table: IndexRecordBytes, in bytes: inout [UInt8]) {
        let valueLength = (12..<16).reversed().reduce(0) { $0 << 8 | Int(bytes[table.offset + $1]) }
        let length = Format.recordLength(keyLength: 0, valueLength: valueLength, authenticated: true)
        let crc = recordChecksum(bytes[table.offset..<table.offset + length - 4], inFile: bytes)
        for i in 0..<4 { bytes[table.offset + length - 4 + i] = UInt8(truncatingIfNeeded: crc >> (8 * i)) }
    }

    /// A sealed store's table is checked in pieces (version 8): the open checks the head alone, a read the pieces
    /// its probe reaches, and reading every key checks every piece once (issue 39: a 10,000-key sealed store's open
    /// spent two thirds of its instructions authenticating the whole table).
    @Test func aSealedOpenChecksOnlyTheTablePiecesItsReadsReach() throws {
        let dir = try TempDir("index-pieces", memory: true)
        try makeStore(dir, sealer: TestSealer(key: 7))
        let bytes = try readBytes(dir.file("ui.prefs"))
        let written = try IndexRecordBytes(bytes)
        #expect(written.macBytes == 16 * 16, "8,192 slots: 16 pieces of 512, a MAC each")
        let store = try openStore(dir) { $0.sealer = TestSealer(key: 7) }
        func verified() -> Int { store.engine.withLock { $0.log.table?.piecesVerified ?? -1 } }
        #expect(verified() == 0, "the open checks the head only")
        #expect(try store.string(forKey: "key.1") == Self.value(1))
        #expect((1...2).contains(verified()), "one piece, or two when the probe runs across a piece's end")
        try expectEveryValue(store)
        #expect(verified() == 16, "every piece checked once")
        #expect(try store.string(forKey: "key.absent") == nil)
        #expect(try store.verify().isClean)
    }

    /// Someone without the key swaps two pieces of a sealed table, the record's CRC made right. `verify`, whose full
    /// scan checks every piece's MAC, says `tampered` (a scan that checked only the head would call the file clean);
    /// the reads that reach the pieces find the table damaged (their MACs, and the slots' check bits, which include
    /// the slot's number) and read the log, and every key answers its own value.
    @Test func twoPiecesOfASealedTableSwappedDoNotVerify() throws {
        let dir = try TempDir("index-pieces-swapped", memory: true)
        try makeStore(dir, sealer: TestSealer(key: 7))
        var bytes = try readBytes(dir.file("ui.prefs"))
        let table = try IndexRecordBytes(bytes)
        let first = table.slotsOffset
        let second = first + 4096
        let piece = Array(bytes[first..<second])
        bytes.replaceSubrange(first..<second, with: bytes[second..<second + 4096])
        bytes.replaceSubrange(second..<second + 4096, with: piece)
        fixRecordCRC(of: table, in: &bytes)
        try writeBytes(bytes, to: dir.file("ui.prefs"))
        let verification = try PrefsStore.verify(id: "ui", directory: dir.path, sealer: TestSealer(key: 7))
        #expect(verification.damage.contains { $0.isTampering })
        #expect(try readBytes(dir.file("ui.prefs")) == bytes, "verify changes nothing")
        let store = try openStore(dir) { $0.sealer = TestSealer(key: 7) }
        try expectEveryValue(store)
    }

    /// A sealed store of version 7 (its tables authenticated whole) still opens from its table, and its appends,
    /// tables included, keep version 7's layout: what the previous release wrote reads as it did.
    @Test func aSealedVersion7StoreStillReadsAndWritesWholeTables() throws {
        let dir = try TempDir("index-sealed-7", memory: true)
        try makeStore(dir, sealer: TestSealer(key: 7), keys: 0) { try $0.set("first", forKey: "key.first") }
        let version7 = try withFormatVersion(7, try readBytes(dir.file("ui.prefs")), sealer: TestSealer(key: 7))
        try writeBytes(version7, to: dir.file("ui.prefs"))
        try makeStore(dir, sealer: TestSealer(key: 7))
        let bytes = try readBytes(dir.file("ui.prefs"))
        #expect(bytes[8] == 7, "appends keep the file's version")
        let table = try IndexRecordBytes(bytes)
        #expect(table.keyCount == Self.keys + 1)
        let store = try openStore(dir) { $0.sealer = TestSealer(key: 7) }
        #expect(readsFromTable(store))
        #expect(store.engine.withLock { $0.log.table?.pieceCount } == 0)
        try expectEveryValue(store)
        #expect(try store.string(forKey: "key.first") == "first")
        #expect(try store.verify().isClean)
        #expect(store.lastRecovery == nil)
    }

    /// Slots rewritten in the file after their piece was checked are never read: a lookup reads the private copy.
    /// Every piece is checked by a first pass of reads; then every slot of the file is emptied (check bits made
    /// right) and the handle forgets what it looked up: the next reads find every key through the copy, with no
    /// piece checked again and no read of the whole log.
    @Test func slotsRewrittenAfterTheirPieceWasCheckedAreNeverRead() throws {
        let dir = try TempDir("index-pieces-copy", memory: true)
        try makeStore(dir, sealer: TestSealer(key: 7))
        let store = try openStore(dir) { $0.sealer = TestSealer(key: 7) }
        try expectEveryValue(store)
        #expect(store.engine.withLock { $0.log.table?.piecesVerified } == 16)
        try emptyEverySlot(in: dir.file("ui.prefs"))
        store.engine.withLock { $0.log.index.removeAll() }
        try expectEveryValue(store)
        #expect(store.engine.withLock { $0.log.table?.piecesVerified } == 16, "no piece read again")
        #expect(readsFromTable(store), "no read of the whole log")
    }

    /// A table of fewer than 512 slots is one short piece; the largest stores get no table when its record would be
    /// longer than a record may be (version 8's sealed tables reach that at half the keys of a plain one).
    @Test func aShortPieceAndTheLargestTables() throws {
        let dir = try TempDir("index-short-piece", memory: true)
        // 256 keys: 512 slots (`PREFSKV_INDEX_TAIL`, in make torture's second pass, only writes tables sooner).
        try makeStore(dir, sealer: TestSealer(key: 7), keys: 256)
        let table = try IndexRecordBytes(try readBytes(dir.file("ui.prefs")))
        #expect(table.slotCount == 512 && table.macBytes == 16, "one piece")
        let store = try openStore(dir) { $0.sealer = TestSealer(key: 7) }
        #expect(readsFromTable(store))
        for i in 0..<256 { #expect(try store.string(forKey: "key.\(i)") == Self.value(i)) }
        #expect(try store.verify().isClean)
        // 2^21 keys: 2^22 slots (32 MiB) in every table; one more key: 2^23 slots, 64 MiB, which a plain table's
        // record holds and a sealed version-8 one's (its 16,384 MACs added) does not; past 2^22 keys none.
        let half = 1 << 21
        #expect(IndexTable.fits(keyCount: half, pieces: false) && IndexTable.fits(keyCount: half, pieces: true))
        #expect(IndexTable.fits(keyCount: half + 1, pieces: false) && !IndexTable.fits(keyCount: half + 1, pieces: true))
        #expect(IndexTable.fits(keyCount: 2 * half, pieces: false) && !IndexTable.fits(keyCount: 2 * half + 1, pieces: false))
    }

    /// Rewrites every slot of the file's newest table as a valid empty slot (check bits made right), in place, as
    /// someone without the key can while a handle has the file open.
    func emptyEverySlot(in path: String) throws {
        let bytes = try readBytes(path)
        let table = try IndexRecordBytes(bytes)
        var emptied = bytes
        for slot in 0..<table.slotCount { table.store(0, slot: slot, into: &emptied, fixCheck: true) }
        let fd = open(path, O_WRONLY)
        defer { close(fd) }
        let start = table.slotsOffset
        let written = emptied[start..<start + 8 * table.slotCount].withUnsafeBytes {
            pwrite(fd, $0.baseAddress, $0.count, off_t(start))
        }
        #expect(written == 8 * table.slotCount)
    }
}
