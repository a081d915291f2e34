// The SecureVault section, run by the orchestrator: cold token reads in new processes against a bare libsecret
// lookup and `secret-tool lookup`, warm reads, synchronous sets, seal/open.
import FoundationEssentials
import Glibc
import SecureVault

struct VaultBench {
    var orchestrator: Orchestrator

    static let vaultCold = "SecureVault sessionToken()"
    static let bareLookup = "bare libsecret lookup (C)"
    static let secretTool = "secret-tool lookup"
    static let noopC = "empty C process"
    static let noopSwift = "empty Swift process (vault-token-read --noop)"
    // The same program built as the README advises an app to be (`--static-swift-stdlib`: the Swift runtime and
    // Foundation linked in, libsecret and GLib still shared); make bench builds it and names it in
    // BENCH_STATIC_TOKEN_READ.
    static let vaultColdStatic = "SecureVault sessionToken(), Swift runtime linked in"
    static let noopSwiftStatic = "empty Swift process, Swift runtime linked in (vault-token-read --noop)"

    /// Cold token reads per headless key store, each beside the bare read of the same key in a new process.
    static let perStore: [(store: String, vault: String, bare: String)] = [
        ("keyring:user", "SecureVault sessionToken(), kernel keyring (user)", "keyctl pipe"),
        ("systemd-creds", "SecureVault sessionToken(), systemd credential", "systemd-creds decrypt"),
        ("credentials-directory", "SecureVault sessionToken(), systemd credential from $CREDENTIALS_DIRECTORY",
         "cat $CREDENTIALS_DIRECTORY/NAME"),
        ("key-file", "SecureVault sessionToken(), key file", "cat KEYFILE"),
    ]

    static let portalVault = "SecureVault sessionToken(), Secret portal (a Flatpak sandbox)"
    static let portalBare = "bare RetrieveSecret (C, the same sandbox)"

    func run(into results: inout Results) {
        var o = orchestrator
        o.results = results
        defer { results = o.results }
        let helpers = o.helperDirectory
        let attribute = "bench-\(getpid())-\(monotonicNanoseconds())"
        let keyring =
            environment("DBUS_SESSION_BUS_ADDRESS") != nil
            && runChild(helpers + "/secret-lookup", ["--store", "id", attribute]).status == 0
        let keyStore = keyring ? "secret-service" : "passphrase"
        if !keyring {
            o.results.notes.append(
                "No Secret Service was reachable: the cold token reads were skipped and the warm reads and sets used "
                    + "the passphrase key store. Run under scripts/with-keyring.sh (make bench does).")
        }
        let directory = o.freshDirectory() + "/vault"
        do {
            try VaultWorker.setUp(directory, keyStore: keyStore)
        } catch {
            fatalError("setting up the vault in \(directory) failed: \(error)")
        }
        if keyring {
            note("vault: cold token reads")
            var variants: [(String, String, [String])] = [
                (Self.vaultCold, helpers + "/vault-token-read", [directory, VaultWorker.service]),
                (Self.bareLookup, helpers + "/secret-lookup", ["id", attribute]),
                (Self.secretTool, "secret-tool", ["lookup", "id", attribute]),
                (Self.noopC, helpers + "/secret-lookup", ["--noop"]),
                (Self.noopSwift, helpers + "/vault-token-read", ["--noop"]),
            ]
            if let linkedIn = environment("BENCH_STATIC_TOKEN_READ"), access(linkedIn, X_OK) == 0 {
                variants.append((Self.vaultColdStatic, linkedIn, [directory, VaultWorker.service]))
                variants.append((Self.noopSwiftStatic, linkedIn, ["--noop"]))
            } else {
                o.results.notes.append(
                    "The token read built with the Swift runtime linked in was skipped: BENCH_STATIC_TOKEN_READ names "
                        + "no executable (make bench builds it).")
            }
            for spawn in 0..<o.scale.vaultSpawns {
                for (name, executable, arguments) in o.rotated(variants, by: spawn) {
                    let run = runChild(executable, arguments)
                    guard run.status == 0 else { fatalError("\(name) failed with exit \(run.status): \(run.output)") }
                    var result = WorkerResult(samples: [Double(run.wallNanoseconds)], allocationsPerOperation: 0, peakRSSKiB: 0)
                    if name == Self.vaultCold || name == Self.vaultColdStatic {
                        let fields = run.output.split(separator: " ")
                        guard fields.count == 2, fields[1].hasPrefix("valid"), let inProcess = Double(fields[0]) else {
                            fatalError("vault-token-read answered \(run.output)")
                        }
                        result.extra["inProcessNs"] = inProcess
                    }
                    o.file(.vault, .cold, "new process", name, 1, result, wall: Double(run.wallNanoseconds))
                }
            }
        }
        coldReadsPerKeyStore(&o)
        coldReadsThroughThePortal(&o)
        note("vault: warm reads, synchronous sets, seal/open")
        for repetition in 0..<o.scale.repetitions {
            _ = repetition
            vaultWorker(&o, "vault-warm", "SecureVault sessionToken(), warm", o.scale.vaultWarmReads, keyStore, directory)
            vaultWorker(&o, "vault-set", "SecureVault setSessionToken (synchronous)", o.scale.vaultSets, keyStore, nil)
            vaultWorker(&o, "seal-open", "VaultSealer seal + open, 256 bytes", o.scale.sealOpens, "", nil)
        }
    }

    private func vaultWorker(
        _ o: inout Orchestrator, _ name: String, _ row: String, _ count: Int, _ argument: String, _ directory: String?
    ) {
        let scratch = directory == nil ? o.freshDirectory() : nil
        defer { if let scratch { removeTree(scratch) } }
        var target = directory ?? scratch!
        if directory == nil, name == "vault-set" {
            // A vault of its own, with the same key store as the others.
            target += "/vault"
            do { try VaultWorker.setUp(target, keyStore: argument) } catch { fatalError("vault set-up: \(error)") }
        }
        let run = runChild(o.helperDirectory + "/prefskv-bench", ["worker", name, "prefskv", target, "\(count)", argument])
        guard run.status == 0, let result = o.decode(run.output) else {
            fatalError("worker \(name) failed (exit \(run.status)): \(run.output)")
        }
        o.file(.vault, workload(name), "\(grouped(count)) operations", row, count, result, wall: nil)
    }

    private func workload(_ name: String) -> Workload {
        switch name {
        case "vault-warm": return .tokenWarm
        case "vault-set": return .tokenSet
        default: return .sealOpen
        }
    }

    /// A vault per headless key store and a new process reading its token, against the bare read of the same
    /// key by the key store's own tool in a new process (rounds interleaved). A key store that does not work
    /// here (systemd-creds as another user than root) is skipped with a note.
    private func coldReadsPerKeyStore(_ o: inout Orchestrator) {
        note("vault: cold token reads per key store")
        let helpers = o.helperDirectory
        let base = o.freshDirectory()
        defer { removeTree(base) }
        let name = "bench-\(getpid())"
        var variants: [(String, String, [String], [String])] = []
        func setUp(_ store: String, _ directory: String) -> Bool {
            do {
                try VaultWorker.setUp(directory, keyStore: store)
                return true
            } catch {
                o.results.notes.append("Cold reads with \(store) were skipped: \(error)")
                return false
            }
        }
        // The kernel keyring: the new key is found in /proc/keys (a search by description, as keyctl does).
        let before = Set(liveBenchKeys())
        let keyringReady = setUp("keyring:user", base + "/keyring")
        let found = liveBenchKeys().first { !before.contains($0) }
        if keyringReady, found == nil {
            o.results.notes.append("Cold reads with keyring:user were skipped: its key was not found in /proc/keys")
        }
        if keyringReady, let serial = found {
            let row = Self.perStore[0]
            variants.append((row.vault, helpers + "/vault-token-read", [base + "/keyring", VaultWorker.service, "keyring:user"], []))
            variants.append((row.bare, "keyctl", ["pipe", "\(serial)"], []))
        }
        let credential = base + "/creds/\(name).cred"
        if setUp("systemd-creds:\(name)", base + "/creds") {
            let row = Self.perStore[1]
            variants.append((row.vault, helpers + "/vault-token-read", [base + "/creds", VaultWorker.service, "systemd-creds:\(name)"], []))
            variants.append((row.bare, "systemd-creds", ["decrypt", "--name=\(name)", credential, "-"], []))
            // What systemd's LoadCredentialEncrypted= leaves a service: the credential, decrypted.
            let directory = base + "/credentials"
            mkdir(directory, 0o700)
            if runChild("systemd-creds", ["decrypt", "--name=\(name)", credential, directory + "/" + name]).status == 0 {
                let row = Self.perStore[2]
                variants.append((row.vault, helpers + "/vault-token-read", [base + "/creds", VaultWorker.service, "systemd-creds:\(name)"], ["CREDENTIALS_DIRECTORY=\(directory)"]))
                variants.append((row.bare, "cat", [directory + "/" + name], []))
            }
        }
        let keyFile = base + "/vault.key"
        if (try? KeyStore.createKeyFile(at: keyFile)) == true, setUp("key-file:\(keyFile)", base + "/file") {
            let row = Self.perStore[3]
            variants.append((row.vault, helpers + "/vault-token-read", [base + "/file", VaultWorker.service, "key-file:\(keyFile)"], []))
            variants.append((row.bare, "cat", [keyFile], []))
        }
        for spawn in 0..<o.scale.vaultSpawns {
            for (row, executable, arguments, environment) in o.rotated(variants, by: spawn) {
                let run = runChild(executable, arguments, environment: environment)
                guard run.status == 0 else { fatalError("\(row) failed with exit \(run.status): \(run.output)") }
                var result = WorkerResult(samples: [Double(run.wallNanoseconds)], allocationsPerOperation: 0, peakRSSKiB: 0)
                if executable.hasSuffix("vault-token-read") {
                    let fields = run.output.split(whereSeparator: { $0 == " " || $0 == "\n" })
                    guard fields.count == 2, fields[1] == "valid", let inProcess = Double(fields[0]) else {
                        fatalError("\(row): vault-token-read answered \(run.output)")
                    }
                    result.extra["inProcessNs"] = inProcess
                }
                o.file(.vault, .cold, "new process", row, 1, result, wall: Double(run.wallNanoseconds))
            }
        }
        // The kernel key goes with its vault (a wipe invalidates it).
        if let vault = try? VaultWorker.vault(base + "/keyring", keyStore: "keyring:user") { _ = try? vault.wipe() }
    }

    /// A vault on the Secret portal read in a new process inside a Flatpak sandbox (scripts/with-portal.sh and
    /// scripts/sandbox.sh: bwrap, xdg-dbus-proxy, xdg-desktop-portal, gnome-keyring), against a bare C
    /// RetrieveSecret in the same sandbox (`secret-lookup --portal`), rounds interleaved. Samples are each
    /// sandboxed process from its start to its exit (sandbox and proxy start included); `inProcessNs` is each
    /// one's own measure: Vault(...) to the answer, and the bus connection to the secret read.
    private func coldReadsThroughThePortal(_ o: inout Orchestrator) {
        let scripts = String(#filePath).split(separator: "/").dropLast(4).map(String.init).joined(separator: "/")
        let withPortal = "/" + scripts + "/scripts/with-portal.sh"
        guard access(withPortal, X_OK) == 0 else {
            o.results.notes.append("Cold reads through the Secret portal were skipped: \(withPortal) is missing")
            return
        }
        note("vault: cold token reads through the Secret portal")
        let helpers = o.helperDirectory
        let script = """
            D="$HOME/vault"; mkdir -m 700 "$D"; APP=org.securevault.Bench
            SANDBOX $APP '\(helpers)/vault-token-read' --set "$D" bench secret-portal || exit 1
            ns() { date +%s%N; }
            vault() { local t=$(ns) out; out=$(SANDBOX $APP '\(helpers)/vault-token-read' "$D" bench secret-portal) \
              || exit 1; echo "vault $out $(($(ns) - t))"; }
            bare() { local t=$(ns) out; out=$(SANDBOX $APP '\(helpers)/secret-lookup' --portal) || exit 1
              echo "bare $out $(($(ns) - t))"; }
            for i in $(seq 1 \(o.scale.vaultSpawns)); do
              if [ $((i % 2)) -eq 0 ]; then vault; bare; else bare; vault; fi
            done
            """
        let run = runChild(withPortal, ["bash", "-c", script])
        guard run.status == 0 else {
            o.results.notes.append(
                "Cold reads through the Secret portal were skipped: the sandboxed session failed (exit \(run.status)): "
                    + run.output.split(separator: "\n").suffix(3).joined(separator: " / "))
            return
        }
        for line in run.output.split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard fields.count == 4, let inProcess = Double(fields[1]), let wall = Double(fields[3]) else { continue }
            let row = fields[0] == "vault" ? Self.portalVault : Self.portalBare
            if fields[0] == "vault", fields[2] != "valid" { fatalError("the portal vault answered \(line)") }
            var result = WorkerResult(samples: [wall], allocationsPerOperation: 0, peakRSSKiB: 0)
            result.extra["inProcessNs"] = inProcess
            o.file(.vault, .cold, "new process", row, 1, result, wall: wall)
        }
    }

    /// The serials of this user's live kernel keys named `securevault:bench:...` (/proc/keys).
    private func liveBenchKeys() -> [UInt32] {
        // Read to its end: /proc files report a size of 0.
        let fd = open("/proc/keys", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return [] }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = read(fd, &chunk, chunk.count)
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { break }
            bytes += chunk[0..<n]
        }
        let text = String(decoding: bytes, as: UTF8.self)
        return text.split(separator: "\n").compactMap { line in
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count > 8, fields[8].hasPrefix("securevault:\(VaultWorker.service):"),
                !fields[1].contains("i"), !fields[1].contains("R")
            else { return nil }
            return UInt32(fields[0], radix: 16)
        }
    }
}
