import SystemLayer

/// The one error type of PrefsKV: a stable ``code``, a ``message`` saying what failed on which file or key
/// and why, the ``path`` concerned, and the underlying ``cause``. SecureVault's `VaultError` has the same shape.
///
/// Messages name keys and files, never values. "Not found" is not an error: getters return `nil`.
///
/// ```swift
/// do {
///     try store.set("dark", forKey: "theme")
/// } catch PrefsError.Code.diskFull {
///     // free some space, then retry
/// } catch let error as PrefsError {
///     print(error.code, error.message, error.path ?? "-", error.cause.map { "\($0)" } ?? "-")
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
            case permissionDenied, changedUnderneath
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
        /// Any other I/O failure; ``PrefsError/cause`` holds the `errno`.
        public static let io = Code(.io)
        /// The disk or quota is full. What was stored before stays readable.
        public static let diskFull = Code(.diskFull)
        /// The file system or the store's file is read-only. What was stored stays readable.
        public static let readOnly = Code(.readOnly)
        /// The process may not open, create or change the file or directory.
        public static let permissionDenied = Code(.permissionDenied)
        /// The store file was changed underneath the handle by something other than PrefsKV (truncated, or
        /// rewritten in place: `cp` or `>` over it, a sync tool): a read found it changed again after the handle
        /// reopened it, or a write found it changed before it was published (nothing was written; the next access
        /// reopens the file); try again. (Restore a store with ``PrefsStore/restore(from:)``, which replaces the
        /// file atomically.)
        public static let changedUnderneath = Code(.changedUnderneath)

        public var description: String { value.rawValue }
    }

    /// The failure underneath.
    ///
    /// ```swift
    /// if case .errno(let value)? = error.cause, value == ENOSPC { showDiskFullHint() }
    /// ```
    public enum Cause: Sendable, CustomStringConvertible {
        /// A system call failed with this `errno`.
        case errno(Int32)
        /// A ``PrefsSealer`` or a JSON coder threw this error.
        case error(any Error)

        /// `errno 28`, or the error's own description.
        public var description: String {
            switch self {
            case .errno(let value): return "errno \(value)"
            case .error(let error): return "\(error)"
            }
        }
    }

    /// What kind of failure this is.
    public let code: Code
    /// What failed, on which file or key, and why. Never contains a value.
    public let message: String
    /// The file or directory concerned, when there is one.
    public let path: String?
    /// The underlying failure, when there is one.
    public let cause: Cause?

    package init(
        _ code: Code, _ message: String, path: String? = nil, errno: Int32? = nil,
        underlying: (any Error)? = nil
    ) {
        self.code = code
        self.message = message
        self.path = path
        self.cause = errno.map { .errno($0) } ?? underlying.map { .error($0) }
    }

    /// `PrefsError.diskFull: <message>`, then the cause in parentheses unless the message already names it.
    public var description: String {
        describeError(type: "PrefsError", code: code.description, message: message, cause: cause?.description)
    }
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

/// Runs a closure given to a standard-library `rethrows` function whose body throws only `PrefsError`, and
/// restores the typed error.
@inline(__always)
func typed<R>(_ body: () throws -> R) throws(PrefsError) -> R {
    do {
        return try body()
    } catch let error as PrefsError {
        throw error
    } catch {
        throw PrefsError(.io, "unexpected error: \(error)", underlying: error)
    }
}
