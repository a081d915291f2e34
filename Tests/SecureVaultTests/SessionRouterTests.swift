import ExampleAppState
import Foundation
import Logging
import Testing
import TestSupport

@testable import PrefsKV
@testable import SecureVault

/// The launch flow over a vault with in-memory keys: routing, sign-in and its failure, logout. The same flow
/// against the real keyring, each launch a new process, is in SecretServiceTests/LaunchTests.swift.
@Suite struct SessionRouterTests {
    static let expiry = Date(timeIntervalSince1970: 4_102_444_800)  // 2100-01-01, whole milliseconds

    @Test(arguments: [
        (SessionTokenState.valid(token: "t", expiresAt: expiry), "dashboard"),
        (.valid(token: "t", expiresAt: nil), "dashboard"),
        (.expired(expiredAt: Date(timeIntervalSince1970: 0)), "signIn(expired)"),
        (.absent, "signIn(absent)"),
        (.unavailable(.locked), "signIn(locked)"),
        (.unavailable(.noSecretService), "signIn(noSecretService)"),
        (.unavailable(.timeout), "signIn(timeout)"),
        (.unavailable(.keyMissing), "signIn(keyMissing)"),
        (.unavailable(.wrongKey), "signIn(wrongKey)"),
        (.unavailable(.corrupted), "signIn(corrupted)"),
        (.unavailable(.storageFailure), "signIn(storageFailure)"),
    ])
    func everyTokenStateHasItsRoute(state: SessionTokenState, route: String) {
        let launch = LaunchRoute(state)
        #expect(launch.description == route)
        if case .valid(let token, let expiresAt) = state {
            #expect(launch == .dashboard(Session(token: token, expiresAt: expiresAt, isPersisted: true)))
        } else {
            #expect(launch.session == nil)
        }
    }

    @Test func firstLaunchGoesToSignInAbsentAndCreatesNothing() throws {
        let dir = try VaultDirectory()
        let log = LogCapture()
        let router = SessionRouter(vault: try dir.vault(logger: log.logger))
        #expect(router.route() == .signIn(reason: .absent))
        #expect(router.session == nil)
        #expect(!FileManager.default.fileExists(atPath: dir.path))
        #expect(log.errors.isEmpty)
    }

    @Test func signInSavesTheTokenAndTheNextLaunchGoesToTheDashboard() throws {
        let dir = try VaultDirectory()
        let router = SessionRouter(vault: try dir.vault())
        let session = try router.signIn(token: "tok-123", expiresAt: Self.expiry)
        #expect(session == Session(token: "tok-123", expiresAt: Self.expiry, isPersisted: true))
        #expect(router.session == session)

        let relaunch = SessionRouter(vault: try dir.vault())
        #expect(relaunch.route() == .dashboard(session))
        #expect(relaunch.session == session)
    }

    @Test func anExpiredTokenGoesToSignInExpired() throws {
        let dir = try VaultDirectory()
        try SessionRouter(vault: try dir.vault()).signIn(token: "old", expiresAt: Date(timeIntervalSinceNow: -1))
        let relaunch = SessionRouter(vault: try dir.vault())
        #expect(relaunch.route() == .signIn(reason: .expired))
        #expect(relaunch.session == nil)
    }

    @Test func aFailedSaveIsAClearErrorAndTheSessionStaysInMemory() throws {
        let dir = try VaultDirectory()
        // A vault directory other users can read: the vault refuses to write there.
        try FileManager.default.createDirectory(
            atPath: dir.path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        let log = LogCapture()
        let router = SessionRouter(vault: try dir.vault(logger: log.logger))
        do {
            try router.signIn(token: "tok-123", expiresAt: Self.expiry)
            Issue.record("the sign-in saved its token in a directory open to others")
        } catch let error as VaultError {
            #expect(error.code == .permissionDenied)
            #expect(error.message.contains("session could not be saved"), "\(error)")
            #expect(error.message.contains(dir.path), "\(error)")
        }
        #expect(router.session == Session(token: "tok-123", expiresAt: Self.expiry, isPersisted: false))
        #expect(log.errors.count == 1, "\(log.errors)")
        #expect(!log.errors.joined().contains("tok-123"))
        #expect(SessionRouter(vault: try dir.vault()).route() != .dashboard(router.session!))
    }

    @Test func aMissingMasterKeyGoesToSignInWithOneLoggedError() throws {
        let dir = try VaultDirectory()
        try SessionRouter(vault: try dir.vault()).signIn(token: "tok", expiresAt: nil)
        let before = try dir.fileBytes()
        dir.keys.removeAll()
        let log = LogCapture()
        let router = SessionRouter(vault: try dir.vault(logger: log.logger))
        #expect(router.route() == .signIn(reason: .keyMissing))
        #expect(log.errors.count == 1, "\(log.errors)")
        #expect(try dir.fileBytes() == before)
    }

    @Test func logoutRemovesTheTokenAndEveryRegisteredEncryptedStoreAndKeepsUIState() throws {
        let dir = try VaultDirectory()
        let prefs = dir.path + "-prefs"
        let log = LogCapture()
        let router = SessionRouter(
            vault: try dir.vault(logger: log.logger), encryptedPreferences: ["account", "drafts"],
            preferencesDirectory: prefs)
        try router.signIn(token: "tok-123", expiresAt: Self.expiry)
        try router.openEncryptedPreferences(id: "account").set("alice@example.com", forKey: "email")
        try router.openEncryptedPreferences(id: "drafts").set("dear bob", forKey: "draft.1")
        let ui = try PrefsStore(id: "ui", directory: prefs)
        try PersistedState.theme(in: ui).set(.dark)
        #expect(dir.keys.count == 1)

        try router.logout()

        #expect(router.session == nil)
        #expect(!FileManager.default.fileExists(atPath: dir.path + "/app.prefs"))
        #expect(!FileManager.default.fileExists(atPath: prefs + "/account.prefs"))
        #expect(!FileManager.default.fileExists(atPath: prefs + "/drafts.prefs"))
        #expect(dir.keys.count == 0)
        #expect(SessionRouter(vault: try dir.vault()).route() == .signIn(reason: .absent))
        #expect(PersistedState.theme(in: try PrefsStore(id: "ui", directory: prefs)).value == .dark)
        #expect(log.errors.isEmpty, "\(log.errors)")
    }

    @Test func logoutWithNothingStoredSucceeds() throws {
        let dir = try VaultDirectory()
        let router = SessionRouter(
            vault: try dir.vault(), encryptedPreferences: ["account"], preferencesDirectory: dir.path + "-prefs")
        try router.logout()
        #expect(router.route() == .signIn(reason: .absent))
    }

    @Test func logoutWhenTheKeyIsGoneStillRemovesEveryFileAndSaysWhatFailed() throws {
        let dir = try VaultDirectory()
        let prefs = dir.path + "-prefs"
        let router = SessionRouter(
            vault: try dir.vault(), encryptedPreferences: ["account"], preferencesDirectory: prefs)
        try router.signIn(token: "tok-123", expiresAt: nil)
        try router.openEncryptedPreferences(id: "account").set("alice@example.com", forKey: "email")
        dir.keys.removeAll()

        let relaunch = SessionRouter(
            vault: try dir.vault(), encryptedPreferences: ["account"], preferencesDirectory: prefs)
        #expect(throws: VaultError.self) { try relaunch.logout() }
        #expect(!FileManager.default.fileExists(atPath: dir.path + "/app.prefs"))
        #expect(!FileManager.default.fileExists(atPath: prefs + "/account.prefs"))
        #expect(relaunch.route() == .signIn(reason: .absent))
    }

    @Test func sessionDescriptionsNeverShowTheToken() {
        let session = Session(token: "s3cr3t-token", expiresAt: nil, isPersisted: true)
        #expect(!"\(session)".contains("s3cr3t"))
        #expect(!String(reflecting: session).contains("s3cr3t"))
        #expect(!"\(LaunchRoute.dashboard(session))".contains("s3cr3t"))
    }
}
