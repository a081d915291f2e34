import Foundation
import TestSupport
import Testing

/// `vault adopt` and `Vault.adopt(matching:as:deletingSource:dryRun:)` (issue 37, existing keyring items): a
/// secret an app's earlier version kept straight in the Secret Service (here stored by `secret-tool`, as keytar
/// and python keyring store theirs) moves into the vault, read back and compared first, the source deleted only
/// when asked and only then, against a real gnome-keyring.
@Suite struct VaultAdoptTests {
    /// `SOURCE`: the keytar-like item's secret, or nothing; `STORE_SOURCE`: stores it again from `$IO/src.in`.
    static let prelude = #"""
        SOURCE() { secret-tool lookup service com.example.app account refresh 2>/dev/null; }
        STORE_SOURCE() { secret-tool store --label='keytar: refresh' service com.example.app account refresh <"$IO/src.in"; }
        ADOPT=(vault adopt --service app --attribute service=com.example.app --attribute account=refresh --as refreshToken)

        """#

    @Test func aKeytarItemIsCopiedVerifiedAndOnlyThenDeletedAndARunAgainChangesNothing() throws {
        let vault = try VaultSandbox()
        let secret = VaultSandbox.secret("refresh")
        try vault.input("src", secret, secret: secret)
        try vault.run(
            revealing: ["get", "get-after"],
            script: Self.prelude + #"""
                STORE_SOURCE
                V dry --json "${ADOPT[@]}" --dry-run --delete-source
                [ -e "$VDIR" ] && echo "$(ls -A "$VDIR")" >"$IO/after-dry" || echo nothing >"$IO/after-dry"
                SOURCE >"$IO/source-1"
                V adopt --json "${ADOPT[@]}"
                V get vault get --service app refreshToken --reveal
                SOURCE >"$IO/source-2"
                cp "$VDIR/app.prefs" "$IO/before.prefs"
                V again "${ADOPT[@]}"
                cmp -s "$VDIR/app.prefs" "$IO/before.prefs"; echo $? >"$IO/unchanged"
                V move --json "${ADOPT[@]}" --delete-source
                SOURCE >"$IO/source-3"; echo $? >"$IO/source-3.rc"
                V get-after vault get --service app refreshToken --reveal
                V gone "${ADOPT[@]}"
                """#)
        let dry = try vault.step("dry")
        #expect(dry.status == 0, "\(dry)")
        let dryJSON = try jsonObject(dry.standardOutput)
        #expect(dryJSON["dryRun"] as? Bool == true && dryJSON["outcome"] as? String == "copied", "\(dry)")
        #expect(dryJSON["deletedSource"] as? Bool == false)
        let attributes = (dryJSON["source"] as? [String: Any])?["attributes"] as? [String: String]
        #expect(attributes?["service"] == "com.example.app" && attributes?["account"] == "refresh", "\(dry)")
        #expect(vault.output("after-dry") == "nothing", "a dry run created \(vault.output("after-dry") ?? "")")
        #expect(vault.output("source-1") == secret, "a dry run touched the source")

        let adopt = try vault.step("adopt")
        #expect(adopt.status == 0, "\(adopt)")
        #expect(try jsonObject(adopt.standardOutput)["outcome"] as? String == "copied")
        #expect(try vault.step("get").standardOutput == secret + "\n", "the vault item is not the keyring's secret")
        #expect(vault.output("source-2") == secret, "the source changed without --delete-source")

        let again = try vault.step("again")
        #expect(again.status == 0 && again.standardOutput.hasPrefix("unchanged: "), "\(again)")
        #expect(vault.output("unchanged") == "0", "adopting again rewrote the vault file")

        let move = try vault.step("move")
        #expect(move.status == 0, "\(move)")
        let moved = try jsonObject(move.standardOutput)
        #expect(moved["outcome"] as? String == "unchanged" && moved["deletedSource"] as? Bool == true, "\(move)")
        #expect(vault.output("source-3.rc") != "0", "the source is still in the keyring after --delete-source")
        #expect(try vault.step("get-after").standardOutput == secret + "\n")
        let gone = try vault.step("gone")
        #expect(gone.status == 66 && gone.standardError.contains("no keyring item matches"), "\(gone)")
    }

    @Test func ambiguousForeignAndConflictingAdoptionsChangeNothing() throws {
        let vault = try VaultSandbox()
        let (one, two) = (VaultSandbox.secret("one"), VaultSandbox.secret("two"))
        try vault.input("a", one, secret: one)
        try vault.input("b", two, secret: two)
        try vault.input("src", one)
        try vault.input("set-other", "other")
        try vault.input("set-app", "v")
        try vault.run(
            revealing: ["get-k"],
            script: Self.prelude + #"""
                secret-tool store --label=a service shared account a <"$IO/a.in"
                secret-tool store --label=b service shared account b <"$IO/b.in"
                V several vault adopt --service app --attribute service=shared --as k
                [ -e "$VDIR/app.prefs" ] && echo file >"$IO/after-several" || echo nofile >"$IO/after-several"
                secret-tool lookup service shared account a >"$IO/a-after"; secret-tool lookup service shared account b >"$IO/b-after"
                # A vault's own master key has `service` = its name: never adopted.
                V set-app vault set --service mine k
                V master vault adopt --service other --attribute service=mine --as stolen
                V mine vault get --service mine k
                # A vault item of that name with another value: refused, both sides unchanged.
                V set-other vault set --service app refreshToken
                STORE_SOURCE
                V conflict "${ADOPT[@]}" --delete-source
                SOURCE >"$IO/source"
                V get-k vault get --service app refreshToken --reveal
                V bad-attribute vault adopt --service app --attribute nonsense --as k
                V no-attribute vault adopt --service app --as k
                """#)
        let several = try vault.step("several")
        #expect(several.status == 64 && several.standardError.contains("2 keyring items match"), "\(several)")
        #expect(vault.output("after-several") == "nofile")
        #expect(vault.output("a-after") == one && vault.output("b-after") == two, "an ambiguous adopt changed a source")
        let master = try vault.step("master")
        #expect(master.status == 66, "a vault master key was adopted: \(master)")
        #expect(try vault.step("mine").status == 0, "vault mine lost its key")
        let conflict = try vault.step("conflict")
        #expect(conflict.status == 64 && conflict.standardError.contains("exists with another value"), "\(conflict)")
        #expect(vault.output("source") == one, "a refused adopt deleted the source")
        #expect(try vault.step("get-k").standardOutput == "other\n", "a refused adopt replaced the vault item")
        #expect(try vault.step("bad-attribute").status == 64)
        #expect(try vault.step("no-attribute").status == 64)
    }

    @Test func aLockedKeyringIs75AndNothingMoves() throws {
        let vault = try VaultSandbox()
        let secret = VaultSandbox.secret("refresh")
        try vault.input("src", secret, secret: secret)
        try vault.run(
            script: Self.prelude + #"""
                STORE_SOURCE
                LOCK
                V locked "${ADOPT[@]}" --delete-source
                UNLOCK
                SOURCE >"$IO/source"
                [ -e "$VDIR/app.prefs" ] && echo file >"$IO/after" || echo nofile >"$IO/after"
                """#)
        #expect(try vault.step("locked").status == 75)
        #expect(vault.output("source") == secret)
        #expect(vault.output("after") == "nofile")
    }

    /// A SIGKILL at any instant of `adopt --delete-source`, 40 rounds at delays spread over its first 800 ms: afterwards the
    /// source is whole, or the vault item holds the secret (the kill came after the copy was verified). Never
    /// neither, never another value.
    @Test func aKillAtAnyInstantLeavesTheSourceOrTheVerifiedCopy() throws {
        let vault = try VaultSandbox()
        let secret = VaultSandbox.secret("refresh")
        try vault.input("src", secret, secret: secret)
        try vault.run(
            script: Self.prelude + #"""
                for r in $(seq 1 40); do
                  STORE_SOURCE
                  "$VAULTCTL" --dir "$VDIR" vault delete --service app refreshToken >/dev/null 2>&1
                  "$VAULTCTL" --dir "$VDIR" "${ADOPT[@]}" --delete-source >/dev/null 2>&1 & pid=$!
                  sleep "$(printf '0.%03d' $(( (r * 97) % 800 )))"
                  kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
                  s=$(SOURCE); v=$("$VAULTCTL" --dir "$VDIR" vault get --service app refreshToken --reveal 2>/dev/null)
                  [ "$s" = "$(cat "$IO/src.in")" ] && s=source || s=${s:+other}
                  [ "$v" = "$(cat "$IO/src.in")" ] && v=copy || v=${v:+other}
                  echo "$r ${s:-none} ${v:-none}" >>"$IO/rounds"
                done
                """#)
        let rounds = try #require(vault.output("rounds")).split(separator: "\n")
        #expect(rounds.count == 40)
        // Which instants the kills met (not asserted: a loaded machine moves them): printed for the record.
        let states = Dictionary(grouping: rounds.map { $0.split(separator: " ").dropFirst().joined(separator: "+") }) {
            $0
        }
        print("adopt kills: " + states.map { "\($0.key) \($0.value.count)" }.sorted().joined(separator: ", "))
        for round in rounds {
            let fields = round.split(separator: " ").map(String.init)
            #expect(fields.count == 3 && !fields.contains("other"), "round \(round): a value nobody stored")
            #expect(
                fields.count == 3 && (fields[1] == "source" || fields[2] == "copy"),
                "round \(round): the secret was lost")
        }
    }
}
