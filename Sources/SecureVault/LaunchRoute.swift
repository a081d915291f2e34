/// Where an app goes at launch, decided from its session token (`SessionRouter.route()`).
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
    case signIn(reason: SessionTokenReason)

    /// The route for a token state: `.valid` goes to the dashboard, every other state to sign-in, with the same
    /// reason.
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
        case .unavailable(let reason): self = .signIn(reason: reason)
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
