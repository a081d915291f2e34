// A fresh process reading the vault's session token, as an app does at launch to route its first frame.
//
//   vault-token-read DIRECTORY SERVICE [KEYSTORE]   prints "<nanoseconds from before Vault(...) to the answer>
//                                        <state>"; KEYSTORE: keyring:user, key-file:PATH, systemd-creds:NAME
//                                        (the Secret Service without one)
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
guard arguments.count == 3 || arguments.count == 4 else {
    fail("usage: vault-token-read DIRECTORY SERVICE [KEYSTORE] | --noop", 64)
}
var configuration = Vault.Configuration(directory: arguments[1])
if arguments.count == 4 {
    let store = arguments[3]
    if store == "keyring:user" {
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
let start = now()
let state: SessionTokenState
do {
    let vault = try Vault(service: arguments[2], configuration: configuration)
    state = vault.sessionToken()
} catch {
    fail("vault-token-read: \(error)", 1)
}
let elapsed = now() - start
switch state {
case .valid: print("\(elapsed) valid")
case .expired: print("\(elapsed) expired")
case .absent: print("\(elapsed) absent")
case .unavailable(let reason): print("\(elapsed) unavailable-\(reason.rawValue)")
}
