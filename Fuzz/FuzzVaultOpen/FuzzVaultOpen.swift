// libFuzzer target: arbitrary bytes as a vault file, opened and unsealed item by item. The key comes from a
// passphrase (Argon2id at its cheapest, salt and cost read from the fuzzed header), so every mutation of the
// header, the records and the ciphertexts goes through the real open and unseal path.
// Checks, beyond "no crash": an open or read that fails is a typed VaultError of the "cannot be known" kinds and
// leaves the file byte-identical (the vault never salvages or rewrites on its own); an item that opens has the
// value the seed corpus stored under that name (the fuzzer cannot forge a ciphertext). Build and run: `make fuzz`.
import FoundationEssentials
import Glibc
import Logging
import SecureVault

nonisolated(unsafe) var directory: String = {
    var template = Array("/dev/shm/vault-fuzz-XXXXXX".utf8CString)
    guard template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) != nil else { fatalError("mkdtemp") }
    return String(cString: template.withUnsafeBufferPointer { $0.baseAddress! })
}()

/// The passphrase and the items of `Tests/SecureVaultTests/FuzzVaultCorpusTests.swift`, which writes the seeds.
let passphrase = SecretBytes(utf8: "fuzz-passphrase")
let seededValues: [String: String] = ["alpha": "first", "bravo": "second", "session": "token-123"]

func write(_ bytes: [UInt8], to path: String) {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    precondition(fd >= 0)
    _ = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
    close(fd)
}

func read(_ path: String) -> [UInt8] {
    let fd = open(path, O_RDONLY)
    guard fd >= 0 else { return [] }
    defer { close(fd) }
    var out: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
        if n <= 0 { break }
        out += chunk[0..<n]
    }
    return out
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzVaultOpen(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    for name in (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [] {
        unlink(directory + "/" + name)
    }
    let path = directory + "/app.prefs"
    write(bytes, to: path)
    var configuration = Vault.Configuration(directory: directory)
    configuration.keyStore = .passphrase(passphrase, cost: .insecureForTesting)
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
        precondition(read(path) == bytes, "a vault that failed to open changed its file")
    } catch {
        preconditionFailure("not a VaultError: \(error)")
    }
    return 0
}
