// The SecureVault section, run by the orchestrator: cold token reads in new processes against a bare libsecret
// lookup and `secret-tool lookup`, warm reads, synchronous sets, seal/open.
import Glibc

struct VaultBench {
    var orchestrator: Orchestrator

    static let vaultCold = "SecureVault sessionToken()"
    static let bareLookup = "bare libsecret lookup (C)"
    static let secretTool = "secret-tool lookup"
    static let noopC = "empty C process"
    static let noopSwift = "empty Swift process (vault-token-read --noop)"

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
            let variants: [(String, String, [String])] = [
                (Self.vaultCold, helpers + "/vault-token-read", [directory, VaultWorker.service]),
                (Self.bareLookup, helpers + "/secret-lookup", ["id", attribute]),
                (Self.secretTool, "secret-tool", ["lookup", "id", attribute]),
                (Self.noopC, helpers + "/secret-lookup", ["--noop"]),
                (Self.noopSwift, helpers + "/vault-token-read", ["--noop"]),
            ]
            for spawn in 0..<o.scale.vaultSpawns {
                for (name, executable, arguments) in o.rotated(variants, by: spawn) {
                    let run = runChild(executable, arguments)
                    guard run.status == 0 else { fatalError("\(name) failed with exit \(run.status): \(run.output)") }
                    var result = WorkerResult(samples: [Double(run.wallNanoseconds)], allocationsPerOperation: 0, peakRSSKiB: 0)
                    if name == Self.vaultCold {
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
}
