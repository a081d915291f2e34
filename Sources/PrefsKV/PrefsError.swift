/// The one error type of PrefsKV: a stable ``code``, a ``message`` saying what failed on which file or key
/// and why, the ``path`` concerned, and the underlying cause.
///
/// Messages name keys and files, never values. "Not found" is not an error: getters return `nil`.
///
/// ```swift
/// do {
///     try store.set("dark", forKey: "theme")
/// } catch PrefsError.Code.diskFull {
///     // free some space, then retry
/// } catch let error as PrefsError {
///     print(error.code, error.message)
/// }
/// ```
public struct PrefsError: Error, CustomStringConvertible {
    /// A stable error code. New codes may be added; switch with a `default`.
    ///
    /// ```swift
    /// if error.code == .wrongKey { askForAnotherPassphrase() }
    /// ```
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Value: String {
            case invalidKey, valueTooLarge, invalidInput, typeMismatch, corrupted, tampered, wrongKey, encrypted
            case notEncrypted, unsupportedVersion, notAStore, busy, notFound, io, diskFull, readOnly
            case permissionDenied
        }
        private let value: Value
        private init(_ value: Value) { self.value = value }

        /// A key is empty or longer than 16 KiB of UTF-8, or a store id is not `[A-Za-z0-9._-]{1,128}`.
        public static let invalidKey = Code(.invalidKey)
        /// A value is larger than 64 MiB.
        public static let valueTooLarge = Code(.valueTooLarge)
        /// A document given to `importJSON` or a backup given to `restore` is not acceptable.
        public static let invalidInput = Code(.invalidInput)
        /// The key holds a value of another type than the one asked for.
        public static let typeMismatch = Code(.typeMismatch)
        /// The file is damaged: its header cannot be read, or recovery policy `.fail` met damage.
        public static let corrupted = Code(.corrupted)
        /// A sealed record's checksum verifies but the sealer refuses to open it: it was altered or moved.
        public static let tampered = Code(.tampered)
        /// The sealer's key check differs from the one stored in the file: another key sealed this store.
        public static let wrongKey = Code(.wrongKey)
        /// The store is sealed and was opened without a sealer.
        public static let encrypted = Code(.encrypted)
        /// The store is not sealed and was opened with a sealer.
        public static let notEncrypted = Code(.notEncrypted)
        /// The file was written by a newer format version than this library reads.
        public static let unsupportedVersion = Code(.unsupportedVersion)
        /// The file is not a PrefsKV store (wrong magic or too short to hold a header).
        public static let notAStore = Code(.notAStore)
        /// Another handle holds the store exclusively (`Configuration.Sharing.singleProcess`).
        public static let busy = Code(.busy)
        /// A file that must exist does not (a backup to restore, a store to verify).
        public static let notFound = Code(.notFound)
        /// Any other I/O failure; ``PrefsError/underlyingErrno`` says which.
        public static let io = Code(.io)
        /// The disk or quota is full. What was stored before stays readable.
        public static let diskFull = Code(.diskFull)
        /// The file system or the store's file is read-only. What was stored stays readable.
        public static let readOnly = Code(.readOnly)
        /// The process may not open, create or change the file or directory.
        public static let permissionDenied = Code(.permissionDenied)

        public var description: String { value.rawValue }
    }

    /// What kind of failure this is.
    public let code: Code
    /// What failed, on which file or key, and why. Never contains a value.
    public let message: String
    /// The file or directory concerned, when there is one.
    public let path: String?
    /// The `errno` of the failed system call, when one failed.
    public let underlyingErrno: Int32?
    /// The error thrown by a ``PrefsSealer`` or a JSON coder, when one did.
    public let underlyingError: (any Error)?

    init(
        _ code: Code, _ message: String, path: String? = nil, errno: Int32? = nil,
        underlying: (any Error)? = nil
    ) {
        self.code = code
        self.message = message
        self.path = path
        self.underlyingErrno = errno
        self.underlyingError = underlying
    }

    public var description: String { "PrefsError.\(code): \(message)" }
}

extension PrefsError.Code {
    /// Lets `catch PrefsError.Code.diskFull { ... }` match a ``PrefsError`` with that code.
    ///
    /// ```swift
    /// do { try store.sync() } catch PrefsError.Code.io { retryLater() }
    /// ```
    public static func ~= (code: PrefsError.Code, error: any Error) -> Bool {
        (error as? PrefsError)?.code == code
    }
}
