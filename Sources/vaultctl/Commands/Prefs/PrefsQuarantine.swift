import ArgumentParser
import PrefsKV
import SystemLayer

extension Prefs {
    /// `vaultctl prefs quarantine ls|prune [STORE]`
    struct QuarantineCommand: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "quarantine",
            abstract: "List and remove the quarantine copies that recoveries kept of damaged stores.",
            discussion: """
                Every recovery keeps the damaged original, byte for byte, as <STORE>.prefs.corrupt-<UTC time>[-n] \
                (mode 0400), and nothing removes it but `prefs wipe` or `prefs quarantine prune`.
                """,
            subcommands: [LsCommand.self, PruneCommand.self])

        /// `vaultctl prefs quarantine ls [STORE]`
        struct LsCommand: VaultCtlCommand {
            static let configuration = CommandConfiguration(
                commandName: "ls",
                abstract: "List the quarantine copies (of STORE, or of every store), oldest first.",
                discussion: """
                    Opens and changes nothing. A missing directory exits 66.

                    JSON: {"directory": "...", "copies": [{"store": "ui", "path": ".../ui.prefs.corrupt-\
                    20261128T141422Z", "madeAt": "20261128T141422Z", "fileBytes": 8192}]}.
                    """)

            @OptionGroup var options: GlobalOptions
            @Argument(help: "Only this store's copies.") var store: String?

            func answer(console: Console) throws -> Answer {
                let directory = try options.prefsDirectory()
                let copies = try QuarantineCommand.copies(in: directory, store: store)
                let rows = copies.map { Report.Copy($0) }
                return Answer(
                    json: Report(directory: directory, copies: rows),
                    human: rows.isEmpty
                        ? "no quarantine copies in \(directory)"
                        : table(
                            ["STORE", "MADE (UTC)", "SIZE", "PATH"],
                            rows.map { [$0.store, $0.madeAt, String($0.fileBytes), $0.path] }))
            }

            /// The `--json` answer.
            struct Report: Encodable {
                struct Copy: Encodable {
                    var store: String
                    var path: String
                    var madeAt: String
                    var fileBytes: Int

                    init(_ copy: PrefsQuarantineCopy) {
                        store = copy.store
                        path = copy.path
                        madeAt = copy.stamp
                        fileBytes = (try? Sys.lstat(copy.path).get())?.size ?? 0
                    }
                }

                var directory: String
                var copies: [Copy]
            }
        }

        /// `vaultctl prefs quarantine prune [STORE] [--keep N] --yes`
        struct PruneCommand: VaultCtlCommand {
            static let configuration = CommandConfiguration(
                commandName: "prune",
                abstract: "Remove quarantine copies, oldest first, keeping the newest N of each store.",
                discussion: """
                    Needs --yes: without it, exits 64 and removes nothing. Removes the copies of STORE (or of \
                    every store) but the --keep newest of each (0 by default); the stores themselves are not \
                    touched. A missing directory exits 66.

                    JSON: {"directory": "...", "removed": [".../ui.prefs.corrupt-20261127T101010Z"], \
                    "kept": [".../ui.prefs.corrupt-20261128T141422Z"]}.
                    """)

            @OptionGroup var options: GlobalOptions
            @Argument(help: "Only this store's copies.") var store: String?
            @Option(help: "How many of the newest copies of each store to keep.") var keep = 0
            @Flag(help: "Confirm that the copies are to be removed.") var yes = false

            func checkArguments() throws {
                guard keep >= 0 else { throw CLIFailure.usage("--keep must be 0 or more, not \(keep)") }
                guard yes else {
                    throw CLIFailure.usage(
                        "refusing to prune quarantine copies without --yes: they are the only copies of damaged "
                            + "originals; nothing was changed")
                }
            }

            func answer(console: Console) throws -> Answer {
                let directory = try options.prefsDirectory()
                let copies = try QuarantineCommand.copies(in: directory, store: store)
                var removed: [String] = []
                var kept: [String] = []
                for id in Set(copies.map(\.store)).sorted() {
                    let ofStore = copies.filter { $0.store == id }  // oldest first
                    let cut = max(0, ofStore.count - keep)
                    for copy in ofStore[..<cut] {
                        switch Sys.unlink(copy.path) {
                        case .success: removed.append(copy.path)
                        case .failure(let e) where e == .noEntry: break  // removed meanwhile
                        case .failure(let e):
                            throw CLIFailure(
                                code: e == .accessDenied || e == .notPermitted ? "permissionDenied" : "io",
                                message: "cannot remove \(copy.path): \(e.text) (errno \(e.rawValue)); "
                                    + "removed before it: \(removed.count)",
                                exitCode: e == .accessDenied || e == .notPermitted
                                    ? ExitStatus.permission : ExitStatus.ioError)
                        }
                    }
                    kept += ofStore[cut...].map(\.path)
                }
                if !removed.isEmpty { Sys.syncDirectory(directory) }
                return Answer(
                    json: Report(directory: directory, removed: removed, kept: kept),
                    human: "removed \(plural(removed.count, "quarantine copy", "quarantine copies")), kept "
                        + "\(kept.count)" + (removed.isEmpty ? "" : "\n" + removed.joined(separator: "\n")))
            }

            /// The `--json` answer.
            struct Report: Encodable {
                var directory: String
                var removed: [String]
                var kept: [String]
            }
        }

        /// The copies in `directory` (of `store`), oldest first; 66 for a missing directory, 64 for a bad id.
        static func copies(in directory: String, store: String?) throws -> [PrefsQuarantineCopy] {
            guard fileExists(directory) else { throw CLIFailure.notFound("no store directory at \(directory)") }
            do {
                return try PrefsStore.quarantineCopies(in: directory, store: store)
            } catch let error as PrefsError {
                throw CLIFailure(error)
            }
        }
    }
}
