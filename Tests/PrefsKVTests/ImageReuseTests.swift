// Issue 18, the blob rewrite: a buffered store's automatic compactions write each image into the file the one before
// the last used (FileProtocols.md, "Compaction"), so that a run of them between two syncs creates, faults in and frees
// no file. Every case runs on real files and checks what the names hold and what reads back.
import Foundation
import Glibc
import TestKit
import TestSupport
import Synchronization
import TestSealer
import Testing

@testable import PrefsKV

@Suite struct ImageReuseTests {
    static func inode(_ path: String) -> UInt64? {
        var st = stat()
        return lstat(path, &st) == 0 ? UInt64(st.st_ino) : nil
    }

    /// Rewrites key "blob" (1,500 bytes, each byte the low byte of the counter `n`) until the data file changes: one
    /// automatic compaction.
    static func rewriteUntilCompacted(_ store: PrefsStore, _ dir: TempDir, _ n: inout Int) throws {
        let before = inode(dir.file("ui.prefs"))
        while inode(dir.file("ui.prefs")) == before {
            n += 1
            try store.set(Data(repeating: UInt8(truncatingIfNeeded: n), count: 1_500), forKey: "blob")
        }
    }

    /// Rewrites a 1.5 KB value among 20 keys until 30 automatic compactions ran, with no sync(): after the first
    /// two, the data file and `ui.prefs.tmp` trade places at each compaction (two files in all, besides the base),
    /// every value reads back through this handle and a second one, and sync() leaves the data file alone.
    @Test func automaticCompactionsOfABufferedStoreAlternateBetweenTwoFiles() throws {
        let dir = try TempDir("reuse")
        let store = try openStore(dir) { $0.autoCompactionThreshold = 16 * 1024 }
        let reader = try openStore(dir) { $0.autoCompactionThreshold = 16 * 1024 }
        for i in 0..<20 { try store.set("value \(i)", forKey: "k\(i)") }
        try store.sync()
        var dataFiles: [UInt64] = []
        var n = 0
        while dataFiles.count < 30 {
            n += 1
            let blob = Data(repeating: UInt8(truncatingIfNeeded: n), count: 1_500)
            try store.set(blob, forKey: "blob")
            let data = try #require(Self.inode(dir.file("ui.prefs")))
            if data != dataFiles.last { dataFiles.append(data) }
            #expect(try reader.data(forKey: "blob") == blob)
        }
        let base = try #require(Self.inode(dir.file("ui.prefs.prev")))
        // The first image is a new file (the base keeps its name), the second too (the first is kept as the
        // spare); from the third on, each is written into the file the one before the last used.
        let reused = Array(dataFiles.dropFirst(2))
        #expect(Set(reused).count == 2, "\(dataFiles)")
        #expect(!reused.contains(base))
        for (i, file) in reused.enumerated() where i >= 2 { #expect(file == reused[i - 2]) }
        let spare = try #require(Self.inode(dir.file("ui.prefs.tmp")))
        #expect(Set([spare, dataFiles.last!]) == Set(reused.suffix(2)))
        for i in 0..<20 {
            #expect(try store.string(forKey: "k\(i)") == "value \(i)")
            #expect(try reader.string(forKey: "k\(i)") == "value \(i)")
        }
        // sync() makes the current image durable and removes the base and the spare.
        try store.sync()
        #expect(dir.files.sorted() == ["ui.prefs", "ui.prefs.lock"])
        let reopened = try openStore(dir)
        #expect(reopened.lastRecovery == nil)
        #expect(try reopened.data(forKey: "blob") == Data(repeating: UInt8(truncatingIfNeeded: n), count: 1_500))
    }

    /// A store whose live data is above 3/8 of the auto-compaction threshold (a 16 KiB threshold), plain and sealed,
    /// rewritten until 24 automatic compactions ran: each image has room beyond its next trigger (twice the live data
    /// and the index record), so no write doubles the file before a compaction, and the compactions alternate between
    /// two files of one size, as a small store's do. `indexed`: 280 keys, of which 10 small ones are rewritten, so
    /// that index records (every 560 records) are written between compactions and count as live for the trigger;
    /// otherwise 24 values of 600 bytes rewritten in turn. Before the room, the write reaching the trigger doubled
    /// the file, the replaced file was too large to be the spare, and every compaction made a new file. Every file
    /// that was the data file is held open, so that no inode number is used again by a later file.
    @Test(arguments: [nil, 1] as [UInt64?], [false, true])
    func compactionsAboveThreeEighthsOfTheThresholdAlternateBetweenTwoFiles(sealerKey: UInt64?, indexed: Bool) throws {
        let dir = try TempDir("reuse-large")
        let configure = { (configuration: inout PrefsStore.Configuration) in
            configuration.autoCompactionThreshold = 16 * 1024
            configuration.sealer = sealerKey.map { TestSealer(key: $0) }
        }
        let store = try openStore(dir, configure)
        let value = { (n: Int, length: Int) in
            String(repeating: String(UnicodeScalar(UInt8(97 + n % 26))), count: length)
        }
        let (keys, rewritten, length) = indexed ? (280, 10, 150) : (24, 24, 600)
        var written: [String: String] = [:]
        for i in 0..<keys {
            written["k\(i)"] = value(i, i < rewritten ? 8 : length)
            try store.set(written["k\(i)"]!, forKey: "k\(i)")
        }
        try store.sync()
        var held: [Int32] = []  // each file that was the data file, open
        defer { for fd in held { close(fd) } }
        var dataFiles: [UInt64] = []
        var n = keys
        while dataFiles.count < 25 {
            let key = "k\(n % rewritten)"
            written[key] = value(n, indexed ? 8 : length)
            try store.set(written[key]!, forKey: key)
            n += 1
            try #require(n < keys + 100_000, "no automatic compaction in 100,000 writes: \(dataFiles.count)")
            let data = try #require(Self.inode(dir.file("ui.prefs")))
            if data != dataFiles.last, !dataFiles.contains(data) {
                held.append(open(dir.file("ui.prefs"), O_RDONLY))
            }
            if data != dataFiles.last { dataFiles.append(data) }
        }
        // The first image is a new file (the original keeps its name as the base), the second too (the first is
        // kept as the spare); from the third on, each is written into the file the one before the last used.
        let reused = Array(dataFiles.dropFirst(3))
        #expect(Set(reused).count == 2, "\(dataFiles)")
        let sizes = held.dropFirst().map { fd in
            var st = stat()
            return fstat(fd, &st) == 0 ? Int(st.st_size) : -1
        }
        #expect(Set(sizes).count == 1, "the compacted images' files: \(sizes)")
        let reader = try openStore(dir, configure)
        for (key, expected) in written {
            #expect(try store.string(forKey: key) == expected)
            #expect(try reader.string(forKey: key) == expected)
        }
    }

    /// A store whose next trigger is beyond `StoreLog.roomLimit` thresholds (200 values of 1,500 bytes, a 16 KiB
    /// threshold: a trigger of about 600 KiB), plain and sealed, rewritten until an automatic compaction ran: the
    /// new file is the header page, twice the live records and one page of room, not a quarter of the live data
    /// more (14 MB of a million keys' file). Every value reads back, and a second automatic compaction gives the
    /// same size.
    @Test(arguments: [nil, 1] as [UInt64?])
    func aStoreFarAboveTheThresholdGetsAPageOfRoom(sealerKey: UInt64?) throws {
        let dir = try TempDir("no-room")
        let store = try openStore(dir) {
            $0.autoCompactionThreshold = 16 * 1024
            $0.sealer = sealerKey.map { TestSealer(key: $0) }
        }
        var written: [String: Data] = [:]
        var n = 0
        func write() throws {
            let key = "k\(n % 200)"
            written[key] = Data(repeating: UInt8(truncatingIfNeeded: n), count: 1_500)
            try store.set(written[key]!, forKey: key)
            n += 1
        }
        while n < 200 { try write() }
        for _ in 0..<2 {
            let before = Self.inode(dir.file("ui.prefs"))
            while Self.inode(dir.file("ui.prefs")) == before {
                try write()
                try #require(n < 10_000, "no automatic compaction in 10,000 writes")
            }
            let bytes = try readBytes(dir.file("ui.prefs"))
            let (header, logEnd) = try bytes.withUnsafeBytes { page in
                let raw = UInt64(littleEndian: page.loadUnaligned(fromByteOffset: Format.logEndOffset, as: UInt64.self))
                return (
                    try #require(try? Header.parse(UnsafeRawBufferPointer(rebasing: page[..<Format.headerSize]))),
                    try #require(Format.decodeLogEnd(raw))
                )
            }
            let length = logEnd - header.firstRecordOffset
            // The trigger, twice the live records, is beyond 16 thresholds.
            try #require(2 * length > 16 * 16 * 1024, "the live records: \(length) bytes")
            // The index record these keys get counts as live for the trigger (none under `IndexTable.minimumKeys`,
            // 256 keys, unless PREFSKV_INDEX_TAIL lowers it, as `make torture`'s second pass does).
            let table =
                header.hasIndexRecords && written.count >= IndexTable.minimumKeys
                ? IndexTable.recordLength(
                    keyCount: written.count, authenticated: sealerKey != nil, pieces: header.authenticatesTablePieces)
                : 0
            #expect(
                bytes.count == Format.headerSize + 2 * (length + table) + sysconf(Int32(_SC_PAGESIZE)),
                "live \(length), index record \(table)")
        }
        for (key, value) in written { #expect(try store.data(forKey: key) == value) }
    }

    /// A buffered store that loses most of its data between two automatic compactions (200 values of 1,500 bytes,
    /// then about half of them deleted) does not keep the file its second compaction replaced as the spare: twice
    /// the size the next image needs, no compaction could write into it, and it would stay beside the data file
    /// until the next sync(). Before, `ui.prefs.tmp` kept it (626 KB beside a 320 KB data file). A spare of the
    /// right size is still kept (the alternation tests above).
    @Test func aReplacedFileTooLargeToWriteIntoIsNotKept() throws {
        let dir = try TempDir("no-spare")
        let store = try openStore(dir) { $0.autoCompactionThreshold = 16 * 1024 }
        let value = { (n: Int) in Data(repeating: UInt8(truncatingIfNeeded: n), count: 1_500) }
        for i in 0..<200 { try store.set(value(i), forKey: "k\(i)") }
        try store.sync()
        // The first automatic compaction after the sync replaces the synced file, which stays as the base.
        var n = 200
        let synced = Self.inode(dir.file("ui.prefs"))
        while Self.inode(dir.file("ui.prefs")) == synced {
            try store.set(value(n), forKey: "k\(n % 200)")
            n += 1
            try #require(n < 10_000, "no automatic compaction in 10,000 writes")
        }
        let first = try #require(Self.inode(dir.file("ui.prefs")))
        let firstSize = try readBytes(dir.file("ui.prefs")).count
        var deleted = 0
        while Self.inode(dir.file("ui.prefs")) == first {
            try store.removeValue(forKey: "k\(deleted)")
            deleted += 1
            try #require(deleted < 150, "no automatic compaction in 150 deletes")
        }
        let size = try readBytes(dir.file("ui.prefs")).count
        // Larger than `usableSpare` takes for an image of this size.
        try #require(!StoreLog.spareFits(size: firstSize, capacity: size), "the data file \(size) bytes, replaced \(firstSize)")
        #expect(!FileManager.default.fileExists(atPath: dir.file("ui.prefs.tmp")), "\(dir.files)")
        for i in deleted..<200 {
            let last = stride(from: n - 1, through: 0, by: -1).first { $0 % 200 == i }!
            #expect(try store.data(forKey: "k\(i)") == value(last))
        }
        for i in 0..<deleted { #expect(try store.data(forKey: "k\(i)") == nil) }
    }

    /// Another process reads a rewritten blob and ten fixed keys pass after pass while this one rewrites the blob
    /// 3,000 times (60,000 in make torture; at least 100 automatic compactions, each writing its image into a file the reader may still map
    /// with an earlier image): the reader never gets a value that was not written (a blob of mixed bytes, another
    /// length, a key with another value) and no read throws.
    @Test func aReaderInAnotherProcessOnlyEverSeesWrittenValues() throws {
        let dir = try TempDir("reuse-reader")
        let store = try openStore(dir) { $0.autoCompactionThreshold = 16 * 1024 }
        for i in 0..<10 { try store.set("value \(i)", forKey: "k\(i)") }
        try store.sync()
        let reader = try Child(["prefs-blob-reader", dir.path, "ui"])
        #expect(reader.waitForLine(timeout: 120) { $0.hasPrefix("P ") } != nil, "the reader started: \(reader.lines)")
        var dataFiles: Set<UInt64> = []
        var compactions = 0
        var last: UInt64?
        for n in 1...Torture.count("REUSE_WRITES", short: 3_000, long: 60_000) {
            try store.set(Data(repeating: UInt8(truncatingIfNeeded: n), count: 1_500), forKey: "blob")
            let data = Self.inode(dir.file("ui.prefs"))
            if data != last { compactions += 1 }
            last = data
            if let data { dataFiles.insert(data) }
        }
        #expect(compactions >= 100 && dataFiles.count <= 3, "\(compactions) compactions, \(dataFiles.count) files")
        // A pass of the reader that ends after the rewrites (an event: a loaded machine may not have run it during
        // them), then the stop.
        let passes = reader.lines.filter { $0.hasPrefix("P ") }.count
        var counted = 0
        let after = reader.waitForLine(timeout: 120) { line in
            if line.hasPrefix("P ") { counted += 1 }
            return counted > passes
        }
        #expect(after != nil, "the reader made no pass after the rewrites: \(reader.lines.suffix(3))")
        try Data().write(to: URL(fileURLWithPath: dir.file("stop")))
        let end = reader.waitForLine(timeout: 120) { $0.hasPrefix("E ") }
        #expect(end == "E ", "errors: \(String(describing: end))")
        #expect(reader.drain() == 0)
        #expect(!reader.lines.contains { $0.hasPrefix("BAD") }, "\(reader.lines.filter { $0.hasPrefix("BAD") }.prefix(5))")
        #expect(reader.lines.filter { $0.hasPrefix("P ") }.count > 1)
    }

    /// A handle left on an image whose file a compaction later writes a new image into: when the rewrite begins,
    /// every record of the earlier image loses its CRC word (`MappedFile.beginRewrite` zeros the log from its end
    /// down, before the records are written), so none of its entries still holds; its reads give the current values
    /// (it reopens the path), and it logs no warning (the file holds a newer image of the same store, not a change
    /// from outside).
    @Test func aHandleOnTheEarlierImageFollowsTheRewriteWithoutAWarning() throws {
        let dir = try TempDir("reuse-lagging")
        let store = try openStore(dir) { $0.autoCompactionThreshold = 16 * 1024 }
        let log = LogCapture()
        let lagging = try openStore(dir) {
            $0.autoCompactionThreshold = 16 * 1024
            $0.logger = log.logger
        }
        for i in 0..<10 { try store.set("value \(i)", forKey: "k\(i)") }
        try store.sync()
        // Until the data file is a file that the next compactions will write into again (two images after the base).
        var files: [UInt64] = []
        var n = 0
        func rewriteUntilCompacted() throws {
            try Self.rewriteUntilCompacted(store, dir, &n)
            files.append(Self.inode(dir.file("ui.prefs"))!)
        }
        try rewriteUntilCompacted()
        try rewriteUntilCompacted()
        // The lagging handle adopts the current file and reads every key from it.
        for i in 0..<10 { #expect(try lagging.string(forKey: "k\(i)") == "value \(i)") }
        let (file, entries) = lagging.engine.withLock { e in (e.log.file, (0..<10).map { e.log.index["k\($0)"]! }) }
        #expect(file.identity.inode == files[1])
        #expect(file.withBytes { bytes in entries.allSatisfy { file.stillHolds($0, in: bytes) } })
        // Two more compactions: the first replaces that file (it becomes the spare), the second writes into it.
        try rewriteUntilCompacted()
        #expect(file.withBytes { bytes in entries.allSatisfy { file.stillHolds($0, in: bytes) } }, "a spare is untouched")
        try rewriteUntilCompacted()
        #expect(files[3] == files[1], "the file was written again: \(files)")
        #expect(file.withBytes { bytes in entries.allSatisfy { !file.stillHolds($0, in: bytes) } })
        for i in 0..<10 { #expect(try lagging.string(forKey: "k\(i)") == "value \(i)") }
        #expect(try lagging.data(forKey: "blob") == Data(repeating: UInt8(truncatingIfNeeded: n), count: 1_500))
        #expect(log.entries.withLock { $0.filter { $0.level >= .warning } }.isEmpty, "\(log.entries.withLock { $0 })")
    }

    /// An observer on a handle whose image's file a compaction writes again (the case `StoreLog.changedIndexKeys`
    /// cannot compare, since the old mapping shows the newer image): it is told every key that changed meanwhile,
    /// by name, a deleted one included, and nothing is reported as changed by this handle. In a sealed store the
    /// deleted key's name can come only from the names the handle learned (its record is gone from the file), with
    /// the sealer's tags remembered (even key) or computed at each access (odd key).
    @Test(arguments: [nil, 1, 2] as [UInt64?])
    func anObserverOfARewrittenImageHearsEveryChangeByName(sealerKey: UInt64?) throws {
        let dir = try TempDir("reuse-observed")
        let sealer = sealerKey.map { TestSealer(key: $0) }
        func configure(_ configuration: inout PrefsStore.Configuration) {
            configuration.autoCompactionThreshold = 16 * 1024
            configuration.sealer = sealer
        }
        let store = try openStore(dir, configure)
        for i in 0..<10 { try store.set("value \(i)", forKey: "k\(i)") }
        try store.sync()
        var n = 0
        func rewriteUntilCompacted() throws { try Self.rewriteUntilCompacted(store, dir, &n) }
        try rewriteUntilCompacted()
        try rewriteUntilCompacted()
        let observed = try openStore(dir, configure)
        #expect(try observed.allKeys == ["blob"] + (0..<10).map { "k\($0)" })
        let adopted = Self.inode(dir.file("ui.prefs"))
        let heard = Mutex<[PrefsChange]>([])
        let observation = observed.observe { change in heard.withLock { $0.append(change) } }
        defer { observation.cancel() }

        try store.set("changed", forKey: "k3")
        try store.removeValue(forKey: "k5")
        try store.set("new", forKey: "k10")
        try rewriteUntilCompacted()
        try rewriteUntilCompacted()
        #expect(Self.inode(dir.file("ui.prefs")) == adopted, "the observed handle's file was written again")

        #expect(try observed.string(forKey: "k3") == "changed")
        // The handle's watch thread may have taken the changes and be delivering them on its own thread: wait for
        // the event (the deadline only bounds a failure).
        let expected: Set<String> = ["k3", "k5", "k10", "blob"]
        let deadline = ContinuousClock.now + .seconds(120)
        while !Set(heard.withLock { $0 }.flatMap(\.keys)).isSuperset(of: expected) && ContinuousClock.now < deadline {
            _ = try observed.count
            Thread.sleep(forTimeInterval: 0.01)
        }
        let changes = heard.withLock { $0 }
        let keys = Set(changes.flatMap(\.keys))
        #expect(keys.isSuperset(of: expected), "\(changes)")
        #expect(changes.allSatisfy { $0.isExternal }, "\(changes)")
        #expect(try observed.string(forKey: "k5") == nil)
        #expect(try observed.allKeys == ["blob"] + (0..<11).filter { $0 != 5 }.map { "k\($0)" }.sorted())
    }

    /// A restore from a backup tells this handle's observers every key it changed, by name: in a sealed store a
    /// key the backup lacks is named only by what the handle learned (its record goes with the replaced file).
    /// Before, the learned names were dropped before the changes were named, and such keys went unreported.
    @Test(arguments: [nil, 1, 2] as [UInt64?])
    func aRestoreTellsObserversEveryKeyItChangedByName(sealerKey: UInt64?) throws {
        let dir = try TempDir("restore-observed")
        let store = try openStore(dir) { $0.sealer = sealerKey.map { TestSealer(key: $0) } }
        try store.set("a1", forKey: "a")
        try store.set("b1", forKey: "b")
        try store.backup(to: dir.file("backup.prefs"))
        try store.set("a2", forKey: "a")
        try store.set("c1", forKey: "c")
        let heard = Mutex<[PrefsChange]>([])
        let observation = store.observe { change in heard.withLock { $0.append(change) } }
        defer { observation.cancel() }
        try store.restore(from: dir.file("backup.prefs"))
        let keys = Set(heard.withLock { $0 }.flatMap(\.keys))
        #expect(keys == ["a", "c"], "\(heard.withLock { $0 })")
        #expect(try store.allKeys == ["a", "b"])
        #expect(try store.string(forKey: "a") == "a1")
    }

    /// A key another handle deletes is named to this handle's observers by its record (in this file, or in the image
    /// a compaction replaced), though this handle never learned the name: it wrote the key before it observed, or
    /// never wrote or listed it at all. Since a sealed handle learns names only while it reports changes (stop 31,
    /// a fifth of a sealed write), both went unnamed without this; before, the second did anyway.
    @Test(arguments: [nil, 1, 2] as [UInt64?])
    func aKeyDeletedElsewhereIsNamedByItsRecord(sealerKey: UInt64?) throws {
        let dir = try TempDir("vanished-names")
        let sealer = sealerKey.map { TestSealer(key: $0) }
        let writer = try openStore(dir) { $0.sealer = sealer }
        for key in ["theirs", "theirs2", "kept"] { try writer.set("1", forKey: key) }
        let observed = try openStore(dir) { $0.sealer = sealer }
        for key in ["mine", "mine2"] { try observed.set("1", forKey: key) }
        let heard = Mutex<[PrefsChange]>([])
        let observation = observed.observe { change in heard.withLock { $0.append(change) } }
        defer { observation.cancel() }
        func awaitKeys(_ expected: Set<String>) -> Set<String> {
            // The handle's watch thread may be delivering the changes on its own thread: wait for the event (the
            // deadline only bounds a failure).
            let deadline = ContinuousClock.now + .seconds(120)
            while !Set(heard.withLock { $0 }.flatMap(\.keys)).isSuperset(of: expected) && ContinuousClock.now < deadline {
                _ = try? observed.count
                Thread.sleep(forTimeInterval: 0.01)
            }
            return Set(heard.withLock { $0 }.flatMap(\.keys))
        }
        // Deletions appended to the file this handle reads.
        try writer.removeValue(forKey: "theirs")
        try writer.removeValue(forKey: "mine")
        #expect(awaitKeys(["theirs", "mine"]).isSuperset(of: ["theirs", "mine"]), "\(heard.withLock { $0 })")
        // Deletions the handle sees only through a new image (the compaction replaces its file).
        let before = Self.inode(dir.file("ui.prefs"))
        try writer.removeValue(forKey: "theirs2")
        try writer.removeValue(forKey: "mine2")
        try writer.compact()
        #expect(Self.inode(dir.file("ui.prefs")) != before)
        #expect(awaitKeys(["theirs2", "mine2"]).isSuperset(of: ["theirs2", "mine2"]), "\(heard.withLock { $0 })")
        let changes = heard.withLock { $0 }
        #expect(changes.allSatisfy { $0.isExternal }, "\(changes)")
        #expect(try observed.allKeys == ["kept"])
    }

    /// A new image seals every value of a sealed store again under a fresh nonce (format 6 binds a value to its
    /// place), so an unchanged value has other bytes in it: a handle that follows another handle's compaction
    /// compares the plaintexts of keys whose bytes differ, and its observers hear only the key that changed (with
    /// the bytes compared alone, every key of the store was reported).
    @Test(arguments: [nil, 1, 2] as [UInt64?])
    func aCompactionElsewhereReportsOnlyTheKeysThatChanged(sealerKey: UInt64?) throws {
        let dir = try TempDir("compaction-observed")
        let sealer = sealerKey.map { TestSealer(key: $0) }
        let writer = try openStore(dir) { $0.sealer = sealer }
        for i in 0..<10 { try writer.set("value \(i)", forKey: "k\(i)") }
        let observed = try openStore(dir) { $0.sealer = sealer }
        #expect(try observed.allKeys.count == 10)
        let heard = Mutex<[PrefsChange]>([])
        let observation = observed.observe { change in heard.withLock { $0.append(change) } }
        defer { observation.cancel() }
        let before = Self.inode(dir.file("ui.prefs"))
        try writer.set("changed", forKey: "k3")
        try writer.compact()
        #expect(Self.inode(dir.file("ui.prefs")) != before, "the compaction wrote a new file")
        #expect(try observed.string(forKey: "k3") == "changed")
        let deadline = ContinuousClock.now + .seconds(120)
        while !heard.withLock({ $0 }).contains(where: { $0.keys.contains("k3") }) && ContinuousClock.now < deadline {
            _ = try observed.count
            Thread.sleep(forTimeInterval: 0.01)
        }
        _ = try observed.count
        let changes = heard.withLock { $0 }
        #expect(Set(changes.flatMap(\.keys)) == ["k3"], "\(changes)")
        #expect(try observed.string(forKey: "k7") == "value 7")
    }

    /// Found by review: a handle on an image whose file is written again with a newer image that ends at the same
    /// offset saw the same log-end word and a cleared superseded word, took itself for up to date, and answered
    /// `contains`, `count` and `allKeys` from the earlier image. Handles now compare the header's generation word too.
    @Test func aHandleFollowsANewerImageEndingAtTheSameOffset() throws {
        let dir = try TempDir("reuse-same-end")
        let store = try openStore(dir) { $0.autoCompactionThreshold = 16 * 1024 }
        try store.set("x", forKey: "old-key")
        try store.sync()
        var n = 0
        func rewriteUntilCompacted() throws { try Self.rewriteUntilCompacted(store, dir, &n) }
        try rewriteUntilCompacted()
        try rewriteUntilCompacted()
        try rewriteUntilCompacted()
        // A handle adopts the image a compaction just wrote (its log ends where the image does).
        let lagging = try openStore(dir) { $0.autoCompactionThreshold = 16 * 1024 }
        #expect(try lagging.contains("old-key") && !lagging.contains("new-key"))
        let adopted = Self.inode(dir.file("ui.prefs"))
        let end = lagging.engine.withLock { $0.log.knownEnd }
        // The same live bytes under another key of the same length; two compactions later its file holds a newer
        // image of the same length.
        try store.removeValue(forKey: "old-key")
        try store.set("x", forKey: "new-key")
        try rewriteUntilCompacted()
        try rewriteUntilCompacted()
        #expect(Self.inode(dir.file("ui.prefs")) == adopted, "the file the handle adopted was written again")
        let newEnd = store.engine.withLock { $0.log.knownEnd }
        #expect(newEnd == end, "the newer image ends where the earlier one did")
        #expect(try lagging.contains("new-key"))
        #expect(try !lagging.contains("old-key"))
        #expect(try lagging.allKeys == ["blob", "new-key"])
    }
}
