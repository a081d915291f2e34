import ArgumentParser
import SecureVault

extension VaultGroup {
    /// `vaultctl vault rotate-key --service NAME`
    struct RotateKeyCommand: ParsableCommand {
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

        func run() throws {
            let console = Console(options: options)
            try console.run {
                let target = try VaultTarget(selection, options: options)
                try target.requireExisting()
                let old = try target.vault.existingIdentity()
                try target.vault.rotateKey()
                let new = try target.vault.existingIdentity()
                console.answer(
                    json: [
                        "service": .string(target.service), "vaultId": .optional(new?.vaultIDHex),
                        "oldKeyId": .optional(old?.keyIDHex), "newKeyId": .optional(new?.keyIDHex),
                    ],
                    human: "rotated the master key of vault \(target.service): key id \(old?.keyIDHex ?? "-") -> "
                        + "\(new?.keyIDHex ?? "-")")
            }
        }
    }
}
