import ArgumentParser
import SecureVault

extension VaultGroup {
    /// `vaultctl vault rotate-key --service NAME`
    struct RotateKeyCommand: VaultCommand {
        static let configuration = CommandConfiguration(
            commandName: "rotate-key",
            abstract: "Re-encrypt every item under a new master key, then delete the old key.",
            discussion: """
                Atomic: a new file image is swapped in, so the vault holds either every item under the old key \
                or every item under the new one. Other processes pick the new key up on their next access. \
                Prints the old and new key ids (random ids, not secrets). A vault with no file exits 66.

                JSON: {"service": "app", "vaultId": "<32 hex digits>", "oldKeyId": "<16 hex digits>", \
                "newKeyId": "<16 hex digits>"}.
                """)

        @OptionGroup var options: GlobalOptions
        @OptionGroup var selection: VaultOptions

        func answer(vault target: VaultTarget, console: Console) throws -> Answer {
            try target.requireExisting()
            let old = try target.vault.existingIdentity()
            try target.vault.rotateKey()
            let new = try target.vault.existingIdentity()
            return Answer(
                json: Report(
                    service: target.service, vaultId: new?.vaultIDHex, oldKeyId: old?.keyIDHex,
                    newKeyId: new?.keyIDHex),
                human: "rotated the master key of vault \(target.service): key id \(old?.keyIDHex ?? "-") -> "
                    + "\(new?.keyIDHex ?? "-")")
        }

        /// The `--json` answer.
        struct Report: Encodable {
            var service: String
            @Nullable var vaultId: String?
            @Nullable var oldKeyId: String?
            @Nullable var newKeyId: String?
        }
    }
}
