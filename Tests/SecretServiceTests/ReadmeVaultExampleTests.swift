import Foundation
import SecureVault
import Testing
import TestSupport

/// The README's vault snippet, verbatim between the markers, run against the session's real gnome-keyring.
@Suite struct ReadmeVaultExampleTests {
    @Test func readmeVaultSnippetRunsAndRoutesToTheDashboard() throws {
        try KeyringSession.require()
        let token = "tok-\(UUID().uuidString)"
        let expiry = Date(timeIntervalSinceNow: 3600)
        let apiKey = "key-123"
        var route = ""
        func showDashboard(_ token: String) { route = "dashboard" }
        func showSignIn(notice: String? = nil) { route = "signIn \(notice ?? "")" }
        // README begin
        let vault = try Vault(service: "com.example.app")
        try vault.setSessionToken(token, expiresAt: expiry)     // durable once it returns
        switch vault.sessionToken() {
        case .valid(let token, _): showDashboard(token)
        case .expired, .absent: showSignIn()
        case .unavailable(let reason): showSignIn(notice: "\(reason)")  // locked keyring, no Secret Service, ...
        }
        try vault.set(apiKey, for: "apiKey")
        let stored = try vault.string(for: "apiKey")            // nil when absent; throws when it cannot be known
        // README end
        #expect(route == "dashboard")
        #expect(stored == "key-123")
        try vault.wipe()

        let readme = try String(contentsOfFile: BuildProducts.repositoryRoot + "/README.md", encoding: .utf8)
        let test = try String(contentsOfFile: #filePath, encoding: .utf8)
        let snippet = test.components(separatedBy: "// README begin\n")[1]
            .components(separatedBy: "        // README end")[0]
            .split(separator: "\n", omittingEmptySubsequences: false).map { $0.dropFirst(8) }.joined(separator: "\n")
        #expect(readme.contains("```swift\nimport SecureVault\n\n" + snippet + "```"), "README snippet drifted")
    }
}
