import Foundation
import Testing

@testable import PrefsKV

/// What a key must hold, as the crash writer's operations define it.
enum Expected: Equatable {
    case int(Int64)
    case string(String)
    case data(Data)
}

/// Replays the crash writer's operation lines (`B n op args`) on a model of the store.
struct CrashModel: Equatable {
    var values: [String: Expected] = [:]

    func applying(_ line: String) -> CrashModel {
        var next = self
        let parts = line.split(separator: " ").map(String.init)
        let n = Int(parts[1])!
        switch parts[2] {
        case "int": next.values[parts[3]] = .int(Int64(n))
        case "str": next.values[parts[3]] = .string("s\(n)-" + String(repeating: "-", count: n % 97))
        case "data": next.values[parts[3]] = .data(Data(repeating: UInt8(truncatingIfNeeded: n), count: n % 300))
        case "blob": next.values[parts[3]] = .data(Data(repeating: UInt8(truncatingIfNeeded: n), count: 1_000 + n % 1_000))
        case "tx": for key in parts[3].split(separator: ",") { next.values[String(key)] = .int(Int64(n)) }
        case "del": next.values[parts[3]] = nil
        case "clear": next.values.removeAll()
        case "compact": break
        default: Issue.record("unknown operation line \(line)")
        }
        return next
    }

    /// Reads everything a store holds, typed.
    static func read(_ store: PrefsStore) throws -> CrashModel {
        var model = CrashModel()
        for entry in try store.entries() {
            switch entry.type {
            case "int": model.values[entry.key] = .int(try store.int64(forKey: entry.key)!)
            case "string": model.values[entry.key] = .string(try store.string(forKey: entry.key)!)
            case "bytes": model.values[entry.key] = .data(try store.data(forKey: entry.key)!)
            default: Issue.record("unexpected type \(entry.type) for \(entry.key)")
            }
        }
        return model
    }
}

@Suite(.serialized) struct CrashTests {
    /// Child processes write in a loop and are SIGKILLed at random moments (during open, writes,
    /// transactions, compactions). After each kill the store must hold exactly the acknowledged operations,
    /// or those plus the one in flight: nothing acknowledged lost, no value that was never written, and no
    /// recovery ever needed.
    @Test func killedWritersLoseNoAcknowledgedWrite() throws {
        let long = ProcessInfo.processInfo.environment["PREFSKV_LONG_TESTS"] == "1"
        let kills = long ? 2000 : 200
        let dir = try TempDir("crash")
        var model = CrashModel()
        var next = 0
        var inFlightApplied = 0
        var anchoredRounds = 0
        var generator = SystemRandomNumberGenerator()
        let started = Date()
        for round in 0..<kills {
            let durability = round % 10 == 9 ? "synchronous" : "buffered"
            let child = try Child([
                "prefs-crash-writer", dir.path, "ui", "\(UInt64.random(in: 1...UInt64.max, using: &generator))",
                "\(next)", durability,
            ])
            // Odd rounds kill at a random moment after the spawn, the open included. Even rounds first wait for
            // the writer's first acknowledgement (120 s only guards against a hang), so that the writers' progress
            // is an event and not luck with the scheduler: a loaded machine may not even start a writer in 45 ms.
            if round % 2 == 0 {
                anchoredRounds += 1
                guard child.waitForLine(timeout: 120, { $0.hasPrefix("A ") }) != nil else {
                    Issue.record("round \(round): the writer never acknowledged an operation: \(child.lines.suffix(2))")
                    return
                }
            }
            let deadline = Date().addingTimeInterval(Double.random(in: 0.001...0.045, using: &generator))
            while Date() < deadline { child.pump(timeout: deadline.timeIntervalSinceNow) }
            child.killAndDrain()

            var acknowledged = model
            let (done, inFlight, lastAck) = parseAcknowledgements(child.lines, firstNumber: next)
            for op in done { acknowledged = acknowledged.applying(op) }
            let store = try openStore(dir)
            #expect(store.lastRecovery == nil, "round \(round): a kill must never need a recovery")
            let found = try CrashModel.read(store)
            if found == acknowledged {
                model = acknowledged
                next = lastAck + 1
            } else if let op = inFlight, found == acknowledged.applying(op) {
                model = found
                next = lastAck + 2
                inFlightApplied += 1
            } else {
                let missing = acknowledged.values.filter { found.values[$0.key] != $0.value }.map(\.key).sorted()
                let extra = found.values.keys.filter { acknowledged.values[$0] == nil }.sorted()
                Issue.record(
                    "round \(round) (\(durability)): the store differs from the acknowledged writes at \(missing), extra \(extra); in flight: \(inFlight ?? "none")"
                )
                return
            }
        }
        let store = try openStore(dir)
        #expect(try store.verify().isClean)
        #expect(!dir.files.contains { $0.contains(".corrupt-") })
        // Every anchored round acknowledged at least one operation, and what is acknowledged is kept.
        #expect(next >= anchoredRounds, "the writers made too little progress to mean anything (\(next) operations)")
        let seconds = String(format: "%.1f", Date().timeIntervalSince(started))
        print(
            "crash test: \(kills) kills, \(next) operations, \(inFlightApplied) in-flight found applied, \(seconds) s")
    }
}
