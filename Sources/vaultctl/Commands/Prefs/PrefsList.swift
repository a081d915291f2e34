import ArgumentParser
import PrefsKV

extension Prefs {
    /// `vaultctl prefs keys STORE` (alias `list`)
    struct ListCommand: StoreCommand {
        static let configuration = CommandConfiguration(
            commandName: "keys",
            abstract: "List a store's keys with their type, size and expiry.",
            discussion: """
                Values are not printed (use `prefs get`). Sizes are the stored value's bytes; expiry is UTC, \
                or "never".

                JSON: {"store": "ui", "entries": [{"key": "theme", "type": "string", "size": 4, \
                "expiresAt": null}]}, where type is bool, int, double, string, bytes, strings or json, and \
                expiresAt is milliseconds since the Unix epoch or null.
                """,
            aliases: ["list"])

        @OptionGroup var options: GlobalOptions
        @OptionGroup var selection: StoreSelection

        func answer(store target: StoreTarget, console: Console) throws -> Answer {
            let entries = try target.open().entries().map { entry in
                Report.Entry(key: entry.key, type: entry.type, size: entry.valueSize, expiresAt: entry.expiresAt)
            }
            return Answer(
                json: Report(store: store, entries: entries),
                human: table(
                    ["KEY", "TYPE", "SIZE", "EXPIRES"],
                    entries.map { entry in
                        [
                            entry.key, entry.type, String(entry.size),
                            entry.expiresAt.map { utcTimestamp(milliseconds: $0) } ?? "never",
                        ]
                    }))
        }

        /// The `--json` answer.
        struct Report: Encodable {
            struct Entry: Encodable {
                var key: String
                var type: String
                var size: Int
                @Nullable var expiresAt: Int64?
            }

            var store: String
            var entries: [Entry]
        }
    }
}
