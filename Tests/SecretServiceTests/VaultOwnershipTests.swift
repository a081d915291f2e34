import Foundation
import TestSupport
import Testing

/// A vault file copied (or renamed) under another service name, against a real gnome-keyring, each step a fresh
/// process: the copy is refused, and wiping or rotating it never deletes the key the original uses (issue 14,
/// point 4). Legacy (identity format 1) vaults keep opening, and a wipe deletes their key only when the keyring
/// item carries the label the vault writes for that service.
@Suite struct VaultOwnershipTests {
    /// `SHA NAME`: the checksum of vault NAME's file; `VAULT_ID NAME`; `KEYS ID`: how many keyring items name vault
    /// id ID; `COPY FROM TO`: `cp -p` of a vault file.
    static let prelude = """
        export VAULT_TEST_DIR="$HOME/vaults"
        SHA() { sha256sum "$VAULT_TEST_DIR/$1.prefs" 2>/dev/null | cut -c1-64 || echo none; }
        VAULT_ID() { $H vault-identity "$1" | cut -d' ' -f1; }
        KEYS() { secret-tool search --all vault "$1" 2>&1 | grep -c '^attribute.key' || true; }
        COPY() { cp -p "$VAULT_TEST_DIR/$1.prefs" "$VAULT_TEST_DIR/$2.prefs"; }

        """

    static func run(_ script: String) throws -> ChildResult {
        try KeyringSession.scenario(.keyring, script: prelude + script)
    }

    /// `error wrongKey 12` -> `error wrongKey`.
    static func withoutTime(_ line: String) -> String {
        line.split(separator: " ").prefix(2).joined(separator: " ")
    }

    @Test func wipingACopyUnderAnotherNameKeepsTheOriginalsKeyAndValues() throws {
        let result = try Self.run(
            """
            echo v1 | $H vault-set app k
            $H vault-token-set app tok-1 3600
            ID=$(VAULT_ID app)
            COPY app appcopy
            $H vault-wipe appcopy; echo "status $?"
            [ -e "$VAULT_TEST_DIR/appcopy.prefs" ] && echo file || echo nofile
            KEYS "$ID"
            $H vault-get app k
            $H vault-token app
            """)
        let lines = result.lines
        try #require(lines.count == 8, "\(result)")
        #expect(Array(lines[2...6]) == ["ok", "status 0", "nofile", "1", "value v1"], "\(result)")
        #expect(lines[7].hasPrefix("valid tok-1 "), "\(result)")
    }

    @Test func aCopyOpenedUnderAnotherNameIsWrongKeyNamingTheCopyAndIsLeftUntouched() throws {
        let result = try Self.run(
            """
            echo v1 | $H vault-set app k
            COPY app appcopy
            BEFORE=$(SHA appcopy)
            $H vault-get appcopy k; echo "status $?"
            echo v2 | $H vault-set appcopy k2; echo "status $?"
            $H vault-token appcopy
            [ "$(SHA appcopy)" = "$BEFORE" ] && echo untouched || echo changed
            $H vault-get app k
            """)
        let lines = result.lines
        try #require(lines.count == 8, "\(result)")
        #expect(
            lines.dropFirst().map(Self.withoutTime)
                == [
                    "error wrongKey", "status 1", "error wrongKey", "status 1", "unavailable wrongKey", "untouched",
                    "value v1",
                ], "\(result)")
        #expect(result.standardError.contains("copied or renamed"), "the message does not name the cause: \(result)")
    }

    @Test func rotatingACopyUnderAnotherNameIsRefusedAndKeepsTheOriginalsKey() throws {
        let result = try Self.run(
            """
            echo v1 | $H vault-set app k
            ID=$(VAULT_ID app)
            COPY app appcopy
            BEFORE=$(SHA appcopy)
            $H vault-rotate appcopy; echo "status $?"
            [ "$(SHA appcopy)" = "$BEFORE" ] && echo untouched || echo changed
            KEYS "$ID"
            $H vault-get app k
            """)
        #expect(
            result.lines.map(Self.withoutTime) == ["ok", "error wrongKey", "status 1", "untouched", "1", "value v1"],
            "\(result)")
    }

    @Test func aLegacyVaultStillOpensAndRotationUpgradesItToTheServiceBoundFormat() throws {
        let result = try Self.run(
            """
            echo v1 | $H vault-make-legacy app k
            $H vault-format app
            $H vault-get app k
            OLD=$($H vault-identity app | cut -d' ' -f2)
            $H vault-rotate app
            $H vault-format app
            $H vault-get app k
            NEW=$($H vault-identity app | cut -d' ' -f2)
            secret-tool search --all key "$OLD" 2>&1 | grep -c '^attribute.key' || true
            secret-tool search --all key "$NEW" service app format 2 2>&1 | grep -c '^attribute.key' || true
            """)
        #expect(result.lines == ["ok", "1", "value v1", "ok", "3", "value v1", "0", "1"], "\(result)")
    }

    @Test func wipingALegacyCopyUnderAnotherNameLeavesTheOriginalsKeyAndWipingTheOriginalRemovesIt() throws {
        let result = try Self.run(
            """
            echo v1 | $H vault-make-legacy app k
            ID=$(VAULT_ID app)
            COPY app appcopy
            $H vault-wipe appcopy; echo "status $?"
            [ -e "$VAULT_TEST_DIR/appcopy.prefs" ] && echo file || echo nofile
            KEYS "$ID"
            $H vault-get app k
            $H vault-wipe app
            KEYS "$ID"
            """)
        #expect(result.lines == ["ok", "ok", "status 0", "nofile", "1", "value v1", "ok", "0"], "\(result)")
    }

    /// Whole-file rollback, the part that is covered (Documentation/ThreatModel.md, "Whole-file rollback"): an old
    /// copy put back after a rotation or a wipe finds no key, and is left as it is.
    @Test func anOldCopyPutBackAfterRotationOrWipeIsKeyMissingAndLeftUntouched() throws {
        let result = try Self.run(
            """
            echo v1 | $H vault-set app k
            cp -p "$VAULT_TEST_DIR/app.prefs" "$HOME/old-app.prefs"
            echo v2 | $H vault-set app k
            $H vault-rotate app
            cp -p "$HOME/old-app.prefs" "$VAULT_TEST_DIR/app.prefs"
            BEFORE=$(SHA app)
            $H vault-get app k; echo "status $?"
            [ "$(SHA app)" = "$BEFORE" ] && echo untouched || echo changed
            echo v1 | $H vault-set other k
            cp -p "$VAULT_TEST_DIR/other.prefs" "$HOME/old-other.prefs"
            $H vault-wipe other
            cp -p "$HOME/old-other.prefs" "$VAULT_TEST_DIR/other.prefs"
            BEFORE=$(SHA other)
            $H vault-get other k; echo "status $?"
            [ "$(SHA other)" = "$BEFORE" ] && echo untouched || echo changed
            """)
        #expect(
            result.lines.map(Self.withoutTime)
                == [
                    "ok", "ok", "ok", "error keyMissing", "status 1", "untouched", "ok", "ok", "error keyMissing",
                    "status 1", "untouched",
                ], "\(result)")
    }
}
