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
    static func withoutEcho<R>(
        on descriptor: Int32 = Sys.standardInput, onTerminal: () -> Void, afterTerminal: () -> Void, _ body: () -> R
    ) -> R {
        let saved = savedSettings
        promptDescriptor.pointee = descriptor  // before any handler is installed: the handler reads it
        let terminal = isatty(descriptor) != 0 && tcgetattr(descriptor, saved) == 0
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
            _ = tcsetattr(descriptor, TCSAFLUSH, &quiet)
        }
        defer {
            if terminal {
                _ = tcsetattr(descriptor, TCSAFLUSH, saved)
                for (signal, old) in zip(endingSignals, previous) {
                    var old = old
                    _ = sigaction(signal, &old, nil)
                }
                afterTerminal()
            }
        }
        return body()
    }

    /// Asks for a passphrase on the controlling terminal (/dev/tty, not standard input, which may carry a value),
    /// with echo off: the bytes typed before Enter, or nil when the process has no terminal.
    static func readPassphrase(prompt: String) -> [UInt8]? {
        let tty = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard tty >= 0 else { return nil }
        defer { close(tty) }
        var text = prompt
        text.withUTF8 { _ = write(tty, $0.baseAddress, $0.count) }
        return withoutEcho(on: tty, onTerminal: {}, afterTerminal: { _ = write(tty, "\n", 1) }) {
            var bytes: [UInt8] = []
            var byte: UInt8 = 0
            while bytes.count < 4096, read(tty, &byte, 1) == 1, byte != 0x0A { bytes.append(byte) }
            return bytes
        }
    }

    /// The descriptor whose echo a prompt turned off, where the signal handler finds it.
    nonisolated(unsafe) fileprivate static let promptDescriptor: UnsafeMutablePointer<Int32> = {
        let descriptor = UnsafeMutablePointer<Int32>.allocate(capacity: 1)
        descriptor.initialize(to: 0)
        return descriptor
    }()

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
    _ = tcsetattr(Terminal.promptDescriptor.pointee, TCSAFLUSH, Terminal.savedSettings)
    var newline: UInt8 = 0x0A
    _ = write(2, &newline, 1)
    _ = raise(signal)
}
