import ArgumentParser
import PrefsKV

extension Prefs {
    /// `vaultctl prefs stats STORE`
    struct StatsCommand: ParsableCommand {
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

        @Argument(help: "The store id.")
        var store: String

        func run() throws {
            let console = Console(options: options)
            try console.run {
                let target = try StoreTarget(id: store, options: options)
                let stats = try target.run { try target.open().stats() }
                let percent = Int((stats.garbageRatio * 100).rounded())
                console.answer(
                    json: [
                        "store": .string(store), "path": .string(target.dataPath),
                        "keyCount": .int(Int64(stats.keyCount)), "liveBytes": .int(Int64(stats.liveBytes)),
                        "logBytes": .int(Int64(stats.logBytes)), "fileBytes": .int(Int64(stats.fileBytes)),
                        "recordCount": .int(Int64(stats.recordCount)), "garbageRatio": .double(stats.garbageRatio),
                        "generation": .int(Int64(clamping: stats.generation)), "lastRecovery": nil,
                    ],
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
        }
    }
}
