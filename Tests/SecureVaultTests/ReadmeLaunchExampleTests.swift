import ExampleAppState
import Foundation
import Testing

@testable import PrefsKV
@testable import SecureVault

/// The README's launch snippet, verbatim between the markers (the README creates its vault on the Secret
/// Service; here it uses in-memory keys), so the README never shows launch code that does not build or work.
@Suite struct ReadmeLaunchExampleTests {
    @Test func readmeLaunchSnippetCompilesAndDoesWhatItSays() throws {
        let dir = try VaultDirectory()
        let appDataDirectory = dir.path + "-app"
        let vault = try dir.vault()
        let token = "tok-readme"
        let expiry = Date(timeIntervalSinceNow: 3600)
        // README begin
        let ui = PrefsStore.openOrLog(id: "ui", directory: appDataDirectory)  // never throws; nil: defaults in memory
        let theme = PersistedState.theme(in: ui)           // .light until the user picks another
        let sidebar = PersistedState.sidebar(in: ui)       // collapsed, 240 wide
        let router = SessionRouter(
            vault: vault, encryptedPreferences: ["account"], preferencesDirectory: appDataDirectory)
        switch router.route() {                            // never throws, never prompts
        case .dashboard(let session): print("dashboard until", session.expiresAt.map { "\($0)" } ?? "logout")
        case .signIn(let reason): print("sign in:", reason)  // absent, expired, locked, keyMissing, ...
        }
        try router.signIn(token: token, expiresAt: expiry)  // keyring failure: VaultError; router.session kept
        try theme.set(.dark)                               // an unchanged state writes nothing
        try sidebar.update { $0.isExpanded = true }
        try router.logout()                                // token, master key, encrypted stores gone; UI kept
        // README end
        #expect(router.session == nil)
        #expect(try dir.vault().sessionToken() == .absent)
        let relaunch = try PrefsStore(id: "ui", directory: appDataDirectory)
        #expect(PersistedState.theme(in: relaunch).value == .dark)
        #expect(PersistedState.sidebar(in: relaunch).value == SidebarState(isExpanded: true, width: 240))

        let readme = try String(contentsOfFile: repositoryRoot + "/README.md", encoding: .utf8)
        let test = try String(contentsOfFile: #filePath, encoding: .utf8)
        let snippet = test.components(separatedBy: "// README begin\n")[1]
            .components(separatedBy: "        // README end")[0]
            .split(separator: "\n", omittingEmptySubsequences: false).map { $0.dropFirst(8) }.joined(separator: "\n")
        #expect(
            readme.contains(
                "```swift\nimport PrefsKV\nimport SecureVault\n\nlet vault = try Vault(service: \"com.example.app\")"
                    + "   // its master key lives in the Secret Service\n" + snippet + "```"),
            "README launch snippet drifted from this test")
    }

    var repositoryRoot: String {
        var parts = #filePath.split(separator: "/", omittingEmptySubsequences: false)
        parts.removeLast(3)
        return parts.joined(separator: "/")
    }
}
