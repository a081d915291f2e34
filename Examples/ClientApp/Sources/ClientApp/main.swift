// A client app that adopts the package as the README says, built and run by `make test` (inside the private
// keyring session of scripts/with-keyring.sh): every README snippet, verbatim between the markers, in the
// context the README gives it, one after the other. It checks what each did and exits 1 on any surprise.
// (The README's server snippet needs /var/lib and a systemd credential: ReadmeServerExampleTests compiles it.)
import Foundation
import Observation
import PrefsKV
import SecureVault

/// The app's own state types, as the README describes them.
enum Theme: String, Codable, Sendable { case light, dark }
struct Sidebar: Codable, Sendable, Equatable {
    var isExpanded = false
    var width = 240
}

var problems: [String] = []
@MainActor func check(_ condition: Bool, _ what: String) {
    if !condition { problems.append(what) }
}

var route = ""
@MainActor func showDashboard(_ token: String) { route = "dashboard" }
@MainActor func showSignIn(notice: String? = nil) { route = "signIn" + (notice.map { " \($0)" } ?? "") }

/// The README's first and third snippets: synchronous code.
@MainActor func synchronousPart(token: String, expiry: Date, apiKey: String) throws -> (AppDirectory, Vault) {
    // README snippet 1 begin
    let app = try AppDirectory("com.example.app")     // ~/.local/share/com.example.app
    let store = try PrefsStore(id: "ui", directory: app.preferences)
    try store.set("Inbox", forKey: "lastFolder")
    try store.set(true, forKey: "toolbar.visible")
    try store.write { tx in                              // several changes, all or nothing
        try tx.set(280, forKey: "sidebar.width")
        tx.removeValue(forKey: "legacy.sidebar")
    }
    let folder = try store.string(forKey: "lastFolder") ?? "Inbox"
    // README snippet 1 end
    let width = try store.int(forKey: "sidebar.width")
    check(folder == "Inbox" && width == 280, "snippet 1: the store")
    check(store.path.hasSuffix("/com.example.app/prefs/ui.prefs"), "snippet 1: the app's own directory")

    // README snippet 3 begin
    let vault = try Vault(service: "com.example.app", configuration: .init(directory: app.vaults))
    try vault.setSessionToken(token, expiresAt: expiry)     // durable once it returns
    switch vault.sessionToken() {
    case .valid(let token, _): showDashboard(token)
    case .expired, .absent: showSignIn()
    case .unavailable(let reason): showSignIn(notice: "\(reason)")  // locked keyring, no Secret Service, ...
    }
    try vault.set(apiKey, for: "apiKey")
    let stored = try vault.string(for: "apiKey")            // nil when absent; throws when it cannot be known
    // README snippet 3 end
    check(route == "dashboard", "snippet 3: routed to \(route)")
    check(stored == apiKey, "snippet 3: the stored item")
    return (app, vault)
}

/// The README's launch snippet: async code.
@MainActor func launch(app: AppDirectory, vault: Vault, token: String, expiry: Date) async throws {
    // README snippet 4 begin
    let ui = PrefsStore.openOrLog(id: "ui", directory: app.preferences)  // never throws; nil: defaults in memory
    let theme = PersistedState(name: "theme", version: 0, defaults: Theme.light, store: ui)
    let sidebar = PersistedState(name: "sidebar", version: 0, defaults: Sidebar(), store: ui)
    let router = SessionRouter(
        vault: vault, encryptedPreferences: ["account"], preferencesDirectory: app.preferences)
    switch await router.route() {                      // never throws, never prompts
    case .dashboard(let session): print("dashboard until", session.expiresAt.map { "\($0)" } ?? "logout")
    case .signIn(let reason): print("sign in:", reason)  // absent, expired, locked, keyMissing, ...
    }
    try await router.signIn(token: token, expiresAt: expiry)  // keyring failure: VaultError; router.session kept
    try theme.set(.dark)                               // an unchanged state writes nothing
    try sidebar.update { $0.isExpanded = true }
    try await router.logout()                          // token, master key, encrypted stores gone; UI kept
    // README snippet 4 end
    check(router.session == nil, "snippet 4: a session after logout")
    check(await vault.sessionToken() == .absent, "snippet 4: a token after logout")
    let relaunch = try PrefsStore(id: "ui", directory: app.preferences)
    check(PersistedState(name: "theme", defaults: Theme.light, store: relaunch).value == .dark, "snippet 4: theme")
    check(
        PersistedState(name: "sidebar", defaults: Sidebar(), store: relaunch).value
            == Sidebar(isExpanded: true, width: 240), "snippet 4: sidebar")
    check(
        (try? relaunch.string(forKey: "lastFolder")) == "Inbox",
        "snippets 1 and 4 share the store without a type mismatch")
}

// The README's typed keys snippet: declarations and code at the top level of the app. (Its `settings` store:)
let settings = try PrefsStore(id: "settings", directory: try AppDirectory("com.example.app").preferences)
// README snippet 2 begin
extension PrefsKeys {
    static let fontSize = PrefsKey<Int>("fontSize", default: 13)
    static let recentFolders = PrefsKey<[String]>("recentFolders", default: [])
    static let launchCount = PrefsKey<Int>("launchCount", default: 0)
}

let fontSize = settings[.fontSize]                    // 13 until set: never nil, never throws
try settings.set(15, for: .fontSize)
try settings.set(["Inbox", "Sent"], for: .recentFolders)
let launches = try settings.update(.launchCount) { $0 += 1 }  // atomic: no other process's update is lost
let observedSize = settings.observable(.fontSize)     // follows every write, other processes' included
withObservationTracking { _ = observedSize.value } onChange: { print("font size changed") }
try observedSize.set(16)
// README snippet 2 end
check(fontSize == 13 || fontSize == 16, "snippet 2: the default (or the last run's value)")
check(settings[.fontSize] == 16 && observedSize.value == 16, "snippet 2: the model follows its writes")
check(settings[.recentFolders] == ["Inbox", "Sent"], "snippet 2: a list")
check(launches >= 1 && settings[.launchCount] == launches, "snippet 2: an update returns the stored value")

do {
    let token = "tok-" + UUID().uuidString
    let expiry = Date(timeIntervalSinceNow: 3600)
    let (app, vault) = try synchronousPart(token: token, expiry: expiry, apiKey: "key-123")
    try await launch(app: app, vault: vault, token: token, expiry: expiry)
} catch {
    problems.append("\(error)")
}
if problems.isEmpty {
    print("ClientApp: every README snippet built and did what it says")
} else {
    print("ClientApp: UNEXPECTED:\n" + problems.map { "  - \($0)" }.joined(separator: "\n"))
    exit(1)
}
