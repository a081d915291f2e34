import ArgumentParser
import Logging
import SystemLayer

/// vaultctl: inspect, verify, repair and wipe PrefsKV stores and SecureVault vaults.
@main
struct VaultCtl: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "vaultctl",
        abstract: "Inspect, verify, repair and wipe preference stores and secret vaults.",
        discussion: """
            Secrets are read from stdin only, never from arguments, and printed only with --reveal.
            With --json every answer, errors included, is one JSON document on stdout with sorted keys;
            errors are {"error": {"code": "...", "message": "..."}}.

            \(ExitStatus.table)
            """,
        version: VaultCtlVersion.string,
        subcommands: [Doctor.self, Prefs.self, VaultGroup.self]
    )

    @OptionGroup var options: GlobalOptions

    /// Parses, runs, and maps every failure to the contract: one JSON document with `--json`, an exit code
    /// from the table either way.
    static func main() {
        // Before anything reads a secret: no core file, not dumpable, no backtracer dumping registers
        // (README's vaultctl section, Documentation/ThreatModel.md).
        Sys.disableCoreDumps()
        Sys.disableCrashBacktraces()
        LoggingSystem.bootstrap { label in ConsoleLogHandler(label: label) }
        do {
            var command = try parseAsRoot()
            try command.run()
        } catch let exit as ExitCode {
            Sys.exit(exit.rawValue)
        } catch {
            let code = exitCode(for: error)
            if code == .success {
                // --help and --version: their text on stdout.
                writeOutVerbatim(fullMessage(for: error) + "\n")
                Sys.exit(0)
            }
            // One voice with every other failure: `vaultctl: usage: <what>`, then the command's usage lines;
            // under --json only the message (the usage text is for a person).
            if CommandLine.arguments.contains("--json") {
                let failure = ReportedFailure(
                    code: "usage", message: message(for: error), exitCode: ExitStatus.usage)
                writeOutVerbatim(jsonText(failure.report) + "\n")
            } else {
                var text = fullMessage(for: error)
                if text.hasPrefix("Error: ") { text.removeFirst("Error: ".count) }
                writeError("vaultctl: usage: " + text + "\n")
            }
            // Argument parsing failures are bad usage: 64, as the table says.
            Sys.exit(code.rawValue == 1 ? ExitStatus.usage : code.rawValue)
        }
    }
}

enum VaultCtlVersion {
    static let string = "0.2.0"
}
