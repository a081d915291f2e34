import ArgumentParser
import SecureVault

extension VaultGroup {
    /// `vaultctl vault keys [--service NAME]`
    struct KeysCommand: VaultCtlCommand {
        static let configuration = CommandConfiguration(
            commandName: "keys",
            abstract: "List the master keys the key stores keep for vaults, and whether each one's vault is there.",
            discussion: """
                Lists the keys of this library's vaults only: the Secret Service's items of schema \
                dev.securevault.MasterKey (default keyring), the securevault: keys of the session, user and \
                persistent kernel keyrings, and the wrapped key files (<service>.<key id>.vaultkey) in the vault \
                directory. No secret is read, nothing prompts, nothing changes. Each key's vault is looked for in \
                the directory the key records (Secret Service keys made since 0.2.0) and in the vault directory \
                (--dir, --app). STATE is inUse (the vault's file names it), superseded (the vault's file names \
                another key of it: left by a rotation that could not delete it), orphaned (no vault file in the \
                directory it records: the vault was deleted by hand, or moved), unplaced (it records no \
                directory and no vault file in the vault directory names it: its vault is gone, or lives in \
                another directory; try --dir) or unreadable (a file that may be its vault cannot be read). \
                Superseded and orphaned keys can be deleted with `vault forget-key` (an unplaced one with \
                --unplaced). --service NAME lists that vault's keys only. A key store that cannot be listed (a locked \
                keyring, no Secret Service) is named on stderr; the others are listed and the exit is 0.

                JSON: {"searched": ["/home/me/.local/share/securevault"], "keys": [{"service": "app", \
                "keyStore": "secretService", "location": "/org/freedesktop/secrets/collection/login/12", \
                "vaultId": "<32 hex digits>", "keyId": "<16 hex digits>", "directory": "/home/me/...", \
                "state": "orphaned", "detail": "..."}], "unlisted": [{"keyStore": "secretService", "error": \
                {"code": "locked", "message": "..."}}]}; location is null for a kernel key, vaultId null for a \
                wrapped key file (its name holds the key id only), directory null when the key records none.
                """)

        @OptionGroup var options: GlobalOptions

        @Option(help: ArgumentHelp("List this vault's keys only.", valueName: "name"))
        var service: String?

        func answer(console: Console) throws -> Answer {
            let directory = try options.vaultDirectory()
            let found = Vault.storedKeys(searching: [directory])
            let keys = found.keys.filter { service == nil || $0.service == service }
            let rows = keys.map { key in
                [key.service, key.place.kind, key.keyID, key.use.name, key.use.detail]
            }
            let warning = found.unlisted.map { "warning: \($0.store): not listed: \($0.error.message)" }
            let human =
                keys.isEmpty
                ? "no vault master keys found\(service.map { " for vault \"\($0)\"" } ?? "")"
                : table(["SERVICE", "KEY STORE", "KEY ID", "STATE", "DETAIL"], rows)
            return Answer(
                json: Report(
                    searched: [directory], keys: keys.map(KeyReport.init),
                    unlisted: found.unlisted.map { UnlistedReport(keyStore: $0.store, error: ErrorReport($0.error)) }),
                human: human, warning: warning.isEmpty ? nil : warning.joined(separator: "\n"))
        }

        /// The `--json` answer.
        struct Report: Encodable {
            var searched: [String]
            var keys: [KeyReport]
            var unlisted: [UnlistedReport]
        }

        struct UnlistedReport: Encodable {
            var keyStore: String
            var error: ErrorReport
        }

        struct ErrorReport: Encodable {
            var code: String
            var message: String

            init(_ error: VaultError) {
                code = error.code.description
                message = error.message
            }
        }
    }

    /// One key of `vault keys` and `vault forget-key`.
    struct KeyReport: Encodable {
        var service: String
        var keyStore: String
        @Nullable var location: String?
        @Nullable var vaultId: String?
        var keyId: String
        @Nullable var directory: String?
        var state: String
        var detail: String

        init(_ key: StoredVaultKey) {
            service = key.service
            keyStore = key.place.kind
            location = key.place.location
            vaultId = key.vaultID
            keyId = key.keyID
            directory = key.directory
            state = key.use.name
            detail = key.use.detail
        }
    }
}
