import Foundation
import SecureVault
import Testing
import TestSupport

/// The README's server snippet: compiled here verbatim (so it cannot drift from the API), and its flow (root
/// provisions with `vault init`, systemd decrypts the credential into `$CREDENTIALS_DIRECTORY`, the service
/// reads it as another user) is run for real by
/// `FileKeyStoreTests.aServiceReadsItsCredentialFromItsCredentialsDirectoryAsAnyUser`, in a scratch directory
/// instead of /var/lib/api.
@Suite struct ReadmeServerExampleTests {
    /// Never called: the README's snippet, type-checked.
    static func serverSnippet(token: String, expiry: Date) throws {
        // README begin
        var configuration = Vault.Configuration(directory: "/var/lib/api/vault")
        configuration.keyStore = .systemdCredential(name: "api")   // read from $CREDENTIALS_DIRECTORY/api
        let vault = try Vault(service: "api", configuration: configuration)
        try vault.setSessionToken(token, expiresAt: expiry)
        // README end
    }

    @Test func theReadmeServerSnippetIsTheOneCompiledHere() throws {
        let readme = try String(contentsOfFile: BuildProducts.repositoryRoot + "/README.md", encoding: .utf8)
        let test = try String(contentsOfFile: #filePath, encoding: .utf8)
        let snippet = test.components(separatedBy: "// README begin\n")[1]
            .components(separatedBy: "        // README end")[0]
            .split(separator: "\n", omittingEmptySubsequences: false).map { $0.dropFirst(8) }.joined(separator: "\n")
        #expect(readme.contains("```swift\n" + snippet + "```"), "README server snippet drifted")
        #expect(readme.contains("vault init --service api --key-store systemd-creds:api"))
        #expect(readme.contains("LoadCredentialEncrypted=api:/var/lib/api/vault/api.cred"))
    }
}
