// A client app that adopts the package as the README says, built and run by `make test` (inside the private
// keyring session of scripts/with-keyring.sh): every README snippet, verbatim between the markers, one after the
// other at the top level of this file, as a new user would paste them (each uses only what the README defined
// before it). It checks what each did and exits 1 on any surprise.
// (The README's server snippet needs /var/lib and a systemd credential: ReadmeServerExampleTests compiles it.)
import Foundation
import Observation
import PrefsKV
import SecureVault

var problems: [String] = []
@MainActor func check(_ condition: Bool, _ what: String) {
    if !condition { problems.append(what) }
}

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

// README snippet 2 begin
extension PrefsKeys {
    static let fontSize = PrefsKey<Int>("fontSize", default: 13)
    static let recentFolders = PrefsKey<[String]>("recentFolders", default: [])
    static let launchCount = PrefsKey<Int>("launchCount", default: 0)
}

let fontSize = store[.fontSize]                       // 13 until set: never nil, never throws
try store.set(15, for: .fontSize)
try store.set(["Inbox", "Sent"], for: .recentFolders)
let launches = try store.update(.launchCount) { $0 += 1 }  // atomic: no other process's update is lost
let observedSize = store.observable(.fontSize)        // follows every write, other processes' included
withObservationTracking { _ = observedSize.value } onChange: { print("font size changed") }
try observedSize.set(16)
// README snippet 2 end
check(fontSize == 13 || fontSize == 16, "snippet 2: the default (or the last run's value)")
check(store[.fontSize] == 16 && observedSize.value == 16, "snippet 2: the model follows its writes")
check(store[.recentFolders] == ["Inbox", "Sent"], "snippet 2: a list")
check(launches >= 1 && store[.launchCount] == launches, "snippet 2: an update returns the stored value")

// README snippet 3 begin
let token = "tok-from-your-sign-in"                      // what your sign-in response gave
let expiry = Date(timeIntervalSinceNow: 3600)
let vault = try Vault(service: "com.example.app", configuration: .init(directory: app.vaults))
try vault.setSessionToken(token, expiresAt: expiry)     // durable once it returns
switch vault.sessionToken() {
case .valid(let token, _): print("dashboard, a token of \(token.count) characters")
case .expired, .absent: print("sign in")
case .unavailable(let reason): print("sign in:", reason)  // locked keyring, no Secret Service, ...
}
try vault.set("key-123", for: "apiKey")
let apiKey = try vault.string(for: "apiKey")            // nil when absent; throws when it cannot be known
// README snippet 3 end
if case .valid(let stored, let expiresAt?) = vault.sessionToken() {
    check(stored == token && abs(expiresAt.timeIntervalSince(expiry)) < 1, "snippet 3: the token")
} else {
    check(false, "snippet 3: no valid token")
}
check(apiKey == "key-123", "snippet 3: the stored item")

// What version 0 of the app stored, for snippet 4's migration to take over (the app's first release wrote it).
try PersistedState(name: "sidebar", version: 0, defaults: SidebarV0(expanded: false, points: 280), store: store)
    .set(SidebarV0(expanded: false, points: 300))

// README snippet 4 begin
enum Theme: String, Codable, Sendable { case light, dark }
struct Sidebar: Codable, Sendable, Equatable {
    var isExpanded = false
    var width = 240
}
struct SidebarV0: Codable { var expanded: Bool; var points: Double }  // what version 0 stored

@MainActor func launch() async throws {
    let ui = PrefsStore.openOrLog(id: "ui", directory: app.preferences)  // never throws; nil: defaults in memory
    let theme = PersistedState(name: "theme", version: 0, defaults: Theme.light, store: ui)
    let sidebar = PersistedState(name: "sidebar", version: 1, defaults: Sidebar(), store: ui) { stored in
        let old = try stored.decode(SidebarV0.self)      // a version-0 value, migrated once, then stored as 1
        return Sidebar(isExpanded: old.expanded, width: Int(old.points))
    }
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
}
try await launch()
// README snippet 4 end
check(vault.sessionToken() == .absent, "snippet 4: a token after logout")
let relaunch = try PrefsStore(id: "ui", directory: app.preferences)
check(PersistedState(name: "theme", defaults: Theme.light, store: relaunch).value == .dark, "snippet 4: theme")
let sidebar = PersistedState(name: "sidebar", version: 1, defaults: Sidebar(), store: relaunch)
check(sidebar.value == Sidebar(isExpanded: true, width: 300), "snippet 4: the migrated sidebar is \(sidebar.value)")
check(sidebar.hydration == .stored, "snippet 4: the migration was not written back (\(sidebar.hydration))")
check((try? relaunch.string(forKey: "lastFolder")) == "Inbox", "snippets 1 and 4 share the store without a type mismatch")

// README snippet 5 begin
let keyFile = app.root + "/vault.key"                  // beside app.vaults, not in it
try KeyStore.createKeyFile(at: keyFile)                // 32 random bytes, 0600; an existing file is kept
var local = Vault.Configuration(directory: app.vaults)
local.keyStore = .keyFile(keyFile)
let localVault = try Vault(service: "com.example.app.local", configuration: local)
try localVault.set("key-123", for: "apiKey")
// README snippet 5 end
let keyBytes = try Data(contentsOf: URL(fileURLWithPath: keyFile))
check(keyBytes.count == 32, "snippet 5: a 32-byte key file")
check(try !KeyStore.createKeyFile(at: keyFile), "snippet 5: an existing key file was replaced")
check(try Data(contentsOf: URL(fileURLWithPath: keyFile)) == keyBytes, "snippet 5: the key file changed")
check(try Vault(service: "com.example.app.local", configuration: local).string(for: "apiKey") == "key-123",
    "snippet 5: a fresh handle reads the item")
check(!FileManager.default.fileExists(atPath: app.vaults + "/vault.key"), "snippet 5: the key file is in the vaults")

if problems.isEmpty {
    print("ClientApp: every README snippet built and did what it says")
} else {
    print("ClientApp: UNEXPECTED:\n" + problems.map { "  - \($0)" }.joined(separator: "\n"))
    exit(1)
}
