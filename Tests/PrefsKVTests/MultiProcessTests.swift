import Foundation
import Synchronization
import Testing

@testable import PrefsKV

/// A flag set by another thread.
private final class Flag: Sendable {
    private let value = Atomic<Bool>(false)
    func set() { value.store(true, ordering: .releasing) }
    var isSet: Bool { value.load(ordering: .acquiring) }

    /// Waits up to `seconds` for the flag; whether it was set.
    func wait(seconds: Double) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while !isSet && Date() < deadline { usleep(5_000) }
        return isSet
    }
}

/// Runs `body` on a new thread and waits for it to return true; false when it returned false or is still
/// running after 120 s (hung: the limit only guards against a hang, it is no measure of speed).
private func finishes(_ body: @escaping @Sendable () -> Bool) -> Bool {
    let done = Flag()
    Thread {
        if body() { done.set() }
    }.start()
    return done.wait(seconds: 120)
}

@Suite struct MultiProcessTests {
    /// Four processes each commit 2,000 transactions that increment one shared counter and set a key of
    /// their own, while one of them compacts every 500: no write and no increment may be lost.
    @Test func fourProcessesWritingOneStoreLoseNothing() throws {
        let dir = try TempDir("mp")
        let children = try (0..<4).map { try Child(["prefs-mp-writer", dir.path, "ui", "\($0)", "2000"]) }
        for child in children {
            #expect(child.waitForLine(timeout: 300) { $0 == "done" } == "done")
            #expect(child.drain() == 0)
        }
        let store = try openStore(dir)
        #expect(store.lastRecovery == nil)
        #expect(try store.int64(forKey: "counter") == 8000)
        for worker in 0..<4 {
            for i in 0..<2000 where try store.int64(forKey: "w\(worker)-\(i)") != Int64(i) {
                Issue.record("w\(worker)-\(i) is lost")
                return
            }
        }
        #expect(try store.count == 8001)
        #expect(try store.verify().isClean)
    }

    /// The writer lock is a robust mutex in the lock file: while another process holds it, a write waits; when
    /// that process is killed holding it, the next write goes ahead at once and the killed transaction is gone.
    @Test func aWriterKilledHoldingTheWriterLockBlocksNobody() throws {
        let dir = try TempDir("mp-killed-holder")
        let store = try openStore(dir)
        try store.set(1, forKey: "before")
        let holder = try Child(["prefs-hold-writer", dir.path, "ui", "never"])
        #expect(holder.waitForLine { _ in true } == "holding")
        let done = Flag()
        let writer = Thread {
            try? store.set(2, forKey: "after")
            done.set()
        }
        writer.start()
        usleep(300_000)
        let wentAhead = done.isSet
        #expect(!wentAhead, "a write went ahead while another process held the writer lock")
        holder.killAndDrain()
        // The holder is dead and reaped: the write goes ahead. 120 s only guards against a hang.
        let finished = done.wait(seconds: 120)
        #expect(finished, "the write did not go ahead after the holder was killed")
        #expect(try store.int(forKey: "after") == 2)
        #expect(try store.int(forKey: "never") == nil)
        let reopened = try openStore(dir)
        #expect(try reopened.int(forKey: "before") == 1)
        #expect(try reopened.int(forKey: "after") == 2)
        #expect(try reopened.int(forKey: "never") == nil)
        try reopened.set(3, forKey: "later")
        #expect(try store.int(forKey: "later") == 3)
        #expect(try reopened.verify().isClean)
    }

    /// An intact store opens without the writer lock: an open is not held up by a transaction in progress in
    /// another process, and sees what was committed, not what is being written.
    @Test func anOpenDoesNotWaitForAnotherProcesssTransaction() throws {
        let dir = try TempDir("mp-open-while-writing")
        try openStore(dir).set(1, forKey: "before")
        let holder = try Child(["prefs-hold-writer", dir.path, "ui", "never"])
        defer { holder.killAndDrain() }
        #expect(holder.waitForLine { _ in true } == "holding")
        let path = dir.path
        let opened = finishes {
            guard let store = try? PrefsStore(id: "ui", directory: path) else { return false }
            return (try? store.int(forKey: "before")) == 1 && (try? store.int(forKey: "never")) == Optional<Int>.none
        }
        #expect(opened, "opening the store waited for another process's transaction")
    }

    /// Opening and reading a store whose lock page is ready writes nothing: neither file changes, not even its
    /// modification time (a write to the lock page at every open was a journaled page fault on ext4).
    @Test func openingAndReadingAReadyStoreWritesNothing() throws {
        let dir = try TempDir("mp-open-writes-nothing")
        do {
            let store = try openStore(dir)
            try store.set(1, forKey: "k")
            try store.write { tx in try tx.set(2, forKey: "w") }  // the lock page is set up and used
        }
        let files = [dir.file("ui.prefs"), dir.file("ui.prefs.lock")]
        func snapshot() throws -> [([UInt8], Int, Int)] {
            try files.map { path in
                var st = stat()
                #expect(stat(path, &st) == 0)
                return (try readBytes(path), st.st_mtim.tv_sec, st.st_mtim.tv_nsec)
            }
        }
        let before = try snapshot()
        usleep(20_000)  // a later write would carry a later modification time
        for _ in 0..<3 {
            let store = try openStore(dir)
            #expect(try store.int(forKey: "k") == 1)
            #expect(try store.int(forKey: "w") == 2)
        }
        let after = try snapshot()
        for (file, (b, a)) in zip(files, zip(before, after)) {
            let sameBytes = b.0 == a.0
            let sameTime = b.1 == a.1 && b.2 == a.2
            #expect(sameBytes, "\(file) changed")
            #expect(sameTime, "\(file)'s modification time changed")
        }
    }

    /// After a reboot the lock page may still say "locked by thread N" (a process that died with the machine
    /// is never reported dead to anyone). The first handle to open the store alone sets the page up afresh.
    @Test func aLockPageLeftLockedByAVanishedProcessIsResetByTheFirstOpener() throws {
        let dir = try TempDir("mp-stale-lock")
        try openStore(dir).set(1, forKey: "before")
        // The mutex's lock word (its first 4 bytes, at offset 64): held by a thread id that does not exist.
        let fd = open(dir.file("ui.prefs.lock"), O_RDWR)
        #expect(fd >= 0)
        var owner = UInt32(0x3FFF_FFF0).littleEndian
        #expect(pwrite(fd, &owner, 4, 64) == 4)
        close(fd)
        let path = dir.path
        let finished = finishes {
            var configuration = PrefsStore.Configuration()
            configuration.logger.logLevel = .critical
            guard let store = try? PrefsStore(id: "ui", directory: path, configuration: configuration) else {
                return false
            }
            return (try? store.set(2, forKey: "after")) != nil
        }
        #expect(finished, "opening and writing hung on a lock page left locked")
        if finished { #expect(try openStore(dir).int(forKey: "after") == 2) }
    }

    @Test func aReaderSeesAnotherProcesssWritesAndCompactions() throws {
        let dir = try TempDir("mp-read")
        let store = try openStore(dir)
        try store.set("mine", forKey: "local")
        let generation = try store.stats().generation
        let child = try Child(["prefs-set", dir.path, "ui", "remote", "theirs"])
        #expect(child.waitForLine { _ in true } == "ok")
        #expect(try store.string(forKey: "remote") == "theirs")
        // Another process compacts: this handle follows it to the new file on its next access.
        let other = try Child(["prefs-mp-writer", dir.path, "ui", "0", "500"])
        #expect(other.waitForLine(timeout: 120) { $0 == "done" } == "done")
        #expect(try store.stats().generation > generation)
        #expect(try store.int64(forKey: "counter") == 500)
        #expect(try store.string(forKey: "local") == "mine")
        try store.set("after", forKey: "local")
        #expect(try openStore(dir).string(forKey: "local") == "after")
    }

    @Test func observersHearOtherProcessesWrites() async throws {
        let dir = try TempDir("mp-observe")
        let store = try openStore(dir)
        let seen = Mutex<[PrefsChange]>([])
        let observation = store.observe { change in seen.withLock { $0.append(change) } }
        for value in ["one", "two"] {
            let child = try Child(["prefs-set", dir.path, "ui", "theme", value])
            #expect(child.waitForLine { _ in true } == "ok")
            // Waits for the event; 120 s only guards against a hang.
            let deadline = Date().addingTimeInterval(120)
            while Date() < deadline && !seen.withLock({ $0.contains { $0.keys == ["theme"] && $0.isExternal } }) {
                try await Task.sleep(for: .milliseconds(10))
            }
            #expect(seen.withLock { $0.contains { $0.keys == ["theme"] && $0.isExternal } }, "no event for \(value)")
            seen.withLock { $0.removeAll() }
        }
        // Through a compaction by another process, too.
        let child = try Child(["prefs-mp-writer", dir.path, "ui", "0", "500"])
        #expect(child.waitForLine(timeout: 120) { $0 == "done" } == "done")
        let deadline = Date().addingTimeInterval(120)
        while Date() < deadline && !seen.withLock({ $0.contains { $0.keys.contains("w0-499") } }) {
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(seen.withLock { $0.contains { $0.keys.contains("w0-499") } })
        observation.cancel()
    }

    @Test func aSingleProcessStoreRefusesASecondProcess() throws {
        let dir = try TempDir("mp-single")
        let holder = try Child(["prefs-hold", dir.path, "ui", "single"])
        #expect(holder.waitForLine { _ in true } == "open")
        expectError(.busy) { try openStore(dir) }
        holder.killAndDrain()
        // The lock dies with the process.
        _ = try openStore(dir) { $0.sharing = .singleProcess }
    }
}
