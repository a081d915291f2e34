import Foundation
public import Testing

/// The private keyring session tests need, and scenarios run in throwaway sessions of their own.
public enum KeyringSession {
    /// Fails the calling test (it does not skip) when the tests were not started by `make test`
    /// (scripts/with-keyring.sh), which provides a private bus with an unlocked gnome-keyring.
    public static func require(sourceLocation: SourceLocation = #_sourceLocation) throws {
        let environment = ProcessInfo.processInfo.environment
        guard environment["VAULT_TEST_KEYRING"] == "1", environment["DBUS_SESSION_BUS_ADDRESS"] != nil else {
            Issue.record(
                """
                No private keyring session: run these tests with `make test` (or \
                `scripts/with-keyring.sh swift test`), which starts a D-Bus session with an unlocked gnome-keyring.
                """, sourceLocation: sourceLocation)
            throw MissingSession()
        }
    }

    public struct MissingSession: Error {}

    /// The deadline of a scenario's helper commands unless a test sets one: 60 s, a guard against a hang.
    public static let defaultDeadlineMilliseconds = 60_000

    /// The deadline of the tests' in-process keyring calls: a guard against a hang, not a measure of speed.
    public static let deadline: Duration = .milliseconds(defaultDeadlineMilliseconds)

    public static var helper: String { BuildProducts.executable("vault-test-helper") }

    /// Runs `script` with bash inside a fresh private session of the given kind. In the script, `$H` is the
    /// helper, `$VAULTCTL` the built vaultctl, `$LOCK` locks the default collection through the D-Bus `Lock` method, `$UNLOCK` unlocks it again
    /// by replacing the daemon, `$DAEMON_PID` prints the keyring daemon's pid.
    ///
    /// `deadlineMilliseconds` (the helper's `VAULT_TEST_DEADLINE_MS`) is by default a generous guard against a hang,
    /// not a measure of speed: on a loaded machine a D-Bus round trip to a daemon just started can take seconds.
    /// A test of the deadline itself sets a short one on the commands that must run into it.
    public static func scenario(
        _ mode: Mode = .keyring, script: String, deadlineMilliseconds: Int = defaultDeadlineMilliseconds,
        environment: [String: String?] = [:]
    ) throws
        -> ChildResult
    {
        let prelude = """
            H=\(shellQuote(helper))
            VAULTCTL=\(shellQuote(BuildProducts.executable("vaultctl")))
            export VAULT_TEST_DEADLINE_MS=\(deadlineMilliseconds)
            LOCK() { gdbus call --session --dest org.freedesktop.secrets --object-path /org/freedesktop/secrets \
              --method org.freedesktop.Secret.Service.Lock "['/org/freedesktop/secrets/collection/login']" >/dev/null; }
            UNLOCK() { printf '%s' "$VAULT_TEST_KEYRING_PASSWORD" \
              | gnome-keyring-daemon --replace --unlock --components=secrets >/dev/null 2>&1
              local end=$((SECONDS + 120))
              while [ "$SECONDS" -lt "$end" ]; do [ "$($H secret-state 2>/dev/null)" = unlocked ] && return 0; sleep 0.05; done
              echo "UNLOCK: the keyring was not unlocked after 120 s" >&2; return 1; }
            RESTART() { $VAULT_TEST_KEEPASSXC_START >/dev/null; }
            DAEMON_PID() { gdbus call --session --dest org.freedesktop.DBus --object-path /org/freedesktop/DBus \
              --method org.freedesktop.DBus.GetConnectionUnixProcessID org.freedesktop.secrets \
              | sed 's/.*uint32 \\([0-9]*\\).*/\\1/'; }

            """
        var arguments = [mode.runner]
        if let flag = mode.flag { arguments.append(flag) }
        arguments += ["/bin/bash", "-c", prelude + script]
        // A scenario gets a session of its own: drop the outer one so nothing leaks between them.
        var env: [String: String?] = [
            "DBUS_SESSION_BUS_ADDRESS": nil, "_VAULT_IN_PRIVATE_BUS": nil, "VAULT_TEST_KEYRING": nil,
            "_VAULT_IN_KEEPASSXC_BUS": nil, "VAULT_TEST_KEEPASSXC": nil,
        ]
        env.merge(environment) { $1 }
        return try ChildProcess.run("/usr/bin/env", arguments, environment: env)
    }

    public enum Mode: Sendable {
        /// A private bus with an unlocked gnome-keyring.
        case keyring
        /// A private bus with no Secret Service and nothing to activate.
        case noSecretService
        /// A private bus whose gnome-keyring is only activated: no login keyring, no default collection.
        case noKeyring
        /// A desktop session as a Flatpak app sees it from outside (scripts/with-portal.sh): a bus on a path
        /// socket, an unlocked gnome-keyring and xdg-desktop-portal. In the script `SANDBOX [--talk-secrets]
        /// APP_ID CMD...` runs a command as that Flatpak app (scripts/sandbox.sh), `RESTART_PORTAL` restarts
        /// the portal, and `$LOCK`, `$UNLOCK` work as in `.keyring`.
        case portal
        /// A private bus whose Secret Service is KeePassXC, headless, with a fresh database
        /// (scripts/with-keepassxc.sh). In the script `$RESTART` starts it again after `kill -9 $(DAEMON_PID)`.
        case keePassXC(KeePassXCSettings)

        var flag: String? {
            switch self {
            case .keyring: return nil
            case .noSecretService: return "--no-secret-service"
            case .noKeyring: return "--no-keyring"
            case .keePassXC(let settings): return "--" + settings.rawValue
            case .portal: return nil
            }
        }

        var runner: String {
            if case .keePassXC = self { return BuildProducts.repositoryRoot + "/scripts/with-keepassxc.sh" }
            if case .portal = self { return BuildProducts.repositoryRoot + "/scripts/with-portal.sh" }
            return BuildProducts.keyringRunner
        }
    }

    /// KeePassXC's Secret Service settings under test.
    public enum KeePassXCSettings: String, Sendable, CaseIterable {
        /// As KeePassXC ships: access approved per item and per client, unlock before search, confirmation of
        /// permanent deletes, and the database's Recycle Bin on.
        case defaults
        /// What suits unattended use: no approval, no unlock before search, no confirmation, Recycle Bin off.
        case unattended
        /// A user who turned the Recycle Bin off (deletes are final, so each asks "delete for good?") and
        /// access approval off.
        case confirmDelete = "confirm-delete"
    }

    public static func shellQuote(_ text: String) -> String {
        "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'"
    }

    /// A random attribute value, so tests never see each other's items.
    public static func randomID() -> String {
        (0..<16).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
    }
}

extension ChildResult {
    /// The helper's outcome line for each command, in order ("found ...", "absent", "failure locked ...").
    public var outcomes: [String] { lines }
}
