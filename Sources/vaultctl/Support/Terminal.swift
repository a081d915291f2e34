// The terminal: the one file of vaultctl that calls the C library, for what only a terminal has (its echo).
// Everything else vaultctl asks of the system goes through SystemLayer's `Sys`.
import Glibc
import SystemLayer

/// Standard input as a terminal, for the hidden prompt of a secret.
enum Terminal {
    /// Runs `body` with standard input's echo turned off when it is a terminal; `onTerminal` runs first, and
    /// `afterTerminal` last, only on a terminal.
    // See: man 3 isatty, man 3 tcsetattr
    static func withoutEcho<R>(onTerminal: () -> Void, afterTerminal: () -> Void, _ body: () -> R) -> R {
        var saved = termios()
        let terminal = isatty(Sys.standardInput) != 0 && tcgetattr(Sys.standardInput, &saved) == 0
        if terminal {
            onTerminal()
            var quiet = saved
            quiet.c_lflag &= ~tcflag_t(ECHO)
            _ = tcsetattr(Sys.standardInput, TCSAFLUSH, &quiet)
        }
        defer {
            if terminal {
                _ = tcsetattr(Sys.standardInput, TCSAFLUSH, &saved)
                afterTerminal()
            }
        }
        return body()
    }
}
