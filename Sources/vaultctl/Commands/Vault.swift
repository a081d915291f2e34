import ArgumentParser

/// `vaultctl vault ...`: SecureVault vaults, named by `--service`, in the `--dir` directory. (Not `Vault`:
/// that is SecureVault's class.)
struct VaultGroup: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "vault",
        abstract: "Inspect, verify, rotate and wipe secret vaults, and read and write their items.",
        discussion: """
            --service NAME selects the vault; it follows the command's name (`vaultctl vault get --service \
            app session`) and every command but `lock` and `keys` needs it. The vault's data file is \
            <dir>/<NAME>.prefs, where <dir> is --dir or the library's default directory \
            ($XDG_DATA_HOME/securevault, or ~/.local/share/securevault). Its master key lives in the Secret \
            Service (the default keyring), under random ids only, unless --key-store says otherwise; inside a \
            Flatpak sandbox, in the Secret portal (--key-store secret-portal), wrapped beside the vault file.

            Secrets are read from stdin only (`vault set`, which takes no value argument) and printed only by \
            `vault get --reveal`. No command prompts unless given --interactive (or it is `unlock`): a locked \
            keyring, or a key the keyring has not approved for this program (KeePassXC), answers 75 at once, a \
            missing Secret Service 69, a master key that is gone while the data remains 78, a damaged or tampered file 65. \
            Only `set` and `init` create a vault: `list`, `get`, `delete`, `verify`, `rotate-key` and `wipe` on a vault \
            with no file exit 66. `wipe` and `forget-key` need --yes. `keys` and `forget-key` find and delete the \
            master keys whose vault is gone (deleted by hand, uninstalled). Human tables go to stdout and diagnostics to stderr; \
            with --json every answer, errors included, is one JSON document on stdout with sorted keys.
            """,
        subcommands: [
            StatusCommand.self, InitCommand.self, ListCommand.self, GetCommand.self, SetCommand.self,
            DeleteCommand.self, VerifyCommand.self, RotateKeyCommand.self, MigrateKeyCommand.self, WipeCommand.self,
            AdoptCommand.self, KeysCommand.self, ForgetKeyCommand.self, LockCommand.self, UnlockCommand.self,
        ]
    )

    @OptionGroup var options: GlobalOptions
}
