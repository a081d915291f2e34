import Foundation
import TestKit
import TestSealer
import Testing

@testable import PrefsKV

/// Issue 15 (Trust II): every intact record comes back, and no damaged file leaves an app stuck. Stores of 300
/// keys, built through single sets, one transaction or an import (one transaction that starts with removeAll),
/// plain and sealed, damaged at every page and page boundary; what survives is predicted from the intact file's
/// records and compared byte for byte.
@Suite struct HeaderCopyTests {
    enum Build: String, CaseIterable, CustomStringConvertible {
        case sets, transaction, `import`
        var description: String { rawValue }
    }

    /// One record of the intact file: where it is, and which key it sets (nil for commit and removeAll records).
    struct Record {
        var range: Range<Int>
        var key: String?
        var endsGroup: Bool
    }

    /// A store file and what its records are.
    struct Store {
        let dir: TempDir
        let sealer: TestSealer?
        var bytes: [UInt8] = []
        var values: [String: String] = [:]
        var records: [Record] = []
        var logEnd = 0
        var path: String { dir.file("ui.prefs") }

        init(_ build: Build, sealed: Bool) throws {
            dir = try TempDir("header-copy", memory: true)
            sealer = sealed ? TestSealer(key: 7) : nil
            for i in 0..<300 { values[String(format: "key-%03d", i)] = "value \(i) " + String(repeating: "v", count: i % 40) }
            let sorted = values.sorted { $0.key < $1.key }
            let store = try openStore(dir) {
                $0.sealer = sealer
                $0.autoCompactionThreshold = nil
            }
            switch build {
            case .sets:
                for (key, value) in sorted { try store.set(value, forKey: key) }
            case .transaction:
                try store.write { tx in for (key, value) in sorted { try tx.set(value, forKey: key) } }
            case .import:
                let source = try openStore(dir, id: "source")
                for (key, value) in sorted { try source.set(value, forKey: key) }
                try store.importJSON(try source.exportJSON())
            }
            bytes = try readBytes(path)
            // The intact file's records, walked from the log start (the first is the header copy).
            let tags = Dictionary(uniqueKeysWithValues: values.keys.map { (hex(sealer?.tag(forKey: $0) ?? Array($0.utf8)), $0) })
            bytes.withUnsafeBytes { raw in
                var offset = 4096
                let seed = RecordSeed(headerPage: raw)
                while let record = RecordHeader.verified(in: raw, at: offset, limit: raw.count, seed: seed) {
                    if record.kind != .header {
                        records.append(
                            Record(
                                range: offset..<offset + record.length,
                                key: record.kind == .set ? tags[hex(record.key(in: raw))] : nil,
                                endsGroup: record.isCommit))
                    }
                    offset += record.length
                }
                logEnd = offset
            }
            #expect(records.compactMap(\.key).count == 300)
        }

        /// What reads back after `changed` bytes (a byte index set; past the end of `damaged` counts as changed):
        /// a record whose bytes changed is lost; a group (single set, or transaction) whose last record is lost
        /// goes whole.
        func expected(changed: (Int) -> Bool) -> [String: String] {
            var result: [String: String] = [:]
            var group: [Record] = []
            for record in records {
                group.append(record)
                guard record.endsGroup else { continue }
                if !record.range.contains(where: changed) {
                    for member in group where !member.range.contains(where: changed) {
                        if let key = member.key { result[key] = values[key] }
                    }
                }
                group = []
            }
            return result
        }

        /// Expects an open with the store's sealer to throw `code` under either recovery policy.
        func expectEveryOpenRefused(_ code: PrefsError.Code, sourceLocation: SourceLocation = #_sourceLocation) {
            for policy in [PrefsStore.RecoveryPolicy.salvage, .fail] {
                expectError(code, sourceLocation: sourceLocation) {
                    try openStore(dir) {
                        $0.sealer = sealer
                        $0.recovery = policy
                    }
                }
            }
        }

        /// Recomputes the CRC32C of the header-copy record at 4096 after its bytes were changed on purpose.
        static func fixCopyChecksum(_ bytes: inout [UInt8], sealed: Bool) {
            let end = firstRecordOffset(sealed: sealed)
            // Its checksum starts with the generation the copy holds (FileFormat.md, "Records").
            let crc = Array(bytes[4096..<end - 4]).withUnsafeBytes { record in
                RecordSeed(headerPage: UnsafeRawBufferPointer(rebasing: record[32...])).checksum(record)
            }
            withUnsafeBytes(of: crc.littleEndian) { bytes.replaceSubrange(end - 4..<end, with: $0) }
        }

        /// Every value the store holds (of the keys it was built with: it must hold no other).
        func read(_ store: PrefsStore) throws -> [String: String] {
            var found: [String: String] = [:]
            for key in values.keys { found[key] = try store.string(forKey: key) }
            #expect(try store.count == found.count, "the store holds keys it was never given")
            return found
        }
    }

    /// A damage: the damaged bytes.
    struct Damage: CustomStringConvertible {
        var description: String
        var bytes: [UInt8]
    }

    /// Every page zeroed, one bit flipped in the header page and in the header copy, the file truncated at every
    /// page boundary and inside the header page, and one member of a committed transaction flipped.
    static func damages(of store: Store) -> [Damage] {
        let original = store.bytes
        let pages = (store.logEnd + 4095) / 4096
        var damages: [Damage] = []
        for page in 0..<pages {
            var b = original
            for i in page * 4096..<min((page + 1) * 4096, b.count) { b[i] = 0 }
            damages.append(Damage(description: "page \(page) zeroed", bytes: b))
        }
        for (at, name) in [(20, "the header page's UUID"), (8, "the header page's version"), (4096 + 60, "the header copy")] {
            var b = original
            b[at] ^= 0x04
            damages.append(Damage(description: "a bit of \(name) flipped", bytes: b))
        }
        for length in [2048] + (1...pages).map({ $0 * 4096 }) where length < store.logEnd {
            damages.append(Damage(description: "truncated to \(length) bytes", bytes: Array(original[0..<length])))
        }
        let member = store.records[store.records.count / 2]
        var b = original
        b[member.range.lowerBound + 40] ^= 0x10
        damages.append(Damage(description: "a bit of record \(store.records.count / 2) flipped", bytes: b))
        return damages
    }

    @Test(arguments: Build.allCases, [false, true])
    func everyIntactRecordComesBackAfterAnyOneDamage(build: Build, sealed: Bool) throws {
        let store = try Store(build, sealed: sealed)
        for damage in Self.damages(of: store) {
            let context = "\(build), \(sealed ? "sealed" : "plain"): \(damage)"
            for name in store.dir.files where name != "ui.prefs.lock" && !name.hasPrefix("source") {
                try FileManager.default.removeItem(atPath: store.dir.file(name))
            }
            try writeBytes(damage.bytes, to: store.path)
            let changed = { (i: Int) in i >= damage.bytes.count || damage.bytes[i] != store.bytes[i] }
            let headerGone = damage.bytes.count < 4096 || (0..<128).contains(where: changed)
            let copyGone = (4096..<firstRecordOffset(sealed: sealed)).contains(where: changed)

            // `.fail` never modifies the file, whatever it finds.
            do {
                _ = try openStore(store.dir) {
                    $0.sealer = store.sealer
                    $0.recovery = .fail
                }
                Issue.record("\(context): a damaged store opened under .fail")
            } catch let error as PrefsError {
                #expect([.corrupted, .notAStore].contains(error.code), "\(context): \(error)")
            }
            #expect(try readBytes(store.path) == damage.bytes, "\(context): a refused open changed the file")

            if headerGone && copyGone {
                // No copy of the header verifies: the open refuses (file byte-identical); repair rebuilds.
                #expect(throws: PrefsError.self, "\(context)") { try openStore(store.dir) { $0.sealer = store.sealer } }
                #expect(try readBytes(store.path) == damage.bytes, "\(context): a refused open changed the file")
                var configuration = PrefsStore.Configuration()
                configuration.sealer = store.sealer
                configuration.logger.logLevel = .critical
                let report = try #require(
                    try PrefsStore.repair(id: "ui", directory: store.dir.path, configuration: configuration))
                #expect(try readBytes(try #require(report.quarantinePath)) == damage.bytes, "\(context)")
                let repaired = try openStore(store.dir) { $0.sealer = store.sealer }
                #expect(try store.read(repaired) == store.expected(changed: changed), "\(context)")
                continue
            }
            // Salvaged: exactly the records the damage did not touch, the original kept byte for byte.
            let salvaged = try openStore(store.dir) { $0.sealer = store.sealer }
            let report = try #require(salvaged.lastRecovery, "\(context): no recovery")
            #expect(try readBytes(try #require(report.quarantinePath)) == damage.bytes, "\(context)")
            #expect(fileMode(try #require(report.quarantinePath)) == 0o400)
            let want = store.expected(changed: changed)
            #expect(try store.read(salvaged) == want, "\(context): \(report)")
            try salvaged.set("after", forKey: "zz")
            #expect(try openStore(store.dir) { $0.sealer = store.sealer }.lastRecovery == nil, "\(context)")
        }
    }

    /// Repair always ends in a store that opens. With every header copy gone, a plain store is rebuilt from the
    /// records of its body that verify their checksums; a sealed one from the records that authenticate with the
    /// key under the store identity still legible in a damaged copy; with no identity legible, or the wrong key,
    /// it keeps nothing and says so. The original stays beside it, byte for byte, mode 0400.
    @Test(arguments: [false, true])
    func repairRebuildsAStoreWhoseEveryHeaderCopyIsGone(sealed: Bool) throws {
        let store = try Store(.sets, sealed: sealed)
        // The header page zeroed, and the copy's checksum broken in its key check (its identity legible).
        var damaged = store.bytes
        for i in 0..<4096 { damaged[i] = 0 }
        damaged[4096 + 32 + 60] ^= 0x01
        var configuration = PrefsStore.Configuration()
        configuration.sealer = store.sealer
        configuration.logger.logLevel = .critical

        func reset(_ bytes: [UInt8]) throws {
            for name in store.dir.files where name != "ui.prefs.lock" && !name.hasPrefix("source") {
                try FileManager.default.removeItem(atPath: store.dir.file(name))
            }
            try writeBytes(bytes, to: store.path)
        }

        try reset(damaged)
        // Open refuses, under either policy, and leaves the file byte-identical.
        store.expectEveryOpenRefused(.notAStore)
        #expect(try readBytes(store.path) == damaged)
        if sealed {
            // Without the key nothing is rebuilt (and nothing written).
            expectError(.encrypted) { try PrefsStore.repair(id: "ui", directory: store.dir.path) }
            #expect(try readBytes(store.path) == damaged && !store.dir.files.contains { $0.contains(".corrupt-") })
        }
        let report = try #require(
            try PrefsStore.repair(id: "ui", directory: store.dir.path, configuration: configuration))
        #expect(report.recordsKept == 300 && report.recordsLost == 0, "\(report)")
        let quarantine = try #require(report.quarantinePath)
        #expect(try readBytes(quarantine) == damaged && fileMode(quarantine) == 0o400)
        let repaired = try openStore(store.dir) { $0.sealer = store.sealer }
        #expect(repaired.lastRecovery == nil)
        #expect(try store.read(repaired) == store.values)
        #expect(try PrefsStore.repair(id: "ui", directory: store.dir.path, configuration: configuration) == nil)

        // Both header pages zeroed: a plain store keeps every record after them. A sealed one has no identity left
        // to authenticate its records with: a wrong key could not be told from that, so nothing is rebuilt and the
        // file stays byte-identical.
        var zeroed = store.bytes
        for i in 0..<8192 { zeroed[i] = 0 }
        try reset(zeroed)
        if sealed {
            expectError(.corrupted) {
                try PrefsStore.repair(id: "ui", directory: store.dir.path, configuration: configuration)
            }
            #expect(try readBytes(store.path) == zeroed && !store.dir.files.contains { $0.contains(".corrupt-") })
        } else {
            let second = try #require(
                try PrefsStore.repair(id: "ui", directory: store.dir.path, configuration: configuration))
            #expect(try readBytes(try #require(second.quarantinePath)) == zeroed)
            let rebuilt = try openStore(store.dir)
            let want = store.expected { $0 < 8192 }
            #expect(try store.read(rebuilt) == want)
            #expect(second.recordsKept == want.count && want.count > 200)
            try rebuilt.set("after", forKey: "zz")
            // The same file opened with a sealer: its records are not sealed; nothing is written.
            try reset(zeroed)
            configuration.sealer = TestSealer(key: 7)
            expectError(.notEncrypted) {
                try PrefsStore.repair(id: "ui", directory: store.dir.path, configuration: configuration)
            }
            #expect(try readBytes(store.path) == zeroed)
        }

        // The wrong key, its key check still legible in the damaged copy: refused, never an empty store under it.
        if sealed {
            try reset(damaged)
            var wrong = configuration
            wrong.sealer = TestSealer(key: 8)
            expectError(.wrongKey) { try PrefsStore.repair(id: "ui", directory: store.dir.path, configuration: wrong) }
            #expect(try readBytes(store.path) == damaged && !store.dir.files.contains { $0.contains(".corrupt-") })
        }
    }

    /// A sealed store's header copy is trusted only when it authenticates: a page zeroed and a copy forged
    /// without the key (another identity, with a valid checksum) is tampering, and nothing is written; the right
    /// copy with the wrong key is `wrongKey`.
    @Test func aForgedHeaderCopyIsTamperingAndAWrongKeyIsWrongKey() throws {
        let store = try Store(.sets, sealed: true)
        var forged = store.bytes
        for i in 0..<4096 { forged[i] = 0 }
        let copy = 4096 + 32  // the copy's value: the header's static part
        forged[copy + Format.uuidOffset] ^= 0x01  // another store UUID in the copy...
        let inner = CRC32C.checksum(Array(forged[copy..<copy + Format.staticCRCOffset]))
        withUnsafeBytes(of: inner.littleEndian) {
            forged.replaceSubrange(copy + Format.staticCRCOffset..<copy + Format.staticCRCOffset + 4, with: $0)
        }
        Store.fixCopyChecksum(&forged, sealed: true)  // ...with a valid checksum
        try writeBytes(forged, to: store.path)
        store.expectEveryOpenRefused(.tampered)
        #expect(try readBytes(store.path) == forged)

        var zeroedPage = store.bytes
        for i in 0..<4096 { zeroedPage[i] = 0 }
        try writeBytes(zeroedPage, to: store.path)
        expectError(.wrongKey) { try openStore(store.dir) { $0.sealer = TestSealer(key: 8) } }
        #expect(try readBytes(store.path) == zeroedPage)
    }

    /// A header page naming a newer version, whose copy names it too, is a newer format: refused, never rebuilt,
    /// even by repair or `openOrLog`.
    /// Found by `make torture` (seed 15081981191036258957, round 4680): a plain store whose header copies were both
    /// hit, and one of whose records had its sealed flag flipped by the same damage, was refused by repair as a
    /// sealed store ("rebuilding it needs its sealer"), so it could never be repaired. Its body is plain by all its
    /// other records: it is rebuilt without a key, and the flipped record (whose checksum no longer verifies) is the
    /// one record lost.
    @Test func oneRecordWhoseSealedFlagFlippedDoesNotMakeAPlainStoreNeedAKey() throws {
        let store = try Store(.sets, sealed: false)
        var damaged = store.bytes
        for i in 0..<4096 { damaged[i] = 0 }
        damaged[4096 + 32 + 60] ^= 0x01
        let first = firstRecordOffset(sealed: false)
        #expect(damaged[first + 4] == 1 && damaged[first + 6] & RecordFlags.sealed == 0, "a plain set record")
        damaged[first + 6] ^= RecordFlags.sealed
        for name in store.dir.files where name != "ui.prefs.lock" {
            try FileManager.default.removeItem(atPath: store.dir.file(name))
        }
        try writeBytes(damaged, to: store.path)
        store.expectEveryOpenRefused(.notAStore)
        var configuration = PrefsStore.Configuration()
        configuration.logger.logLevel = .critical
        let report = try #require(
            try PrefsStore.repair(id: "ui", directory: store.dir.path, configuration: configuration))
        #expect(report.recordsKept == 299 && report.recordsLost >= 1, "\(report)")
        #expect(try readBytes(try #require(report.quarantinePath)) == damaged)
        let repaired = try openStore(store.dir)
        #expect(repaired.lastRecovery == nil)
        #expect(try repaired.count == 299)
        // With a sealer, the same body is plain: nothing is rebuilt under the key, and the file is left as it was.
        try writeBytes(damaged, to: store.path)
        for name in store.dir.files where name.contains(".corrupt-") {
            try FileManager.default.removeItem(atPath: store.dir.file(name))
        }
        configuration.sealer = TestSealer(key: 1)
        expectError(.notEncrypted) {
            try PrefsStore.repair(id: "ui", directory: store.dir.path, configuration: configuration)
        }
        #expect(try readBytes(store.path) == damaged)
    }

    @Test func aNewerFormatIsNeverRebuilt() throws {
        let store = try Store(.sets, sealed: false)
        var newer = store.bytes
        for start in [0, 4096 + 32] {
            newer[start + Format.versionOffset] = UInt8(Format.version + 1)
            newer[start + Format.staticCRCOffset] ^= 0xFF  // a layout this library cannot check
        }
        Store.fixCopyChecksum(&newer, sealed: false)
        try writeBytes(newer, to: store.path)
        expectError(.unsupportedVersion) { try openStore(store.dir) }
        expectError(.unsupportedVersion) { try PrefsStore.repair(id: "ui", directory: store.dir.path) }
        #expect(PrefsStore.openOrLog(id: "ui", directory: store.dir.path) == nil)
        #expect(try readBytes(store.path) == newer && !store.dir.files.contains { $0.contains(".corrupt-") })
    }

    /// A file truncated inside its header page holds no record: repair moves it aside and starts an empty store
    /// (0 kept); open refuses it and leaves it byte-identical.
    @Test func aFileTruncatedInsideItsHeaderIsRepairedIntoAnEmptyStore() throws {
        let store = try Store(.sets, sealed: false)
        let truncated = Array(store.bytes[0..<1000])
        try writeBytes(truncated, to: store.path)
        expectError(.corrupted) { try openStore(store.dir) }
        #expect(try readBytes(store.path) == truncated)
        let report = try #require(try PrefsStore.repair(id: "ui", directory: store.dir.path))
        #expect(report.recordsKept == 0)
        #expect(try readBytes(try #require(report.quarantinePath)) == truncated)
        let repaired = try openStore(store.dir)
        #expect(try repaired.count == 0)
        try repaired.set("x", forKey: "k")
        #expect(try openStore(store.dir).string(forKey: "k") == "x")
    }
}
