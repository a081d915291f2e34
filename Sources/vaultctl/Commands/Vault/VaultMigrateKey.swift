import ArgumentParser
import SecureVault

extension VaultGroup {
    /// `vaultctl vault migrate-key --service NAME [--key-store FROM] --to STORE`
    struct MigrateKeyCommand: VaultCommand {
        static let configuration = CommandConfiguration(
            commandName: "migrate-key",
            abstract: "Move a vault to another key store: re-encrypt every item under a new key made there.",
            discussion: """
                Atomic and crash-safe like rotate-key: a new file image is swapped in, so the vault holds every \\
                item under the old key (in --key-store) or every item under the new one (in --to); the old key \\
                is deleted only once the new one is durable, and the vault's journal deletes whichever key a \\
                crash left unused, from its own key store, at the next open with either key store. Afterwards \\
                open the vault with --key-store set to what --to was. With --to passphrase the new passphrase \\
                is typed at the terminal (twice) or read from --to-passphrase-fd N. A vault with no file exits 66.

                Prints "moved the master key of vault app from <old> to <new>: key id <old> -> <new>". JSON: \\
                {"service": "app", "vaultId": "<32 hex digits>", "from": "keyring:user", "to": \\
                "systemd-creds:app", "oldKeyId": "<16 hex digits>", "newKeyId": "<16 hex digits>", "oldKey": \\
                "removed", "remainingCopy": null}; oldKey as for rotate-key.
                """)

        @OptionGroup var options: GlobalOptions
        @OptionGroup var selection: VaultOptions

        @Option(
            name: .customLong("to"),
            help: ArgumentHelp("The key store to move the vault to (the values of --key-store).", valueName: "store"))
        var target: String

        @Option(
            name: .customLong("to-passphrase-fd"),
            help: ArgumentHelp(
                "With --to passphrase: read the new passphrase from this open file descriptor instead of the "
                    + "terminal.", valueName: "n"))
        var targetPassphraseFD: Int32?

        func answer(vault target: VaultTarget, console: Console) throws -> Answer {
            let destination = try VaultOptions.parse(self.target, option: "--to") {
                try newPassphrase(service: target.service)
            }
            try target.requireExisting()
            let old = try target.vault.existingIdentity()
            let moved = try target.vault.migrateKey(to: destination)
            let new = try target.vault.existingIdentity()
            let from = target.vault.configuration.keyStore.spelling
            let to = destination.spelling
            var warning = moved.remainingCopy.map { "warning: the old master key was deleted, but \($0)" }
            if let reason = moved.keptKeyReason {
                warning = "warning: the old master key was left in the old key store: \(reason)"
            }
            return Answer(
                json: Report(
                    service: target.service, vaultId: new?.vaultIDHex, from: from, to: to, oldKeyId: old?.keyIDHex,
                    newKeyId: new?.keyIDHex,
                    oldKey: moved.keptKeyReason != nil ? "kept" : moved.removedOldKey ? "removed" : "absent",
                    keptKeyReason: moved.keptKeyReason, remainingCopy: moved.remainingCopy),
                human: "moved the master key of vault \(target.service) from \(from) to \(to): key id "
                    + "\(old?.keyIDHex ?? "-") -> \(new?.keyIDHex ?? "-")",
                warning: warning)
        }

        /// The new passphrase: from `--to-passphrase-fd`, or typed twice at the terminal.
        private func newPassphrase(service: String) throws -> SecretBytes {
            let first = try VaultOptions.readPassphrase(
                from: targetPassphraseFD, option: "--to-passphrase-fd", prompt: "New passphrase of vault \(service): ")
            guard targetPassphraseFD == nil else { return first }
            let again = try VaultOptions.readPassphrase(
                from: nil, option: "--to-passphrase-fd", prompt: "New passphrase again: ")
            guard first == again else { throw CLIFailure.usage("the two passphrases differ; nothing was done") }
            return first
        }

        /// The `--json` answer.
        struct Report: Encodable {
            var service: String
            @Nullable var vaultId: String?
            var from: String
            var to: String
            @Nullable var oldKeyId: String?
            @Nullable var newKeyId: String?
            var oldKey: String
            /// Only when `oldKey` is "kept".
            var keptKeyReason: String?
            @Nullable var remainingCopy: String?
        }
    }
}
