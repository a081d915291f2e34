import Foundation
import Glibc
import Testing

@testable import PrefsKV

@Suite struct CompactionTests {
    @Test func compactionShrinksTheFileToTwiceTheLiveBytesPlusAPageAndKeepsEveryValue() throws {
        let dir = try TempDir("compact", memory: true)
        let store = try openStore(dir) { $0.autoCompactionThreshold = nil }
        for round in 0..<5 {
            for i in 0..<1000 { try store.set("value \(i) round \(round)", forKey: "key-\(i)") }
        }
        for i in 0..<500 { try store.removeValue(forKey: "key-\(i)") }
        let before = try store.stats()
        #expect(before.garbageRatio > 0.8)
        // Keep the old file open: compaction must not change its bytes, except the superseded word.
        let oldFD = open(store.path, O_RDONLY)
        defer { close(oldFD) }
        let oldBytes = try readBytes(store.path)
        try store.compact()
        let after = try store.stats()
        #expect(after.fileBytes <= 2 * after.liveBytes + 4096)
        #expect(after.fileBytes == fileSize(store.path))
        #expect(after.logBytes == after.liveBytes)
        #expect(after.garbageRatio == 0)
        #expect(after.generation == before.generation + 1)
        #expect(after.keyCount == 500)
        var old = [UInt8](repeating: 0, count: oldBytes.count)
        #expect(pread(oldFD, &old, old.count, 0) == oldBytes.count)
        var expectedOld = oldBytes
        expectedOld[264] = 1  // superseded
        #expect(old == expectedOld)
        for i in 500..<1000 { #expect(try store.string(forKey: "key-\(i)") == "value \(i) round 4") }
        let reopened = try openStore(dir)
        #expect(try reopened.count == 500)
        #expect(try reopened.string(forKey: "key-999") == "value 999 round 4")
        #expect(!dir.files.contains("ui.prefs.tmp"))
    }

    @Test func compactionDropsExpiredValuesAndKeepsTheIndexOfTheRestExact() throws {
        // The index is carried over to the new image, not rebuilt: every value, in this handle and in a
        // fresh one, must read back exactly, and expired values must be gone from both.
        let dir = try TempDir("compact-expiry", memory: true)
        let store = try openStore(dir) { $0.autoCompactionThreshold = nil }
        for round in 0..<3 {
            for i in 0..<300 { try store.set(i * 10 + round, forKey: "n-\(i)") }
        }
        for i in 0..<100 { try store.set("soon gone \(i)", forKey: "e-\(i)", expiresAfter: .milliseconds(30)) }
        for i in 0..<50 { try store.set(Data(repeating: UInt8(i), count: i * 7), forKey: "d-\(i)") }
        usleep(60_000)
        try store.compact()
        try store.compact()  // a second compaction works from the carried-over index
        for i in 0..<300 { #expect(try store.int(forKey: "n-\(i)") == i * 10 + 2) }
        for i in 0..<50 { #expect(try store.data(forKey: "d-\(i)") == Data(repeating: UInt8(i), count: i * 7)) }
        #expect(try store.count == 350)
        let stats = try store.stats()
        #expect(stats.logBytes == stats.liveBytes)
        try store.set(12345, forKey: "n-7")
        let reopened = try openStore(dir)
        #expect(try reopened.count == 350)
        #expect(try reopened.int(forKey: "n-7") == 12345)
        #expect(try reopened.string(forKey: "e-3") == nil)
        for i in 0..<50 { #expect(try reopened.data(forKey: "d-\(i)") == Data(repeating: UInt8(i), count: i * 7)) }
    }

    @Test func rewritingOneFourKilobyteJSONBlobKeepsTheFileBounded() throws {
        let long = ProcessInfo.processInfo.environment["PREFSKV_LONG_TESTS"] == "1"
        let rewrites = long ? 1_000_000 : 20_000
        let dir = try TempDir("blob", memory: true)
        let store = try openStore(dir)
        let base = String(repeating: "x", count: 4000)
        var largest = 0
        for i in 0..<rewrites {
            try store.set("{\"state\":\"\(base)\",\"n\":\(i)}", forKey: "persist:root")
            if i % 100 == 0 { largest = max(largest, fileSize(store.path)) }
        }
        let stats = try store.stats()
        #expect(try store.string(forKey: "persist:root")?.hasSuffix("\"n\":\(rewrites - 1)}") == true)
        // The default threshold (256 KiB): a store with little live data compacts before its file would grow.
        #expect(largest <= 256 * 1024, "the file grew to \(largest) bytes")
        #expect(stats.generation > 100, "automatic compaction did not run")
        try store.compact()
        let compacted = try store.stats()
        #expect(compacted.fileBytes <= 2 * compacted.liveBytes + 4096)
    }

    @Test func aStaleTemporaryFileFromAKilledCompactionIsReplaced() throws {
        let dir = try TempDir("stale-tmp")
        let store = try openStore(dir)
        try store.set(1, forKey: "a")
        try writeBytes(Array(repeating: 0xAB, count: 5000), to: dir.file("ui.prefs.tmp"))
        try store.compact()
        #expect(try store.int(forKey: "a") == 1)
        #expect(!dir.files.contains("ui.prefs.tmp"))
        #expect(try openStore(dir).int(forKey: "a") == 1)
    }

    @Test func aStaleSupersededFlagFromAKilledCompactorIsCleared() throws {
        let dir = try TempDir("stale-flag")
        do {
            let store = try openStore(dir)
            try store.set("kept", forKey: "a")
        }
        // A compactor killed between setting the flag and its rename leaves the flag on the live file.
        var bytes = try readBytes(dir.file("ui.prefs"))
        bytes[264] = 1
        try writeBytes(bytes, to: dir.file("ui.prefs"))
        let store = try openStore(dir)
        let other = try openStore(dir)
        #expect(try store.string(forKey: "a") == "kept")
        #expect(try readBytes(dir.file("ui.prefs"))[264] == 0)
        bytes = try readBytes(dir.file("ui.prefs"))
        bytes[264] = 1
        try writeBytes(bytes, to: dir.file("ui.prefs"))
        // A handle that sees it while open checks the path under the writer lock and carries on.
        try other.set("next", forKey: "b")
        #expect(try store.string(forKey: "b") == "next")
        #expect(try readBytes(dir.file("ui.prefs"))[264] == 0)
        #expect(store.lastRecovery == nil && other.lastRecovery == nil)
    }

    /// An automatic-compaction threshold of 0 or less is refused at the open, before any file is made: 0 did not
    /// turn compaction off (nil does) but compacted whenever half the log was dead, at nearly every write, and
    /// Int.min once trapped in the room arithmetic (3850acb).
    @Test(arguments: [0, -1, Int.min])
    func aThresholdOfZeroOrLessIsRefused(threshold: Int) throws {
        let dir = try TempDir("threshold")
        let error = expectError(.invalidInput) { try openStore(dir) { $0.autoCompactionThreshold = threshold } }
        #expect(error?.message.contains("autoCompactionThreshold") == true)
        #expect(!FileManager.default.fileExists(atPath: dir.file("ui.prefs")))
        let store = try openStore(dir) { $0.autoCompactionThreshold = 1 }
        try store.set("kept", forKey: "a")
        #expect(try store.string(forKey: "a") == "kept")
    }
}
