/// Where an app goes at launch, decided from its session token (``SessionRouter/route()``).
///
/// ```swift
/// switch router.route() {
/// case .dashboard(let session): showDashboard(session)
/// case .signIn(let reason): showSignIn(notice: reason.isUnavailable ? reason.rawValue : nil)
/// }
/// ```
public enum LaunchRoute: Sendable, Equatable, CustomStringConvertible {
    /// A valid token: straight to the dashboard.
    case dashboard(Session)
    /// No usable token: the sign-in screen, and why.
    case signIn(reason: SignInReason)

    /// The route for a token state: `.valid` goes to the dashboard, every other state to sign-in.
    ///
    /// ```swift
    /// let route = LaunchRoute(vault.sessionToken())
    /// ```
    public init(_ state: SessionTokenState) {
        switch state {
        case .valid(let token, let expiresAt):
            self = .dashboard(Session(token: token, expiresAt: expiresAt, isPersisted: true))
        case .expired: self = .signIn(reason: .expired)
        case .absent: self = .signIn(reason: .absent)
        case .unavailable(let reason): self = .signIn(reason: SignInReason(reason))
        }
    }

    /// The session of a dashboard route, nil for sign-in.
    public var session: Session? {
        if case .dashboard(let session) = self { return session }
        return nil
    }

    /// `dashboard` or `signIn(<reason>)`; never the token.
    public var description: String {
        switch self {
        case .dashboard: return "dashboard"
        case .signIn(let reason): return "signIn(\(reason.rawValue))"
        }
    }
}

/// Why a launch goes to sign-in.
public enum SignInReason: String, Sendable, Equatable, CaseIterable {
    /// No token is stored: a first launch, or after logout.
    case absent
    /// The stored token has expired.
    case expired
    /// The keyring is locked: the token may exist but cannot be read now.
    case locked
    /// No Secret Service (or no session bus, or no default keyring) is reachable.
    case noSecretService
    /// The Secret Service did not answer in time.
    case timeout
    /// The vault has data but its master key is gone (deleted, or the keyring was reset).
    case keyMissing
    /// The key store returned a key that does not open the vault.
    case wrongKey
    /// The vault file, or the token's record, is damaged or was tampered with.
    case corrupted
    /// The vault file could not be read: permissions, I/O.
    case storageFailure

    /// Every reason a token cannot be known has a sign-in reason of the same name.
    init(_ reason: SessionTokenUnavailableReason) {
        guard let same = SignInReason(rawValue: reason.rawValue) else {
            preconditionFailure("SignInReason lacks the case \(reason.rawValue)")
        }
        self = same
    }

    /// True when whether a token exists could not be known (every reason but `absent` and `expired`): the app
    /// may tell the user why they are asked to sign in again.
    public var isUnavailable: Bool { self != .absent && self != .expired }
}
