import ArgumentParser
import PrefsKV

extension Prefs {
    /// `vaultctl prefs repair STORE`
    struct RepairCommand: ParsableCommand {
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

        @Argument(help: "The store id.")
        var store: String

        func run() throws {
            let console = Console(options: options)
            try console.run {
                let target = try StoreTarget(id: store, options: options)
                try target.requireExisting()
                let scan = try target.run { try PrefsStore.verify(id: store, directory: target.directory) }
                var answer: JSONValue = [
                    "store": .string(store), "path": .string(target.dataPath), "clean": true, "repaired": false,
                    "kept": .int(Int64(scan.recordsVerified)), "lost": 0, "lostKeys": [], "quarantine": nil,
                    "damage": [],
                ]
                guard !scan.isClean else {
                    console.answer(
                        json: answer, human: "store \(store) is clean; nothing was changed (\(target.dataPath))")
                    return
                }
                let recovery = try target.run { try target.openSalvaging().lastRecovery }
                guard let recovery else {
                    // Another process salvaged it between the scan and the open.
                    console.answer(
                        json: answer, human: "store \(store) is clean now; nothing was changed (\(target.dataPath))")
                    return
                }
                guard let quarantine = recovery.quarantinePath else {
                    throw CLIFailure(
                        code: "readOnly",
                        message: "store \"\(store)\" (\(target.dataPath)) cannot be repaired: its directory is "
                            + "read-only, so nothing was written", exitCode: ExitStatus.ioError)
                }
                answer = [
                    "store": .string(store), "path": .string(target.dataPath), "clean": false, "repaired": true,
                    "kept": .int(Int64(recovery.recordsKept)), "lost": .int(Int64(recovery.recordsLost)),
                    "lostKeys": .array(recovery.lostKeys.map(JSONValue.string)), "quarantine": .string(quarantine),
                    "damage": .array(recovery.damage.map(\.json)),
                ]
                let keys = recovery.lostKeys.isEmpty ? "" : " (keys: \(recovery.lostKeys.joined(separator: ", ")))"
                console.answer(
                    json: answer,
                    human: """
                        repaired store \(store) (\(target.dataPath)): kept \(plural(recovery.recordsKept, "record")), \
                        lost \(recovery.recordsLost)\(keys)
                        damaged original kept at \(quarantine)
                        \(damageTable(recovery.damage))
                        """)
            }
        }
    }
}
