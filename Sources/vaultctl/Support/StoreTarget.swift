import ArgumentParser
import Logging
import PrefsKV
import SystemLayer

/// `STORE`: the store a `prefs` command works on, by id.
struct StoreSelection: ParsableArguments {
    @Argument(help: "The store id.")
    var store: String
}

/// The store a `prefs` command names: its id, directory and data file, checked before anything is opened.
///
/// Every open goes through here, with `recovery: .fail` unless the command is `repair`: an operator tool never
/// changes a store it was not asked to change. Errors are rewritten to name the store and its file.
struct StoreTarget {
    var id: String
    var directory: String
    /// `<directory>/<id>.prefs`.
    var dataPath: String
    var options: GlobalOptions

    /// Checks the id (exit 64 for an invalid one); opens nothing.
    init(id: String, options: GlobalOptions) throws {
        self.id = id
        self.options = options
        directory = try options.prefsDirectory()
        do {
            dataPath = try PrefsStore.dataPath(id: id, directory: directory)
        } catch let error as PrefsError {
            throw CLIFailure(error, exitCode: ExitStatus.usage)
        }
    }

    /// `invalidKey` (exit 64) for a key no store accepts.
    func validate(key: String) throws {
        do {
            try PrefsStore.validate(key: key)
        } catch let error as PrefsError {
            throw CLIFailure(error, exitCode: ExitStatus.usage)
        }
    }

    /// Whether the data file exists (a symbolic link counts: opening it is then refused, not created over).
    var exists: Bool { fileExists(dataPath) }

    /// `notFound` (exit 66) unless the data file exists: reading commands never create a store.
    func requireExisting() throws {
        guard exists else { throw missing }
    }

    /// The `notFound` answer for a store whose data file does not exist.
    var missing: CLIFailure {
        CLIFailure.notFound("no store \"\(id)\" in \(directory): \(dataPath) does not exist")
    }

    /// The `notFound` answer for a key the store does not hold (or holds expired).
    func noKey(_ key: String) -> CLIFailure {
        CLIFailure.notFound("store \"\(id)\" (\(dataPath)) has no key \"\(key)\"")
    }

    /// `vaultctl [--dir DIR] prefs <command> STORE`, for hints in messages.
    func command(_ name: String) -> String {
        options.commandLine("prefs \(name) \(shellQuoted(id))")
    }

    /// Opens the store with `recovery: .fail` (creating it only when `creating`). A damaged store answers
    /// `corrupted` (exit 65) pointing at `prefs repair`; nothing is recovered or rewritten.
    func open(creating: Bool = false) throws -> PrefsStore {
        if creating {
            try options.checkDirectoryToCreate()
        } else {
            try requireExisting()
            // An open makes the store's lock file: a file that is no store at all is refused from its header
            // first (a read that makes nothing), so that a reading command never leaves one behind.
            do {
                _ = try PrefsStore.inspect(id: id, directory: directory)
            } catch let error as PrefsError where error.code == .notAStore {
                throw unreadable(error)
            } catch {
                // Anything else is the open's to answer (a damaged header page the copy stands in for, ...).
            }
        }
        do {
            return try PrefsStore(id: id, directory: directory, configuration: configuration(recovery: .fail))
        } catch let error as PrefsError where error.code == .corrupted {
            throw damaged(error)
        } catch let error as PrefsError where error.code == .notAStore {
            throw unreadable(error)
        }
    }

    /// Repairs the store (`repair` only): salvages a damaged one, rebuilds one no copy of whose header verifies.
    /// Nil when it was clean.
    func repair() throws -> PrefsRecoveryReport? {
        try requireExisting()
        return try PrefsStore.repair(id: id, directory: directory, configuration: configuration(recovery: .salvage))
    }

    func configuration(recovery: PrefsStore.RecoveryPolicy) -> PrefsStore.Configuration {
        var configuration = PrefsStore.Configuration()
        configuration.recovery = recovery
        // The command reports what matters itself; the library's log lines are diagnostics for --verbose.
        configuration.logger.logLevel = options.verbose ? .info : .critical
        // A command is short-lived: it never compacts on its own, only when asked (`prefs compact`).
        configuration.autoCompactionThreshold = nil
        return configuration
    }

    /// Runs `body`, rewriting a PrefsError so that its message names the store and its file.
    func run<R>(_ body: () throws -> R) throws -> R {
        do {
            return try body()
        } catch let error as PrefsError {
            throw failure(error)
        }
    }

    /// A PrefsError as the contract reports it, its message naming the store and the file.
    func failure(_ error: PrefsError) -> CLIFailure {
        CLIFailure(error, message: "store \"\(id)\" (\(error.path ?? dataPath)): \(error.message)")
    }

    /// The answer for a file no copy of whose header verifies (`notAStore`, `corrupted`): the error, and the fix.
    func unreadable(_ error: PrefsError) -> CLIFailure {
        guard error.code == .notAStore || error.code == .corrupted else { return failure(error) }
        return CLIFailure(
            error,
            message: "store \"\(id)\" (\(error.path ?? dataPath)): \(error.message); `\(command("repair"))` rebuilds "
                + "it from the records that still verify, keeping the original")
    }

    /// The answer to an open that met damage under `.fail`: what a read-only scan finds, and the fix.
    private func damaged(_ openError: PrefsError) -> CLIFailure {
        let error = openError
        let report: PrefsVerifyReport
        do {
            report = try PrefsStore.verify(id: id, directory: directory)
        } catch let scanError as PrefsError {
            // No copy of the header verifies: repair rebuilds the store from what verifies in its body.
            return unreadable(scanError)
        } catch {
            return failure(openError)
        }
        guard !report.isClean else { return failure(error) }
        let lost = report.damage.reduce(0) { $0 + $1.records }
        let keys = report.damage.flatMap(\.keys)
        return CLIFailure(
            error,
            message: "store \"\(id)\" (\(dataPath)) is damaged and was left untouched: "
                + "\(plural(report.damage.count, "damaged range")), \(plural(lost, "record")) lost"
                + (keys.isEmpty ? "" : " (keys: \(keys.joined(separator: ", ")))")
                + "; see `\(command("verify"))`, salvage it with `\(command("repair"))`",
            exitCode: ExitStatus.dataError)
    }
}

/// `1 record`, `2 records`; `1 entry`, `2 entries` with `nouns: "entries"`.
func plural(_ count: Int, _ noun: String, _ nouns: String? = nil) -> String {
    "\(count) \(count == 1 ? noun : nouns ?? noun + "s")"
}

/// `text` quoted for a POSIX shell when it needs to be.
func shellQuoted(_ text: String) -> String {
    Sys.shellQuoted(text)
}

/// Whether anything exists at `path` (without following a final symbolic link).
func fileExists(_ path: String) -> Bool {
    Sys.exists(path)
}
