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
                Prints the old and new key ids (random ids, not secrets). The old key is deleted as wipe deletes \
                one; when the keyring does not complete that delete (a confirmation nobody gave) the rotation \
                still succeeds, the old key is reported kept with the reason on stderr, and the next rotate-key \
                or wipe retries it. A vault with no file exits 66.

                JSON: {"service": "app", "vaultId": "<32 hex digits>", "oldKeyId": "<16 hex digits>", \
                "newKeyId": "<16 hex digits>", "oldKey": "removed", "remainingCopy": null}; oldKey is \
                "removed", "absent" (nothing stored: a passphrase vault) or "kept" (then "keptKeyReason" says \
                why).
                """)

        @OptionGroup var options: GlobalOptions
        @OptionGroup var selection: VaultOptions

        func answer(vault target: VaultTarget, console: Console) throws -> Answer {
            try target.requireExisting()
            let old = try target.vault.existingIdentity()
            let rotated = try target.vault.rotateKey()
            let new = try target.vault.existingIdentity()
            var warning = rotated.remainingCopy.map { "warning: the old master key was deleted, but \($0)" }
            if let reason = rotated.keptKeyReason {
                warning = "warning: the old master key was left in the keyring: \(reason)"
            }
            return Answer(
                json: Report(
                    service: target.service, vaultId: new?.vaultIDHex, oldKeyId: old?.keyIDHex,
                    newKeyId: new?.keyIDHex,
                    oldKey: rotated.keptKeyReason != nil ? "kept" : rotated.removedOldKey ? "removed" : "absent",
                    keptKeyReason: rotated.keptKeyReason, remainingCopy: rotated.remainingCopy),
                human: "rotated the master key of vault \(target.service): key id \(old?.keyIDHex ?? "-") -> "
                    + "\(new?.keyIDHex ?? "-")",
                warning: warning)
        }

        /// The `--json` answer.
        struct Report: Encodable {
            var service: String
            @Nullable var vaultId: String?
            @Nullable var oldKeyId: String?
            @Nullable var newKeyId: String?
            var oldKey: String
            /// Only when `oldKey` is "kept".
            var keptKeyReason: String?
            @Nullable var remainingCopy: String?
        }
    }
}
