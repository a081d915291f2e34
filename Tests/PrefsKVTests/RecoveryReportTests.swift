import Foundation
import TestSupport
import Testing

@testable import PrefsKV

/// Issue 40, point 8: a recovery report names a key as lost only when its value is gone. Each test writes a store,
/// flips one bit in the commit record of a transaction (its members verify, and are dropped with it), opens the
/// damaged file and checks the report against what the store holds after.
@Suite struct RecoveryReportTests {
    /// The offsets of a store file's commit records (kind 4), in file order.
    static func commitOffsets(_ bytes: [UInt8]) -> [Int] {
        BaseImageTests.recordOffsets(bytes).filter { bytes[$0 + 4] == 4 }
    }

    /// Flips a bit in the count of the last commit record of the file at `path` that lies before `before`
    /// (the bytes the transaction to drop ended at), and returns the damaged bytes.
    static func dropTransaction(endingBefore before: Int, in path: String) throws -> [UInt8] {
        var bytes = try readBytes(path)
        let commit = try #require(commitOffsets(bytes).last { $0 < before })
        bytes[commit + 32] ^= 0x01
        try writeBytes(bytes, to: path)
        return bytes
    }

    /// Where the log ends now (the next record's offset).
    static func logEnd(_ store: PrefsStore) throws -> Int { firstRecordOffset() + Int(try store.stats().logBytes) }

    /// Opens the damaged store, logging to `capture`, and returns its recovery report.
    static func recover(_ dir: TempDir, _ capture: LogCapture) throws -> (PrefsStore, PrefsRecoveryReport) {
        let store = try openStore(dir) { $0.logger = capture.logger }
        return (store, try #require(store.lastRecovery))
    }

    /// The case the issue found: a transaction's write of `theme` dropped, a later write of `theme` kept. The theme
    /// holds its newest value, so it is not lost (the report said `lost ... (keys: theme, accent)` before).
    @Test func aDroppedWriteALaterWriteReplacedCostsNothing() throws {
        let dir = try TempDir("report-superseded", memory: true)
        var end = 0
        do {
            let store = try openStore(dir)
            try store.write { tx in
                try tx.set("dark", forKey: "theme")
                try tx.set("blue", forKey: "accent")
            }
            end = try Self.logEnd(store)
            try store.set("light", forKey: "theme")
        }
        _ = try Self.dropTransaction(endingBefore: end, in: dir.file("ui.prefs"))
        let capture = LogCapture()
        let (store, report) = try Self.recover(dir, capture)
        #expect(try store.string(forKey: "theme") == "light")
        #expect(try store.string(forKey: "accent") == nil)
        #expect(report.lostKeys == ["accent"], "\(report)")
        #expect(report.revertedKeys == [], "\(report)")
        #expect(report.damage.flatMap(\.keys).sorted() == ["accent", "theme"], "the damage still names what it held")
        let line = try #require(capture.errors.first)
        #expect(line.contains("(keys: accent; replaced by a later write: theme)"), "\(line)")
        #expect(!line.contains("keys: theme") && !line.contains("keys: accent, theme"), "\(line)")
    }

    /// A dropped newest write whose key had an older value: the key kept that value, and is reverted, not lost.
    @Test func aDroppedNewestWriteLeavesTheOlderValueAndSaysSo() throws {
        let dir = try TempDir("report-reverted", memory: true)
        var end = 0
        do {
            let store = try openStore(dir)
            try store.set("blue", forKey: "theme")
            try store.write { tx in
                try tx.set("dark", forKey: "theme")
                try tx.set(2, forKey: "count")
            }
            end = try Self.logEnd(store)
            try store.set(3, forKey: "other")
        }
        _ = try Self.dropTransaction(endingBefore: end, in: dir.file("ui.prefs"))
        let capture = LogCapture()
        let (store, report) = try Self.recover(dir, capture)
        #expect(try store.string(forKey: "theme") == "blue")
        #expect(try store.int(forKey: "count") == nil)
        #expect(try store.int(forKey: "other") == 3)
        #expect(report.lostKeys == ["count"], "\(report)")
        #expect(report.revertedKeys == ["theme"], "\(report)")
        #expect(
            capture.errors.first?.contains("(keys: count; reverted to an older value: theme)") == true,
            "\(capture.errors)")
    }

    /// A dropped removal: the key is back with its older value (reverted); a dropped removal of a key that had none
    /// costs nothing.
    @Test func aDroppedRemovalBringsTheOlderValueBack() throws {
        let dir = try TempDir("report-delete", memory: true)
        var end = 0
        do {
            let store = try openStore(dir)
            try store.set("blue", forKey: "theme")
            try store.write { tx in
                tx.removeValue(forKey: "theme")
                tx.removeValue(forKey: "never-set")
                try tx.set(4, forKey: "count")
            }
            end = try Self.logEnd(store)
            try store.set(5, forKey: "other")
        }
        _ = try Self.dropTransaction(endingBefore: end, in: dir.file("ui.prefs"))
        let (store, report) = try Self.recover(dir, LogCapture())
        #expect(try store.string(forKey: "theme") == "blue")
        #expect(report.lostKeys == ["count"], "\(report)")
        #expect(report.revertedKeys == ["theme"], "\(report)")
    }

    /// A dropped `removeAll`: every key it would have removed and nothing wrote again after it kept its value
    /// (reverted); a key written after it holds its newest value (not named).
    @Test func aDroppedRemoveAllRevertsTheKeysItWouldHaveRemoved() throws {
        let dir = try TempDir("report-clear", memory: true)
        var end = 0
        do {
            let store = try openStore(dir)
            try store.set("blue", forKey: "theme")
            try store.set(1, forKey: "width")
            try store.write { tx in
                tx.removeAll()
                try tx.set(6, forKey: "fresh")
            }
            end = try Self.logEnd(store)
            try store.set(7, forKey: "width")
        }
        _ = try Self.dropTransaction(endingBefore: end, in: dir.file("ui.prefs"))
        let (store, report) = try Self.recover(dir, LogCapture())
        #expect(try store.string(forKey: "theme") == "blue")
        #expect(try store.int(forKey: "width") == 7)
        #expect(try store.int(forKey: "fresh") == nil)
        #expect(report.lostKeys == ["fresh"], "\(report)")
        #expect(report.revertedKeys == ["theme"], "\(report)")
    }

    /// The same names under `.fail` (the refusal's message) and in `openOrLog`'s log line; `PersistedState` of a
    /// key whose dropped write was replaced hydrates as stored, not lost.
    @Test func theRefusalAndTheStatesSayTheSame() throws {
        let dir = try TempDir("report-fail", memory: true)
        var end = 0
        do {
            let store = try openStore(dir)
            try store.write { tx in
                try tx.set("dark", forKey: "theme")
                try tx.set("blue", forKey: "accent")
            }
            end = try Self.logEnd(store)
            try store.set("light", forKey: "theme")
        }
        let damaged = try Self.dropTransaction(endingBefore: end, in: dir.file("ui.prefs"))
        let error = expectError(.corrupted) { try openStore(dir) { $0.recovery = .fail } }
        #expect(
            error?.message.contains("(keys: accent; replaced by a later write: theme)") == true,
            "\(String(describing: error))")
        #expect(try readBytes(dir.file("ui.prefs")) == damaged)

        let capture = LogCapture()
        var configuration = PrefsStore.Configuration()
        configuration.logger = capture.logger
        let store = try #require(PrefsStore.openOrLog(id: "ui", directory: dir.path, configuration: configuration))
        #expect(capture.errors.first?.contains("(keys: accent; replaced by a later write: theme)") == true)
        #expect(store.lastRecovery?.lostKeys == ["accent"])
    }

    /// A key whose only older value has expired reads absent: lost, not reverted (found in review).
    @Test func anOlderValueThatExpiredIsNoValue() throws {
        let dir = try TempDir("report-expired", memory: true)
        var end = 0
        do {
            let store = try openStore(dir)
            try store.set("blue", forKey: "theme", expiresAfter: .nanoseconds(1))
            try store.write { tx in
                try tx.set("dark", forKey: "theme")
                try tx.set(1, forKey: "count")
            }
            end = try Self.logEnd(store)
            try store.set(2, forKey: "other")
        }
        _ = try Self.dropTransaction(endingBefore: end, in: dir.file("ui.prefs"))
        let (store, report) = try Self.recover(dir, LogCapture())
        #expect(try store.string(forKey: "theme") == nil)
        #expect(report.lostKeys == ["theme", "count"], "\(report)")
        #expect(report.revertedKeys == [], "\(report)")
    }

    /// Two dropped `removeAll`s with a committed write between them: the key written between would have been
    /// removed by the second, so it is reverted; a key whose dropped set a later dropped `removeAll` would have
    /// removed anyway costs nothing (found in review).
    @Test func theLastDroppedRemoveAllDecides() throws {
        let dir = try TempDir("report-clears", memory: true)
        var ends: [Int] = []
        do {
            let store = try openStore(dir)
            try store.set("blue", forKey: "theme")
            try store.write { tx in
                tx.removeAll()
                try tx.set(1, forKey: "first")
            }
            ends.append(try Self.logEnd(store))
            try store.set(2, forKey: "between")
            try store.write { tx in
                try tx.set(3, forKey: "doomed")
                try tx.set(4, forKey: "also")
            }
            ends.append(try Self.logEnd(store))
            try store.write { tx in
                tx.removeAll()
                try tx.set(5, forKey: "second")
            }
            ends.append(try Self.logEnd(store))
            try store.set(6, forKey: "after")
        }
        var bytes = try readBytes(dir.file("ui.prefs"))
        let commits = Self.commitOffsets(bytes)
        for end in [ends[0], ends[2]] {
            let commit = try #require(commits.last { $0 < end })
            bytes[commit + 32] ^= 0x01
        }
        try writeBytes(bytes, to: dir.file("ui.prefs"))
        let (store, report) = try Self.recover(dir, LogCapture())
        #expect(try store.int(forKey: "between") == 2 && store.string(forKey: "theme") == "blue")
        #expect(try store.int(forKey: "doomed") == 3, "a committed transaction")
        #expect(try store.int(forKey: "first") == nil && store.int(forKey: "after") == 6)
        #expect(report.lostKeys == ["second"], "first: the second removeAll would have removed it: \(report)")
        #expect(report.revertedKeys == ["also", "between", "doomed", "theme"], "\(report)")
    }

    /// A handle that catches up with a file another handle replaced, under `.fail`, names what the new file's
    /// damage costs by that file, not by the one it had (found in review).
    @Test func aRefusalWhileCatchingUpWeighsTheNewFile() throws {
        let dir = try TempDir("report-catch-up", memory: true)
        let reader = try openStore(dir) { $0.recovery = .fail }
        #expect(try reader.string(forKey: "theme") == nil)
        var end = 0
        do {
            let writer = try openStore(dir)
            try writer.set("old", forKey: "seed")
            try writer.compact()
            try writer.write { tx in
                try tx.set("dark", forKey: "theme")
                try tx.set("blue", forKey: "accent")
            }
            end = try Self.logEnd(writer)
            try writer.set("light", forKey: "theme")
        }
        _ = try Self.dropTransaction(endingBefore: end, in: dir.file("ui.prefs"))
        let error = expectError(.corrupted) { try reader.string(forKey: "theme") }
        #expect(
            error?.message.contains("(keys: accent; replaced by a later write: theme)") == true,
            "\(String(describing: error))")
    }

    /// A file cut off inside a transaction's members (its commit gone with the end of the file): the range the
    /// scan found and the one past the end of the file are one damage, which still names what the members cost
    /// (found by `make torture`: the merge dropped the members' writes, and the report named every one lost).
    @Test func aFileCutInsideATransactionNamesWhatItsMembersCost() throws {
        let dir = try TempDir("report-cut", memory: true)
        var end = 0
        do {
            let store = try openStore(dir)
            try store.set("blue", forKey: "theme")
            try store.write { tx in
                try tx.set("dark", forKey: "theme")
                try tx.set(1, forKey: "count")
            }
            end = try Self.logEnd(store)
        }
        var bytes = try readBytes(dir.file("ui.prefs"))
        let commit = try #require(Self.commitOffsets(bytes).last { $0 < end })
        bytes.removeLast(bytes.count - commit)
        try writeBytes(bytes, to: dir.file("ui.prefs"))
        let (store, report) = try Self.recover(dir, LogCapture())
        #expect(report.damage.count == 1 && report.damage.first?.reason == "the file ends before the log end")
        #expect(try store.string(forKey: "theme") == "blue" && store.int(forKey: "count") == nil)
        #expect(report.lostKeys == ["count"], "\(report)")
        #expect(report.revertedKeys == ["theme"], "\(report)")
    }
}
