import Foundation
import TestSupport
import Testing

/// `vault keys`, `vault forget-key` and doctor's unused keys (issue 38, orphaned master keys): a vault directory
/// deleted by hand leaves its master key in the keyring; these find it in every key store (the real
/// gnome-keyring of a private session, the kernel's user keyring, wrapped key files), never list another
/// application's items, and delete only a key no vault still uses.
@Suite struct VaultKeysTests {
    /// `KEY_ID STEP`: the keyId of a `--json vault status` step. `ITEMS ID`: how many keyring items name vault
    /// id ID. `STATE STEP SERVICE`: the state `--json vault keys` step STEP gives vault SERVICE's keys.
    static let prelude = #"""
        KEY_ID() { sed -n 's/^  "keyId" : "\([0-9a-f]*\)",\{0,1\}$/\1/p' "$IO/$1.out"; }
        ITEMS() { secret-tool search --all vault "$1" 2>&1 | grep -ac '^attribute.vault = ' || true; }

        """#

    /// The keys `--json vault keys` listed for `service`, each as a dictionary.
    static func keys(_ step: StepResult, service: String) throws -> [[String: Any]] {
        let document = try jsonObject(step.standardOutput)
        let keys = try #require(document["keys"] as? [[String: Any]], "\(step)")
        return keys.filter { $0["service"] as? String == service }
    }

    @Test func aVaultDirectoryDeletedByHandLeavesKeysThatAreListedAndForgottenOneByOne() throws {
        let vault = try VaultSandbox()
        let (one, two) = (VaultSandbox.secret("one"), VaultSandbox.secret("two"))
        try vault.input("set-alpha", one, secret: one)
        try vault.input("set-beta", two, secret: two)
        try vault.run(
            script: Self.prelude + #"""
                V set-alpha vault set --service alpha k
                V set-beta vault set --service beta k
                V status-alpha --json vault status --service alpha
                V status-beta --json vault status --service beta
                A=$(VAULT_ID status-alpha); B=$(VAULT_ID status-beta); KA=$(KEY_ID status-alpha)
                # Another application's items: one of a generic schema, one with our attribute names and another schema.
                printf 'foreign-1' | secret-tool store --label=foreign service alpha username bob
                printf 'foreign-2' | secret-tool store --label=mimic vault "$A" key "$KA" format 2 service alpha \
                  xdg:schema org.example.Other
                V in-use --json vault keys
                V in-use-human vault keys
                rm -rf "$VDIR"
                V orphaned --json vault keys
                V orphaned-human vault keys
                V only-alpha --json vault keys --service alpha
                V no-yes vault forget-key --service alpha --key-id "$KA"
                ITEMS "$A" >"$IO/items-after-refusal"
                V bad-id vault forget-key --service alpha --key-id XYZ --yes
                V forget --json vault forget-key --service alpha --key-id "$KA" --yes
                ITEMS "$A" >"$IO/alpha-items"
                ITEMS "$B" >"$IO/beta-items"
                secret-tool lookup service alpha username bob >"$IO/foreign-1"
                secret-tool lookup vault "$A" key "$KA" xdg:schema org.example.Other >"$IO/foreign-2"
                V forget-again vault forget-key --service alpha --key-id "$KA" --yes
                V after --json vault keys
                [ -e "$VDIR" ] && echo created >"$IO/dir" || echo absent >"$IO/dir"
                """#)
        // While the vaults are there: their keys are in use, and no other application's item is listed.
        let inUse = try vault.step("in-use")
        #expect(inUse.status == 0, "\(inUse)")
        let alphaKeys = try Self.keys(inUse, service: "alpha")
        try #require(alphaKeys.count == 1, "\(inUse)")
        #expect(alphaKeys[0]["state"] as? String == "inUse", "\(inUse)")
        #expect(alphaKeys[0]["keyStore"] as? String == "secretService")
        #expect(alphaKeys[0]["directory"] as? String == vault.vaultDirectory, "the key does not record its directory")
        #expect(try Self.keys(inUse, service: "beta").map { $0["state"] as? String } == ["inUse"])
        let human = try vault.step("in-use-human")
        #expect(
            human.lines.first?.split(separator: " ", omittingEmptySubsequences: true) == [
                "SERVICE", "KEY", "STORE", "KEY", "ID", "STATE", "DETAIL",
            ], "\(human)")
        #expect(
            human.lines.contains {
                $0.hasPrefix("alpha") && $0.contains(" inUse ") && $0.contains(vault.vaultFile("alpha"))
            }, "\(human)")

        // The directory is gone: both keys are orphaned, the foreign items still not listed.
        let orphaned = try vault.step("orphaned")
        #expect(orphaned.status == 0, "\(orphaned)")
        let gone = try Self.keys(orphaned, service: "alpha")
        #expect(gone.count == 1 && gone[0]["state"] as? String == "orphaned", "\(orphaned)")
        #expect(
            (gone[0]["detail"] as? String)?.contains("its directory \(vault.vaultDirectory) is gone") == true,
            "\(orphaned)")
        #expect(try Self.keys(orphaned, service: "beta").map { $0["state"] as? String } == ["orphaned"])
        #expect(try vault.step("orphaned-human").lines.contains { $0.hasPrefix("alpha") && $0.contains(" orphaned ") })
        let onlyAlpha = try jsonObject(try vault.step("only-alpha").standardOutput)["keys"] as? [[String: Any]]
        #expect(onlyAlpha?.map { $0["service"] as? String } == ["alpha"])

        // Refusals touch nothing.
        let noYes = try vault.step("no-yes")
        #expect(noYes.status == 64 && noYes.standardError.contains("without --yes"), "\(noYes)")
        #expect(vault.output("items-after-refusal") == "2", "a refused forget-key changed the keyring")
        #expect(try vault.step("bad-id").status == 64)

        // Forgotten: alpha's key goes; beta's, and the other application's items (their secrets byte for byte), stay.
        let forget = try vault.step("forget")
        #expect(forget.status == 0, "\(forget)")
        let forgotten = try #require(try jsonObject(forget.standardOutput)["forgotten"] as? [[String: Any]])
        #expect(forgotten.count == 1 && forgotten[0]["removed"] as? Bool == true, "\(forget)")
        #expect((forgotten[0]["key"] as? [String: Any])?["keyStore"] as? String == "secretService", "\(forget)")
        #expect(vault.output("alpha-items") == "1", "alpha's key is still there (only the mimic may name its ids)")
        #expect(vault.output("beta-items") == "1", "beta's key went too")
        #expect(vault.output("foreign-1") == "foreign-1")
        #expect(vault.output("foreign-2") == "foreign-2")
        let again = try vault.step("forget-again")
        #expect(again.status == 66 && again.standardError.contains("no reachable key store keeps"), "\(again)")
        let after = try vault.step("after")
        #expect(try Self.keys(after, service: "alpha").isEmpty, "\(after)")
        #expect(try Self.keys(after, service: "beta").count == 1)
        #expect(vault.output("dir") == "absent", "listing or forgetting made the vault directory again")
    }

    @Test func aKeyInUseOrWhoseVaultCannotBeReadIsNeverForgotten() throws {
        let vault = try VaultSandbox()
        let value = VaultSandbox.secret("value")
        try vault.input("set", value, secret: value)
        try vault.input("set-other", value)
        try vault.run(
            revealing: ["get-after"],
            script: Self.prelude + #"""
                V set vault set --service app k
                V set-other vault set --service other k
                V status --json vault status --service app
                V status-other --json vault status --service other
                V refused --json vault forget-key --service app --key-id "$(KEY_ID status)" --yes
                ITEMS "$(VAULT_ID status)" >"$IO/items"
                V get-after vault get --service app k --reveal
                # A vault file that can no longer be read: its key may be all that could ever open it again.
                head -c 100 /dev/urandom >"$VDIR/other.prefs"
                cp "$VDIR/other.prefs" "$IO/other-before"
                V keys --json vault keys --service other
                V unreadable --json vault forget-key --service other --key-id "$(KEY_ID status-other)" --yes
                ITEMS "$(VAULT_ID status-other)" >"$IO/other-items"
                cmp -s "$VDIR/other.prefs" "$IO/other-before"; echo $? >"$IO/other-unchanged"
                """#)
        let refused = try vault.step("refused")
        #expect(refused.status == 64, "\(refused)")
        #expect(try refused.errorCode() == "invalidKey")
        #expect(refused.standardOutput.contains("is in use"), "\(refused)")
        #expect(vault.output("items") == "1", "the key in use was deleted")
        #expect(try vault.step("get-after").standardOutput == value + "\n")
        let keys = try vault.step("keys")
        #expect(try Self.keys(keys, service: "other").map { $0["state"] as? String } == ["unreadable"], "\(keys)")
        let unreadable = try vault.step("unreadable")
        #expect(unreadable.status == 65, "\(unreadable)")
        #expect(try unreadable.errorCode() == "corrupted")
        #expect(vault.output("other-items") == "1", "the key of an unreadable vault was deleted")
        #expect(vault.output("other-unchanged") == "0", "the unreadable vault file changed")
    }

    @Test func aMovedVaultIsFoundWhereItIsNamedAndALeftoverOfARotationIsSuperseded() throws {
        let vault = try VaultSandbox()
        let value = VaultSandbox.secret("value")
        try vault.input("set", value, secret: value)
        try vault.run(
            script: Self.prelude + #"""
                V set vault set --service app k
                V status --json vault status --service app
                A=$(VAULT_ID status); OLD=$(KEY_ID status)
                V rotate vault rotate-key --service app
                V status-after --json vault status --service app
                # The old key back, as a rotation that could not delete it leaves it (planted: same ids, our schema).
                head -c 32 /dev/urandom | secret-tool store --label="SecureVault master key for 'app'" vault "$A" \
                  key "$OLD" format 2 service app xdg:schema dev.securevault.MasterKey
                V keys --json vault keys --service app
                mv "$VDIR" "$VDIR-moved"
                V moved --json vault keys --service app
                "$VAULTCTL" --dir "$VDIR-moved" --json vault keys --service app >"$IO/named.out"
                echo "$OLD" >"$IO/old"; KEY_ID status-after >"$IO/new"
                "$VAULTCTL" --dir "$VDIR-moved" vault forget-key --service app --key-id "$(KEY_ID status-after)" --yes \
                  >/dev/null 2>&1; echo $? >"$IO/new-refused"
                "$VAULTCTL" --dir "$VDIR-moved" vault forget-key --service app --key-id "$OLD" --yes >/dev/null 2>&1
                echo $? >"$IO/old-forgotten"
                ITEMS "$A" >"$IO/items"
                """#)
        let old = try #require(vault.output("old"))
        let new = try #require(vault.output("new"))
        let keys = try vault.step("keys")
        let states = Dictionary(
            uniqueKeysWithValues: try Self.keys(keys, service: "app").map {
                ($0["keyId"] as? String ?? "", $0["state"] as? String ?? "")
            })
        #expect(states == [old: "superseded", new: "inUse"], "\(keys)")
        // Moved away from the directory its key records: orphaned there, in use where it is named (--dir).
        let moved = try vault.step("moved")
        #expect(
            try Self.keys(moved, service: "app").first { $0["keyId"] as? String == new }?["state"] as? String
                == "orphaned")
        let named = try jsonObject(try #require(vault.output("named.out")))["keys"] as? [[String: Any]]
        #expect(
            named?.first { $0["keyId"] as? String == new }?["state"] as? String == "inUse",
            "\(String(describing: named))")
        #expect(vault.output("new-refused") == "64")
        #expect(vault.output("old-forgotten") == "0")
        #expect(vault.output("items") == "1", "forgetting the superseded key left it, or took the one in use")
    }

    /// A vault being made holds its lock while its key exists and its file does not yet: forget-key decides under
    /// that lock, so it waits and then finds the key in use. The holder restores the file only once the kernel
    /// lists forget-key's process waiting on the lock (/proc/locks), so the order is proven, not timed.
    @Test func aKeyWhoseVaultIsBeingMadeIsDecidedUnderTheVaultsLock() throws {
        let vault = try VaultSandbox()
        try vault.input("set", "v")
        try vault.run(
            script: Self.prelude + #"""
                V set vault set --service app k
                V status --json vault status --service app
                mv "$VDIR/app.prefs" "$IO/saved.prefs"
                INODE=$(stat -c %i "$VDIR/app.vault.lock")
                (
                  flock 9; : >"$IO/locked"
                  end=$((SECONDS + 120))
                  until grep -q -- "-> FLOCK .*:$INODE " /proc/locks; do
                    [ "$SECONDS" -ge "$end" ] && break; sleep 0.01
                  done
                  grep -q -- "-> FLOCK .*:$INODE " /proc/locks && echo waited >"$IO/waiter"
                  mv "$IO/saved.prefs" "$VDIR/app.prefs"
                ) 9>>"$VDIR/app.vault.lock" &
                until [ -e "$IO/locked" ]; do sleep 0.01; done
                V forget vault forget-key --service app --key-id "$(KEY_ID status)" --yes
                wait
                ITEMS "$(VAULT_ID status)" >"$IO/items"
                """#)
        #expect(vault.output("waiter") == "waited", "forget-key never waited on the vault's lock")
        let forget = try vault.step("forget")
        #expect(forget.status == 64 && forget.standardError.contains("is in use"), "\(forget)")
        #expect(vault.output("items") == "1", "the key of a vault being made was deleted")
    }

    @Test func kernelAndWrappedKeysRecordNoneOrTheirOwnDirectoryAndAreForgottenToo() throws {
        let vault = try VaultSandbox()
        let service = "kk" + KeyringSession.randomID().prefix(8)
        try vault.run(
            .noSecretService,
            script: Self.prelude + """
                V init-kernel vault init --key-store keyring:user --service \(service)
                V status-kernel --json vault status --service \(service)
                head -c 32 /dev/urandom >"$IO/root.key"; chmod 600 "$IO/root.key"
                V init-file vault init --key-store key-file:"$IO/root.key" --service filed
                V status-file --json vault status --service filed --key-store key-file:"$IO/root.key"
                rm "$VDIR/\(service).prefs" "$VDIR/filed.prefs"
                V keys --json vault keys
                V forget-kernel-refused vault forget-key --service \(service) --key-id "$(KEY_ID status-kernel)" --yes
                V forget-kernel vault forget-key --service \(service) --key-id "$(KEY_ID status-kernel)" --yes --unplaced
                V forget-file vault forget-key --service filed --key-id "$(KEY_ID status-file)" --yes
                V after --json vault keys
                ls "$VDIR" >"$IO/left"
                """)
        let keys = try vault.step("keys")
        #expect(keys.status == 0, "\(keys)")
        let unlisted = try jsonObject(keys.standardOutput)["unlisted"] as? [[String: Any]]
        #expect(
            unlisted?.contains { $0["keyStore"] as? String == "secretService" } == true,
            "no Secret Service is not said: \(keys)")
        let kernel = try Self.keys(keys, service: service)
        #expect(kernel.map { $0["keyStore"] as? String } == ["kernelKeyring:user"], "\(keys)")
        #expect(kernel.first?["state"] as? String == "unplaced", "\(keys)")
        #expect(kernel.first?["directory"] is NSNull)
        let filed = try Self.keys(keys, service: "filed")
        #expect(filed.map { $0["keyStore"] as? String } == ["wrappedKeyFile"], "\(keys)")
        #expect(filed.first?["state"] as? String == "orphaned", "\(keys)")
        #expect(filed.first?["vaultId"] is NSNull)
        // Unplaced: its vault may live anywhere, so it goes only when told.
        let refused = try vault.step("forget-kernel-refused")
        #expect(refused.status == 64 && refused.standardError.contains("--unplaced"), "\(refused)")
        #expect(try vault.step("forget-kernel").status == 0)
        #expect(try vault.step("forget-file").status == 0)
        let after = try vault.step("after")
        #expect(try Self.keys(after, service: service).isEmpty, "\(after)")
        #expect(try Self.keys(after, service: "filed").isEmpty, "\(after)")
        #expect(vault.output("left")?.contains(".vaultkey") == false, "the wrapped key file is still there")
    }

    @Test func aLockedKeyringIsSaidAndForgettingThroughItAnswers75() throws {
        let vault = try VaultSandbox()
        try vault.input("set", "v")
        try vault.run(
            script: Self.prelude + """
                V set vault set --service app k
                V status --json vault status --service app
                rm -rf "$VDIR"
                LOCK
                V keys vault keys
                V forget vault forget-key --service app --key-id "$(KEY_ID status)" --yes
                UNLOCK
                V forget-unlocked vault forget-key --service app --key-id "$(KEY_ID status)" --yes
                """)
        let keys = try vault.step("keys")
        #expect(keys.status == 0, "\(keys)")
        #expect(keys.standardError.contains("secretService: not listed"), "\(keys)")
        #expect(keys.standardError.contains("locked"), "\(keys)")
        #expect(try vault.step("forget").status == 75)
        #expect(try vault.step("forget-unlocked").status == 0)
    }

    @Test func doctorNamesTheKeysWhoseVaultIsGone() throws {
        let vault = try VaultSandbox()
        try vault.input("set", "v")
        try vault.run(
            script: Self.prelude + """
                V set vault set --service ghost k
                V status --json vault status --service ghost
                KEY_ID status >"$IO/key"
                rm -rf "$VDIR"
                V doctor doctor
                V doctor-json --json doctor
                """)
        let doctor = try vault.step("doctor")
        let key = try #require(vault.output("key"))
        try #require(key.count == 16, "no key id in the status step")
        #expect(
            doctor.lines.contains {
                $0.hasPrefix("unused key") && $0.contains("ghost \(key)") && $0.contains("orphaned")
            }, "\(doctor)")
        #expect(doctor.standardOutput.contains("vault forget-key --service ghost --key-id \(key) --yes`"), "\(doctor)")
        let json = try jsonObject(try vault.step("doctor-json").standardOutput)
        let unused = json["unusedKeys"] as? [[String: Any]]
        #expect(unused?.contains { $0["service"] as? String == "ghost" && $0["keyId"] as? String == key } == true)
    }
}
