import ArgumentParser
import PrefsKV

extension Prefs {
    /// `vaultctl prefs wipe STORE --yes`
    struct WipeCommand: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "wipe",
            abstract: "Delete a store: its data, lock and temporary files and its quarantine copies.",
            discussion: """
                Needs --yes: without it, exits 64 and touches nothing. Safe while other processes have the \
                store open: they see it gone on their next access, and its lock file is kept for them. A \
                process holding the store exclusively makes this exit 75 (busy) with nothing removed. A store \
                with no files exits 66.

                JSON: {"store": "ui", "path": "...", "removed": [".../ui.prefs", ".../ui.prefs.lock"], \
                "lockKept": false}.
                """)

        @OptionGroup var options: GlobalOptions

        @Argument(help: "The store id.")
        var store: String

        @Flag(help: "Confirm that the store is to be deleted.")
        var yes = false

        func run() throws {
            let console = Console(options: options)
            try console.run {
                guard yes else {
                    throw CLIFailure.usage(
                        "refusing to wipe store \"\(store)\" without --yes: it deletes the store's files and its "
                            + "quarantine copies; nothing was changed")
                }
                let target = try StoreTarget(id: store, options: options)
                let hasFiles = try target.run { () throws -> Bool in
                    if target.exists || fileExists(target.dataPath + ".tmp") { return true }
                    guard fileExists(target.directory) else { return false }
                    return !(try PrefsStore.quarantineCopies(id: store, directory: target.directory).isEmpty)
                }
                guard hasFiles else { throw target.missing }
                let report = try target.run { try PrefsStore.destroy(id: store, directory: target.directory) }
                if report.lockKept && !options.json {
                    console.warn(
                        "kept \(target.dataPath).lock: another process has store \"\(store)\" open; "
                            + "it sees the store gone on its next access")
                }
                console.answer(
                    json: [
                        "store": .string(store), "path": .string(target.dataPath),
                        "removed": .array(report.removed.map(JSONValue.string)), "lockKept": .bool(report.lockKept),
                    ],
                    human: "wiped store \(store): removed \(plural(report.removed.count, "file"))"
                        + (report.removed.isEmpty ? "" : "\n" + report.removed.joined(separator: "\n")))
            }
        }
    }
}
