// What follows a failed flush of the store file (FileProtocols.md, "Durability"): a later `fdatasync` of the same file
// may succeed without the pages that failed (Linux tells each open file of a writeback error once), so the next promise
// of durability writes the store into a new file first. Each case fails one flush through the system layer's seam and
// checks, on the real files, which file the name holds after, and what a second process reads.
import Foundation
import Glibc
import SystemLayer
import TestSealer
import TestSupport
import Testing

@testable import PrefsKV

extension FlushFailureTests {
    /// A buffered store of 300 keys, closed (so that it keeps a persisted index) and opened again from that index.
    static func storeOpenedFromItsIndex(_ dir: TempDir) throws -> PrefsStore {
        do {
            let store = try openStore(dir)
            try store.write { tx in for i in 0..<300 { try tx.set("value \(i)", forKey: "k\(i)") } }
            try store.sync()
        }
        let store = try openStore(dir)
        #expect(store.engine.withLock { $0.log.table } != nil, "opened from its persisted index")
        return store
    }

    /// Fails `store`'s next `sync()` (its data file's flush), then has a second process change one byte of the file
    /// in place (the test helper's `file-flip`), as another writer would (or a page lost after the failed flush): `at`
    /// bytes into its record number `record`, counted from the header's copy at 4096.
    static func failSyncThenChange(_ store: PrefsStore, _ dir: TempDir, record: Int, at offset: Int) throws {
        let faults = Faults(.flush, of: dir.file("ui.prefs"), times: 1)
        #expect(throws: PrefsError.self) { try faults.during { try store.sync() } }
        let offsets = BaseImageTests.recordOffsets(try readBytes(dir.file("ui.prefs")))
        try #require(offsets.count > record)
        let flip = try Child(["file-flip", dir.file("ui.prefs"), "\(offsets[record] + offset)"])
        flip.drain()
        #expect(flip.lines == ["flipped"])
    }

    /// The failure is remembered by the file, not by one mapping of it: a handle that maps the file again (a handle
    /// opened from its persisted index reads the file whole for `stats()`) and another handle of this process
    /// opened after the error (which Linux would not tell of it) both write the store into a new file at their next
    /// `sync()`. Before, each took its new mapping's flush as good.
    @Test func aFailedFlushIsKnownToEveryMappingOfTheFileInThisProcess() throws {
        let dir = try TempDir("flush-fails-remap", memory: true)
        let store = try Self.storeOpenedFromItsIndex(dir)
        let inode = ImageReuseTests.inode(dir.file("ui.prefs"))
        let faults = Faults(.flush, of: dir.file("ui.prefs"), times: 1)
        #expect(throws: PrefsError.self) { try faults.during { try store.sync() } }
        _ = try store.stats()
        #expect(store.engine.withLock { $0.log.table } == nil, "the file mapped again, whole")
        try store.sync()
        #expect(ImageReuseTests.inode(dir.file("ui.prefs")) != inode, "written into a new file")
        #expect(try Self.readElsewhere(dir, "k299", sealed: false) == "value 299")

        let second = try TempDir("flush-fails-other", memory: true)
        let first = try openStore(second)
        for i in 0..<20 { try first.set("value \(i)", forKey: "k\(i)") }
        let before = ImageReuseTests.inode(second.file("ui.prefs"))
        let failing = Faults(.flush, of: second.file("ui.prefs"), times: 1)
        #expect(throws: PrefsError.self) { try failing.during { try first.sync() } }
        let later = try openStore(second)
        try later.sync()
        #expect(ImageReuseTests.inode(second.file("ui.prefs")) != before, "the later handle wrote it anew")
        try first.sync()
        #expect(try Self.readElsewhere(second, "k19", sealed: false) == "value 19")
    }

    /// A store file deleted from outside after a failed flush is not brought back by the next `sync()`: the handle
    /// follows the deletion (and throws `notFound`) instead of renaming a rewritten image onto the name.
    @Test func aSyncAfterAFailedFlushDoesNotBringBackADeletedStore() throws {
        let dir = try TempDir("flush-fails-deleted", memory: true)
        let store = try openStore(dir)
        for i in 0..<20 { try store.set("value \(i)", forKey: "k\(i)") }
        let faults = Faults(.flush, of: dir.file("ui.prefs"), times: 1)
        #expect(throws: PrefsError.self) { try faults.during { try store.sync() } }
        #expect(unlink(dir.file("ui.prefs")) == 0)
        #expect(throws: PrefsError.self) { try store.sync() }
        #expect(!FileManager.default.fileExists(atPath: dir.file("ui.prefs")), "not brought back")
    }

    /// `sync()` of a store whose file was deleted from outside a moment before never flushes the deleted file and
    /// returns as if the values were durable: it follows the deletion (the name checked there and then, not the
    /// flag the process's inotify watcher raises a moment after the change) and throws `notFound`, and nothing
    /// brings the file back. Ten rounds, each with the unlink right before the `sync()`: before, the `sync()` returned
    /// whenever the watcher had not yet raised its flag.
    @Test func aSyncRightAfterTheFileWasDeletedFollowsTheDeletion() throws {
        for round in 0..<10 {
            let dir = try TempDir("sync-deleted-\(round)", memory: true)
            let store = try openStore(dir)
            for i in 0..<20 { try store.set("value \(i)", forKey: "k\(i)") }
            #expect(unlink(dir.file("ui.prefs")) == 0)
            #expect(throws: PrefsError.self, "round \(round): sync() returned after the file was deleted") {
                do { try store.sync() } catch let error as PrefsError {
                    #expect(error.code == .notFound, "round \(round): \(error)")
                    throw error
                }
            }
            #expect(!FileManager.default.fileExists(atPath: dir.file("ui.prefs")), "round \(round): brought back")
        }
    }

    /// After a failed flush a record's bytes no longer verify (as when the kernel dropped pages that failed and read
    /// them back from the disk; here another writer changed a byte of one value): the rewrite's copy finds it, the
    /// file is read again and salvaged into a new one, and `sync()` returns. Every other value is there, here and in
    /// another process, the store opens without recovery, and the next `sync()` returns too. Before, every later
    /// `sync()` threw `changedUnderneath`, and so did every synchronous write, `compact()` and `restore`.
    @Test(arguments: [false, true])
    func aRewriteThatFindsARecordChangedRecoversTheStore(sealed: Bool) throws {
        let dir = try TempDir("flush-fails-changed", memory: true)
        let store = try openStore(dir) { $0.sealer = sealed ? TestSealer(key: 5) : nil }
        for i in 0..<20 { try store.set("value \(i)", forKey: "k\(i)") }
        try Self.failSyncThenChange(store, dir, record: 7, at: 36)
        try store.sync()
        #expect(store.lastRecovery != nil, "the changed record found and the store salvaged")
        let present = try (0..<20).filter { try store.string(forKey: "k\($0)") == "value \($0)" }
        #expect(present.count == 19, "\(present)")
        #expect(try Self.readElsewhere(dir, "k19", sealed: sealed) == "value 19")
        try store.set("after", forKey: "k20")
        try store.sync()
        #expect(try openStore(dir) { $0.sealer = sealed ? TestSealer(key: 5) : nil }.lastRecovery == nil)
    }

    /// A file whose flush failed is never written into as the next compaction's spare: a buffered store's image
    /// whose `sync()` failed, replaced by an automatic compaction and kept as `ui.prefs.tmp`, is dropped by the
    /// compaction after, which writes a new file instead.
    @Test func aFileWhoseFlushFailedIsNotReusedAsASpare() throws {
        let dir = try TempDir("flush-fails-spare", memory: true)
        let base = BaseImageTests()
        let store = try base.makeStore(dir)
        try base.compactAutomatically(store, dir)
        let failed = try #require(ImageReuseTests.inode(dir.file("ui.prefs")))
        let faults = Faults(.flush, of: dir.file("ui.prefs"), times: 1)
        #expect(throws: PrefsError.self) { try faults.during { try store.sync() } }
        try base.compactAutomatically(store, dir)
        #expect(ImageReuseTests.inode(dir.file("ui.prefs.tmp")) == failed, "kept as the spare")
        let blob = try base.compactAutomatically(store, dir)
        #expect(ImageReuseTests.inode(dir.file("ui.prefs")) != failed, "not written into")
        #expect(try store.string(forKey: "blob") == blob)
        #expect(try Self.readElsewhere(dir, "blob", sealed: false) == blob)
    }

    /// A buffered store's file whose `sync()` failed is not made the base image of its next automatic compaction (a
    /// base must be durable: it is what a power cut falls back to): the compaction flushes its image instead, which
    /// names no base, and no `ui.prefs.prev` is left.
    @Test func aFileWhoseFlushFailedIsNotMadeABaseImage() throws {
        let dir = try TempDir("flush-fails-base", memory: true)
        let base = BaseImageTests()
        let store = try base.makeStore(dir)
        let faults = Faults(.flush, of: dir.file("ui.prefs"), times: 1)
        #expect(throws: PrefsError.self) { try faults.during { try store.sync() } }
        let blob = try base.compactAutomatically(store, dir)
        #expect(try BaseImageTests.baseWord(dir.file("ui.prefs")) == 0, "the new image names no base")
        #expect(!FileManager.default.fileExists(atPath: dir.file("ui.prefs.prev")))
        #expect(try Self.readElsewhere(dir, "blob", sealed: false) == blob)
        #expect(try Self.readElsewhere(dir, "key-07", sealed: false) == BaseImageTests.value(7))
    }

    /// `compact()` of a file whose flush failed writes one new image (its copy checks every record), not a rewrite
    /// and then a compaction.
    @Test func compactOfAFileWhoseFlushFailedWritesOneImage() throws {
        let dir = try TempDir("flush-fails-compact", memory: true)
        let store = try openStore(dir, PendingWriteTests.configure(false))
        for i in 0..<20 { try store.set("value \(i)", forKey: "k\(i)") }
        let faults = Faults(.flush, of: dir.file("ui.prefs"), times: 1)
        Self.expectIO("the write returned although its flush failed", naming: "fdatasync") {
            try faults.during { try store.set("changed", forKey: "k0") }
        }
        let generation = try BaseImageTests.generation(dir.file("ui.prefs"))
        try store.compact()
        #expect(try BaseImageTests.generation(dir.file("ui.prefs")) == generation + 1)
        #expect(try Self.readElsewhere(dir, "k19", sealed: false) == "value 19")
    }

    /// An automatic compaction of a file whose flush failed checks every record it copies: a value changed since
    /// (another writer's byte, as a page lost after the failed flush would be) is found, the file salvaged, and
    /// the changed value never served nor carried into the new image with a new CRC (as a compaction of a file that
    /// never failed a flush would carry it, checking only the stored CRC against the index).
    @Test func anAutomaticCompactionOfAFileWhoseFlushFailedChecksEveryRecord() throws {
        let dir = try TempDir("flush-fails-auto", memory: true)
        let base = BaseImageTests()
        let store = try base.makeStore(dir)
        try Self.failSyncThenChange(store, dir, record: 6, at: 40)  // inside key-05's value
        let blob = try base.compactAutomatically(store, dir)
        #expect(store.lastRecovery != nil, "the changed record found and the store salvaged")
        #expect(try store.string(forKey: "key-05") == nil)
        for i in 0..<20 where i != 5 {
            #expect(try store.string(forKey: String(format: "key-%02d", i)) == BaseImageTests.value(i))
        }
        #expect(try Self.readElsewhere(dir, "key-05", sealed: false) == "absent")
        #expect(try store.string(forKey: "blob") == blob)
    }
}
