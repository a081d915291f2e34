import ArgumentParser
import Logging
import SystemLayer

/// Where a command's answer goes: stdout for the answer (a table or one JSON document), stderr for diagnostics.
struct Console {
    var options: GlobalOptions

    /// A diagnostic line on stderr, only with `--verbose`.
    func verbose(_ text: @autoclosure () -> String) {
        if options.verbose { writeError("vaultctl: " + text() + "\n") }
    }

    /// A warning on stderr (never with `--json` on stdout, so the document stays the only stdout output).
    func warn(_ text: String) {
        writeError("vaultctl: " + text + "\n")
    }

    /// Reports `error` per the contract and returns the exit code to end with.
    func report(_ error: any Error) -> ExitCode {
        let failure = ReportedFailure(error)
        if options.json {
            writeOutVerbatim(jsonText(failure.report) + "\n")
        } else {
            writeError("vaultctl: \(failure.code): \(failure.message)\n")
        }
        return ExitCode(failure.exitCode)
    }

    /// Runs a command body: errors become the contract's output and exit code.
    func run(_ body: () throws -> Void) throws {
        do {
            try body()
        } catch let exit as ExitCode {
            throw exit
        } catch {
            throw report(error)
        }
    }
}

/// Writes human text to stdout, escaped for a terminal (``TerminalText``).
func writeOut(_ text: String) { write(TerminalText.escaped(text), to: Sys.standardOutput) }
/// Writes human text to stderr, escaped for a terminal (``TerminalText``).
func writeError(_ text: String) { write(TerminalText.escaped(text), to: Sys.standardError) }
/// Writes `text` to stdout unchanged: a JSON document (its encoder escapes control characters itself), a
/// bare value that ``TerminalText/isPlain(_:)`` passed, or vaultctl's own help text.
func writeOutVerbatim(_ text: String) { write(text, to: Sys.standardOutput) }

/// Writes all of `text` to `fd`; a failure (a closed pipe) drops the rest, as a command's output does.
private func write(_ text: String, to fd: Int32) {
    var copy = text
    copy.withUTF8 { _ = Sys.write(fd, UnsafeRawBufferPointer($0)) }
}

/// How human output shows characters a terminal would act on. A key named `ESC ] 0 ; title BEL` would
/// otherwise retitle the terminal of whoever lists the store, and `ESC [ 2 J` would clear it.
///
/// In every human line (stdout and stderr alike; `--json` is untouched):
/// - a C0 control character other than the line feed that ends a line, and DEL, print as `\xHH` (two lowercase
///   hex digits): ESC is `\x1b`, BEL `\x07`, a tab `\x09`, a carriage return `\x0d`;
/// - a C1 control character (U+0080 to U+009F; U+009B is a one-character CSI) prints as `\u{HH}`;
/// - a backslash prints as `\\`, so every backslash in the output starts one of these three forms and the
///   text can be read back unambiguously.
///
/// The bare value of `prefs get` and `vault get --reveal` is the one exception (``Answer/value(json:_:)``):
/// printed as it is when ``isPlain(_:)`` (so `$(vaultctl prefs get ui theme)` is the value, backslashes
/// included), escaped with a warning on stderr otherwise.
enum TerminalText {
    /// `text` with control characters and backslashes escaped; line feeds kept (they end lines).
    ///
    /// ```swift
    /// TerminalText.escaped("\u{1b}]0;x\u{07}a\\b\n")  // "\\x1b]0;x\\x07a\\\\b\n"
    /// ```
    static func escaped(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: { needsEscape($0) || $0 == "\\" }) else { return text }
        var out = ""
        out.reserveCapacity(text.utf8.count + 16)
        for scalar in text.unicodeScalars {
            switch scalar.value {
            case 0x5C: out += "\\\\"
            case _ where !needsEscape(scalar): out.unicodeScalars.append(scalar)
            case 0x80...0x9F: out += "\\u{" + hex(scalar.value) + "}"
            default: out += "\\x" + hex(scalar.value)
            }
        }
        return out
    }

    /// Whether `text` holds no control character but line feeds and tabs: a bare value printed as it is.
    static func isPlain(_ text: String) -> Bool {
        !text.unicodeScalars.contains { needsEscape($0) && $0 != "\t" }
    }

    /// C0 controls but the line feed, DEL, and C1 controls.
    private static func needsEscape(_ scalar: Unicode.Scalar) -> Bool {
        let value = scalar.value
        return (value < 0x20 && value != 0x0A) || (value >= 0x7F && value <= 0x9F)
    }

    private static func hex(_ value: UInt32) -> String {
        let digits = String(value, radix: 16)
        return digits.count == 1 ? "0" + digits : digits
    }
}

/// Renders rows as aligned columns.
func table(_ header: [String], _ rows: [[String]]) -> String {
    let all = [header] + rows
    // Widths as printed: a cell with control characters is wider once escaped.
    let widths = header.indices.map { column in all.map { TerminalText.escaped($0[column]).count }.max() ?? 0 }
    return all.map { row in
        row.enumerated().map { index, cell in
            index == row.count - 1
                ? cell : cell + String(repeating: " ", count: widths[index] - TerminalText.escaped(cell).count)
        }.joined(separator: "  ")
    }.joined(separator: "\n")
}

/// Where the libraries' log lines go in vaultctl (with `--verbose`, or a critical one): stderr, one line each,
/// `vaultctl: <level>: <message>`, escaped like every human line. (swift-log's default handler would write
/// them to stdout as they are, keys and paths with any control characters in them.)
struct ConsoleLogHandler: LogHandler {
    /// The logger's label: the library that speaks (`prefskv`, `securevault`).
    var label: String
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .info

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        writeError("vaultctl: \(event.level): \(label): \(event.message)\n")
    }
}
