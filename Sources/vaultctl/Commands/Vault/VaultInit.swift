import ArgumentParser
import SecureVault

extension VaultGroup {
    /// `vaultctl vault init --service NAME [--key-store STORE]`
    struct InitCommand: VaultCommand {
        static let configuration = CommandConfiguration(
            commandName: "init",
            abstract: "Create a vault now: its file, and its master key in the key store.",
            discussion: """
                Provisions a vault before an app runs (a server, a container image): creates the vault's file \
                (empty) and its master key in the key store --key-store names. A vault that already exists is \
                opened instead (which checks its key is there) and left as it is: exit 0 either way, and the \
                output says which. No key store exits 69, a locked keyring 75, a vault whose key is gone 78.

                Prints "created vault app (key store kernelKeyring:user, vault id <32 hex digits>)" or "vault \
                app exists (...)". JSON: {"service": "app", "created": true, "keyStore": "...", "vaultId": \
                "<32 hex digits>", "path": ".../app.prefs"}.
                """)

        @OptionGroup var options: GlobalOptions
        @OptionGroup var selection: VaultOptions

        func answer(vault target: VaultTarget, console: Console) throws -> Answer {
            let created = try target.vault.initialize()
            let identity = try target.vault.existingIdentity()
            let status = target.vault.status()
            let facts = "key store \(status.keyStore), vault id \(identity?.vaultIDHex ?? "-")"
            return Answer(
                json: Report(
                    service: target.service, created: created, keyStore: status.keyStore,
                    vaultId: identity?.vaultIDHex, path: target.path),
                human: created
                    ? "created vault \(target.service) (\(facts))" : "vault \(target.service) exists (\(facts))")
        }

        /// The `--json` answer.
        struct Report: Encodable {
            var service: String
            var created: Bool
            var keyStore: String
            @Nullable var vaultId: String?
            var path: String
        }
    }
}
