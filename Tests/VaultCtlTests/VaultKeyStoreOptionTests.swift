import Foundation
import TestSupport
import Testing

/// `--key-store` on the `vault` commands: a vault whose key is in the kernel's keyring works where no Secret
/// Service runs at all, and a key store vaultctl does not know is bad usage.
@Suite struct VaultKeyStoreOptionTests {
    @Test func aKernelKeyringVaultWorksWithoutAnySecretService() throws {
        let vault = try VaultSandbox()
        let token = VaultSandbox.secret("token")
        try vault.input("set", token, secret: token)
        try vault.run(
            .noSecretService, revealing: ["get"],
            script: """
                V set vault set --key-store keyring:user --service app session
                V get vault get --key-store keyring:user --service app session --reveal
                V status vault status --key-store keyring:user --service app
                V secret-service vault get --service app session --reveal
                V rotate vault rotate-key --key-store keyring:user --service app
                V get-after vault get --key-store keyring:user --service app session
                V wipe vault wipe --key-store keyring:user --service app --yes
                V unknown vault get --key-store keyring:nowhere --service app session
                V unlock vault unlock --key-store keyring:user --service app
                """)
        #expect(try vault.step("set").status == 0)
        let get = try vault.step("get")
        #expect(get.status == 0 && get.standardOutput == token + "\n", "\(get)")
        let status = try vault.step("status")
        #expect(status.status == 0 && status.standardOutput.contains("kernelKeyring:user"), "\(status)")
        // The file says which key store it needs: another one is refused, never asked for a key.
        let other = try vault.step("secret-service")
        #expect(other.status == 78, "\(other)")
        #expect(try vault.step("rotate").status == 0)
        #expect(try vault.step("get-after").status == 0)
        let wipe = try vault.step("wipe")
        #expect(wipe.status == 0 && wipe.standardOutput.contains("master key, items and file"), "\(wipe)")
        let unknown = try vault.step("unknown")
        #expect(unknown.status == 64, "\(unknown)")
        #expect(unknown.standardError.contains("keyring:nowhere"), "\(unknown)")
        let unlock = try vault.step("unlock")
        #expect(unlock.status == 64 && unlock.standardError.contains("nothing to unlock"), "\(unlock)")
        #expect(!FileManager.default.fileExists(atPath: vault.vaultFile()))
    }
}
