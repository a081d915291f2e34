// Format version 5: every record's checksum starts with the generation of the image it belongs to (FileFormat.md,
// "Records"), so bytes of an earlier image of the same store, left in a file or copied into it, are never taken for
// records of the image: the precondition for a compaction that writes a new image into a file an earlier one used.
// Version-4 files still read, and a plain store whose every header copy is gone is still rebuilt, its generation
// found by search. Every case writes real bytes into a real store file and checks what survived.
import Foundation
import Testing

@testable import PrefsKV

@Suite struct ImageBoundRecordsTests {
    static let keys = (0..<12).map { "key-\($0)" }

    /// The bytes of a store file at generation 0 holding `v1` then `v2` for every key (key-0 written last), and the
    /// bytes of the compacted image that replaced it (generation 1) after key-0 was set to `v3`.
    static func earlierAndLaterImage(_ dir: TempDir) throws -> (earlier: [UInt8], later: [UInt8]) {
        let store = try openStore(dir) { $0.autoCompactionThreshold = nil }
        for key in keys { try store.set("\(key)=v1", forKey: key) }
        for key in keys.dropFirst() { try store.set("\(key)=v2", forKey: key) }
        try store.set("key-0=v2", forKey: "key-0")
        let earlier = try readBytes(dir.file("ui.prefs"))
        try store.compact()
        try store.set("key-0=v3", forKey: "key-0")
        let later = try readBytes(dir.file("ui.prefs"))
        return (earlier, later)
    }

    /// The log end of a store file (the low 48 bits of the word at 256).
    static func logEnd(_ bytes: [UInt8]) -> Int {
        bytes.withUnsafeBytes { Format.decodeLogEnd($0.loadUnaligned(fromByteOffset: Format.logEndOffset, as: UInt64.self))! }
    }

    /// A file that held the earlier image and now holds the later one up to its log end, the earlier image's bytes
    /// after it (what a file reused for a newer image holds where the newer one did not write, or where a power
    /// loss kept the old sectors), and a log-end word that no longer reads, so the open scans the whole file.
    /// Before version 5 the earlier image's records after the log end verified, with sequence numbers above the
    /// later image's, and the salvage applied them: key-0 went back from v3 to v2 (and the other keys' records
    /// were applied twice). Now they fail their checksums: the store reads exactly the later image.
    @Test func recordsOfAnEarlierImageLeftInTheFileAreNotTakenForTheImages() throws {
        let dir = try TempDir("image-bound")
        let (earlier, later) = try Self.earlierAndLaterImage(dir)
        #expect(earlier[8] == 8 && later[8] == 8, "both images are of format version 8 (version 5's seeded checksums)")
        let end = Self.logEnd(later)
        try #require(earlier.count > end + 1024, "the earlier image has records beyond the later one's log end")
        var mixed = Array(later[0..<end]) + earlier[end...]
        mixed[Format.logEndOffset] ^= 0x01
        try writeBytes(mixed, to: dir.file("ui.prefs"))

        let reopened = try openStore(dir)
        let report = try #require(reopened.lastRecovery, "the damaged log-end word is recovered from")
        #expect(try reopened.string(forKey: "key-0") == "key-0=v3")
        for key in Self.keys.dropFirst() { #expect(try reopened.string(forKey: key) == "\(key)=v2") }
        #expect(try reopened.allKeys.count == Self.keys.count)
        // Every record kept is one the later image holds: its keys' latest values, nothing from the earlier image.
        #expect(report.recordsKept == Self.keys.count + 1, "\(report)")
        // The quarantine copy is the mixed file, byte for byte.
        #expect(try readBytes(try #require(report.quarantinePath)) == mixed)
    }

    /// The same file with its log-end word intact: the later image reads as written, and the bytes after its log end
    /// are never looked at.
    @Test func anIntactLogEndIgnoresAnEarlierImagesBytesAfterIt() throws {
        let dir = try TempDir("image-bound-intact")
        let (earlier, later) = try Self.earlierAndLaterImage(dir)
        let end = Self.logEnd(later)
        let mixed = Array(later[0..<end]) + earlier[end...]
        try writeBytes(mixed, to: dir.file("ui.prefs"))
        let reopened = try openStore(dir)
        #expect(reopened.lastRecovery == nil)
        #expect(try reopened.string(forKey: "key-0") == "key-0=v3")
        #expect(try readBytes(dir.file("ui.prefs")) == mixed)
    }

    /// Rewrites a version-5 plain store file as version 4 wrote it: the version field of the header page and of the
    /// header copy, every record's checksum without the generation, the header CRCs recomputed.
    static func asVersion4(_ bytes: [UInt8]) -> [UInt8] {
        var out = bytes
        let seed = recordSeed(ofFile: bytes)
        let end = logEnd(bytes)
        func storeCRC(_ crc: UInt32, at offset: Int) {
            withUnsafeBytes(of: crc.littleEndian) { out.replaceSubrange(offset..<offset + 4, with: $0) }
        }
        // The static parts (the page's, and the copy's value at 4096 + 32) say version 4, with their CRCs.
        for start in [0, Format.logStart + Format.recordHeaderSize] {
            out[start + Format.versionOffset] = 4
            storeCRC(CRC32C.checksum(Array(out[start..<start + Format.staticCRCOffset])), at: start + Format.staticCRCOffset)
        }
        var offset = Format.logStart
        while offset < end {
            let record = bytes.withUnsafeBytes { RecordHeader.verified(in: $0, at: offset, limit: end, seed: seed) }!
            let crcOffset = offset + record.length - 4
            storeCRC(CRC32C.checksum(Array(out[offset..<crcOffset])), at: crcOffset)
            offset += record.length
        }
        return out
    }

    /// Version-4 files, written by the previous release, open and read as they are; appends to them stay version
    /// 4 (their checksums without a generation); their next image is of the current version (6).
    @Test func aVersion4StoreStillOpensAndItsNextImageIsTheCurrentVersion() throws {
        let dir = try TempDir("version-4")
        do {
            let store = try openStore(dir) { $0.autoCompactionThreshold = nil }
            for key in Self.keys { try store.set("\(key)=v1", forKey: key) }
        }
        let version4 = Self.asVersion4(try readBytes(dir.file("ui.prefs")))
        try #require(version4[8] == 4)
        try writeBytes(version4, to: dir.file("ui.prefs"))
        do {
            let store = try openStore(dir) { $0.autoCompactionThreshold = nil }
            #expect(store.lastRecovery == nil)
            for key in Self.keys { #expect(try store.string(forKey: key) == "\(key)=v1") }
            try store.set("key-0=v2", forKey: "key-0")
        }
        let appended = try readBytes(dir.file("ui.prefs"))
        #expect(appended[8] == 4, "an append keeps the file's version")
        do {
            let store = try openStore(dir) { $0.autoCompactionThreshold = nil }
            #expect(store.lastRecovery == nil)
            #expect(try store.string(forKey: "key-0") == "key-0=v2")
            try store.compact()
        }
        let compacted = try readBytes(dir.file("ui.prefs"))
        #expect(compacted[8] == UInt8(Format.version) && Format.version == 8, "the next image is version 8")
        let store = try openStore(dir)
        #expect(store.lastRecovery == nil)
        #expect(try store.string(forKey: "key-0") == "key-0=v2")
        for key in Self.keys.dropFirst() { #expect(try store.string(forKey: key) == "\(key)=v1") }
    }

    /// A plain store whose header page and header copy are both zeros has no generation left to check its records
    /// with: repair searches for the one under which they verify, and keeps every record.
    @Test func aPlainStoreWithNoHeaderLeftIsRebuiltUnderTheGenerationItsRecordsVerifyWith() throws {
        let dir = try TempDir("rebuild-generation")
        do {
            let store = try openStore(dir) { $0.autoCompactionThreshold = nil }
            for round in 0..<5 {
                for key in Self.keys { try store.set("\(key)=r\(round)", forKey: key) }
                try store.compact()
            }
            for key in Self.keys { try store.set("\(key)=last", forKey: key) }
        }
        var bytes = try readBytes(dir.file("ui.prefs"))
        #expect(bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: Format.generationOffset, as: UInt64.self) } == 5)
        for i in 0..<(Format.logStart + Format.headerCopyLength(authenticated: false)) { bytes[i] = 0 }
        try writeBytes(bytes, to: dir.file("ui.prefs"))
        expectError(.notAStore) { try openStore(dir) }
        let report = try #require(try PrefsStore.repair(id: "ui", directory: dir.path))
        // Lost: only the zeroed header copy (as a damaged range); kept: every record after it.
        #expect(report.recordsKept == 2 * Self.keys.count && report.recordsLost == 1, "\(report)")
        #expect(try readBytes(try #require(report.quarantinePath)) == bytes)
        let repaired = try openStore(dir)
        for key in Self.keys { #expect(try repaired.string(forKey: key) == "\(key)=last") }
    }

    /// The checksum of a version-5 record is CRC32C over its magic, the image's generation (8 bytes, little-endian)
    /// and the rest of the record before the CRC, as FileFormat.md writes it out.
    @Test func theChecksumIsTheDocumentedOne() throws {
        let dir = try TempDir("seed-format")
        do {
            let store = try openStore(dir) { $0.autoCompactionThreshold = nil }
            try store.set("dark", forKey: "theme")
            try store.compact()
            try store.compact()
        }
        let bytes = try readBytes(dir.file("ui.prefs"))
        let generation = Array(bytes[Format.generationOffset..<Format.generationOffset + 8])
        #expect(generation == [2, 0, 0, 0, 0, 0, 0, 0])
        var offset = Format.logStart
        var checked = 0
        while offset < Self.logEnd(bytes) {
            let length = bytes.withUnsafeBytes { RecordHeader.plausible(in: $0, at: offset, limit: bytes.count)!.length }
            let covered = Array(bytes[offset..<offset + 4]) + generation + bytes[offset + 4..<offset + length - 4]
            let stored = bytes[offset + length - 4..<offset + length].reversed().reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            #expect(CRC32C.checksum(covered) == stored, "record at \(offset)")
            offset += length
            checked += 1
        }
        #expect(checked == 2, "the header copy and the one set record")
    }
}
