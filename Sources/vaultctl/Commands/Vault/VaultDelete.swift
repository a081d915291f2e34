import ArgumentParser
import SecureVault

extension VaultGroup {
    /// `vaultctl vault delete --service NAME KEY`
    struct DeleteCommand: VaultCommand, KeyCommand {
        static let configuration = CommandConfiguration(
            commandName: "delete",
            abstract: "Remove an item from a vault.",
            discussion: """
                Once this returns, no decryptable copy of the value remains in the vault file. An absent item, \
                or a vault with no file, exits 66 and changes nothing (as `prefs delete` does; the library's \
                remove is idempotent, the command says what it found). Prints nothing. \
                JSON: {"service": "app", "key": "session", "deleted": true}.
                """)

        @OptionGroup var options: GlobalOptions
        @OptionGroup var selection: VaultOptions

        @Argument(help: "The item's name.")
        var key: String

        func answer(vault target: VaultTarget, console: Console) throws -> Answer {
            try target.requireExisting()
            guard try target.vault.contains(key) else { throw target.noItem(key) }
            try target.vault.remove(key)
            console.verbose("deleted item \"\(key)\" from \(target.path)")
            return Answer(json: Report(service: target.service, key: key), human: "")
        }

        /// The `--json` answer.
        struct Report: Encodable {
            var service: String
            var key: String
            var deleted = true
        }
    }
}
