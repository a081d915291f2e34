public import Logging
public import Synchronization

/// Collects what a logger is asked to log, for tests that count errors (the app's spec counts exactly one
/// logged error for a locked keyring or a damaged prefs file).
///
/// ```swift
/// let log = LogCapture()
/// configuration.logger = log.logger
/// #expect(log.errors.count == 1)
/// ```
public final class LogCapture: Sendable {
    public let entries = Mutex<[(level: Logger.Level, message: String)]>([])

    public init() {}

    /// A logger that records into this capture, every level included.
    public var logger: Logger {
        Logger(label: "test") { _ in Handler(capture: self) }
    }

    /// The messages logged at error level or above.
    public var errors: [String] { entries.withLock { $0.filter { $0.level >= .error }.map(\.message) } }

    struct Handler: LogHandler {
        let capture: LogCapture
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            capture.entries.withLock { $0.append((event.level, event.message.description)) }
        }
    }
}
