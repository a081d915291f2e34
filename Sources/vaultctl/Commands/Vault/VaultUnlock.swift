import ArgumentParser
import SecureVault

extension VaultGroup {
    /// `vaultctl vault unlock --service NAME`
    struct UnlockCommand: VaultCommand {
        static let configuration = CommandConfiguration(
            commandName: "unlock",
            abstract: "Let the keyring ask to unlock, and to approve access to the vault's key.",
            discussion: """
                The one command that exists to prompt (every other prompts only with --interactive): calls the \
                Secret Service's Unlock on the default keyring when it is locked, then, when the vault has a \
                file, reads its master key, which a provider that approves access per item (KeePassXC) asks \
                the user to approve. Waits up to 120 s for the answers. An unlocked keyring stays unlocked for \
                later commands; KeePassXC forgets an approval when the process exits, so a later command needs \
                --interactive again (or KeePassXC's "Confirm when passwords are retrieved by clients" off). \
                A prompt declined or impossible to show exits 75 (locked or accessNotApproved), one nobody \
                answered 75 (timeout), no Secret Service 69, a file whose master key is not in the keyring 78.

                Prints "keyring unlocked; the key of vault app is readable" (or "keyring unlocked; vault app \
                has no file yet"). JSON: {"service": "app", "unlocked": true, "keyRead": true}.
                """)

        @OptionGroup var options: GlobalOptions
        @OptionGroup var selection: VaultOptions

        func answer(vault target: VaultTarget, console: Console) throws -> Answer {
            let spelling = target.vault.configuration.keyStore.spelling
            guard spelling == "secret-service" else {
                throw CLIFailure.usage(
                    "vault unlock works on the Secret Service; the \(spelling) key store has nothing to unlock")
            }
            let read = try target.vault.unlockKeyStore(deadline: .seconds(120))
            return Answer(
                json: Report(service: target.service, keyRead: read),
                human: read
                    ? "keyring unlocked; the key of vault \(target.service) is readable"
                    : "keyring unlocked; vault \(target.service) has no file yet")
        }

        /// The `--json` answer.
        struct Report: Encodable {
            var service: String
            var unlocked = true
            var keyRead: Bool

            init(service: String, keyRead: Bool) {
                self.service = service
                self.keyRead = keyRead
            }
        }
    }
}
