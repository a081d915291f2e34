import ArgumentParser

/// A vaultctl command. Only what is specific to it is its own: its arguments, `checkArguments()` and
/// `answer(console:)`. The rest is written once, in `run()`: check the arguments, compute the answer, print it
/// (human text, or one JSON document with `--json`), and turn any error into the contract's output and exit
/// code (`Console.run`, `ReportedFailure`).
///
///     struct LockCommand: VaultCtlCommand {
///         @OptionGroup var options: GlobalOptions
///         func answer(console: Console) throws -> Answer {
///             Answer(json: Report(locked: true), human: "locked the default keyring")
///         }
///     }
protocol VaultCtlCommand: ParsableCommand {
    var options: GlobalOptions { get }

    /// Refuses arguments before anything is resolved, read or opened (`wipe` without `--yes`). Does nothing
    /// by default.
    func checkArguments() throws

    /// Does the command's work and returns what to print.
    func answer(console: Console) throws -> Answer
}

extension VaultCtlCommand {
    func checkArguments() throws {}

    func run() throws {
        let console = Console(options: options)
        let start = ContinuousClock.now
        try console.run {
            try checkArguments()
            try console.print(answer(console: console))
            console.verbose("done in \(milliseconds(ContinuousClock.now - start)) ms")
        }
    }
}

/// A `prefs` command on the store named by its `STORE` argument. The id is checked (an invalid one exits 64),
/// then the key of a `KeyCommand`, before the body runs; a PrefsError from the body is restated to name the
/// store and its file.
protocol StoreCommand: VaultCtlCommand {
    var selection: StoreSelection { get }

    /// Checks what the command names in the store before the body runs: a `KeyCommand`'s key.
    func check(_ target: StoreTarget) throws

    func answer(store target: StoreTarget, console: Console) throws -> Answer
}

extension StoreCommand {
    /// The store id.
    var store: String { selection.store }

    func check(_ target: StoreTarget) throws {}

    func answer(console: Console) throws -> Answer {
        let target = try StoreTarget(id: store, options: options)
        try check(target)
        console.verbose("store \"\(target.id)\": \(target.dataPath)\(target.exists ? "" : " (no file yet)")")
        return try target.run { try answer(store: target, console: console) }
    }
}

/// A `vault` command on the vault named by `--service`. The name is checked (an invalid one exits 64), then the
/// key of a `KeyCommand`, before the body runs; nothing is opened until the body opens it.
protocol VaultCommand: VaultCtlCommand {
    var selection: VaultOptions { get }

    /// Checks what the command names in the vault before the body runs: a `KeyCommand`'s key.
    func check(_ target: VaultTarget) throws

    func answer(vault target: VaultTarget, console: Console) throws -> Answer

    /// Whether the command may need the master key (a passphrase is asked for only then).
    static var needsKey: Bool { get }
}

extension VaultCommand {
    func check(_ target: VaultTarget) throws {}

    /// Every command but `status` may need the master key.
    static var needsKey: Bool { true }

    func answer(console: Console) throws -> Answer {
        let target = try VaultTarget(selection, options: options, needsKey: Self.needsKey)
        try check(target)
        console.verbose(
            "vault \"\(target.service)\": \(target.path)\(target.exists ? "" : " (no file yet)"), key store "
                + target.vault.configuration.keyStore.spelling)
        return try answer(vault: target, console: console)
    }
}

/// A command on one key of a store or item of a vault (`get`, `set`, `delete`): a name that no store or vault
/// accepts is `invalidKey` (exit 64) before anything is read or opened.
protocol KeyCommand {
    var key: String { get }
}

extension StoreCommand where Self: KeyCommand {
    func check(_ target: StoreTarget) throws {
        try target.validate(key: key)
    }
}

extension VaultCommand where Self: KeyCommand {
    func check(_ target: VaultTarget) throws {
        try target.validate(key: key)
    }
}

/// What a command prints when it succeeds: its report as JSON with `--json`, its human text otherwise.
struct Answer {
    fileprivate var json: () -> String
    fileprivate var human: String
    /// A line for stderr after the human text (never with `--json`, whose document says it all).
    fileprivate var warning: String?
    /// The exit code after printing: success, or 65 for a report of damage (`verify`, `vault list`).
    fileprivate var status: Int32
    /// How `human` reaches stdout: escaped for a terminal (every answer but these), a bare value, or a document.
    fileprivate var form = Form.text

    fileprivate enum Form {
        /// Human text: control characters and backslashes escaped (``TerminalText``).
        case text
        /// The bare value of `get`: as it is when plain, else escaped with a warning.
        case value
        /// JSON text already (`prefs export`): as it is.
        case document
    }

    /// `human` is printed followed by a newline unless it ends with one; an empty `human` prints nothing.
    init(json report: some Encodable, human: String, warning: String? = nil, status: Int32 = ExitStatus.success) {
        json = { jsonText(report) }
        self.human = human
        self.warning = warning
        self.status = status
    }

    /// A document that is JSON text already (`prefs export`): printed as it is, with or without `--json`.
    static func document(_ text: String) -> Answer {
        var answer = Answer(json: true, human: text + "\n")
        answer.json = { text }
        answer.form = .document
        return answer
    }

    /// The bare value of `prefs get` or `vault get --reveal`, followed by a newline: printed as it is when it
    /// holds no control character but line feeds and tabs, so that `$(vaultctl prefs get ui theme)` is the
    /// value; otherwise escaped like all human text, with a warning on stderr that says so.
    static func value(json report: some Encodable, _ value: String) -> Answer {
        var answer = Answer(json: report, human: value + "\n")
        answer.form = .value
        return answer
    }
}

extension Console {
    /// Prints `answer`, then throws its exit code unless it is success.
    func print(_ answer: Answer) throws {
        if options.json {
            writeOutVerbatim(answer.json() + "\n")
        } else {
            let human = answer.human.isEmpty || answer.human.hasSuffix("\n") ? answer.human : answer.human + "\n"
            switch answer.form {
            case .document:
                writeOutVerbatim(human)
            case .value where TerminalText.isPlain(human):
                writeOutVerbatim(human)
            case .value:
                writeOut(human)
                warn("the value holds control characters and is shown escaped; --json gives its exact text")
            case .text:
                writeOut(human)
            }
            if let warning = answer.warning { warn(warning) }
        }
        if answer.status != ExitStatus.success { throw ExitCode(answer.status) }
    }
}

/// Whole milliseconds of `duration`, rounded up, for `--verbose`.
func milliseconds(_ duration: Duration) -> Int64 {
    duration.components.seconds * 1000 + (duration.components.attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
}
