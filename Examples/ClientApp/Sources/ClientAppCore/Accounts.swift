// What an app keeps per signed-in account: one preferences store and one vault each, listed, opened and removed
// at sign-out through the libraries' lifecycle API.
import PrefsKV
import SecureVault

/// The accounts signed in on this machine: `user-<id>` in the app's preferences directory and in its vault
/// directory.
public struct Accounts: Sendable {
    /// The directory of the accounts' preferences stores.
    public let preferences: String
    /// The configuration of the accounts' vaults (their directory and key store).
    public let vaults: Vault.Configuration

    /// Accounts whose stores are in `preferences` and whose vaults are as `vaults` says.
    public init(preferences: String, vaults: Vault.Configuration) {
        self.preferences = preferences
        self.vaults = vaults
    }

    /// Signs `account` in: its token goes to its vault, its preferences store is opened (created when new).
    public func signIn(_ account: String, token: String) throws -> PrefsStore {
        try Vault(service: name(account), configuration: vaults).set(token, for: "session")
        return try PrefsStore(id: name(account), directory: preferences)
    }

    /// The token of a signed-in account, nil when it has none.
    public func token(of account: String) throws -> String? {
        guard try Vault.exists(service: name(account), directory: vaults.directory) else { return nil }
        return try Vault(service: name(account), configuration: vaults).string(for: "session")
    }

    /// The accounts with a vault, sorted.
    public func signedIn() throws -> [String] {
        try Vault.services(in: vaults.directory).filter { $0.hasPrefix("user-") }.map { String($0.dropFirst(5)) }
    }

    /// Signs `account` out: its vault (file and master key) and its preferences store are removed. The caller
    /// closes its handles on the store first (an open store is refused: `busy`).
    public func signOut(_ account: String) throws {
        try PrefsStore.destroy(id: name(account), directory: preferences)
        try Vault.destroy(service: name(account), configuration: vaults)
    }

    private func name(_ account: String) -> String { "user-" + account }
}
