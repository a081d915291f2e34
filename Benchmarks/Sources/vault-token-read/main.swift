// A fresh process reading the vault's session token, as an app does at launch to route its first frame.
//
//   vault-token-read DIRECTORY SERVICE   prints "<nanoseconds from before Vault(...) to the answer> <state>"
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
guard arguments.count == 3 else { fail("usage: vault-token-read DIRECTORY SERVICE | --noop", 64) }
func now() -> UInt64 {
    var t = timespec()
    clock_gettime(CLOCK_MONOTONIC, &t)
    return UInt64(t.tv_sec) * 1_000_000_000 + UInt64(t.tv_nsec)
}
let start = now()
let state: SessionTokenState
do {
    let vault = try Vault(service: arguments[2], configuration: Vault.Configuration(directory: arguments[1]))
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
