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
        // Focus "autocompact": a small threshold and large values on a few keys, no explicit compaction, rekey,
        // backup or restore, so that automatic compactions follow each other (a buffered store's write their images
        // into the files earlier ones used) and kills land in them.
        let autocompact = focus == "autocompact"
        if autocompact { configuration.autoCompactionThreshold = 16 * 1024 }
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
                roll = ["compact": 995, "rekey": 1000, "restore": 1010, "tx": 700, "autocompact": -1][focus] ?? roll
            }
            if autocompact && roll >= 983 { roll = -1 }
            do {
                switch roll {
                case -1:
                    let blob = "b\(Int.random(in: 0..<8, using: &rng))"
                    PrefsCommands.say("B \(n) blob \(blob)")
                    try store.set(Data(repeating: UInt8(truncatingIfNeeded: n), count: 1_000 + n % 1_000), forKey: blob)
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

extension TortureCommands {
    /// `prefs-changed-reader DIR ID KEY [cached]`: issue 20 (`cached`: through the plaintext cache, issue 39). Opens
    /// the store (KEY as in `sealer`) and reads every key `k000`... it finds, pass after pass, while the test changes
    /// the file underneath it without PrefsKV (truncate, cp, an in-place page rewrite). Every value is
    /// `<store>-<key>-<n>`: one naming another key, or no key, was never written under this key, and is reported as
    /// `BAD key value`. Each pass starts by reading the number in `DIR/mark` (0 when absent: the test writes the number
    /// of changes it made) and ends with `P <pass> <mark>`: a pass so marked began after that change. When `DIR/stop`
    /// exists it reads once more, prints `F key=value,...` (what it ends with) and `E <error codes seen>`, and exits 0.
    /// A SIGBUS would end it with signal 7.
    /// Opens store `id` in `directory` with `sealer` and a logger that logs nothing below critical; exits on failure.
    static func openQuietly(
        _ directory: String, _ id: String, sealer: (any PrefsSealer)?, cachesPlaintext: Bool = false
    ) -> PrefsStore {
        var configuration = PrefsStore.Configuration()
        configuration.sealer = sealer
        configuration.cachesPlaintext = cachesPlaintext
        configuration.logger.logLevel = .critical
        do {
            return try PrefsStore(id: id, directory: directory, configuration: configuration)
        } catch {
            PrefsCommands.fail("open failed: \(error)")
        }
    }

    /// Runs `body`, counting what it throws under its error code (`other` for an error that is not a PrefsError).
    static func counting(_ errors: inout [String: Int], _ body: () throws -> Void) {
        do {
            try body()
        } catch let error as PrefsError {
            errors[error.code.description, default: 0] += 1
        } catch {
            errors["other", default: 0] += 1
        }
    }

    /// `E code:count,...`: what the reads threw, by code.
    static func errorLine(_ errors: [String: Int]) -> String {
        "E " + errors.sorted { $0.key < $1.key }.map { "\($0.key):\($0.value)" }.joined(separator: ",")
    }

    /// prefs-blob-reader DIR ID: reads key `blob` (1,500 bytes, each the low byte of the write's counter) and
    /// `k0`...`k9` (strings "value i") pass after pass while another process rewrites the blob and its compactions
    /// write images into the files earlier ones used; says `BAD ...` for any value that was never written (a blob of
    /// mixed bytes or another length, a key with another value), `P n` after each pass, and when `DIR/stop`
    /// exists, `E code:count...` for the errors reads threw, then exits.
    static func blobReader(_ args: [String]) {
        guard args.count == 2 else { PrefsCommands.fail("usage: prefs-blob-reader DIR ID") }
        let store = openQuietly(args[0], args[1], sealer: nil)
        var errors: [String: Int] = [:]
        var pass = 0
        while true {
            let stopping = access(args[0] + "/stop", F_OK) == 0
            counting(&errors) {
                if let blob = try store.data(forKey: "blob"), blob.count != 1_500 || blob.contains(where: { $0 != blob.first }) {
                    PrefsCommands.say("BAD blob of \(blob.count) bytes, \(Set(blob).count) distinct")
                }
                for i in 0..<10 {
                    let value = try store.string(forKey: "k\(i)")
                    if value != "value \(i)" { PrefsCommands.say("BAD k\(i) \(String(describing: value))") }
                }
            }
            pass += 1
            if stopping {
                PrefsCommands.say(errorLine(errors))
                exit(0)
            }
            PrefsCommands.say("P \(pass)")
        }
    }

    static func changedReader(_ args: [String]) {
        guard args.count == 3 || args.count == 4, let key = Int(args[2]) else {
            PrefsCommands.fail("usage: prefs-changed-reader DIR ID KEY [cached]")
        }
        let store = openQuietly(args[0], args[1], sealer: sealer(key), cachesPlaintext: args.count == 4)
        let names = (0..<200).map { "k" + String(1000 + $0).dropFirst() }
        var errors: [String: Int] = [:]
        var pass = 0
        while true {
            let stopping = access(args[0] + "/stop", F_OK) == 0
            var mark = 0
            let fd = Glibc.open(args[0] + "/mark", O_RDONLY)
            if fd >= 0 {
                var digits = [UInt8](repeating: 0, count: 32)
                let n = read(fd, &digits, digits.count)
                close(fd)
                mark = Int(String(decoding: digits[0..<max(0, n)], as: UTF8.self)) ?? 0
            }
            var pairs: [String] = []
            for name in names {
                counting(&errors) {
                    guard let value = try store.string(forKey: name) else { return }
                    let parts = value.split(separator: "-")
                    if parts.count != 3 || parts[1] != name || !["A", "B"].contains(parts[0]) {
                        PrefsCommands.say("BAD \(name) \(value.prefix(60).debugDescription)")
                    }
                    pairs.append("\(name)=\(value)")
                }
            }
            pass += 1
            if stopping {
                PrefsCommands.say("F " + pairs.joined(separator: ","))
                PrefsCommands.say(errorLine(errors))
                exit(0)
            }
            PrefsCommands.say("P \(pass) \(mark)")
        }
    }
}
