// PrefsKV commands of the test helper. Each prints its results on stdout, one line each, and flushes after
// every line so that a parent reading a pipe sees a line as soon as the operation it reports is done.
import FoundationEssentials
import Glibc
import PrefsKV
import TestKit

enum PrefsCommands {
    static func fail(_ message: String, status: Int32 = 1) -> Never {
        say("vault-test-helper: \(message)", fd: 2)
        exit(status)
    }

    static func say(_ line: String, fd: Int32 = 1) {
        // One write(2) per line, no stdio buffering: what the parent read is exactly what was said.
        let bytes = Array((line + "\n").utf8)
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + done, bytes.count - done) }
            if n < 0 {
                if errno == EINTR { continue }
                exit(1)
            }
            done += n
        }
    }

    static func open(_ directory: String, _ id: String, synchronous: Bool = false) -> PrefsStore {
        var configuration = PrefsStore.Configuration()
        if synchronous { configuration.durability = .synchronous }
        do {
            return try PrefsStore(id: id, directory: directory, configuration: configuration)
        } catch {
            fail("open failed: \(error)")
        }
    }

    /// `prefs-crash-writer DIR ID SEED START buffered|synchronous`
    ///
    /// Writes forever. Before operation n it prints `B n <op>`, after it returns `A n`. Ops:
    /// `int KEY` (value n), `str KEY` (value "s<n>-" + n % 97 dashes), `data KEY` (n % 300 bytes of n),
    /// `tx KEY,KEY,...` (each set to int n), `del KEY`, `clear`, `compact`.
    static func crashWriter(_ args: [String]) {
        guard args.count == 5, let seed = UInt64(args[2]), let start = Int(args[3]) else {
            fail("usage: prefs-crash-writer DIR ID SEED START buffered|synchronous")
        }
        let store = open(args[0], args[1], synchronous: args[4] == "synchronous")
        var rng = SplitMix(state: seed)
        var n = start
        while true {
            let key = "k\(Int.random(in: 0..<40, using: &rng))"
            let roll = Int.random(in: 0..<1000, using: &rng)
            do {
                switch roll {
                case 0..<300:
                    say("B \(n) int \(key)")
                    try store.set(Int64(n), forKey: key)
                case 300..<550:
                    say("B \(n) str \(key)")
                    try store.set("s\(n)-" + String(repeating: "-", count: n % 97), forKey: key)
                case 550..<700:
                    say("B \(n) data \(key)")
                    try store.set(Data(repeating: UInt8(truncatingIfNeeded: n), count: n % 300), forKey: key)
                case 700..<900:
                    let keys = (0..<Int.random(in: 2...5, using: &rng)).map { _ in
                        "k\(Int.random(in: 0..<40, using: &rng))"
                    }
                    say("B \(n) tx \(keys.joined(separator: ","))")
                    try store.write { tx in
                        for k in keys { try tx.set(Int64(n), forKey: k) }
                    }
                case 900..<985:
                    say("B \(n) del \(key)")
                    try store.removeValue(forKey: key)
                case 985..<988:
                    say("B \(n) clear")
                    try store.removeAll()
                default:
                    say("B \(n) compact")
                    try store.compact()
                }
            } catch {
                fail("operation \(n) failed: \(error)")
            }
            say("A \(n)")
            n += 1
        }
    }

    /// `prefs-mp-writer DIR ID WORKER COUNT`: COUNT transactions, each incrementing `counter` and setting
    /// `w<WORKER>-<i>` to i; worker 0 also compacts every 500 transactions. Prints `done`.
    static func multiProcessWriter(_ args: [String]) {
        guard args.count == 4, let worker = Int(args[2]), let count = Int(args[3]) else {
            fail("usage: prefs-mp-writer DIR ID WORKER COUNT")
        }
        let store = open(args[0], args[1])
        do {
            for i in 0..<count {
                try store.write { tx in
                    let counter = try tx.int64(forKey: "counter") ?? 0
                    try tx.set(counter + 1, forKey: "counter")
                    try tx.set(Int64(i), forKey: "w\(worker)-\(i)")
                }
                if worker == 0 && i % 500 == 499 { try store.compact() }
            }
        } catch {
            fail("worker \(worker) failed: \(error)")
        }
        say("done")
    }

    /// `prefs-get DIR ID KEY [SEALER-KEY]`: prints the string under KEY in a fresh handle ("absent" when none), or
    /// "error <code>" when the open or the read fails.
    static func get(_ args: [String]) {
        guard args.count == 3 || args.count == 4 else { fail("usage: prefs-get DIR ID KEY [SEALER-KEY]") }
        var configuration = PrefsStore.Configuration()
        configuration.sealer = args.count == 4 ? TortureCommands.sealer(Int(args[3]) ?? 0) : nil
        do {
            let store = try PrefsStore(id: args[1], directory: args[0], configuration: configuration)
            say(try store.string(forKey: args[2]) ?? "absent")
        } catch let error as PrefsError {
            say("error \(error.code)")
        } catch {
            say("error \(error)")
        }
    }

    /// `prefs-set DIR ID KEY VALUE [SEALER-KEY]`: sets a string (in a store sealed by the `TestSealer` of that key
    /// number, when given) and prints `ok`.
    static func set(_ args: [String]) {
        guard args.count == 4 || args.count == 5 else { fail("usage: prefs-set DIR ID KEY VALUE [SEALER-KEY]") }
        let store: PrefsStore
        if args.count == 5 {
            guard let key = Int(args[4]), key != 0 else { fail("prefs-set: SEALER-KEY is a nonzero number") }
            var configuration = PrefsStore.Configuration()
            configuration.sealer = TortureCommands.sealer(key)
            do {
                store = try PrefsStore(id: args[1], directory: args[0], configuration: configuration)
            } catch {
                fail("open failed: \(error)")
            }
        } else {
            store = open(args[0], args[1])
        }
        do {
            try store.set(args[3], forKey: args[2])
        } catch {
            fail("set failed: \(error)")
        }
        say("ok")
    }

    /// `prefs-default-directory`: prints `PrefsStore.defaultDirectory` (a test sets this process's environment,
    /// never its own, which other tests share).
    static func defaultDirectory(_ args: [String]) {
        guard args.isEmpty else { fail("usage: prefs-default-directory") }
        say(PrefsStore.defaultDirectory)
    }

    /// `prefs-open-as UID DIR ID [readonly]`: drops to user UID, opens the store (with `Configuration.readOnly`)
    /// and prints `ok` or `error CODE`.
    static func openAs(_ args: [String]) {
        guard args.count == 3 || args.count == 4, let uid = UInt32(args[0]) else {
            fail("usage: prefs-open-as UID DIR ID [readonly]")
        }
        guard setgid(uid) == 0, setuid(uid) == 0 else { fail("cannot become user \(uid)") }
        var configuration = PrefsStore.Configuration()
        configuration.readOnly = args.count == 4 && args[3] == "readonly"
        do {
            _ = try PrefsStore(id: args[2], directory: args[1], configuration: configuration)
            say("ok")
        } catch let error as PrefsError {
            say("error \(error.code)")
        } catch {
            say("error \(error)")
        }
    }

    /// `prefs-hold DIR ID single|multi|readonly`: opens the store, prints `open`, and waits to be killed.
    static func hold(_ args: [String]) {
        guard args.count == 3 else { fail("usage: prefs-hold DIR ID single|multi|readonly") }
        var configuration = PrefsStore.Configuration()
        if args[2] == "single" { configuration.sharing = .singleProcess }
        if args[2] == "readonly" { configuration.readOnly = true }
        do {
            let store = try PrefsStore(id: args[1], directory: args[0], configuration: configuration)
            say("open")
            while true { sleep(60) }
            _ = store
        } catch let error as PrefsError {
            say("error \(error.code)")
        } catch {
            fail("\(error)")
        }
    }

    /// `prefs-temporary`: makes a temporary store and prints its directory; releases it, then opens a store by path
    /// in that directory (which makes it anew, as a careless test would) and exits normally.
    static func temporary(_ args: [String]) {
        do {
            var directory = ""
            do {
                let store = try PrefsStore.temporary()
                try store.set(1, forKey: "x")
                directory = store.directory
            }
            say(directory)
            try PrefsStore(id: "again", directory: directory).set(2, forKey: "y")
        } catch {
            fail("\(error)")
        }
        exit(0)
    }

    /// `prefs-hold-writer DIR ID KEY`: opens the store (multi-process) and, inside a write transaction that sets
    /// KEY, prints "holding" and sleeps: it holds the writer lock until it is killed, and never commits.
    static func holdWriter(_ args: [String]) {
        guard args.count == 3 else { fail("usage: prefs-hold-writer DIR ID KEY") }
        let store = open(args[0], args[1])
        do {
            try store.write { tx in
                try tx.set(Int64(666), forKey: args[2])
                say("holding")
                while true { sleep(60) }
            }
        } catch {
            fail("\(error)")
        }
    }

    /// `prefs-read-loop DIR N`: writes a Bool, an Int64 and a Double, then reads each N times (for counting
    /// allocations under valgrind: the count must not grow with N). Prints the sum of what it read.
    static func readLoop(_ args: [String]) {
        guard args.count == 2, let n = Int(args[1]) else { fail("usage: prefs-read-loop DIR N") }
        let store = open(args[0], "reads")
        do {
            try store.set(true, forKey: "flag")
            try store.set(Int64(7), forKey: "number")
            try store.set(0.5, forKey: "ratio")
            var sum = 0.0
            for _ in 0..<n {
                if try store.bool(forKey: "flag") == true { sum += 1 }
                sum += Double(try store.int64(forKey: "number") ?? 0)
                sum += try store.double(forKey: "ratio") ?? 0
                sum += Double(try store.int(forKey: "number") ?? 0)
                if try store.contains("flag") { sum += 1 }
            }
            say("sum \(sum)")
        } catch {
            fail("read loop failed: \(error)")
        }
    }
}
