import ArgumentParser

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

    /// `vaultctl [--dir DIR] WORDS`, for hints in messages.
    func commandLine(_ words: String) -> String {
        "vaultctl" + (dir.map { " --dir \(shellQuoted($0))" } ?? "") + " " + words
    }
}
