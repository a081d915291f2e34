import ArgumentParser
import Logging
import SecureVault
import SystemLayer

/// `--service NAME`: the vault a `vault` command works on. Required: a default name that happened to be wrong
/// would silently create (or wipe) a vault nobody meant.
struct VaultOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "The vault's service name (1 to 128 characters from A-Z a-z 0-9 . _ -).", valueName: "name"))
    var service: String

    @Flag(
        help: ArgumentHelp(
            "Let the keyring show its prompts: unlock a locked keyring, approve this program's access to the "
                + "vault's key (KeePassXC), confirm deleting a key. Each waits up to 120 s. Without it nothing "
                + "ever prompts: a locked keyring exits 75 at once."))
    var interactive = false

    @Option(
        name: .customLong("key-store"),
        help: ArgumentHelp(
            "Where the vault's master key lives: secret-service, passphrase (typed at the terminal "
                + "with echo off, or read from --passphrase-fd), keyring:session, keyring:user or "
                + "keyring:persistent (the kernel's keyrings: gone at reboot), key-file:PATH (a 32-byte key file, "
                + "mode 0600 or 0400), or systemd-creds:NAME[:FILE] (a systemd credential; FILE defaults to "
                + "NAME.cred in the vault's directory), or secret-portal (inside a Flatpak sandbox: the desktop "
                + "keyring's secret for the app alone). Without it: $VAULTCTL_KEY_STORE, else the key store the "
                + "vault's file names (a key file's path, and a credential's name when its directory holds "
                + "several, are not in the file: give them), else secret-portal inside a Flatpak sandbox and "
                + "secret-service elsewhere.",
            valueName: "store"))
    var keyStore: String?

    @Option(
        name: .customLong("passphrase-fd"),
        help: ArgumentHelp(
            "With --key-store passphrase: read the passphrase from this open file descriptor (up to a newline or "
                + "its end) instead of the terminal. Never from arguments or the environment.",
            valueName: "n"))
    var passphraseFD: Int32?

    /// The key store of the vault in `directory`: `--key-store`, else `$VAULTCTL_KEY_STORE`, else the one the
    /// vault's file names, else the Secret Service. A value vaultctl does not know, or a vault whose file names
    /// a key store without the part the file cannot hold (a key file's path), is `usage` (exit 64). A passphrase
    /// is read only when `needsKey` (`status` never derives a key).
    func resolvedKeyStore(directory: String, needsKey: Bool = true) throws -> KeyStore {
        let passphrase = { needsKey ? try readPassphrase() : SecretBytes([]) }
        if let keyStore { return try Self.parse(keyStore, option: "--key-store", passphrase: passphrase) }
        if let spelling = Sys.environment("VAULTCTL_KEY_STORE") {
            return try Self.parse(spelling, option: "VAULTCTL_KEY_STORE", passphrase: passphrase)
        }
        switch Vault.recordedKeyStore(service: service, directory: directory) {
        case nil: return KeyStore.processDefault
        case .secretService?: return .secretService
        case .secretPortal?: return .secretPortal
        case .passphrase?: return .passphrase(try passphrase())
        case .kernelKeyring(let keyring?)?: return .kernelKeyring(keyring)
        case .kernelKeyring(nil)?:
            throw Self.askFor("its kernel keyring", "keyring:user (or keyring:session, keyring:persistent)", service)
        case .keyFile?:
            // `status` shows what it can without the path.
            guard needsKey else { return .keyFile("") }
            throw Self.askFor("the path of its key file", "key-file:PATH", service)
        case .systemdCredential?:
            let credentials = ((try? Sys.directoryEntries(directory).get()) ?? []).filter {
                $0.hasSuffix(".cred") && $0.count > ".cred".count
            }
            guard credentials.count == 1, let only = credentials.first else {
                guard needsKey else { return .systemdCredential(name: "?", file: nil) }
                throw Self.askFor("its credential's name", "systemd-creds:NAME[:FILE]", service)
            }
            return .systemdCredential(name: String(only.dropLast(".cred".count)), file: nil)
        }
    }

    /// `usage`: the vault's file names its key store but not `what`, which `--key-store` must give.
    private static func askFor(_ what: String, _ spelling: String, _ service: String) -> CLIFailure {
        .usage(
            "vault \(shellQuoted(service)) keeps its master key where its file cannot say \(what): give "
                + "--key-store \(spelling) (or set VAULTCTL_KEY_STORE)")
    }

    /// The key store `spelling` names; `passphrase` asks `passphrase` for it. Anything else is `usage`.
    static func parse(_ spelling: String, option: String, passphrase: () throws -> SecretBytes) throws -> KeyStore {
        if spelling == "passphrase" { return .passphrase(try passphrase()) }
        guard let store = KeyStore(spelling: spelling), spelling != "in-memory" else {
            throw CLIFailure.usage(
                "\(option) \(shellQuoted(spelling)) is not a key store: use secret-service, passphrase, "
                    + "keyring:session, keyring:user, keyring:persistent, key-file:PATH, systemd-creds:NAME[:FILE] "
                    + "or secret-portal")
        }
        return store
    }

    /// The passphrase: from `--passphrase-fd`, else typed at the controlling terminal with echo off.
    private func readPassphrase() throws -> SecretBytes {
        try Self.readPassphrase(from: passphraseFD, option: "--passphrase-fd", prompt: "Passphrase of vault \(service): ")
    }

    /// A passphrase from `descriptor` (up to a newline or its end), else typed at the controlling terminal with
    /// echo off after `prompt`. Never from arguments or the environment; never from standard input (it carries
    /// the values of `vault set`).
    static func readPassphrase(from descriptor: Int32?, option: String, prompt: String) throws -> SecretBytes {
        var bytes: [UInt8]
        if let descriptor {
            bytes = try readSecret(from: descriptor, option: option, what: "passphrase")
        } else {
            guard let typed = Terminal.readPassphrase(prompt: prompt) else {
                throw CLIFailure.usage(
                    "a passphrase key store needs the passphrase: run at a terminal, or give \(option) N "
                        + "(never an argument or an environment variable)")
            }
            bytes = typed
        }
        defer { wipe(&bytes) }
        guard !bytes.isEmpty else { throw CLIFailure.usage("the passphrase is empty; nothing was done") }
        return SecretBytes(bytes)
    }

    /// A secret (`what`: "passphrase", "crypt key") read from the descriptor an option (`option N`) names: at most
    /// 4096 bytes, one final newline dropped. Standard input is refused: it carries values.
    static func readSecret(from descriptor: Int32, option: String, what: String) throws -> [UInt8] {
        guard descriptor != Sys.standardInput else {
            throw CLIFailure.usage(
                "\(option) 0: standard input carries values (those of `vault set`, a document); open the \(what) on "
                    + "another descriptor (e.g. \(option) 3 3<\(what.split(separator: " ").joined(separator: "-"))-file)")
        }
        var buffer = [UInt8](repeating: 0, count: 4097)
        let read = buffer.withUnsafeMutableBytes { Sys.read(descriptor, into: $0) }
        guard case .success(let count) = read else {
            throw CLIFailure.usage("\(option) \(descriptor): the descriptor cannot be read (is it open?)")
        }
        guard count <= 4096 else {
            wipe(&buffer)
            throw CLIFailure.usage("\(option) \(descriptor): the \(what) is longer than 4096 bytes")
        }
        var bytes = Array(buffer[0..<count])
        wipe(&buffer)
        if bytes.last == 0x0A { bytes.removeLast() }
        return bytes
    }
}

/// The vault a `vault` command names: its service, directory and data file. Creating it opens nothing.
struct VaultTarget {
    var service: String
    var directory: String
    var vault: Vault
    var options: GlobalOptions

    /// An invalid service name is `invalidKey` (exit 64).
    init(_ selection: VaultOptions, options: GlobalOptions, needsKey: Bool = true) throws {
        service = selection.service
        directory = try options.vaultDirectory()
        self.options = options
        var configuration = Vault.Configuration(directory: directory)
        // The command reports every failure itself; the library's log lines are diagnostics for --verbose.
        configuration.logger.logLevel = options.verbose ? .info : .critical
        if selection.interactive { configuration.prompting = .allowed(deadline: .seconds(120)) }
        configuration.keyStore = try selection.resolvedKeyStore(directory: directory, needsKey: needsKey)
        vault = try Vault(service: service, configuration: configuration)
    }

    /// `<directory>/<service>.prefs`.
    var path: String { vault.path }

    /// Whether the vault's data file exists (a symbolic link counts: the vault then refuses it).
    var exists: Bool { fileExists(path) }

    /// `notFound` (exit 66) unless the vault has a file: only `set` creates a vault.
    ///
    /// - Parameter orPendingDeletes: also accept a vault with no file whose journal holds deletes the key store
    ///   did not complete (`wipe` retries them).
    func requireExisting(orPendingDeletes: Bool = false) throws {
        guard exists || (orPendingDeletes && vault.hasPendingIntents) else {
            throw CLIFailure.notFound("no vault \"\(service)\" in \(directory): \(path) does not exist")
        }
    }

    /// `invalidKey` (exit 64) for a name no vault accepts, before anything is read or opened.
    func validate(key: String) throws {
        try Vault.validate(name: key, what: "key name", as: .itemName)
    }

    /// The `notFound` answer for an item the vault does not hold.
    func noItem(_ key: String) -> CLIFailure {
        CLIFailure.notFound("vault \"\(service)\" (\(path)) has no item \"\(key)\"")
    }

    /// `vaultctl [--dir DIR] vault <command> --service SERVICE`, for hints in messages.
    func command(_ name: String) -> String {
        options.commandLine("vault \(name) --service \(shellQuoted(service))")
    }
}

/// Reads the whole of standard input, at most `limit` bytes plus one trailing newline (a longer input is
/// `valueTooLarge`, exit 64, and is not read to its end). On a terminal the input is not echoed and a hint goes to stderr.
///
/// The caller wipes the returned buffer when done with it.
func readSecretFromStandardInput(limit: Int, what: String) throws -> [UInt8] {
    // One trailing newline is dropped by the caller, so it does not count against the limit.
    let limit = limit + 1
    var bytes = [UInt8](repeating: 0, count: limit + 1)
    let read = Terminal.withoutEcho(
        onTerminal: { writeError("vaultctl: type \(what) (not echoed), then press Enter and Ctrl-D\n") },
        afterTerminal: { writeError("\n") }
    ) { bytes.withUnsafeMutableBytes { Sys.read(Sys.standardInput, into: $0) } }
    let count: Int
    switch read {
    case .success(let read): count = read
    case .failure(let error):
        wipe(&bytes)
        throw CLIFailure(
            code: "io", message: "cannot read standard input: \(error.text)", exitCode: ExitStatus.ioError)
    }
    guard count <= limit else {
        wipe(&bytes)
        throw CLIFailure(
            code: "valueTooLarge",
        message: "\(what) on standard input is longer than the limit of \(limit - 1) bytes (\((limit - 1) / 1024) KiB; "
            + "one trailing newline is not counted)",
            exitCode: ExitStatus.usage)
    }
    let value = Array(bytes[0..<count])
    wipe(&bytes)
    return value
}

/// Overwrites a buffer that held a secret (best effort: the value may have been copied elsewhere on its way).
func wipe(_ bytes: inout [UInt8]) {
    bytes.withUnsafeMutableBytes { Sys.zero($0) }
}
