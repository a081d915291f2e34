import Foundation
import TestSupport
import Testing

/// Every hint the suite can provoke is a command that runs as printed (issue 40, point 1): each step below makes
/// vaultctl (or the library under it) print a fix between backquotes, the script runs that text with `bash -c`
/// exactly as printed, and the hint's own outcome is asserted: never a usage error (64, argument-parser's 2), and
/// the answer the hint promises. Not provoked here: the systemd-creds "host key is root's" hint, which only a user
/// other than root meets (the suite runs as root, whose systemd-creds can use the host key).
@Suite struct HintsRunTests {
    /// `HINT STEP N`: the Nth backquoted text in step STEP's stderr; `RUN_HINT STEP N OUT`: runs it with bash
    /// (stdin from `$IO/OUT.in` if there is one), keeping its exit code, stdout and stderr under `$IO/OUT.*`.
    static let prelude = #"""
        HINT() { grep -o '`[^`]*`' "$IO/$1.err" | sed -n "${2}p" | tr -d '`'; }
        RUN_HINT() {
          local hint; hint=$(HINT "$1" "$2"); echo "$hint" >"$IO/$3.hint"
          local input=/dev/null; [ -e "$IO/$3.in" ] && input="$IO/$3.in"
          PATH="$(dirname "$VAULTCTL"):$PATH" bash -c "$hint" <"$input" >"$IO/$3.out" 2>"$IO/$3.err"
          echo $? >"$IO/$3.rc"
        }

        """#

    @Test func everyHintTheSuiteCanProvokeRunsAsPrinted() throws {
        let vault = try VaultSandbox()
        try vault.input("missing-new", "v0")
        try vault.input("set-new", "v2")
        try vault.run(
            revealing: ["get-after"],
            script: Self.prelude + #"""
                KEY="$IO/keys dir/vault.key"; mkdir -p "$IO/keys dir"
                # A key-file vault with no key file yet: the hint makes the key (vault init), then the set works.
                V missing-new vault set --key-store key-file:"$KEY" --service kf k
                RUN_HINT missing-new 1 init-hint
                V set-new vault set --key-store key-file:"$KEY" --service kf k
                # The key file gone under an existing vault: the hint removes the vault (wipe), never `init`.
                rm "$KEY"
                V missing-existing vault get --key-store key-file:"$KEY" --service kf k
                RUN_HINT missing-existing 1 wipe-hint
                # A value given as an argument: the hint pipes it in.
                V set-arg vault set --service app k v1
                VALUE=v1 RUN_HINT set-arg 1 set-arg-hint
                V get-after vault get --service app k --reveal
                # A damaged store: verify and repair.
                V pset prefs set ui theme dark
                V pset2 prefs set ui width 280 --type int
                printf 'XXXX' | dd of="$VDIR/ui.prefs" bs=1 seek=4300 conv=notrunc 2>/dev/null
                V damaged prefs get ui theme
                RUN_HINT damaged 1 verify-hint
                RUN_HINT damaged 2 repair-hint
                # A key no key store keeps: the hint lists the keys there are.
                V forget-missing vault forget-key --service app --key-id 0123456789abcdef --yes
                RUN_HINT forget-missing 1 keys-hint
                # doctor's unused key: its forget-key command.
                V status --json vault status --service app
                rm "$VDIR/app.prefs"
                V doctor doctor
                grep -m1 '^unused key .* app .* in secretService' "$IO/doctor.out" | grep -o '`[^`]*`' | tr -d '`' >"$IO/forget-hint.hint"
                PATH="$(dirname "$VAULTCTL"):$PATH" bash -c "$(cat "$IO/forget-hint.hint")" >"$IO/forget-hint.out" \
                  2>"$IO/forget-hint.err"; echo $? >"$IO/forget-hint.rc"
                """#)
        func outcome(_ name: String) -> (status: Int32?, hint: String?) {
            (vault.output(name + ".rc").flatMap { Int32($0) }, vault.output(name + ".hint"))
        }
        func expectRan(_ name: String, _ expected: Int32, sourceLocation: SourceLocation = #_sourceLocation) {
            let (status, hint) = outcome(name)
            #expect(hint?.isEmpty == false, "step \(name): no hint between backquotes", sourceLocation: sourceLocation)
            let said = vault.output(name + ".err") ?? ""
            let ran = status.map(String.init) ?? "?"
            #expect(
                status == expected,
                "the hint of \(name) (\(hint ?? "none")) exited \(ran), not \(expected): \(said)",
                sourceLocation: sourceLocation)
            #expect(status != 64 && status != 2, "the hint of \(name) is a usage error", sourceLocation: sourceLocation)
        }
        #expect(try vault.step("missing-new").status == 78)
        #expect(outcome("init-hint").hint?.contains("vault init --key-store key-file:") == true)
        expectRan("init-hint", 0)
        #expect(try vault.step("set-new").status == 0, "the key the hint made does not serve the vault")
        #expect(try vault.step("missing-existing").status == 78)
        #expect(outcome("wipe-hint").hint?.contains("vault wipe") == true)
        expectRan("wipe-hint", 0)
        #expect(!FileManager.default.fileExists(atPath: vault.vaultFile("kf")), "the wipe hint left the vault")
        #expect(try vault.step("set-arg").status == 64)
        expectRan("set-arg-hint", 0)
        #expect(try vault.step("get-after").standardOutput == "v1\n", "the hint did not store the value in vault app")
        #expect(try vault.step("damaged").status == 65)
        expectRan("verify-hint", 65)
        expectRan("repair-hint", 0)
        #expect(try vault.step("forget-missing").status == 66)
        expectRan("keys-hint", 0)
        expectRan("forget-hint", 0)
    }
}
