import ArgumentParser
import FoundationEssentials
import SecureVault

extension VaultGroup {
    /// `vaultctl vault set --service NAME KEY [--expires-in SECONDS] < value`
    struct SetCommand: VaultCommand, KeyCommand {
        static let configuration = CommandConfiguration(
            commandName: "set",
            abstract: "Store the value read from stdin under a key, creating the vault if it has no file yet.",
            discussion: """
                The value is all of standard input, with one trailing newline (LF) removed, so that \
                `printf '%s\\n' "$TOKEN" | vaultctl vault set --service app session` stores exactly $TOKEN; it \
                must be UTF-8 text of at most 64 KiB. An empty value (an unset variable: `printf '%s' "$UNSET"`) is \
                refused (exit 64, code invalidValue) and nothing is stored, unless --allow-empty says it is meant. \
                There is no value argument: a value in the command line would be visible to every user in the \
                process list, so any extra word is refused (exit 64, not echoed) and nothing is stored. On a \
                terminal the value is not echoed.

                With --expires-in SECONDS the value is stored as a session token that expires that many \
                seconds from now (0: at once; at most 100 years); `list` and `get` show its expiry. Without \
                it, a plain string item. Replacing a value leaves no decryptable copy of the old one in the file.

                Prints nothing. JSON: what the vault now holds, as `vault get` (without --reveal) shows it: \
                {"service": "app", "key": "session", "kind": "sessionToken", "size": 24, \
                "createdAt": 1700000000000, "updatedAt": 1700000000000, "expiresAt": 1700003600000, \
                "expired": false}.
                """)

        @OptionGroup var options: GlobalOptions
        @OptionGroup var selection: VaultOptions

        @Argument(help: "The item's name.")
        var key: String

        // Unconditional: `--expires-in -5` is a value to refuse for what it is, not a missing one.
        @Option(
            name: .customLong("expires-in"), parsing: .unconditional,
            help: ArgumentHelp(
                "Store a session token that expires after this many seconds.", valueName: "seconds"))
        var expiresIn: Int64?

        @Flag(name: .customLong("allow-empty"), help: "Store an empty value instead of refusing it.")
        var allowEmpty = false

        /// 100 years, in seconds: far enough for any token, near enough for milliseconds to fit in 64 bits.
        static let maximumLifetime: Int64 = 100 * 365 * 86_400

        // Every word the options do not claim: refused, so that a value typed as an argument is never stored.
        @Argument(parsing: .allUnrecognized, help: .hidden)
        var unexpected: [String] = []

        func checkArguments() throws {
            guard unexpected.isEmpty else {
                throw CLIFailure.usage(
                    "vault set takes the value on stdin, never as an argument: refused "
                        + "\(plural(unexpected.count, "extra argument")) (not shown), nothing was stored; "
                        + "e.g. `printf '%s' \"$VALUE\" | "
                        + options.commandLine("vault set --service \(shellQuoted(selection.service)) \(shellQuoted(key))")
                        + "`")
            }
            if let expiresIn, !(0...Self.maximumLifetime).contains(expiresIn) {
                throw CLIFailure.usage(
                    "--expires-in must be from 0 to \(Self.maximumLifetime) seconds (100 years), not \(expiresIn)")
            }
        }

        func answer(vault target: VaultTarget, console: Console) throws -> Answer {
            try target.options.checkDirectoryToCreate()
            var bytes = try readSecretFromStandardInput(
                limit: Vault.maximumValueSize, what: "the value of \"\(key)\"")
            defer { wipe(&bytes) }
            if bytes.last == 0x0A { bytes.removeLast() }
            guard let value = String(validating: bytes, as: UTF8.self) else {
                throw CLIFailure.usage("the value of \"\(key)\" on stdin is not UTF-8 text; nothing was stored")
            }
            do {
                if let expiresIn {
                    try target.vault.setSessionToken(
                        value, expiresAt: Date(timeIntervalSinceNow: Double(expiresIn)), for: key,
                        allowEmpty: allowEmpty)
                } else {
                    try target.vault.set(value, for: key, allowEmpty: allowEmpty)
                }
            } catch VaultError.Code.invalidValue {
                throw CLIFailure(
                    code: "invalidValue",
                    message: "the value of \"\(key)\" on stdin is empty (an unset variable?); nothing was stored; "
                        + "pass --allow-empty to store an empty value", exitCode: ExitStatus.usage)
            }
            // The answer is what the vault now holds, read back (times exactly as stored).
            guard let stored = try target.vault.item(key) else { throw target.noItem(key) }
            console.verbose("stored \(plural(stored.size, "byte")) under \"\(key)\" in \(target.path)")
            return Answer(json: ItemReport(stored, service: target.service), human: "")
        }
    }
}
