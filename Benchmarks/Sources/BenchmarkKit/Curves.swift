// The scaling curves: how set, get, overwrite, cold open, peak memory and file size grow with the number of keys
// (10 to 1,000,000) and with the size of a value (8 bytes to 1 MiB), for PrefsKV (plain and sealed), SQLite and
// LMDB. `prefskv-bench curves` runs them (a fresh worker process per point, engines interleaved as in the main
// run) and writes JSON that `scripts/plot-curves.py` draws as log-log plots (Documentation/curves-*.png).
import FoundationEssentials
import Glibc

/// What the curves measure.
public struct CurveScale: Sendable, Codable {
    public var keyCounts = [10, 1_000, 10_000, 100_000, 1_000_000]
    public var valueSizes = [8, 64, 512, 4_096, 32_768, 262_144, 1_048_576]
    /// Worker processes per point and engine (the figure is their median); the 1,000,000-key point runs once
    /// (SQLite alone takes about 30 s there).
    public var rounds = 3
    /// Cold processes per point and engine.
    public var coldSpawns = 7
    /// Keys a value-size workload cycles through; its writes total about `valueBytes` (at least 64 writes).
    public var valueKeys = 16
    public var valueBytes = 32 << 20

    public init() {}

    public static var quick: CurveScale {
        var scale = CurveScale()
        scale.keyCounts = [10, 1_000]
        scale.valueSizes = [8, 4_096, 65_536]
        scale.rounds = 1
        scale.coldSpawns = 2
        scale.valueBytes = 1 << 20
        return scale
    }

    func rounds(forKeys count: Int) -> Int { count >= 1_000_000 ? 1 : rounds }

    /// Writes of a value of `size` bytes: about `valueBytes` in all, between 64 and 20,000.
    func writes(ofSize size: Int) -> Int { min(20_000, max(64, valueBytes / size)) }
}

/// One point of one curve: `metric` of `engine` at `x` keys or value bytes, a sample per process.
public struct CurvePoint: Sendable, Codable {
    public enum Axis: String, Sendable, Codable { case keys, valueBytes = "value bytes" }
    /// `set`, `get`, `overwrite`, `cold` (nanoseconds per operation; cold: per open + first read), `rss` (peak
    /// KiB of the process), `file` (bytes on disk).
    public var metric: String
    public var axis: Axis
    public var x: Int
    public var engine: String
    public var samples: [Double] = []
}

public struct CurveResults: Sendable, Codable {
    public var quick: Bool
    public var scale: CurveScale
    public var points: [CurvePoint] = []
    public var machine: [String: String] = [:]
    public var elapsedSeconds: Double = 0

    public func point(_ metric: String, _ axis: CurvePoint.Axis, _ x: Int, _ engine: String) -> CurvePoint? {
        points.first { $0.metric == metric && $0.axis == axis && $0.x == x && $0.engine == engine }
    }

    mutating func add(_ metric: String, _ axis: CurvePoint.Axis, _ x: Int, _ engine: String, _ sample: Double) {
        if let i = points.firstIndex(where: { $0.metric == metric && $0.axis == axis && $0.x == x && $0.engine == engine }) {
            points[i].samples.append(sample)
        } else {
            points.append(CurvePoint(metric: metric, axis: axis, x: x, engine: engine, samples: [sample]))
        }
    }
}

public struct Curves {
    public static let engines: [EngineKind] = [.prefs, .prefsSealed, .sqlite, .lmdbNoSync]
    public static let metrics = ["set", "get", "overwrite", "cold", "rss", "file"]

    let orchestrator: Orchestrator
    let scale: CurveScale
    var results: CurveResults

    public init(quick: Bool) {
        orchestrator = Orchestrator(quick: quick)
        scale = quick ? .quick : CurveScale()
        results = CurveResults(quick: quick, scale: scale)
    }

    public mutating func run() -> CurveResults {
        let start = monotonicNanoseconds()
        defer { removeTree(orchestrator.scratchRoot) }
        results.machine = orchestrator.machineFacts()
        for count in scale.keyCounts { keyPoint(count) }
        for size in scale.valueSizes { valuePoint(size) }
        results.elapsedSeconds = Double(monotonicNanoseconds() - start) / 1e9
        return results
    }

    /// Each engine sets `count` keys in a fresh store, reads them all, overwrites each once (one worker process
    /// per round and engine); then new processes open the last round's stores and read one key.
    mutating func keyPoint(_ count: Int) {
        note("curves: \(grouped(count)) keys")
        point(
            .keys, count, rounds: scale.rounds(forKeys: count), worker: "curve-keys", arguments: ["\(count)"],
            cold: "cold", coldKey: "key.\(count / 2)")
    }

    /// Each engine writes values of `size` bytes to `valueKeys` keys in turn, then reads them; then new processes
    /// open the store and read one value.
    mutating func valuePoint(_ size: Int) {
        note("curves: values of \(Report.bytes(size))")
        point(
            .valueBytes, size, rounds: scale.rounds, worker: "curve-values",
            arguments: ["\(scale.writes(ofSize: size))", "\(size)"], cold: "cold-bytes", coldKey: "\(size)")
    }

    /// One point of both kinds: `worker` run once per round and engine (engines rotated) on a fresh directory,
    /// every metric it reports filed (set: its sample; the others from its extras, its peak RSS and file size);
    /// then cold opens of each engine's last store.
    mutating func point(
        _ axis: CurvePoint.Axis, _ x: Int, rounds: Int, worker: String, arguments: [String], cold workload: String,
        coldKey: String
    ) {
        var stores: [(EngineKind, String)] = []
        for round in 0..<rounds {
            for engine in orchestrator.rotated(Self.engines, by: round) {
                let directory = orchestrator.freshDirectory()
                let result = work([worker, engine.rawValue, directory] + arguments)
                results.add("set", axis, x, engine.rawValue, result.samples[0])
                for (metric, value) in result.extra where Self.metrics.contains(metric) {
                    results.add(metric, axis, x, engine.rawValue, value)
                }
                results.add("rss", axis, x, engine.rawValue, Double(result.peakRSSKiB))
                results.add("file", axis, x, engine.rawValue, Double(result.fileBytes ?? 0))
                if let old = stores.firstIndex(where: { $0.0 == engine }) {
                    removeTree(stores[old].1)
                    stores.remove(at: old)
                }
                stores.append((engine, directory))
            }
        }
        cold(stores, axis: axis, x: x, workload: workload, key: coldKey)
    }

    mutating func cold(_ stores: [(EngineKind, String)], axis: CurvePoint.Axis, x: Int, workload: String, key: String) {
        for spawn in 0..<scale.coldSpawns {
            for (engine, directory) in orchestrator.rotated(stores, by: spawn) {
                let result = work([workload, engine.rawValue, directory, "1", key])
                results.add("cold", axis, x, engine.rawValue, result.samples[0])
            }
        }
        for (_, directory) in stores { removeTree(directory) }
    }

    func work(_ arguments: [String]) -> WorkerResult {
        let run = runChild(orchestrator.executable, ["worker"] + arguments)
        guard run.status == 0, let result = orchestrator.decode(run.output), !result.samples.isEmpty else {
            fatalError("curve worker \(arguments.joined(separator: " ")) failed (exit \(run.status)): \(run.output)")
        }
        return result
    }

    /// The curves as Markdown tables: one per axis and metric, a row per point, a column per engine.
    public static func markdown(_ r: CurveResults) -> String {
        var out = ["## Scaling curves", ""]
        out.append(
            "Mode: \(r.quick ? "quick" : "full"); medians over \(r.scale.rounds) process(es) per point (1 at 1,000,000 "
                + "keys), cold opens over \(r.scale.coldSpawns); run took \(Report.fixed(r.elapsedSeconds, 0)) s.")
        for (key, value) in r.machine.sorted(by: { $0.key < $1.key }) { out.append("- \(key): \(value)") }
        let titles = [
            "set": "set (ns per operation)", "get": "get, warm (ns per operation)",
            "overwrite": "overwrite every key once (ns per operation)", "cold": "cold open + first read",
            "rss": "peak RSS of the process", "file": "file size on disk",
        ]
        for axis in [CurvePoint.Axis.keys, .valueBytes] {
            let xs = Set(r.points.filter { $0.axis == axis }.map(\.x)).sorted()
            for metric in metrics where r.points.contains(where: { $0.axis == axis && $0.metric == metric }) {
                out += ["", "### \(titles[metric] ?? metric), by \(axis.rawValue)", ""]
                out.append("| \(axis.rawValue) | " + engines.map(\.rawValue).joined(separator: " | ") + " |")
                out.append("|---:|" + String(repeating: "---:|", count: engines.count))
                for x in xs {
                    let cells = engines.map { engine -> String in
                        guard let m = r.point(metric, axis, x, engine.rawValue).flatMap({ median($0.samples) }) else {
                            return ""
                        }
                        switch metric {
                        case "rss": return Report.bytes(Int(m) * 1024)
                        case "file": return Report.bytes(Int(m))
                        default: return Report.time(m)
                        }
                    }
                    let label = axis == .keys ? grouped(x) : Report.bytes(x)
                    out.append("| \(label) | " + cells.joined(separator: " | ") + " |")
                }
            }
        }
        return out.joined(separator: "\n") + "\n"
    }
}

extension Worker {
    /// `curve-keys`: set `count` new keys (one batch, as the write workloads), read every key in a shuffled order
    /// (passes totalling at least 100,000 gets; their median), overwrite every key once with a new value. The
    /// store stays populated (key.i = i + count) for the cold opens.
    static func curveKeys(_ engine: EngineKind, _ directory: String, _ count: Int) throws -> WorkerResult {
        let keys = Inputs.keys(count)
        let shuffled = Inputs.shuffled(keys)
        var store: (any KVEngine)? = try engine.open(in: directory)
        let set = try measure {
            try store!.beginBatch()
            for (i, key) in keys.enumerated() { try store!.setInt(key, i) }
            try store!.endBatch()
        }
        var sum = 0
        var gets: [Double] = []
        for _ in 0..<max(3, min(10_000, 100_000 / count)) {
            let pass = try measure { for key in shuffled { sum &+= try store!.getInt(key) ?? -1_000_000_000 } }
            gets.append(Double(pass.nanoseconds) / Double(count))
        }
        guard sum >= 0 else { throw BenchError("curve-keys: keys missing after the sets") }
        let overwrite = try measure {
            try store!.beginBatch()
            for (i, key) in keys.enumerated() { try store!.setInt(key, i + count) }
            try store!.endBatch()
        }
        let files = store!.files
        store = nil
        return WorkerResult(
            samples: [Double(set.nanoseconds) / Double(count)],
            allocationsPerOperation: Double(set.allocations) / Double(count), peakRSSKiB: peakRSSKiB(),
            fileBytes: diskBytes(files),
            extra: ["get": median(gets) ?? 0, "overwrite": Double(overwrite.nanoseconds) / Double(count)])
    }

    /// `curve-values`: `writes` values of `size` bytes written to 16 keys in turn (consecutive values of a key
    /// always differ), then every key read (passes totalling at least `writes` gets; their median per get).
    static func curveValues(_ engine: EngineKind, _ directory: String, _ writes: Int, size: Int) throws
        -> WorkerResult
    {
        let keyCount = CurveScale().valueKeys
        let keys = Inputs.keys(keyCount, prefix: "value")
        let values = Inputs.values(keyCount + 1, size: size)
        var store: (any KVEngine)? = try engine.open(in: directory)
        let set = try measure {
            try store!.beginBatch()
            for i in 0..<writes { try store!.setBytes(keys[i % keyCount], values[i % values.count]) }
            try store!.endBatch()
        }
        var gets: [Double] = []
        var total = 0
        for _ in 0..<max(3, writes / keyCount) {
            let pass = try measure { for key in keys { total &+= try store!.getBytes(key)?.count ?? 0 } }
            gets.append(Double(pass.nanoseconds) / Double(keyCount))
        }
        guard total == gets.count * keyCount * size else { throw BenchError("curve-values: values missing or short") }
        let files = store!.files
        store = nil
        return WorkerResult(
            samples: [Double(set.nanoseconds) / Double(writes)],
            allocationsPerOperation: Double(set.allocations) / Double(writes), peakRSSKiB: peakRSSKiB(),
            fileBytes: diskBytes(files), extra: ["get": median(gets) ?? 0])
    }

    /// `cold-bytes`: in a fresh process, open a store written by `curve-values` and read one value of `size`
    /// bytes; the time from before the open to after the read.
    static func coldBytes(_ engine: EngineKind, _ directory: String, size: Int) throws -> WorkerResult {
        var store: (any KVEngine)?
        var value: Data?
        let measured = try measure {
            store = try engine.open(in: directory)
            value = try store!.getBytes("value.0")
        }
        guard value?.count == size else { throw BenchError("cold-bytes: value.0 missing or not \(size) bytes") }
        return WorkerResult(
            samples: [Double(measured.nanoseconds)], allocationsPerOperation: Double(measured.allocations),
            peakRSSKiB: peakRSSKiB(), fileBytes: diskBytes(store!.files))
    }
}

extension Inputs {
    /// `count` distinct byte strings of `size` bytes (different from their first 8 bytes on).
    static func values(_ count: Int, size: Int) -> [Data] {
        var generator = SplitMix(seed: UInt64(size))
        return (0..<count).map { i in
            var bytes = [UInt8](repeating: 0, count: size)
            for j in stride(from: 0, to: size, by: 8) {
                let word = generator.next()
                for k in 0..<min(8, size - j) { bytes[j + k] = UInt8(truncatingIfNeeded: word >> (8 * UInt64(k))) }
            }
            withUnsafeBytes(of: UInt64(i).littleEndian) { for k in 0..<min(8, size) { bytes[k] = $0[k] } }
            return Data(bytes)
        }
    }
}
