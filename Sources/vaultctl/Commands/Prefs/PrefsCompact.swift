import ArgumentParser
import PrefsKV

extension Prefs {
    /// `vaultctl prefs compact STORE`
    struct CompactCommand: StoreCommand {
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
        @OptionGroup var selection: StoreSelection

        func answer(store target: StoreTarget, console: Console) throws -> Answer {
            let opened = try target.open()
            let before = try opened.stats()
            try opened.compact()
            let after = try opened.stats()
            return Answer(
                json: Report(
                    store: store, path: target.dataPath, fileBytesBefore: before.fileBytes,
                    fileBytesAfter: after.fileBytes, logBytesBefore: before.logBytes, logBytesAfter: after.logBytes,
                    generation: Int64(clamping: after.generation)),
                human: "compacted store \(store) (\(target.dataPath)): \(before.fileBytes) -> \(after.fileBytes) "
                    + "bytes, log \(before.logBytes) -> \(after.logBytes) bytes")
        }

        /// The `--json` answer.
        struct Report: Encodable {
            var store: String
            var path: String
            var fileBytesBefore: Int
            var fileBytesAfter: Int
            var logBytesBefore: Int
            var logBytesAfter: Int
            var generation: Int64
        }
    }
}
