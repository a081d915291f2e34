// PrefsKV torture commands of the test helper: a writer that goes through every phase that changes a store
// (appends, transactions, deletes, compaction, rekey, backup and restore), plain or sealed, to be SIGKILLed at
// random instants by Tests/PrefsKVTests/CrashTortureTests.swift.
import FoundationEssentials
import Glibc
import PrefsKV
import TestKit
import TestSealer

enum TortureCommands {
    /// The sealer for key number `key`: 0 is a plain store, other numbers a `TestSealer` with that key.
    static func sealer(_ key: Int) -> (any PrefsSealer)? {
        key == 0 ? nil : TestSealer(key: UInt64(key))
    }

    /// `prefs-torture-writer DIR ID SEED START buffered|synchronous KEY BACKUP-KEY FOCUS`
    ///
    /// Writes forever, like `prefs-crash-writer` (same `B n op` / `A n` lines and value rules), with three
    /// more operations: `rekey K` (re-seal with key K: 0 plain, 1 or 2 a TestSealer), `backup` (to
    /// `DIR/ID.backup`) and `restore` (from it; only while the store's key is the backup's). KEY is the key the
    /// store is sealed with now, BACKUP-KEY the key of the existing backup (-1: none). FOCUS (`mixed`,
    /// `compact`, `rekey`, `restore`, `tx`) makes that phase six in ten operations, so kills land in it.
    static func writer(_ args: [String]) {
        guard args.count == 8, let seed = UInt64(args[2]), let start = Int(args[3]), var key = Int(args[5]),
            var backupKey = Int(args[6])
        else {
            PrefsCommands.fail(
                "usage: prefs-torture-writer DIR ID SEED START buffered|synchronous KEY BACKUP-KEY FOCUS")
        }
        let (directory, id, focus) = (args[0], args[1], args[7])
        let backupPath = directory + "/" + id + ".backup"
        var configuration = PrefsStore.Configuration()
        configuration.durability = args[4] == "synchronous" ? .synchronous : .buffered
        configuration.sealer = sealer(key)
        configuration.logger.logLevel = .critical
        let store: PrefsStore
        do {
            store = try PrefsStore(id: id, directory: directory, configuration: configuration)
        } catch {
            PrefsCommands.fail("open failed: \(error)")
        }
        var rng = SplitMix(state: seed)
        var n = start
        while true {
            let key1 = "k\(Int.random(in: 0..<40, using: &rng))"
            var roll = Int.random(in: 0..<1020, using: &rng)
            if focus != "mixed" && Int.random(in: 0..<10, using: &rng) < 6 {
                roll = ["compact": 995, "rekey": 1000, "restore": 1010, "tx": 700][focus] ?? roll
            }
            do {
                switch roll {
                case 0..<300:
                    PrefsCommands.say("B \(n) int \(key1)")
                    try store.set(Int64(n), forKey: key1)
                case 300..<550:
                    PrefsCommands.say("B \(n) str \(key1)")
                    try store.set("s\(n)-" + String(repeating: "-", count: n % 97), forKey: key1)
                case 550..<700:
                    PrefsCommands.say("B \(n) data \(key1)")
                    try store.set(Data(repeating: UInt8(truncatingIfNeeded: n), count: n % 300), forKey: key1)
                case 700..<900:
                    let keys = (0..<Int.random(in: 2...5, using: &rng)).map { _ in
                        "k\(Int.random(in: 0..<40, using: &rng))"
                    }
                    PrefsCommands.say("B \(n) tx \(keys.joined(separator: ","))")
                    try store.write { tx in
                        for k in keys { try tx.set(Int64(n), forKey: k) }
                    }
                case 900..<980:
                    PrefsCommands.say("B \(n) del \(key1)")
                    try store.removeValue(forKey: key1)
                case 980..<983:
                    PrefsCommands.say("B \(n) clear")
                    try store.removeAll()
                case 983..<1000:
                    PrefsCommands.say("B \(n) compact")
                    try store.compact()
                case 1000..<1010:
                    let next = (key + 1 + Int.random(in: 0..<2, using: &rng)) % 3
                    PrefsCommands.say("B \(n) rekey \(next)")
                    try store.rekey(to: sealer(next))
                    key = next
                default:
                    if backupKey == key && Bool.random(using: &rng) {
                        PrefsCommands.say("B \(n) restore")
                        try store.restore(from: backupPath)
                    } else {
                        PrefsCommands.say("B \(n) backup")
                        try store.backup(to: backupPath)
                        backupKey = key
                    }
                }
            } catch {
                PrefsCommands.fail("operation \(n) failed: \(error)")
            }
            PrefsCommands.say("A \(n)")
            n += 1
        }
    }
}

extension TortureCommands {
    /// `prefs-permission-faults UID DIR`: as user UID (who owns DIR), takes a store through permission changes
    /// made while it is open and prints one line per step: `<step> ok` or `<step> <error code>`.
    static func permissionFaults(_ args: [String]) {
        guard args.count == 2, let uid = UInt32(args[0]) else {
            PrefsCommands.fail("usage: prefs-permission-faults UID DIR")
        }
        guard setgid(uid) == 0, setuid(uid) == 0 else { PrefsCommands.fail("cannot become user \(uid)") }
        let directory = args[1]
        let data = directory + "/ui.prefs"
        var configuration = PrefsStore.Configuration()
        configuration.logger.logLevel = .critical
        func step(_ name: String, _ body: () throws -> Void) {
            do {
                try body()
                PrefsCommands.say("\(name) ok")
            } catch let error as PrefsError {
                PrefsCommands.say("\(name) \(error.code)")
            } catch {
                PrefsCommands.say("\(name) \(error)")
            }
        }
        do {
            let store = try PrefsStore(id: "ui", directory: directory, configuration: configuration)
            step("write") { try store.set("before", forKey: "a") }
            chmod(directory, 0o500)
            step("write-in-read-only-directory") { try store.set("during", forKey: "b") }
            step("compact-in-read-only-directory") { try store.compact() }
            step("open-in-read-only-directory") {
                let other = try PrefsStore(id: "ui", directory: directory, configuration: configuration)
                guard try other.string(forKey: "b") == "during" else { throw PrefsError.Code.notFound.asError }
            }
            chmod(directory, 0o700)
            chmod(data, 0o400)
            step("write-to-read-only-file") { try store.set("after", forKey: "c") }
            step("open-read-only-file-and-read") {
                let other = try PrefsStore(id: "ui", directory: directory, configuration: configuration)
                guard try other.string(forKey: "c") == "after" else { throw PrefsError.Code.notFound.asError }
            }
            step("write-through-read-only-open") {
                let other = try PrefsStore(id: "ui", directory: directory, configuration: configuration)
                try other.set("x", forKey: "d")
            }
            step("compact-with-read-only-file") { try store.compact() }
            chmod(data, 0o600)
            step("reopen-and-read-everything") {
                let other = try PrefsStore(id: "ui", directory: directory, configuration: configuration)
                guard try other.string(forKey: "a") == "before", try other.string(forKey: "b") == "during",
                    try other.string(forKey: "c") == "after", try other.string(forKey: "d") == nil
                else { throw PrefsError.Code.corrupted.asError }
            }
        } catch {
            PrefsCommands.fail("open failed: \(error)")
        }
    }
}

extension PrefsError.Code {
    /// A stand-in error carrying this code, for the helper's step reports.
    fileprivate var asError: some Error { StepFailed(code: "\(self)") }
}

private struct StepFailed: Error, CustomStringConvertible {
    var code: String
    var description: String { "wrong-value(\(code))" }
}
