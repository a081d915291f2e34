// Update commands of the test helper: processes that update one store at the same time, for
// Tests/PrefsKVTests/AtomicUpdateTests.swift. Each hydrates first, then meets its peers through the store, so
// every worker has read the store before any of them updates it.
import Glibc
import PrefsKV

enum UpdateCommands {
    /// The state the workers update, one field each (the test decodes the same shape).
    struct Counters: Codable, Sendable {
        var a = 0
        var b = 0
    }

    /// `prefs-update-state DIR ID WORKER PEERS a|b COUNT`: creates the state `counters` (hydrating it), waits for
    /// PEERS workers, then calls `update { $0.<field> += 1 }` COUNT times. Prints `done`.
    static func state(_ args: [String]) {
        guard args.count == 6, let worker = Int(args[2]), let peers = Int(args[3]), ["a", "b"].contains(args[4]),
            let count = Int(args[5])
        else {
            PrefsCommands.fail("usage: prefs-update-state DIR ID WORKER PEERS a|b COUNT")
        }
        let store = PrefsCommands.open(args[0], args[1])
        let counters = PersistedState(name: "counters", defaults: Counters(), store: store)
        meet(store, worker: worker, peers: peers)
        do {
            for _ in 0..<count {
                if args[4] == "a" {
                    try counters.update { $0.a += 1 }
                } else {
                    try counters.update { $0.b += 1 }
                }
            }
        } catch {
            PrefsCommands.fail("worker \(worker) failed: \(error)")
        }
        PrefsCommands.say("done")
    }

    /// `prefs-update-key DIR ID WORKER PEERS COUNT`: waits for PEERS workers, then calls
    /// `store.update(count) { $0 += 1 }` COUNT times on the Int key `count`. Prints `done`.
    static func key(_ args: [String]) {
        guard args.count == 5, let worker = Int(args[2]), let peers = Int(args[3]), let count = Int(args[4]) else {
            PrefsCommands.fail("usage: prefs-update-key DIR ID WORKER PEERS COUNT")
        }
        let store = PrefsCommands.open(args[0], args[1])
        let key = PrefsKey<Int>("count", default: 0)
        meet(store, worker: worker, peers: peers)
        do {
            for _ in 0..<count { try store.update(key) { $0 += 1 } }
        } catch {
            PrefsCommands.fail("worker \(worker) failed: \(error)")
        }
        PrefsCommands.say("done")
    }

    /// Marks WORKER ready in the store and waits until PEERS workers are.
    private static func meet(_ store: PrefsStore, worker: Int, peers: Int) {
        do {
            try store.set(true, forKey: "ready-\(worker)")
            while try !(0..<peers).allSatisfy({ try store.contains("ready-\($0)") }) { usleep(1_000) }
        } catch {
            PrefsCommands.fail("worker \(worker) could not meet its peers: \(error)")
        }
    }
}
