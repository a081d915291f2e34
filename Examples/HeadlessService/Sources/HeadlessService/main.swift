// A headless service's session token, kept in a vault whose key is a key file, with SecureVault built without its
// `SecretService` trait. Run by scripts/check-headless.sh, which also checks that the executable links no
// libsecret, GIO or GLib.
//
//   HeadlessService DIRECTORY [MADE]   makes DIRECTORY (which must not exist yet), works in it and prints one line
//                                      per check; exits 1 when one failed. MADE: the directory of a vault
//                                      "made-with-the-trait" whose key is in the Secret Service (made by a build
//                                      with the trait), whose session token must read unavailable. Run it beside a
//                                      Secret Service that answers (scripts/check-headless.sh does): a build that
//                                      kept the Secret Service would then succeed where these checks want a refusal
import Glibc
import SecureVault

let arguments = CommandLine.arguments
guard arguments.count == 2 || arguments.count == 3 else {
    print("usage: HeadlessService DIRECTORY [MADE]")
    exit(64)
}
let directory = arguments[1]
guard mkdir(directory, 0o700) == 0 else {
    print("HeadlessService: cannot make \(directory): errno \(errno)")
    exit(73)
}
var failed = false
@MainActor func check(_ what: String, _ ok: Bool, _ detail: String = "") {
    print("\(ok ? "ok" : "FAILED"): \(what)\(detail.isEmpty ? "" : " (\(detail))")")
    if !ok { failed = true }
}

// The key store a headless service uses: a key file (a mounted secret), made once.
let keyFile = directory + "/service.key"
var configuration = Vault.Configuration(directory: directory + "/vault")
configuration.keyStore = .keyFile(keyFile)
do {
    _ = try KeyStore.createKeyFile(at: keyFile)
    let vault = try Vault(service: "headless", configuration: configuration)
    try vault.setSessionToken("token-1", expiresAt: nil)
    let state = try Vault(service: "headless", configuration: configuration).sessionToken()
    check("a key-file vault keeps its session token", state == .valid(token: "token-1", expiresAt: nil), "\(state)")
    _ = try vault.rotateKey()
    let afterRotation = try Vault(service: "headless", configuration: configuration).sessionToken()
    check("and reads it after a key rotation", afterRotation == .valid(token: "token-1", expiresAt: nil), "\(afterRotation)")
} catch {
    check("a key-file vault works", false, "\(error)")
}

// The Secret Service and the Secret portal are not in this build: a typed answer at once, naming the trait.
for (name, keyStore) in [("secret-service", KeyStore.secretService), ("secret-portal", KeyStore.secretPortal)] {
    var other = Vault.Configuration(directory: directory + "/" + name)
    other.keyStore = keyStore
    do {
        let vault = try Vault(service: "headless", configuration: other)
        try vault.setSessionToken("token-2", expiresAt: nil)
        check("\(name): a set is refused", false, "it succeeded")
    } catch let error as VaultError {
        check(
            "\(name): a set is refused as unavailable, naming the trait",
            error.code == .unavailable && error.message.contains("SecretService trait"), error.message)
    } catch {
        check("\(name): a set is refused as unavailable", false, "\(error)")
    }
    check("\(name): nothing was left behind", access(directory + "/" + name, F_OK) != 0)
}
// A vault made with the Secret Service by a build that has it: its token is unavailable here, not absent (the
// caller checks that its file is left as it was).
if arguments.count == 3 {
    do {
        let vault = try Vault(service: "made-with-the-trait", configuration: Vault.Configuration(directory: arguments[2]))
        let state = vault.sessionToken()
        check(
            "a vault made with the Secret Service reads unavailable, not absent",
            state == .unavailable(.noSecretService), "\(state)")
        let problem = vault.status().problem?.message ?? "none"
        check("and its status names the trait", problem.contains("SecretService trait"), problem)
    } catch {
        check("a vault made with the Secret Service reads unavailable, not absent", false, "\(error)")
    }
}
exit(failed ? 1 : 0)
