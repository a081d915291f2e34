import ArgumentParser
import PrefsKV

extension Prefs {
    /// `vaultctl prefs import STORE FILE`
    struct ImportCommand: StoreCommand {
        static let configuration = CommandConfiguration(
            commandName: "import",
            abstract: "Replace a store's contents with a document from `prefs export`.",
            discussion: """
                Accepts exactly what `prefs export` prints (from any store id); the store then holds exactly \
                the document's entries, in one transaction, and is created if it does not exist. Entries that \
                have already expired are skipped. FILE may be - for standard input. A document that is not an \
                export exits 64 and changes (or creates) nothing.

                JSON: {"store": "ui", "path": "...", "imported": 3, "created": false}.
                """)

        @OptionGroup var options: GlobalOptions
        @OptionGroup var selection: StoreSelection

        @Argument(help: "The export document, or - for standard input.")
        var file: String

        func answer(store target: StoreTarget, console: Console) throws -> Answer {
            let document = try readInput(file)
            do {
                try PrefsStore.validateExport(document)
            } catch let error as PrefsError {
                let source = file == "-" ? "standard input" : file
                throw CLIFailure(error, message: "cannot import \(source) into store \"\(store)\": \(error.message)")
            }
            let created = !target.exists
            let opened = try target.open(creating: true)
            try opened.importJSON(document)
            let count = try opened.count
            return Answer(
                json: Report(store: store, path: target.dataPath, imported: count, created: created),
                human: "imported \(plural(count, "entry", "entries")) into store \(store) (\(target.dataPath))")
        }

        /// The `--json` answer.
        struct Report: Encodable {
            var store: String
            var path: String
            var imported: Int
            var created: Bool
        }
    }
}
