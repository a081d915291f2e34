import ArgumentParser
import PrefsKV

extension Prefs {
    /// `vaultctl prefs set STORE KEY VALUE --type TYPE`
    struct SetCommand: StoreCommand, KeyCommand {
        static let configuration = CommandConfiguration(
            commandName: "set",
            abstract: "Set a key to a value of a type, creating the store if it does not exist.",
            discussion: """
                Types: string (the default), int (64-bit), double, bool (true or false), json (any JSON text, \
                stored as given), data (base64; also spelled bytes), strings (a JSON array of strings). A value \
                that does not parse as its type exits 64 and changes nothing. Negative numbers are values \
                (`prefs set ui offset -3 --type int`); any other value that starts with - goes after -- \
                (`prefs set ui flags -- -x`). A damaged store is not salvaged: \
                it answers 65.

                Prints nothing. JSON: {"store": "ui", "key": "theme", "type": "string"}.
                """)

        @OptionGroup var options: GlobalOptions
        @OptionGroup var selection: StoreSelection

        @Argument(help: "The key.")
        var key: String

        // Every word the options do not claim, so that a negative number is a value, not an unknown option.
        @Argument(parsing: .allUnrecognized, help: "The value, as text of its type.")
        var value: [String] = []

        @Option(help: "The value's type.")
        var type: ValueTypeArgument = .string

        /// The one value word: after `--` any text; otherwise a word that does not look like an option,
        /// except a negative number.
        func singleValue() throws -> String {
            let words = value.first == "--" ? Array(value.dropFirst()) : value
            guard words.count == 1, let word = words.first else {
                throw CLIFailure.usage(
                    words.isEmpty
                        ? "missing the value to set for key \"\(key)\""
                        : "expected one value for key \"\(key)\", got \(words.count) words (options go before --)")
            }
            if value.first != "--" && word.hasPrefix("-") && Double(word) == nil {
                throw CLIFailure.usage(
                    "unknown option \(word.prefix(2) == "--" ? word : "starting with -"); "
                        + "give a value that starts with - after --: prefs set \(store) \(key) -- VALUE")
            }
            return word
        }

        func answer(store target: StoreTarget, console: Console) throws -> Answer {
            let parsed = try type.value(from: try singleValue(), key: key)
            try target.open(creating: true).set(parsed, forKey: key)
            console.verbose("set key \"\(key)\" (\(parsed.typeName)) in \(target.dataPath)")
            return Answer(json: Report(store: store, key: key, type: parsed.typeName), human: "")
        }

        /// The `--json` answer.
        struct Report: Encodable {
            var store: String
            var key: String
            var type: String
        }
    }
}
