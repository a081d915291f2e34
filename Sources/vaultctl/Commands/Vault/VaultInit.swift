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
                (empty) and its master key in the key store --key-store names. With key-file:PATH, a key file \
                that does not exist is created (32 random bytes, mode 0600; the only way vaultctl makes one); \
                with systemd-creds:NAME, a credential that does not exist is sealed by systemd-creds (as root). \
                A vault that already exists is \
                opened instead (which checks its key is there) and left as it is: exit 0 either way, and the \
                output says which. No key store exits 69, a locked keyring 75, a vault whose key is gone 78.

                Prints "created vault app (key store kernelKeyring:user, vault id <32 hex digits>)" or "vault \
                app exists (...)", after "created key file PATH" when it made one. JSON: {"service": "app", \
                "created": true, "keyStore": "...", "vaultId": "<32 hex digits>", "path": ".../app.prefs"}, with \
                "createdKeyFile": "PATH" when it made one.
                """)

        @OptionGroup var options: GlobalOptions
        @OptionGroup var selection: VaultOptions

        func answer(vault target: VaultTarget, console: Console) throws -> Answer {
            try target.options.checkDirectoryToCreate()
            var createdKeyFile: String?
            // Only for a new vault: over an existing one a missing key file is its key gone (keyMissing), never
            // replaced by a fresh one.
            if let path = target.vault.configuration.keyStore.keyFilePath, try target.vault.existingIdentity() == nil,
                try KeyStore.createKeyFile(at: path)
            {
                createdKeyFile = path
            }
            let created = try target.vault.initialize()
            let identity = try target.vault.existingIdentity()
            let status = target.vault.status()
            let facts = "key store \(status.keyStore), vault id \(identity?.vaultIDHex ?? "-")"
            var human = created
                ? "created vault \(target.service) (\(facts))" : "vault \(target.service) exists (\(facts))"
            if let createdKeyFile { human = "created key file \(createdKeyFile)\n" + human }
            return Answer(
                json: Report(
                    service: target.service, created: created, keyStore: status.keyStore,
                    vaultId: identity?.vaultIDHex, path: target.path, createdKeyFile: createdKeyFile),
                human: human)
        }

        /// The `--json` answer.
        struct Report: Encodable {
            var service: String
            var created: Bool
            var keyStore: String
            @Nullable var vaultId: String?
            var path: String
            /// The key file `key-file:PATH` named, when this command created it.
            var createdKeyFile: String?
        }
    }
}
