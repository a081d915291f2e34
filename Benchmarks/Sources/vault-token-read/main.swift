// A fresh process reading the vault's session token, as an app does at launch to route its first frame.
//
//   vault-token-read DIRECTORY SERVICE [KEYSTORE]   prints "<nanoseconds from before Vault(...) to the answer>
//                                        <state>"; KEYSTORE: keyring:user, key-file:PATH, systemd-creds:NAME
//                                        (the Secret Service without one)
//   vault-token-read --set DIRECTORY SERVICE KEYSTORE   stores a session token (set-up, not measured)
//   vault-token-read --noop              exits at once: the cost of starting this process
import Glibc
import SecureVault

func fail(_ text: String, _ status: Int32) -> Never {
    var line = text + "\n"
    line.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
    exit(status)
}

let arguments = CommandLine.arguments
if arguments.count == 2 && arguments[1] == "--noop" { exit(0) }
let setting = arguments.count == 5 && arguments[1] == "--set"
let operands = setting ? Array(arguments.dropFirst()) : arguments
guard operands.count == 3 || operands.count == 4 else {
    fail("usage: vault-token-read [--set] DIRECTORY SERVICE [KEYSTORE] | --noop", 64)
}
var configuration = Vault.Configuration(directory: operands[1])
if operands.count == 4 {
    let store = operands[3]
    if store == "secret-portal" {
        configuration.keyStore = .secretPortal
    } else if store == "keyring:user" {
        configuration.keyStore = .kernelKeyring(.user)
    } else if store.hasPrefix("key-file:") {
        configuration.keyStore = .keyFile(String(store.dropFirst("key-file:".count)))
    } else if store.hasPrefix("systemd-creds:") {
        configuration.keyStore = .systemdCredential(name: String(store.dropFirst("systemd-creds:".count)))
    } else {
        fail("vault-token-read: unknown key store \(store)", 64)
    }
}
func now() -> UInt64 {
    var t = timespec()
    clock_gettime(CLOCK_MONOTONIC, &t)
    return UInt64(t.tv_sec) * 1_000_000_000 + UInt64(t.tv_nsec)
}
if setting {
    do {
        let vault = try Vault(service: operands[2], configuration: configuration)
        try vault.setSessionToken("eyJhbGciOiJFZERTQSJ9.benchmark-session-token.c2lnbmF0dXJl", expiresAt: nil)
        exit(0)
    } catch {
        fail("vault-token-read --set: \(error)", 1)
    }
}
// Timed to the answer, as the bare calls are (each stops its clock once it holds the secret, before its clean-up):
// the vault is released after the clock stops, as an app keeps it.
let start = now()
let state: SessionTokenState
let elapsed: UInt64
do {
    let vault = try Vault(service: operands[2], configuration: configuration)
    state = vault.sessionToken()
    elapsed = now() - start
    withExtendedLifetime(vault) {}
} catch {
    fail("vault-token-read: \(error)", 1)
}
switch state {
case .valid: print("\(elapsed) valid")
case .expired: print("\(elapsed) expired")
case .absent: print("\(elapsed) absent")
case .unavailable(let reason): print("\(elapsed) unavailable-\(reason.rawValue)")
}
