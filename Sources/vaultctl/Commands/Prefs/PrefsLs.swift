import ArgumentParser
import PrefsKV
import SystemLayer

extension Prefs {
    /// `vaultctl prefs stores` (alias `ls`)
    struct LsCommand: VaultCtlCommand {
        static let configuration = CommandConfiguration(
            commandName: "stores",
            abstract: "List every store in the directory with its size, record count and health.",
            discussion: """
                `prefs stores` lists the stores of a directory; `prefs keys STORE` lists the keys of one. `ls` \
                is the same command under its former name.

                Reads each data file (<STORE>.prefs) with the read-only scan of `prefs verify`; opens, locks and \
                changes nothing. Health: clean; damaged (with the number of damaged ranges: see `prefs verify`, \
                `prefs repair`); unreadable (the header or the file cannot be read: problem says why); \
                encrypted (a sealed store whose checksums verify: its contents need its key). Quarantine \
                copies of damaged originals are counted per store. A missing directory exits 66.

                JSON: {"directory": "...", "stores": [{"store": "ui", "path": "...", "fileBytes": 8192, \
                "records": 5, "health": "clean", "damagedRanges": 0, "quarantined": 1, "problem": null}]}; \
                records is null when unreadable.
                """,
            aliases: ["ls"])

        @OptionGroup var options: GlobalOptions

        func answer(console: Console) throws -> Answer {
            let directory = try options.prefsDirectory()
            guard fileExists(directory) else {
                throw CLIFailure.notFound("no store directory at \(directory)")
            }
            let stores: [PrefsStoreFiles]
            do {
                stores = try PrefsStore.storeFiles(in: directory)
            } catch let error as PrefsError {
                throw CLIFailure(error, message: "cannot list \(directory): \(error.message)")
            }
            let rows = stores.map { Self.inspect($0, directory: directory) }
            return Answer(
                json: Report(directory: directory, stores: rows),
                human: table(
                    ["STORE", "SIZE", "RECORDS", "HEALTH"],
                    rows.map { row in
                        var health = row.health
                        if row.health == "damaged" { health += " (\(plural(row.damagedRanges, "damaged range")))" }
                        if let problem = row.problem { health += ": \(problem)" }
                        if row.quarantined > 0 { health += ", \(row.quarantined) quarantined" }
                        return [row.store, String(row.fileBytes), row.records.map(String.init) ?? "-", health]
                    }))
        }

        /// Size, records and health of one store, from a read-only scan.
        static func inspect(_ files: PrefsStoreFiles, directory: String) -> Report.Row {
            var row = Report.Row(
                store: files.id, path: files.dataPath, fileBytes: (try? Sys.lstat(files.dataPath).get())?.size ?? 0,
                records: nil, health: "unreadable", damagedRanges: 0, quarantined: files.quarantinePaths.count,
                problem: nil)
            do {
                let report = try PrefsStore.verify(id: files.id, directory: directory)
                row.health = !report.isClean ? "damaged" : report.isSealed ? "encrypted" : "clean"
                row.records = report.recordsVerified
                row.damagedRanges = report.damage.count
            } catch let error as PrefsError {
                row.problem = "\(error.code): \(error.message)"
            } catch {
                row.problem = "\(error)"
            }
            return row
        }

        /// The `--json` answer.
        struct Report: Encodable {
            struct Row: Encodable {
                var store: String
                var path: String
                var fileBytes: Int
                /// nil when unreadable.
                @Nullable var records: Int?
                /// clean, damaged, unreadable or encrypted.
                var health: String
                var damagedRanges: Int
                var quarantined: Int
                /// Why the store is unreadable.
                @Nullable var problem: String?
            }

            var directory: String
            var stores: [Row]
        }
    }
}
