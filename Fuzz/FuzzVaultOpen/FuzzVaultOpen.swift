// libFuzzer target: arbitrary bytes as a vault file, opened and unsealed item by item. The key comes from a
// passphrase (Argon2id at its cheapest, salt and cost read from the fuzzed header), so every mutation of the
// header, the records and the ciphertexts goes through the real open and unseal path. The key store's maximum cost
// is that cheapest cost too: a mutated cost is refused (corrupted) before any derivation, as the bound requires,
// and the fuzzer never waits on a costly one.
// Checks, beyond "no crash": an open or read that fails is a typed VaultError of the "cannot be known" kinds and
// leaves the file byte-identical (the vault never salvages or rewrites on its own); an item that opens has the
// value the seed corpus stored under that name (the fuzzer cannot forge a ciphertext). Build and run: `make fuzz`.
import Logging
@_spi(Testing) import SecureVault
import TestKit

let directory = makeScratchDirectory(prefix: "/dev/shm/vault-fuzz-")

/// The passphrase and the items of `Tests/SecureVaultTests/FuzzVaultCorpusTests.swift`, which writes the seeds.
let passphrase = SecretBytes(utf8: "fuzz-passphrase")
let seededValues: [String: String] = ["alpha": "first", "bravo": "second", "session": "token-123"]

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzVaultOpen(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    removeFiles(in: directory)
    let path = directory + "/app.prefs"
    createFile(at: path, bytes)
    var configuration = Vault.Configuration(directory: directory)
    configuration.keyStore = .passphrase(passphrase, cost: .insecureForTesting, maximumCost: .insecureForTesting)
    configuration.logger.logLevel = .critical
    let vault = try! Vault(service: "app", configuration: configuration)
    vault.forgetKey()  // every input starts cold: no key cached from the previous one
    do {
        for key in try vault.allKeys() {
            guard let value = try vault.string(for: key) else { continue }
            precondition(seededValues[key] == value, "item \(key) opened to a value that was never stored")
        }
        _ = vault.sessionToken()
    } catch let error as VaultError {
        let expected: Set<String> = ["corrupted", "tampered", "wrongKey", "keyMissing", "io"]
        precondition(expected.contains(error.code.description), "unexpected error: \(error)")
        precondition(readFile(path) == bytes, "a vault that failed to open changed its file")
    } catch {
        preconditionFailure("not a VaultError: \(error)")
    }
    return 0
}
