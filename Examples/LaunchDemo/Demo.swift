import Foundation

/// The story: the demo launches the app (this executable's sub-commands) as new processes, damages what the
/// field damages in between, checks what each launch reports, and prints it.
struct Demo {
    static let hydrateBudget = 50.0
    static let tokenReadBudget = 100.0

    static func run() -> Int32 {
        let environment = ProcessInfo.processInfo.environment
        guard environment["VAULT_TEST_KEYRING"] == "1", let password = environment["VAULT_TEST_KEYRING_PASSWORD"] else {
            Console.error(
                """
                launch-demo locks and unlocks the keyring of its session, so it runs only inside the private \
                keyring session that `make demo` starts (scripts/with-keyring.sh).
                """)
            return 64
        }
        let root: String
        do {
            root = try Files.temporaryDirectory()
        } catch {
            Console.error("launch-demo: \(error)")
            return 1
        }
        defer { try? FileManager.default.removeItem(atPath: root) }
        var demo = Demo(root: root, password: password)
        return demo.play()
    }

    let root: String
    let password: String
    let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().path
    var vaultFile: String { root + "/vault/" + AppLaunch.service + ".prefs" }
    var uiFile: String { root + "/prefs/ui.prefs" }
    var problems: [String] = []
    var launches: [LaunchReport] = []

    init(root: String, password: String) {
        self.root = root
        self.password = password
    }

    mutating func play() -> Int32 {
        #if DEBUG
        let build = "debug build"
        #else
        let build = "release build"
        #endif
        print("launch-demo: one client app, launched seven times, each launch a new process (\(build)), then three")
        print("  times more as a server's app")
        print("  app data in \(root) (removed at the end), keys in a private gnome-keyring session")
        print()

        guard let first = launch(1, "first launch") else { return finish() }
        expect(first, route: "signIn(absent)", theme: "light", sidebar: (false, 240), errors: 0)

        guard let signIn = launch(2, "launch, then sign-in", command: "sign-in") else { return finish() }
        if signIn.actionFailed { problems.append("step 2: \(signIn.action ?? "sign-in failed")") }

        guard let relaunch = launch(3, "relaunch") else { return finish() }
        expect(relaunch, route: "dashboard", theme: "dark", sidebar: (true, 280), errors: 0)

        // The keyring locked (no unlock since boot, or the user locked it).
        let vaultBefore = FileManager.default.contents(atPath: vaultFile)
        do {
            try Keyring.lock()
        } catch {
            problems.append("step 4: \(error)")
            return finish()
        }
        let locked = launch(4, "relaunch, keyring locked")
        let vaultAfter = FileManager.default.contents(atPath: vaultFile)
        var unlocked = "keyring unlocked again"
        do {
            try Keyring.unlock(password: password)
        } catch {
            unlocked = "unlocking failed: \(error)"
            problems.append("step 4: \(error)")
        }
        if let locked {
            expect(locked, route: "signIn(locked)", theme: "dark", sidebar: (true, 280), errors: 1)
            let untouched = vaultBefore != nil && vaultBefore == vaultAfter
            if !untouched { problems.append("step 4: the locked launch changed the vault file") }
            detail(
                "vault file \(untouched ? "untouched (\(vaultAfter?.count ?? 0) bytes, byte-identical)" : "CHANGED"); "
                    + unlocked)
        }

        // A prefs file damaged in the field: one byte flipped inside the theme's record.
        let damage: String
        do {
            let offset = try Files.flipByteInRecord(key: "theme", ofStore: uiFile)
            damage = "before it: byte \(offset) of ui.prefs flipped, inside the record of \"theme\""
        } catch {
            problems.append("step 5: \(error)")
            return finish()
        }
        if let damaged = launch(5, "relaunch, prefs damaged", note: damage) {
            expect(damaged, route: "dashboard", theme: "light", sidebar: (true, 280), errors: 1)
            if damaged.themeHydration != "lost" {
                problems.append("step 5: the theme hydrated as \(damaged.themeHydration), not lost")
            }
            if let error = damaged.errors.first, !error.contains(uiFile) {
                problems.append("step 5: the logged error does not name \(uiFile)")
            }
            // The logged error names the quarantined copy; it must be there.
            if let quarantine = damaged.quarantinePath, FileManager.default.fileExists(atPath: quarantine) {
            } else {
                problems.append("step 5: no quarantined copy of the damaged file")
            }
        }

        let keysBefore = Keyring.masterKeyCount()
        guard let logout = launch(6, "launch, then logout", command: "logout") else { return finish() }
        if logout.actionFailed { problems.append("step 6: \(logout.action ?? "logout failed")") }
        let keysAfter = Keyring.masterKeyCount()
        let vaultGone = !FileManager.default.fileExists(atPath: vaultFile)
        let accountGone = !FileManager.default.fileExists(atPath: root + "/prefs/account.prefs")
        detail(
            "vault file \(vaultGone ? "removed" : "STILL THERE"); master keys in the keyring "
                + "\(keysBefore.map(String.init) ?? "?") -> \(keysAfter.map(String.init) ?? "?"); encrypted store "
                + "\"account\" \(accountGone ? "removed" : "STILL THERE"); ui.prefs kept")
        if !vaultGone || !accountGone || keysAfter != 0 {
            problems.append("step 6: logout left sensitive data behind")
        }

        if let after = launch(7, "relaunch after logout") {
            expect(after, route: "signIn(absent)", theme: "light", sidebar: (true, 280), errors: 0)
        }
        serverLaunches()
        return finish()
    }

    /// The same app on a server: no session bus, no Secret Service; the vault's key is a systemd credential
    /// (sealed with the host key), read by `systemd-creds decrypt`, then, as a service started with
    /// `LoadCredentialEncrypted=` finds it, from `$CREDENTIALS_DIRECTORY`.
    mutating func serverLaunches() {
        print()
        print("the same app on a server: no session bus, the vault's key in a systemd credential")
        let server = root + "/server"
        let store = "systemd-creds:launch-demo"
        let noBus: [String: String?] = ["DBUS_SESSION_BUS_ADDRESS": nil, "DISPLAY": nil]
        guard let first = launch(8, "server: launch, sign-in", command: "sign-in", directory: server, keyStore: store, environment: noBus) else { return }
        if first.actionFailed {
            // systemd-creds needs root for the host key: a demo run as another user shows why and goes on.
            detail("skipped: \(first.action ?? "sign-in failed") (run make demo as root to see these launches)")
            return
        }
        expect(first, route: "signIn(absent)", theme: "light", sidebar: (false, 240), errors: 0)
        if let again = launch(9, "server: relaunch", directory: server, keyStore: store, environment: noBus) {
            expect(again, route: "dashboard", theme: "dark", sidebar: (true, 280), errors: 0)
            detail("the token read ran systemd-creds decrypt (a child process) for the credential")
        }
        // What systemd does for a unit with LoadCredentialEncrypted=launch-demo:<file>, before the service starts.
        let credentials = server + "/credentials"
        let sealed = server + "/vault/launch-demo.cred"
        do {
            // Private, as systemd's own credentials directory is (the credential is decrypted there).
            try FileManager.default.createDirectory(
                atPath: credentials, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            let decrypted = try Files.run(
                "/usr/bin/systemd-creds", ["decrypt", "--name=launch-demo", sealed, credentials + "/launch-demo"],
                quiet: true)
            guard decrypted.status == 0 else { throw DemoError("systemd-creds decrypt exited \(decrypted.status)") }
        } catch {
            problems.append("step 10: \(error)")
            return
        }
        var service = noBus
        service["CREDENTIALS_DIRECTORY"] = credentials
        if let asService = launch(10, "server: as a service", directory: server, keyStore: store, environment: service) {
            expect(asService, route: "dashboard", theme: "dark", sidebar: (true, 280), errors: 0)
            detail("the token read took the credential systemd decrypted into $CREDENTIALS_DIRECTORY: no child process")
        }
    }

    // MARK: Steps

    /// Runs the app once as a new process and prints what it reported: where it went, the state it hydrated,
    /// the times it measured, what it logged, and what its sign-in or logout did.
    mutating func launch(
        _ step: Int, _ title: String, command: String = "launch", note: String? = nil, directory: String? = nil,
        keyStore: String? = nil, environment: [String: String?] = [:]
    ) -> LaunchReport? {
        if step > 1 { print() }
        let started = ContinuousClock.now
        let result: (status: Int32, output: Data)
        do {
            result = try Files.run(
                executable, [command, "--dir", directory ?? root] + (keyStore.map { ["--key-store", $0] } ?? []),
                environment: environment)
        } catch {
            problems.append("step \(step): cannot run the app: \(error)")
            return nil
        }
        let wall = AppLaunch.milliseconds(ContinuousClock.now - started)
        guard let report = try? JSONDecoder().decode(LaunchReport.self, from: result.output) else {
            problems.append("step \(step): the app exited \(result.status) without a report")
            return nil
        }
        launches.append(report)
        let label = "\(step) \(title)".padding(toLength: 28, withPad: " ", startingAt: 0)
        print(
            label + report.route.padding(toLength: 18, withPad: " ", startingAt: 0)
                + "theme \(report.theme) (\(report.themeHydration))   "
                + "sidebar \(report.sidebarExpanded ? "expanded" : "collapsed"), \(report.sidebarWidth) "
                + "(\(report.sidebarHydration))")
        if let note { detail(note) }
        detail(
            "hydrate \(Self.format(report.hydrateMilliseconds)) (budget \(Int(Self.hydrateBudget)); store "
                + (report.storeFileExisted ? "open" : "created, with fsyncs,")
                + " \(Self.format(report.storeOpenMilliseconds)))")
        detail(
            "token read \(Self.format(report.tokenReadMilliseconds)) (budget \(Int(Self.tokenReadBudget))"
                + (report.vaultFileExisted ? ")" : "; no vault file, no keyring call)"))
        detail(
            "whole process \(Self.format(wall)) (spawn to exit, the runtime's start included)   errors "
                + "\(report.errors.count)")
        for error in report.errors { detail("logged: \(error)") }
        if let action = report.action { detail(action) }
        return report
    }

    mutating func expect(
        _ report: LaunchReport, route: String, theme: String, sidebar: (Bool, Int), errors: Int
    ) {
        let step = launches.count
        var seen: [String] = []
        if report.route != route { seen.append("route \(report.route), expected \(route)") }
        if report.theme != theme { seen.append("theme \(report.theme), expected \(theme)") }
        if (report.sidebarExpanded, report.sidebarWidth) != sidebar {
            seen.append("sidebar \(report.sidebarExpanded)/\(report.sidebarWidth), expected \(sidebar)")
        }
        if report.errors.count != errors { seen.append("\(report.errors.count) errors logged, expected \(errors)") }
        problems += seen.map { "launch \(step): \($0)" }
    }

    /// Prints `text` indented under the step's title, wrapped at 110 columns (a long path stays whole).
    func detail(_ text: String) {
        let indent = String(repeating: " ", count: 28)
        var line = ""
        for word in text.split(separator: " ", omittingEmptySubsequences: false) {
            if !line.isEmpty, indent.count + line.count + 1 + word.count > 110 {
                print(indent + line)
                line = "  " + word
            } else {
                line += (line.isEmpty ? "" : " ") + word
            }
        }
        if !line.isEmpty { print(indent + line) }
    }

    func finish() -> Int32 {
        print()
        // Every process was a launch (sign-in and logout launch first), so every one was timed.
        let hydrate = launches.map(\.hydrateMilliseconds).max() ?? 0
        let token = launches.map(\.tokenReadMilliseconds).max() ?? 0
        print(
            "slowest of \(launches.count) launches: hydrate \(Self.format(hydrate)) of \(Int(Self.hydrateBudget)) ms, "
                + "token read \(Self.format(token)) of \(Int(Self.tokenReadBudget)) ms"
                + (hydrate > Self.hydrateBudget || token > Self.tokenReadBudget ? "  OVER BUDGET" : ""))
        if problems.isEmpty {
            print("every launch went where it should, with the state and the error count it should have")
            return 0
        }
        print("UNEXPECTED:")
        for problem in problems { print("  - \(problem)") }
        return 1
    }

    /// Milliseconds with three significant digits or so: "0.45 ms", "14.7 ms", "215 ms".
    static func format(_ milliseconds: Double) -> String {
        String(format: milliseconds < 10 ? "%.2f ms" : milliseconds < 100 ? "%.1f ms" : "%.0f ms", milliseconds)
    }
}
