// Issue 14, point 2: in a sealed store every record is authenticated with its place in the log bound in, so a
// record forged without the key, replayed from an older copy of the file, reordered or dropped from the middle is
// found (`tampered` under `.fail`, dropped and reported under `.salvage`, never applied), while a keyless CRC
// would have let each one pass. Every case writes real bytes into a real store file. Format-1 (legacy) sealed
// stores still open, are upgraded by compaction, and a header rewritten to format 1 is refused.
import Foundation
import TestSealer
import Testing

@testable import PrefsKV

/// A store file's records and log end, for writing forged bytes into it (keyless: CRC32C only).
private struct LogFile {
    var bytes: [UInt8]

    init(_ path: String) throws { bytes = try readBytes(path) }

    var logEnd: Int {
        get {
            bytes.withUnsafeBytes {
                Format.decodeLogEnd(
                    UInt64(littleEndian: $0.loadUnaligned(fromByteOffset: Format.logEndOffset, as: UInt64.self)))!
            }
        }
        set {
            withUnsafeBytes(of: Format.encodeLogEnd(newValue).littleEndian) {
                bytes.replaceSubrange(Format.logEndOffset..<Format.logEndOffset + 8, with: $0)
            }
        }
    }

    /// The verified records below the log end, in order, after the header copy.
    var records: [RecordHeader] {
        bytes.withUnsafeBytes { raw in
            var found: [RecordHeader] = []
            var offset = Format.logStart
            while offset < logEnd,
                let record = RecordHeader.verified(in: raw, at: offset, limit: logEnd, seed: seed)
            {
                if record.kind != .header { found.append(record) }
                offset += record.length
            }
            return found
        }
    }

    /// Where the checksums of the file's records start (its header's generation).
    var seed: RecordSeed { recordSeed(ofFile: bytes) }

    func recordBytes(_ record: RecordHeader) -> [UInt8] { Array(bytes[record.offset..<record.offset + record.length]) }

    /// Appends `record` (whole record bytes) at the log end and moves the log end past it, as a writer would.
    mutating func append(_ record: [UInt8]) {
        let end = logEnd
        if bytes.count < end + record.count { bytes += [UInt8](repeating: 0, count: end + record.count - bytes.count) }
        bytes.replaceSubrange(end..<end + record.count, with: record)
        logEnd = end + record.count
    }

    /// Recomputes the CRC32C of the record at `offset`, `length` bytes long.
    mutating func fixChecksum(at offset: Int, length: Int) {
        let crc = recordChecksum(bytes[offset..<offset + length - 4], inFile: bytes)
        withUnsafeBytes(of: crc.littleEndian) { bytes.replaceSubrange(offset + length - 4..<offset + length, with: $0) }
    }

    /// Appends a copy of an authentic record at the log end with the next sequence number and its checksum made
    /// valid again: a replay that a keyless CRC cannot tell from a write.
    mutating func appendReplayed(_ record: [UInt8]) {
        let end = logEnd
        let seq = records.last.map { $0.seq + 1 } ?? 1
        append(record)
        setSeq(seq, at: end)
        fixChecksum(at: end, length: record.count)
    }

    /// Rewrites the sequence number of the record at `offset`.
    mutating func setSeq(_ seq: UInt64, at offset: Int) {
        withUnsafeBytes(of: seq.littleEndian) { bytes.replaceSubrange(offset + 16..<offset + 24, with: $0) }
    }
}

/// A record built with the engine's own writer but no key, for the file whose records' checksums start with `seed`:
/// what anyone who can write the file can produce.
private func forgedRecord(
    kind: RecordKind, key: [UInt8], seq: UInt64, flags: UInt8, value: [UInt8] = [], valueType: UInt8 = 0,
    seed: RecordSeed
) -> [UInt8] {
    let authenticated = flags & RecordFlags.authenticated != 0
    let length = Format.recordLength(keyLength: key.count, valueLength: value.count, authenticated: authenticated)
    var out = [UInt8](repeating: 0, count: length)
    out.withUnsafeMutableBytes { buffer in
        key.withUnsafeBytes { k in
            _ = RecordWriter.write(
                into: buffer, at: 0, kind: kind, valueType: valueType, flags: flags, seq: seq, expiresAt: 0, key: k,
                valueLength: value.count, seed: seed
            ) { v in value.withUnsafeBytes { if !$0.isEmpty { v.copyMemory(from: $0) } } }
        }
    }
    // The writer clears the authenticated and bound flags without a key: set them again (with a made-up
    // authenticator) and make the checksum valid (it covers the flags and the authenticator).
    if authenticated || flags & RecordFlags.bound != 0 {
        out[6] |= flags & (RecordFlags.authenticated | RecordFlags.bound)
        if authenticated { for i in length - 20..<length - 4 { out[i] = 0xA5 } }
        let crc = Array(out[0..<length - 4]).withUnsafeBytes { seed.checksum($0) }
        withUnsafeBytes(of: crc.littleEndian) { out.replaceSubrange(length - 4..<length, with: $0) }
    }
    return out
}

private func openStrict(_ dir: TempDir, sealer: TestSealer = TestSealer(key: 1)) throws -> PrefsStore {
    try openStore(dir) {
        $0.sealer = sealer
        $0.recovery = .fail
    }
}

@Suite struct RecordForgeryTests {
    /// Writes `altered` over the store, then checks what each reader makes of it: `.fail` refuses it as tampered
    /// and leaves the file byte-identical; verify with the key reports tampering, without it the checksums pass;
    /// `.salvage` keeps what is authentic and reports the rest. Returns the salvaged store.
    @discardableResult
    private func expectTampered(
        _ dir: TempDir, _ altered: [UInt8], sourceLocation: SourceLocation = #_sourceLocation
    )
        throws -> PrefsStore
    {
        let path = dir.file("ui.prefs")
        try writeBytes(altered, to: path)
        expectError(.tampered, sourceLocation: sourceLocation) { try openStrict(dir) }
        #expect(try readBytes(path) == altered, sourceLocation: sourceLocation)
        let report = try PrefsStore.verify(id: "ui", directory: dir.path, sealer: TestSealer(key: 1))
        #expect(!report.isClean && report.damage.contains { $0.isTampering }, sourceLocation: sourceLocation)
        #expect(try PrefsStore.verify(id: "ui", directory: dir.path).isClean, sourceLocation: sourceLocation)
        let salvaged = try openSealed(dir)
        #expect(salvaged.lastRecovery?.damage.contains { $0.isTampering } == true, sourceLocation: sourceLocation)
        return salvaged
    }

    /// A strict sealed store with the given single-record sets, in order, and its log.
    private func threeSets(_ dir: TempDir, _ sets: [(String, String)]) throws -> LogFile {
        let store = try openStrict(dir)
        for (key, value) in sets { try store.set(value, forKey: key) }
        return try LogFile(dir.file("ui.prefs"))
    }

    private func filledStore(_ dir: TempDir) throws -> [UInt8] {
        let store = try openStrict(dir)
        try store.set("v1", forKey: "token")
        try store.set("kept", forKey: "other")
        try store.set("v2", forKey: "token")
        return try readBytes(dir.file("ui.prefs"))
    }

    @Test func aForgedDeleteIsTamperingNeverAbsence() throws {
        let dir = try TempDir("forge-delete")
        _ = try filledStore(dir)
        var file = try LogFile(dir.file("ui.prefs"))
        let tag = TestSealer(key: 1).tag(forKey: "token")
        let seq = file.records.last!.seq + 1
        // Without and with the authenticated flag (then with a made-up authenticator): both checksums are valid.
        for flags in [
            RecordFlags.commit | RecordFlags.sealed,
            RecordFlags.commit | RecordFlags.sealed | RecordFlags.authenticated,
        ] {
            var forged = file
            forged.append(forgedRecord(kind: .delete, key: tag, seq: seq, flags: flags, seed: file.seed))
            let salvaged = try expectTampered(dir, forged.bytes)
            // The forged delete was not applied: the token still reads its real value.
            #expect(try salvaged.string(forKey: "token") == "v2")
            #expect(try salvaged.string(forKey: "other") == "kept")
            file = try LogFile(dir.file("ui.prefs"))
        }
    }

    /// Format 6 binds a set record by its value's seal instead of an authenticator. A set forged without the key
    /// (flagged bound, or with a made-up authenticator, or with neither) and a real set record stripped of its bound
    /// flag (checksum fixed) are tampering: the token keeps its real value.
    @Test func aForgedOrStrippedSetIsTamperingNeverItsValue() throws {
        let dir = try TempDir("forge-set")
        _ = try filledStore(dir)
        let original = try LogFile(dir.file("ui.prefs"))
        let tag = TestSealer(key: 1).tag(forKey: "token")
        let seq = original.records.last!.seq + 1
        let sealedLength = 4 + 5 + 2 + TestSealer(key: 1).overhead  // what a seal of "token" = "v3" takes
        for flags in [
            RecordFlags.commit | RecordFlags.sealed | RecordFlags.bound,
            RecordFlags.commit | RecordFlags.sealed | RecordFlags.authenticated,
            RecordFlags.commit | RecordFlags.sealed,
        ] {
            var forged = original
            forged.append(
                forgedRecord(
                    kind: .set, key: tag, seq: seq, flags: flags, value: [UInt8](repeating: 0x5A, count: sealedLength),
                    valueType: ValueType.string.rawValue, seed: original.seed))
            #expect(try expectTampered(dir, forged.bytes).string(forKey: "token") == "v2", "flags \(flags)")
        }
        // The token's real last record, its bound flag cleared and its checksum fixed: the same bytes but for the flag.
        var stripped = original
        let last = original.records.last!
        #expect(last.kind == .set && last.isBound && !last.isAuthenticated)
        stripped.bytes[last.offset + 6] &= ~RecordFlags.bound
        stripped.fixChecksum(at: last.offset, length: last.length)
        #expect(try expectTampered(dir, stripped.bytes).string(forKey: "token") == "v1")
        // Its padding (which the seal does not cover) made nonzero, checksum fixed: not a record this store wrote.
        let valueEnd = last.offset + 32 + last.keyLength + last.valueLength
        try #require(valueEnd < last.offset + last.length - 4, "the record has padding")
        var padded = original
        padded.bytes[valueEnd] = 0x01
        padded.fixChecksum(at: last.offset, length: last.length)
        #expect(try expectTampered(dir, padded.bytes).string(forKey: "token") == "v1")
    }

    @Test func aForgedRemoveAllAndCommitAreTampering() throws {
        let dir = try TempDir("forge-clear")
        _ = try filledStore(dir)
        let original = try LogFile(dir.file("ui.prefs"))
        let seq = original.records.last!.seq + 1
        var cleared = original
        cleared.append(forgedRecord(kind: .removeAll, key: [], seq: seq, flags: RecordFlags.commit, seed: original.seed))
        #expect(try expectTampered(dir, cleared.bytes).string(forKey: "token") == "v2")
        // A transaction of the token's delete and a commit record, both forged.
        var transaction = original
        transaction.append(
            forgedRecord(
                kind: .delete, key: TestSealer(key: 1).tag(forKey: "token"), seq: seq, flags: RecordFlags.sealed,
                seed: original.seed))
        transaction.append(
            forgedRecord(
                kind: .commit, key: [], seq: seq, flags: RecordFlags.commit, value: [1, 0, 0, 0], seed: original.seed))
        #expect(try expectTampered(dir, transaction.bytes).string(forKey: "token") == "v2")
    }

    @Test func anOldRecordReplayedAtTheEndIsTamperingNotTheOldValue() throws {
        let dir = try TempDir("forge-replay")
        _ = try filledStore(dir)
        var file = try LogFile(dir.file("ui.prefs"))
        let records = file.records
        // The first record set the token to "v1": copy it to the end with the next sequence number, CRC fixed.
        file.appendReplayed(file.recordBytes(records[0]))
        let salvaged = try expectTampered(dir, file.bytes)
        #expect(try salvaged.string(forKey: "token") == "v2")
    }

    @Test func anOldRecordReplayedFromAnEarlierCopyOfTheFileIsTampering() throws {
        let dir = try TempDir("forge-old-copy")
        let store = try openStrict(dir)
        try store.set("old secret", forKey: "token")
        let earlier = try LogFile(dir.file("ui.prefs"))
        try store.set("new secret", forKey: "token")
        try store.compact()  // a new file generation: the old record's place is another record's now
        try store.set("newest", forKey: "other")
        var current = try LogFile(dir.file("ui.prefs"))
        current.appendReplayed(earlier.recordBytes(earlier.records[0]))
        let salvaged = try expectTampered(dir, current.bytes)
        #expect(try salvaged.string(forKey: "token") == "new secret")
    }

    @Test func reorderedRecordsAreTampering() throws {
        let dir = try TempDir("forge-reorder")
        var file = try threeSets(dir, [("k1", "aaaa"), ("k2", "bbbb"), ("k1", "cccc")])
        let records = file.records
        try #require(records.count == 3 && records[0].length == records[2].length)
        // Swap the first and last sets of k1, sequence numbers kept in order: only the bound offsets tell.
        var first = file.recordBytes(records[0])
        var last = file.recordBytes(records[2])
        swap(&first[16..<24], &last[16..<24])
        file.bytes.replaceSubrange(records[0].offset..<records[0].offset + first.count, with: last)
        file.bytes.replaceSubrange(records[2].offset..<records[2].offset + last.count, with: first)
        file.fixChecksum(at: records[0].offset, length: first.count)
        file.fixChecksum(at: records[2].offset, length: last.count)
        try expectTampered(dir, file.bytes)
    }

    @Test func aRecordDroppedFromTheMiddleIsTampering() throws {
        let dir = try TempDir("forge-drop")
        var file = try threeSets(dir, [("k1", "aaaa"), ("k2", "gone"), ("k3", "cccc")])
        let records = file.records
        let dropped = records[1]
        // Remove k2's record and close the gap; later sequence numbers renumbered, checksums valid, log end moved.
        let end = file.logEnd
        file.bytes.removeSubrange(dropped.offset..<dropped.offset + dropped.length)
        file.bytes += [UInt8](repeating: 0, count: dropped.length)
        file.setSeq(dropped.seq, at: dropped.offset)
        file.fixChecksum(at: dropped.offset, length: records[2].length)
        file.logEnd = end - dropped.length
        let salvaged = try expectTampered(dir, file.bytes)
        #expect(try salvaged.string(forKey: "k1") == "aaaa")
        #expect(try salvaged.string(forKey: "k2") == nil && salvaged.string(forKey: "k3") == nil)
    }

    /// A plain store keeps its keyless CRC: what it detects (damage) and what it cannot (a record rewritten with a
    /// valid checksum) are documented in FileFormat.md. It is written in the current format (4), with a header copy.
    @Test func aPlainStoreHasAKeylessChecksumAndAHeaderCopy() throws {
        let dir = try TempDir("plain-v3")
        try openStore(dir).set("v", forKey: "k")
        let bytes = try readBytes(dir.file("ui.prefs"))
        #expect(bytes[8] == UInt8(Format.version) && bytes[9] == 0)
        let file = try LogFile(dir.file("ui.prefs"))
        #expect(file.records.count == 1 && !file.records[0].isAuthenticated)
        // The header copy: a kind-5 record at 4096 whose value is the header's static part.
        #expect(bytes[4096 + 4] == 5 && Array(bytes[4096 + 32..<4096 + 160]) == Array(bytes[0..<128]))
    }
}

/// Format-1 sealed stores: written before record authentication, still read, upgraded by their next image.
@Suite struct LegacySealedStoreTests {
    /// Rewrites a sealed store of this version as format 1: header version 1, every record without its
    /// authenticator, every set record's value sealed again under `sealer` with format 1's associated data (this
    /// version binds it to its place instead), checksums recomputed (what a store written by the release before
    /// format 2 looks like, byte for byte).
    private func downgrade(_ bytes: [UInt8], sealer: TestSealer = TestSealer(key: 1)) throws -> [UInt8] {
        var file = LogFile(bytes: bytes)
        let image = bytes.withUnsafeBytes { raw in
            ImageIdentity(
                uuid: StoreUUID(
                    low: UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: Format.uuidOffset, as: UInt64.self)),
                    high: UInt64(
                        littleEndian: raw.loadUnaligned(fromByteOffset: Format.uuidOffset + 8, as: UInt64.self))),
                generation: UInt64(
                    littleEndian: raw.loadUnaligned(fromByteOffset: Format.generationOffset, as: UInt64.self)))
        }
        var log: [UInt8] = []
        for record in file.records {
            var raw = file.recordBytes(record)
            if record.isBound {
                let resealed = try raw.withUnsafeBytes { recordBytes in
                    try SealedValue.withPlaintext(
                        of: UnsafeRawBufferPointer(rebasing: recordBytes[32 + record.keyLength..<32 + record.keyLength + record.valueLength]),
                        head: UnsafeRawBufferPointer(rebasing: recordBytes[0..<32 + record.keyLength]), bound: true,
                        in: image, offset: record.offset, type: record.valueType, expiresAt: record.expiresAt,
                        sealer: sealer
                    ) { plain in
                        try SealedValue.withAssociatedData(
                            uuid: image.uuid, tag: UnsafeRawBufferPointer(rebasing: recordBytes[32..<32 + record.keyLength]),
                            type: record.valueType, expiresAt: record.expiresAt
                        ) { ad in
                            var out = [UInt8](repeating: 0, count: record.valueLength)
                            try out.withUnsafeMutableBytes { try sealer.seal(plain, associatedData: ad, into: $0) }
                            return out
                        }
                    }
                }
                raw.replaceSubrange(32 + record.keyLength..<32 + record.keyLength + record.valueLength, with: resealed)
            }
            let unauthenticated = Format.recordLength(
                keyLength: record.keyLength, valueLength: record.valueLength, authenticated: false)
            raw[6] &= ~(RecordFlags.authenticated | RecordFlags.bound)
            raw = Array(raw[0..<unauthenticated - 4])
            for i in 32 + record.keyLength + record.valueLength..<raw.count { raw[i] = 0 }
            let crc = CRC32C.checksum(raw)
            withUnsafeBytes(of: crc.littleEndian) { raw += $0 }
            log += raw
        }
        var out = Array(file.bytes[0..<Format.logStart]) + log
        out += [UInt8](repeating: 0, count: max(0, file.bytes.count - out.count))
        out[8] = 1
        let crc = CRC32C.checksum(Array(out[0..<Format.staticCRCOffset]))
        withUnsafeBytes(of: crc.littleEndian) {
            out.replaceSubrange(Format.staticCRCOffset..<Format.staticCRCOffset + 4, with: $0)
        }
        file.bytes = out
        file.logEnd = Format.logStart + log.count
        return file.bytes
    }

    @Test func aFormatOneSealedStoreOpensAndItsNextCompactionAuthenticatesIt() throws {
        let dir = try TempDir("legacy")
        do {
            let store = try openSealed(dir)
            try store.set("secret", forKey: "token")
            try store.set(42, forKey: "count")
        }
        let legacy = try downgrade(try readBytes(dir.file("ui.prefs")))
        try writeBytes(legacy, to: dir.file("ui.prefs"))
        #expect(try PrefsStore.inspect(id: "ui", directory: dir.path)?.authenticatesRecords == false)
        let store = try openSealed(dir)
        #expect(try store.string(forKey: "token") == "secret" && store.int(forKey: "count") == 42)
        try store.set("later", forKey: "token")  // appended to a format-1 log: no authenticator
        #expect(try LogFile(dir.file("ui.prefs")).records.allSatisfy { !$0.isAuthenticated })
        try store.compact()
        let upgraded = try LogFile(dir.file("ui.prefs"))
        // Every record of the new image is authenticated: its set records by their bound values (format 6).
        #expect(
            upgraded.bytes[8] == UInt8(Format.version)
                && upgraded.records.allSatisfy { $0.kind == .set ? $0.isBound && !$0.isAuthenticated : $0.isAuthenticated })
        #expect(try PrefsStore.inspect(id: "ui", directory: dir.path)?.authenticatesRecords == true)
        #expect(try store.string(forKey: "token") == "later")
        #expect(try openSealed(dir).int(forKey: "count") == 42)
        #expect(try PrefsStore.verify(id: "ui", directory: dir.path, sealer: TestSealer(key: 1)).isClean)
    }

    @Test func aHeaderRewrittenToFormatOneIsTamperedForAKeyThatNeverUsedIt() throws {
        let dir = try TempDir("downgrade")
        let strict = TestSealer(key: 1, acceptsUnauthenticatedLog: false)
        try openStore(dir) { $0.sealer = strict }.set("secret", forKey: "token")
        let downgraded = try downgrade(try readBytes(dir.file("ui.prefs")), sealer: strict)
        try writeBytes(downgraded, to: dir.file("ui.prefs"))
        // Forged records need no authenticator in a format-1 log: the key must refuse such a log outright.
        expectError(.tampered) { try openStore(dir) { $0.sealer = strict } }
        #expect(try readBytes(dir.file("ui.prefs")) == downgraded)
    }
}

extension LogFile {
    init(bytes: [UInt8]) { self.bytes = bytes }
}
