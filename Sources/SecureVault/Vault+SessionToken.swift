public import FoundationEssentials
import SystemLayer

/// What a launch needs to route: the answer of `Vault.sessionToken(for:)`.
///
/// ```swift
/// switch vault.sessionToken() {
/// case .valid(let token, _): showDashboard(token)
/// case .expired, .absent: showSignIn()
/// case .unavailable(let reason): showSignIn(notice: reason)   // locked keyring, no Secret Service, ...
/// }
/// ```
public enum SessionTokenState: Sendable, Equatable {
    /// A token that has not expired.
    case valid(token: String, expiresAt: Date?)
    /// A token whose expiry has passed.
    case expired(expiredAt: Date)
    /// No token is stored.
    case absent
    /// Whether a token exists cannot be known now; the reason says why. Never ``SessionTokenReason/absent`` or
    /// ``SessionTokenReason/expired``: those are states of their own.
    case unavailable(SessionTokenReason)
}

/// Why there is no usable session token: the one answer to that question, for the vault
/// (``SessionTokenState/unavailable(_:)``) and for the launch (``LaunchRoute/signIn(reason:)``).
///
/// ```swift
/// if case .signIn(let reason) = router.route(), reason.isUnavailable {
///     showNotice("Signed out because the keyring said: \(reason)")   // locked, noSecretService, ...
/// }
/// ```
public enum SessionTokenReason: String, Sendable, Equatable, CaseIterable {
    /// No token is stored: a first launch, or after logout.
    case absent
    /// The stored token has expired.
    case expired
    /// The keyring is locked: the token may exist but cannot be read now.
    case locked
    /// The keyring is unlocked, but its provider has not approved this program's access to the vault's key
    /// (KeePassXC, by default); ``VaultError/Code/accessNotApproved`` says how to approve it.
    case accessNotApproved
    /// No Secret Service (or no session bus, or no default keyring) is reachable; `Vault.status()` says which.
    case noSecretService
    /// The vault's key store, another than the Secret Service, cannot be used here: no session keyring, key
    /// system calls blocked, no `systemd-creds` or no access to the host key. `vaultctl doctor` says why.
    case keyStoreUnavailable
    /// The Secret Service did not answer in time.
    case timeout
    /// The vault has data but its master key is gone (deleted, or the keyring was reset).
    case keyMissing
    /// The key store returned a key that does not open the vault.
    case wrongKey
    /// The vault file, or the token's record, is damaged or was tampered with.
    case corrupted
    /// The vault file could not be read: I/O, a full disk.
    case storageFailure
    /// A file of the vault or of its key store has an owner or mode that is not safe (a key file others may
    /// read, a directory others may write): the vault refuses it. ``SessionRouter/lastFailure`` names the file and
    /// the fix (`chmod go= ...`). Nothing is lost: fix the permissions and launch again.
    case permissionDenied
    /// The vault was written by a newer release of the app (an app rolled back): its data is intact and was left
    /// untouched. Ask the user to update; never wipe it.
    case unsupportedVersion

    /// True when whether a token exists could not be known (every reason but `absent` and `expired`): the app
    /// may tell the user why they are asked to sign in again.
    public var isUnavailable: Bool { self != .absent && self != .expired }

    /// Why a failed token read could not know the answer: every error code has its reason. `unavailable`
    /// names the Secret Service only when it is the vault's key store.
    init(_ error: VaultError, keyStore: KeyStore) {
        switch error.code {
        case .locked: self = .locked
        case .accessNotApproved: self = .accessNotApproved
        case .unavailable:
            if case .secretService = keyStore.storage { self = .noSecretService } else { self = .keyStoreUnavailable }
        case .timeout: self = .timeout
        case .keyMissing: self = .keyMissing
        case .wrongKey: self = .wrongKey
        case .corrupted, .tampered: self = .corrupted
        case .permissionDenied: self = .permissionDenied
        case .unsupportedVersion: self = .unsupportedVersion
        default: self = .storageFailure
        }
    }
}

extension Vault {
    /// The item name session tokens use unless told otherwise.
    public static let defaultSessionTokenKey = "session"

    /// Stores a session token with its expiry, durably (it survives a power cut once this returns).
    ///
    /// An empty token is refused with ``VaultError/Code/invalidValue`` (an unset variable would otherwise be a
    /// valid session at the next launch) unless `allowEmpty` is true.
    ///
    /// ```swift
    /// try vault.setSessionToken(response.token, expiresAt: response.expiry)
    /// ```
    public func setSessionToken(
        _ token: String, expiresAt: Date?, for key: String = Vault.defaultSessionTokenKey, allowEmpty: Bool = false
    )
        throws
    {
        let expiry = expiresAt.map { Int64(($0.timeIntervalSince1970 * 1000).rounded(.down)) } ?? 0
        var copy = token
        try copy.withUTF8 { utf8 in
            try store(
                kind: .sessionToken, payload: UnsafeRawBufferPointer(utf8), for: key, expiresAt: expiry,
                allowEmpty: allowEmpty)
        }
    }

    /// Reads the session token and says what a launch should do with it. Never throws: when the answer cannot
    /// be known it is ``SessionTokenState/unavailable(_:)``, and the cause is logged once at error level.
    ///
    /// ```swift
    /// if case .valid(let token, _) = vault.sessionToken() { resume(with: token) }
    /// ```
    public func sessionToken(for key: String = Vault.defaultSessionTokenKey) -> SessionTokenState {
        sessionTokenAndFailure(for: key).state
    }

    /// ``sessionToken(for:)`` with the error behind an `unavailable` answer (``SessionRouter/lastFailure``).
    func sessionTokenAndFailure(for key: String) -> (state: SessionTokenState, failure: VaultError?) {
        do {
            let now = Sys.nowMilliseconds()
            let state = try read(key, "reading session token '\(key)'") { envelope, payload -> SessionTokenState in
                guard let token = String(validating: payload, as: UTF8.self) else {
                    return .unavailable(.corrupted)
                }
                guard envelope.expiresAt != 0 else { return .valid(token: token, expiresAt: nil) }
                let expiry = Date(timeIntervalSince1970: Double(envelope.expiresAt) / 1000)
                return envelope.expiresAt > now ? .valid(token: token, expiresAt: expiry) : .expired(expiredAt: expiry)
            }
            return (state ?? .absent, nil)
        } catch let error as VaultError {
            return (.unavailable(SessionTokenReason(error, keyStore: configuration.keyStore)), error)
        } catch {
            let wrapped = VaultError.wrapping(error, vault: service)
            return (.unavailable(.storageFailure), wrapped)
        }
    }
}
