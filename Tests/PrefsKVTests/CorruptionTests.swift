import Foundation
import TestSupport
import Testing

@testable import PrefsKV

/// The record length the format defines: 32-byte header, key, value, zero padding, 4-byte CRC, 8-aligned.
func recordLength(key: Int, value: Int, authenticated: Bool = false) -> Int {
    (32 + key + value + 4 + (authenticated ? 16 : 0) + 7) & ~7
}

/// Where the first record after the header copy (a record whose value is the header's 128-byte static part)
/// starts in a store file written by this version: 4264 plain, 4280 sealed (FileFormat.md).
func firstRecordOffset(sealed: Bool = false) -> Int {
    4096 + recordLength(key: 0, value: 128, authenticated: sealed)
}

/// A store written record by record, with each record's place and effect known to the test.
struct Fixture {
    enum Effect {
        case set(String, Expected)
        case delete(String)
        case commit
    }

    struct Record {
        var offset: Int
        var length: Int
        /// Records of one transaction share a group: they live or die together.
        var group: Int
        var effect: Effect
    }

    let dir: TempDir
    let path: String
    var records: [Record] = []
    var bytes: [UInt8] = []
    var logEnd: Int { records.last.map { $0.offset + $0.length } ?? firstRecordOffset() }

    /// alpha="one" | bravo=2 | tx{charlie="three", delta=4, commit} | echo=[5,5,5] | alpha="uno" | -echo | foxtrot=6 (expires in a day)
    static func small() throws -> Fixture {
        var fixture = Fixture(dir: try TempDir("corrupt", memory: true))
        let store = try openStore(fixture.dir)
        try fixture.add(store, "alpha", .string("one"))
        try fixture.add(store, "bravo", .int(2))
        try store.write { tx in
            try tx.set("three", forKey: "charlie")
            try tx.set(4, forKey: "delta")
        }
        let group = fixture.nextGroup
        fixture.append(recordLength(key: 7, value: 5), group, .set("charlie", .string("three")))
        fixture.append(recordLength(key: 5, value: 8), group, .set("delta", .int(4)))
        fixture.append(recordLength(key: 0, value: 4), group, .commit)
        try fixture.add(store, "echo", .data(Data([5, 5, 5])))
        try fixture.add(store, "alpha", .string("uno"))
        try store.removeValue(forKey: "echo")
        fixture.append(recordLength(key: 4, value: 0), fixture.nextGroup, .delete("echo"))
        try store.set(6, forKey: "foxtrot", expiresAfter: .seconds(86400))
        fixture.append(recordLength(key: 7, value: 8), fixture.nextGroup, .set("foxtrot", .int(6)))
        #expect(try store.stats().logBytes == fixture.logEnd - firstRecordOffset())
        fixture.bytes = try readBytes(fixture.path)
        return fixture
    }

    /// `count` single string records `key-NNN` = NNN dashes-ish, so that records straddle pages.
    static func pages(count: Int) throws -> Fixture {
        var fixture = Fixture(dir: try TempDir("pages", memory: true))
        let store = try openStore(fixture.dir) { $0.autoCompactionThreshold = nil }
        for i in 0..<count {
            try fixture.add(
                store, String(format: "key-%03d", i), .string(String(repeating: "v", count: 10 + (i * 7) % 50)))
        }
        fixture.bytes = try readBytes(fixture.path)
        return fixture
    }

    init(dir: TempDir) {
        self.dir = dir
        path = dir.file("ui.prefs")
    }

    var nextGroup: Int { (records.last?.group ?? -1) + 1 }

    mutating func append(_ length: Int, _ group: Int, _ effect: Effect) {
        records.append(Record(offset: logEnd, length: length, group: group, effect: effect))
    }

    mutating func add(_ store: PrefsStore, _ key: String, _ value: Expected) throws {
        let valueLength: Int
        switch value {
        case .int(let v): try store.set(v, forKey: key); valueLength = 8
        case .string(let s): try store.set(s, forKey: key); valueLength = s.utf8.count
        case .data(let d): try store.set(d, forKey: key); valueLength = d.count
        }
        append(recordLength(key: key.utf8.count, value: valueLength), nextGroup, .set(key, value))
    }

    /// The records that go when `lost` records are damaged: a record that ends its group (a single change, or a
    /// transaction's commit record) takes its whole group with it; a damaged member of a transaction whose commit
    /// record survives goes alone (the other members are salvaged).
    func deadRecords(_ lost: Set<Int>) -> Set<Int> {
        var dead = lost
        for i in lost where records.last(where: { $0.group == records[i].group })!.offset == records[i].offset {
            for (j, record) in records.enumerated() where record.group == records[i].group { dead.insert(j) }
        }
        return dead
    }

    /// The state after replaying every record except the dead ones (`deadRecords`).
    func expected(losing lost: Set<Int>) -> [String: Expected] {
        let dead = deadRecords(lost)
        var values: [String: Expected] = [:]
        for (i, record) in records.enumerated() where !dead.contains(i) {
            switch record.effect {
            case .set(let key, let value): values[key] = value
            case .delete(let key): values[key] = nil
            case .commit: break
            }
        }
        return values
    }

    /// Records lost when `lost` records are damaged (`deadRecords`).
    func recordsLost(_ lost: Set<Int>) -> Int { deadRecords(lost).count }

    func write(_ damaged: [UInt8]) throws {
        try writeBytes(damaged, to: path)
    }

    /// Opens the damaged store and checks the recovery byte for byte.
    func expectRecovery(
        damaged: [UInt8], losing lost: Set<Int>, recordsLost: ClosedRange<Int>? = nil, damage: [Range<Int>]? = nil,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        try write(damaged)
        let capture = LogCapture()
        let store = try openStore(dir) { $0.logger = capture.logger }
        let report = try #require(store.lastRecovery, sourceLocation: sourceLocation)
        let lostCount = recordsLost ?? self.recordsLost(lost)...self.recordsLost(lost)
        #expect(report.path == path, sourceLocation: sourceLocation)
        #expect(lostCount.contains(report.recordsLost), "\(report)", sourceLocation: sourceLocation)
        #expect(
            report.recordsKept == records.count - self.recordsLost(lost), "\(report)", sourceLocation: sourceLocation)
        if let damage { #expect(report.damage.map(\.range) == damage, "\(report)", sourceLocation: sourceLocation) }
        #expect(try CrashModel.read(store).values == expected(losing: lost), sourceLocation: sourceLocation)

        // The damaged original, byte for byte, read-only, named <store>.corrupt-<UTC yyyyMMdd'T'HHmmss'Z'>.
        let quarantine = try #require(report.quarantinePath, sourceLocation: sourceLocation)
        #expect(try readBytes(quarantine) == damaged, sourceLocation: sourceLocation)
        #expect(fileMode(quarantine) == 0o400, sourceLocation: sourceLocation)
        let suffix = quarantine.dropFirst(path.count + ".corrupt-".count)
        #expect(quarantine.hasPrefix(path + ".corrupt-") && suffix.count == 16, sourceLocation: sourceLocation)
        #expect(suffix.dropFirst(8).first == "T" && suffix.last == "Z", sourceLocation: sourceLocation)

        // Exactly one error line, naming the file and the counts.
        let errors = capture.errors
        #expect(errors.count == 1, "\(errors)", sourceLocation: sourceLocation)
        #expect(
            errors.first.map {
                $0.contains(path) && $0.contains("kept \(report.recordsKept)")
                    && $0.contains("lost \(report.recordsLost)")
            } == true, "\(errors)", sourceLocation: sourceLocation)

        // Writable at once; the new file verifies and reopens without another recovery.
        try store.set("after", forKey: "zulu")
        #expect(try store.verify().isClean, sourceLocation: sourceLocation)
        let reopened = try openStore(dir)
        #expect(reopened.lastRecovery == nil, sourceLocation: sourceLocation)
        var after = expected(losing: lost)
        after["zulu"] = .string("after")
        #expect(try CrashModel.read(reopened).values == after, sourceLocation: sourceLocation)
    }

    /// Removes every file but the lock file and writes the original back.
    func reset() throws {
        for name in dir.files where name.contains(".corrupt-") {
            try FileManager.default.removeItem(atPath: dir.file(name))
        }
        try writeBytes(bytes, to: path)
    }
}

/// The regions of a record, as offsets into the 56-byte record of key "bravo" with an Int64 value.
enum RecordRegion: String, CaseIterable, CustomStringConvertible {
    case magic, kind, valueType, flags, reserved, keyLength, valueLength, seq, expiresAt, key, value, padding, crc

    var offsets: Range<Int> {
        switch self {
        case .magic: 0..<4
        case .kind: 4..<5
        case .valueType: 5..<6
        case .flags: 6..<7
        case .reserved: 7..<8
        case .keyLength: 8..<12
        case .valueLength: 12..<16
        case .seq: 16..<24
        case .expiresAt: 24..<32
        case .key: 32..<37
        case .value: 37..<45
        case .padding: 45..<52
        case .crc: 52..<56
        }
    }

    var description: String { rawValue }
}

/// Damage to the header page. A file of at least a page is read with the copy of its header that starts the log
/// (and recovered); with that copy damaged too, or a file shorter than a page, the open refuses.
enum HeaderFault: String, CaseIterable, CustomStringConvertible {
    case wrongMagic, newerVersionWithValidChecksum, flippedVersionByte, flippedUUIDByte, wrongHeaderSize,
        zeroedHeaderPage, truncatedToHalfAPage, emptyFile

    var description: String { rawValue }

    /// The open's error when no copy of the header verifies.
    var code: PrefsError.Code {
        switch self {
        case .wrongMagic, .zeroedHeaderPage, .emptyFile: .notAStore
        // A version field above 3 with no copy to say otherwise is a newer format, whatever its checksum.
        case .newerVersionWithValidChecksum, .flippedVersionByte: .unsupportedVersion
        case .flippedUUIDByte, .wrongHeaderSize, .truncatedToHalfAPage: .corrupted
        }
    }

    /// Whether the header copy can stand in: the file still has it, and the page is damage, not a newer format.
    var leavesTheCopy: Bool {
        switch self {
        case .newerVersionWithValidChecksum, .truncatedToHalfAPage, .emptyFile: false
        default: true
        }
    }

    /// The fault, and the header copy (the record at 4096) damaged too when the file still has it.
    func applyWithCopyDamaged(_ bytes: [UInt8]) -> [UInt8] {
        var b = apply(bytes)
        if b.count > 4096 + 60 { b[4096 + 60] ^= 0x01 }  // inside the copy's value: its checksum fails
        return b
    }

    func apply(_ bytes: [UInt8]) -> [UInt8] {
        var b = bytes
        switch self {
        case .wrongMagic: b[3] = UInt8(ascii: "X")
        case .newerVersionWithValidChecksum:
            b[8] = UInt8(Format.version + 1)
            let crc = CRC32C.checksum(Array(b[0..<124]))
            withUnsafeBytes(of: crc.littleEndian) { for i in 0..<4 { b[124 + i] = $0[i] } }
        case .flippedVersionByte: b[8] ^= 0xFF
        case .flippedUUIDByte: b[20] ^= 0x01
        case .wrongHeaderSize: b[10] ^= 0x01
        case .zeroedHeaderPage: for i in 0..<4096 { b[i] = 0 }
        case .truncatedToHalfAPage: b = Array(b[0..<2048])
        case .emptyFile: b = []
        }
        return b
    }
}

@Suite struct CorruptionTests {
    @Test func theCRC32CImplementationMatchesTheStandardCheckValue() {
        #expect(CRC32C.checksum(Array("123456789".utf8)) == 0xE306_9283)
        #expect(CRC32C.checksum([UInt8]()) == 0)
        // Slicing-by-8 and the byte loop agree at every length and alignment.
        let data = (0..<100).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
        for start in 0..<9 {
            for end in start...100 {
                var bytewise = CRC32C()
                for byte in data[start..<end] { withUnsafeBytes(of: byte) { bytewise.update($0) } }
                #expect(CRC32C.checksum(Array(data[start..<end])) == bytewise.value)
            }
        }
    }

    @Test func theHardwareAndSoftwareCRC32CAgreeAtEveryLengthAndAlignment() {
        // On x86-64 the store uses the crc32 instruction; the slicing-by-8 path must give the same values.
        let data = (0..<300).map { UInt8(truncatingIfNeeded: $0 &* 91 &+ 7) }
        for start in 0..<9 {
            for end in stride(from: start, through: 300, by: 1) {
                let slice = Array(data[start..<end])
                var software = CRC32C()
                slice.withUnsafeBytes { software.updateInSoftware($0) }
                #expect(CRC32C.checksum(slice) == software.value)
            }
        }
        var software = CRC32C()
        Array("123456789".utf8).withUnsafeBytes { software.updateInSoftware($0) }
        #expect(software.value == 0xE306_9283)
    }

    @Test(arguments: RecordRegion.allCases)
    func flippedByteLosesOnlyTheRecordItHit(region: RecordRegion) throws {
        let fixture = try Fixture.small()
        let bravo = fixture.records[1]
        #expect(bravo.length == 56)
        var damaged = fixture.bytes
        damaged[bravo.offset + region.offsets.lowerBound] ^= 0xFF
        try fixture.expectRecovery(damaged: damaged, losing: [1], damage: [bravo.offset..<bravo.offset + bravo.length])
    }

    /// Issue 15: one flipped bit in a member of a committed transaction costs that member only; the recovery
    /// report says the transaction was partially salvaged.
    @Test func flippedByteInATransactionMemberLosesOnlyThatMember() throws {
        let fixture = try Fixture.small()
        let delta = fixture.records[3]
        var damaged = fixture.bytes
        damaged[delta.offset + 40] ^= 0x10  // inside delta's value
        let commit = fixture.records[4]
        try fixture.expectRecovery(damaged: damaged, losing: [3], damage: [delta.offset..<commit.offset])
        let store = try openStore(fixture.dir)
        #expect(try store.string(forKey: "charlie") == "three" && store.int(forKey: "delta") == nil)
    }

    /// The same flip in the transaction's commit record: nothing vouches for the transaction, it goes whole.
    @Test func flippedByteInATransactionsCommitRecordLosesTheWholeTransaction() throws {
        let fixture = try Fixture.small()
        let charlie = fixture.records[2]
        let commit = fixture.records[4]
        var damaged = fixture.bytes
        damaged[commit.offset + 32] ^= 0x01  // the member count
        try fixture.expectRecovery(
            damaged: damaged, losing: [4], damage: [charlie.offset..<commit.offset, commit.offset..<commit.offset + 40])
        let store = try openStore(fixture.dir)
        #expect(try store.string(forKey: "charlie") == nil && store.int(forKey: "delta") == nil)
    }

    @Test func truncationAtEveryOffsetKeepsEveryWholeRecordBeforeIt() throws {
        var fixture = try Fixture.small()
        // A small file: exactly the header and the log.
        fixture.bytes = Array(fixture.bytes[0..<fixture.logEnd])
        for length in 0..<fixture.logEnd {
            try fixture.reset()
            let truncated = Array(fixture.bytes[0..<length])
            if length < firstRecordOffset() && length >= 4096 {
                // The header copy is torn: the damage starts at the log start, and every record is lost.
                let all = Set(fixture.records.indices)
                try fixture.expectRecovery(
                    damaged: truncated, losing: all, recordsLost: 1...fixture.recordsLost(all),
                    damage: [4096..<fixture.logEnd])
                continue
            }
            if length < 4096 {
                try fixture.write(truncated)
                expectError(length < 8 ? .notAStore : .corrupted) { try openStore(fixture.dir) }
                #expect(try readBytes(fixture.path) == truncated, "length \(length)")
                #expect(!fixture.dir.files.contains { $0.contains(".corrupt-") })
                continue
            }
            let lost = Set(
                fixture.records.indices.filter { fixture.records[$0].offset + fixture.records[$0].length > length })
            let deadGroup = fixture.records[lost.min()!].group
            let firstLost = fixture.records.first { $0.group == deadGroup }!.offset
            let firstTorn = fixture.records.first { $0.offset + $0.length > length }!.offset
            // An unfinished transaction is one range; a cut exactly at a record boundary leaves nothing torn
            // to separate it from the missing tail.
            let ranges =
                firstLost == firstTorn || length == firstTorn
                ? [firstLost..<fixture.logEnd] : [firstLost..<firstTorn, firstTorn..<fixture.logEnd]
            // Whole transactions only: the torn one starts the damage, reported through the claimed log end.
            // How many records the missing bytes held is unknowable: at least one is reported.
            try fixture.expectRecovery(
                damaged: truncated, losing: lost, recordsLost: 1...fixture.recordsLost(lost),
                damage: ranges)
        }
        // Preallocated space after the log end is not the log: cutting it loses nothing.
        try fixture.reset()
        #expect(try openStore(fixture.dir).lastRecovery == nil)
    }

    /// Issue 15: a zeroed header page (page 0) loses nothing: the header is read from its copy at 4096.
    @Test(arguments: [0, 1, 2, 3])
    func zeroedPageLosesExactlyTheRecordsItCovers(page: Int) throws {
        let fixture = try Fixture.pages(count: 300)
        #expect(fixture.logEnd > 4 * 4096)
        var damaged = fixture.bytes
        let zeroed = page * 4096..<(page + 1) * 4096
        for i in zeroed { damaged[i] = 0 }
        if page == 0 {
            try fixture.expectRecovery(damaged: damaged, losing: [], recordsLost: 0...0, damage: [zeroed])
            return
        }
        let lost = Set(
            fixture.records.indices.filter {
                fixture.records[$0].offset < zeroed.upperBound
                    && fixture.records[$0].offset + fixture.records[$0].length > zeroed.lowerBound
            })
        // Page 1 holds the header copy too: the damage starts there.
        let first = page == 1 ? 4096 : fixture.records[lost.min()!].offset
        let next = fixture.records[lost.max()! + 1].offset
        // Every lost record is counted exactly: sequence numbers rise by one per commit.
        try fixture.expectRecovery(damaged: damaged, losing: lost, damage: [first..<next])
    }

    @Test func randomGarbageAfterTheLogIsNeverRead() throws {
        let fixture = try Fixture.small()
        var generator = SystemRandomNumberGenerator()
        let garbage = (0..<3000).map { _ in UInt8.random(in: 0...255, using: &generator) }
        // Appended after the end of the file, and written over the preallocated space after the log end.
        for damaged in [fixture.bytes + garbage, Array(fixture.bytes[0..<fixture.logEnd]) + garbage] {
            try fixture.reset()
            try fixture.write(damaged)
            let store = try openStore(fixture.dir)
            #expect(store.lastRecovery == nil)
            #expect(try CrashModel.read(store).values == fixture.expected(losing: []))
            try store.set("next", forKey: "zulu")
            #expect(try store.verify().isClean)
            #expect(try openStore(fixture.dir).string(forKey: "zulu") == "next")
        }
    }

    @Test func aDamagedLogEndWordIsRecoveredByScanningTheWholeFile() throws {
        let fixture = try Fixture.small()
        var damaged = fixture.bytes
        damaged[256] ^= 0x08  // the log-end word: its check bits no longer match
        try fixture.expectRecovery(damaged: damaged, losing: [], recordsLost: 0...0, damage: [256..<264])
    }

    /// Issue 15: a damaged header page is no single point of failure. The open reads the copy of the header that
    /// starts the log, salvages (nothing lost, the original quarantined byte for byte, one logged error), and under
    /// `.fail` refuses with the file byte-identical.
    @Test(arguments: HeaderFault.allCases.filter(\.leavesTheCopy))
    func aDamagedHeaderPageIsReadFromItsCopyAndNothingIsLost(fault: HeaderFault) throws {
        let fixture = try Fixture.small()
        let damaged = fault.apply(fixture.bytes)
        try fixture.write(damaged)
        expectError(.corrupted) { try openStore(fixture.dir) { $0.recovery = .fail } }
        #expect(try readBytes(fixture.path) == damaged)
        let report = try PrefsStore.verify(id: "ui", directory: fixture.dir.path)
        #expect(report.damage.map(\.range) == [0..<4096] && report.recordsVerified == fixture.records.count)
        try fixture.expectRecovery(damaged: damaged, losing: [], recordsLost: 0...0, damage: [0..<4096])
    }

    /// Where no copy of the header verifies, the open refuses, whatever the policy, and leaves the file
    /// byte-identical (a wrong file is never turned into an empty store that the next write overwrites).
    @Test(arguments: HeaderFault.allCases)
    func anUnreadableHeaderIsAnErrorThatLeavesTheFileByteIdentical(fault: HeaderFault) throws {
        let fixture = try Fixture.small()
        let damaged = fault.applyWithCopyDamaged(fixture.bytes)
        try fixture.write(damaged)
        let filesBefore = fixture.dir.files
        for policy in [PrefsStore.RecoveryPolicy.salvage, .fail] {
            let error = expectError(fault.code) { try openStore(fixture.dir) { $0.recovery = policy } }
            #expect(error?.path == fixture.path)
        }
        #expect(try readBytes(fixture.path) == damaged)
        #expect(fixture.dir.files == filesBefore)
        expectError(fault.code) { try PrefsStore.verify(id: "ui", directory: fixture.dir.path) }
    }

    @Test func aSecondRecoveryNeverOverwritesTheFirstQuarantineCopy() throws {
        let fixture = try Fixture.small()
        var first = fixture.bytes
        first[fixture.records[0].offset + 40] ^= 0x01
        try fixture.write(first)
        let q1 = try #require(try openStore(fixture.dir).lastRecovery?.quarantinePath)
        var second = try readBytes(fixture.path)
        second[4096 + 40] ^= 0x01
        try fixture.write(second)
        let q2 = try #require(try openStore(fixture.dir).lastRecovery?.quarantinePath)
        #expect(q1 != q2)
        #expect(try readBytes(q1) == first)
        #expect(try readBytes(q2) == second)
    }

    @Test func failPolicyThrowsCorruptedAndTouchesNothing() throws {
        let fixture = try Fixture.small()
        var damaged = fixture.bytes
        damaged[fixture.records[5].offset + 33] ^= 0xFF
        try fixture.write(damaged)
        let error = expectError(.corrupted) { try openStore(fixture.dir) { $0.recovery = .fail } }
        #expect(error?.message.contains("lost 1") == true)
        #expect(try readBytes(fixture.path) == damaged)
        #expect(fixture.dir.files == ["ui.prefs", "ui.prefs.lock"])
    }

    @Test func verifyReportsEveryDamagedRecordWithoutChangingTheFile() throws {
        let fixture = try Fixture.small()
        var damaged = fixture.bytes
        let bravo = fixture.records[1]
        let echo = fixture.records[5]
        damaged[bravo.offset + 40] ^= 0x01
        damaged[echo.offset + 20] ^= 0x01
        try fixture.write(damaged)
        let report = try PrefsStore.verify(id: "ui", directory: fixture.dir.path)
        #expect(!report.isClean)
        #expect(
            report.damage.map(\.range) == [bravo.offset..<bravo.offset + 56, echo.offset..<echo.offset + echo.length])
        // Both records failed their checks: what lies where their keys would be is not a key (issue 35).
        #expect(report.damage.flatMap(\.keys).isEmpty)
        #expect(report.recordsVerified == fixture.records.count - 2)
        #expect(try readBytes(fixture.path) == damaged)
        #expect(fixture.dir.files == ["ui.prefs", "ui.prefs.lock"])
        expectError(.notFound) { try PrefsStore.verify(id: "absent", directory: fixture.dir.path) }
    }
}
