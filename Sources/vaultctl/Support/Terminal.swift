// The terminal: the one file of vaultctl that calls the C library, for what only a terminal has (its echo).
// Everything else vaultctl asks of the system goes through SystemLayer's `Sys`.
import Glibc
import SystemLayer

/// Standard input as a terminal, for the hidden prompt of a secret.
enum Terminal {
    /// The signals that end a command at a prompt (Ctrl-C, Ctrl-\, `kill`, a closed terminal): while echo is
    /// off, each one first gives the terminal its settings back.
    static let endingSignals: [Int32] = [SIGINT, SIGTERM, SIGHUP, SIGQUIT]

    /// Runs `body` with standard input's echo turned off when it is a terminal; `onTerminal` runs first, and
    /// `afterTerminal` last, only on a terminal.
    ///
    /// While echo is off, SIGINT, SIGTERM, SIGHUP and SIGQUIT restore the saved settings, then end the process
    /// with the signal's default action (as if the handler had never been there: the shell sees 130 for
    /// Ctrl-C), so an interrupted prompt never leaves the terminal without echo. The previous handlers are put
    /// back once echo is on again.
    // See: man 3 isatty, man 3 tcsetattr, man 2 sigaction
    static func withoutEcho<R>(onTerminal: () -> Void, afterTerminal: () -> Void, _ body: () -> R) -> R {
        let saved = savedSettings
        let terminal = isatty(Sys.standardInput) != 0 && tcgetattr(Sys.standardInput, saved) == 0
        var previous: [sigaction] = []
        if terminal {
            onTerminal()
            previous = endingSignals.map { signal in
                var action = sigaction()
                action.__sigaction_handler.sa_handler = restoreAndEnd
                sigemptyset(&action.sa_mask)
                for other in endingSignals { sigaddset(&action.sa_mask, other) }
                // Reset to the default action on entry: the handler's raise() then ends the process.
                action.sa_flags = Int32(truncatingIfNeeded: SA_RESETHAND)
                var old = sigaction()
                _ = sigaction(signal, &action, &old)
                return old
            }
            var quiet = saved.pointee
            quiet.c_lflag &= ~tcflag_t(ECHO)
            _ = tcsetattr(Sys.standardInput, TCSAFLUSH, &quiet)
        }
        defer {
            if terminal {
                _ = tcsetattr(Sys.standardInput, TCSAFLUSH, saved)
                for (signal, old) in zip(endingSignals, previous) {
                    var old = old
                    _ = sigaction(signal, &old, nil)
                }
                afterTerminal()
            }
        }
        return body()
    }

    /// The terminal settings before the prompt, where the signal handler finds them. Allocated once, before any
    /// handler is installed, and only read by the handler: no Swift runtime call happens in it.
    nonisolated(unsafe) fileprivate static let savedSettings: UnsafeMutablePointer<termios> = {
        let settings = UnsafeMutablePointer<termios>.allocate(capacity: 1)
        settings.initialize(to: termios())
        return settings
    }()
}

/// The handler of an ending signal during a hidden prompt: only async-signal-safe calls (tcsetattr, write,
/// raise). SA_RESETHAND has already made the action the default one; the raised signal is blocked until the
/// handler returns and then ends the process.
private let restoreAndEnd: @convention(c) (Int32) -> Void = { signal in
    _ = tcsetattr(0, TCSAFLUSH, Terminal.savedSettings)
    var newline: UInt8 = 0x0A
    _ = write(2, &newline, 1)
    _ = raise(signal)
}
