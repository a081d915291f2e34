import ArgumentParser
import PrefsKV

extension Prefs {
    /// `vaultctl prefs list STORE`
    struct ListCommand: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "list",
            abstract: "List a store's keys with their type, size and expiry.",
            discussion: """
                Values are not printed (use `prefs get`). Sizes are the stored value's bytes; expiry is UTC, \
                or "never".

                JSON: {"store": "ui", "entries": [{"key": "theme", "type": "string", "size": 4, \
                "expiresAt": null}]}, where type is bool, int, double, string, bytes, strings or json, and \
                expiresAt is milliseconds since the Unix epoch or null.
                """)

        @OptionGroup var options: GlobalOptions

        @Argument(help: "The store id.")
        var store: String

        func run() throws {
            let console = Console(options: options)
            try console.run {
                let target = try StoreTarget(id: store, options: options)
                let entries = try target.run { try target.open().entries() }
                console.answer(
                    json: [
                        "store": .string(store),
                        "entries": .array(
                            entries.map { entry in
                                [
                                    "key": .string(entry.key), "type": .string(entry.type),
                                    "size": .int(Int64(entry.valueSize)), "expiresAt": .optional(entry.expiresAt),
                                ]
                            }),
                    ],
                    human: table(
                        ["KEY", "TYPE", "SIZE", "EXPIRES"],
                        entries.map { entry in
                            [
                                entry.key, entry.type, String(entry.valueSize),
                                entry.expiresAt.map { utcTimestamp(milliseconds: $0) } ?? "never",
                            ]
                        }))
            }
        }
    }
}
