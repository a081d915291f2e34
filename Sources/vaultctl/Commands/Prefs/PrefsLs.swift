import ArgumentParser
import PrefsKV

extension Prefs {
    /// `vaultctl prefs ls`
    struct LsCommand: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "ls",
            abstract: "List every store in the directory with its size, record count and health.",
            discussion: """
                Reads each data file (<STORE>.prefs) with the read-only scan of `prefs verify`; opens, locks and \
                changes nothing. Health: clean; damaged (with the number of damaged ranges: see `prefs verify`, \
                `prefs repair`); unreadable (the header or the file cannot be read: problem says why); \
                encrypted (a sealed store whose checksums verify: its contents need its key). Quarantine \
                copies of damaged originals are counted per store. A missing directory exits 66.

                JSON: {"directory": "...", "stores": [{"store": "ui", "path": "...", "fileBytes": 8192, \
                "records": 5, "health": "clean", "damagedRanges": 0, "quarantined": 1, "problem": null}]}; \
                records is null when unreadable.
                """)

        @OptionGroup var options: GlobalOptions

        struct Row {
            var files: PrefsStoreFiles
            var size: Int
            var records: Int?
            var health: String
            var damagedRanges: Int
            var problem: String?
        }

        func run() throws {
            let console = Console(options: options)
            try console.run {
                let directory = options.dir ?? PrefsStore.defaultDirectory
                guard fileExists(directory) else {
                    throw CLIFailure(
                        code: "notFound", message: "no store directory at \(directory)", exitCode: ExitStatus.notFound)
                }
                let stores: [PrefsStoreFiles]
                do {
                    stores = try PrefsStore.storeFiles(in: directory)
                } catch let error as PrefsError {
                    throw CLIFailure(
                        code: error.code.description, message: "cannot list \(directory): \(error.message)",
                        exitCode: ReportedFailure.exitCode(for: error.code))
                }
                let rows = stores.map { Self.inspect($0, directory: directory) }
                console.answer(
                    json: [
                        "directory": .string(directory),
                        "stores": .array(
                            rows.map { row in
                                [
                                    "store": .string(row.files.id), "path": .string(row.files.dataPath),
                                    "fileBytes": .int(Int64(row.size)),
                                    "records": .optional(row.records.map(Int64.init)),
                                    "health": .string(row.health), "damagedRanges": .int(Int64(row.damagedRanges)),
                                    "quarantined": .int(Int64(row.files.quarantinePaths.count)),
                                    "problem": .optional(row.problem),
                                ]
                            }),
                    ],
                    human: table(
                        ["STORE", "SIZE", "RECORDS", "HEALTH"],
                        rows.map { row in
                            var health = row.health
                            if row.health == "damaged" { health += " (\(plural(row.damagedRanges, "damaged range")))" }
                            if let problem = row.problem { health += ": \(problem)" }
                            let quarantined = row.files.quarantinePaths.count
                            if quarantined > 0 { health += ", \(quarantined) quarantined" }
                            return [row.files.id, String(row.size), row.records.map(String.init) ?? "-", health]
                        }))
            }
        }

        /// Size, records and health of one store, from a read-only scan.
        static func inspect(_ files: PrefsStoreFiles, directory: String) -> Row {
            let size = System.linkStatus(files.dataPath)?.size ?? 0
            do {
                let report = try PrefsStore.verify(id: files.id, directory: directory)
                let health = !report.isClean ? "damaged" : report.isSealed ? "encrypted" : "clean"
                return Row(
                    files: files, size: size, records: report.recordsVerified, health: health,
                    damagedRanges: report.damage.count, problem: nil)
            } catch let error as PrefsError {
                return Row(
                    files: files, size: size, records: nil, health: "unreadable", damagedRanges: 0,
                    problem: "\(error.code): \(error.message)")
            } catch {
                return Row(
                    files: files, size: size, records: nil, health: "unreadable", damagedRanges: 0,
                    problem: "\(error)")
            }
        }
    }
}
