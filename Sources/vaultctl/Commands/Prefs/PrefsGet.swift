import ArgumentParser
import PrefsKV

extension Prefs {
    /// `vaultctl prefs get STORE KEY`
    struct GetCommand: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "get",
            abstract: "Print the value of a key.",
            discussion: """
                Prints the bare value and a newline, so that `$(vaultctl prefs get ui theme)` is the value: \
                bytes as base64, json values as their JSON text, string arrays as a JSON array text. An absent \
                or expired key exits 66.

                JSON: {"key": "theme", "type": "string", "value": "dark"}, where value is a JSON bool, number \
                or string, base64 text for bytes, an array for strings, and the stored JSON text (a string) \
                for json.
                """)

        @OptionGroup var options: GlobalOptions

        @Argument(help: "The store id.")
        var store: String

        @Argument(help: "The key.")
        var key: String

        func run() throws {
            let console = Console(options: options)
            try console.run {
                let target = try StoreTarget(id: store, options: options)
                try target.validate(key: key)
                guard let value = try target.run({ try target.open().value(forKey: key) }) else {
                    throw target.noKey(key)
                }
                if options.json {
                    console.answer(
                        json: ["key": .string(key), "type": .string(value.typeName), "value": value.json], human: "")
                } else {
                    // Not through `answer`: an empty value, or one ending in a newline, still gets its newline.
                    writeOut(value.plainText + "\n")
                }
            }
        }
    }
}
