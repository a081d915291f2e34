import Logging
import Testing

@testable import SecureVault

/// Where a vault logs: the app's logger when it chose one, else a default labelled "securevault" (made when
/// something is logged, not with the configuration), for the vault and for the store of its file alike.
@Suite struct VaultLoggerTests {
    @Test func theVaultsFileLogsWhereTheVaultDoes() throws {
        let dir = try VaultDirectory()
        let vault = try dir.vault()
        try vault.set("one", for: "a")
        #expect(vault.configuration.chosenLogger == nil)
        #expect(vault.logger.label == "securevault")
        let store = try #require(vault.opened.withLock { $0?.store })
        #expect(store.configuration.logger.label == "securevault")

        var chosen = Logger(label: "com.example.app")
        chosen.logLevel = .debug
        let logged = try dir.vault("chosen", logger: chosen)
        try logged.set("one", for: "a")
        #expect(logged.logger.label == "com.example.app")
        let loggedStore = try #require(logged.opened.withLock { $0?.store })
        #expect(loggedStore.configuration.logger.label == "com.example.app")
        #expect(loggedStore.configuration.logger.logLevel == .debug)
    }

    @Test func aLevelSetOnTheDefaultLoggerIsKept() {
        var configuration = Vault.Configuration(directory: "/nonexistent")
        configuration.logger.logLevel = .critical
        #expect(configuration.logger.logLevel == .critical)
        #expect(configuration.logger.label == "securevault")
    }
}
