import SystemLayer

/// Which key stores work on this machine, and why the others do not: what `vaultctl doctor` lists. Reading it
/// never prompts; the kernel keyrings are tried for real (a 1-byte probe key added, read and invalidated).
package struct KeyStoreProbe: Sendable, Equatable {
    /// The `--key-store` spelling: `secret-service`, `keyring:user`, `passphrase`...
    package var name: String
    /// Whether a vault can keep its key there now.
    package var ready: Bool
    /// Why not, or what to know (where the key lives, what survives a reboot).
    package var detail: String

    /// Every key store this version has, probed. `secretService` is the Secret Service's state as the caller
    /// already found it (nil: ready; else why not).
    package static func all(
        secretServiceProblem: String?, secretPortal: KeyStoreProbe? = nil, deadline: Duration = .seconds(5)
    ) -> [KeyStoreProbe] {
        var probes = [
            KeyStoreProbe(
                name: "secret-service", ready: secretServiceProblem == nil,
                detail: secretServiceProblem ?? "the default keyring: survives reboots, readable by the user's processes"),
            secretPortal
                ?? KeyStoreProbe(
                    name: "secret-portal", ready: false,
                    detail: "only inside a Flatpak sandbox: this process is not sandboxed"),
        ]
        for keyring in KeyStore.KernelKeyring.allCases {
            probes.append(probe(keyring))
        }
        let credentials = FileKeys.probe(deadline: deadline)
        probes.append(
            KeyStoreProbe(name: "systemd-creds:NAME", ready: credentials.problem == nil, detail: credentials.problem ?? credentials.detail))
        probes.append(
            KeyStoreProbe(
                name: "key-file:PATH", ready: true,
                detail: "always, given a 32-byte key file of the user's, mode 0600 or 0400 (a mounted secret; "
                    + "vaultctl vault init --key-store key-file:PATH makes one); whoever reads it reads the vault"))
        probes.append(
            KeyStoreProbe(
                name: "passphrase", ready: true,
                detail: "always: the key is derived from a passphrase at every open (Argon2id), stored nowhere"))
        return probes
    }

    /// The one to use here: the Secret portal inside a sandbox, the Secret Service where it works, else a systemd
    /// credential (survives reboots, sealed to this machine), else the user keyring (gone at reboot), else a
    /// passphrase.
    package static func recommended(_ probes: [KeyStoreProbe]) -> KeyStoreProbe? {
        for name in ["secret-portal", "secret-service", "systemd-creds:NAME", "keyring:user", "passphrase"] {
            if let probe = probes.first(where: { $0.name == name && $0.ready }) { return probe }
        }
        return nil
    }

    /// The Secret portal, asked for the app's secret for real (then dropped), inside a Flatpak sandbox; nil on the
    /// host (where it is never called). The error tells a locked keyring from a missing portal or backend.
    package static func secretPortal(deadline: Duration) -> (probe: KeyStoreProbe, error: VaultError?)? {
        guard let sandbox = FlatpakSandbox.current else { return nil }
        do {
            _ = try SecretPortal.retrieveSecret(operation: "asking the Secret portal", deadline: deadline)
            return (
                KeyStoreProbe(
                    name: "secret-portal", ready: true,
                    detail: "the desktop keyring's secret for app \(sandbox.appID) alone: survives reboots and "
                        + "reinstalls, readable by no other app; the user sees nothing"), nil
            )
        } catch {
            return (KeyStoreProbe(name: "secret-portal", ready: false, detail: error.message), error)
        }
    }

    private static func probe(_ keyring: KeyStore.KernelKeyring) -> KeyStoreProbe {
        let name = "keyring:\(keyring.rawValue)"
        let serial: Int32
        switch KernelKeys.serial(of: keyring) {
        case .success(let found): serial = found
        case .failure(let error): return KeyStoreProbe(name: name, ready: false, detail: reason(error, keyring))
        }
        let description = "securevault-doctor-probe:\(Sys.processID())"
        if case .failure(let error) = KernelKeys.store(SecretBytes([1]), as: description, in: serial) {
            return KeyStoreProbe(name: name, ready: false, detail: reason(error, keyring))
        }
        defer { _ = KernelKeys.delete(description, in: serial) }
        switch KernelKeys.load(description, in: serial) {
        case .success(let key?) where key.count == 1:
            let lifetime: String
            switch keyring {
            case .session: lifetime = "this login session's processes; gone at logout and reboot"
            case .user: lifetime = "every process of the user; gone at reboot"
            case .persistent: lifetime = "every process of the user; gone at reboot or after days unused"
            }
            return KeyStoreProbe(name: name, ready: true, detail: lifetime)
        case .success:
            return KeyStoreProbe(name: name, ready: false, detail: "a probe key could not be read back")
        case .failure(let error):
            return KeyStoreProbe(name: name, ready: false, detail: reason(error, keyring))
        }
    }

    private static func reason(_ error: Errno, _ keyring: KeyStore.KernelKeyring) -> String {
        if error == .quotaExceeded { return "this user's kernel key quota is full" }
        return KernelKeys.unavailability(error, keyring) ?? error.text
    }
}
