import ArgumentParser
import SecureVault

extension VaultGroup {
    /// `vaultctl vault wipe --service NAME --yes`
    struct WipeCommand: VaultCommand {
        static let configuration = CommandConfiguration(
            commandName: "wipe",
            abstract: "Delete a vault: its master key first, then its items and file.",
            discussion: """
                Needs --yes: without it, exits 64 and touches nothing. The master key is deleted from the \
                keyring first, so nothing left anywhere can be decrypted (crypto-shredding); a key that is \
                already gone is no obstacle. A locked keyring exits 75 with nothing removed. A vault with no \
                file exits 66.

                JSON: {"service": "app", "path": ".../app.prefs", "vaultId": "<32 hex digits>", "wiped": true}, \
                vaultId null when the file's header could not be read.
                """)

        @OptionGroup var options: GlobalOptions
        @OptionGroup var selection: VaultOptions

        @Flag(help: "Confirm that the vault is to be deleted.")
        var yes = false

        func checkArguments() throws {
            guard yes else {
                throw CLIFailure.wipeNeedsYes(
                    "vault \"\(selection.service)\"", deleting: "every item, the vault file and its master key")
            }
        }

        func answer(vault target: VaultTarget, console: Console) throws -> Answer {
            try target.requireExisting()
            // For the answer only: a header that cannot be read does not stop the wipe.
            let identity = try? target.vault.existingIdentity()
            try target.vault.wipe()
            return Answer(
                json: Report(service: target.service, path: target.path, vaultId: identity?.vaultIDHex),
                human: "wiped vault \(target.service): master key, items and file \(target.path) removed")
        }

        /// The `--json` answer.
        struct Report: Encodable {
            var service: String
            var path: String
            @Nullable var vaultId: String?
            var wiped = true
        }
    }
}
