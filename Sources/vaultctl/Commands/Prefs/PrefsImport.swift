import ArgumentParser
import PrefsKV

extension Prefs {
    /// `vaultctl prefs import STORE FILE`
    struct ImportCommand: ParsableCommand {
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

        @Argument(help: "The store id.")
        var store: String

        @Argument(help: "The export document, or - for standard input.")
        var file: String

        func run() throws {
            let console = Console(options: options)
            try console.run {
                let target = try StoreTarget(id: store, options: options)
                let document = try readInput(file)
                do {
                    try PrefsStore.validateExport(document)
                } catch let error as PrefsError {
                    let source = file == "-" ? "standard input" : file
                    throw CLIFailure(
                        code: error.code.description,
                        message: "cannot import \(source) into store \"\(store)\": \(error.message)",
                        exitCode: ReportedFailure.exitCode(for: error.code))
                }
                let created = !target.exists
                let count = try target.run { () throws -> Int in
                    let opened = try target.open(creating: true)
                    try opened.importJSON(document)
                    return try opened.count
                }
                console.answer(
                    json: [
                        "store": .string(store), "path": .string(target.dataPath), "imported": .int(Int64(count)),
                        "created": .bool(created),
                    ],
                    human: "imported \(plural(count, "entry", "entries")) into store "
                        + "\(store) (\(target.dataPath))")
            }
        }
    }
}
