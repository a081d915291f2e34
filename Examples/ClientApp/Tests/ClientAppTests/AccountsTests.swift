// The app's tests use the libraries' test doubles, which are the real engine: `PrefsStore.temporary()` and
// `Vault.temporary()` (a temporary directory each, removed with the handle; the vault's key in memory).
import ClientAppCore
import PrefsKV
import SecureVault
import Testing
import XCTest

@Suite struct AccountsTests {
    /// Accounts in the directories of two temporary handles, which must live as long as the accounts are used:
    /// the directories go with them.
    static func withAccounts(_ body: (Accounts) throws -> Void) throws {
        let store = try PrefsStore.temporary()
        let vault = try Vault.temporary()
        try withExtendedLifetime((store, vault)) {
            try body(Accounts(preferences: store.directory, vaults: vault.configuration))
        }
    }

    @Test func signingOutRemovesOneAccountAndKeepsTheOther() throws {
        try Self.withAccounts { accounts in
            try accounts.signIn("alice", token: "tok-a").set("dark", forKey: "theme")
            try accounts.signIn("bob", token: "tok-b").set("light", forKey: "theme")
            #expect(try accounts.signedIn() == ["alice", "bob"])

            try accounts.signOut("alice")

            #expect(try accounts.signedIn() == ["bob"])
            #expect(try accounts.token(of: "alice") == nil)
            #expect(try !PrefsStore.exists(id: "user-alice", directory: accounts.preferences))
            #expect(try accounts.token(of: "bob") == "tok-b")
            #expect(try PrefsStore(id: "user-bob", directory: accounts.preferences).string(forKey: "theme") == "light")
        }
    }

    @Test func anAccountWhoseStoreIsStillOpenIsNotSignedOut() throws {
        try Self.withAccounts { accounts in
            let open = try accounts.signIn("alice", token: "tok-a")
            #expect(throws: PrefsError.self) { try accounts.signOut("alice") }
            #expect(try accounts.token(of: "alice") == "tok-a")
            withExtendedLifetime(open) {}
        }
    }
}

/// The same doubles from XCTest.
final class AccountsXCTests: XCTestCase {
    func testASignedInAccountIsListed() throws {
        let store = try PrefsStore.temporary()
        let vault = try Vault.temporary()
        let accounts = Accounts(preferences: store.directory, vaults: vault.configuration)
        _ = try accounts.signIn("carol", token: "tok-c")
        XCTAssertEqual(try accounts.signedIn(), ["carol"])
        withExtendedLifetime((store, vault)) {}
    }
}
