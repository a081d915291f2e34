import ArgumentParser
import PrefsKV
import SecureVault
import SystemLayer

/// Options every command accepts, before or after the subcommand name.
struct GlobalOptions: ParsableArguments {
    @Option(
        name: .long,
        help: ArgumentHelp(
            "The store directory (default: $VAULTCTL_DIR, else the library's under $XDG_DATA_HOME).",
            valueName: "path"))
    var dir: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "An app's directories, as AppDirectory(<id>) makes them: $XDG_DATA_HOME/<id>/prefs for `prefs` "
                + "commands, $XDG_DATA_HOME/<id>/vault for `vault` commands, both for `doctor` (default: "
                + "$VAULTCTL_APP). Not with --dir.",
            valueName: "id"))
    var app: String?

    @Flag(name: .long, help: "Print one sorted JSON document on stdout, errors included.")
    var json = false

    @Flag(name: .long, help: "Explain what is being done on stderr.")
    var verbose = false

    /// Before a command that may create the directory `--dir` names: `notFound` (exit 66) when neither it nor
    /// its parent exists. vaultctl creates the last level only, so a typo (`--dir /srv/ap/prefs`) is an error,
    /// not a new tree. The default directory is created as the library creates it, parents included.
    func checkDirectoryToCreate() throws {
        guard let dir, !dir.isEmpty, !fileExists(dir) else { return }
        let parent = Sys.parentDirectory(of: dir.count > 1 && dir.hasSuffix("/") ? String(dir.dropLast()) : dir)
        guard fileExists(parent) else {
            throw CLIFailure.notFound(
                "--dir \(shellQuoted(dir)): neither it nor its parent \(parent) exists; vaultctl creates only the last "
                    + "level of --dir (a mistyped path would otherwise become a new tree): create the parent first "
                    + "(mkdir -p \(shellQuoted(parent)))")
        }
    }

    /// `vaultctl [--dir DIR | --app ID] WORDS`, for hints in messages: the options given (the environment
    /// variables stay set where the hint is run).
    func commandLine(_ words: String) -> String {
        "vaultctl" + (dir.map { " --dir \(shellQuoted($0))" } ?? "") + (app.map { " --app \(shellQuoted($0))" } ?? "")
            + " " + words
    }

    /// The directory `--dir` or `--app` (or, without either, `$VAULTCTL_DIR` or `$VAULTCTL_APP`) names, nil for the
    /// library's default; `app` picks the app's `prefs` or `vault` directory. Both named at one level is `usage`.
    private func chosen(_ app: (AppDirectory) -> String) throws -> String? {
        if dir != nil && self.app != nil { throw CLIFailure.usage("--dir and --app name two directories: give one") }
        if let dir { return dir }
        if let id = self.app { return try appDirectory(id, option: "--app").map(app) }
        let environmentDir = Sys.environment("VAULTCTL_DIR")
        let environmentApp = Sys.environment("VAULTCTL_APP")
        if environmentDir != nil && environmentApp != nil {
            throw CLIFailure.usage("VAULTCTL_DIR and VAULTCTL_APP name two directories: unset one")
        }
        if let environmentDir { return environmentDir }
        if let id = environmentApp { return try appDirectory(id, option: "VAULTCTL_APP").map(app) }
        return nil
    }

    private func appDirectory(_ id: String, option: String) throws -> AppDirectory? {
        do {
            return try AppDirectory(id)
        } catch let error as PrefsError {
            throw CLIFailure(error, message: "\(option) \(shellQuoted(id)): \(error.message)")
        }
    }

    /// The store directory of a `prefs` command.
    func prefsDirectory() throws -> String { try chosen(\.preferences) ?? PrefsStore.defaultDirectory }

    /// The vault directory of a `vault` command.
    func vaultDirectory() throws -> String { try chosen(\.vaults) ?? Vault.defaultDirectory }

    /// The directories `doctor` checks: (prefs, vault), nil for the libraries' defaults.
    func doctorDirectories() throws -> (prefs: String?, vault: String?) {
        (try chosen(\.preferences), try chosen(\.vaults))
    }
}
