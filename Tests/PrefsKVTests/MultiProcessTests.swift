import Foundation
import Synchronization
import Testing

@testable import PrefsKV

@Suite struct MultiProcessTests {
    /// Four processes each commit 2,000 transactions that increment one shared counter and set a key of
    /// their own, while one of them compacts every 500: no write and no increment may be lost.
    @Test func fourProcessesWritingOneStoreLoseNothing() throws {
        let dir = try TempDir("mp")
        let children = try (0..<4).map { try Child(["prefs-mp-writer", dir.path, "ui", "\($0)", "2000"]) }
        for child in children {
            #expect(child.waitForLine(timeout: 120) { $0 == "done" } == "done")
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
        #expect(other.waitForLine(timeout: 60) { $0 == "done" } == "done")
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
            let deadline = Date().addingTimeInterval(10)
            while Date() < deadline && !seen.withLock({ $0.contains { $0.keys == ["theme"] && $0.isExternal } }) {
                try await Task.sleep(for: .milliseconds(10))
            }
            #expect(seen.withLock { $0.contains { $0.keys == ["theme"] && $0.isExternal } }, "no event for \(value)")
            seen.withLock { $0.removeAll() }
        }
        // Through a compaction by another process, too.
        let child = try Child(["prefs-mp-writer", dir.path, "ui", "0", "500"])
        #expect(child.waitForLine(timeout: 60) { $0 == "done" } == "done")
        let deadline = Date().addingTimeInterval(10)
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
