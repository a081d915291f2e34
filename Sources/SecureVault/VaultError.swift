/// The one error type of SecureVault: a stable ``code``, a human ``message`` naming what failed and why,
/// and the underlying ``cause``.
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
public struct VaultError: Error, Sendable {
    /// What kind of failure this is. Stable: scripts and apps switch on it (`vaultctl` prints it as
    /// `{"error": {"code": "locked", ...}}`).
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        fileprivate enum Base: String, Sendable {
            case locked, unavailable, timeout, keyMissing, wrongKey, corrupted, tampered
            case invalidKey, valueTooLarge, notFound, io, diskFull, permissionDenied, unsupported
        }
        fileprivate let base: Base
        fileprivate init(_ base: Base) { self.base = base }

        /// The keyring holding the master key is locked; unlock it and try again. Never reported as "absent".
        public static let locked = Code(.locked)
        /// No Secret Service can be asked: no session bus, no service on it, or no default collection (the
        /// ``message`` says which, and so does ``Vault/status()``).
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
        /// A key name breaks the naming rule (`[A-Za-z0-9._-]`, 1 to 128 characters).
        public static let invalidKey = Code(.invalidKey)
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

    /// The failure underneath, for diagnostics.
    public enum Cause: Sendable, Equatable, CustomStringConvertible {
        /// A system call failed with this `errno`.
        case errno(Int32)
        /// libsecret reported this GError (domain as `g_quark_to_string` gives it, e.g. `g-dbus-error-quark`).
        case secretService(domain: String, code: Int32, message: String)
        /// The vault's file (no errno: the file's contents were the problem).
        case file(path: String)

        public var description: String {
            switch self {
            case .errno(let value): return "errno \(value)"
            case .secretService(let domain, let code, let message): return "\(domain) \(code): \(message)"
            case .file(let path): return path
            }
        }
    }

    /// What kind of failure this is.
    public var code: Code
    /// What failed, on which vault, item or file, and why. Never contains a secret value.
    public var message: String
    /// The underlying failure, when there is one.
    public var cause: Cause?
    /// Set when an open store handle went stale under another process (re-keyed or wiped): retrying with a
    /// fresh handle gives the real answer.
    var isStaleHandle = false

    /// Creates an error; the vault creates these, apps normally only read them.
    public init(code: Code, message: String, cause: Cause? = nil) {
        self.code = code
        self.message = message
        self.cause = cause
    }
}

extension VaultError: CustomStringConvertible {
    public var description: String {
        var text = "\(code): \(message)"
        if let cause { text += " (\(cause))" }
        return text
    }
}

extension VaultError.Code {
    /// Lets `catch VaultError.Code.locked { ... }` match a thrown ``VaultError`` by its code.
    public static func ~= (code: VaultError.Code, error: any Error) -> Bool {
        (error as? VaultError)?.code == code
    }
}
