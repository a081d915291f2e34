// The workloads, and the worker side that runs one of them in a fresh process and prints one JSON line.
import FoundationEssentials
import Glibc

/// What a run measures, and how much of it.
public struct Scale: Sendable, Codable {
    /// Keys for "set N ints", "set N strings", "get all keys" and the big cold open.
    public var keys = 10_000
    /// Writes spread over 100 hot keys.
    public var hotWrites = 100_000
    /// Rewrites of one 4 KiB JSON blob, among `blobNeighbours` other keys.
    public var blobWrites = 100_000
    public var blobNeighbours = 1_000
    /// Operations per run in the strictest-durability section (a sync each: 0.2 ms or more).
    public var strictWrites = 1_000
    /// Fresh worker processes per workload and engine (the medians are over these).
    public var repetitions = 5
    /// Passes over every key in one process (get workloads); the process reports their median.
    public var getPasses = 15
    /// Cold processes per engine and store size.
    public var coldSpawns = 21
    /// Fresh processes per vault variant.
    public var vaultSpawns = 21
    /// Warm reads and synchronous sets in one process.
    public var vaultWarmReads = 10_000
    public var vaultSets = 200
    public var sealOpens = 100_000

    public init() {}

    /// Small enough that the whole run, debug build included, finishes in well under a minute.
    public static var quick: Scale {
        var scale = Scale()
        scale.keys = 1_000
        scale.hotWrites = 5_000
        scale.blobWrites = 2_000
        scale.blobNeighbours = 100
        scale.strictWrites = 50
        scale.repetitions = 1
        scale.getPasses = 3
        scale.coldSpawns = 3
        scale.vaultSpawns = 3
        scale.vaultWarmReads = 1_000
        scale.vaultSets = 10
        scale.sealOpens = 1_000
        return scale
    }
}

public enum Workload: String, CaseIterable, Sendable, Codable {
    case setInt = "set-int"
    case setString = "set-string64"
    case overwriteHot = "overwrite-hot"
    case blob = "blob-4k"
    case get = "get"
    case mpRead = "mp-read"
    case cold = "cold"
    case tokenWarm = "token-warm"
    case tokenSet = "token-set"
    case sealOpen = "seal-open"

    public var title: String {
        switch self {
        case .setInt: return "set int"
        case .setString: return "set 64-byte string"
        case .overwriteHot: return "overwrite 100 hot keys"
        case .blob: return "rewrite a 4 KiB JSON blob among other keys"
        case .get: return "get int"
        case .mpRead: return "get int while another process writes"
        case .cold: return "cold open + first read"
        case .tokenWarm: return "warm session-token read"
        case .tokenSet: return "set a session token, synchronous durability"
        case .sealOpen: return "seal + open a 256-byte value"
        }
    }
}

/// The keys and values every engine gets, built before any timing.
enum Inputs {
    static func keys(_ count: Int, prefix: String = "key") -> [String] {
        (0..<count).map { "\(prefix).\($0)" }
    }

    /// `count` distinct 64-byte ASCII strings.
    static func strings64(_ count: Int) -> [String] {
        (0..<count).map { i in
            let head = "value-\(i)-"
            return head + String(repeating: "x", count: 64 - head.utf8.count)
        }
    }

    /// Distinct 4096-byte JSON documents (persisted app state); consecutive writes never repeat a value, so
    /// compare-before-set never skips one.
    static func blobs(_ count: Int) -> [String] {
        (0..<count).map { variant in
            var json = "{\"version\":\(variant),\"theme\":\"dark\",\"sidebar\":{\"expanded\":true},\"items\":["
            var i = 0
            while json.utf8.count < 4096 - 40 {
                json += "{\"id\":\(i),\"v\":\(variant)},"
                i += 1
            }
            json += "0],\"pad\":\""
            json += String(repeating: "p", count: 4096 - 2 - json.utf8.count) + "\"}"
            precondition(json.utf8.count == 4096)
            return json
        }
    }

    /// A fixed permutation, so every engine reads in the same order.
    static func shuffled(_ keys: [String]) -> [String] {
        var generator = SplitMix(seed: 42)
        return keys.shuffled(using: &generator)
    }
}

struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// One worker process's answer.
public struct WorkerResult: Sendable, Codable {
    /// Nanoseconds per operation of each timed pass.
    public var samples: [Double]
    public var allocationsPerOperation: Double
    public var peakRSSKiB: Int
    public var fileBytes: Int?
    public var extra: [String: Double] = [:]
}

/// Fills a store with `count` ints under `Inputs.keys(count)`, untimed (set-up for reads and cold opens).
public func populate(_ engine: EngineKind, directory: String, count: Int) throws {
    let store = try engine.open(in: directory)
    let keys = Inputs.keys(count)
    try store.beginBatch()
    for (i, key) in keys.enumerated() { try store.setInt(key, i) }
    try store.endBatch()
}

/// The worker side: `prefskv-bench worker <workload> <engine> <directory> <count> [argument]`.
public enum Worker {
    public static func run(_ arguments: [String]) -> Int32 {
        guard arguments.count >= 4, let engine = EngineKind(rawValue: arguments[1]), let count = Int(arguments[3])
        else {
            note("usage: prefskv-bench worker <workload> <engine> <directory> <count> [argument]")
            return 64
        }
        let directory = arguments[2]
        let argument = arguments.count > 4 ? arguments[4] : ""
        do {
            let result: WorkerResult
            switch arguments[0] {
            case "set-int": result = try writes(engine, directory, count) { s, keys, _ in
                for (i, key) in keys.enumerated() { try s.setInt(key, i) }
            }
            case "set-string64":
                let values = Inputs.strings64(count)
                result = try writes(engine, directory, count) { s, keys, _ in
                    for (i, key) in keys.enumerated() { try s.setString(key, values[i]) }
                }
            case "overwrite-hot":
                let hot = Inputs.keys(100, prefix: "hot")
                result = try writes(engine, directory, count, keyCount: 0) { s, _, _ in
                    for i in 0..<count { try s.setInt(hot[i % 100], i) }
                }
            case "blob-4k":
                let neighbours = Int(argument) ?? 1_000
                let blobs = Inputs.blobs(16)
                let others = Inputs.strings64(neighbours)
                result = try writes(
                    engine, directory, count, keyCount: neighbours,
                    prepare: { s, keys in for (i, key) in keys.enumerated() { try s.setString(key, others[i]) } }
                ) { s, _, _ in
                    for i in 0..<count { try s.setString("app.state", blobs[i & 15]) }
                }
            case "noop": result = WorkerResult(samples: [0], allocationsPerOperation: 0, peakRSSKiB: peakRSSKiB())
            case "get": result = try gets(engine, directory, count, passes: Int(argument) ?? 10)
            case "first-get": result = try firstGets(engine, directory, count)
            case "cold":
                result = try cold(engine, directory, key: argument, after: arguments.count > 5 ? arguments[5] : nil)
            case "curve-keys": result = try curveKeys(engine, directory, count)
            case "curve-values": result = try curveValues(engine, directory, count, size: Int(argument) ?? 8)
            case "cold-bytes": result = try coldBytes(engine, directory, size: Int(argument) ?? 8)
            case "mp-writer": result = try mpWriter(engine, directory, stopFile: argument)
            case "mp-reader": result = try gets(engine, directory, count, passes: 10_000, deadlineMs: Int(argument))
            default:
                if let vault = try VaultWorker.run(arguments[0], directory, count, argument) {
                    result = vault
                } else {
                    note("unknown workload \(arguments[0])")
                    return 64
                }
            }
            let json = try JSONEncoder().encode(result)
            print(String(decoding: json, as: UTF8.self))
            return 0
        } catch {
            note("worker \(arguments[0]) \(engine.rawValue): \(error)")
            return 1
        }
    }

    /// A fresh store, optional untimed set-up, then `body` timed once (SQLite one-txn: BEGIN..COMMIT inside).
    static func writes(
        _ engine: EngineKind, _ directory: String, _ operations: Int, keyCount: Int? = nil,
        prepare: ((any KVEngine, [String]) throws -> Void)? = nil,
        _ body: (any KVEngine, [String], Int) throws -> Void
    ) throws -> WorkerResult {
        let keys = Inputs.keys(keyCount ?? operations)
        var store: (any KVEngine)? = try engine.open(in: directory)
        if let prepare { try prepare(store!, keys) }
        let measured = try measure {
            try store!.beginBatch()
            try body(store!, keys, operations)
            try store!.endBatch()
        }
        let files = store!.files
        store = nil  // closed: SQLite checkpoints its WAL on close, LMDB flushes
        return WorkerResult(
            samples: [Double(measured.nanoseconds) / Double(operations)],
            allocationsPerOperation: Double(measured.allocations) / Double(operations), peakRSSKiB: peakRSSKiB(),
            fileBytes: diskBytes(files))
    }

    /// Reads every key of a populated store (opened afresh in this process) in a fixed shuffled order,
    /// `passes` times or until `deadlineMs` elapsed.
    static func gets(
        _ engine: EngineKind, _ directory: String, _ count: Int, passes: Int, deadlineMs: Int? = nil
    ) throws -> WorkerResult {
        let keys = Inputs.shuffled(Inputs.keys(count))
        let store = try engine.open(in: directory)
        var samples: [Double] = []
        var allocations: UInt64 = 0
        var sum = 0
        // Warm reads: every key read once, untimed (a store opened from its persisted index looks each key up in
        // it on its first read: `firstGets` times that).
        for key in keys { sum &+= try store.getInt(key) ?? -1_000_000 }
        let stopAt = deadlineMs.map { monotonicNanoseconds() + UInt64($0) * 1_000_000 }
        for _ in 0..<passes {
            let measured = try measure {
                for key in keys { sum &+= try store.getInt(key) ?? -1_000_000 }
            }
            samples.append(Double(measured.nanoseconds) / Double(keys.count))
            allocations = measured.allocations
            if let stopAt, monotonicNanoseconds() >= stopAt { break }
        }
        // Every key was found (a miss adds a large negative number): the reads were real.
        guard sum > 0 else { throw BenchError("get: keys missing from the populated store") }
        return WorkerResult(
            samples: samples, allocationsPerOperation: Double(allocations) / Double(keys.count),
            peakRSSKiB: peakRSSKiB(), fileBytes: diskBytes(store.files), extra: ["passes": Double(samples.count)])
    }

    /// In a fresh process: open the populated store and read every key once, in a fixed shuffled order; the time
    /// from before the open to after the last read, per key.
    static func firstGets(_ engine: EngineKind, _ directory: String, _ count: Int) throws -> WorkerResult {
        let keys = Inputs.shuffled(Inputs.keys(count))
        var store: (any KVEngine)?
        var sum = 0
        let measured = try measure {
            store = try engine.open(in: directory)
            for key in keys { sum &+= try store!.getInt(key) ?? -1_000_000 }
        }
        guard sum > 0 else { throw BenchError("first-get: keys missing from the populated store") }
        return WorkerResult(
            samples: [Double(measured.nanoseconds) / Double(count)],
            allocationsPerOperation: Double(measured.allocations) / Double(count), peakRSSKiB: peakRSSKiB(),
            fileBytes: diskBytes(store!.files))
    }

    /// In a fresh process: open the populated store and read one key; the time from before the open to after
    /// the read. With `after`, another populated store of the same engine is opened and read first, untimed:
    /// the engine's code and the language runtime have then been used once in the process, as in an app that
    /// opens its second store.
    static func cold(_ engine: EngineKind, _ directory: String, key: String, after: String? = nil) throws
        -> WorkerResult
    {
        var value: Int?
        var store: (any KVEngine)?
        var first: (any KVEngine)?
        if let after {
            first = try engine.open(in: after)
            guard try first!.getInt(key) != nil else { throw BenchError("cold: \(key) not found in \(after)") }
        }
        defer { _ = first }
        let measured = try measure {
            store = try engine.open(in: directory)
            value = try store!.getInt(key)
        }
        guard value != nil else { throw BenchError("cold: \(key) not found") }
        return WorkerResult(
            samples: [Double(measured.nanoseconds)], allocationsPerOperation: Double(measured.allocations),
            peakRSSKiB: peakRSSKiB(), fileBytes: diskBytes(store!.files))
    }

    /// Writes ints to 100 of the store's keys, one about every 100 µs, until `stopFile` exists; records
    /// how many it wrote in `stopFile + ".count"`.
    static func mpWriter(_ engine: EngineKind, _ directory: String, stopFile: String) throws -> WorkerResult {
        let store = try engine.open(in: directory)
        let keys = Inputs.keys(100)
        var writes = 0
        while access(stopFile, F_OK) != 0 {
            try store.setInt(keys[writes % 100], 1_000_000 + writes)
            writes += 1
            usleep(100)
        }
        let text = "\(writes)\n"
        let fd = open(stopFile + ".count", O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        _ = text.withCString { write(fd, $0, strlen($0)) }
        close(fd)
        return WorkerResult(samples: [], allocationsPerOperation: 0, peakRSSKiB: peakRSSKiB())
    }
}
