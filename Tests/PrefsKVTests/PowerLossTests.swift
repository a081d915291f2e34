import Foundation
import Glibc
import Synchronization
import TestKit
import TestSealer
import Testing

@testable import PrefsKV

/// Records, through `PrefsSyncProbe`, the content of the store files of one directory at every flush PrefsKV
/// makes there: what a power cut right after that flush is sure to find on disk.
final class FlushRecorder: Sendable {
    enum Flush {
        /// `fdatasync` of `ui.prefs` or of a new image `ui.prefs.tmp`, with the file's bytes at that moment.
        case data(name: String, bytes: [UInt8])
        /// `fsync` of the directory: renames and new names before it are durable.
        case directory
    }

    let directory: String
    let flushes = Mutex<[Flush]>([])

    init(directory: String) { self.directory = directory }

    func observe(_ fd: Int32) {
        var buffer = [CChar](repeating: 0, count: 4096)
        let n = readlink("/proc/self/fd/\(fd)", &buffer, buffer.count - 1)
        guard n > 0 else { return }
        let path = String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        if path == directory {
            flushes.withLock { $0.append(.directory) }
            return
        }
        guard path.hasPrefix(directory + "/") else { return }
        let name = String(path.dropFirst(directory.count + 1))
        guard name == "ui.prefs" || name == "ui.prefs.tmp" else { return }
        var st = stat()
        guard fstat(fd, &st) == 0 else { return }
        var bytes = [UInt8](repeating: 0, count: Int(st.st_size))
        let read = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        guard read == bytes.count else { return }
        flushes.withLock { $0.append(.data(name: name, bytes: bytes)) }
    }

    func take() -> [Flush] {
        flushes.withLock { flushes in
            defer { flushes.removeAll() }
            return flushes
        }
    }
}

/// A simulated power cut: a file image built from the versions of the data file since its last flush.
///
/// The model (Documentation/Reliability.md): after `fdatasync` returns, the file's data and size as they were at
/// the call are on the disk. Between two flushes the kernel may write back any dirty page at any time and in any
/// order, and a drive may persist any subset of a page's 512-byte sectors; a sector is written whole (the
/// power-safe write unit). So a cut leaves each sector as it was in some version between the last flush and the
/// cut, and the file's size as one of those versions'. A rename is durable once the directory is flushed; before
/// that, the name may point at the old file or at the new image (which was flushed before the rename).
struct PowerCut {
    var image: [UInt8]
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

    struct Version {
        var bytes: [UInt8]
        var barrier: Bool
        var started: Int
        var promised: Int
    }

    static let cases: [(String, Bool)] = [
        ("buffered", false), ("buffered", true), ("synchronous", false), ("synchronous", true),
    ]

    /// A store runs a random workload (sets, transactions, deletes, removeAll, `sync()`, compactions, automatic
    /// compactions) while every flush it makes is recorded; then every power cut the model allows at every
    /// point in time is opened in a fresh directory. Each must open; every key must hold its value as of the
    /// last point the API promised durable (the last returned `sync()` or compaction for `.buffered`, the last
    /// returned write for `.synchronous`) or a value written after it; `.synchronous` stores never need a
    /// recovery; a recovery always quarantines the image byte for byte.
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

        var epochs: [[Version]] = [[]]
        var renameWindow: [PowerCut] = []
        var pendingImage: [UInt8]?
        var promised = 0
        var states: [[String: Expected]] = [[:]]
        var ops: [Op] = []
        func absorbFlushes(started: Int) {
            for flush in recorder.take() {
                switch flush {
                case .data(let name, let bytes) where name == "ui.prefs":
                    epochs[epochs.count - 1].append(
                        Version(bytes: bytes, barrier: true, started: started, promised: promised))
                case .data(_, let bytes):
                    pendingImage = bytes
                case .directory:
                    guard let image = pendingImage else { continue }
                    renameWindow.append(
                        PowerCut(image: image, started: started, promised: promised, kind: "renamed image"))
                    epochs.append([Version(bytes: image, barrier: true, started: started, promised: promised)])
                    pendingImage = nil
                }
            }
        }

        let store = try openStore(dir) {
            $0.durability = synchronous ? .synchronous : .buffered
            $0.autoCompactionThreshold = 16 * 1024
            $0.sealer = sealer
        }
        absorbFlushes(started: 0)
        for n in 0..<operations {
            let key = "k\(Int.random(in: 0..<40, using: &rng))"
            let op: Op
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
            default: op = .compact
            }
            var state = states.last!
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
            epochs[epochs.count - 1].append(
                Version(bytes: try readBytes(store.path), barrier: false, started: n + 1, promised: promised))
        }
        #expect(try CrashModel.read(store).values == states.last!)

        // Every cut: at each recorded point, from that epoch's last flush.
        var cuts = renameWindow
        for versions in epochs where !versions.isEmpty {
            var lastBarrier = 0
            for t in versions.indices {
                // Cut while version t is in memory: just before its flush completes when it is a flush.
                defer { if versions[t].barrier { lastBarrier = t } }
                let window = Array(versions[lastBarrier...t])
                let (started, promised) = (versions[t].started, versions[t].promised)
                func cut(_ kind: String, length: Int, _ pick: (Int) -> Int) {
                    var image = [UInt8](repeating: 0, count: length)
                    for sector in 0..<(length + 511) / 512 {
                        let source = window[pick(sector)].bytes
                        let range = sector * 512..<min((sector + 1) * 512, length)
                        if range.lowerBound < source.count {
                            let upper = min(range.upperBound, source.count)
                            image.replaceSubrange(range.lowerBound..<upper, with: source[range.lowerBound..<upper])
                        }
                    }
                    cuts.append(PowerCut(image: image, started: started, promised: promised, kind: kind))
                }
                let last = window.count - 1
                let lengths = window.map(\.bytes.count)
                cut("every sector new", length: lengths[last]) { _ in last }
                guard last > 0 else { continue }
                cut("every sector as flushed", length: lengths[0]) { _ in 0 }
                cut("header page new, the rest as flushed", length: lengths[last]) { $0 < 8 ? last : 0 }
                cut("header page as flushed, the rest new", length: lengths[last]) { $0 < 8 ? 0 : last }
                for _ in 0..<2 {
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
        var opened = 0
        var seen = Set<Int>()
        for (i, cut) in cuts.enumerated() {
            var hasher = Hasher()
            hasher.combine(cut.image)
            hasher.combine(cut.started)
            hasher.combine(cut.promised)
            guard seen.insert(hasher.finalize()).inserted else { continue }
            let context =
                "cut \(i) (\(cut.kind), \(cut.started) started, \(cut.promised) promised; \(durability), sealed \(sealed), seed \(seed))"
            for name in check.files { try FileManager.default.removeItem(atPath: check.file(name)) }
            try writeBytes(cut.image, to: check.file("ui.prefs"))
            let reopened: PrefsStore
            do {
                reopened = try openStore(check) { $0.sealer = sealer }
            } catch {
                Issue.record("\(context): does not open: \(error)")
                continue
            }
            opened += 1
            if let report = reopened.lastRecovery {
                recoveries += 1
                #expect(!synchronous, "\(context): a synchronous store needed a recovery: \(report)")
                #expect(try report.quarantinePath.map(readBytes) == cut.image, "\(context): quarantine differs")
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
        }
        Torture.report(
            "power loss (\(durability), \(sealed ? "sealed" : "plain")): \(operations) operations, \(epochs.count) file images, "
                + "\(cuts.count) cuts (\(opened) distinct) opened, \(recoveries) needed a recovery, 0 lost a promised write, "
                + "0 held a value never written")
    }
}
