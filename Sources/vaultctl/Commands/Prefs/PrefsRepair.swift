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
                replaces it; the report names what was kept and lost. A damaged header page is read from its \
                copy; a file no copy of whose header verifies (zeroed, truncated, not a store) is rebuilt from \
                the records of its body that verify their checksums, or made an empty store when none does \
                (kept 0). Repair always ends in a store that opens; a sealed store needs its key (78).

                JSON: {"store": "ui", "path": "...", "clean": false, "repaired": true, "kept": 4, "lost": 1, \
                "lostKeys": ["theme"], "revertedKeys": ["sidebar"], "quarantine": \
                ".../ui.prefs.corrupt-20260101T000000Z", "damage": [...]}; for a clean store clean is true, \
                repaired false, kept the records verified, lost 0 and quarantine null. lostKeys are the keys whose \
                value is gone; revertedKeys those that kept an older value (their newest write was lost); a lost \
                write a later one replaced costs its key nothing and is named in neither.
                """)

        @OptionGroup var options: GlobalOptions
        @OptionGroup var selection: StoreSelection

        func answer(store target: StoreTarget, console: Console) throws -> Answer {
            try target.requireExisting()
            var verified = 0
            do {
                let scan = try PrefsStore.verify(id: store, directory: target.directory)
                verified = scan.recordsVerified
                if scan.isClean {
                    return Answer(
                        json: cleanReport(target, kept: verified),
                        human: "store \(store) is clean; nothing was changed (\(target.dataPath))")
                }
            } catch let error as PrefsError where error.code == .notAStore || error.code == .corrupted {
                // No copy of the header verifies: the repair rebuilds the store from its body.
            }
            guard let recovery = try target.repair() else {
                // Another process salvaged it between the scan and the open.
                return Answer(
                    json: cleanReport(target, kept: verified),
                    human: "store \(store) is clean now; nothing was changed (\(target.dataPath))")
            }
            guard let quarantine = recovery.quarantinePath else {
                throw CLIFailure(
                    code: "readOnly",
                    message: "store \"\(store)\" (\(target.dataPath)) cannot be repaired: its directory is "
                        + "read-only, so nothing was written", exitCode: ExitStatus.ioError)
            }
            return Answer(
                json: Report(
                    store: store, path: target.dataPath, clean: false, repaired: true, kept: recovery.recordsKept,
                    lost: recovery.recordsLost, lostKeys: recovery.lostKeys, revertedKeys: recovery.revertedKeys,
                    quarantine: quarantine,
                    damage: recovery.damage.map(DamageReport.init)),
                human: """
                    repaired store \(store) (\(target.dataPath)): kept \(plural(recovery.recordsKept, "record")), \
                    lost \(recovery.recordsLost)\(recovery.keyCosts)
                    damaged original kept at \(quarantine)
                    \(damageTable(recovery.damage))
                    """)
        }

        private func cleanReport(_ target: StoreTarget, kept: Int) -> Report {
            Report(
                store: store, path: target.dataPath, clean: true, repaired: false, kept: kept, lost: 0, lostKeys: [],
                revertedKeys: [], quarantine: nil, damage: [])
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
            var revertedKeys: [String]
            @Nullable var quarantine: String?
            var damage: [DamageReport]
        }
    }
}
