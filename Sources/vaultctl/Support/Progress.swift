import Synchronization
import SystemLayer

/// Progress lines of a long command on stderr, when stderr is a terminal (nothing otherwise, so a script's error
/// output holds only what went wrong): one line a second while the command runs, saying what it is doing and for
/// how long, e.g. `vaultctl: importing into store ui: checked 4096 of 1000000 keys (3 s)`. The first comes after a
/// second, so a short command prints none. `VAULTCTL_PROGRESS_INTERVAL_MS` sets the pace (0: a line at once; the
/// tests' hook).
final class ProgressLines: Sendable {
    private struct State {
        var phase: String
        var done = 0
        var total = 0
        var finished = false
    }

    private let state: Mutex<State>
    private let label: String

    private init(label: String, phase: String) {
        self.label = label
        state = Mutex(State(phase: phase))
    }

    /// Starts the lines of `label` (what the command does), at `phase`; a handle that prints nothing when stderr
    /// is not a terminal.
    static func start(_ label: String, phase: String) -> ProgressLines {
        let lines = ProgressLines(label: label, phase: phase)
        guard Sys.isTerminal(Sys.standardError) else {
            lines.finish()
            return lines
        }
        // 0: a line at once, then one every millisecond (so that a test sees one however fast the command is).
        let interval = Sys.environment("VAULTCTL_PROGRESS_INTERVAL_MS").flatMap(Int.init).map { max($0, 0) } ?? 1000
        let started = Sys.nowMilliseconds()
        if interval == 0 { _ = lines.printLine(started: started) }
        _ = Sys.detachThread {
            repeat { Sys.sleep(milliseconds: max(interval, 1)) } while lines.printLine(started: started)
        }
        return lines
    }

    /// Prints the current line unless finished; false when finished. Written under the lock: once `finish()`
    /// returns, no line follows the command's answer.
    private func printLine(started: Int64) -> Bool {
        state.withLock { state -> Bool in
            guard !state.finished else { return false }
            let counts = state.total > 0 ? ": \(state.done) of \(state.total) keys" : ""
            let seconds = (Sys.nowMilliseconds() - started) / 1000
            writeError("vaultctl: \(label): \(state.phase)\(counts) (\(seconds) s)\n")
            return true
        }
    }

    /// What the command is doing now; the key counts start again.
    func phase(_ text: String) {
        state.withLock {
            $0.phase = text
            $0.done = 0
            $0.total = 0
        }
    }

    /// How far the current phase is.
    func update(done: Int, total: Int) {
        state.withLock {
            $0.done = done
            $0.total = total
        }
    }

    /// No line after this returns.
    func finish() { state.withLock { $0.finished = true } }
}
