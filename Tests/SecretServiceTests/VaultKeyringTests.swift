import Foundation
import TestSupport
import Testing

/// The vault against a real gnome-keyring, each step a fresh process (an app launch), every keyring state
/// produced for real in a throwaway session.
@Suite struct VaultKeyringTests {
    /// Shell prelude: a vault directory in the session's HOME, `SHA` prints the vault file's checksum.
    static let prelude = """
        export VAULT_TEST_DIR="$HOME/vaults"
        SHA() { sha256sum "$VAULT_TEST_DIR/app.prefs" 2>/dev/null | cut -c1-64 || echo none; }
        VAULT_ID() { $H vault-identity app | cut -d' ' -f1; }

        """

    static func run(_ script: String, mode: KeyringSession.Mode = .keyring) throws -> ChildResult {
        try KeyringSession.scenario(mode, script: prelude + script)
    }

    @Test func aTokenStoredByOneLaunchIsReadByTheNext() throws {
        let result = try Self.run(
            """
            $H vault-token app
            $H vault-token-set app tok-1 3600
            $H vault-token app
            $H vault-status app
            """)
        let lines = result.lines
        try #require(lines.count == 4, "\(result)")
        #expect(lines[0].hasPrefix("absent "))
        #expect(lines[1] == "ok")
        #expect(lines[2].hasPrefix("valid tok-1 "))
        #expect(lines[3] == "file=true items=1 bus=true service=true locked=false")
    }

    @Test func aLockedKeyringIsLockedWithinTheDeadlineAndTheFileIsUntouched() throws {
        let result = try Self.run(
            """
            $H vault-token-set app tok-1 3600
            BEFORE=$(SHA)
            LOCK
            $H vault-token app
            echo new | $H vault-set app other
            $H vault-status app
            [ "$(SHA)" = "$BEFORE" ] && echo untouched || echo changed
            UNLOCK
            $H vault-token app
            """)
        let lines = result.lines
        try #require(lines.count == 6, "\(result)")
        // An answer ("locked"), not the deadline running out ("timeout").
        #expect(lines[1].hasPrefix("unavailable locked "), "\(result)")
        #expect(Self.milliseconds(lines[1]) < KeyringSession.defaultDeadlineMilliseconds)
        #expect(lines[2].hasPrefix("error locked "), "\(result)")
        #expect(lines[3] == "file=true items=1 bus=true service=true locked=true")
        #expect(lines[4] == "untouched")
        #expect(lines[5].hasPrefix("valid tok-1 "))
        // One launch, one logged keyring error.
        #expect(
            result.standardError.components(separatedBy: "reading session token 'session' failed").count == 2,
            "\(result.standardError)")
    }

    @Test(arguments: [
        ("afterFirstUnlock", "valid tok-1 | valid tok-1"), ("whenUnlocked", "valid tok-1 | unavailable locked"),
    ])
    func lockingWhileTheAppRunsFollowsTheAccessibility(mode: String, expected: String) throws {
        let result = try Self.run(
            """
            $H vault-token-set app tok-1 3600
            VAULT_TEST_ACCESSIBILITY=\(mode) $H vault-read-lock-read app
            """)
        #expect(result.lines.last == expected, "\(result)")
    }

    @Test func noSecretServiceIsUnavailableAndNothingIsWritten() throws {
        let result = try Self.run(
            """
            $H vault-token app
            echo v | $H vault-set app k
            [ -e "$VAULT_TEST_DIR/app.prefs" ] && echo file || echo nofile
            """, mode: .noSecretService)
        #expect(result.lines.count == 3, "\(result)")
        #expect(result.lines.first?.hasPrefix("absent ") == true, "no file, so no token: \(result)")
        #expect(result.lines.dropFirst().first?.hasPrefix("error unavailable ") == true)
        #expect(result.lines.last == "nofile")
    }

    @Test func noSecretServiceWithAnExistingVaultIsUnavailable() throws {
        // The vault is written in a keyring session, then read where no Secret Service exists.
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("vault-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let written = try KeyringSession.scenario(script: "VAULT_TEST_DIR=\(dir) $H vault-token-set app tok 3600")
        try #require(written.lines == ["ok"], "\(written)")
        let read = try KeyringSession.scenario(.noSecretService, script: "VAULT_TEST_DIR=\(dir) $H vault-token app")
        #expect(read.lines.first?.hasPrefix("unavailable noSecretService ") == true, "\(read)")
        let noBus = try ChildProcess.run(
            KeyringSession.helper, ["vault-token", "app"],
            environment: [
                "VAULT_TEST_DIR": dir, "DBUS_SESSION_BUS_ADDRESS": nil, "DISPLAY": nil,
                "XDG_RUNTIME_DIR": "/nonexistent",
            ])
        #expect(noBus.lines.first?.hasPrefix("unavailable noSecretService ") == true, "\(noBus)")
    }

    @Test func aStoppedDaemonIsATimeoutAtTheDeadline() throws {
        let result = try Self.run(
            """
            $H vault-token-set app tok-1 3600
            PID=$(DAEMON_PID)
            kill -STOP "$PID"
            VAULT_TEST_DEADLINE_MS=700 $H vault-token app
            kill -CONT "$PID"
            $H vault-token app
            """)
        let lines = result.lines
        try #require(lines.count == 3, "\(result)")
        #expect(lines[1].hasPrefix("unavailable timeout "), "\(result)")
        let elapsed = Self.milliseconds(lines[1])
        // Ended by the 700 ms deadline, never before it, and not by D-Bus's own 25 s timeout: the upper bound is
        // half of that, far above what a loaded machine adds to the deadline.
        #expect(elapsed >= 650 && elapsed < 12_500, "\(lines[1])")
        #expect(lines[2].hasPrefix("valid tok-1 "))
    }

    @Test func aDeletedMasterKeyIsKeyMissingAndNoNewKeyIsMinted() throws {
        let result = try Self.run(
            """
            $H vault-token-set app tok-1 3600
            ID=$(VAULT_ID)
            BEFORE=$(SHA)
            secret-tool clear vault "$ID"
            $H vault-token app
            echo v | $H vault-set app other
            [ "$(SHA)" = "$BEFORE" ] && echo untouched || echo changed
            secret-tool search --all vault "$ID" 2>&1 | grep -c '^attribute.key' || true
            """)
        let lines = result.lines
        try #require(lines.count == 5, "\(result)")
        #expect(lines[1].hasPrefix("unavailable keyMissing "), "\(result)")
        #expect(lines[2].hasPrefix("error keyMissing "))
        #expect(lines[3] == "untouched")
        #expect(lines[4] == "0", "a new key was minted: \(result)")
    }

    /// Planted key items: another app of the same user can store an item with the vault's attributes (here with
    /// `secret-tool store`, as such an app would), in the default collection or another one. The vault must answer
    /// `wrongKey`, never trap on the key's length and never pick one of several candidates.
    static let plantedKeys: [(String, String)] = [
        ("a 5-byte key in place of the real one", "secret-tool clear vault \"$ID\"\nprintf 'abcde' | PLANT"),
        ("an empty key in place of the real one", "secret-tool clear vault \"$ID\"\nprintf '' | PLANT"),
        ("a 64-byte key in place of the real one", "secret-tool clear vault \"$ID\"\nhead -c 64 /dev/urandom | PLANT"),
        ("a second item beside the real key", "printf 'abcde' | PLANT --collection=session"),
        ("a 32-byte second item beside the real key", "head -c 32 /dev/urandom | PLANT --collection=session"),
        (
            "the real key moved to another collection",
            "REAL=$($H secret-lookup \"$ID\" \"$KEY\" --service app | cut -d' ' -f2)\nsecret-tool clear vault \"$ID\"\n"
                + "echo \"$REAL\" | $H secret-store \"$ID\" \"$KEY\" --service app --collection session >/dev/null"
        ),
    ]

    @Test(arguments: plantedKeys)
    func aPlantedMasterKeyIsWrongKeyNeverACrashAndTheFileIsUntouched(_ planted: (String, String)) throws {
        let result = try Self.run(
            """
            PLANT() { secret-tool store --label=planted "$@" vault "$ID" key "$KEY" format 2 service app \
              xdg:schema dev.securevault.MasterKey; }
            $H vault-token-set app tok-1 3600
            ID=$(VAULT_ID); KEY=$($H vault-identity app | cut -d' ' -f2)
            BEFORE=$(SHA)
            \(planted.1)
            $H vault-token app; echo "status $?"
            $H vault-get app session; echo "status $?"
            echo v | $H vault-set app other; echo "status $?"
            $H vault-rotate app; echo "status $?"
            [ "$(SHA)" = "$BEFORE" ] && echo untouched || echo changed
            """)
        let lines = result.lines
        try #require(lines.count == 10, "\(planted.0): \(result)")
        #expect(lines[1].hasPrefix("unavailable wrongKey "), "\(planted.0): \(result)")
        #expect(lines[2] == "status 0", "\(planted.0): sessionToken() never throws: \(result)")
        for index in [3, 5, 7] {
            #expect(lines[index].hasPrefix("error wrongKey "), "\(planted.0), line \(index): \(result)")
            #expect(lines[index + 1] == "status 1", "\(planted.0): a typed error, not a signal: \(result)")
        }
        #expect(lines[9] == "untouched", "\(planted.0): \(result)")
        #expect(!result.standardError.contains("Illegal instruction"), "\(result.standardError)")
    }

    @Test func aResetKeyringIsKeyMissingNeverAFreshVault() throws {
        let result = try Self.run(
            """
            $H vault-token-set app tok-1 3600
            BEFORE=$(SHA)
            : > "$HOME/.local/share/keyrings/login.keyring"
            UNLOCK
            $H vault-token app
            [ "$(SHA)" = "$BEFORE" ] && echo untouched || echo changed
            """)
        let lines = result.lines
        try #require(lines.count == 3, "\(result)")
        #expect(lines[1].hasPrefix("unavailable keyMissing "), "\(result)")
        #expect(lines[2] == "untouched")
    }

    @Test func wipeRemovesTheFileAndTheMasterKey() throws {
        let result = try Self.run(
            """
            $H vault-token-set app tok-1 3600
            ID=$(VAULT_ID)
            secret-tool search --all vault "$ID" 2>&1 | grep -c '^attribute.key'
            $H vault-wipe app
            secret-tool search --all vault "$ID" 2>&1 | grep -c '^attribute.key' || true
            [ -e "$VAULT_TEST_DIR/app.prefs" ] && echo file || echo nofile
            $H vault-token app
            """)
        #expect(result.lines.count == 6, "\(result)")
        #expect(Array(result.lines.dropFirst().prefix(4)) == ["1", "ok", "0", "nofile"], "\(result)")
        #expect(result.lines.last?.hasPrefix("absent ") == true)
    }

    @Test func rotationReplacesTheKeyInTheKeyringAndKeepsTheToken() throws {
        let result = try Self.run(
            """
            $H vault-token-set app tok-1 3600
            OLD=$($H vault-identity app | cut -d' ' -f2)
            $H vault-rotate app
            NEW=$($H vault-identity app | cut -d' ' -f2)
            [ "$OLD" != "$NEW" ] && echo new-id || echo same-id
            secret-tool search --all key "$OLD" 2>&1 | grep -c '^attribute.key' || true
            secret-tool search --all key "$NEW" 2>&1 | grep -c '^attribute.key' || true
            $H vault-token app
            """)
        #expect(Array(result.lines.prefix(5)) == ["ok", "ok", "new-id", "0", "1"], "\(result)")
        #expect(result.lines.last?.hasPrefix("valid tok-1 ") == true, "\(result)")
    }

    @Test func processesCreatingTheSameVaultAtOnceShareOneFileAndOneKey() throws {
        let result = try Self.run(
            """
            for n in 1 2 3 4 5 6; do (echo "value-$n" | $H vault-set app "k$n" > /dev/null) & done
            wait
            $H vault-dump app
            secret-tool search --all format 2 service app 2>&1 | grep -c '^attribute.vault'
            """)
        #expect(result.lines == (1...6).map { "k\($0) value-\($0)" } + ["1"], "\(result)")
    }

    @Test func aServiceWithoutDefaultKeyringIsUnavailable() throws {
        let result = try Self.run("echo v | $H vault-set app k", mode: .noKeyring)
        #expect(result.lines.first?.hasPrefix("error unavailable ") == true, "\(result)")
    }

    static func milliseconds(_ line: String) -> Int {
        Int(line.split(separator: " ").last ?? "") ?? .max
    }
}
