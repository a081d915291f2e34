// SecureVault workloads run inside a worker process: warm token reads, synchronous sets, seal/open.
import FoundationEssentials
import PrefsKV
@_spi(Testing) import SecureVault

enum VaultWorker {
    static let service = "bench"

    /// The vault the orchestrator set up in `directory`: the Secret Service's when `keyStore` says so.
    static func vault(_ directory: String, keyStore: String) throws -> Vault {
        var configuration = Vault.Configuration(directory: directory)
        configuration.keyStore = parse(keyStore)
        return try Vault(service: service, configuration: configuration)
    }

    /// `secret-service`, `keyring:user`, `key-file:PATH`, `systemd-creds:NAME`; anything else: a passphrase at
    /// libsodium's minimum cost.
    static func parse(_ keyStore: String) -> KeyStore {
        if keyStore == "secret-service" { return .secretService }
        if keyStore == "keyring:user" { return .kernelKeyring(.user) }
        if keyStore.hasPrefix("key-file:") { return .keyFile(String(keyStore.dropFirst("key-file:".count))) }
        if keyStore.hasPrefix("systemd-creds:") {
            return .systemdCredential(name: String(keyStore.dropFirst("systemd-creds:".count)))
        }
        return .passphrase(SecretBytes(utf8: "benchmark"), cost: .insecureForTesting)
    }

    /// Sets up a vault holding a session token valid for a day (done by the orchestrator, untimed).
    static func setUp(_ directory: String, keyStore: String) throws {
        let vault = try vault(directory, keyStore: keyStore)
        try vault.setSessionToken(
            "eyJhbGciOiJFZERTQSJ9.benchmark-session-token.c2lnbmF0dXJl", expiresAt: Date(timeIntervalSinceNow: 86_400))
    }

    static func run(_ name: String, _ directory: String, _ count: Int, _ argument: String) throws -> WorkerResult? {
        switch name {
        case "vault-warm": return try warm(directory, count, keyStore: argument)
        case "vault-set": return try sets(directory, count, keyStore: argument)
        case "seal-open": return try sealOpen(directory, count)
        default: return nil
        }
    }

    /// The first read pays for the key; the rest are what a running app pays per token read.
    static func warm(_ directory: String, _ count: Int, keyStore: String) throws -> WorkerResult {
        let vault = try vault(directory, keyStore: keyStore)
        guard case .valid = vault.sessionToken() else { throw BenchError("vault-warm: no valid token") }
        var samples: [Double] = []
        var allocations: UInt64 = 0
        let perPass = max(1, count / 10)
        for _ in 0..<10 {
            var valid = 0
            let measured = measure {
                for _ in 0..<perPass {
                    if case .valid = vault.sessionToken() { valid += 1 }
                }
            }
            guard valid == perPass else { throw BenchError("vault-warm: a read was not valid") }
            samples.append(Double(measured.nanoseconds) / Double(perPass))
            allocations = measured.allocations
        }
        return WorkerResult(
            samples: samples, allocationsPerOperation: Double(allocations) / Double(perPass), peakRSSKiB: peakRSSKiB())
    }

    /// Synchronous sets: the token overwritten `count` times (each overwrite also compacts, so that no
    /// decryptable copy of the old token stays in the file), then `count` new items.
    static func sets(_ directory: String, _ count: Int, keyStore: String) throws -> WorkerResult {
        let vault = try vault(directory, keyStore: keyStore)
        _ = vault.sessionToken()
        let expiry = Date(timeIntervalSinceNow: 86_400)
        let tokens = (0..<count).map { "token-\($0)-" + String(repeating: "t", count: 48) }
        let overwrite = try measure {
            for token in tokens { try vault.setSessionToken(token, expiresAt: expiry) }
        }
        let names = (0..<count).map { "item.\($0)" }
        let fresh = try measure {
            for (i, name) in names.enumerated() { try vault.set(tokens[i], for: name) }
        }
        return WorkerResult(
            samples: [Double(overwrite.nanoseconds) / Double(count)],
            allocationsPerOperation: Double(overwrite.allocations) / Double(count), peakRSSKiB: peakRSSKiB(),
            fileBytes: diskBytes([vault.path]),
            extra: [
                "newItemNs": Double(fresh.nanoseconds) / Double(count),
                "newItemAllocations": Double(fresh.allocations) / Double(count),
            ])
    }

    /// Seal and open of a 256-byte value through SecureVault's sealer (the one `encryptedPreferences` installs),
    /// with 64 bytes of associated data, as PrefsKV calls it.
    static func sealOpen(_ directory: String, _ count: Int) throws -> WorkerResult {
        let engine = try PrefsEngine(directory: directory, sharing: .singleProcess, sealed: true)
        guard let sealer = engine.store.configuration.sealer else { throw BenchError("seal-open: no sealer") }
        let plaintext = [UInt8](repeating: 0x5a, count: 256)
        let associated = [UInt8](repeating: 0xad, count: 64)
        var sealed = [UInt8](repeating: 0, count: 256 + sealer.overhead)
        var checksum = 0
        let seal = try measure {
            for _ in 0..<count {
                try sealed.withUnsafeMutableBytes { out in
                    try plaintext.withUnsafeBytes { p in
                        try associated.withUnsafeBytes { try sealer.seal(p, associatedData: $0, into: out) }
                    }
                }
            }
        }
        let open = try measure {
            for _ in 0..<count {
                checksum &+= try sealed.withUnsafeBytes { s in
                    try associated.withUnsafeBytes { ad in
                        try sealer.open(s, associatedData: ad) { plain in Int(plain[255]) }
                    }
                }
            }
        }
        guard checksum == 0x5a * count else { throw BenchError("seal-open: wrong plaintext") }
        let sealNs = Double(seal.nanoseconds) / Double(count)
        let openNs = Double(open.nanoseconds) / Double(count)
        return WorkerResult(
            samples: [sealNs + openNs],
            allocationsPerOperation: Double(seal.allocations + open.allocations) / Double(count),
            peakRSSKiB: peakRSSKiB(), extra: ["sealNs": sealNs, "openNs": openNs])
    }
}
