// The parent process: prepares stores, starts a fresh worker process per measurement, interleaving engines
// round by round (so that a noisy neighbour hits all of them alike), and collects the answers.
import FoundationEssentials
import Glibc

/// The figures of one workload on one engine, one entry per worker process (or cold process).
public struct Row: Sendable, Codable {
    public var section: Section
    public var workload: Workload
    /// "10,000 keys" and the like.
    public var label: String
    public var engine: String
    public var operations: Int
    /// Nanoseconds per operation, one per process (cold: per open + first read).
    public var samples: [Double] = []
    /// Cold and vault processes: spawn to exit, as the parent saw it.
    public var wallSamples: [Double] = []
    public var allocationsPerOperation: [Double] = []
    public var peakRSSKiB: [Int] = []
    public var fileBytes: [Int] = []
    public var extra: [String: [Double]] = [:]

    public var id: String { "\(section.rawValue)/\(workload.rawValue)/\(label)/\(engine)" }
}

public enum Section: String, Sendable, Codable, CaseIterable {
    case writes, reads, cold, strict, multiProcess = "multi-process", vault
}

public struct Results: Sendable, Codable {
    public var quick: Bool
    public var scale: Scale
    public var rows: [Row] = []
    public var notes: [String] = []
    public var machine: [String: String] = [:]
    public var elapsedSeconds: Double = 0

    public func row(_ section: Section, _ workload: Workload, _ label: String, _ engine: String) -> Row? {
        rows.first { $0.section == section && $0.workload == workload && $0.label == label && $0.engine == engine }
    }
}

public struct Orchestrator {
    public var scale: Scale
    public var quick: Bool
    let executable: String
    let root: String
    var results: Results

    public init(quick: Bool, scale: Scale? = nil) {
        self.quick = quick
        self.scale = scale ?? (quick ? .quick : Scale())
        executable = executableDirectory + "/prefskv-bench"
        let base = environment("BENCH_TMPDIR") ?? environment("TMPDIR") ?? "/tmp"
        root = makeScratchDirectory(in: base, prefix: "prefskv-bench.")
        results = Results(quick: quick, scale: self.scale)
    }

    static let writeEngines: [EngineKind] = [
        .prefs, .prefsSingle, .prefsSealed, .prefsObserved, .sqlite, .sqliteBatch, .lmdbNoSync,
    ]
    static let readEngines: [EngineKind] = [.prefs, .prefsSingle, .prefsSealed, .sqlite, .lmdbNoSync]
    /// The warm gets: the read engines and the sealed store with its plaintext cache (a cold open reads once, as
    /// without it).
    static let getEngines: [EngineKind] = readEngines + [.prefsSealedCached]
    static let strictEngines: [EngineKind] = [.prefsSynchronous, .sqliteFull, .lmdbSync]
    static let multiProcessEngines: [EngineKind] = [.prefs, .sqlite, .lmdbNoSync]

    public mutating func run() -> Results {
        let start = monotonicNanoseconds()
        defer { removeTree(root) }
        results.machine = machineFacts()
        let s = scale
        for repetition in 0..<s.repetitions {
            note("round \(repetition + 1) of \(s.repetitions)")
            for (workload, count, argument) in [
                (Workload.setInt, s.keys, ""), (.setString, s.keys, ""), (.overwriteHot, s.hotWrites, ""),
                (.blob, s.blobWrites, "\(s.blobNeighbours)"),
            ] {
                for engine in rotated(Self.writeEngines, by: repetition) {
                    worker(.writes, workload, label(workload, count), engine, count, argument)
                }
                for engine in rotated(Self.strictEngines, by: repetition) {
                    worker(.strict, workload, label(workload, s.strictWrites), engine, s.strictWrites, argument)
                }
            }
            for engine in rotated(Self.getEngines, by: repetition) {
                let directory = freshDirectory()
                populateOrDie(engine, directory, s.keys)
                worker(.reads, .get, label(.get, s.keys), engine, s.keys, "\(s.getPasses)", directory: directory)
            }
            for engine in rotated(Self.multiProcessEngines, by: repetition) {
                multiProcessRead(engine, repetition: repetition)
            }
        }
        coldOpens()
        VaultBench(orchestrator: self).run(into: &results)
        results.elapsedSeconds = Double(monotonicNanoseconds() - start) / 1e9
        results.machine["load average at end"] = readSmallFile("/proc/loadavg").map {
            $0.split(separator: " ").prefix(3).joined(separator: " ")
        }
        return results
    }

    func label(_ workload: Workload, _ count: Int) -> String {
        switch workload {
        case .overwriteHot: return "\(grouped(count)) writes"
        case .blob: return "\(grouped(count)) rewrites, \(grouped(scale.blobNeighbours)) other keys"
        default: return "\(grouped(count)) keys"
        }
    }

    func rotated<T>(_ items: [T], by n: Int) -> [T] {
        let k = n % items.count
        return Array(items[k...] + items[..<k])
    }

    func freshDirectory() -> String { makeScratchDirectory(in: root, prefix: "run.") }

    func populateOrDie(_ engine: EngineKind, _ directory: String, _ count: Int) {
        do {
            try populate(engine, directory: directory, count: count)
        } catch {
            fatalError("populating \(engine.rawValue) in \(directory) failed: \(error)")
        }
    }

    /// Runs one worker process and files its answer under its row.
    mutating func worker(
        _ section: Section, _ workload: Workload, _ label: String, _ engine: EngineKind, _ count: Int,
        _ argument: String, directory: String? = nil, workerName: String? = nil
    ) {
        let directory = directory ?? freshDirectory()
        defer { removeTree(directory) }
        let run = runChild(
            executable,
            ["worker", workerName ?? workload.rawValue, engine.rawValue, directory, "\(count)", argument])
        guard run.status == 0, let result = decode(run.output) else {
            fatalError("worker \(workload.rawValue) \(engine.rawValue) failed (exit \(run.status)): \(run.output)")
        }
        file(section, workload, label, engine.rawValue, count, result, wall: nil)
    }

    func decode(_ output: String) -> WorkerResult? {
        guard let line = output.split(separator: "\n").last else { return nil }
        return try? JSONDecoder().decode(WorkerResult.self, from: Data(line.utf8))
    }

    mutating func file(
        _ section: Section, _ workload: Workload, _ label: String, _ engine: String, _ count: Int,
        _ result: WorkerResult, wall: Double?
    ) {
        let index: Int
        if let found = results.rows.firstIndex(where: {
            $0.section == section && $0.workload == workload && $0.label == label && $0.engine == engine
        }) {
            index = found
        } else {
            results.rows.append(
                Row(section: section, workload: workload, label: label, engine: engine, operations: count))
            index = results.rows.count - 1
        }
        let sample = workload == .get || workload == .mpRead || section == .vault
            ? (median(result.samples) ?? 0) : result.samples.first ?? 0
        results.rows[index].samples.append(sample)
        if let wall { results.rows[index].wallSamples.append(wall) }
        results.rows[index].allocationsPerOperation.append(result.allocationsPerOperation)
        results.rows[index].peakRSSKiB.append(result.peakRSSKiB)
        if let bytes = result.fileBytes { results.rows[index].fileBytes.append(bytes) }
        for (key, value) in result.extra { results.rows[index].extra[key, default: []].append(value) }
    }

    /// A reader process timing gets over every key while a writer process writes about every 100 µs.
    mutating func multiProcessRead(_ engine: EngineKind, repetition: Int) {
        let directory = freshDirectory()
        defer { removeTree(directory) }
        populateOrDie(engine, directory, scale.keys)
        let stop = directory + "/stop"
        let writer = startChild(executable, ["worker", "mp-writer", engine.rawValue, directory, "0", stop])
        usleep(50_000)
        let deadline = quick ? 200 : 1_000
        let run = runChild(
            executable, ["worker", "mp-reader", engine.rawValue, directory, "\(scale.keys)", "\(deadline)"])
        let stopFD = open(stop, O_WRONLY | O_CREAT, 0o600)
        close(stopFD)
        let writerStatus = waitForChild(writer)
        guard run.status == 0, writerStatus == 0, var result = decode(run.output) else {
            fatalError("multi-process read on \(engine.rawValue) failed: reader \(run.status), writer \(writerStatus)")
        }
        let writes = readSmallFile(stop + ".count").flatMap { Double(trimmed($0)) }
        result.extra["writerWrites"] = writes ?? 0
        file(.multiProcess, .mpRead, label(.get, scale.keys), engine.rawValue, scale.keys, result, wall: nil)
    }

    /// Cold open + first read in a new process, for a store of `keys` and of 10 keys, engines interleaved; and
    /// of 10 keys as the second store a process opens (the engine's code and the runtime already used once).
    mutating func coldOpens() {
        for (count, second) in [(scale.keys, false), (10, false), (10, true)] {
            var prepared: [(EngineKind, String, String?)] = []
            for engine in Self.readEngines {
                let directory = freshDirectory()
                populateOrDie(engine, directory, count)
                var other: String?
                if second {
                    other = freshDirectory()
                    populateOrDie(engine, other!, count)
                }
                prepared.append((engine, directory, other))
            }
            let label = "\(grouped(count)) keys" + (second ? ", the second store opened in the process" : "")
            note("cold opens, \(label)")
            for spawn in 0..<scale.coldSpawns {
                for (engine, directory, other) in rotated(prepared, by: spawn) {
                    let arguments = ["worker", "cold", engine.rawValue, directory, "1", "key.\(count / 2)"]
                    let run = runChild(executable, arguments + (other.map { [$0] } ?? []))
                    guard run.status == 0, let result = decode(run.output) else {
                        fatalError("cold \(engine.rawValue) failed (exit \(run.status)): \(run.output)")
                    }
                    file(.cold, .cold, label, engine.rawValue, count, result, wall: Double(run.wallNanoseconds))
                }
            }
            for (_, directory, other) in prepared {
                removeTree(directory)
                if let other { removeTree(other) }
            }
        }
    }

    func machineFacts() -> [String: String] {
        var facts: [String: String] = [:]
        facts["load average at start"] = readSmallFile("/proc/loadavg").map {
            $0.split(separator: " ").prefix(3).joined(separator: " ")
        }
        facts["cores"] = "\(sysconf(Int32(_SC_NPROCESSORS_ONLN)))"
        if let cpu = readSmallFile("/proc/cpuinfo")?.split(separator: "\n").first(where: { $0.hasPrefix("model name") }) {
            facts["cpu"] = cpu.split(separator: ":", maxSplits: 1).last.map { trimmed(String($0)) }
        }
        facts["scratch directory"] = root
        let idle = runChild(executable, ["worker", "noop", "prefskv", root, "0"])
        if let result = decode(idle.output) {
            facts["peak RSS of an idle worker process (the floor of every RSS figure)"] =
                Report.fixed(Double(result.peakRSSKiB) / 1024, 1) + " MiB"
        }
        return facts
    }

    var helperDirectory: String { executableDirectory }
    var scratchRoot: String { root }
}

func readSmallFile(_ path: String) -> String? {
    readWholeFile(path).map { String(decoding: $0, as: UTF8.self) }
}

/// The bytes of the file at `path` (what could be read of it), or nil when it cannot be opened.
public func readWholeFile(_ path: String) -> [UInt8]? {
    let fd = open(path, O_RDONLY)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = read(fd, &chunk, chunk.count)
        if n <= 0 { break }
        bytes += chunk[0..<n]
    }
    return bytes
}

/// 10000 -> "10,000".
public func grouped(_ n: Int) -> String {
    let digits = String(n)
    var out = ""
    for (i, c) in digits.enumerated() {
        if i > 0 && (digits.count - i) % 3 == 0 { out.append(",") }
        out.append(c)
    }
    return out
}

func trimmed(_ text: String) -> String {
    String(text.drop(while: { $0 == " " || $0 == "\t" }).reversed().drop(while: { $0.isWhitespace }).reversed())
}
