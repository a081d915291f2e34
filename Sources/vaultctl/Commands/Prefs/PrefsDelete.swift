import ArgumentParser
import PrefsKV

extension Prefs {
    /// `vaultctl prefs delete STORE KEY`
    struct DeleteCommand: StoreCommand, KeyCommand {
        static let configuration = CommandConfiguration(
            commandName: "delete",
            abstract: "Remove a key from a store.",
            discussion: """
                An absent store or key exits 66 and changes nothing. Prints nothing. \
                JSON: {"store": "ui", "key": "theme", "deleted": true}.
                """)

        @OptionGroup var options: GlobalOptions
        @OptionGroup var selection: StoreSelection

        @Argument(help: "The key.")
        var key: String

        func answer(store target: StoreTarget, console: Console) throws -> Answer {
            let opened = try target.open()
            guard try opened.contains(key) else { throw target.noKey(key) }
            try opened.removeValue(forKey: key)
            console.verbose("deleted key \"\(key)\" from \(target.dataPath)")
            return Answer(json: Report(store: store, key: key), human: "")
        }

        /// The `--json` answer.
        struct Report: Encodable {
            var store: String
            var key: String
            var deleted = true
        }
    }
}
