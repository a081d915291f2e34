// Issue 20 (Trust III): a store file changed underneath a running app by something other than PrefsKV (truncate,
// cp of another store or of an older copy over it, an in-place page rewrite) never crashes the app and never
// yields a value that was never written under the key read. A reader process (vault-test-helper
// prefs-changed-reader) reads every key pass after pass while this test changes its file with the real tools.
import Foundation
import TestSealer
import Testing

@testable import PrefsKV

@Suite(.serialized) struct ChangedUnderneathTests {
    /// A change made to the file while the reader runs.
    enum Change: String, CaseIterable, CustomStringConvertible {
        /// `truncate -s` to every page boundary of the file, from the last one down to the header page.
        case truncateToEveryPageBoundary
        /// `cp` of another store (same keys, written in another order) over the file.
        case copyOfAnotherStore
        /// `cp` of an older copy of the same store over the file.
        case copyOfAnOlderCopy
        /// `dd conv=notrunc` of random bytes over one page of the log.
        case rewriteOfOnePage
        var description: String { rawValue }
    }

    /// Stores of 200 keys whose values name their store and key (`A-k007-2`): the store under test (A, two
    /// generations of values, an older copy taken between them) and another store (B) holding the same keys
    /// written in reverse order.
    struct Files {
        let dir: TempDir
        let sealerKey: Int
        var path: String { dir.file("ui.prefs") }
        /// The end of the store's log.
        var logEnd = 0
        var older: String { dir.file("older.bin") }
        var other: String { dir.file("other.bin") }

        init(sealed: Bool) throws {
            dir = try TempDir("changed-underneath")
            sealerKey = sealed ? 7 : 0
            let names = (0..<200).map { String(format: "k%03d", $0) }
            let a = try open("ui")
            for name in names { try a.set("A-\(name)-1", forKey: name) }
            try FileManager.default.copyItem(atPath: path, toPath: older)  // the older copy, byte for byte
            for name in names { try a.set("A-\(name)-2" + String(repeating: "x", count: name.count), forKey: name) }
            logEnd = firstRecordOffset(sealed: sealed) + (try a.stats().logBytes)
            // Another store with more records and a longer log than A's: A's log end and sequence numbers are
            // both behind its own, so only its header says it is another file.
            let b = try open("other")
            for generation in 1...3 {
                for name in names.reversed() {
                    try b.set("B-\(name)-\(generation)" + String(repeating: "y", count: 40), forKey: name)
                }
            }
            try FileManager.default.moveItem(atPath: dir.file("other.prefs"), toPath: other)
            try FileManager.default.removeItem(atPath: dir.file("other.prefs.lock"))
        }

        func open(_ id: String) throws -> PrefsStore {
            try openStore(dir, id: id) {
                $0.sealer = sealerKey == 0 ? nil : TestSealer(key: UInt64(sealerKey))
                $0.autoCompactionThreshold = nil
            }
        }
    }

    /// Runs a tool; its exit status must be 0.
    static func tool(_ arguments: [String]) throws {
        let status = run(arguments)
        guard status == 0 else { throw TestFailure("\(arguments.joined(separator: " ")) exited \(status)") }
    }

    /// The reader's store.
    enum Reader: String, CaseIterable, CustomStringConvertible {
        case plain, sealed
        /// Sealed, read through the opt-in plaintext cache (issue 39): an older copy put back (a rollback), another
        /// store copied over, a page rewritten or the file cut must be read as without it.
        case sealedCached = "sealed, plaintext cache"
        var description: String { rawValue }
    }

    /// Each case once in `make test`, `TORTURE_CHANGES` rounds (10) in `make torture`.
    @Test(arguments: Change.allCases, Reader.allCases)
    func aReaderNeverCrashesNorReadsAValueNeverWrittenUnderItsKey(change: Change, reader: Reader) throws {
        for _ in 0..<Torture.count("CHANGES", short: 1, long: 10) {
            try readerAcross(change, reader)
        }
    }

    func readerAcross(_ change: Change, _ kind: Reader) throws {
        let sealed = kind != .plain
        let files = try Files(sealed: sealed)
        let cached = kind == .sealedCached ? ["cached"] : []
        let reader = try Child(["prefs-changed-reader", files.dir.path, "ui", "\(files.sealerKey)"] + cached)
        var changes = 0
        var passes = 0
        /// Marks the change just made and waits until the reader has completed a pass that began after it (so it
        /// read across the change).
        func readerMovesOn(_ context: String) throws {
            let mark = files.dir.file("mark")
            try Data("\(changes)".utf8).write(to: URL(fileURLWithPath: mark + ".tmp"))
            guard rename(mark + ".tmp", mark) == 0 else { throw TestFailure("rename failed") }
            let line = reader.waitForLine(timeout: 120) { line in
                line.hasPrefix("P ") && line.split(separator: " ").last.map { Int($0) == changes } == true
            }
            guard let line else { throw TestFailure("\(context): the reader stopped: \(reader.lines.suffix(5))") }
            passes = Int(line.split(separator: " ")[1])!
            changes += 1
        }
        try readerMovesOn("start")

        switch change {
        case .truncateToEveryPageBoundary:
            let size = try #require(try FileManager.default.attributesOfItem(atPath: files.path)[.size] as? Int)
            for boundary in stride(from: (size - 1) / 4096 * 4096, through: 4096, by: -4096) {
                // The reader may have recovered the file into a smaller one meanwhile: only shrink.
                let now = (try? FileManager.default.attributesOfItem(atPath: files.path)[.size] as? Int) ?? 0
                guard boundary < now else { continue }
                try Self.tool(["truncate", "-s", "\(boundary)", files.path])
                try readerMovesOn("truncated to \(boundary)")
            }
        case .copyOfAnotherStore:
            try Self.tool(["cp", files.other, files.path])
            try readerMovesOn("cp of another store")
        case .copyOfAnOlderCopy:
            try Self.tool(["cp", files.older, files.path])
            try readerMovesOn("cp of an older copy")
        case .rewriteOfOnePage:
            // The page of the newest records (live values): the log end and the header stay as they were, so
            // only the check of each record read can tell.
            let page = (files.logEnd - 1) / 4096
            try Self.tool([
                "dd", "if=/dev/urandom", "of=\(files.path)", "bs=4096", "seek=\(page)", "count=1", "conv=notrunc",
                "status=none",
            ])
            try readerMovesOn("one page rewritten")
        }

        // Stop: the reader reads once more and reports what it ends with.
        #expect(FileManager.default.createFile(atPath: files.dir.file("stop"), contents: Data()))
        let final = try #require(reader.waitForLine(timeout: 120) { $0.hasPrefix("F ") }, "\(reader.lines.suffix(5))")
        let status = reader.drain()
        #expect(status == 0, "the reader ended with \(status) (-7: SIGBUS): \(reader.lines.suffix(5))")
        let bad = reader.lines.filter { $0.hasPrefix("BAD ") }
        #expect(bad.isEmpty, "values never written under their key: \(bad.prefix(5))")

        // It ends with the file's current contents: what a fresh open of the file reads.
        let fresh = try files.open("ui")
        var expected: [String] = []
        for name in (0..<200).map({ String(format: "k%03d", $0) }) {
            if let value = try fresh.string(forKey: name) { expected.append("\(name)=\(value)") }
        }
        #expect(final == "F " + expected.joined(separator: ","), "\(change), \(kind)")
        let errors = reader.lines.first { $0.hasPrefix("E ") } ?? ""
        Torture.report(
            "changed underneath (\(change), \(kind)): \(passes) passes of 200 reads, "
                + "\(bad.count) values never written, errors seen: \(errors.dropFirst(2)); "
                + "ends with \(expected.count) keys, as a fresh open")
    }

    /// A writer never appends into a file replaced in place: after another store's file is written over it (what
    /// `cp` does), a set goes into that file as its own next record, and everything the file held stays.
    @Test(arguments: [false, true])
    func aWriterNeverAppendsIntoAFileReplacedInPlace(sealed: Bool) throws {
        let files = try Files(sealed: sealed)
        let store = try files.open("ui")
        let other = try readBytes(files.other)
        // In place, as cp does: the same inode, truncated and rewritten.
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: files.path))
        try handle.truncate(atOffset: 0)
        try handle.write(contentsOf: Data(other))
        try handle.close()
        try store.set("A-k999-1", forKey: "k999")
        let fresh = try files.open("ui")
        #expect(fresh.lastRecovery == nil)
        #expect(try fresh.verify().isClean)
        #expect(try fresh.string(forKey: "k999") == "A-k999-1")
        #expect(try fresh.string(forKey: "k000") == "B-k000-3" + String(repeating: "y", count: 40))
        #expect(try fresh.count == 201)
    }

    /// A compaction after a page was rewritten underneath never turns the bytes nobody wrote into records with fresh
    /// checksums: it writes nothing and throws `changedUnderneath`; the next read reopens the file (salvaging what
    /// verifies), and every value read is one that was written.
    @Test func aCompactionAfterAChangeUnderneathNeverMintsRecords() throws {
        let files = try Files(sealed: false)
        let store = try files.open("ui")
        try Self.tool([
            "dd", "if=/dev/urandom", "of=\(files.path)", "bs=4096", "seek=\((files.logEnd - 1) / 4096)", "count=1",
            "conv=notrunc", "status=none",
        ])
        expectError(.changedUnderneath) { try store.compact() }
        for i in 0..<200 {
            let name = "k" + String(1000 + i).dropFirst()
            if let value = try store.string(forKey: name) {
                #expect(value.hasPrefix("A-\(name)-"), "\(name) = \(value.debugDescription)")
            }
        }
        #expect(try store.verify().isClean)
    }

    /// Compare-before-set never takes a zero page for the stored value: after a truncation underneath, setting a key
    /// to 0 (what the zero page reads as) is not skipped as "unchanged"; it is refused until the handle reopened
    /// the file, then stored.
    @Test func compareBeforeSetNeverTakesAZeroPageForTheStoredValue() throws {
        let files = try Files(sealed: false)
        let store = try files.open("ui")
        try store.set(Int64(0), forKey: "zero")  // the last record, in the last page of the log
        let end = firstRecordOffset() + (try store.stats().logBytes)
        try Self.tool(["truncate", "-s", "\((end - 1) / 4096 * 4096)", files.path])
        expectError(.changedUnderneath) { try store.set(Int64(0), forKey: "zero") }
        try store.set(Int64(0), forKey: "zero")
        #expect(try store.int64(forKey: "zero") == 0)
        #expect(try files.open("ui").int64(forKey: "zero") == 0)
    }
}
