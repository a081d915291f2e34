import ArgumentParser

/// `vaultctl prefs ...`: PrefsKV stores, named by id, in the `--dir` directory.
struct Prefs: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "prefs",
        abstract: "Inspect, verify, repair and edit preference stores.",
        discussion: """
            STORE is a store id: its data file is <dir>/<STORE>.prefs, where <dir> is --dir or the library's \
            default directory ($XDG_DATA_HOME/prefskv, or ~/.local/share/prefskv).

            No command changes a store unless asked to: a damaged store answers "corrupted" (exit 65) and is \
            left byte-identical until `prefs repair` salvages it; reading commands never create a store. \
            `prefs wipe` needs --yes. Human tables go to stdout and diagnostics to stderr; with --json every \
            answer, errors included, is one JSON document on stdout with sorted keys.
            """,
        subcommands: [
            ListCommand.self, GetCommand.self, SetCommand.self, DeleteCommand.self, StatsCommand.self,
            VerifyCommand.self, RepairCommand.self, CompactCommand.self, ExportCommand.self, ImportCommand.self,
            BackupCommand.self, RestoreCommand.self, WipeCommand.self, LsCommand.self, QuarantineCommand.self,
        ]
    )

    @OptionGroup var options: GlobalOptions
}
