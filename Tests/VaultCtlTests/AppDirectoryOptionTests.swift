import Foundation
import TestSupport
import Testing

/// `--app <id>` and `VAULTCTL_APP` / `VAULTCTL_DIR` (issue 40, point 3): vaultctl finds what an app wrote in
/// `AppDirectory(<id>)` (`$XDG_DATA_HOME/<id>/prefs` and `/vault`), as the README tells apps to lay it out.
@Suite struct AppDirectoryOptionTests {
    /// vaultctl with `arguments`, `XDG_DATA_HOME` in the sandbox, no `--dir`, and `environment` added.
    static func vaultctl(
        _ sandbox: PrefsSandbox, _ arguments: [String], environment: [String: String?] = [:]
    ) throws -> ChildResult {
        var full: [String: String?] = [
            "XDG_DATA_HOME": sandbox.path("xdg"), "HOME": sandbox.path("home"), "VAULTCTL_DIR": nil,
            "VAULTCTL_APP": nil, "VAULTCTL_KEY_STORE": nil,
        ]
        full.merge(environment) { $1 }
        return try ChildProcess.run(PrefsSandbox.vaultctl, arguments, environment: full)
    }

    @Test func appSelectsTheAppsPrefsAndVaultDirectories() throws {
        let sandbox = try PrefsSandbox()
        let app = "com.example.notes"
        let set = try Self.vaultctl(sandbox, ["--app", app, "prefs", "set", "ui", "theme", "dark"])
        #expect(set.status == 0, "\(set)")
        #expect(FileManager.default.fileExists(atPath: sandbox.path("xdg/\(app)/prefs/ui.prefs")))
        let stores = try Self.vaultctl(sandbox, ["prefs", "stores", "--app", app])
        #expect(stores.status == 0 && stores.standardOutput.contains("ui "), "\(stores)")
        let fromEnvironment = try Self.vaultctl(sandbox, ["prefs", "get", "ui", "theme"], environment: ["VAULTCTL_APP": app])
        #expect(fromEnvironment.status == 0 && fromEnvironment.standardOutput == "dark\n", "\(fromEnvironment)")
        let fromDir = try Self.vaultctl(
            sandbox, ["prefs", "get", "ui", "theme"], environment: ["VAULTCTL_DIR": sandbox.path("xdg/\(app)/prefs")])
        #expect(fromDir.status == 0 && fromDir.standardOutput == "dark\n", "\(fromDir)")
        // The library's own default directory was never touched.
        #expect(!FileManager.default.fileExists(atPath: sandbox.path("xdg/prefskv")))

        let doctor = try jsonObject(Self.vaultctl(sandbox, ["--json", "doctor", "--app", app]).standardOutput)
        let paths = (doctor["directories"] as? [[String: Any]])?.compactMap { $0["path"] as? String } ?? []
        #expect(paths == [sandbox.path("xdg/\(app)/prefs"), sandbox.path("xdg/\(app)/vault")], "\(doctor)")
    }

    @Test func aVaultGoesToTheAppsVaultDirectory() throws {
        let vault = try VaultSandbox()
        let token = VaultSandbox.secret("token")
        try vault.input("set", token, secret: token)
        // VaultSandbox's V passes --dir; these steps run vaultctl themselves, with --app instead.
        try vault.run(
            .noSecretService, revealing: ["get"],
            script: """
                export XDG_DATA_HOME="$IO/xdg"
                "$VAULTCTL" --app com.example.notes vault set --key-store keyring:user --service app session \
                  <"$IO/set.in" >"$IO/set.out" 2>"$IO/set.err"; echo $? >"$IO/set.rc"
                "$VAULTCTL" --app com.example.notes vault get --service app session --reveal \
                  >"$IO/get.out" 2>"$IO/get.err"; echo $? >"$IO/get.rc"
                "$VAULTCTL" --app com.example.notes vault wipe --service app --yes \
                  >"$IO/wipe.out" 2>"$IO/wipe.err"; echo $? >"$IO/wipe.rc"
                """)
        #expect(try vault.step("set").status == 0)
        let get = try vault.step("get")
        #expect(get.status == 0 && get.standardOutput == token + "\n", "\(get)")
        #expect(try vault.step("wipe").status == 0)
    }

    @Test func dirAndAppTogetherOrABadIdAreUsage() throws {
        let sandbox = try PrefsSandbox()
        let both = try Self.vaultctl(sandbox, ["--dir", sandbox.directory, "--app", "x", "prefs", "stores"])
        #expect(both.status == 64, "\(both)")
        let bad = try Self.vaultctl(sandbox, ["--app", "../escape", "prefs", "stores"])
        #expect(bad.status == 64, "\(bad)")
        let environment = try Self.vaultctl(
            sandbox, ["prefs", "stores"], environment: ["VAULTCTL_DIR": sandbox.directory, "VAULTCTL_APP": "x"])
        #expect(environment.status == 64, "\(environment)")
    }
}
