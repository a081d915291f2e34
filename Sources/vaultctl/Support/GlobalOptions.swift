import ArgumentParser
import SystemLayer

/// Options every command accepts, before or after the subcommand name.
struct GlobalOptions: ParsableArguments {
    @Option(
        name: .long,
        help: ArgumentHelp(
            "The store directory (default: the library's under $XDG_DATA_HOME).",
            valueName: "path"))
    var dir: String?

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

    /// `vaultctl [--dir DIR] WORDS`, for hints in messages.
    func commandLine(_ words: String) -> String {
        "vaultctl" + (dir.map { " --dir \(shellQuoted($0))" } ?? "") + " " + words
    }
}
