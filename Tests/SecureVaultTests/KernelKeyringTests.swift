import Foundation
import TestSupport
import Testing

/// The kernel keyring key store (`KeyStore.kernelKeyring`) against the real keyrings of this machine: each
/// step a fresh process (the test helper), every state (revoked, expired, a full quota) produced for real.
@Suite(.serialized) struct KernelKeyringTests {
    /// Shell prelude: `$H` the helper, a vault directory, `SHA` the vault file's checksum, `IDS` sets `$V` and
    /// `$K` to the file's vault and key ids.
    static let prelude = """
        SHA() { sha256sum "$VAULT_TEST_DIR/app.prefs" 2>/dev/null | cut -c1-64 || echo none; }
        IDS() { set -- $($H vault-identity "${1:-app}"); V=$1; K=$2; }
        # The state of a key that is being removed: an invalidated key reads "revoked" until the kernel's
        # garbage collector unlinks it, then "absent". Waits for that event (at most 60 s).
        GONE() { for _ in $(seq 1 1200); do [ "$($H keyring-key "$1" "$2" "$3")" = absent ] && break; sleep 0.05; done
          $H keyring-key "$1" "$2" "$3"; }

        """

    /// Runs `script` with bash, the vault's key store being the kernel's `keyring` keyring.
    static func run(_ script: String, keyring: String = "user", user: UInt32? = nil) throws -> ChildResult {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("keyring-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        var command = ["/bin/bash", "-c", prelude + script]
        if let user {
            // Another user's own keyrings and quota (root's quota is too large to fill).
            chown(directory.path, user, user)
            command = ["/usr/bin/setpriv", "--reuid=\(user)", "--regid=\(user)", "--clear-groups"] + command
        }
        return try ChildProcess.run(
            command[0], Array(command.dropFirst()),
            environment: [
                "H": KeyringSession.helper, "VAULT_TEST_DIR": directory.path + "/vaults",
                "VAULT_TEST_KEY_STORE": "keyring:\(keyring)", "DBUS_SESSION_BUS_ADDRESS": nil,
            ])
    }

    @Test(arguments: ["user", "persistent"])
    func anotherProcessReadsTheKeyAndRotationAndWipeRemoveIt(keyring: String) throws {
        let result = try Self.run(
            """
            $H vault-token-set app tok-1 none
            IDS; K1=$K
            $H vault-token app
            $H keyring-key app $V $K1
            $H vault-status app
            $H vault-rotate app
            IDS; K2=$K
            GONE app $V $K1
            $H keyring-key app $V $K2
            $H vault-token app
            $H vault-wipe app
            GONE app $V $K2
            $H vault-token app
            """, keyring: keyring)
        let lines = result.lines
        try #require(lines.count == 11, "\(result)")
        #expect(lines[0] == "ok")
        #expect(lines[1].hasPrefix("valid tok-1 "), "a fresh process reads it: \(result)")
        #expect(lines[2] == "present")
        #expect(lines[3].hasPrefix("file=true items=1 "), "\(result)")
        #expect(lines[4] == "ok")
        #expect(lines[5] == "absent", "the old key is gone after a rotation: \(result)")
        #expect(lines[6] == "present")
        #expect(lines[7].hasPrefix("valid tok-1 "), "\(result)")
        #expect(lines[8] == "ok")
        #expect(lines[9] == "absent", "wipe = key gone: \(result)")
        #expect(lines[10].hasPrefix("absent "), "\(result)")
    }

    @Test func aRevokedOrExpiredKeyIsKeyMissingAndTheFileIsUntouched() throws {
        let result = try Self.run(
            """
            $H vault-token-set app tok-1 none
            BEFORE=$(SHA)
            $H keyring-revoke app
            $H vault-token app
            echo v | $H vault-set app other
            [ "$(SHA)" = "$BEFORE" ] && echo untouched || echo changed
            $H vault-token-set b tok-b none >/dev/null
            IDS b
            $H keyring-expire b 1
            for _ in $(seq 1 1200); do [ "$($H keyring-key b $V $K)" = expired ] && break; sleep 0.05; done
            $H keyring-key b $V $K
            $H vault-token b
            $H vault-wipe b
            $H vault-token b
            """)
        let lines = result.lines
        try #require(lines.count == 10, "\(result)")
        #expect(lines[1] == "ok")
        #expect(lines[2].hasPrefix("unavailable keyMissing "), "\(result)")
        #expect(lines[3].hasPrefix("error keyMissing "), "\(result)")
        #expect(lines[4] == "untouched")
        #expect(lines[5] == "ok")
        #expect(lines[6] == "expired", "\(result)")
        #expect(lines[7].hasPrefix("unavailable keyMissing "), "\(result)")
        #expect(lines[8] == "ok", "a vault whose key expired can still be wiped: \(result)")
        #expect(lines[9].hasPrefix("absent "), "\(result)")
        #expect(result.standardError.contains("the key was revoked"), "\(result.standardError)")
        #expect(result.standardError.contains("the key expired"), "\(result.standardError)")
    }

    /// Run as another user, whose kernel key quota (/proc/sys/kernel/keys/maxbytes) can be filled: uid 65533, which
    /// no other test runs as (nobody's quota, full for a while here, would fail `DoctorTests`' keyring probe as
    /// nobody when the two run at once).
    @Test func aFullKeyQuotaIsDiskFullAndLosesNothing() throws {
        let result = try Self.run(
            """
            $H keyring-fill --clear >/dev/null
            $H vault-token-set app tok-1 none
            BEFORE=$(SHA)
            $H keyring-fill
            $H vault-rotate app
            $H vault-token app
            [ "$(SHA)" = "$BEFORE" ] && echo untouched || echo changed
            $H vault-token-set other tok-2 none
            $H keyring-fill --clear >/dev/null
            $H vault-rotate app
            $H vault-token app
            $H vault-wipe app
            $H keyring-fill --clear >/dev/null
            """, user: 65533)
        let lines = result.lines
        try #require(lines.count == 9, "\(result)")
        #expect(lines[0] == "ok", "\(result)")
        #expect(lines[1].hasPrefix("full after "), "\(result)")
        #expect(lines[2].hasPrefix("error diskFull "), "the new key does not fit: \(result)")
        #expect(lines[3].hasPrefix("valid tok-1 "), "the vault is intact under its old key: \(result)")
        #expect(lines[4] == "untouched")
        #expect(lines[5].hasPrefix("error diskFull "), "a new vault's key does not fit either: \(result)")
        #expect(lines[6] == "ok", "with room again, the rotation goes through: \(result)")
        #expect(lines[7].hasPrefix("valid tok-1 "), "\(result)")
        #expect(lines[8] == "ok")
        #expect(result.standardError.contains("kernel key quota"), "\(result.standardError)")
    }

    /// The per-session cache (`Configuration.keyCache`) in front of a passphrase: derived once per session. A
    /// process configured with a wrong passphrase still opens the vault from the cache, which proves that no
    /// derivation happened (one would have failed); without the cache the same process is refused. The entry
    /// expires after its timeout, and a rotation drops it.
    @Test func theSessionCacheSparesTheDerivationUntilItExpiresOrTheKeyIsRotated() throws {
        let result = try Self.run(
            """
            $H keyring-session '
              export VAULT_TEST_CACHE=session:600
              VAULT_TEST_KEY_STORE=passphrase:right $H vault-token-set app tok-1 none
              VAULT_TEST_KEY_STORE=passphrase:right $H vault-token app
              VAULT_TEST_KEY_STORE=passphrase:right $H keyring-cache-key app
              VAULT_TEST_KEY_STORE=passphrase:wrong $H vault-token app
              VAULT_TEST_CACHE= VAULT_TEST_KEY_STORE=passphrase:wrong $H vault-token app
              VAULT_TEST_KEY_STORE=passphrase:right $H vault-rotate app
              VAULT_TEST_KEY_STORE=passphrase:wrong $H vault-token app
              VAULT_TEST_KEY_STORE=passphrase:right VAULT_TEST_CACHE=session:1 $H vault-token app
              for _ in $(seq 1 1200); do
                [ "$(VAULT_TEST_KEY_STORE=passphrase:right $H keyring-cache-key app)" != present ] && break; sleep 0.05
              done
              VAULT_TEST_KEY_STORE=passphrase:right $H keyring-cache-key app
              VAULT_TEST_KEY_STORE=passphrase:wrong $H vault-token app
              VAULT_TEST_KEY_STORE=passphrase:right $H vault-token app
              VAULT_TEST_KEY_STORE=passphrase:wrong $H vault-rotate app
              VAULT_TEST_KEY_STORE=passphrase:right $H vault-token app
              set -- $($H vault-identity app)
              VAULT_TEST_KEY_STORE=passphrase:right $H keyring-cache-key app
              VAULT_TEST_KEY_STORE=passphrase:right $H vault-wipe app
              VAULT_TEST_KEY_STORE=passphrase:right $H keyring-cache-key app "$1" "$2"
            '
            """, keyring: "session")
        let lines = result.lines
        try #require(lines.count == 16, "\(result)")
        #expect(lines[0] == "ok")
        #expect(lines[1].hasPrefix("valid tok-1 "))
        #expect(lines[2] == "present", "the key is cached: \(result)")
        #expect(lines[3].hasPrefix("valid tok-1 "), "from the cache, no derivation: \(result)")
        #expect(lines[4].hasPrefix("unavailable wrongKey "), "without the cache, the passphrase decides: \(result)")
        #expect(lines[5] == "ok")
        #expect(lines[6].hasPrefix("unavailable wrongKey "), "the new key is not cached yet: \(result)")
        #expect(lines[7].hasPrefix("valid tok-1 "), "\(result)")
        #expect(["expired", "absent"].contains(lines[8]), "the entry expired: \(result)")
        #expect(lines[9].hasPrefix("unavailable wrongKey "), "an expired entry is not used: \(result)")
        #expect(lines[10].hasPrefix("valid tok-1 "), "cached again by a process with the passphrase: \(result)")
        #expect(lines[11].hasPrefix("error wrongKey "), "no rotation on the cache alone: \(result)")
        #expect(lines[12].hasPrefix("valid tok-1 "), "and the vault is as it was: \(result)")
        #expect(lines[13] == "present")
        #expect(lines[14] == "ok")
        // An invalidated key reads "revoked" until the kernel's garbage collector unlinks it: gone either way.
        #expect(["absent", "revoked"].contains(lines[15]), "a wipe removes the cached key too: \(result)")
    }

    /// The session keyring is what a login gives its processes (PAM's pam_keyinit): `keyring-session` gives
    /// the script one. Its processes share the key; another session does not see it (the key goes with its
    /// session). A process outside any session gets the user-session keyring from the kernel, which outlives
    /// sessions: refused.
    @Test func aSessionKeyIsSharedByTheSessionAndGoneWithIt() throws {
        let result = try Self.run(
            """
            $H keyring-session '$H vault-token-set app tok-1 none; $H vault-token app'
            $H keyring-session '$H vault-token app'
            $H vault-token-set outside tok-2 none
            $H keyring-session '
              VAULT_TEST_KEY_STORE=keyring:user $H vault-token-set u tok-u none
              VAULT_TEST_KEY_STORE=keyring:user $H vault-token u
              $H vault-token u
              VAULT_TEST_KEY_STORE=keyring:user $H vault-wipe u'
            """, keyring: "session")
        let lines = result.lines
        try #require(lines.count == 8, "\(result)")
        #expect(lines[0] == "ok")
        #expect(lines[1].hasPrefix("valid tok-1 "), "a process of the session reads it: \(result)")
        #expect(lines[2].hasPrefix("unavailable keyMissing "), "another session has no such key: \(result)")
        #expect(lines[3].hasPrefix("error unavailable "), "\(result)")
        #expect(result.standardError.contains("no session keyring"), "\(result.standardError)")
        // The user keyring from inside a session that does not link it (as a systemd service's private keyring):
        // its keys are still readable (this process possesses the keyring), and a vault that keeps its key
        // there is not opened through the session keyring, which could find it by a recursive search.
        #expect(lines[4] == "ok")
        #expect(lines[5].hasPrefix("valid tok-u "), "\(result)")
        #expect(lines[6].hasPrefix("unavailable wrongKey "), "\(result)")
        #expect(lines[7] == "ok")
        #expect(result.standardError.contains("keeps its key in the kernel's user keyring"), "\(result.standardError)")
    }
}
