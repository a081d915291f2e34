// App-launch commands: each process is one launch of a client app (hydrate the UI state, read the session
// token, route), so the tests see cold, fresh-process behaviour.
//
//   launch-route SERVICE          prints "route=<route> theme=<theme> sidebar=<expanded|collapsed>/<width>
//                                 hydration=<theme's>,<sidebar's> errors=<n>", then "logged <message>" for
//                                 each error logged during the launch (through one logger shared by the
//                                 prefs store, the states and the vault)
//   launch-sign-in SERVICE TOKEN EXPIRES_IN_SECONDS THEME EXPANDED WIDTH
//                                 a launch, then sign-in: saves the token (expiry "none" for none), sets the
//                                 theme and sidebar, writes the encrypted store "account"; prints
//                                 "signed-in persisted=<bool>", or "error <code> persisted=false" (exit 1)
//   launch-logout SERVICE         prints "logged-out" or "error <code>" (exit 1)
//   prefs-damage DIRECTORY ID KEY flips a byte in the value of the last record of KEY in the plain store ID;
//                                 prints "damaged <offset>"
//   file-flip PATH OFFSET         flips every bit of the byte at OFFSET; prints "flipped"
//
// Environment: VAULT_TEST_DIR (vault directory), VAULT_TEST_PREFS_DIR (preference stores; the default is
// VAULT_TEST_DIR with "-prefs" appended), VAULT_TEST_DEADLINE_MS.
import ExampleAppState
import FoundationEssentials
import Glibc
import Logging
import PrefsKV
import SecureVault
import Synchronization
import TestKit

enum LaunchCommands {
    static func run(_ command: String, _ arguments: [String]) -> Int32 {
        switch command {
        case "prefs-damage": return damage(arguments)
        case "file-flip": return flip(arguments)
        default: break
        }
        guard let service = arguments.first else { return 64 }
        let log = LaunchLog()
        let app: App
        do {
            app = try App(service: service, logger: log.logger)
        } catch {
            PrefsCommands.say("error open \(error)")
            return 1
        }
        switch command {
        case "launch-route":
            let route = app.router.route()
            let sidebar = app.sidebar.value
            PrefsCommands.say(
                "route=\(route) theme=\(app.theme.value.rawValue) "
                    + "sidebar=\(sidebar.isExpanded ? "expanded" : "collapsed")/\(sidebar.width) "
                    + "hydration=\(describe(app.theme.hydration)),\(describe(app.sidebar.hydration)) "
                    + "errors=\(log.errors.count)")
            for message in log.errors { PrefsCommands.say("logged \(message)") }
            return 0
        case "launch-sign-in":
            guard arguments.count == 6, let theme = AppTheme(rawValue: arguments[3]), let width = Int(arguments[5])
            else { return 64 }
            _ = app.router.route()
            let expiry = arguments[2] == "none" ? nil : Double(arguments[2]).map { Date(timeIntervalSinceNow: $0) }
            do {
                try app.theme.set(theme)
                try app.sidebar.set(SidebarState(isExpanded: arguments[4] == "true", width: width))
                try app.router.signIn(token: arguments[1], expiresAt: expiry)
                try app.router.openEncryptedPreferences(id: "account").set("alice@example.com", forKey: "email")
                PrefsCommands.say("signed-in persisted=\(app.router.session?.isPersisted ?? false)")
                return 0
            } catch let error as VaultError {
                PrefsCommands.say("error \(error.code) persisted=\(app.router.session?.isPersisted ?? false)")
                PrefsCommands.say(error.message, fd: 2)
                return 1
            } catch {
                PrefsCommands.say("error other \(error)")
                return 1
            }
        case "launch-logout":
            do {
                try app.router.logout()
                PrefsCommands.say("logged-out")
                return 0
            } catch let error as VaultError {
                PrefsCommands.say("error \(error.code)")
                PrefsCommands.say(error.message, fd: 2)
                return 1
            } catch {
                PrefsCommands.say("error other \(error)")
                return 1
            }
        default:
            return 64
        }
    }

    /// What a launch of the app opens.
    struct App {
        let ui: PrefsStore
        let theme: PersistedState<AppTheme>
        let sidebar: PersistedState<SidebarState>
        let router: SessionRouter

        init(service: String, logger: Logger) throws {
            let environment = { (name: String) in getenv(name).map { String(cString: $0) } }
            let vaultDirectory = environment("VAULT_TEST_DIR") ?? Vault.defaultDirectory
            let prefsDirectory = environment("VAULT_TEST_PREFS_DIR") ?? vaultDirectory + "-prefs"
            var prefs = PrefsStore.Configuration()
            prefs.logger = logger
            ui = try PrefsStore(id: "ui", directory: prefsDirectory, configuration: prefs)
            theme = PersistedState.theme(in: ui)
            sidebar = PersistedState.sidebar(in: ui)
            var configuration = Vault.Configuration(directory: vaultDirectory)
            configuration.deadline = .milliseconds(Int(environment("VAULT_TEST_DEADLINE_MS") ?? "") ?? 2000)
            configuration.logger = logger
            router = SessionRouter(
                vault: try Vault(service: service, configuration: configuration), encryptedPreferences: ["account"],
                preferencesDirectory: prefsDirectory)
        }
    }

    static func describe<Value>(_ hydration: PersistedState<Value>.Hydration) -> String {
        switch hydration {
        case .stored: return "stored"
        case .migrated(let version): return "migrated-from-\(version)"
        case .absent: return "absent"
        case .lost: return "lost"
        case .unreadable: return "unreadable"
        case .noStore: return "no-store"
        }
    }

    static func damage(_ arguments: [String]) -> Int32 {
        guard arguments.count == 3 else { return 64 }
        let path = arguments[0] + "/" + arguments[1] + ".prefs"
        guard var bytes = readFile(path) else { return 1 }
        // Records start at 4096: "PKVr", kind, type, flags, reserved, u32 key length, u32 value length, seq,
        // expiry, key, value, padding, CRC (Documentation/FileFormat.md).
        func u32(_ at: Int) -> Int {
            Int(bytes[at]) | Int(bytes[at + 1]) << 8 | Int(bytes[at + 2]) << 16 | Int(bytes[at + 3]) << 24
        }
        var offset = 4096
        var target: Int?
        while offset + 32 <= bytes.count, bytes[offset..<offset + 4].elementsEqual("PKVr".utf8) {
            let keyLength = u32(offset + 8)
            let valueLength = u32(offset + 12)
            if bytes[offset + 4] == 1, valueLength > 0,
                bytes[(offset + 32)..<(offset + 32 + keyLength)].elementsEqual(arguments[2].utf8)
            {
                target = offset + 32 + keyLength + valueLength / 2
            }
            offset += (32 + keyLength + valueLength + 4 + 7) & ~7
        }
        guard let target else {
            PrefsCommands.say("no record of key \(arguments[2]) in \(path)", fd: 2)
            return 1
        }
        bytes[target] ^= 0x01
        guard writeFile(path, bytes) else { return 1 }
        PrefsCommands.say("damaged \(target)")
        return 0
    }

    static func flip(_ arguments: [String]) -> Int32 {
        guard arguments.count == 2, let offset = Int(arguments[1]), var bytes = readFile(arguments[0]),
            offset < bytes.count
        else { return 64 }
        bytes[offset] ^= 0xFF
        guard writeFile(arguments[0], bytes) else { return 1 }
        PrefsCommands.say("flipped")
        return 0
    }

    /// Writes the bytes back in place (the file keeps its inode and mode).
    static func writeFile(_ path: String, _ bytes: [UInt8]) -> Bool {
        let fd = open(path, O_WRONLY)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        return bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) } == bytes.count
    }
}

/// Collects the errors logged during a launch, and copies every entry to stderr.
final class LaunchLog: Sendable {
    private let lines = Mutex<[String]>([])

    var logger: Logger { Logger(label: "launch") { _ in Handler(log: self) } }
    var errors: [String] { lines.withLock { $0 } }

    struct Handler: LogHandler {
        let log: LaunchLog
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) {
            let message = event.message.description
            PrefsCommands.say("\(event.level): \(message)", fd: 2)
            if event.level >= .error { log.lines.withLock { $0.append(message) } }
        }
    }
}
