import ArgumentParser
import PrefsKV

extension Prefs {
    /// `vaultctl prefs repair STORE`
    struct RepairCommand: StoreCommand {
        static let configuration = CommandConfiguration(
            commandName: "repair",
            abstract: "Salvage a damaged store: keep every record that verifies and quarantine the original.",
            discussion: """
                A clean store is left as it is (exit 0). A damaged one is copied byte for byte to \
                <STORE>.prefs.corrupt-<UTC time> (mode 0400), and a new file with every record that verifies \
                replaces it; the report names what was kept and lost. An unreadable header cannot be repaired \
                (65, the file is left untouched); a sealed store needs its key (78).

                JSON: {"store": "ui", "path": "...", "clean": false, "repaired": true, "kept": 4, "lost": 1, \
                "lostKeys": ["theme"], "quarantine": ".../ui.prefs.corrupt-20260101T000000Z", "damage": [...]}; \
                for a clean store clean is true, repaired false, kept the records verified, lost 0 and \
                quarantine null.
                """)

        @OptionGroup var options: GlobalOptions
        @OptionGroup var selection: StoreSelection

        func answer(store target: StoreTarget, console: Console) throws -> Answer {
            try target.requireExisting()
            let scan = try PrefsStore.verify(id: store, directory: target.directory)
            let clean = Report(
                store: store, path: target.dataPath, clean: true, repaired: false, kept: scan.recordsVerified,
                lost: 0, lostKeys: [], quarantine: nil, damage: [])
            guard !scan.isClean else {
                return Answer(json: clean, human: "store \(store) is clean; nothing was changed (\(target.dataPath))")
            }
            guard let recovery = try target.openSalvaging().lastRecovery else {
                // Another process salvaged it between the scan and the open.
                return Answer(
                    json: clean, human: "store \(store) is clean now; nothing was changed (\(target.dataPath))")
            }
            guard let quarantine = recovery.quarantinePath else {
                throw CLIFailure(
                    code: "readOnly",
                    message: "store \"\(store)\" (\(target.dataPath)) cannot be repaired: its directory is "
                        + "read-only, so nothing was written", exitCode: ExitStatus.ioError)
            }
            let keys = recovery.lostKeys.isEmpty ? "" : " (keys: \(recovery.lostKeys.joined(separator: ", ")))"
            return Answer(
                json: Report(
                    store: store, path: target.dataPath, clean: false, repaired: true, kept: recovery.recordsKept,
                    lost: recovery.recordsLost, lostKeys: recovery.lostKeys, quarantine: quarantine,
                    damage: recovery.damage.map(DamageReport.init)),
                human: """
                    repaired store \(store) (\(target.dataPath)): kept \(plural(recovery.recordsKept, "record")), \
                    lost \(recovery.recordsLost)\(keys)
                    damaged original kept at \(quarantine)
                    \(damageTable(recovery.damage))
                    """)
        }

        /// The `--json` answer.
        struct Report: Encodable {
            var store: String
            var path: String
            var clean: Bool
            var repaired: Bool
            var kept: Int
            var lost: Int
            var lostKeys: [String]
            @Nullable var quarantine: String?
            var damage: [DamageReport]
        }
    }
}
