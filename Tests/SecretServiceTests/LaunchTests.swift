import Foundation
import TestSupport
import Testing

/// A client app's launches against a real gnome-keyring, each launch a new helper process in a throwaway
/// keyring session: the route, the hydrated theme and sidebar, and how many errors the launch logged (through
/// one logger shared by the prefs store, the persisted states and the vault).
@Suite struct LaunchTests {
    /// Directories for one app's vault and preference stores, removed afterwards.
    final class AppData {
        let root: String
        var vault: String { root + "/vault" }
        var prefs: String { root + "/prefs" }
        var environment: [String: String?] { ["VAULT_TEST_DIR": vault, "VAULT_TEST_PREFS_DIR": prefs] }

        init() {
            root = NSTemporaryDirectory() + "launch-test-" + KeyringSession.randomID()
        }

        deinit { try? FileManager.default.removeItem(atPath: root) }

        /// Runs `script` in a fresh session of `mode` (a private bus with an unlocked keyring by default); `$H` is the helper, `$V` the vault file, `$P` the
        /// preferences directory, and `SUM` prints "sum <sha256 of the vault file>".
        func scenario(_ script: String, in mode: KeyringSession.Mode = .keyring) throws -> ChildResult {
            try KeyringSession.scenario(
                mode,
                script: """
                    V="$VAULT_TEST_DIR/app.prefs"; P="$VAULT_TEST_PREFS_DIR"
                    SUM() { echo "sum $(sha256sum "$V" | cut -c1-64)"; }
                    \(script)
                    """, environment: environment)
        }
    }

    /// One `launch-route` line: "route=... theme=... sidebar=... hydration=... errors=N".
    struct Launch: CustomStringConvertible {
        var fields: [String: String] = [:]
        var logged: [String] = []
        var route: String? { fields["route"] }
        var theme: String? { fields["theme"] }
        var sidebar: String? { fields["sidebar"] }
        var hydration: String? { fields["hydration"] }
        var errors: Int? { fields["errors"].flatMap { Int($0) } }
        var description: String { "\(fields) logged \(logged)" }
    }

    /// The launches in a scenario's output, each with the errors it logged.
    static func launches(_ result: ChildResult) -> [Launch] {
        var launches: [Launch] = []
        for line in result.lines {
            if line.hasPrefix("route=") {
                var launch = Launch()
                for field in line.split(separator: " ") {
                    let parts = field.split(separator: "=", maxSplits: 1).map(String.init)
                    if parts.count == 2 { launch.fields[parts[0]] = parts[1] }
                }
                launches.append(launch)
            } else if line.hasPrefix("logged "), !launches.isEmpty {
                launches[launches.count - 1].logged.append(String(line.dropFirst("logged ".count)))
            }
        }
        return launches
    }

    /// The "sum <sha256>" lines; each must hold a real digest (a missing file would give equal empty sums).
    static func sums(_ result: ChildResult, sourceLocation: SourceLocation = #_sourceLocation) -> [String] {
        let sums = result.lines.filter { $0.hasPrefix("sum ") }
        for sum in sums {
            #expect(
                sum.count == 4 + 64 && sum.dropFirst(4).allSatisfy(\.isHexDigit), "no vault file to sum: \(result)",
                sourceLocation: sourceLocation)
        }
        return sums
    }

    static let signIn = "$H launch-sign-in app tok-1 3600 dark true 300"

    @Test func firstLaunchWithoutATokenGoesToSignInWithTheDefaults() throws {
        let app = AppData()
        let result = try app.scenario("$H launch-route app")
        let launch = try #require(Self.launches(result).first, "\(result)")
        #expect(launch.route == "signIn(absent)", "\(result)")
        #expect(launch.theme == "light")
        #expect(launch.sidebar == "collapsed/240")
        #expect(launch.hydration == "absent,absent")
        #expect(launch.errors == 0, "\(result)")
        #expect(!FileManager.default.fileExists(atPath: app.vault + "/app.prefs"), "a first launch created a vault")
    }

    @Test func validTokenGoesToTheDashboardWithTheStoredState() throws {
        let app = AppData()
        let result = try app.scenario("\(Self.signIn)\n$H launch-route app")
        #expect(result.lines.first == "signed-in persisted=true", "\(result)")
        let launch = try #require(Self.launches(result).first, "\(result)")
        #expect(launch.route == "dashboard", "\(result)")
        #expect(launch.theme == "dark")
        #expect(launch.sidebar == "expanded/300")
        #expect(launch.hydration == "stored,stored")
        #expect(launch.errors == 0, "\(result)")
    }

    @Test func expiredTokenGoesToSignInExpiredAndKeepsTheUIState() throws {
        let app = AppData()
        let result = try app.scenario("$H launch-sign-in app tok-1 -5 dark true 300\n$H launch-route app")
        let launch = try #require(Self.launches(result).first, "\(result)")
        #expect(launch.route == "signIn(expired)", "\(result)")
        #expect(launch.theme == "dark")
        #expect(launch.errors == 0, "\(result)")
    }

    @Test func lockedKeyringGoesToSignInLockedWithOneErrorAndTheVaultFileUntouched() throws {
        let app = AppData()
        let result = try app.scenario(
            """
            \(Self.signIn)
            SUM
            LOCK
            $H launch-route app
            SUM
            UNLOCK
            $H launch-route app
            """)
        let launches = Self.launches(result)
        try #require(launches.count == 2, "\(result)")
        #expect(launches[0].route == "signIn(locked)", "\(result)")
        #expect(launches[0].theme == "dark")
        #expect(launches[0].sidebar == "expanded/300")
        #expect(launches[0].errors == 1, "\(result)")
        #expect(launches[0].logged.first?.contains("locked") == true, "\(launches[0])")
        let sums = Self.sums(result)
        #expect(sums.count == 2 && sums[0] == sums[1], "the locked launch changed the vault file: \(result)")
        // Nothing was lost while locked.
        #expect(launches[1].route == "dashboard", "\(result)")
        #expect(launches[1].errors == 0)
    }

    @Test func noSecretServiceGoesToSignInNoSecretServiceWithOneError() throws {
        let app = AppData()
        let setUp = try app.scenario("\(Self.signIn)\nSUM")
        #expect(setUp.lines.first == "signed-in persisted=true", "\(setUp)")
        // The same files, next boot, on a machine with no Secret Service.
        let result = try app.scenario("$H launch-route app\nSUM", in: .noSecretService)
        let launch = try #require(Self.launches(result).first, "\(result)")
        #expect(launch.route == "signIn(noSecretService)", "\(result)")
        #expect(launch.theme == "dark")
        #expect(launch.errors == 1, "\(result)")
        #expect(Self.sums(setUp) == Self.sums(result), "the launch changed the vault file")
    }

    @Test func missingMasterKeyGoesToSignInKeyMissingWithOneErrorAndTheVaultFileUntouched() throws {
        let app = AppData()
        let result = try app.scenario(
            """
            \(Self.signIn)
            SUM
            secret-tool clear vault "$($H vault-identity app | cut -d' ' -f1)"
            $H launch-route app
            SUM
            """)
        let launch = try #require(Self.launches(result).first, "\(result)")
        #expect(launch.route == "signIn(keyMissing)", "\(result)")
        #expect(launch.theme == "dark")
        #expect(launch.errors == 1, "\(result)")
        #expect(launch.logged.first?.contains("keyMissing") == true, "\(launch)")
        let sums = Self.sums(result)
        #expect(sums.count == 2 && sums[0] == sums[1], "\(result)")
    }

    @Test func aPlantedMasterKeyOfTheWrongLengthGoesToSignInWrongKeyWithOneError() throws {
        // Another app of the user replaces the master key item with 5 bytes (secret-tool store can): the launch
        // must route, never die on the key's length.
        let app = AppData()
        let result = try app.scenario(
            """
            \(Self.signIn)
            SUM
            set -- $($H vault-identity app)
            secret-tool clear vault "$1"
            printf 'abcde' | secret-tool store --label=planted vault "$1" key "$2" format 2 service app \
              xdg:schema dev.securevault.MasterKey
            $H launch-route app; echo "status $?"
            SUM
            """)
        let launch = try #require(Self.launches(result).first, "\(result)")
        #expect(launch.route == "signIn(wrongKey)", "\(result)")
        #expect(launch.theme == "dark")
        #expect(launch.errors == 1, "\(result)")
        #expect(launch.logged.first?.contains("wrongKey") == true, "\(launch)")
        #expect(result.lines.contains("status 0"), "\(result)")
        let sums = Self.sums(result)
        #expect(sums.count == 2 && sums[0] == sums[1], "\(result)")
    }

    @Test func corruptedVaultGoesToSignInCorruptedWithOneErrorAndTheFileUntouched() throws {
        let app = AppData()
        let result = try app.scenario(
            """
            \(Self.signIn)
            $H file-flip "$V" 4136
            SUM
            $H launch-route app
            SUM
            """)
        let launch = try #require(Self.launches(result).first, "\(result)")
        #expect(launch.route == "signIn(corrupted)", "\(result)")
        #expect(launch.theme == "dark")
        #expect(launch.errors == 1, "\(result)")
        let sums = Self.sums(result)
        #expect(sums.count == 2 && sums[0] == sums[1], "\(result)")
    }

    @Test func damagedPrefsKeepEveryIntactValueDefaultTheLostOneAndLogOneErrorNamingTheFiles() throws {
        let app = AppData()
        let result = try app.scenario(
            """
            \(Self.signIn)
            $H prefs-damage "$P" ui theme
            $H launch-route app
            $H launch-route app
            ls "$P"
            """)
        let launches = Self.launches(result)
        try #require(launches.count == 2, "\(result)")
        #expect(launches[0].route == "dashboard", "\(result)")
        #expect(launches[0].theme == "light")
        #expect(launches[0].sidebar == "expanded/300")
        #expect(launches[0].hydration == "lost,stored")
        #expect(launches[0].errors == 1, "\(result)")
        let message = try #require(launches[0].logged.first)
        #expect(message.contains(app.prefs + "/ui.prefs:"), "\(message)")
        let quarantine = try #require(result.lines.first { $0.hasPrefix("ui.prefs.corrupt-") }, "\(result)")
        #expect(message.contains(app.prefs + "/" + quarantine), "\(message)")
        // The next launch finds a healthy store.
        #expect(launches[1].errors == 0, "\(result)")
        #expect(launches[1].sidebar == "expanded/300")
    }

    @Test func signInWhileLockedIsAnErrorThatKeepsTheSessionInMemory() throws {
        let app = AppData()
        let result = try app.scenario(
            """
            LOCK
            $H launch-sign-in app tok-1 3600 dark true 300
            echo "status $?"
            UNLOCK
            $H launch-route app
            """)
        #expect(result.lines.first == "error locked persisted=false", "\(result)")
        #expect(result.lines.dropFirst().first == "status 1", "\(result)")
        #expect(result.standardError.contains("the session could not be saved"), "\(result)")
        let launch = try #require(Self.launches(result).first, "\(result)")
        #expect(launch.route == "signIn(absent)", "\(result)")
        #expect(launch.theme == "dark", "the UI state saved before the failed sign-in was lost")
    }

    @Test func logoutWithTheKeyringLockedStillRemovesTheSessionsFilesAndSaysSo() throws {
        let app = AppData()
        let result = try app.scenario(
            """
            \(Self.signIn)
            LOCK
            $H launch-logout app
            ls "$P" | grep -c '^account.prefs$'
            test -e "$V" && echo "vault file kept" || echo "vault file removed"
            UNLOCK
            $H launch-route app
            """)
        #expect(
            Array(result.lines.prefix(4)) == ["signed-in persisted=true", "error locked", "0", "vault file removed"],
            "\(result)")
        #expect(result.standardError.contains("removed the session's files"), "\(result)")
        let launch = try #require(Self.launches(result).first, "\(result)")
        #expect(launch.route == "signIn(absent)", "the token survived a logout: \(result)")
        #expect(launch.theme == "dark")
    }

    @Test func logoutRemovesTheTokenTheMasterKeyAndTheEncryptedStoreAndKeepsUIState() throws {
        let app = AppData()
        let result = try app.scenario(
            """
            \(Self.signIn)
            identity=$($H vault-identity app)
            ls "$P" | grep -c '^account.prefs$'
            $H launch-logout app
            $H secret-lookup $identity --service app
            ls "$P" | grep -c '^account.prefs$'
            test -e "$V" && echo "vault file kept" || echo "vault file removed"
            $H launch-route app
            """)
        #expect(
            Array(result.lines.prefix(6))
                == ["signed-in persisted=true", "1", "logged-out", "absent", "0", "vault file removed"],
            "\(result)")
        let launch = try #require(Self.launches(result).first, "\(result)")
        #expect(launch.route == "signIn(absent)", "\(result)")
        #expect(launch.theme == "dark")
        #expect(launch.sidebar == "expanded/300")
        #expect(launch.errors == 0, "\(result)")
    }
}
