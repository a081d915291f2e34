import ArgumentParser
import PrefsKV

extension Prefs {
    /// `vaultctl prefs wipe STORE --yes`
    struct WipeCommand: StoreCommand {
        static let configuration = CommandConfiguration(
            commandName: "wipe",
            abstract: "Delete a store: its data, lock, temporary and base image files and its quarantine copies.",
            discussion: """
                Needs --yes: without it, exits 64 and touches nothing. Safe while other processes have the \
                store open: they see it gone on their next access, and its lock file is kept for them. A \
                process holding the store exclusively makes this exit 75 (busy) with nothing removed. A store \
                with no files exits 66.

                JSON: {"store": "ui", "path": "...", "removed": [".../ui.prefs", ".../ui.prefs.lock"], \
                "lockKept": false}.
                """)

        @OptionGroup var options: GlobalOptions
        @OptionGroup var selection: StoreSelection

        @Flag(help: "Confirm that the store is to be deleted.")
        var yes = false

        func checkArguments() throws {
            guard yes else {
                throw CLIFailure.wipeNeedsYes(
                    "store \"\(store)\"", deleting: "the store's files and its quarantine copies")
            }
        }

        func answer(store target: StoreTarget, console: Console) throws -> Answer {
            let hasFiles =
                try target.exists || fileExists(target.dataPath + ".tmp") || fileExists(target.dataPath + ".prev")
                || (fileExists(target.directory)
                    && !PrefsStore.quarantineCopies(id: store, directory: target.directory).isEmpty)
            guard hasFiles else { throw target.missing }
            let report = try PrefsStore.destroy(id: store, directory: target.directory, evenIfOpen: true)
            if report.lockKept && !options.json {
                console.warn(
                    "kept \(target.dataPath).lock: another process has store \"\(store)\" open; "
                        + "it sees the store gone on its next access")
            }
            return Answer(
                json: Report(store: store, path: target.dataPath, removed: report.removed, lockKept: report.lockKept),
                human: "wiped store \(store): removed \(plural(report.removed.count, "file"))"
                    + (report.removed.isEmpty ? "" : "\n" + report.removed.joined(separator: "\n")))
        }

        /// The `--json` answer.
        struct Report: Encodable {
            var store: String
            var path: String
            var removed: [String]
            var lockKept: Bool
        }
    }
}
