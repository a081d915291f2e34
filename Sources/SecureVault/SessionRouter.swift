import Dispatch
public import FoundationEssentials
public import PrefsKV
import Synchronization
import SystemLayer

/// The launch flow of a signed-in app over its vault: where to go at launch, sign-in, logout.
///
/// ```swift
/// let vault = try Vault(service: "com.example.app")
/// let router = SessionRouter(vault: vault, encryptedPreferences: ["account"])
/// switch router.route() {                        // before the first frame
/// case .dashboard(let session): showDashboard(session)
/// case .signIn(let reason): showSignIn(reason)
/// }
/// // after the sign-in screen:
/// do {
///     try router.signIn(token: response.token, expiresAt: response.expiry)
/// } catch {
///     showBanner("\(error)")   // router.session still holds the session, for this run of the app
/// }
/// // later:
/// try router.logout()          // the token, the registered encrypted stores, the vault's key: all gone
/// ```
///
/// The router holds the current ``session`` in memory. Thread-safe; the calls block on the key store for at
/// most the vault's deadline (the `async` twins run that off the cooperative pool).
public final class SessionRouter: Sendable {
    /// The vault holding the session token.
    public let vault: Vault
    /// The token's item name in the vault.
    public let tokenKey: String
    /// The ids of the encrypted preference stores that hold sensitive data: `logout()` removes them.
    public let encryptedPreferences: [String]
    /// The directory of those stores.
    public let preferencesDirectory: String

    private let current = SanitizedMutex<Session?>(nil)
    private let failure = SanitizedMutex<VaultError?>(nil)

    /// A router over `vault`. Touches neither the disk nor the key store.
    ///
    /// ```swift
    /// let router = SessionRouter(vault: vault, encryptedPreferences: ["account"], preferencesDirectory: dir)
    /// ```
    ///
    /// - Parameters:
    ///   - vault: the vault holding the session token.
    ///   - tokenKey: the item the token is kept under. The default is ``Vault/defaultSessionTokenKey``.
    ///   - encryptedPreferences: the encrypted preference stores (``Vault/encryptedPreferences(id:directory:configuration:)``)
    ///     the app keeps sensitive data in. Register every one, even those this run does not open: logout
    ///     removes exactly these.
    ///   - preferencesDirectory: where those stores live. The default is `PrefsStore.defaultDirectory`.
    public init(
        vault: Vault, tokenKey: String = Vault.defaultSessionTokenKey, encryptedPreferences: [String] = [],
        preferencesDirectory: String = PrefsStore.defaultDirectory
    ) {
        self.vault = vault
        self.tokenKey = tokenKey
        self.encryptedPreferences = encryptedPreferences
        self.preferencesDirectory = preferencesDirectory
    }

    /// The session this run of the app holds: from a dashboard route or a sign-in; nil after logout.
    public var session: Session? { current.withLock { $0 } }

    /// Why the last `route()` went to sign-in when the token could not be read, nil otherwise: the error behind
    /// the reason, whose ``VaultError/message`` names the file or key store and what to fix (never a secret), and
    /// whose ``VaultError/path`` is the file concerned. For a notice the user can act on.
    ///
    /// ```swift
    /// if case .signIn(.permissionDenied) = router.route(), let failure = router.lastFailure {
    ///     showNotice("Fix the permissions of \(failure.path ?? "the vault"): \(failure.message)")
    /// }
    /// ```
    public var lastFailure: VaultError? { failure.withLock { $0 } }

    /// Reads the session token and says where the launch goes: ``LaunchRoute/dashboard(_:)`` for a valid
    /// token, ``LaunchRoute/signIn(reason:)`` otherwise. Never throws, and never prompts unless the vault's
    /// `prompting` allows it. When the token cannot be read (a locked keyring, no Secret Service, a missing
    /// key, a damaged vault) the vault logs the cause once at error level; an absent or expired token logs
    /// nothing. Sets ``session``.
    ///
    /// ```swift
    /// let route = router.route()
    /// print(route)      // "dashboard", "signIn(absent)", "signIn(locked)", ...
    /// ```
    public func route() -> LaunchRoute {
        let (state, error) = vault.sessionTokenAndFailure(for: tokenKey)
        let route = LaunchRoute(state)
        current.withLock { $0 = route.session }
        failure.withLock { $0 = error }
        return route
    }

    /// Starts a session: keeps it in memory (``session``), then saves the token and its expiry in the vault,
    /// durably. Returns the saved session.
    ///
    /// When saving fails (a locked keyring, no Secret Service, a full disk...) this throws a ``VaultError``
    /// whose message says that the session was not saved; ``session`` still holds it (with `isPersisted`
    /// false), so the app can carry on until it quits, and the next launch asks to sign in again.
    ///
    /// An empty token is no session: it throws ``VaultError/Code/invalidValue`` and changes nothing (neither
    /// ``session`` nor the vault).
    ///
    /// ```swift
    /// try router.signIn(token: "eyJhbGciOi...", expiresAt: Date(timeIntervalSinceNow: 3600))
    /// ```
    @discardableResult
    public func signIn(token: String, expiresAt: Date?) throws -> Session {
        guard !token.isEmpty else {
            let error = VaultError(
                code: .invalidValue,
                message: "signing in to vault '\(vault.service)': the session token is empty; nothing was signed "
                    + "in or saved")
            vault.logger.error("\(error.description)")
            throw error
        }
        var session = Session(token: token, expiresAt: expiresAt, isPersisted: false)
        current.withLock { $0 = session }
        do {
            try vault.setSessionToken(token, expiresAt: expiresAt, for: tokenKey)
        } catch {
            let cause = VaultError.wrapping(error, vault: vault.service)
            throw VaultError(
                code: cause.code,
                message: "signed in, but the session could not be saved in vault '\(vault.service)', so it lasts "
                    + "until the app quits: \(cause.message)", path: cause.path, cause: cause.cause)
        }
        session.isPersisted = true
        current.withLock { $0 = session }
        return session
    }

    /// Opens one of the registered encrypted preference stores (see ``encryptedPreferences``), which
    /// `logout()` removes. Opening an unregistered id is a programmer error and traps.
    ///
    /// ```swift
    /// let account = try router.openEncryptedPreferences(id: "account")
    /// try account.set("alice@example.com", forKey: "email")
    /// ```
    public func openEncryptedPreferences(
        id: String, configuration: PrefsStore.Configuration = PrefsStore.Configuration()
    ) throws -> PrefsStore {
        precondition(
            encryptedPreferences.contains(id),
            "SessionRouter: register '\(id)' in SessionRouter(encryptedPreferences:) so that logout removes it")
        return try vault.encryptedPreferences(id: id, directory: preferencesDirectory, configuration: configuration)
    }

    /// Ends the session and removes every sensitive item: the registered encrypted preference stores (their
    /// files and keys), then the whole vault (`Vault.wipe()`: the master key, so nothing left anywhere can be
    /// decrypted, and the vault file with the token). Plain preferences (theme, sidebar...) are not touched.
    ///
    /// The in-memory session is gone whatever happens. When the key store cannot be reached (a locked keyring),
    /// the files are removed all the same, so the token does not survive the logout, and the error says what
    /// was left (the master key in the keyring, which then opens nothing). Handles on the removed stores must
    /// not be used afterwards.
    ///
    /// ```swift
    /// try router.logout()
    /// ```
    public func logout() throws {
        current.withLock { $0 = nil }
        var failures: [VaultError] = []
        for id in encryptedPreferences {
            do {
                try vault.removeEncryptedPreferences(id: id, directory: preferencesDirectory)
            } catch {
                failures.append(VaultError.wrapping(error, vault: vault.service))
                _ = try? PrefsStore.destroy(id: id, directory: preferencesDirectory, evenIfOpen: true)
            }
        }
        do {
            try vault.wipe()
        } catch {
            failures.append(VaultError.wrapping(error, vault: vault.service))
            _ = try? PrefsStore.destroy(id: vault.service, directory: vault.storeDirectory, evenIfOpen: true)
        }
        guard let first = failures.first else { return }
        throw VaultError(
            code: first.code,
            message: "logged out and removed the session's files, but \(failures.count) step(s) failed; the first: "
                + first.message, path: first.path, cause: first.cause)
    }
}

extension SessionRouter {
    /// Async twin of `route()`: the blocking work runs off the cooperative thread pool.
    ///
    /// ```swift
    /// let route = await router.route()
    /// ```
    public func route() async -> LaunchRoute {
        await withCheckedContinuation { continuation in
            blockingQueue.async { continuation.resume(returning: self.route()) }
        }
    }

    /// Async twin of ``signIn(token:expiresAt:)``.
    ///
    /// ```swift
    /// try await router.signIn(token: token, expiresAt: expiry)
    /// ```
    @discardableResult
    public func signIn(token: String, expiresAt: Date?) async throws -> Session {
        try await vault.offloaded { try self.signIn(token: token, expiresAt: expiresAt) }
    }

    /// Async twin of `logout()`.
    public func logout() async throws {
        try await vault.offloaded { try self.logout() }
    }
}
