import ArgumentParser
import PrefsKV

extension Prefs {
    /// `vaultctl prefs compact STORE`
    struct CompactCommand: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "compact",
            abstract: "Rewrite a store with only its live records.",
            discussion: """
                Atomic (a new file is written, flushed and renamed into place); other processes follow it on \
                their next access. A damaged store is not salvaged: it answers 65.

                JSON: {"store": "ui", "path": "...", "fileBytesBefore": 16384, "fileBytesAfter": 4352, \
                "logBytesBefore": 9000, "logBytesAfter": 144, "generation": 1}.
                """)

        @OptionGroup var options: GlobalOptions

        @Argument(help: "The store id.")
        var store: String

        func run() throws {
            let console = Console(options: options)
            try console.run {
                let target = try StoreTarget(id: store, options: options)
                let (before, after) = try target.run { () throws -> (PrefsStats, PrefsStats) in
                    let opened = try target.open()
                    let before = try opened.stats()
                    try opened.compact()
                    return (before, try opened.stats())
                }
                console.answer(
                    json: [
                        "store": .string(store), "path": .string(target.dataPath),
                        "fileBytesBefore": .int(Int64(before.fileBytes)),
                        "fileBytesAfter": .int(Int64(after.fileBytes)),
                        "logBytesBefore": .int(Int64(before.logBytes)), "logBytesAfter": .int(Int64(after.logBytes)),
                        "generation": .int(Int64(clamping: after.generation)),
                    ],
                    human: "compacted store \(store) (\(target.dataPath)): \(before.fileBytes) -> \(after.fileBytes) "
                        + "bytes, log \(before.logBytes) -> \(after.logBytes) bytes")
            }
        }
    }
}
