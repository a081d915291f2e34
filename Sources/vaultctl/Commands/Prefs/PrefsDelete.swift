import ArgumentParser
import PrefsKV

extension Prefs {
    /// `vaultctl prefs delete STORE KEY`
    struct DeleteCommand: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "delete",
            abstract: "Remove a key from a store.",
            discussion: """
                An absent store or key exits 66 and changes nothing. Prints nothing. \
                JSON: {"store": "ui", "key": "theme", "deleted": true}.
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
                let existed = try target.run { () throws -> Bool in
                    let opened = try target.open()
                    guard try opened.contains(key) else { return false }
                    try opened.removeValue(forKey: key)
                    return true
                }
                guard existed else { throw target.noKey(key) }
                console.verbose("deleted key \"\(key)\" from \(target.dataPath)")
                console.answer(json: ["store": .string(store), "key": .string(key), "deleted": true], human: "")
            }
        }
    }
}
