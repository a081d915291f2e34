import ArgumentParser
import PrefsKV

extension Prefs {
    /// `vaultctl prefs verify STORE`
    struct VerifyCommand: StoreCommand {
        static let configuration = CommandConfiguration(
            commandName: "verify",
            abstract: "Scan every record of a store and report any damage, changing nothing.",
            discussion: """
                A read-only scan of the data file: takes no lock (but waits, on one byte of the \
                file, for a synchronous write being flushed), recovers and writes nothing. Exits 0 when \
                the store is clean, 65 with a report of every damaged range (offset, length, records lost, the \
                keys still readable there, the reason) when it is not; a damaged header page is one of those \
                ranges when the copy of the header at byte 4096 verifies. A file no copy of whose header \
                verifies is a "corrupted" or "notAStore" error (65) that `prefs repair` rebuilds. A sealed \
                store's records are checked by checksum only (no key is used).

                JSON: {"store": "ui", "path": "...", "clean": false, "sealed": false, "recordsVerified": 5, \
                "damage": [{"offset": 4096, "length": 48, "records": 1, "keys": ["theme"], \
                "reason": "checksum mismatch"}]}.
                """)

        @OptionGroup var options: GlobalOptions
        @OptionGroup var selection: StoreSelection

        func answer(store target: StoreTarget, console: Console) throws -> Answer {
            try target.requireExisting()
            let report: PrefsVerifyReport
            do {
                report = try PrefsStore.verify(id: store, directory: target.directory)
            } catch let error as PrefsError {
                throw target.unreadable(error)
            }
            let lost = report.damage.reduce(0) { $0 + $1.records }
            let scope = report.isSealed ? " (sealed: checksums only)" : ""
            let summary =
                report.isClean
                ? "store \(store) is clean: \(plural(report.recordsVerified, "record")) verified\(scope), "
                    + target.dataPath
                : "store \(store) is DAMAGED: \(plural(report.damage.count, "damaged range")), "
                    + "\(plural(lost, "record")) lost, \(plural(report.recordsVerified, "record")) verified"
                    + "\(scope), \(target.dataPath)"
            return Answer(
                json: Report(
                    store: store, path: target.dataPath, clean: report.isClean, sealed: report.isSealed,
                    recordsVerified: report.recordsVerified, damage: report.damage.map(DamageReport.init)),
                human: report.isClean ? summary : summary + "\n" + damageTable(report.damage),
                warning: report.isClean ? nil : "salvage what verifies with `\(target.command("repair"))`",
                status: report.isClean ? ExitStatus.success : ExitStatus.dataError)
        }

        /// The `--json` answer.
        struct Report: Encodable {
            var store: String
            var path: String
            var clean: Bool
            var sealed: Bool
            var recordsVerified: Int
            var damage: [DamageReport]
        }
    }
}
