// A `.synchronous` write is flushed once (StoreLog.publish): its records and the pending word that names them reach
// the disk together, and its log end with the next flush. Each case writes the bytes a power cut can leave into a
// real file: the log end of the write before, with the pending word of the write that returned. What verifies is
// there, whole; what does not is not, and nothing is reported; every handle then appends after the same end.
import Foundation
import Glibc
import Synchronization
import SystemLayer
import TestSealer
import Testing

@testable import PrefsKV

@Suite struct PendingWriteTests {
    /// The bytes of a synchronous store after `set(a = "1")` then `set(a = "2")`, with the log end as it was before
    /// the second write (what the disk holds when the power went after its flush, before its log end reached the
    /// disk), and the offsets of that write's records. `keys`: that many keys written and the store closed first
    /// (its close writes a persisted index table when they are enough, IndexTable.minimumKeys).
    static func cutAfterFlush(sealed: Bool, keys: Int = 0) throws -> (bytes: [UInt8], start: Int, end: Int) {
        let dir = try TempDir("pending-source", memory: true)
        if keys > 0 {
            let store = try openStore(dir, configure(sealed))
            for i in 0..<keys { try store.set("value \(i)", forKey: "key-\(i)") }
        }
        let store = try openStore(dir) {
            $0.durability = .synchronous
            $0.sealer = sealed ? TestSealer(key: 5) : nil
        }
        try store.set("1", forKey: "a")
        let before = try readBytes(dir.file("ui.prefs"))
        try store.set("2", forKey: "a")
        var bytes = try readBytes(dir.file("ui.prefs"))
        let start = Self.logEnd(before)
        let end = Self.logEnd(bytes)
        #expect(Format.decodePending(Self.word(bytes, Format.pendingWordOffset), logEnd: start) == end)
        bytes.replaceSubrange(Format.logEndOffset..<Format.logEndOffset + 8, with: before[Format.logEndOffset..<Format.logEndOffset + 8])
        return (bytes, start, end)
    }

    static func word(_ bytes: [UInt8], _ offset: Int) -> UInt64 {
        bytes.withUnsafeBytes { UInt64(littleEndian: $0.loadUnaligned(fromByteOffset: offset, as: UInt64.self)) }
    }

    static func logEnd(_ bytes: [UInt8]) -> Int { Format.decodeLogEnd(word(bytes, Format.logEndOffset))! }

    /// Writes `bytes` at `offset` of the file at `path`, in place (the inode and its mappings stay), as another
    /// writer of the file would.
    static func writeInPlace(_ bytes: [UInt8], at offset: Int, of path: String) throws {
        let fd = open(path, O_RDWR)
        guard fd >= 0 else { throw TestFailure("open \(path): errno \(errno)") }
        defer { close(fd) }
        guard pwrite(fd, bytes, bytes.count, off_t(offset)) == bytes.count else {
            throw TestFailure("pwrite \(path): errno \(errno)")
        }
    }

    static func configure(_ sealed: Bool) -> (inout PrefsStore.Configuration) -> Void {
        {
            $0.durability = .synchronous
            $0.sealer = sealed ? TestSealer(key: 5) : nil
        }
    }

    /// The write that returned is there, through an open and a check that takes no lock, with no recovery; the
    /// next write completes its log end and goes after it.
    @Test(arguments: [false, true])
    func aWriteWhoseLogEndDidNotReachTheDiskIsThere(sealed: Bool) throws {
        let cut = try Self.cutAfterFlush(sealed: sealed)
        let dir = try TempDir("pending", memory: true)
        try writeBytes(cut.bytes, to: dir.file("ui.prefs"))
        let report = try PrefsStore.verify(id: "ui", directory: dir.path, sealer: sealed ? TestSealer(key: 5) : nil)
        #expect(report.isClean, "\(report)")
        #expect(report.recordsVerified == 2, "\(report)")
        #expect(try readBytes(dir.file("ui.prefs")) == cut.bytes, "verify changed nothing")
        let store = try openStore(dir, Self.configure(sealed))
        #expect(Self.logEnd(try readBytes(dir.file("ui.prefs"))) == cut.end, "the open published the write it read")
        let other = try openStore(dir, Self.configure(sealed))
        #expect(store.lastRecovery == nil)
        #expect(try store.string(forKey: "a") == "2")
        #expect(try other.string(forKey: "a") == "2")
        try other.set("3", forKey: "b")
        #expect(Self.logEnd(try readBytes(dir.file("ui.prefs"))) > cut.end)
        #expect(try store.string(forKey: "b") == "3")
        #expect(try store.string(forKey: "a") == "2")
        let reopened = try openStore(dir, Self.configure(sealed))
        #expect(try reopened.string(forKey: "a") == "2")
        #expect(try reopened.string(forKey: "b") == "3")
        #expect(reopened.lastRecovery == nil)
    }

    /// The same cut with one byte of the write's records not on the disk (a sector of the flush torn): the write
    /// is not there, nothing is reported (the bytes are past the log end, as any unpublished write's), and the
    /// next write goes where it was.
    @Test(arguments: [false, true])
    func aTornWriteAfterTheLogEndIsNotThere(sealed: Bool) throws {
        var cut = try Self.cutAfterFlush(sealed: sealed)
        cut.bytes[cut.end - 6] ^= 0x40
        let dir = try TempDir("pending-torn", memory: true)
        try writeBytes(cut.bytes, to: dir.file("ui.prefs"))
        let report = try PrefsStore.verify(id: "ui", directory: dir.path, sealer: sealed ? TestSealer(key: 5) : nil)
        #expect(report.isClean, "\(report)")
        let store = try openStore(dir, Self.configure(sealed))
        let other = try openStore(dir, Self.configure(sealed))
        #expect(store.lastRecovery == nil)
        #expect(try store.string(forKey: "a") == "1")
        try other.set("3", forKey: "b")
        // b's write (as long as the torn one: same key and value lengths) went where the torn write was.
        let after = try readBytes(dir.file("ui.prefs"))
        #expect(Self.logEnd(after) == cut.end)
        #expect(after[cut.start..<cut.end] != cut.bytes[cut.start..<cut.end])
        #expect(try store.string(forKey: "b") == "3")
        #expect(try store.string(forKey: "a") == "1")
        let reopened = try openStore(dir, Self.configure(sealed))
        #expect(try reopened.string(forKey: "a") == "1")
        #expect(try reopened.string(forKey: "b") == "3")
        #expect(reopened.lastRecovery == nil)
    }

    /// A pending word beside another log end than the one it was written beside names nothing: records past the
    /// log end stay out, whole or not.
    @Test func aPendingWordBesideAnotherLogEndNamesNothing() throws {
        let dir = try TempDir("pending-stale", memory: true)
        let store = try openStore(dir) { $0.durability = .synchronous }
        try store.set("1", forKey: "a")
        let first = try readBytes(dir.file("ui.prefs"))
        try store.set("2", forKey: "a")
        try store.set("3", forKey: "a")
        var bytes = try readBytes(dir.file("ui.prefs"))
        // The log end of the first write, the pending word of the third.
        bytes.replaceSubrange(Format.logEndOffset..<Format.logEndOffset + 8, with: first[Format.logEndOffset..<Format.logEndOffset + 8])
        let check = try TempDir("pending-stale-check", memory: true)
        try writeBytes(bytes, to: check.file("ui.prefs"))
        let reopened = try openStore(check)
        #expect(try reopened.string(forKey: "a") == "1")
        #expect(reopened.lastRecovery == nil)
    }

    /// How a reader reaches the file in `anOpenWaitsForASynchronousWriteInFlight`.
    enum Reader: String, CaseIterable, Sendable { case open, readOnlyOpen, verify }

    /// An open (writable or read-only) or a `verify` that finds a pending word beside the log end while a writer
    /// holds the pending byte's lock (between its flush and its publish, or resolving a left write) waits for it:
    /// the kernel lists its request as blocked (/proc/locks); then the "writer" publishes the log end and releases,
    /// and the reader must finish after that release and read the published write. (Every wait is bounded, so
    /// that a hang fails rather than stalls.)
    @Test(arguments: Reader.allCases)
    func aReaderWaitsForASynchronousWriteInFlight(reader: Reader) throws {
        let cut = try Self.cutAfterFlush(sealed: false)
        let dir = try TempDir("pending-wait", memory: true)
        try writeBytes(cut.bytes, to: dir.file("ui.prefs"))
        let fd = open(dir.file("ui.prefs"), O_RDWR)
        try #require(fd >= 0)
        defer { close(fd) }
        try #require((try? Sys.byteLock(fd, at: Format.pendingWordOffset, exclusive: true).get()) != nil)
        let released = Atomic<Bool>(false)
        let readAfterRelease = Atomic<Int>(0)  // 0: not yet, 1: after, 2: before
        let path = dir.path
        let opener = Thread {
            var sawWrite = false
            switch reader {
            case .open, .readOnlyOpen:
                var configuration = PrefsStore.Configuration()
                configuration.readOnly = reader == .readOnlyOpen
                let store = try? PrefsStore(id: "ui", directory: path, configuration: configuration)
                sawWrite = (try? store?.string(forKey: "a")) == "2"
            case .verify:
                let report = try? PrefsStore.verify(id: "ui", directory: path)
                sawWrite = report?.isClean == true && report?.recordsVerified == 2
            }
            readAfterRelease.store(released.load(ordering: .acquiring) && sawWrite ? 1 : 2, ordering: .releasing)
        }
        opener.start()
        // The reader's wait, as the kernel lists it (a blocked request on the pending byte of this file), so that the
        // order is proven rather than timed.
        let inode = try #require(try FileManager.default.attributesOfItem(atPath: dir.file("ui.prefs"))[.systemFileNumber] as? UInt64)
        var waiting = false
        for _ in 0..<600_000 where readAfterRelease.load(ordering: .acquiring) == 0 {
            let locks = (try? String(contentsOfFile: "/proc/locks", encoding: .utf8)) ?? ""
            waiting = locks.split(separator: "\n").contains {
                $0.contains("-> OFDLCK") && $0.contains(":\(inode) \(Format.pendingWordOffset) \(Format.pendingWordOffset)")
            }
            if waiting { break }
            usleep(1_000)
        }
        #expect(waiting, "the reader waits on the pending byte")
        // Publish as the writer would: the log end stored, then the lock released.
        let raw = Format.encodeLogEnd(cut.end).littleEndian
        _ = withUnsafeBytes(of: raw) { pwrite(fd, $0.baseAddress, 8, off_t(Format.logEndOffset)) }
        released.store(true, ordering: .releasing)
        Sys.byteUnlock(fd, at: Format.pendingWordOffset)
        for _ in 0..<600_000 where readAfterRelease.load(ordering: .acquiring) == 0 { usleep(1_000) }
        #expect(readAfterRelease.load(ordering: .acquiring) == 1)
    }

    /// A handle that opened before its peer's synchronous write was left (its records and pending word on the disk,
    /// its log end not) completes it before its own write when the records verify, and forgets it when one byte
    /// of them did not reach the disk; either way its own write follows the same end every handle reads.
    @Test(arguments: [false, true])
    func aHandleOpenBeforeALeftWriteCompletesOrForgetsIt(torn: Bool) throws {
        var cut = try Self.cutAfterFlush(sealed: false)
        if torn { cut.bytes[cut.end - 6] ^= 0x40 }
        let pendingWord = Array(cut.bytes[Format.pendingWordOffset..<Format.pendingWordOffset + 8])
        var before = cut.bytes
        before.replaceSubrange(Format.pendingWordOffset..<Format.pendingWordOffset + 8, with: [UInt8](repeating: 0, count: 8))
        let dir = try TempDir("pending-peer", memory: true)
        try writeBytes(before, to: dir.file("ui.prefs"))
        let store = try openStore(dir, Self.configure(false))
        #expect(try store.string(forKey: "a") == "1")
        // The peer's flush and death: its pending word reaches the file.
        try Self.writeInPlace(pendingWord, at: Format.pendingWordOffset, of: dir.file("ui.prefs"))
        try store.set("3", forKey: "b")
        #expect(try store.string(forKey: "a") == (torn ? "1" : "2"))
        #expect(try store.string(forKey: "b") == "3")
        let after = try readBytes(dir.file("ui.prefs"))
        #expect(Self.logEnd(after) == (torn ? cut.end : cut.end + (cut.end - cut.start)))
        let reopened = try openStore(dir, Self.configure(false))
        #expect(try reopened.string(forKey: "a") == (torn ? "1" : "2"))
        #expect(try reopened.string(forKey: "b") == "3")
        #expect(reopened.lastRecovery == nil)
        #expect(try reopened.verify().isClean)
    }

    /// A store opened from its persisted index table (the lazy open) with a left write after the table reads it
    /// as a full open does.
    @Test func aLazyOpenReadsALeftWrite() throws {
        let cut = try Self.cutAfterFlush(sealed: false, keys: 300)
        #expect(Self.word(cut.bytes, Format.indexWordOffset) != 0, "the file names an index table")
        let dir = try TempDir("pending-lazy", memory: true)
        try writeBytes(cut.bytes, to: dir.file("ui.prefs"))
        let store = try openStore(dir, Self.configure(false))
        #expect(try store.string(forKey: "a") == "2")
        #expect(try store.string(forKey: "key-299") == "value 299")
        #expect(store.lastRecovery == nil)
    }

    /// A write whose bytes give the check word but whose records do not verify (one byte of a record changed and the
    /// check written again over the changed bytes, as a writer of the file could): the check alone does not take it.
    /// An open, `verify` and a peer handle's next write (which resolves it) all leave it out; the next write goes
    /// where it was.
    @Test(arguments: [false, true])
    func aWriteThatGivesTheCheckButDoesNotVerifyIsNotThere(sealed: Bool) throws {
        var cut = try Self.cutAfterFlush(sealed: sealed)
        cut.bytes[cut.end - 6] ^= 0x40
        let check = cut.bytes.withUnsafeBytes { Format.pendingCheck($0, logEnd: cut.start, end: cut.end) }
        withUnsafeBytes(of: check.littleEndian) {
            cut.bytes.replaceSubrange(Format.pendingCheckOffset..<Format.pendingCheckOffset + 8, with: $0)
        }
        let dir = try TempDir("pending-check-not-records", memory: true)
        var before = cut.bytes
        before.replaceSubrange(Format.pendingWordOffset..<Format.pendingWordOffset + 16, with: [UInt8](repeating: 0, count: 16))
        try writeBytes(before, to: dir.file("ui.prefs"))
        // A peer handle open before the write was left, which resolves it at its next write.
        let peer = try openStore(dir, Self.configure(sealed))
        try Self.writeInPlace(Array(cut.bytes[Format.pendingWordOffset..<Format.pendingWordOffset + 16]), at: Format.pendingWordOffset, of: dir.file("ui.prefs"))
        let sealer = sealed ? TestSealer(key: 5) : nil
        #expect(try PrefsStore.verify(id: "ui", directory: dir.path, sealer: sealer).recordsVerified == 1)
        let store = try openStore(dir, Self.configure(sealed))
        #expect(try store.string(forKey: "a") == "1")
        #expect(store.lastRecovery == nil)
        try peer.set("3", forKey: "b")
        let after = try readBytes(dir.file("ui.prefs"))
        #expect(Self.logEnd(after) == cut.end, "b's write went where the write left out was")
        #expect(try peer.string(forKey: "a") == "1")
        #expect(try store.string(forKey: "b") == "3")
        #expect(try PrefsStore.verify(id: "ui", directory: dir.path, sealer: sealer).isClean)
    }

    /// A pending word whose check word does not give the bytes it names (one bit of the check flipped here; bytes of
    /// another write left there, in the next test) names nothing: the write is not there and nothing is reported.
    @Test func aWriteWhoseBytesDoNotGiveTheCheckIsNotThere() throws {
        var cut = try Self.cutAfterFlush(sealed: false)
        cut.bytes[Format.pendingCheckOffset] ^= 0x01
        let dir = try TempDir("pending-check", memory: true)
        try writeBytes(cut.bytes, to: dir.file("ui.prefs"))
        #expect(try PrefsStore.verify(id: "ui", directory: dir.path).recordsVerified == 1)
        let store = try openStore(dir, Self.configure(false))
        #expect(try store.string(forKey: "a") == "1")
        #expect(store.lastRecovery == nil)
    }

    /// Two transactions of the same shape written at the same place with the same sequence number (two copies of one
    /// store, as a write forgotten after a power cut and the next one are): the bytes a power cut can leave, the
    /// second's commit and pending word with a member of the first, verify record by record, and would read as a
    /// state nobody wrote. The check word over the write's bytes refuses them: neither write is there.
    @Test func aWriteMixedWithAnotherOfTheSameShapeIsNotThere() throws {
        let source = try TempDir("pending-mix-source", memory: true)
        do {
            let store = try openStore(source, Self.configure(false))
            try store.set("0", forKey: "a")
            try store.set("0", forKey: "b")
        }
        let base = try readBytes(source.file("ui.prefs"))
        func written(_ value: String) throws -> [UInt8] {
            let dir = try TempDir("pending-mix-\(value)", memory: true)
            try writeBytes(base, to: dir.file("ui.prefs"))
            let store = try openStore(dir, Self.configure(false))
            try store.write { tx in
                try tx.set(value, forKey: "a")
                try tx.set(value, forKey: "b")
            }
            return try readBytes(dir.file("ui.prefs"))
        }
        let first = try written("9")
        var mixed = try written("2")
        let start = Self.logEnd(base)
        let end = Self.logEnd(mixed)
        try #require(Self.logEnd(first) == end, "the two writes have one shape")
        // The log end before the write, and the first write's first member (a's set) under the second's commit.
        mixed.replaceSubrange(Format.logEndOffset..<Format.logEndOffset + 8, with: base[Format.logEndOffset..<Format.logEndOffset + 8])
        let member = mixed.withUnsafeBytes { RecordHeader.plausible(in: $0, at: start, limit: end)!.length }
        mixed.replaceSubrange(start..<start + member, with: first[start..<start + member])
        try #require(mixed[start..<end] != first[start..<end])
        let dir = try TempDir("pending-mix", memory: true)
        try writeBytes(mixed, to: dir.file("ui.prefs"))
        let store = try openStore(dir, Self.configure(false))
        #expect(try store.string(forKey: "a") == "0")
        #expect(try store.string(forKey: "b") == "0")
        #expect(store.lastRecovery == nil)
    }

    /// A read-only handle that read a left write at its open, when a writer then forgets it (here its bytes were
    /// changed after the read-only open: the writer finds them torn) and writes at its place, reads the file again:
    /// the writer's state, never the write it had read nor bytes from the middle of the new one.
    @Test(arguments: [false, true])
    func aReadOnlyHandleThatReadALeftWriteFollowsTheWriterThatResolvesIt(forgotten: Bool) throws {
        let cut = try Self.cutAfterFlush(sealed: false)
        let dir = try TempDir("pending-read-only", memory: true)
        try writeBytes(cut.bytes, to: dir.file("ui.prefs"))
        let reader = try openStore(dir) { $0.readOnly = true }
        #expect(try reader.string(forKey: "a") == "2")
        #expect(Self.logEnd(try readBytes(dir.file("ui.prefs"))) == cut.start, "a read-only open publishes nothing")
        if forgotten {
            try Self.writeInPlace([cut.bytes[cut.end - 6] ^ 0x40], at: cut.end - 6, of: dir.file("ui.prefs"))
        }
        let writer = try openStore(dir, Self.configure(false))
        // (Longer than the write the reader read: after a forget it runs past that write's end.)
        let value = String(repeating: "3", count: 100)
        try writer.set(value, forKey: "b")
        #expect(try writer.string(forKey: "a") == (forgotten ? "1" : "2"))
        #expect(try reader.string(forKey: "b") == value)
        #expect(try reader.string(forKey: "a") == (forgotten ? "1" : "2"))
        #expect(reader.lastRecovery == nil)
        #expect(try reader.verify().isClean)
    }

    /// A log-end word whose check bits hold but whose offset is no log end (not a multiple of 8, or inside the
    /// header page), with a pending word whose check bits hold beside it: no write is taken from it and nothing
    /// traps; the open, `verify` and a read-only open report or recover the damaged log end as they would without it.
    @Test(arguments: [4100, 2048])
    func aPendingWordBesideALogEndThatIsNoneNamesNothing(logEnd: Int) throws {
        var cut = try Self.cutAfterFlush(sealed: false)
        func store(_ word: UInt64, at offset: Int) {
            withUnsafeBytes(of: word.littleEndian) { cut.bytes.replaceSubrange(offset..<offset + 8, with: $0) }
        }
        store(Format.encodeLogEnd(logEnd), at: Format.logEndOffset)
        store(Format.encodePending(end: cut.end, logEnd: logEnd), at: Format.pendingWordOffset)
        let dir = try TempDir("pending-no-log-end", memory: true)
        try writeBytes(cut.bytes, to: dir.file("ui.prefs"))
        #expect(!(try PrefsStore.verify(id: "ui", directory: dir.path).isClean))
        #expect(try readBytes(dir.file("ui.prefs")) == cut.bytes)
        let reader = try openStore(dir) { $0.readOnly = true }
        _ = try reader.string(forKey: "a")
        let store = try openStore(dir, Self.configure(false))
        #expect(store.lastRecovery != nil)
        try store.set("3", forKey: "b")
        #expect(try store.string(forKey: "b") == "3")
    }

    /// A writable handle that read a left write when it reopened a file changed underneath it (here the bytes of a
    /// cut put in place of its file), and then finds that write's bytes no longer giving the check (a byte of it
    /// changed after), does not publish what it read: it reads the file again, the write is forgotten, and its own
    /// write goes where that one was.
    @Test func aWriterThatReadALeftWriteNoLongerThereReadsTheFileAgain() throws {
        let cut = try Self.cutAfterFlush(sealed: false)
        let dir = try TempDir("pending-stale-writer", memory: true)
        let store = try openStore(dir, Self.configure(false))
        try store.set("x", forKey: "a")
        let fd = open(dir.file("ui.prefs"), O_RDWR)
        try #require(fd >= 0)
        defer { close(fd) }
        try #require(ftruncate(fd, off_t(cut.bytes.count)) == 0)
        #expect(pwrite(fd, cut.bytes, cut.bytes.count, 0) == cut.bytes.count)
        #expect(try store.string(forKey: "a") == "2", "the handle reopened the file and read the left write")
        try Self.writeInPlace([cut.bytes[cut.end - 6] ^ 0x40], at: cut.end - 6, of: dir.file("ui.prefs"))
        try store.set("3", forKey: "b")
        #expect(try store.string(forKey: "a") == "1")
        #expect(try store.string(forKey: "b") == "3")
        let after = try readBytes(dir.file("ui.prefs"))
        #expect(Self.logEnd(after) == cut.end)
        let reopened = try openStore(dir, Self.configure(false))
        #expect(try reopened.string(forKey: "a") == "1")
        #expect(try reopened.string(forKey: "b") == "3")
        #expect(try reopened.verify().isClean)
    }

    /// The pending word, its check and the log end lie in one 512-byte sector of the header page: a sector written
    /// whole holds all three as one flush left them.
    @Test func thePendingWordSharesTheLogEndsSector() {
        #expect(Format.pendingWordOffset / 512 == Format.logEndOffset / 512)
        #expect(Format.pendingCheckOffset / 512 == Format.logEndOffset / 512)
    }

    /// A version-6 file (written by the previous release, whose readers know no pending word) keeps two flushes a
    /// synchronous write, never stores a pending word, and one planted there names nothing: records past its log
    /// end stay out, for an open, `verify` and the next write.
    @Test func aVersion6StoreIgnoresThePendingWordAndFlushesTwice() throws {
        let cut = try Self.cutAfterFlush(sealed: false)
        let version6 = try withFormatVersion(6, cut.bytes)
        try #require(version6[Format.versionOffset] == 6)
        let dir = try TempDir("pending-v6", memory: true)
        try writeBytes(version6, to: dir.file("ui.prefs"))
        let report = try PrefsStore.verify(id: "ui", directory: dir.path)
        #expect(report.isClean && report.recordsVerified == 1, "\(report)")
        let store = try openStore(dir, Self.configure(false))
        #expect(try store.string(forKey: "a") == "1")
        let recorder = FlushRecorder(directory: dir.path)
        PrefsSyncProbe.install { recorder.observe($0) }
        defer { PrefsSyncProbe.install(nil) }
        for i in 0..<10 { try store.set("\(i)", forKey: "b") }
        PrefsSyncProbe.install(nil)
        let flushes = recorder.take().filter { if case .data = $0 { true } else { false } }
        #expect(flushes.count == 20)
        let after = try readBytes(dir.file("ui.prefs"))
        #expect(after[Format.versionOffset] == 6)
        #expect(Self.logEnd(after) == cut.start + 10 * (cut.end - cut.start))
        #expect(after[Format.pendingWordOffset..<Format.pendingWordOffset + 8] == cut.bytes[Format.pendingWordOffset..<Format.pendingWordOffset + 8])
        let reopened = try openStore(dir, Self.configure(false))
        #expect(try reopened.string(forKey: "a") == "1")
        #expect(try reopened.string(forKey: "b") == "9")
    }
}
