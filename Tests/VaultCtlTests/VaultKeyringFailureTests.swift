import Foundation
import TestSupport
import Testing

/// `vaultctl vault` when the key cannot be had: a locked keyring (75, at once), no Secret Service (69), a
/// master key deleted behind the vault's back (78). Each state is produced for real, and the vault file is
/// compared byte for byte before and after.
@Suite struct VaultKeyringFailureTests {
    @Test func aLockedKeyringAnswers75AtOnceWhileStatusStillReports() throws {
        let vault = try VaultSandbox()
        let value = VaultSandbox.secret("value")
        let other = VaultSandbox.secret("other")
        try vault.input("set", value, secret: value)
        try vault.input("set-locked", other, secret: other)
        try vault.run(
            script: """
                V set vault set --service app k
                cp "$VDIR/app.prefs" "$IO/before.prefs"
                LOCK
                V get vault get --service app k --reveal
                V get-json --json vault get --service app k
                V list vault list --service app
                V verify vault verify --service app
                V set-locked vault set --service app k2
                V rotate vault rotate-key --service app
                V wipe vault wipe --service app --yes
                V delete vault delete --service app k
                V status vault status --service app
                V status-json --json vault status --service app
                cmp -s "$VDIR/app.prefs" "$IO/before.prefs"; echo $? >"$IO/unchanged"
                """)
        let get = try vault.step("get")
        #expect(get.status == 75 && get.standardOutput.isEmpty, "\(get)")
        #expect(get.standardError.hasPrefix("vaultctl: locked: "), "\(get)")
        #expect(get.standardError.contains("the keyring is locked"), "\(get)")
        // A locked keyring is an answer, not a wait: vaultctl says "locked" (above), never "timeout" (its 2 s
        // deadline running out, which exits 75 too). What vaultctl says, not how long it took, tells them apart.
        let json = try vault.step("get-json")
        #expect(json.status == 75, "\(json)")
        #expect(try json.errorCode() == "locked")
        for name in ["list", "verify", "set-locked", "rotate", "wipe", "delete"] {
            let step = try vault.step(name)
            #expect(step.status == 75 && step.standardOutput.isEmpty, "\(step)")
            #expect(step.standardError.contains("vaultctl: locked: "), "\(step)")
        }
        #expect(vault.output("unchanged") == "0", "the vault file changed while the keyring was locked")

        let status = try vault.step("status")
        #expect(status.status == 0, "\(status)")
        #expect(
            status.lines.contains("default keyring  Login: locked") && status.lines.contains("items            1"),
            "\(status)")
        let object = try jsonObject(try vault.step("status-json").standardOutput)
        #expect(object["locked"] as? Bool == true && number(object["itemCount"]) == 1, "\(object)")
        #expect((object["vaultId"] as? String)?.count == 32)
    }

    @Test func vaultLockLocksTheDefaultKeyring() throws {
        let vault = try VaultSandbox()
        let value = VaultSandbox.secret("value")
        try vault.input("set", value, secret: value)
        try vault.run(
            revealing: ["reveal"],
            script: """
                V set vault set --service app k
                $H secret-state >"$IO/state-before"
                V lock vault lock
                $H secret-state >"$IO/state-after"
                V lock-again --json vault lock
                V get vault get --service app k --reveal
                UNLOCK
                V reveal vault get --service app k --reveal
                """)
        #expect(vault.output("state-before") == "unlocked")
        let lock = try vault.step("lock")
        #expect(lock.status == 0 && lock.lines == ["locked the default keyring"], "\(lock)")
        #expect(vault.output("state-after") == "locked", "vault lock did not lock the default collection")
        let again = try vault.step("lock-again")
        #expect(again.status == 0, "\(again)")
        #expect(try jsonObject(again.standardOutput)["locked"] as? Bool == true)
        #expect(try vault.step("get").status == 75)
        let reveal = try vault.step("reveal")
        #expect(reveal.status == 0 && reveal.standardOutput == value + "\n", "after unlocking again: \(reveal)")
    }

    @Test func withoutASecretServiceVaultCommandsExit69() throws {
        let vault = try VaultSandbox()
        let value = VaultSandbox.secret("value")
        try vault.input("set", value, secret: value)
        try vault.input("set-new", value)
        try vault.run(script: "V set vault set --service app k")
        #expect(try vault.step("set").status == 0)
        let before = try Data(contentsOf: URL(fileURLWithPath: vault.vaultFile()))

        // A bus with no Secret Service on it and nothing to activate.
        try vault.run(
            .noSecretService,
            script: """
                V get vault get --service app k --reveal
                V get-json --json vault get --service app k
                V list vault list --service app
                V set-new vault set --service new k
                V lock vault lock
                V status vault status --service app
                V status-json --json vault status --service app
                """)
        let get = try vault.step("get")
        #expect(get.status == 69 && get.standardOutput.isEmpty, "\(get)")
        #expect(get.standardError.contains("no Secret Service"), "\(get)")
        #expect(try vault.step("get-json").errorCode() == "unavailable")
        for name in ["list", "set-new", "lock"] {
            let step = try vault.step(name)
            #expect(step.status == 69, "\(step)")
        }
        #expect(!FileManager.default.fileExists(atPath: vault.vaultFile("new")), "a vault without a key was created")
        let status = try vault.step("status")
        #expect(status.status == 0 && status.lines.contains("secret service   not reachable"), "\(status)")
        let object = try jsonObject(try vault.step("status-json").standardOutput)
        #expect(object["secretService"] as? Bool == false && object["sessionBus"] as? Bool == true, "\(object)")
        #expect(((object["problem"] as? [String: Any])?["code"] as? String) == "unavailable", "\(object)")
        #expect(number(object["itemCount"]) == 1)

        // A Secret Service with no default keyring (gnome-keyring activated, never unlocked).
        try vault.run(
            .noKeyring,
            script: """
                V get-no-keyring vault get --service app k
                V lock-no-keyring --json vault lock
                """)
        let noKeyring = try vault.step("get-no-keyring")
        #expect(noKeyring.status == 69 && noKeyring.standardError.contains("no default keyring"), "\(noKeyring)")
        let lock = try vault.step("lock-no-keyring")
        #expect(lock.status == 69, "\(lock)")
        #expect(try lock.errorCode() == "unavailable")

        // No session bus at all.
        let noBus = try ChildProcess.run(
            PrefsSandbox.vaultctl, ["--dir", vault.vaultDirectory, "vault", "get", "--service", "app", "k"],
            environment: ["DBUS_SESSION_BUS_ADDRESS": nil, "DISPLAY": nil, "XDG_RUNTIME_DIR": "/nonexistent"])
        #expect(noBus.status == 69 && noBus.standardError.contains("no D-Bus session bus"), "\(noBus)")

        #expect(try Data(contentsOf: URL(fileURLWithPath: vault.vaultFile())) == before)
    }

    @Test func aPlantedMasterKeyOfTheWrongLengthAnswers78NeverACrash() throws {
        let vault = try VaultSandbox()
        let value = VaultSandbox.secret("value")
        try vault.input("set", value, secret: value)
        try vault.run(
            script: #"""
                V set vault set --service app k
                V status --json vault status --service app
                KEY=$(sed -n 's/^  "keyId" : "\([0-9a-f]*\)",\{0,1\}$/\1/p' "$IO/status.out")
                cp "$VDIR/app.prefs" "$IO/before.prefs"
                secret-tool clear vault "$(VAULT_ID status)"
                printf 'abcde' | secret-tool store --label=planted vault "$(VAULT_ID status)" key "$KEY" format 2 service app \
                  xdg:schema dev.securevault.MasterKey
                V get vault get --service app k --reveal
                V get-json --json vault get --service app k
                V verify vault verify --service app
                cmp -s "$VDIR/app.prefs" "$IO/before.prefs"; echo $? >"$IO/unchanged"
                """#)
        let get = try vault.step("get")
        #expect(get.status == 78 && get.standardOutput.isEmpty, "\(get)")
        #expect(get.standardError.hasPrefix("vaultctl: wrongKey: reading the master key of vault 'app': "), "\(get)")
        #expect(get.standardError.contains("returned 5 bytes, not a 32-byte key"), "\(get)")
        let json = try vault.step("get-json")
        #expect(json.status == 78 && json.standardError.isEmpty, "\(json)")
        #expect(try json.errorCode() == "wrongKey")
        #expect(try vault.step("verify").status == 78)
        #expect(vault.output("unchanged") == "0", "the vault file changed")
    }

    @Test func aDeletedMasterKeyAnswers78AndTheDataIsLeftAlone() throws {
        let vault = try VaultSandbox()
        let value = VaultSandbox.secret("value")
        let other = VaultSandbox.secret("other")
        try vault.input("set", value, secret: value)
        try vault.input("set-other", other, secret: other)
        try vault.run(
            script: """
                V set vault set --service app k
                V status --json vault status --service app
                cp "$VDIR/app.prefs" "$IO/before.prefs"
                secret-tool clear vault "$(VAULT_ID status)"; echo $? >"$IO/cleared"
                V get vault get --service app k --reveal
                V get-json --json vault get --service app k
                V list vault list --service app
                V verify vault verify --service app
                V rotate vault rotate-key --service app
                V set-other vault set --service app k2
                V status-after --json vault status --service app
                cmp -s "$VDIR/app.prefs" "$IO/before.prefs"; echo $? >"$IO/unchanged"
                V wipe vault wipe --service app --yes
                """)
        #expect(vault.output("cleared") == "0")
        let get = try vault.step("get")
        #expect(get.status == 78 && get.standardOutput.isEmpty, "\(get)")
        #expect(get.standardError.contains("its master key is not in the"), "\(get)")
        #expect(try vault.step("get-json").errorCode() == "keyMissing")
        // Never a fresh key over existing data: writing is refused too.
        for name in ["list", "verify", "rotate", "set-other"] {
            let step = try vault.step(name)
            #expect(step.status == 78, "\(step)")
        }
        #expect(vault.output("unchanged") == "0", "the vault file changed after its key was deleted")
        let status = try jsonObject(try vault.step("status-after").standardOutput)
        #expect(number(status["itemCount"]) == 1 && status["locked"] as? Bool == false, "\(status)")
        // Wiping needs no key: it removes what is left.
        #expect(try vault.step("wipe").status == 0)
        #expect(!FileManager.default.fileExists(atPath: vault.vaultFile()))
    }
}
