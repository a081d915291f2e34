import ArgumentParser
import SecureVault

extension VaultGroup {
    /// `vaultctl vault lock`
    struct LockCommand: VaultCtlCommand {
        static let configuration = CommandConfiguration(
            commandName: "lock",
            abstract: "Lock the default keyring through the Secret Service.",
            discussion: """
                For users leaving a machine and for tests: afterwards every vault whose key is not already in \
                a running process answers "locked" (75) until the keyring is unlocked again (by logging in, \
                the desktop's keyring app, or headless `gnome-keyring-daemon --replace --unlock`). Locking \
                never prompts; locking a locked keyring succeeds. It answers once the keyring reads locked (a \
                service may answer before it has locked); one that still reads unlocked after 10 s exits 75. \
                Needs no --service. No session bus, no Secret Service or no default keyring exits 69.

                Prints "locked the default keyring". JSON (--json, as on every command): {"locked": true}. \
                --verbose explains on stderr.
                """)

        // Hidden from this command's help: it uses no directory, so --dir means nothing here (it is accepted, as
        // on every command); --json and --verbose work as everywhere (the discussion says so).
        @OptionGroup(visibility: .hidden) var options: GlobalOptions

        func answer(console: Console) throws -> Answer {
            let found: Bool
            do throws(SecretServiceFailure) {
                // Longer than a read's deadline: the answer waits for the keyring to read locked (LibSecret.lock).
                found = try LibSecret.lock(deadline: .seconds(10))
            } catch {
                throw VaultError(error, operation: "locking the default keyring")
            }
            guard found else {
                throw CLIFailure(
                    code: "unavailable",
                    message: "the Secret Service has no default keyring to lock; nothing was locked",
                    exitCode: ExitStatus.unavailable)
            }
            return Answer(json: Report(), human: "locked the default keyring")
        }

        /// The `--json` answer.
        struct Report: Encodable {
            var locked = true
        }
    }
}
