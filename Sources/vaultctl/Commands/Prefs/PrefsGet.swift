import ArgumentParser
import PrefsKV

extension Prefs {
    /// `vaultctl prefs get STORE KEY`
    struct GetCommand: StoreCommand, KeyCommand {
        static let configuration = CommandConfiguration(
            commandName: "get",
            abstract: "Print the value of a key.",
            discussion: """
                Prints the bare value and a newline, so that `$(vaultctl prefs get ui theme)` is the value: \
                bytes as base64, json values as their JSON text, string arrays as a JSON array text. A value \
                holding control characters (other than tabs and line feeds) is printed escaped instead, with a \
                warning on stderr; --json gives its exact text. An absent or expired key exits 66.

                JSON: {"key": "theme", "type": "string", "value": "dark"}, where value is a JSON bool, number \
                or string, base64 text for bytes, an array for strings, and the stored JSON text (a string) \
                for json.
                """)

        @OptionGroup var options: GlobalOptions
        @OptionGroup var selection: StoreSelection

        @Argument(help: "The key.")
        var key: String

        func answer(store target: StoreTarget, console: Console) throws -> Answer {
            guard let value = try target.open().value(forKey: key) else { throw target.noKey(key) }
            // Always its newline, even after an empty value or one ending in a newline.
            return Answer.value(
                json: Report(key: key, type: value.typeName, value: ValueReport(value: value)), value.plainText)
        }

        /// The `--json` answer.
        struct Report: Encodable {
            var key: String
            var type: String
            var value: ValueReport
        }
    }
}
