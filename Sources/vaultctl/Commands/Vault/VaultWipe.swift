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
                key is left, and the output says so. A locked keyring, or a key whose access the keyring has \
                not approved for this program (KeePassXC), exits 75 with nothing removed (--interactive lets it \
                ask). The key is overwritten with random bytes before it is deleted, and a fresh search checks \
                that it is gone. A delete the keyring asks to confirm (KeePassXC with its Recycle Bin off) and \
                nobody confirms within the deadline does not stop the wipe: the file is removed, the key is \
                reported "kept" with the reason, and the next wipe or rotate-key of the service retries (a wipe \
                of a service whose file is gone does only that). Exit 0 in both cases; the output names a key that was \
                kept and why, and a warning on stderr says when the keyring may keep a copy of the deleted key \
                (KeePassXC's Recycle Bin and entry History). A vault with no file and nothing to retry exits 66.

                JSON: {"service": "app", "path": ".../app.prefs", "vaultId": "<32 hex digits>", "wiped": true, \
                "masterKey": "removed", "remainingCopy": null}, vaultId null when the file's header could not \
                be read; masterKey is "removed", "absent" (the keyring held none) or "kept" (then \
                "keptKeyReason" says why); remainingCopy says what the keyring may keep of a removed key and \
                how to purge it.
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
            try target.requireExisting(orPendingDeletes: true)
            // For the answer only: a header that cannot be read does not stop the wipe.
            let identity = try? target.vault.existingIdentity()
            let wiped = try target.vault.wipe()
            let report = Report(
                service: target.service, path: target.path, vaultId: identity?.vaultIDHex,
                masterKey: wiped.keptKeyReason != nil ? "kept" : wiped.removedKey ? "removed" : "absent",
                keptKeyReason: wiped.keptKeyReason, remainingCopy: wiped.remainingCopy)
            let copy = wiped.remainingCopy.map { "warning: the master key was deleted, but \($0)" }
            guard let reason = wiped.keptKeyReason else {
                // Says what was removed: a file that named no key (not a vault file, or a passphrase vault's)
                // had no master key to remove.
                let removed = wiped.removedKey ? "master key, items and file" : identity == nil ? "file" : "items and file"
                let note =
                    wiped.removedKey ? "" : identity == nil ? " (it was not a vault file: it named no master key)" : ""
                return Answer(
                    json: report,
                    human: "wiped vault \(target.service): \(removed) \(target.path) removed\(note)",
                    warning: copy)
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
            @Nullable var remainingCopy: String?
        }
    }
}
