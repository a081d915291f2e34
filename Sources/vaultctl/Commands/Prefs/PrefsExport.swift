import ArgumentParser
import PrefsKV

extension Prefs {
    /// `vaultctl prefs export STORE`
    struct ExportCommand: StoreCommand {
        static let configuration = CommandConfiguration(
            commandName: "export",
            abstract: "Print every live entry of a store as a JSON document that `prefs import` restores.",
            discussion: """
                The same document with or without --json (it is JSON either way), keys sorted, so a re-export \
                of an imported store is byte-identical: {"entries": [{"key": "theme", "type": "string", \
                "value": "dark"}, {"expiresAt": 1767225600000, "key": "token", "type": "bytes", "value": "AQID"}], \
                "format": "prefskv-export", "store": "ui", "version": 1}. Values are in clear.
                """)

        @OptionGroup var options: GlobalOptions
        @OptionGroup var selection: StoreSelection

        func answer(store target: StoreTarget, console: Console) throws -> Answer {
            .document(String(decoding: try target.open().exportJSON(), as: UTF8.self))
        }
    }
}
