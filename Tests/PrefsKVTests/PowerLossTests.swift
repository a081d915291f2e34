import Foundation
import Glibc
import Synchronization
import TestKit
import TestSealer
import TestSupport
import Testing

@testable import PrefsKV

/// Records, through `PrefsSyncProbe`, what a power cut right after each flush PrefsKV makes in one directory is
/// sure to find on disk: the bytes of a store file at its `fdatasync`, and which files the store's two names
/// (`ui.prefs`, and `ui.prefs.prev`, the base image of a buffered store: FileProtocols.md, "Compaction") hold at an
/// `fsync` of the directory. Files are told apart by their inode, not by the image they hold: a buffered store's
/// automatic compaction writes its image into a file an earlier image used (`StoreImage.rewrite`), and a cut may
/// leave that file with sectors of both. (The directory is on tmpfs, whose inode numbers are never reused.)
final class FlushRecorder: Sendable {
    enum Flush {
        /// `fdatasync` of a store file (`ui.prefs`, a new image `ui.prefs.tmp`), with its bytes at that moment and
        /// what the names held then.
        case data(file: UInt64, bytes: [UInt8], names: Names)
        /// `fsync` of the directory: what the two names held then is durable.
        case directory(Names)
    }

    /// The files (inode numbers) the names hold (nil: no such name).
    struct Names: Hashable {
        var data: UInt64?
        var base: UInt64?
    }

    let directory: String
    let flushes = Mutex<[Flush]>([])

    init(directory: String) { self.directory = directory }

    static func generation(of bytes: [UInt8]) -> UInt64? {
        guard bytes.count >= 40 else { return nil }
        return bytes[32..<40].reversed().reduce(0) { $0 << 8 | UInt64($1) }
    }

    /// The inode number of the file at `path` (nil when there is none).
    static func file(at path: String) -> UInt64? {
        var st = stat()
        return lstat(path, &st) == 0 ? UInt64(st.st_ino) : nil
    }

    func names() -> Names {
        Names(data: Self.file(at: directory + "/ui.prefs"), base: Self.file(at: directory + "/ui.prefs.prev"))
    }

    func observe(_ fd: Int32) {
        guard let path = pathOfDescriptor(fd) else { return }
        if path == directory {
            let names = self.names()
            flushes.withLock { $0.append(.directory(names)) }
            return
        }
        guard path.hasPrefix(directory + "/") else { return }
        let name = String(path.dropFirst(directory.count + 1))
        guard name == "ui.prefs" || name == "ui.prefs.tmp" || name == "ui.prefs.prev" else { return }
        var st = stat()
        guard fstat(fd, &st) == 0 else { return }
        var bytes = [UInt8](repeating: 0, count: Int(st.st_size))
        let read = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        guard read == bytes.count else { return }
        let names = self.names()
        flushes.withLock { $0.append(.data(file: UInt64(st.st_ino), bytes: bytes, names: names)) }
    }

    func take() -> [Flush] {
        flushes.withLock { flushes in
            defer { flushes.removeAll() }
            return flushes
        }
    }
}

/// A simulated power cut: the files a directory could hold after it.
///
/// The model (Documentation/Reliability.md): after `fdatasync` returns, the file's data and size as they were at
/// the call are on the disk. Between two flushes the kernel may write back any dirty page at any time and in any
/// order, and a drive may persist any subset of a page's 512-byte sectors; a sector is written whole (the
/// power-safe write unit). So a cut leaves each sector of a file as it was in some version between its last flush
/// and the cut (a file never flushed: zeros, its preallocated blocks, or a version), and the file's size as one of
/// those versions'. Names are durable once the directory is flushed; until then each name may hold what it held at
/// that flush or anything it held since (a rename or link not yet durable, an unlink not yet durable). Two names
/// of one file hold the same bytes. A file written again with a newer image (a buffered store's compaction reusing
/// the file an earlier image used) keeps one history: its sectors since its last flush may be of either image.
struct PowerCut {
    var image: [UInt8]
    /// The base image beside it (`ui.prefs.prev`), if the cut leaves one.
    var base: [UInt8]?
    /// Operations started and operations promised durable when the power went.
    var started: Int
    var promised: Int
    var kind: String
}

@Suite(.serialized) struct PowerLossTests {
    enum Op {
        case set(String, Expected)
        case transaction([(String, Expected)])
        case remove(String)
        case removeAll
        case sync
        case compact
    }

    /// One moment of a file's life (a file: an inode): its bytes then, whether a flush made them durable, and the
    /// operations started and promised durable at that moment (a flush during operation n counts it as started).
    struct Version {
        var point: Int
        var bytes: [UInt8]
        var barrier: Bool
    }

    /// A moment of the run where the power may go: the operations started and promised, and the names then.
    struct Point {
        var started: Int
        var promised: Int
        var names: FlushRecorder.Names
        /// Whether the names are durable from here on (an fsync of the directory).
        var durable: Bool
    }

    static let cases: [(String, Bool)] = [
        ("buffered", false), ("buffered", true), ("synchronous", false), ("synchronous", true),
    ]

    /// A `.synchronous` write flushes once, plain and sealed (its records and the pending word that names them; its
    /// log end reaches the disk with the next flush): 50 writes, 50 `fdatasync`s of the data file. Two a write
    /// before (the records, then the log end). The suite above proves what a cut during that one flush leaves.
    @Test(arguments: [false, true])
    func aSynchronousWriteFlushesOnce(sealed: Bool) throws {
        let dir = try TempDir("one-flush", memory: true)
        let recorder = FlushRecorder(directory: dir.path)
        let store = try openStore(dir) {
            $0.durability = .synchronous
            $0.autoCompactionThreshold = nil
            $0.sealer = sealed ? TestSealer(key: 3) : nil
        }
        try store.set("first", forKey: "k0")
        PrefsSyncProbe.install { recorder.observe($0) }
        defer { PrefsSyncProbe.install(nil) }
        for i in 0..<50 { try store.set("value \(i)", forKey: "k\(i % 5)") }
        let flushes = recorder.take().filter { if case .data = $0 { true } else { false } }
        #expect(flushes.count == 50)
        PrefsSyncProbe.install(nil)
        let reopened = try openStore(dir) { $0.sealer = sealed ? TestSealer(key: 3) : nil }
        for k in 0..<5 { #expect(try reopened.string(forKey: "k\(k)") == "value \(45 + k)") }
    }

    /// A handle that opened a synchronous write its writer left (records and pending word on the disk, log end
    /// not: PendingWriteTests.cutAfterFlush) publishes it before its own write goes after it: a power cut right after
    /// that next write's flush still holds both writes.
    @Test(arguments: [false, true])
    func aLeftWriteIsPublishedBeforeTheNextWriteGoesAfterIt(sealed: Bool) throws {
        let cut = try PendingWriteTests.cutAfterFlush(sealed: sealed)
        let dir = try TempDir("left-write", memory: true)
        try writeBytes(cut.bytes, to: dir.file("ui.prefs"))
        let store = try openStore(dir, PendingWriteTests.configure(sealed))
        #expect(try store.string(forKey: "a") == "2")
        let recorder = FlushRecorder(directory: dir.path)
        PrefsSyncProbe.install { recorder.observe($0) }
        defer { PrefsSyncProbe.install(nil) }
        try store.set("3", forKey: "b")
        PrefsSyncProbe.install(nil)
        var flushed: [UInt8]?
        var flushes = 0
        for case .data(_, let bytes, _) in recorder.take() {
            flushed = bytes
            flushes += 1
        }
        #expect(flushes == 1, "the open published the left write: the next write flushes once")
        let check = try TempDir("left-write-check", memory: true)
        try writeBytes(try #require(flushed), to: check.file("ui.prefs"))
        let reopened = try openStore(check, PendingWriteTests.configure(sealed))
        #expect(try reopened.string(forKey: "a") == "2")
        #expect(try reopened.string(forKey: "b") == "3")
        #expect(reopened.lastRecovery == nil)
    }

    /// A store runs a random workload (sets, transactions, deletes, removeAll, `sync()`, compactions, automatic
    /// compactions: a buffered store's do not wait for the disk and keep a base image until the next `sync()`)
    /// while every flush it makes is recorded; then every power cut the model allows at every point in time is
    /// opened in a fresh directory. Each must open; every key must hold its value as of the last point the API
    /// promised durable (the last returned `sync()` or `compact()` for `.buffered`, the last returned write for
    /// `.synchronous`) or a value written after it; `.synchronous` stores never need a recovery; a recovery always
    /// quarantines the image byte for byte.
    @Test(arguments: cases)
    func everyPowerCutKeepsWhatWasPromisedDurable(durability: String, sealed: Bool) throws {
        let operations = Torture.count("POWER_OPS", short: 150, long: 1500)
        let synchronous = durability == "synchronous"
        let sealer: (any PrefsSealer)? = sealed ? TestSealer(key: 3) : nil
        let seed = tortureSeed()
        var rng = SplitMix(state: seed)
        let dir = try TempDir("power", memory: true)
        let recorder = FlushRecorder(directory: dir.path)
        PrefsSyncProbe.install { recorder.observe($0) }
        defer { PrefsSyncProbe.install(nil) }

        var points: [Point] = []
        var versions: [UInt64: [Version]] = [:]
        var promised = 0
        var states: [[String: Expected]] = [[:]]
        var ops: [Op] = []
        var deferredCompactions = 0
        /// Images written into a file an earlier image used (the data name holds a file it held before).
        var reusedFiles = 0
        var dataFiles: Set<UInt64> = []
        func absorbFlushes(started: Int) {
            for flush in recorder.take() {
                switch flush {
                case .data(let file, let bytes, let names):
                    // While the flush runs, any subset of the sectors written since the last one is on the disk (the
                    // power may go before it returns); once it returns, all of them.
                    versions[file, default: []].append(Version(point: points.count, bytes: bytes, barrier: false))
                    points.append(Point(started: started, promised: promised, names: names, durable: false))
                    versions[file, default: []].append(Version(point: points.count, bytes: bytes, barrier: true))
                    points.append(Point(started: started, promised: promised, names: names, durable: false))
                case .directory(let names):
                    points.append(Point(started: started, promised: promised, names: names, durable: true))
                }
            }
        }
        /// The files as the operation that just returned left them (not yet flushed).
        func snapshot(started: Int) throws {
            let names = recorder.names()
            for (file, name) in [(names.data, "ui.prefs"), (names.base, "ui.prefs.prev")] {
                guard let file, let bytes = try? readBytes(dir.file(name)), FlushRecorder.file(at: dir.file(name)) == file
                else { continue }
                if versions[file]?.last?.bytes != bytes {
                    versions[file, default: []].append(Version(point: points.count, bytes: bytes, barrier: false))
                }
            }
            points.append(Point(started: started, promised: promised, names: names, durable: false))
        }

        let store = try openStore(dir) {
            $0.durability = synchronous ? .synchronous : .buffered
            $0.autoCompactionThreshold = 8 * 1024
            $0.sealer = sealer
        }
        absorbFlushes(started: 0)
        try snapshot(started: 0)
        if let file = recorder.names().data { dataFiles.insert(file) }
        for n in 0..<operations {
            let key = "k\(Int.random(in: 0..<40, using: &rng))"
            let op: Op
            // Quiet stretches (the first 40 operations of every 150): every operation rewrites one of a few large
            // values, so that automatic compactions follow each other with no sync in between and write their images
            // into the files earlier ones used (StoreImage.rewrite). The live data keeps its size there: a store that
            // grows between two compactions leaves a replaced file too large to be reused as the next image (it is
            // never shrunk, and may be at most an eighth or 16 KiB larger than the image needs), which with random
            // operations mixed in made one seed in eight fail the reuse check below.
            let quiet = n % 150 < 40
            if quiet {
                op = .set("b\(Int.random(in: 0..<4, using: &rng))", .data(Data(repeating: UInt8(truncatingIfNeeded: n), count: 1_500)))
            } else {
            switch Int.random(in: 0..<100, using: &rng) {
            case 0..<25: op = .set(key, .int(Int64(n)))
            case 25..<45:
                op = .set(key, .string("v\(n)" + String(repeating: "~", count: Int.random(in: 0..<200, using: &rng))))
            case 45..<60:
                op = .set(
                    key,
                    .data(Data(repeating: UInt8(truncatingIfNeeded: n), count: Int.random(in: 0..<600, using: &rng))))
            case 60..<72:
                op = .transaction(
                    (0..<Int.random(in: 2...4, using: &rng)).map { i in
                        ("k\(Int.random(in: 0..<40, using: &rng))", .int(Int64(n * 10 + i)))
                    })
            case 72..<84: op = .remove(key)
            case 84: op = .removeAll
            case 85..<95: op = .sync
            case 95..<97: op = .compact
            default:
                // Large rewrites: garbage, so that automatic compactions run between the explicit ones.
                op = .set(key, .data(Data(repeating: UInt8(truncatingIfNeeded: n), count: 1_500)))
            }
            }
            var state = states.last!
            let fileBefore = recorder.names().data
            switch op {
            case .set(let k, let value):
                switch value {
                case .int(let v): try store.set(v, forKey: k)
                case .string(let v): try store.set(v, forKey: k)
                case .data(let v): try store.set(v, forKey: k)
                }
                state[k] = value
            case .transaction(let changes):
                try store.write { tx in
                    for (k, value) in changes { if case .int(let v) = value { try tx.set(v, forKey: k) } }
                }
                for (k, value) in changes { state[k] = value }
            case .remove(let k):
                try store.removeValue(forKey: k)
                state[k] = nil
            case .removeAll:
                try store.removeAll()
                state.removeAll()
            case .sync: try store.sync()
            case .compact: try store.compact()
            }
            ops.append(op)
            states.append(state)
            absorbFlushes(started: n + 1)
            switch op {
            case .sync, .compact: promised = n + 1
            default: if synchronous { promised = n + 1 }
            }
            try snapshot(started: n + 1)
            if !synchronous, case .sync = op {
                #expect(!FileManager.default.fileExists(atPath: dir.file("ui.prefs.prev")), "sync() removes the base")
                #expect(!FileManager.default.fileExists(atPath: dir.file("ui.prefs.tmp")), "and the spare file")
            }
            // An image renamed in place unflushed names its base (header bytes 114..<122).
            if let file = recorder.names().data, file != fileBefore, !dataFiles.insert(file).inserted { reusedFiles += 1 }
            if recorder.names().data != fileBefore, let header = try? readBytes(dir.file("ui.prefs")),
                header.count >= 122, header[114..<122].contains(where: { $0 != 0 })
            {
                deferredCompactions += 1
            }
        }
        #expect(try CrashModel.read(store).values == states.last!)
        #expect(synchronous || deferredCompactions > 0, "some automatic compaction did not wait for the disk")
        #expect(!synchronous || deferredCompactions == 0, "a synchronous store's compactions all wait for the disk")
        #expect(synchronous || reusedFiles > 0, "some automatic compaction wrote into the file an earlier image used")
        #expect(!synchronous || reusedFiles == 0, "a synchronous store's images are all new files")

        // Every cut: at each point, each name holding what it held durably or anything since, each file's sectors
        // from its versions since its last flush.
        var cuts: [PowerCut] = []
        var lastDurable = 0
        for t in points.indices {
            if points[t].durable { lastDurable = t }
            let (started, promised) = (points[t].started, points[t].promised)
            let since = points[lastDurable...t].map(\.names)
            func candidates(_ name: KeyPath<FlushRecorder.Names, UInt64?>) -> [UInt64?] {
                var seen: [UInt64?] = []
                for names in since where !seen.contains(names[keyPath: name]) { seen.append(names[keyPath: name]) }
                // The durable one, the newest one, and one in between.
                guard seen.count > 2 else { return seen }
                return [seen.first!, seen[Int.random(in: 1..<seen.count - 1, using: &rng)], seen.last!]
            }
            /// The versions of a file up to this point, from its last flush (zeros before its first one).
            func window(_ generation: UInt64) -> [[UInt8]] {
                let known = (versions[generation] ?? []).filter { $0.point <= t }
                guard let first = known.first else { return [] }
                if let barrier = known.lastIndex(where: \.barrier) { return known[barrier...].map(\.bytes) }
                return [[UInt8](repeating: 0, count: first.bytes.count)] + known.map(\.bytes)
            }
            func image(_ window: [[UInt8]], length: Int, _ pick: (Int) -> Int) -> [UInt8] {
                var image = [UInt8](repeating: 0, count: length)
                for sector in 0..<(length + 511) / 512 {
                    let source = window[pick(sector)]
                    let range = sector * 512..<min((sector + 1) * 512, length)
                    if range.lowerBound < source.count {
                        let upper = min(range.upperBound, source.count)
                        image.replaceSubrange(range.lowerBound..<upper, with: source[range.lowerBound..<upper])
                    }
                }
                return image
            }
            for data in candidates(\.data) {
                guard let data else { continue }
                let dataWindow = window(data)
                guard !dataWindow.isEmpty else { continue }
                for base in candidates(\.base) {
                    let baseWindow = base.map(window) ?? []
                    func cut(_ kind: String, length: Int, _ pick: (Int) -> Int) {
                        let dataImage = image(dataWindow, length: length, pick)
                        var baseImage: [UInt8]?
                        if let base, !baseWindow.isEmpty {
                            // One file under two names holds the same bytes.
                            baseImage =
                                base == data
                                ? dataImage
                                : image(
                                    baseWindow,
                                    length: baseWindow[Int.random(in: 0..<baseWindow.count, using: &rng)].count
                                ) {
                                    _ in Int.random(in: 0..<baseWindow.count, using: &rng)
                                }
                        }
                        cuts.append(
                            PowerCut(
                                image: dataImage, base: baseImage, started: started, promised: promised, kind: kind))
                    }
                    let last = dataWindow.count - 1
                    let lengths = dataWindow.map(\.count)
                    cut("every sector new", length: lengths[last]) { _ in last }
                    if !(versions[data] ?? []).contains(where: { $0.barrier && $0.point <= t }) {
                        // Never flushed: not even its size may have reached the disk.
                        cut("an unflushed file of no length", length: 0) { _ in 0 }
                    }
                    guard last > 0 else { continue }
                    cut("every sector as flushed", length: lengths[0]) { _ in 0 }
                    cut("header page new, the rest as flushed", length: lengths[last]) { $0 < 8 ? last : 0 }
                    cut("header page as flushed, the rest new", length: lengths[last]) { $0 < 8 ? 0 : last }
                    var byPage: [Int: Int] = [:]
                    let length = lengths[Int.random(in: 0...last, using: &rng)]
                    cut("pages from random versions", length: length) { sector in
                        if let v = byPage[sector / 8] { return v }
                        let v = Int.random(in: 0...last, using: &rng)
                        byPage[sector / 8] = v
                        return v
                    }
                    cut("sectors from random versions", length: length) { _ in Int.random(in: 0...last, using: &rng) }
                }
            }
        }

        // Open every cut in a fresh directory.
        let check = try TempDir("power-check", memory: true)
        var recoveries = 0
        var prefixCuts = 0
        var opened = 0
        var seen = Set<Int>()
        for (i, cut) in cuts.enumerated() {
            var hasher = Hasher()
            hasher.combine(cut.image)
            hasher.combine(cut.base)
            hasher.combine(cut.started)
            hasher.combine(cut.promised)
            guard seen.insert(hasher.finalize()).inserted else { continue }
            let context =
                "cut \(i) (\(cut.kind), \(cut.base == nil ? "no" : "a") base image, \(cut.started) started, \(cut.promised) promised; \(durability), sealed \(sealed), seed \(seed))"
            for name in check.files { try FileManager.default.removeItem(atPath: check.file(name)) }
            try writeBytes(cut.image, to: check.file("ui.prefs"))
            if let base = cut.base { try writeBytes(base, to: check.file("ui.prefs.prev")) }
            let reopened: PrefsStore
            do {
                reopened = try openStore(check) { $0.sealer = sealer }
            } catch {
                Issue.record("\(context): does not open: \(error)")
                continue
            }
            opened += 1
            // A sync() right away: it may remove a base image, which must not lose what the base alone holds
            // (a damaged image read lazily from its persisted table is read whole first).
            try reopened.sync()
            if let report = reopened.lastRecovery {
                recoveries += 1
                #expect(!synchronous, "\(context): a synchronous store needed a recovery: \(report)")
                #expect(
                    try report.quarantinePath.map(readBytes) == cut.image,
                    "\(context): quarantine differs: \(report) size \(cut.image.count) vs \((try? report.quarantinePath.map(readBytes))??.count ?? -1)"
                )
            }
            let found = try CrashModel.read(reopened).values
            var allowed: [String: [Expected?]] = [:]
            for (k, v) in states[cut.promised] { allowed[k] = [v] }
            for op in ops[cut.promised..<cut.started] {
                switch op {
                case .set(let k, let v): allowed[k, default: [nil]].append(v)
                case .transaction(let changes): for (k, v) in changes { allowed[k, default: [nil]].append(v) }
                case .remove(let k): allowed[k, default: [nil]].append(nil)
                case .removeAll: for k in allowed.keys { allowed[k]!.append(nil) }
                case .sync, .compact: break
                }
            }
            for key in Set(found.keys).union(allowed.keys) {
                let options = allowed[key] ?? [nil]
                #expect(
                    options.contains(found[key]),
                    "\(context): \(key) is \(String(describing: found[key])), allowed \(options)")
            }
            // A cut that opens without a recovery holds the whole state after some operation since the promise: a
            // prefix of what was written, each transaction whole (the per-key rule above cannot see a newer value of
            // one key beside an older value of a key written before it, or a record of an earlier image taken for
            // one of this image).
            if reopened.lastRecovery == nil {
                let prefixes = (cut.promised...cut.started).map { states[$0] }
                #expect(prefixes.contains(found), "\(context): the state is no prefix of the operations: \(found)")
                if prefixes.contains(found) { prefixCuts += 1 }
            }
        }
        Torture.report(
            "power loss (\(durability), \(sealed ? "sealed" : "plain")): \(operations) operations, \(versions.count) files "
                + "(\(deferredCompactions) renamed in place unflushed, \(reusedFiles) written into a file an earlier image used), "
                + "\(cuts.count) cuts (\(opened) distinct) opened, \(recoveries) needed a recovery, \(prefixCuts) opened "
                + "without one held a prefix of the operations, 0 lost a promised write, "
                + "0 held a value never written")
    }
}
