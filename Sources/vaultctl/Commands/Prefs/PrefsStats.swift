import ArgumentParser
import PrefsKV

extension Prefs {
    /// `vaultctl prefs stats STORE`
    struct StatsCommand: StoreCommand {
        static let configuration = CommandConfiguration(
            commandName: "stats",
            abstract: "Show a store's sizes and counts.",
            discussion: """
                JSON: the PrefsStats fields with the store and its file: {"store": "ui", "path": "...", \
                "keyCount": 3, "liveBytes": 144, "logBytes": 192, "fileBytes": 8192, "recordCount": 4, \
                "garbageRatio": 0.25, "generation": 0, "lastRecovery": null}. lastRecovery is always null \
                here: this command never recovers a store.
                """)

        @OptionGroup var options: GlobalOptions
        @OptionGroup var selection: StoreSelection

        func answer(store target: StoreTarget, console: Console) throws -> Answer {
            let stats = try target.open().stats()
            let percent = Int((stats.garbageRatio * 100).rounded())
            return Answer(
                json: Report(
                    store: store, path: target.dataPath, keyCount: stats.keyCount, liveBytes: stats.liveBytes,
                    logBytes: stats.logBytes, fileBytes: stats.fileBytes, recordCount: stats.recordCount,
                    garbageRatio: stats.garbageRatio, generation: Int64(clamping: stats.generation)),
                human: table(
                    ["STORE", store],
                    [
                        ["file", target.dataPath],
                        ["keys", String(stats.keyCount)],
                        ["live bytes", String(stats.liveBytes)],
                        ["log bytes", String(stats.logBytes)],
                        ["file bytes", String(stats.fileBytes)],
                        ["records", String(stats.recordCount)],
                        ["garbage", "\(percent)%"],
                        ["generation", String(stats.generation)],
                    ]))
        }

        /// The `--json` answer.
        struct Report: Encodable {
            var store: String
            var path: String
            var keyCount: Int
            var liveBytes: Int
            var logBytes: Int
            var fileBytes: Int
            var recordCount: Int
            var garbageRatio: Double
            var generation: Int64
            /// Always null: this command never recovers a store.
            @Nullable var lastRecovery: String? = nil
        }
    }
}
