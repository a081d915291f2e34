import ArgumentParser
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
            writeOut(jsonText(failure.report) + "\n")
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

/// Writes `text` to stdout.
func writeOut(_ text: String) { write(text, to: Sys.standardOutput) }
/// Writes `text` to stderr.
func writeError(_ text: String) { write(text, to: Sys.standardError) }

/// Writes all of `text` to `fd`; a failure (a closed pipe) drops the rest, as a command's output does.
private func write(_ text: String, to fd: Int32) {
    var copy = text
    copy.withUTF8 { _ = Sys.write(fd, UnsafeRawBufferPointer($0)) }
}

/// Renders rows as aligned columns.
func table(_ header: [String], _ rows: [[String]]) -> String {
    let all = [header] + rows
    let widths = header.indices.map { column in all.map { $0[column].count }.max() ?? 0 }
    return all.map { row in
        row.enumerated().map { index, cell in
            index == row.count - 1 ? cell : cell + String(repeating: " ", count: widths[index] - cell.count)
        }.joined(separator: "  ")
    }.joined(separator: "\n")
}
