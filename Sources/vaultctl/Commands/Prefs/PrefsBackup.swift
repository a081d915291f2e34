import ArgumentParser
import PrefsKV

extension Prefs {
    /// `vaultctl prefs backup STORE FILE`
    struct BackupCommand: StoreCommand {
        static let configuration = CommandConfiguration(
            commandName: "backup",
            abstract: "Write a compacted copy of a store to a file, atomically.",
            discussion: """
                Writes the store's live records to FILE through a temporary file, a flush and a rename: FILE is \
                a whole store file or absent, never half written. Restore it with `prefs restore`. A damaged \
                store exits 65 and nothing is written; a sealed store needs its key (78).

                JSON: {"store": "ui", "path": "...", "backup": "/backups/ui.prefs", "entries": 3}.
                """)

        @OptionGroup var options: GlobalOptions
        @OptionGroup var selection: StoreSelection

        @Argument(help: "The file to write.")
        var file: String

        func answer(store target: StoreTarget, console: Console) throws -> Answer {
            let opened = try target.open()
            try opened.backup(to: file)
            let count = try opened.count
            return Answer(
                json: Report(store: store, path: target.dataPath, backup: file, entries: count),
                human: "backed up store \(store) (\(plural(count, "entry", "entries"))) to \(file)")
        }

        /// The `--json` answer.
        struct Report: Encodable {
            var store: String
            var path: String
            var backup: String
            var entries: Int
        }
    }

    /// `vaultctl prefs restore STORE FILE`
    struct RestoreCommand: StoreCommand {
        static let configuration = CommandConfiguration(
            commandName: "restore",
            abstract: "Replace a store's contents with a backup from `prefs backup`, atomically.",
            discussion: """
                Checks every record of FILE, then installs a copy of it as the store by a rename that every \
                process with the store open follows (unlike copying a file over a store, which running apps \
                may read half written). The store is created if it does not exist. A damaged backup or one that \
                is not a store exits 64 and changes nothing; a sealed store needs its key (78).

                JSON: {"store": "ui", "path": "...", "restored": 3, "created": false}.
                """)

        @OptionGroup var options: GlobalOptions
        @OptionGroup var selection: StoreSelection

        @Argument(help: "The backup file.")
        var file: String

        func answer(store target: StoreTarget, console: Console) throws -> Answer {
            guard fileExists(file) else {
                throw CLIFailure.notFound("no backup file \(file)")
            }
            let created = !target.exists
            let count: Int
            do {
                count = try restore(into: target)
            } catch {
                // A store this command created for the restore is removed again: a refused restore changes nothing.
                if created { _ = try? PrefsStore.destroy(id: store, directory: target.directory, evenIfOpen: true) }
                if let error = error as? PrefsError, [.notAStore, .corrupted, .unsupportedVersion].contains(error.code) {
                    throw CLIFailure(
                        error, message: "cannot restore \(file) into store \"\(store)\": \(error.message)",
                        exitCode: ExitStatus.usage)
                }
                throw error
            }
            return Answer(
                json: Report(store: store, path: target.dataPath, restored: count, created: created),
                human: "restored store \(store) from \(file): \(plural(count, "entry", "entries")) (\(target.dataPath))")
        }

        /// Opens the store (creating it), restores the backup into it and counts its entries; the handle is closed
        /// on return.
        private func restore(into target: StoreTarget) throws -> Int {
            let opened = try target.open(creating: true)
            try opened.restore(from: file)
            return try opened.count
        }

        /// The `--json` answer.
        struct Report: Encodable {
            var store: String
            var path: String
            var restored: Int
            var created: Bool
        }
    }
}
