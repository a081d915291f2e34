import ArgumentParser
import PrefsKV

extension Prefs {
    /// `vaultctl prefs verify STORE`
    struct VerifyCommand: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "verify",
            abstract: "Scan every record of a store and report any damage, changing nothing.",
            discussion: """
                A read-only scan of the data file: takes no lock, recovers and writes nothing. Exits 0 when \
                the store is clean, 65 with a report of every damaged range (offset, length, records lost, the \
                keys still readable there, the reason) when it is not; an unreadable header is a "corrupted" \
                error (65). A sealed store's records are checked by checksum only (no key is used).

                JSON: {"store": "ui", "path": "...", "clean": false, "sealed": false, "recordsVerified": 5, \
                "damage": [{"offset": 4096, "length": 48, "records": 1, "keys": ["theme"], \
                "reason": "checksum mismatch"}]}.
                """)

        @OptionGroup var options: GlobalOptions

        @Argument(help: "The store id.")
        var store: String

        func run() throws {
            let console = Console(options: options)
            try console.run {
                let target = try StoreTarget(id: store, options: options)
                try target.requireExisting()
                let report = try target.run { try PrefsStore.verify(id: store, directory: target.directory) }
                let lost = report.damage.reduce(0) { $0 + $1.records }
                let scope = report.isSealed ? " (sealed: checksums only)" : ""
                let summary =
                    report.isClean
                    ? "store \(store) is clean: \(plural(report.recordsVerified, "record")) verified\(scope), "
                        + target.dataPath
                    : "store \(store) is DAMAGED: \(plural(report.damage.count, "damaged range")), "
                        + "\(plural(lost, "record")) lost, \(plural(report.recordsVerified, "record")) verified"
                        + "\(scope), \(target.dataPath)"
                console.answer(
                    json: [
                        "store": .string(store), "path": .string(target.dataPath), "clean": .bool(report.isClean),
                        "sealed": .bool(report.isSealed), "recordsVerified": .int(Int64(report.recordsVerified)),
                        "damage": .array(report.damage.map(\.json)),
                    ],
                    human: report.isClean ? summary : summary + "\n" + damageTable(report.damage))
                if !report.isClean {
                    if !options.json { console.warn("salvage what verifies with `\(target.command("repair"))`") }
                    throw ExitCode(ExitStatus.dataError)
                }
            }
        }
    }
}
