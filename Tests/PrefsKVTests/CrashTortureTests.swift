import Foundation
import TestKit
import TestSealer
import Testing

@testable import PrefsKV

/// The crash writer's model plus what `prefs-torture-writer` adds: the key the store is sealed with (0 plain)
/// and the backup file's contents and key.
struct TortureModel {
    var values = CrashModel()
    var key = 0
    var backup: (values: CrashModel, key: Int)?

    func applying(_ line: String) -> TortureModel {
        var next = self
        let parts = line.split(separator: " ").map(String.init)
        switch parts[2] {
        case "rekey": next.key = Int(parts[3])!
        case "backup": next.backup = (values, key)
        case "restore": next.values = backup!.values
        default: next.values = values.applying(line)
        }
        return next
    }

    /// The phase an operation line belongs to, for the report.
    static func phase(_ line: String?) -> String {
        guard let line else { return "open or between operations" }
        switch line.split(separator: " ")[2] {
        case "int", "str", "data", "blob": return "append"
        case "tx": return "transaction"
        case "del", "clear": return "delete"
        case let op: return String(op)
        }
    }
}

@Suite(.serialized) struct CrashTortureTests {
    /// Writer processes go through appends, transactions, deletes, compactions, rekeys (plain to sealed,
    /// sealed to sealed, sealed to plain), backups and restores, and runs of automatic compactions (focus
    /// "autocompact": a buffered store's write their images into the files earlier ones used), and are SIGKILLed
    /// at random instants. After
    /// each kill the store opens without recovery, with the key of the last acknowledged rekey (or of the one
    /// in flight), and holds exactly the acknowledged operations, or those plus the one in flight.
    @Test func writersKilledInEveryPhaseLoseNoAcknowledgedWrite() throws {
        let kills = Torture.count("KILLS", short: 150, long: 3000)
        let deadline = Torture.deadline()
        let dir = try TempDir("crash-torture")
        let backupPath = dir.file("ui.backup")
        var model = TortureModel()
        var next = 0
        var rounds = 0
        var inFlightApplied = 0
        var anchoredRounds = 0
        var phases: [String: Int] = [:]
        var generator = SplitMix(state: tortureSeed())
        let seedNote = "seed \(generator.state)"
        let focuses = ["mixed", "compact", "rekey", "restore", "tx", "autocompact"]
        let started = Date()
        // The time budget ends the loop only after the first `minimum` rounds: how many kills fit in the budget
        // is the machine's load, not the library's doing.
        let minimum = min(kills, 20)
        for round in 0..<kills where round < minimum || Date() < deadline {
            rounds += 1
            let durability = round % 4 == 3 ? "synchronous" : "buffered"
            let child = try Child([
                "prefs-torture-writer", dir.path, "ui", "\(generator.next())", "\(next)", durability, "\(model.key)",
                "\(model.backup?.key ?? -1)", focuses[round % focuses.count],
            ])
            // Odd rounds kill at a random instant after the spawn, the open included. Even rounds first wait for
            // the writer's first acknowledgement (120 s only guards against a hang), so that the writers' progress
            // is an event and not luck with the scheduler: a loaded machine may not even start a writer in 60 ms.
            if round % 2 == 0 {
                anchoredRounds += 1
                guard child.waitForLine(timeout: 120, { $0.hasPrefix("A ") }) != nil else {
                    Issue.record("round \(round): the writer never acknowledged an operation: \(child.lines.suffix(2))")
                    return
                }
            }
            let until = Date().addingTimeInterval(Double.random(in: 0.002...0.060, using: &generator))
            while Date() < until { child.pump(timeout: until.timeIntervalSinceNow) }
            child.killAndDrain()

            var acknowledged = model
            let (done, inFlight, lastAck) = parseAcknowledgements(child.lines, firstNumber: next)
            for op in done { acknowledged = acknowledged.applying(op) }
            if child.lines.contains(where: { $0.hasPrefix("vault-test-helper:") }) {
                Issue.record("round \(round): the writer failed: \(child.lines.suffix(2))")
                return
            }
            phases[TortureModel.phase(inFlight), default: 0] += 1

            // Open with the acknowledged key; a rekey in flight may have put its key in place.
            var keys = [acknowledged.key]
            if let op = inFlight, op.contains(" rekey ") { keys.append(acknowledged.applying(op).key) }
            var opened: (store: PrefsStore, key: Int)?
            var failures: [String] = []
            for key in keys where opened == nil {
                do {
                    opened = (try openStore(dir) { $0.sealer = TortureCommandsKeys.sealer(key) }, key)
                } catch {
                    failures.append("key \(key): \(error)")
                }
            }
            guard let (store, key) = opened else {
                Issue.record("round \(round): the store does not open: \(failures) (\(seedNote))")
                return
            }
            #expect(store.lastRecovery == nil, "round \(round): a kill must never need a recovery (\(seedNote))")
            let found = try CrashModel.read(store)
            if found == acknowledged.values && key == acknowledged.key {
                model = acknowledged
                next = lastAck + 1
            } else if let op = inFlight, found == acknowledged.applying(op).values,
                key == acknowledged.applying(op).key
            {
                model = acknowledged.applying(op)
                next = lastAck + 2
                inFlightApplied += 1
            } else {
                let missing = acknowledged.values.values.filter { found.values[$0.key] != $0.value }.map(\.key)
                let extra = found.values.keys.filter { acknowledged.values.values[$0] == nil }
                Issue.record(
                    "round \(round) (\(durability)): the store differs from the acknowledged writes at \(missing.sorted()), extra \(extra.sorted()); in flight: \(inFlight ?? "none"); key \(key), acknowledged key \(acknowledged.key) (\(seedNote))"
                )
                return
            }
            // A backup in flight may or may not be in place: start the next round without one.
            if let op = inFlight, op.hasSuffix(" backup") {
                model.backup = nil
                try? FileManager.default.removeItem(atPath: backupPath)
            }
            for name in dir.files where name.hasPrefix("ui.backup.tmp-") {
                try FileManager.default.removeItem(atPath: dir.file(name))
            }
        }
        let store = try openStore(dir) { $0.sealer = TortureCommandsKeys.sealer(model.key) }
        #expect(try store.verify().isClean)
        #expect(!dir.files.contains { $0.contains(".corrupt-") })
        #expect(rounds >= minimum, "only \(rounds) kills")
        // Every anchored round acknowledged at least one operation, and what is acknowledged is kept.
        #expect(next >= anchoredRounds, "the writers made too little progress to mean anything (\(next) operations)")
        let seconds = String(format: "%.1f", Date().timeIntervalSince(started))
        let byPhase = phases.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        Torture.report(
            "crash: \(rounds) SIGKILLs in \(seconds) s, \(next) operations, \(inFlightApplied) in-flight found applied, "
                + "0 lost, 0 wrong, 0 recoveries; kills by phase in flight: \(byPhase)")
    }
}

/// The key numbers of `prefs-torture-writer`: 0 is a plain store, other numbers a `TestSealer`.
enum TortureCommandsKeys {
    static func sealer(_ key: Int) -> (any PrefsSealer)? { key == 0 ? nil : TestSealer(key: UInt64(key)) }
}
