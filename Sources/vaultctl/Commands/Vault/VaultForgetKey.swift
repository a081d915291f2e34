import ArgumentParser
import SecureVault

extension VaultGroup {
    /// `vaultctl vault forget-key --service NAME --key-id ID --yes`
    struct ForgetKeyCommand: VaultCtlCommand {
        static let configuration = CommandConfiguration(
            commandName: "forget-key",
            abstract: "Delete a master key whose vault is gone (see `vault keys`).",
            discussion: """
                Needs --yes: without it, exits 64 and touches nothing. Deletes the key ID of vault NAME from \
                every key store `vault keys` finds it in, as `vault wipe` deletes a key: a Secret Service item is \
                overwritten with random bytes, deleted, and searched for again; a kernel key is invalidated; a \
                wrapped key file is overwritten, flushed and removed. Then the key stores are listed again to \
                check it is gone. Whether its vault is there is decided again under the vault's lock (a vault \
                being made or rotated is waited for): a key its vault's file names exits 64 and nothing is \
                deleted (wipe that vault instead); a key whose vault file may be there but cannot be read exits \
                65 (the key may be all that can open it). An unplaced key (one that records no directory: a \
                kernel key, a Secret Service key made before 0.2.0) exits 64 unless --unplaced: its vault may live \
                in a directory not looked in (`vault keys --dir` with the app's vault directory tells). A key no \
                reachable key store keeps exits 66, or 75 when the keyring is locked. \
                A delete the keyring asks to confirm (KeePassXC) needs --interactive, or is reported kept.

                JSON: {"service": "app", "keyId": "<16 hex digits>", "forgotten": [{"key": {...}, "removed": true, \
                "keptKeyReason": null, "remainingCopy": null}]}, one entry per key store that kept it, "key" as \
                `vault keys --json` lists it (its state before the delete); removed false with keptKeyReason when \
                the key store kept it.
                """)

        @OptionGroup var options: GlobalOptions

        @Option(help: ArgumentHelp("The vault's service name, as `vault keys` lists it.", valueName: "name"))
        var service: String

        @Option(name: .customLong("key-id"), help: ArgumentHelp("The key's id (16 hex digits).", valueName: "id"))
        var keyID: String

        @Flag(help: "Confirm that the key is to be deleted.")
        var yes = false

        @Flag(help: "Let the keyring show its prompts (confirming a delete); each waits up to 120 s.")
        var interactive = false

        @Flag(help: "Forget a key that records no directory even though no vault was looked for where it lives.")
        var unplaced = false

        func checkArguments() throws {
            guard keyID.utf8.count == 16, keyID.utf8.allSatisfy({ (48...57).contains($0) || (97...102).contains($0) })
            else {
                throw CLIFailure(
                    code: "invalidKey",
                    message: "--key-id \(shellQuoted(keyID)) is not a key id: 16 lowercase hex digits, as `vault keys` "
                        + "lists them", exitCode: ExitStatus.usage)
            }
            guard yes else {
                throw CLIFailure.usage(
                    "refusing to forget master key \(keyID) of vault \"\(service)\" without --yes: whatever it "
                        + "encrypted can never be read again; nothing was changed")
            }
        }

        func answer(console: Console) throws -> Answer {
            let directory = try options.vaultDirectory()
            let forgotten = try Vault.forgetKey(
                service: service, keyID: keyID, searching: [directory], allowingUnplaced: unplaced,
                prompting: interactive ? .allowed(deadline: .seconds(120)) : .never)
            let lines = forgotten.map { entry in
                let place = entry.key.place.kind + (entry.key.place.location.map { " (\($0))" } ?? "")
                if let reason = entry.keptKeyReason { return "kept in \(place): \(reason)" }
                return entry.removed ? "removed from \(place)" : "already gone from \(place)"
            }
            let copies = forgotten.compactMap(\.remainingCopy).map { "warning: the master key was deleted, but \($0)" }
            return Answer(
                json: Report(service: service, keyId: keyID, forgotten: forgotten.map(ForgottenReport.init)),
                human: "forgot master key \(keyID) of vault \(service): " + lines.joined(separator: "; "),
                warning: copies.isEmpty ? nil : copies.joined(separator: "\n"))
        }

        /// The `--json` answer.
        struct Report: Encodable {
            var service: String
            var keyId: String
            var forgotten: [ForgottenReport]
        }

        /// One key forgotten: the key as `vault keys` listed it, and what became of it.
        struct ForgottenReport: Encodable {
            var key: KeyReport
            var removed: Bool
            @Nullable var keptKeyReason: String?
            @Nullable var remainingCopy: String?

            init(_ entry: ForgottenVaultKey) {
                key = KeyReport(entry.key)
                removed = entry.removed
                keptKeyReason = entry.keptKeyReason
                remainingCopy = entry.remainingCopy
            }
        }
    }
}
