import PrefsKV
import SystemLayer

/// The one error type of SecureVault: a stable ``code``, a human ``message`` naming what failed and why, the
/// ``path`` of the file or directory concerned, and the underlying ``cause``; the same shape as `PrefsError`.
///
/// Messages name the vault, the item or the file, never a secret value. "Not found" is not an error:
/// lookups return `nil`. A keyring that cannot be asked (locked, absent, hung) is always an error, never `nil`.
///
/// ```swift
/// do {
///     let token = try vault.string(for: "session")
/// } catch VaultError.Code.locked {
///     showUnlockHint()
/// } catch let error as VaultError where error.code == .unavailable {
///     print(error.message)    // e.g. "no Secret Service is reachable on the session bus ..."
/// }
/// ```
public struct VaultError: Error, CustomStringConvertible {
    /// What kind of failure this is. Stable: scripts and apps switch on it (`vaultctl` prints it as
    /// `{"error": {"code": "locked", ...}}`).
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        fileprivate enum Base: String, Sendable {
            case locked, accessNotApproved, unavailable, timeout, keyMissing, wrongKey, corrupted, tampered
            case invalidKey, invalidValue, valueTooLarge, notFound, io, diskFull, permissionDenied, unsupported
            case unsupportedVersion
        }
        fileprivate let base: Base
        fileprivate init(_ base: Base) { self.base = base }

        /// The keyring holding the master key is locked; unlock it and try again. Never reported as "absent".
        public static let locked = Code(.locked)
        /// The keyring is unlocked but its provider has not approved this program's access to the vault's key
        /// (KeePassXC asks per item and per program, and forgets when the program exits). Approve it (a
        /// prompt with ``Vault/Prompting/allowed(deadline:)``, or the provider's settings) and try again.
        public static let accessNotApproved = Code(.accessNotApproved)
        /// No Secret Service can be asked: no session bus, no service on it, or no default collection (the
        /// ``message`` says which, and so does `Vault.status()`).
        public static let unavailable = Code(.unavailable)
        /// The Secret Service did not answer within the configured deadline (a hung or stopped daemon).
        public static let timeout = Code(.timeout)
        /// Vault data exists but its master key is gone from the key store (keyring reset, item deleted).
        public static let keyMissing = Code(.keyMissing)
        /// A master key was found but it is not the one the vault was sealed with.
        public static let wrongKey = Code(.wrongKey)
        /// Stored bytes are damaged.
        public static let corrupted = Code(.corrupted)
        /// Stored bytes verify as damaged or moved on purpose: a ciphertext that does not open under its name.
        public static let tampered = Code(.tampered)
        /// The vault file (or an item in it) was written by a newer release of this library, in a format this one
        /// does not read: an app rolled back to an older release. The data is intact; it was left untouched. Never
        /// treat this as damage (wiping it loses what the newer release stored): ask the user to update the app.
        public static let unsupportedVersion = Code(.unsupportedVersion)
        /// A key name breaks the naming rule (`[A-Za-z0-9._-]`, 1 to 128 characters).
        public static let invalidKey = Code(.invalidKey)
        /// A value the vault refuses as input: an empty token or secret, unless the call allows it explicitly
        /// (`allowEmpty: true`). An empty value is most often an unset variable, not a secret.
        public static let invalidValue = Code(.invalidValue)
        /// A value is larger than the vault accepts (64 KiB).
        public static let valueTooLarge = Code(.valueTooLarge)
        /// A vault, file or item that must exist does not.
        public static let notFound = Code(.notFound)
        /// A read or write of the vault file failed.
        public static let io = Code(.io)
        /// The disk is full.
        public static let diskFull = Code(.diskFull)
        /// Access denied, or a file or directory with insecure permissions or a foreign owner.
        public static let permissionDenied = Code(.permissionDenied)
        /// The request is not supported by this key store or this version.
        public static let unsupported = Code(.unsupported)

        /// The stable name, e.g. `"locked"`.
        public var description: String { base.rawValue }
    }

    /// The failure underneath.
    ///
    /// ```swift
    /// if case .secretService(let domain, let code, _)? = error.cause { log("\(domain) \(code)") }
    /// ```
    public enum Cause: Sendable, CustomStringConvertible {
        /// A system call failed with this `errno`.
        case errno(Int32)
        /// libsecret reported this GError (domain as `g_quark_to_string` gives it, e.g. `g-dbus-error-quark`).
        case secretService(domain: String, code: Int32, message: String)
        /// The storage engine or a coder threw this error.
        case error(any Error)

        /// `errno 13`, `g-dbus-error-quark 2: <message>`, or the error's own description.
        public var description: String {
            switch self {
            case .errno(let value): return "errno \(value)"
            case .secretService(let domain, let code, let message): return "\(domain) \(code): \(message)"
            case .error(let error): return "\(error)"
            }
        }
    }

    /// What kind of failure this is.
    public let code: Code
    /// What failed, on which vault, item or file, and why. Never contains a secret value.
    public let message: String
    /// The vault file, or another file or directory concerned, when there is one.
    public let path: String?
    /// The underlying failure, when there is one.
    public let cause: Cause?
    /// Set when an open store handle went stale under another process (re-keyed or wiped): `Vault.perform`
    /// retries once with a fresh handle. Internal: never part of what an app sees.
    var isStaleHandle = false

    /// An error; only the vault creates these.
    init(code: Code, message: String, path: String? = nil, cause: Cause? = nil) {
        self.code = code
        self.message = message
        self.path = path
        self.cause = cause
    }

    /// `VaultError.locked: <message>`, then the cause in parentheses unless the message already names it.
    public var description: String {
        describeError(type: "VaultError", code: code.description, message: message, cause: cause?.description)
    }
}

extension VaultError.Code {
    /// Lets `catch VaultError.Code.locked { ... }` match a thrown ``VaultError`` by its code.
    ///
    /// ```swift
    /// do { try vault.set(token, for: "session") } catch VaultError.Code.diskFull { freeSomeSpace() }
    /// ```
    public static func ~= (code: VaultError.Code, error: any Error) -> Bool {
        (error as? VaultError)?.code == code
    }
}
