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
                already gone is no obstacle. Only a key the file proves it owns is deleted: a file copied or \
                renamed from another vault (or a legacy item labelled for another vault) is removed and that \
                key is left, and the output says so. A locked keyring exits 75 with nothing removed. A vault \
                with no file exits 66.

                JSON: {"service": "app", "path": ".../app.prefs", "vaultId": "<32 hex digits>", "wiped": true, \
                "masterKey": "removed"}, vaultId null when the file's header could not be read; masterKey is \
                "removed", "absent" (the keyring held none) or "kept" (then "keptKeyReason" says why).
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
            let wiped = try target.vault.wipe()
            let report = Report(
                service: target.service, path: target.path, vaultId: identity?.vaultIDHex,
                masterKey: wiped.keptKeyReason != nil ? "kept" : wiped.removedKey ? "removed" : "absent",
                keptKeyReason: wiped.keptKeyReason)
            guard let reason = wiped.keptKeyReason else {
                return Answer(
                    json: report,
                    human: "wiped vault \(target.service): master key, items and file \(target.path) removed")
            }
            return Answer(
                json: report,
                human: "wiped vault \(target.service): items and file \(target.path) removed; its master key was left "
                    + "in the keyring: \(reason)")
        }

        /// The `--json` answer.
        struct Report: Encodable {
            var service: String
            var path: String
            @Nullable var vaultId: String?
            var wiped = true
            var masterKey: String
            /// Only when `masterKey` is "kept".
            var keptKeyReason: String?
        }
    }
}
