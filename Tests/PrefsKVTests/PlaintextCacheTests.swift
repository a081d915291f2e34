// Issue 39: a sealed store's opt-in plaintext cache (`Configuration.cachesPlaintext`). A cached read answers
// without the sealer while the record it opened is the one the store means; anything else (a value written by this
// handle, another handle or another process, a delete, an expiry, a compaction, a rekey, a damaged or replaced
// record) is read as without the cache. Off, every read opens its record. The sealer here counts its opens: what the
// cache saves, and what it must not, is observed, not timed. The racing second writer is in ConcurrentWriterTests.
import Foundation
import Glibc
import Synchronization
import SystemLayer
import TestSealer
import TestSupport
import Testing

@testable import PrefsKV

/// The tests' sealer, counting the values it opens.
private final class CountingSealer: PrefsSealer {
    let inner: TestSealer
    private let opened = Atomic<Int>(0)

    init(key: UInt64) { inner = TestSealer(key: key) }

    var opens: Int { opened.load(ordering: .relaxed) }
    var keyCheck: [UInt8] { inner.keyCheck }
    var tagsAreCheap: Bool { inner.tagsAreCheap }
    var overhead: Int { inner.overhead }
    var acceptsUnauthenticatedLog: Bool { inner.acceptsUnauthenticatedLog }
    func tag(forKey key: String) -> [UInt8] { inner.tag(forKey: key) }

    func seal(
        _ plaintext: UnsafeRawBufferPointer, associatedData: UnsafeRawBufferPointer,
        into output: UnsafeMutableRawBufferPointer
    ) throws {
        try inner.seal(plaintext, associatedData: associatedData, into: output)
    }

    func open<R>(
        _ sealed: UnsafeRawBufferPointer, associatedData: UnsafeRawBufferPointer,
        _ body: (UnsafeRawBufferPointer) throws -> R
    ) throws -> R {
        opened.add(1, ordering: .relaxed)
        return try inner.open(sealed, associatedData: associatedData, body)
    }

    func authenticate(
        context: UnsafeRawBufferPointer, record: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer
    ) {
        inner.authenticate(context: context, record: record, into: output)
    }
}

@Suite struct PlaintextCacheTests {
    private func open(_ dir: TempDir, _ sealer: any PrefsSealer, caching: Bool = true) throws -> PrefsStore {
        try openStore(dir) {
            $0.sealer = sealer
            $0.cachesPlaintext = caching
            $0.recovery = .fail
            $0.autoCompactionThreshold = nil
        }
    }

    /// How many values the store's plaintext cache holds (-1: none).
    private func cachedCount(_ store: PrefsStore) -> Int {
        store.engine.withLock { e in
            guard case .sealed(let codec) = e.codec else { return -1 }
            return codec.plaintexts?.count ?? -1
        }
    }

    /// Opens counted while `body` runs.
    private func opens(_ sealer: CountingSealer, _ body: () throws -> Void) rethrows -> Int {
        let before = sealer.opens
        try body()
        return sealer.opens - before
    }

    /// Off (the default), every read opens its record: no plaintext is kept. On, a key is opened once, then read
    /// from the cache, for each kind of read (typed get, `value(forKey:)`, `data`), with the same answers.
    @Test(arguments: [UInt64(39), 40])  // tags cheap (odd keys) and remembered (even)
    func cachedReadsOpenOnceAndDefaultReadsEveryTime(key: UInt64) throws {
        let dir = try TempDir("cache-count", memory: true)
        let sealer = CountingSealer(key: key)
        do {
            let store = try open(dir, sealer, caching: false)
            try store.set(7, forKey: "n")
            try store.set("dark", forKey: "theme")
            try store.set(Data([1, 2, 3]), forKey: "blob")
            let opened = try opens(sealer) { () throws in for _ in 0..<10 { #expect(try store.int(forKey: "n") == 7) } }
            #expect(opened == 10)
        }
        #expect(PrefsStore.Configuration().cachesPlaintext == false, "the cache is opt-in")
        let store = try open(dir, sealer)
        let first = try opens(sealer) { () throws in #expect(try store.int(forKey: "n") == 7) }
        #expect(first == 1)
        let again = try opens(sealer) { () throws in
            for _ in 0..<10 {
                #expect(try store.int(forKey: "n") == 7)
                #expect(try store.string(forKey: "theme") == "dark")
                #expect(try store.data(forKey: "blob") == Data([1, 2, 3]))
                #expect(try store.value(forKey: "theme") == .string("dark"))
            }
        }
        #expect(again == 2, "theme and blob opened once each, n not again")
        #expect(throws: PrefsError.self, "a cached key of another type") { try store.string(forKey: "n") }
        #expect(try store.int(forKey: "missing") == nil)
    }

    /// What this handle, another handle and another process write, delete or let expire is what the next read of a
    /// cached key answers.
    @Test func aCachedKeyReadsWhatWasWrittenSinceWhereverItWasWritten() throws {
        let dir = try TempDir("cache-writes", memory: true)
        let sealer = CountingSealer(key: 41)
        let store = try open(dir, sealer)
        try store.set("one", forKey: "k")
        #expect(try store.string(forKey: "k") == "one")
        // This handle.
        try store.set("two", forKey: "k")
        #expect(try store.string(forKey: "k") == "two")
        // Another handle of this process, without the cache.
        let other = try open(dir, TestSealer(key: 41), caching: false)
        try other.set("three", forKey: "k")
        #expect(try store.string(forKey: "k") == "three")
        // Another process.
        let child = try Child(["prefs-set", dir.path, "ui", "k", "four", "41"])
        #expect(child.waitForLine { $0 == "ok" } != nil)
        #expect(child.drain() == 0)
        #expect(try store.string(forKey: "k") == "four")
        // A transaction elsewhere, a delete.
        try other.write { tx in try tx.set("five", forKey: "k") }
        #expect(try store.string(forKey: "k") == "five")
        try other.removeValue(forKey: "k")
        #expect(try store.string(forKey: "k") == nil)
        try other.set("seven", forKey: "k")
        #expect(try store.string(forKey: "k") == "seven")
        #expect(try store.string(forKey: "k") == "seven")
    }

    /// A cached value that expires is not answered once it has, with nothing written in between (no change of the
    /// index to send the read elsewhere): the cache's own test of the expiry. The value must have been read twice
    /// (opened, then from the cache) before it expires: on a machine too slow for that, a longer expiry is tried.
    @Test func anExpiredValueIsNotAnsweredFromTheCache() throws {
        let dir = try TempDir("cache-expiry", memory: true)
        let sealer = CountingSealer(key: 51)
        let store = try open(dir, sealer)
        var cachedBeforeExpiry = false
        for lifetime in [200, 2_000, 20_000] {
            try store.set("soon gone", forKey: "k", expiresAfter: .milliseconds(lifetime))
            let stored = try store.engine.withLock { e throws(PrefsError) in try e.liveEntry(forName: "k") }
            guard let expiresAt = stored?.expiresAt else { continue }  // expired already: a longer one
            let first = try store.string(forKey: "k")
            let opensBefore = sealer.opens
            let second = try store.string(forKey: "k")
            guard Sys.nowMilliseconds() < expiresAt, first == "soon gone", second == "soon gone" else { continue }
            #expect(sealer.opens == opensBefore, "the second read came from the cache")
            while Sys.nowMilliseconds() <= expiresAt { usleep(10_000) }
            #expect(try store.string(forKey: "k") == nil, "an expired value is not answered from the cache")
            cachedBeforeExpiry = true
            break
        }
        #expect(cachedBeforeExpiry)
    }

    /// A compaction (a new image) and a rekey (a new sealer) drop what the cache holds: each key is opened again,
    /// by the new sealer after a rekey, and answers the same.
    @Test func aCompactionOrARekeyOpensEachKeyAgain() throws {
        let dir = try TempDir("cache-images", memory: true)
        let sealer = CountingSealer(key: 43)
        let store = try open(dir, sealer)
        for i in 0..<5 { try store.set(i, forKey: "k\(i)") }
        let read = { () throws in for i in 0..<5 { #expect(try store.int(forKey: "k\(i)") == i) } }
        let (first, second) = (try opens(sealer, read), try opens(sealer, read))
        #expect(first == 5 && second == 0)
        try store.compact()
        let firstAfter = try opens(sealer) { () throws in #expect(try store.int(forKey: "k0") == 0) }
        #expect(firstAfter == 1, "a new image: the value opened again")
        #expect(cachedCount(store) == 1, "the first read after the compaction dropped the former image's values")
        let afterCompaction = try opens(sealer, read)
        #expect(afterCompaction == 4, "a new image: every other value opened again")
        #expect(cachedCount(store) == 5)
        let newSealer = CountingSealer(key: 45)
        let beforeRekey = sealer.opens
        try store.rekey(to: newSealer)
        #expect(sealer.opens - beforeRekey == 5, "the rekey opened each value once with the old sealer")
        let (third, fourth) = (try opens(newSealer, read), try opens(newSealer, read))
        #expect(third == 5 && fourth == 0)
        #expect(sealer.opens - beforeRekey == 5, "nothing opened with the old sealer after the rekey")
    }

    /// Every single byte of a cached record flipped in the file, one at a time: the cached handle answers what a
    /// handle without the cache answers (a byte the seal covers: the damage is found, never the cached value), and
    /// the value again once the byte is restored. Real bytes in the real file, through the library.
    @Test func aCachedRecordDamagedAnywhereIsReadAsWithoutTheCache() throws {
        let dir = try TempDir("cache-damage", memory: true)
        let sealer = TestSealer(key: 47)
        let value = "layout=" + String(repeating: "w", count: 40)
        let cached = try open(dir, sealer)
        try cached.set(value, forKey: "layout")
        let plain = try open(dir, sealer, caching: false)
        let path = dir.file("ui.prefs")
        let live = try cached.engine.withLock { e throws(PrefsError) in try e.liveEntry(forName: "layout") }
        let entry = try #require(live)
        let (offset, length) = (entry.recordOffset, entry.recordLength)
        // What the seal covers, from the kind byte to the value's end (a read, cached or not, opens these; the magic,
        // the padding and the CRC word are checked by verify and by a failed read's check, `checkingUnderneath`).
        let sealedBytes = offset + 4..<entry.valueOffset + entry.valueLength
        let original = try readBytes(path)
        func answer(_ store: PrefsStore) -> String {
            do { return try store.string(forKey: "layout") ?? "absent" } catch let error as PrefsError {
                return "\(error.code)"
            } catch { return "\(error)" }
        }
        #expect(answer(cached) == value)
        var found = 0
        for at in offset..<offset + length {
            var damaged = original
            damaged[at] ^= 0x20
            try rewrite(path, damaged)
            let without = answer(plain)
            let with = answer(cached)
            #expect(with == without, "byte \(at - offset) of the record")
            if sealedBytes.contains(at) {
                #expect(with != value, "byte \(at - offset): the damage is found")
                if with != value { found += 1 }
            }
            try rewrite(path, original)
            #expect(answer(cached) == value && answer(plain) == value)
        }
        #expect(found == sealedBytes.count)
        #expect(try readBytes(path) == original)
    }

    /// A record another value's bytes were put back over, at the same place and of the same padded length but not of
    /// the same value length as the record the index now means there: the cached handle answers what a read without
    /// the cache does (the record, cut as the index says, does not open: `tampered`), never the value it cached from
    /// the bytes put back. The file goes back to an older copy (as `cp` does, in place), the handle writes a new value
    /// where the cached one was, and the cached record's bytes are written back over it.
    @Test(arguments: [false, true])  // read typed, or as a `PrefsValue` (the reads that have their entry already)
    func aRecordPutBackWhereTheIndexMeansAnotherIsReadAsWithoutTheCache(asValue: Bool) throws {
        let dir = try TempDir("cache-put-back", memory: true)
        let sealer = TestSealer(key: 53)
        let path = dir.file("ui.prefs")
        let writer = try open(dir, sealer, caching: false)
        try writer.set("x", forKey: "pad")
        let older = try readBytes(path)
        try writer.set("abcd", forKey: "k")
        let cached = try open(dir, sealer)
        #expect(try cached.string(forKey: "k") == "abcd")
        let first = try cached.engine.withLock { e throws(PrefsError) in try e.liveEntry(forName: "k") }
        let entry = try #require(first)
        let putBack = Array(try readBytes(path)[entry.recordOffset..<entry.recordOffset + entry.recordLength])
        // The older copy over the file, in place; this handle appends a new value of one more byte where "abcd" was.
        try rewrite(path, older, truncating: true)
        try cached.set("abcde", forKey: "k")
        let second = try cached.engine.withLock { e throws(PrefsError) in try e.liveEntry(forName: "k") }
        let now = try #require(second)
        try #require(now.recordOffset == entry.recordOffset && now.recordLength == entry.recordLength)
        try #require(now.valueLength == entry.valueLength + 1)
        // The cached record's bytes back at their place.
        var bytes = try readBytes(path)
        bytes.replaceSubrange(entry.recordOffset..<entry.recordOffset + entry.recordLength, with: putBack)
        try rewrite(path, bytes)
        let answer: String
        do {
            if asValue {
                answer = try cached.value(forKey: "k").map { "\($0)" } ?? "absent"
            } else {
                answer = try cached.string(forKey: "k") ?? "absent"
            }
        } catch let error as PrefsError {
            answer = "\(error.code)"
        }
        #expect(
            answer != "abcd" && answer != "\(PrefsValue.string("abcd"))", "the value cached from the bytes put back")
        #expect(answer == "tampered" || answer == "corrupted" || answer == "changedUnderneath")
    }

    /// Writes `bytes` over the file in place (same inode), as a second writer of the file does.
    private func rewrite(_ path: String, _ bytes: [UInt8], truncating: Bool = false) throws {
        let fd = Glibc.open(path, O_WRONLY | (truncating ? O_TRUNC : 0))
        guard fd >= 0 else { throw TestFailure("open \(path): errno \(errno)") }
        defer { close(fd) }
        guard bytes.withUnsafeBytes({ pwrite(fd, $0.baseAddress, $0.count, 0) }) == bytes.count else {
            throw TestFailure("pwrite \(path): errno \(errno)")
        }
    }

    /// Threads of one handle reading through the cache while another writes: each reader sees every key's values in
    /// the order they were written, never one nobody wrote (TSAN runs it in `make torture`).
    @Test func threadsReadingThroughTheCacheWhileOneWritesSeeValuesInOrder() throws {
        let dir = try TempDir("cache-threads", memory: true)
        let store = try open(dir, TestSealer(key: 49))
        let keys = (0..<8).map { "k\($0)" }
        for key in keys { try store.set(0, forKey: key) }
        let rounds = Torture.count("CACHE_ROUNDS", short: 300, long: 3_000)
        let wrong = Mutex<[String]>([])
        DispatchQueue.concurrentPerform(iterations: 3) { thread in
            do {
                if thread == 0 {
                    for n in 1...rounds { try store.set(n, forKey: keys[n % keys.count]) }
                    return
                }
                var last = [Int](repeating: 0, count: keys.count)
                for i in 0..<rounds * 4 {
                    let k = i % keys.count
                    guard let n = try store.int(forKey: keys[k]), n >= last[k], n <= rounds else {
                        wrong.withLock { $0.append("thread \(thread) \(keys[k]) after \(last[k])") }
                        return
                    }
                    last[k] = n
                }
            } catch {
                wrong.withLock { $0.append("\(error)") }
            }
        }
        #expect(wrong.withLock { $0 }.isEmpty)
        for (k, key) in keys.enumerated() {
            let newest = (1...rounds).last { $0 % keys.count == k } ?? 0
            #expect(try store.int(forKey: key) == newest)
        }
    }

    /// A plain store has nothing to cache: the option changes nothing.
    @Test func aPlainStoreIgnoresTheOption() throws {
        let dir = try TempDir("cache-plain", memory: true)
        let store = try openStore(dir) { $0.cachesPlaintext = true }
        try store.set(1, forKey: "a")
        #expect(try store.int(forKey: "a") == 1)
        #expect(store.engine.withLock { e in if case .plain = e.codec { true } else { false } })
    }
}
