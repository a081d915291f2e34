import Foundation
import TestSupport
import Testing

/// `vaultctl vault wipe` on a vault file copied under another service name (issue 14, point 4): the original's
/// master key stays, its values stay readable, and the output says the key was left rather than claim it gone.
@Suite struct VaultCopyCommandTests {
    @Test func wipingACopyUnderAnotherNameLeavesTheOriginalsKeyAndSaysSo() throws {
        let vault = try VaultSandbox()
        let value = VaultSandbox.secret("value")
        try vault.input("set", value, secret: value)
        try vault.run(
            revealing: ["get-after"],
            script: """
                V set vault set --service app k
                cp -p "$VDIR/app.prefs" "$VDIR/appcopy.prefs"
                cp -p "$VDIR/app.prefs" "$VDIR/appcopy2.prefs"
                V wipe vault wipe --service appcopy --yes
                V wipe-json --json vault wipe --service appcopy2 --yes
                V get-after vault get --service app k --reveal
                """)
        let wipe = try Self.expectKeyLeft(vault.step("wipe"), file: vault.vaultFile("appcopy"))
        #expect(wipe.lines[0].contains("copied or renamed"), "\(wipe)")
        let json = try jsonObject(try vault.step("wipe-json").standardOutput)
        #expect(json["wiped"] as? Bool == true && json["masterKey"] as? String == "kept", "\(json)")
        #expect(!FileManager.default.fileExists(atPath: vault.vaultFile("appcopy")))
        let get = try vault.step("get-after")
        #expect(get.status == 0 && get.lines == [value], "\(get)")
    }

    @Test func wipingALegacyCopyUnderAnotherNameLeavesTheOriginalsKeyAndSaysSo() throws {
        let vault = try VaultSandbox()
        let value = VaultSandbox.secret("value")
        try vault.input("legacy", value, secret: value)
        try vault.run(
            revealing: ["get-after"],
            script: """
                VAULT_TEST_DIR="$VDIR" $H vault-make-legacy app k <"$IO/legacy.in" >/dev/null
                cp -p "$VDIR/app.prefs" "$VDIR/appcopy.prefs"
                V wipe vault wipe --service appcopy --yes
                V get-after vault get --service app k --reveal
                V wipe-app --json vault wipe --service app --yes
                """)
        let wipe = try Self.expectKeyLeft(vault.step("wipe"), file: vault.vaultFile("appcopy"))
        #expect(wipe.lines[0].contains("label"), "\(wipe)")
        let get = try vault.step("get-after")
        #expect(get.status == 0 && get.lines == [value], "\(get)")
        let json = try jsonObject(try vault.step("wipe-app").standardOutput)
        #expect(json["masterKey"] as? String == "removed", "\(json)")
    }

    /// `vault wipe --service appcopy` removed the copy and says, on one line, that the master key was left.
    static func expectKeyLeft(
        _ wipe: StepResult, file: String, sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> StepResult {
        #expect(wipe.status == 0, "\(wipe)", sourceLocation: sourceLocation)
        try #require(wipe.lines.count == 1, "\(wipe)", sourceLocation: sourceLocation)
        #expect(
            wipe.lines[0].hasPrefix("wiped vault appcopy: items and file \(file) removed; its master key was left"),
            "\(wipe)", sourceLocation: sourceLocation)
        return wipe
    }
}
