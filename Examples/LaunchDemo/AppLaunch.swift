import ExampleAppState
import Foundation
import Logging
import PrefsKV
import SecureVault
import Synchronization

/// What one launch of the app saw and measured, as the launch process reports it to the demo.
struct LaunchReport: Codable {
    var route: String
    var theme: String
    var themeHydration: String
    var sidebarExpanded: Bool
    var sidebarWidth: Int
    var sidebarHydration: String
    /// Opening the prefs store and hydrating both states.
    var hydrateMilliseconds: Double
    /// The part of it spent opening the store.
    var storeOpenMilliseconds: Double
    /// Whether the store had a file: without one the open creates it (two fsyncs) and there is nothing to decode.
    var storeFileExisted: Bool
    /// Creating the vault handle and routing: opening the vault file, the Secret Service round trip, unsealing.
    var tokenReadMilliseconds: Double
    /// Whether the vault had a file: without one there is no token to read and no keyring call to make.
    var vaultFileExisted: Bool
    /// Every error logged during the launch (prefs store, states and vault share one logger).
    var errors: [String]
    /// The quarantined copy of a damaged prefs file, when this launch's open salvaged one.
    var quarantinePath: String?
    /// What the sign-in or logout did, or why it failed.
    var action: String?
    var actionFailed = false
}

/// The app: one launch per process, as a client app does before its first frame.
enum AppLaunch {
    static let service = "com.example.launch-demo"

    static func run(_ command: String, _ arguments: [String]) -> Int32 {
        guard arguments.count == 2 || arguments.count == 4, arguments[0] == "--dir",
            arguments.count == 2 || arguments[2] == "--key-store"
        else {
            Console.error("launch-demo \(command): expected --dir DIR [--key-store STORE]")
            return 64
        }
        // The Secret Service by default; a server passes the key store it has (`--key-store systemd-creds:NAME`).
        var keyStore = KeyStore.secretService
        if arguments.count == 4 {
            guard let named = KeyStore(spelling: arguments[3]) else {
                Console.error("launch-demo \(command): \(arguments[3]) is not a key store")
                return 64
            }
            keyStore = named
        }
        let prefsDirectory = arguments[1] + "/prefs"
        let errors = ErrorLog()
        let clock = ContinuousClock()

        // Hydration: open the UI store and decode both states. Never throws.
        let storeFileExisted = FileManager.default.fileExists(atPath: prefsDirectory + "/ui.prefs")
        let hydrateStart = clock.now
        var prefs = PrefsStore.Configuration()
        prefs.logger = errors.logger
        let ui = PrefsStore.openOrLog(id: "ui", directory: prefsDirectory, configuration: prefs)
        let storeOpen = clock.now - hydrateStart
        let theme = PersistedState.theme(in: ui)
        let sidebar = PersistedState.sidebar(in: ui)
        let hydrate = clock.now - hydrateStart

        // Token read and routing: a new vault handle, so the master key comes from the keyring in this process.
        let vaultFileExisted = FileManager.default.fileExists(
            atPath: arguments[1] + "/vault/" + service + ".prefs")
        let tokenStart = clock.now
        var configuration = Vault.Configuration(directory: arguments[1] + "/vault")
        configuration.keyStore = keyStore
        configuration.logger = errors.logger
        let router: SessionRouter
        do {
            router = SessionRouter(
                vault: try Vault(service: service, configuration: configuration), encryptedPreferences: ["account"],
                preferencesDirectory: prefsDirectory)
        } catch {
            Console.error("launch-demo: \(error)")
            return 1
        }
        let route = router.route()
        let tokenRead = clock.now - tokenStart

        var report = LaunchReport(
            route: route.description, theme: theme.value.rawValue, themeHydration: theme.hydration.description,
            sidebarExpanded: sidebar.value.isExpanded, sidebarWidth: sidebar.value.width,
            sidebarHydration: sidebar.hydration.description, hydrateMilliseconds: milliseconds(hydrate),
            storeOpenMilliseconds: milliseconds(storeOpen), storeFileExisted: storeFileExisted,
            tokenReadMilliseconds: milliseconds(tokenRead),
            vaultFileExisted: vaultFileExisted, errors: [], quarantinePath: ui?.lastRecovery?.quarantinePath)

        switch command {
        case "sign-in":
            do {
                try theme.set(.dark)
                try sidebar.set(SidebarState(isExpanded: true, width: 280))
                let expiry = Date(timeIntervalSinceNow: 3600)
                let token = "demo-" + (0..<24).map { _ in String(UInt8.random(in: 0...255), radix: 16) }.joined()
                let session = try router.signIn(token: token, expiresAt: expiry)
                try router.openEncryptedPreferences(id: "account").set("alice@example.com", forKey: "email")
                report.action =
                    "token saved in the vault (\(session.isPersisted ? "persisted" : "in memory only"), expires "
                    + "\(ISO8601DateFormatter().string(from: expiry))); theme dark; sidebar expanded, 280; "
                    + "e-mail kept in encrypted store \"account\""
            } catch {
                report.action = "sign-in failed: \(error)"
                report.actionFailed = true
            }
        case "logout":
            do {
                try router.logout()
                report.action = "logged out"
            } catch {
                report.action = "logout failed: \(error)"
                report.actionFailed = true
            }
        default:
            break
        }
        report.errors = errors.messages
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        guard let json = try? encoder.encode(report) else { return 1 }
        print(String(decoding: json, as: UTF8.self))
        return report.actionFailed ? 1 : 0
    }

    static func milliseconds(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return Double(seconds) * 1000 + Double(attoseconds) / 1e15
    }
}

/// Collects the messages of every error logged during a launch.
final class ErrorLog: Sendable {
    private let lines = Mutex<[String]>([])

    var logger: Logger { Logger(label: "launch-demo") { _ in Handler(log: self) } }
    var messages: [String] { lines.withLock { $0 } }

    struct Handler: LogHandler {
        let log: ErrorLog
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .error
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) {
            log.lines.withLock { $0.append(event.message.description) }
        }
    }
}
