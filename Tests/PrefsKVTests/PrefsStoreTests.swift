import Foundation
import Synchronization
import TestSupport
import Testing

@testable import PrefsKV

struct Layout: Codable, Equatable {
    var columns: Int
    var title: String
}

@Suite struct PrefsStoreTests {
    @Test func everyTypeRoundTripsAndSurvivesReopen() throws {
        let dir = try TempDir()
        let bigData = Data((0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        do {
            let store = try openStore(dir)
            try store.set(true, forKey: "bool")
            try store.set(false, forKey: "boolFalse")
            try store.set(42, forKey: "int")
            try store.set(Int64.min, forKey: "int64min")
            try store.set(Int64.max, forKey: "int64max")
            try store.set(-0.0, forKey: "negativeZero")
            try store.set(Double.nan, forKey: "nan")
            try store.set(-Double.infinity, forKey: "minusInfinity")
            try store.set(0.1, forKey: "double")
            try store.set("", forKey: "emptyString")
            try store.set("dark ☾ 🌙", forKey: "string")
            try store.set(Data(), forKey: "emptyData")
            try store.set(bigData, forKey: "data")
            try store.set([String](), forKey: "noStrings")
            try store.set(["a", "", "ünïcødé", String(repeating: "x", count: 1000)], forKey: "strings")
            try store.setCodable(Layout(columns: 3, title: "main"), forKey: "layout")
            try store.set("ключ", forKey: "ключ 🔑")
        }
        let store = try openStore(dir)
        #expect(try store.bool(forKey: "bool") == true)
        #expect(try store.bool(forKey: "boolFalse") == false)
        #expect(try store.int(forKey: "int") == 42)
        #expect(try store.int64(forKey: "int64min") == Int64.min)
        #expect(try store.int64(forKey: "int64max") == Int64.max)
        #expect(try store.double(forKey: "negativeZero")?.bitPattern == (-0.0).bitPattern)
        #expect(try store.double(forKey: "nan")?.isNaN == true)
        #expect(try store.double(forKey: "minusInfinity") == -Double.infinity)
        #expect(try store.double(forKey: "double") == 0.1)
        #expect(try store.string(forKey: "emptyString") == "")
        #expect(try store.string(forKey: "string") == "dark ☾ 🌙")
        #expect(try store.data(forKey: "emptyData") == Data())
        #expect(try store.data(forKey: "data") == bigData)
        #expect(try store.strings(forKey: "noStrings") == [])
        #expect(try store.strings(forKey: "strings") == ["a", "", "ünïcødé", String(repeating: "x", count: 1000)])
        #expect(try store.decode(Layout.self, forKey: "layout") == Layout(columns: 3, title: "main"))
        #expect(try store.string(forKey: "ключ 🔑") == "ключ")
        #expect(try store.count == 17)
        let keys = try store.allKeys
        #expect(keys == keys.sorted())
        #expect(try store.verify().isClean)
    }

    @Test func absentKeysReadAsNil() throws {
        let dir = try TempDir()
        let store = try openStore(dir)
        #expect(try store.bool(forKey: "missing") == nil)
        #expect(try store.int64(forKey: "missing") == nil)
        #expect(try store.string(forKey: "missing") == nil)
        #expect(try store.decode(Layout.self, forKey: "missing") == nil)
        #expect(try store.contains("missing") == false)
        #expect(try store.count == 0)
    }

    @Test func readingAnotherTypeThrowsTypeMismatch() throws {
        let dir = try TempDir()
        let store = try openStore(dir)
        try store.set("dark", forKey: "theme")
        try store.set(1, forKey: "n")
        expectError(.typeMismatch) { try store.int64(forKey: "theme") }
        expectError(.typeMismatch) { try store.bool(forKey: "n") }
        expectError(.typeMismatch) { try store.double(forKey: "n") }
        expectError(.typeMismatch) { try store.decode(Layout.self, forKey: "theme") }
        try store.setCodable(["x": 1], forKey: "json")
        expectError(.typeMismatch) { try store.decode(Layout.self, forKey: "json") }
        do {
            _ = try store.string(forKey: "n")
            Issue.record("no error")
        } catch let error as PrefsError {
            #expect(error.message.contains("\"n\"") && error.message.contains("int"))
        }
    }

    @Test func keysAreTheirBytesInMemoryAndAfterAReopen() throws {
        let dir = try TempDir("key-bytes")
        let precomposed = "caf\u{E9}"
        let combining = "cafe\u{301}"
        do {
            let store = try openStore(dir)
            try store.set(1, forKey: precomposed)
            try store.set(2, forKey: combining)
            #expect(try store.count == 2)
            #expect(try store.int(forKey: precomposed) == 1)
            #expect(try store.int(forKey: combining) == 2)
            try store.write { tx in
                try tx.set(3, forKey: precomposed)
                tx.removeValue(forKey: combining)
            }
            try store.set(4, forKey: combining)
        }
        let reopened = try openStore(dir)
        #expect(try reopened.int(forKey: precomposed) == 3)
        #expect(try reopened.int(forKey: combining) == 4)
        #expect(
            try reopened.allKeys.map { Array($0.utf8) }.sorted { $0.lexicographicallyPrecedes($1) }
                == [Array(precomposed.utf8), Array(combining.utf8)].sorted { $0.lexicographicallyPrecedes($1) })
    }

    @Test func invalidKeysIdsAndOversizedValuesAreRejected() throws {
        let dir = try TempDir()
        let store = try openStore(dir)
        expectError(.invalidKey) { try store.set(1, forKey: "") }
        expectError(.invalidKey) {
            try store.set(1, forKey: String(repeating: "k", count: 16 * 1024 + 1))
        }
        try store.set(1, forKey: String(repeating: "k", count: 16 * 1024))
        expectError(.valueTooLarge) {
            try store.set(Data(count: 64 * 1024 * 1024 + 1), forKey: "big")
        }
        for id in ["", "..", ".", "a/b", "../x", "a..b", String(repeating: "i", count: 129), "sp ace"] {
            expectError(.invalidKey) { try openStore(dir, id: id) }
        }
        #expect(try store.count == 1)
    }

    /// In a child process whose umask is 0 (the umask is the whole process's: set here, it would reach every test
    /// running beside this one, and two such tests could leave it at 0).
    @Test func filesAreCreatedPrivateRegardlessOfUmask() throws {
        let dir = try TempDir()
        let nested = dir.file("a/b")
        let result = try ChildProcess.run(
            "/bin/sh", ["-c", "umask 0 && exec \"$@\"", "sh", helperPath, "prefs-set", nested, "ui", "theme", "dark"])
        #expect(result.status == 0 && result.standardOutput == "ok\n", "\(result)")
        #expect(fileMode(dir.file("a")) == 0o700)
        #expect(fileMode(nested) == 0o700)
        #expect(fileMode(nested + "/ui.prefs") == 0o600)
        #expect(fileMode(nested + "/ui.prefs.lock") == 0o600)
    }

    /// A relative directory names a directory under the working directory: it is created there (mode 0700, its
    /// parent too) and the store lives in it; nothing appears under `/`. Run in a child process whose working
    /// directory is a fresh temporary one (tests share this process's working directory, so none changes it).
    @Test func relativeDirectoryIsCreatedUnderTheWorkingDirectory() throws {
        let dir = try TempDir()
        let top = "rel-\(UInt32.random(in: 0...UInt32.max))"
        defer { _ = try? FileManager.default.removeItem(atPath: "/" + top) }
        let relative = top + "/state"
        let inDirectory = ["-c", "cd \"$1\" && shift && exec \"$@\"", "sh", dir.path]
        let result = try ChildProcess.run(
            "/bin/sh", inDirectory + [helperPath, "prefs-set", relative, "ui", "theme", "dark"])
        #expect(result.status == 0 && result.standardOutput == "ok\n", "\(result)")
        #expect(!FileManager.default.fileExists(atPath: "/" + top), "a relative directory was created under /")
        #expect(fileMode(dir.file(top)) == 0o700)
        #expect(fileMode(dir.file(relative)) == 0o700)
        let store = try PrefsStore(id: "ui", directory: dir.file(relative))
        #expect(try store.string(forKey: "theme") == "dark")
    }

    /// In a child process with its own environment (this process's is every test's, read by `AppDirectoryTests`
    /// and copied into every child a test starts).
    @Test func defaultDirectoryFollowsXDGDataHome() throws {
        let result = try ChildProcess.run(
            helperPath, ["prefs-default-directory"], environment: ["XDG_DATA_HOME": "/srv/data"])
        #expect(result.status == 0 && result.standardOutput == "/srv/data/prefskv\n", "\(result)")
    }

    @Test func expiredValuesReadAsAbsentAndCountAsGarbage() throws {
        let dir = try TempDir()
        let store = try openStore(dir)
        try store.set("later", forKey: "long", expiresAfter: .seconds(3600))
        try store.set("gone", forKey: "already", expiresAfter: .zero)
        // A value reads back until its expiry. That is checked on a read that ended before the expiry could have
        // come (the store's clock is the wall clock, in milliseconds): a loaded machine may stall for more than
        // 150 ms between the write and the read, and then the write is made again rather than the read judged.
        var lastWriteReturned: Int64 = 0
        var readBeforeExpiry = false
        for _ in 0..<1000 where !readBeforeExpiry {
            let beforeWrite = wallClockMilliseconds()
            try store.set("soon", forKey: "short", expiresAfter: .milliseconds(150))
            lastWriteReturned = wallClockMilliseconds()
            let value = try store.string(forKey: "short")
            if wallClockMilliseconds() < beforeWrite + 150 {
                #expect(value == "soon")
                readBeforeExpiry = true
            }
        }
        #expect(readBeforeExpiry, "no read ended within 150 ms of its write in 1000 tries")
        #expect(try store.string(forKey: "already") == nil)
        #expect(try store.contains("already") == false)
        // Waits for the expiry itself (the last write's expiry is at most 150 ms after it returned).
        while wallClockMilliseconds() <= lastWriteReturned + 150 { usleep(10_000) }
        #expect(try store.string(forKey: "short") == nil)
        #expect(try store.string(forKey: "long") == "later")
        #expect(try store.count == 1)
        #expect(try store.allKeys == ["long"])
        let stats = try store.stats()
        #expect(stats.keyCount == 1)
        #expect(stats.liveBytes < stats.logBytes)
        // Setting an expired key's old value again writes it again (it must become visible).
        try store.set("gone", forKey: "already")
        #expect(try store.string(forKey: "already") == "gone")
        // Expiry survives reopening, and compaction drops expired records.
        let reopened = try openStore(dir)
        #expect(try reopened.string(forKey: "short") == nil)
        #expect(try reopened.string(forKey: "long") == "later")
        try reopened.compact()
        let stats2 = try reopened.stats()
        #expect(stats2.logBytes == stats2.liveBytes)
    }

    @Test func settingAnUnchangedValueWritesNothing() throws {
        let dir = try TempDir()
        let store = try openStore(dir)
        let notified = Mutex(0)
        let observation = store.observe { _ in notified.withLock { $0 += 1 } }
        try store.set("dark", forKey: "theme")
        try store.setCodable(Layout(columns: 2, title: "t"), forKey: "layout")
        try store.set(["a", "b"], forKey: "tags")
        let before = try store.stats()
        let fileBefore = try readBytes(store.path)
        try store.set("dark", forKey: "theme")
        try store.setCodable(Layout(columns: 2, title: "t"), forKey: "layout")
        try store.set(["a", "b"], forKey: "tags")
        try store.write { tx in try tx.set("dark", forKey: "theme") }
        try store.removeValue(forKey: "never-set")
        #expect(try store.stats().logBytes == before.logBytes)
        #expect(try readBytes(store.path) == fileBefore)
        #expect(notified.withLock { $0 } == 3)
        // A changed value, type or expiry does write.
        try store.set("light", forKey: "theme")
        #expect(try store.stats().logBytes > before.logBytes)
        let mid = try store.stats().logBytes
        try store.set("light", forKey: "theme", expiresAfter: .seconds(60))
        #expect(try store.stats().logBytes > mid)
        #expect(notified.withLock { $0 } == 5)
        observation.cancel()
    }

    @Test func aTransactionCommitsAllItsChangesAsOneUnit() throws {
        let dir = try TempDir()
        let store = try openStore(dir)
        try store.set("old", forKey: "legacy")
        try store.write { tx in
            try tx.set("dark", forKey: "theme")
            try tx.set(true, forKey: "sidebar")
            try tx.set(3, forKey: "columns")
            tx.removeValue(forKey: "legacy")
            // Reads inside see the state before the transaction.
            #expect(try tx.string(forKey: "theme") == nil)
            #expect(try tx.string(forKey: "legacy") == "old")
        }
        #expect(try store.string(forKey: "theme") == "dark")
        #expect(try store.bool(forKey: "sidebar") == true)
        #expect(try store.int(forKey: "columns") == 3)
        #expect(try store.string(forKey: "legacy") == nil)
        // 1 single set + 4 members + 1 commit record.
        #expect(try store.stats().recordCount == 6)

        struct Abort: Error {}
        let before = try readBytes(store.path)
        #expect(throws: Abort.self) {
            try store.write { tx in
                try tx.set("light", forKey: "theme")
                throw Abort()
            }
        }
        #expect(try store.string(forKey: "theme") == "dark")
        #expect(try readBytes(store.path) == before)

        try store.write { tx in
            try tx.set("x", forKey: "gone-before-clear")
            tx.removeAll()
            try tx.set(7, forKey: "kept")
        }
        #expect(try store.allKeys == ["kept"])
        let reopened = try openStore(dir)
        #expect(try reopened.allKeys == ["kept"])
        #expect(try reopened.int(forKey: "kept") == 7)
    }

    @Test func removeIsIdempotentAndRemoveAllEmptiesTheStore() throws {
        let dir = try TempDir()
        let store = try openStore(dir)
        for i in 0..<10 { try store.set(i, forKey: "k\(i)") }
        try store.removeValue(forKey: "k3")
        try store.removeValue(forKey: "k3")
        #expect(try store.count == 9)
        #expect(try store.contains("k3") == false)
        try store.removeAll()
        #expect(try store.count == 0)
        try store.removeAll()
        try store.set(1, forKey: "after")
        #expect(try openStore(dir).allKeys == ["after"])
    }

    @Test func observersHearEveryChangeAfterTheLockIsReleased() async throws {
        let dir = try TempDir()
        let store = try openStore(dir)
        try store.set(1, forKey: "a")
        let seen = Mutex<[PrefsChange]>([])
        let observation = store.observe { change in
            // Using the store from the callback must not deadlock.
            _ = try? store.count
            seen.withLock { $0.append(change) }
        }
        try store.set(2, forKey: "a")
        try store.write { tx in
            try tx.set(1, forKey: "b")
            try tx.set(1, forKey: "c")
        }
        try store.removeValue(forKey: "b")
        try store.removeAll()
        observation.cancel()
        try store.set(3, forKey: "after-cancel")
        let changes = seen.withLock { $0 }
        #expect(changes.map(\.keys) == [["a"], ["b", "c"], ["b"], ["a", "c"]])
        #expect(changes.allSatisfy { !$0.isExternal })

        var iterator = store.changes().makeAsyncIterator()
        try store.set("v", forKey: "streamed")
        let change = await iterator.next()
        #expect(change?.keys == ["streamed"])
    }

    /// Another handle's change that a transaction catches up with (under the writer lock, at its start) is heard
    /// after the transaction, never from inside its body: a read through `tx` delivered it there, so observers ran
    /// while the writer lock, which every process waits on, was held, and one that wrote to the store trapped.
    /// The watch's thread is kept busy in a callback so that it cannot deliver the change first.
    @Test func anotherHandlesChangeIsHeardAfterTheTransactionThatCaughtUpWithItNotInsideIt() throws {
        let dir = try TempDir()
        let store = try openStore(dir)
        let other = try openStore(dir)
        let watchBusy = Atomic<Bool>(false)
        let release = Atomic<Bool>(false)
        let heard = Mutex<[String]>([])
        let observation = store.observe { change in
            heard.withLock { $0 += change.keys }
            guard change.keys == ["first"] else { return }
            watchBusy.store(true, ordering: .releasing)
            while !release.load(ordering: .acquiring) { usleep(1_000) }
        }
        defer {
            release.store(true, ordering: .releasing)
            observation.cancel()
        }
        try other.set(1, forKey: "first")
        // Waits for the watch's thread to be in the callback; 120 s only guards against a hang.
        let deadline = Date().addingTimeInterval(120)
        while !watchBusy.load(ordering: .acquiring) && Date() < deadline { usleep(1_000) }
        let watchIsBusy = watchBusy.load(ordering: .acquiring)
        try #require(watchIsBusy, "the watch never delivered the first change")

        try other.set(2, forKey: "second")
        let heardInside = try store.write { tx in
            #expect(try tx.int64(forKey: "second") == 2)
            try tx.set(3, forKey: "mine")
            return heard.withLock { $0 }
        }
        #expect(heardInside == ["first"])
        #expect(heard.withLock { $0 } == ["first", "second", "mine"])
    }

    /// A read on another thread (the watch's, or the app's) must not take a writer's changes and deliver them
    /// after the writer returned: each write's change is heard, in order, before the write returns. (Before the
    /// fix a reader thread took them; under load the watch's thread delivered one after the next write's.)
    @Test func aReaderOnAnotherThreadNeverDeliversAWritersChangesLate() throws {
        let dir = try TempDir()
        let store = try openStore(dir)
        let seen = Mutex<[String]>([])
        let observation = store.observe { change in seen.withLock { $0 += change.keys } }
        defer { observation.cancel() }
        let stop = Atomic<Bool>(false)
        let reader = Thread {
            while !stop.load(ordering: .relaxed) { _ = try? store.count }
        }
        reader.start()
        defer { stop.store(true, ordering: .relaxed) }
        var late: [Int] = []
        for i in 0..<3_000 {
            try store.set(i, forKey: "k\(i % 7)")
            let heard = seen.withLock { $0 }
            if heard.count != i + 1 || heard.last != "k\(i % 7)" { late.append(i) }
        }
        #expect(late.isEmpty, "writes whose change was not heard, in order, by the time they returned: \(late.prefix(10))")
    }

    @Test func twoHandlesInOneProcessSeeEachOthersWrites() throws {
        let dir = try TempDir()
        let a = try openStore(dir)
        let b = try openStore(dir)
        try a.set("from a", forKey: "k")
        #expect(try b.string(forKey: "k") == "from a")
        try b.write { tx in try tx.set("from b", forKey: "k") }
        #expect(try a.string(forKey: "k") == "from b")
        try a.compact()
        try a.set("after compaction", forKey: "k2")
        #expect(try b.string(forKey: "k2") == "after compaction")
        #expect(try b.string(forKey: "k") == "from b")
        try b.set("b writes after a compacted", forKey: "k3")
        #expect(try a.string(forKey: "k3") == "b writes after a compacted")
    }

    @Test func threadsWritingAndReadingOneHandleLoseNoUpdate() async throws {
        let dir = try TempDir("threads")
        let store = try openStore(dir)
        let other = try openStore(dir)
        await withTaskGroup(of: Void.self) { group in
            for worker in 0..<8 {
                group.addTask {
                    let handle = worker % 2 == 0 ? store : other
                    for i in 0..<250 {
                        try? handle.write { tx in
                            try tx.set((try tx.int64(forKey: "counter") ?? 0) + 1, forKey: "counter")
                        }
                        try? handle.set(Int64(i), forKey: "w\(worker)")
                        _ = try? handle.int64(forKey: "w\((worker + 1) % 8)")
                    }
                }
            }
        }
        #expect(try store.int64(forKey: "counter") == 2000)
        #expect(try other.int64(forKey: "counter") == 2000)
        for worker in 0..<8 { #expect(try store.int64(forKey: "w\(worker)") == 249) }
        #expect(try store.verify().isClean)
    }

    @Test func synchronousDurabilityAndSyncKeepEveryValue() throws {
        let dir = try TempDir("sync")
        let store = try openStore(dir) { $0.durability = .synchronous }
        for i in 0..<20 { try store.set(i, forKey: "k\(i % 5)") }
        try store.write { tx in try tx.set("x", forKey: "tx") }
        try store.sync()
        let buffered = try openStore(dir)
        try buffered.set("y", forKey: "b")
        try buffered.sync()
        let reopened = try openStore(dir)
        #expect(try reopened.int(forKey: "k4") == 19)
        #expect(try reopened.string(forKey: "tx") == "x")
        #expect(try reopened.string(forKey: "b") == "y")
    }

    /// Store files are opened with O_NOATIME: opening and reading a store leaves their access times. (With
    /// relatime, mapping a file whose access time is older than its modification time updates it, a journaled
    /// inode write at nearly every open.) A control file in the same directory, mapped the ordinary way, shows
    /// that this file system does update access times.
    @Test func openingAStoreLeavesItsFilesAccessTimes() throws {
        let dir = try TempDir("noatime")
        do { try openStore(dir).set(1, forKey: "k") }
        let control = dir.file("control")
        try writeBytes([UInt8](repeating: 1, count: 4096), to: control)
        let files = [dir.file("ui.prefs"), dir.file("ui.prefs.lock"), control]
        func accessTime(_ path: String) -> timespec {
            var st = stat()
            #expect(stat(path, &st) == 0)
            return st.st_atim
        }
        // Access times an hour before the modification times (which stay): relatime updates them at the next
        // access.
        let utimeOmit = (1 << 30) - 2
        for path in files {
            var times = [timespec(tv_sec: time(nil) - 3600, tv_nsec: 0), timespec(tv_sec: 0, tv_nsec: utimeOmit)]
            #expect(utimensat(AT_FDCWD, path, &times, 0) == 0)
        }
        let before = files.map(accessTime)
        let fd = open(control, O_RDONLY)
        #expect(fd >= 0)
        if let mapped = mmap(nil, 4096, PROT_READ, MAP_SHARED, fd, 0), mapped != MAP_FAILED {
            #expect(mapped.load(as: UInt8.self) == 1)
            munmap(mapped, 4096)
        }
        close(fd)
        let store = try openStore(dir)
        #expect(try store.int(forKey: "k") == 1)
        let after = files.map(accessTime)
        func same(_ a: timespec, _ b: timespec) -> Bool { a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec }
        #expect(
            !same(before[2], after[2]),
            "control: this file system does not update access times (noatime?); the test needs relatime or strictatime")
        #expect(same(before[0], after[0]), "opening the store updated the data file's access time")
        #expect(same(before[1], after[1]), "opening the store updated the lock file's access time")
    }

    @Test func singleProcessHandleExcludesEveryOtherOpener() throws {
        let dir = try TempDir()
        let single = try openStore(dir) { $0.sharing = .singleProcess }
        try single.set(1, forKey: "x")
        expectError(.busy) { try openStore(dir) }
        expectError(.busy) { try openStore(dir) { $0.sharing = .singleProcess } }
        let child = try Child(["prefs-hold", dir.path, "ui", "multi"])
        #expect(child.waitForLine { _ in true } == "error busy")
    }
}

@Suite struct AllocationTests {
    /// Runs the helper's read loop under valgrind and returns the number of heap allocations it made.
    static func allocations(reads: Int, in dir: TempDir) throws -> Int {
        let log = dir.file("valgrind-\(reads).log")
        let storeDir = dir.file("store-\(reads)")  // each run creates its own store: same setup work
        // A copy without debug information: valgrind 3.19's reader gives up on some of the DWARF 5 that the
        // toolchain writes ("unhandled dwarf2 abbrev form code 0x25"), and counting allocations needs none.
        let helper = dir.file("helper-\(reads)")
        guard run(["objcopy", "--strip-debug", helperPath, helper]) == 0 else {
            throw TestFailure("objcopy (from Debian's binutils package) could not copy the helper")
        }
        let status = run([
            "valgrind", "--tool=memcheck", "--log-file=\(log)", helper, "prefs-read-loop", storeDir, "\(reads)",
        ])
        let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        guard status == 0 else {
            throw TestFailure("valgrind (from Debian's valgrind package) failed: \(status)\n\(text.suffix(2000))")
        }
        guard let line = text.split(separator: "\n").first(where: { $0.contains("total heap usage:") }),
            let allocs = line.split(separator: ":").last?.split(separator: " ").first.flatMap({
                Int($0.replacingOccurrences(of: ",", with: ""))
            })
        else { throw TestFailure("no heap summary in valgrind's output:\n\(text)") }
        return allocs
    }

    /// 5,000 more reads of Bool, Int64, Double and `contains` must not add a single heap allocation.
    @Test func readingFixedSizeValuesDoesNotAllocate() throws {
        let dir = try TempDir("alloc")
        let few = try Self.allocations(reads: 10, in: dir)
        let many = try Self.allocations(reads: 5010, in: dir)
        #expect(many - few == 0, "\(many - few) allocations for 25,000 more reads")
    }
}

/// The wall clock in milliseconds since the epoch, truncated: the clock an expiry is set and checked against.
private func wallClockMilliseconds() -> Int64 {
    Int64((Date().timeIntervalSince1970 * 1000).rounded(.down))
}
