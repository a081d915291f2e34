public import FoundationEssentials

/// The signed-in session an app holds in memory: the token, its expiry, and whether the vault holds it too.
///
/// Its description never shows the token.
///
/// ```swift
/// if case .dashboard(let session) = router.route() {
///     api.authorize(with: session.token)
/// }
/// ```
public struct Session: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The session token.
    public var token: String
    /// When the token expires; nil for a token without expiry.
    public var expiresAt: Date?
    /// Whether the vault holds the session, so that it survives a restart. False after a sign-in whose save
    /// failed: the session then lasts until the app quits.
    public var isPersisted: Bool

    /// A session.
    ///
    /// ```swift
    /// let session = Session(token: token, expiresAt: expiry, isPersisted: false)
    /// ```
    public init(token: String, expiresAt: Date?, isPersisted: Bool) {
        self.token = token
        self.expiresAt = expiresAt
        self.isPersisted = isPersisted
    }

    /// Whether the token has expired at `date`.
    ///
    /// ```swift
    /// if session.isExpired() { router.route() }
    /// ```
    public func isExpired(at date: Date = Date()) -> Bool {
        expiresAt.map { $0 <= date } ?? false
    }

    public var description: String {
        "Session(token: \(token.utf8.count) bytes, expires: \(expiresAt.map { "\($0)" } ?? "never"), "
            + (isPersisted ? "saved in the vault)" : "in memory only)")
    }

    public var debugDescription: String { description }
}
