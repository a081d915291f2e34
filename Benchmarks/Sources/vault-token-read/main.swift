// A fresh process reading the vault's session token, as an app does at launch to route its first frame.
//
//   vault-token-read DIRECTORY SERVICE [KEYSTORE]   prints "<nanoseconds from before Vault(...) to the answer>
//                                        <state>"; KEYSTORE: secret-portal, keyring:user, key-file:PATH,
//                                        systemd-creds:NAME (the Secret Service without one)
//   vault-token-read --set DIRECTORY SERVICE KEYSTORE   stores a session token (set-up, not measured)
//   vault-token-read --noop              exits at once: the cost of starting this process
//   VAULT_TOKEN_READ_WARM="DIRECTORY SERVICE KEYSTORE" reads that vault's token first, untimed (below)
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
func keyStore(_ store: String) -> KeyStore {
    if store == "secret-portal" { return .secretPortal }
    if store == "keyring:user" { return .kernelKeyring(.user) }
    if store.hasPrefix("key-file:") { return .keyFile(String(store.dropFirst("key-file:".count))) }
    if store.hasPrefix("systemd-creds:") {
        return .systemdCredential(name: String(store.dropFirst("systemd-creds:".count)))
    }
    fail("vault-token-read: unknown key store \(store)", 64)
}
var configuration = Vault.Configuration(directory: operands[1])
if operands.count == 4 { configuration.keyStore = keyStore(operands[3]) }
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
// VAULT_TOKEN_READ_WARM="DIRECTORY SERVICE KEYSTORE": another vault's token read first, untimed, so that the timed
// read is the process's second (the Swift runtime's and the vault's code's first use paid by the first): what the
// read itself costs, apart from a fresh process's first use of the code.
if !setting, let warm = getenv("VAULT_TOKEN_READ_WARM").map({ String(cString: $0) }) {
    let parts = warm.split(separator: " ").map(String.init)
    guard parts.count == 3 else { fail("vault-token-read: VAULT_TOKEN_READ_WARM is DIRECTORY SERVICE KEYSTORE", 64) }
    var warmConfiguration = Vault.Configuration(directory: parts[0])
    warmConfiguration.keyStore = keyStore(parts[2])
    do {
        guard case .valid = try Vault(service: parts[1], configuration: warmConfiguration).sessionToken() else {
            fail("vault-token-read: the warm-up vault has no valid token", 1)
        }
    } catch {
        fail("vault-token-read: warm-up: \(error)", 1)
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
