// Vault commands: one Vault operation per process (a real app launch), its outcome as one line on stdout.
//
//   vault-set SERVICE KEY             stores stdin (one line) as a string; prints "ok"
//   vault-get SERVICE KEY             prints "value <text>" or "absent"
//   vault-token-set SERVICE TOKEN EXPIRES_IN_SECONDS   ("none" for no expiry); prints "ok"
//   vault-token SERVICE               prints the session token state: "valid <token>", "expired", "absent",
//                                     "unavailable <reason>"
//   vault-read-lock-read SERVICE      reads the token, locks the default collection (D-Bus Lock, through
//                                     gdbus), reads again in the same process; prints both states
//   vault-identity SERVICE            prints the vault id and key id of the file's header
//   vault-format SERVICE              prints the key identity format of the file's header (1 legacy, 2)
//   vault-make-legacy SERVICE KEY     creates the vault as a release before identity format 2 did (format-1
//                                     header, its key stored under the old attributes and label) and stores
//                                     stdin (one line) under KEY; prints "ok"
//   vault-rotate SERVICE / vault-wipe SERVICE   print "ok"
//   vault-rotate-report SERVICE / vault-wipe-report SERVICE   print what happened to the (old) key:
//                                     "rotated|wiped removed=<true|false> kept=<yes|no> copy=<yes|no>"
//   vault-contract SERVICE            in one process (one D-Bus client): stores token tok-1, reads it, rotates,
//                                     reads it, wipes, reads it; one line each
//   vault-key-hash SERVICE VAULTID KEYID   prints a keyed hash of what the key store holds under those ids
//                                     ("hash <32 hex digits>", "absent"), never the key itself
//   keyring-key SERVICE VAULTID KEYID  the kernel key of those ids: "present", "absent", "revoked", "expired"
//   keyring-revoke SERVICE / keyring-expire SERVICE SECONDS   revokes the kernel key of the file's header, or
//                                     sets it to expire; prints "ok"
//   keyring-cache-key SERVICE [VAULTID KEYID]   the per-session cache's entry for the file's key, or the
//                                     key of those ids (VAULT_TEST_CACHE):
//                                     "present", "absent", "revoked", "expired"
//   keyring-fill [--clear]            adds "user" keys (4 KiB, then smaller) to the user keyring until the
//                                     quota refuses a 1-byte one;
//                                     prints "full after <n>" (--clear: removes them; prints "cleared")
//   keyring-session SCRIPT            runs bash -c SCRIPT in a new session keyring (what a login gives)
//   vault-status SERVICE
//   vault-crash-writer SERVICE        runs operations until killed, acknowledging each on stdout once it
//                                     returned: op i (from 1) is "rotate" when i % 20 == 7, "wipe" when
//                                     i % 20 == 19, else "set k<i % 5> v<i>"; prints "<i> <op>" per ack
//   vault-dump SERVICE                prints every item as "<key> <value>", sorted, or "error <code>"
//   portal-secret                     (in a sandbox) prints the Secret portal's secret and its root key, in hex
//   portal-requests COUNT THREADS     (in a sandbox) COUNT portal requests from THREADS threads, in two halves;
//                                     prints "same yes|no", "fds F1 F2" and "sockets S1 S2" (open descriptors
//                                     and sockets after each half)
//
// Environment: VAULT_TEST_DIR (vault directory), VAULT_TEST_DEADLINE_MS, VAULT_TEST_ACCESSIBILITY
// (afterFirstUnlock | whenUnlocked), VAULT_TEST_PROMPT_MS (set: prompting allowed with that deadline),
// VAULT_TEST_KEY_STORE (keyring:session | keyring:user | keyring:persistent | passphrase:PASSPHRASE |
// key-file:PATH | systemd-creds:NAME[:FILE]; the
// Secret Service otherwise), VAULT_TEST_MIGRATE_TO (a second key store, spelled the same way: vault-dump opens
// the vault with whichever the header names, and vault-crash-writer migrates between them), VAULT_TEST_CACHE (KEYRING:SECONDS: Configuration.keyCache). A failure prints "error <code> <elapsed-ms>" and exits 1; the message goes
// to stderr.
import Dispatch
import FoundationEssentials
import Glibc
import Synchronization

@testable import PrefsKV
@testable import SecureVault

enum VaultCommands {
    static func run(_ command: String, _ arguments: [String]) -> Int32 {
        let environment = { (name: String) in getenv(name).map { String(cString: $0) } }
        var configuration = Vault.Configuration(directory: environment("VAULT_TEST_DIR") ?? Vault.defaultDirectory)
        configuration.deadline = .milliseconds(Int(environment("VAULT_TEST_DEADLINE_MS") ?? "") ?? 2000)
        if environment("VAULT_TEST_ACCESSIBILITY") == "whenUnlocked" { configuration.accessibility = .whenUnlocked }
        if let store = environment("VAULT_TEST_KEY_STORE"), store.hasPrefix("passphrase:") {
            // The cheapest cost libsodium allows: these tests are about where the key is, not its cost.
            configuration.keyStore = .passphrase(
                SecretBytes(utf8: String(store.dropFirst("passphrase:".count))),
                cost: PassphraseCost(passes: 1, memoryKiB: 8))
        }
        if let cache = environment("VAULT_TEST_CACHE"), !cache.isEmpty {
            let parts = cache.split(separator: ":")
            guard parts.count == 2, let keyring = KeyStore.KernelKeyring(rawValue: String(parts[0])),
                let seconds = Int(parts[1])
            else { return 64 }
            configuration.keyCache = .kernelKeyring(keyring, timeout: .seconds(seconds))
        }
        if let store = environment("VAULT_TEST_KEY_STORE"), store.hasPrefix("keyring:") {
            guard let keyring = KeyStore.KernelKeyring(rawValue: String(store.dropFirst("keyring:".count))) else {
                return 64
            }
            configuration.keyStore = .kernelKeyring(keyring)
        }
        if environment("VAULT_TEST_KEY_STORE") == "secret-portal" { configuration.keyStore = .secretPortal }
        if let store = environment("VAULT_TEST_KEY_STORE"), store.hasPrefix("key-file:") {
            configuration.keyStore = .keyFile(String(store.dropFirst("key-file:".count)))
        }
        if let store = environment("VAULT_TEST_KEY_STORE"), store.hasPrefix("systemd-creds:") {
            let parts = store.dropFirst("systemd-creds:".count).split(separator: ":", maxSplits: 1).map(String.init)
            configuration.keyStore = .systemdCredential(name: parts[0], file: parts.count == 2 ? parts[1] : nil)
        }
        if let prompt = environment("VAULT_TEST_PROMPT_MS").flatMap({ Int($0) }) {
            configuration.prompting = .allowed(deadline: .milliseconds(prompt))
        }
        let start = ContinuousClock.now
        func elapsed() -> Int {
            let d = ContinuousClock.now - start
            return Int(d.components.seconds * 1000 + d.components.attoseconds / 1_000_000_000_000_000)
        }
        guard let service = arguments.first else { return 64 }
        // VAULT_TEST_MIGRATE_TO: a second key store; the vault is opened with whichever one its header names.
        let migratingTo = environment("VAULT_TEST_MIGRATE_TO").flatMap { KeyStore(spelling: $0) }
        let configured = configuration
        func current() throws -> (vault: Vault, other: KeyStore) {
            let first = try Vault(service: service, configuration: configured)
            guard let second = migratingTo, let identity = try first.existingIdentity(),
                identity.kind == second.kind
            else { return (first, migratingTo ?? configured.keyStore) }
            var moved = configured
            moved.keyStore = second
            return (try Vault(service: service, configuration: moved), configured.keyStore)
        }
        do {
            let vault = try Vault(service: service, configuration: configuration)
            let line: String
            switch command {
            case "vault-set":
                try vault.set(readLine() ?? "", for: arguments[1])
                line = "ok"
            case "vault-get":
                line = try vault.string(for: arguments[1]).map { "value \($0)" } ?? "absent"
            case "vault-token-set":
                let expiry = arguments[2] == "none" ? nil : Date(timeIntervalSinceNow: Double(arguments[2])!)
                try vault.setSessionToken(arguments[1], expiresAt: expiry)
                line = "ok"
            case "vault-token":
                line = describe(vault.sessionToken()) + " \(elapsed())"
            case "vault-read-lock-read":
                let before = describe(vault.sessionToken())
                let status = system(
                    "gdbus call --session --dest org.freedesktop.secrets --object-path /org/freedesktop/secrets "
                        + "--method org.freedesktop.Secret.Service.Lock \"['/org/freedesktop/secrets/collection/login']\" "
                        + ">/dev/null")
                guard status == 0 else { return 70 }
                line = before + " | " + describe(vault.sessionToken())
            case "vault-identity":
                let identity = try vault.existingIdentity()
                line = identity.map { "\($0.vaultIDHex) \($0.keyIDHex)" } ?? "none"
            case "vault-format":
                line = try vault.existingIdentity().map { String($0.format) } ?? "none"
            case "vault-make-legacy":
                var identity = KeyIdentity.random(kind: configuration.keyStore.kind)
                identity.format = 1
                let keys = vault.keys
                let masterKey = try keys.create(&identity)
                var storeConfiguration = PrefsStore.Configuration()
                storeConfiguration.sealer = VaultSealer(masterKey: masterKey, identity: identity, service: service)
                storeConfiguration.durability = .synchronous
                try vault.checkDirectory(create: true)
                _ = try PrefsStore(id: service, directory: configuration.directory, configuration: storeConfiguration)
                try vault.set(readLine() ?? "", for: arguments[1])
                line = "ok"
            case "vault-rotate":
                try vault.rotateKey()
                line = "ok"
            case "vault-wipe":
                try vault.wipe()
                line = "ok"
            case "vault-rotate-report":
                let report = try vault.rotateKey()
                line = describe(
                    "rotated", removed: report.removedOldKey, kept: report.keptKeyReason, copy: report.remainingCopy)
            case "vault-wipe-report":
                let report = try vault.wipe()
                line = describe("wiped", removed: report.removedKey, kept: report.keptKeyReason, copy: report.remainingCopy)
            case "vault-key-hash":
                guard
                    let identity = KeyIdentity(
                        vaultIDHex: arguments[1], keyIDHex: arguments[2], kind: configuration.keyStore.kind, format: 2)
                else { return 64 }
                let keys = vault.keys
                line =
                    try keys.load(identity, file: "-").map {
                        "hash " + Sodium.keyedHash(Array("vault-key-hash".utf8), key: $0, length: 16)
                            .map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
                    } ?? "absent"
            case "keyring-cache-key":
                guard let cache = configuration.keyCache, case .success(let serial) = KernelKeys.serial(of: cache.keyring),
                    let identity = arguments.count == 3
                        ? KeyIdentity(
                            vaultIDHex: arguments[1], keyIDHex: arguments[2], kind: configuration.keyStore.kind,
                            format: 2)
                        : try vault.existingIdentity()
                else { return 64 }
                let keys = vault.keys
                line = KernelKeys.state(keys.cacheName(identity), in: serial)
            case "keyring-key", "keyring-revoke", "keyring-expire":
                guard case .kernelKeyring(let keyring) = configuration.keyStore.storage,
                    case .success(let serial) = KernelKeys.serial(of: keyring)
                else { return 64 }
                let keys = vault.keys
                let identity: KeyIdentity
                if command == "keyring-key" {
                    guard
                        let named = KeyIdentity(
                            vaultIDHex: arguments[1], keyIDHex: arguments[2], kind: .kernelKeyring, format: 2)
                    else { return 64 }
                    identity = named
                } else {
                    guard let current = try vault.existingIdentity() else { return 66 }
                    identity = current
                }
                let name = keys.kernelName(identity)
                switch command {
                case "keyring-key":
                    line = KernelKeys.state(name, in: serial)
                case "keyring-revoke":
                    guard case .success = KernelKeys.revoke(name, in: serial) else { return 70 }
                    line = "ok"
                default:
                    guard case .success = KernelKeys.expire(name, in: serial, afterSeconds: UInt32(arguments[1]) ?? 1)
                    else { return 70 }
                    line = "ok"
                }
            case "vault-contract":
                try vault.setSessionToken("tok-1", expiresAt: nil)
                var lines = ["ok", describe(vault.sessionToken())]
                lines.append("id " + (try vault.existingIdentity().map(\.vaultIDHex) ?? "none"))
                let rotated = try vault.rotateKey()
                lines.append(
                    describe(
                        "rotated", removed: rotated.removedOldKey, kept: rotated.keptKeyReason,
                        copy: rotated.remainingCopy))
                lines.append(describe(vault.sessionToken()))
                let wiped = try vault.wipe()
                lines.append(describe("wiped", removed: wiped.removedKey, kept: wiped.keptKeyReason, copy: wiped.remainingCopy))
                lines.append(describe(vault.sessionToken()))
                line = lines.joined(separator: "\n")
            case "vault-crash-writer" where migratingTo != nil:
                // Migrations back and forth between the two key stores, rotations and sets; never a creation.
                var i = 0
                while true {
                    i += 1
                    let (vault, other) = try current()
                    switch i % 20 {
                    case 7, 13:
                        try vault.migrateKey(to: other)
                        acknowledge("\(i) migrate\n")
                    case 19:
                        try vault.rotateKey()
                        acknowledge("\(i) rotate\n")
                    default:
                        try vault.set("v\(i)", for: "k\(i % 5)")
                        acknowledge("\(i) set k\(i % 5) v\(i)\n")
                    }
                }
            case "vault-crash-writer":
                var i = 0
                while true {
                    i += 1
                    switch i % 20 {
                    case 7:
                        try vault.rotateKey()
                        acknowledge("\(i) rotate\n")
                    case 19:
                        try vault.wipe()
                        acknowledge("\(i) wipe\n")
                    default:
                        try vault.set("v\(i)", for: "k\(i % 5)")
                        acknowledge("\(i) set k\(i % 5) v\(i)\n")
                    }
                }
            case "vault-dump":
                let vault = migratingTo == nil ? vault : try current().vault
                let keys = try vault.allKeys()
                line = try keys.map { "\($0) \(try vault.string(for: $0) ?? "<absent>")" }.joined(separator: "\n")
                if keys.isEmpty {
                    print("(empty)")
                    return 0
                }
            case "vault-status":
                let s = vault.status()
                line =
                    "file=\(s.fileExists) items=\(s.itemCount.map(String.init) ?? "-") "
                    + "bus=\(s.sessionBusReachable.map(String.init) ?? "-") "
                    + "service=\(s.secretServiceReachable.map(String.init) ?? "-") "
                    + "locked=\(s.keyringLocked.map(String.init) ?? "-")"
            default:
                return 64
            }
            print(line)
            return 0
        } catch let error as VaultError {
            print("error \(error.code) \(elapsed())")
            writeToStandardError("message \(error.description)\n")
            return 1
        } catch {
            print("error other \(elapsed())")
            writeToStandardError("message \(error)\n")
            return 1
        }
    }

    /// `keyring-fill`: fills this user's kernel key quota with 4 KiB keys; `keyring-fill --clear` removes them.
    static func fillKeyring(_ arguments: [String]) -> Int32 {
        guard case .success(let serial) = KernelKeys.serial(of: .user) else { return 70 }
        if arguments.first == "--clear" {
            var misses = 0
            for n in 1...100_000 where misses < 50 {
                if case .success(true) = KernelKeys.delete("securevault-test-filler:\(n)", in: serial) {
                    misses = 0
                } else {
                    misses += 1
                }
            }
            // Invalidated keys count against the quota until the kernel's garbage collector reaps them: wait
            // for that (the bytes this user holds, /proc/key-users) before saying the room is back.
            for _ in 0..<1200 {
                if let (used, maximum) = quotaUse(), used < maximum / 2 {
                    print("cleared")
                    return 0
                }
                usleep(50_000)
            }
            print("error the quota stayed full")
            return 1
        }
        // Large keys first, then smaller ones, until not even a 1-byte key fits (bytes or the key count).
        var added = 0
        for size in [4096, 1024, 256, 64, 16, 1] {
            refused: while added < 100_000 {
                switch KernelKeys.store(
                    SecretBytes.random(count: size), as: "securevault-test-filler:\(added + 1)", in: serial)
                {
                case .success: added += 1
                case .failure(.quotaExceeded): break refused
                case .failure(let error):
                    print("error \(error.text)")
                    return 1
                }
            }
        }
        print("full after \(added)")
        return 0
    }

    /// This user's kernel key bytes in use and allowed (/proc/key-users: `uid: usage keys/keys keys/max bytes/max`).
    static func quotaUse() -> (Int, Int)? {
        guard let text = try? String(contentsOfFile: "/proc/key-users", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count == 5, fields[0] == "\(getuid()):" else { continue }
            let bytes = fields[4].split(separator: "/").compactMap { Int($0) }
            return bytes.count == 2 ? (bytes[0], bytes[1]) : nil
        }
        return nil
    }

    /// `keyring-session SCRIPT`: a new session keyring, then bash -c SCRIPT (which inherits it).
    static func keyringSession(_ arguments: [String]) -> Int32 {
        guard case .success = KernelKeys.joinNewSession(), let script = arguments.first else { return 70 }
        let argv: [UnsafeMutablePointer<CChar>?] = [strdup("/bin/bash"), strdup("-c"), strdup(script), nil]
        execv("/bin/bash", argv)
        return 70
    }

    /// `wiped removed=true kept=no copy=yes`; the reasons go to stderr.
    static func describe(_ what: String, removed: Bool, kept: String?, copy: String?) -> String {
        if let kept { writeToStandardError("kept: \(kept)\n") }
        if let copy { writeToStandardError("copy: \(copy)\n") }
        return "\(what) removed=\(removed) kept=\(kept == nil ? "no" : "yes") copy=\(copy == nil ? "no" : "yes")"
    }

    /// Writes an acknowledgement straight to stdout (a pipe: `print` would buffer it past a SIGKILL).
    static func acknowledge(_ text: String) {
        var copy = text
        copy.withUTF8 { bytes in
            var offset = 0
            while offset < bytes.count {
                let n = write(1, bytes.baseAddress! + offset, bytes.count - offset)
                if n <= 0 { if errno == EINTR { continue }; exit(71) }
                offset += n
            }
        }
    }

    static func describe(_ state: SessionTokenState) -> String {
        switch state {
        case .valid(let token, _): return "valid \(token)"
        case .expired: return "expired"
        case .absent: return "absent"
        case .unavailable(let reason): return "unavailable \(reason.rawValue)"
        }
    }

    /// `portal-requests COUNT THREADS`: COUNT Secret portal requests of this sandboxed process, from THREADS concurrent
    /// workers (libdispatch's `concurrentPerform`: as many at once as it runs), in two halves, each followed by one
    /// alone. Prints `same yes` when every request got the first one's secret, the process's open file descriptors
    /// after each half (`fds F1 F2`: each request's pipe is closed, and what a request holds, its main context's
    /// wake-up descriptor, is released by the next one) and its sockets then (`sockets S1 S2`: the one connection
    /// to the bus, used again).
    static func portalRequests(_ arguments: [String]) -> Int32 {
        guard arguments.count == 2, let count = Int(arguments[0]), let threads = Int(arguments[1]), threads > 0 else {
            print("usage: portal-requests COUNT THREADS")
            return 64
        }
        @Sendable func request() -> [UInt8]? {
            (try? SecretPortal.retrieveSecret(operation: "portal-requests", deadline: .seconds(60)))?
                .withUnsafeBytes { Array($0) }
        }
        func openDescriptors() -> (all: Int, sockets: Int) {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
            let sockets = names.filter {
                (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + $0))?
                    .hasPrefix("socket:") == true
            }
            return (names.count, sockets.count)
        }
        guard let first = request() else {
            print("error: the first request failed")
            return 1
        }
        let different = Mutex(0)
        // Half the requests from the threads, then one alone: it releases what the requests before it hold. The
        // descriptors are counted then (libdispatch's own are open by then), and again after the other half and
        // one more alone.
        func round(_ share: Int) -> (all: Int, sockets: Int) {
            DispatchQueue.concurrentPerform(iterations: threads) { thread in
                for _ in stride(from: thread, to: share, by: threads) where request() != first {
                    different.withLock { $0 += 1 }
                }
            }
            if request() != first { different.withLock { $0 += 1 } }
            return openDescriptors()
        }
        let afterHalf = round(count / 2)
        let afterAll = round(count - count / 2)
        print("same \(different.withLock { $0 } == 0 ? "yes" : "no")")
        print("fds \(afterHalf.all) \(afterAll.all)")
        print("sockets \(afterHalf.sockets) \(afterAll.sockets)")
        return 0
    }

    /// `portal-secret`: the Secret portal's secret of this sandboxed app and the root key the vault derives from it,
    /// in hex, on two lines (tests look for them on disk and in logs, where they must never be).
    static func portalSecret() -> Int32 {
        do {
            let secret = try SecretPortal.retrieveSecret(operation: "portal-secret", deadline: .seconds(60))
            let root = FileKeys.portalRootKey(from: secret, appID: FlatpakSandbox.current?.appID ?? "")
            print(secret.withUnsafeBytes { hex($0) })
            print(root.withUnsafeBytes { hex($0) })
            return 0
        } catch {
            print("error \(error.code) \(error.message)")
            return 1
        }
    }
}
