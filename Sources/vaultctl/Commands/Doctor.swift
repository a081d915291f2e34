import ArgumentParser
import PrefsKV
import SecureVault
import SystemLayer

/// `vaultctl doctor`: is this machine able to keep secrets, and if not, what to do about it.
struct Doctor: VaultCtlCommand {
    static let configuration = CommandConfiguration(
        commandName: "doctor",
        abstract: "Check libraries, the session bus, the Secret Service, keyrings and store directories.",
        discussion: """
            Never prompts and works with a locked keyring. Lists the key stores that work here (the kernel \
            keyrings are tried with a 1-byte probe key) and why the others do not, and recommends one. Lists \
            the master keys the key stores keep for vaults that are gone (as `vault keys` finds them: deleted \
            by hand, superseded; `vault forget-key` deletes one). Ends \
            with a one-line diagnosis of the default key store (the Secret Service; inside a Flatpak sandbox, \
            the Secret portal, asked for the app's secret) and its fix.
            Exits 0 when vaults can be used with the default key store, 69 when it is not reachable \
            (see the recommended key store), 75 when the default keyring is locked or the service hangs, 77 \
            when a store directory has insecure permissions.
            """)

    @OptionGroup var options: GlobalOptions

    func answer(console: Console) throws -> Answer {
        let directories = try options.doctorDirectories()
        let report = DoctorReport.gather(prefs: directories.prefs, vault: directories.vault)
        return Answer(json: report.json, human: report.human, status: report.exitCode)
    }
}

/// What `doctor` found.
struct DoctorReport {
    struct Directory {
        var kind: String
        var path: String
        var exists: Bool
        var mode: Int?
        var owner: Int?
        /// Owned by us and closed to group and others (or not created yet).
        var secure: Bool
    }

    var libsodium: String
    var libsecret: String
    var busAddress: String?
    var probe: LibSecret.ServiceProbe?
    var failure: SecretServiceFailure?
    var directories: [Directory]
    var diagnosis: String
    var fix: String?
    var exitCode: Int32
    /// Every key store of this version, probed, and the one recommended here.
    var keyStores: [KeyStoreProbe] = []
    /// The vault master keys no vault this library can read needs (`vault keys`: superseded, orphaned, unplaced).
    var unusedKeys: [StoredVaultKey] = []
    /// The app id of the Flatpak sandbox this runs in, and what the Secret portal (its default key store) answered.
    var sandbox: String?
    var secretPortal: (probe: KeyStoreProbe, error: VaultError?)?

    /// What the provider found does that gnome-keyring does not, and the settings that avoid it.
    var notes: [String] {
        guard let provider = probe?.provider, provider.kind == .keePassXC else { return [] }
        return [
            "Access: \(provider.approvalHint) (vaults answer accessNotApproved, exit 75, until then).",
            "Deletion: \(provider.keptAfterDelete ?? ""); with the Recycle Bin off and \"Confirm when clients "
                + "request entry deletion\" on, deleting a key waits for that confirmation (--interactive).",
        ]
    }

    static func gather(prefs: String?, vault: String?) -> DoctorReport {
        let busAddress = Sys.environment("DBUS_SESSION_BUS_ADDRESS", keepingEmpty: true)
        var probe: LibSecret.ServiceProbe?
        var failure: SecretServiceFailure?
        do {
            probe = try LibSecret.probe(deadline: VaultDefaults.deadline)
        } catch {
            failure = error
        }
        let directories = [
            inspect(kind: "prefs", path: prefs ?? PrefsStore.defaultDirectory),
            inspect(kind: "vault", path: vault ?? VaultDefaults.directory),
        ]
        var report = DoctorReport(
            libsodium: Sodium.versionString, libsecret: LibSecret.library, busAddress: busAddress,
            probe: probe, failure: failure, directories: directories, diagnosis: "", fix: nil, exitCode: 0)
        report.sandbox = FlatpakSandbox.current?.appID
        report.secretPortal = KeyStoreProbe.secretPortal(deadline: VaultDefaults.deadline)
        report.diagnose()
        let serviceProblem: String?
        if report.sandbox != nil {
            serviceProblem = failure.map { VaultError($0, operation: "the Secret Service").message }
        } else {
            serviceProblem = report.exitCode == ExitStatus.success ? nil : report.diagnosis
        }
        report.keyStores = KeyStoreProbe.all(secretServiceProblem: serviceProblem, secretPortal: report.secretPortal?.probe)
        if report.sandbox != nil { report.diagnoseSandbox() }
        // Key stores that cannot be listed (a locked keyring) are the diagnosis's concern, not repeated here.
        report.unusedKeys = Vault.storedKeys(searching: [directories[1].path]).keys.filter(\.use.isUnused)
        return report
    }

    private static func inspect(kind: String, path: String) -> Directory {
        guard case .success(let status) = Sys.stat(path) else {
            return Directory(kind: kind, path: path, exists: false, mode: nil, owner: nil, secure: true)
        }
        let secure = status.permissions & 0o077 == 0 && status.owner == Sys.userID
        return Directory(
            kind: kind, path: path, exists: true, mode: Int(status.permissions), owner: Int(status.owner),
            secure: secure)
    }

    private static let unlockCommand =
        "printf '%s' \"$KEYRING_PASSWORD\" | gnome-keyring-daemon --replace --unlock --components=secrets"

    private mutating func diagnose() {
        if let failure {
            switch failure.kind {
            case .noSessionBus:
                diagnosis = "No Secret Service is reachable: there is no D-Bus session bus in this environment."
                fix =
                    "Run inside a desktop session, or start one headless: dbus-run-session -- sh -c "
                    + "'printf %s \"$KEYRING_PASSWORD\" | gnome-keyring-daemon --unlock --components=secrets; exec YOUR-COMMAND'"
                exitCode = ExitStatus.unavailable
            case .noSecretService:
                diagnosis = "No Secret Service is reachable: the session bus has no org.freedesktop.secrets provider."
                fix =
                    "Install and start a provider: apt-get install gnome-keyring, then "
                    + "printf '%s' \"$KEYRING_PASSWORD\" | gnome-keyring-daemon --unlock --components=secrets"
                exitCode = ExitStatus.unavailable
            case .notBuiltIn:
                diagnosis = "This vaultctl was built without the Secret Service (the package's SecretService trait is off)."
                fix =
                    "Keep vault keys in another key store (--key-store key-file:PATH, systemd-creds:NAME or keyring:user), "
                    + "or build vaultctl with the trait (the default)."
                exitCode = ExitStatus.unavailable
            case .notLoaded:
                // The libsecret line above gives the dynamic linker's reason; the fix, what to do.
                diagnosis = "No Secret Service client: libsecret could not be loaded."
                fix =
                    "Install libsecret (apt-get install libsecret-1-0), or keep vault keys in another key store "
                    + "(--key-store key-file:PATH, systemd-creds:NAME or keyring:user)."
                exitCode = ExitStatus.unavailable
            case .noDefaultCollection:
                diagnosis = "The Secret Service has no default keyring to keep vault keys in."
                fix = "Create and unlock the login keyring: " + Self.unlockCommand
                exitCode = ExitStatus.unavailable
            case .locked:
                diagnosis = "The default keyring is locked."
                fix = "Unlock it in your desktop's keyring app (Passwords and Keys), or headless: " + Self.unlockCommand
                exitCode = ExitStatus.tryAgain
            case .timeout:
                diagnosis =
                    "The Secret Service did not answer within \(VaultDefaults.deadline): its daemon is hung or stopped."
                fix = "Restart it: pkill -CONT gnome-keyring-daemon, or " + Self.unlockCommand
                exitCode = ExitStatus.tryAgain
            case .other, .notApproved:
                diagnosis = "The Secret Service failed: \(failure.message)"
                fix = "Check the keyring daemon's log (journalctl --user) and restart it."
                exitCode = ExitStatus.ioError
            }
            return
        }
        guard let probe else { return }
        guard let defaultPath = probe.defaultCollectionPath else {
            diagnosis = "The Secret Service has no default keyring to keep vault keys in."
            fix = "Create and unlock the login keyring: " + Self.unlockCommand
            exitCode = ExitStatus.unavailable
            return
        }
        if probe.collections.first(where: { $0.path == defaultPath })?.locked ?? true {
            diagnosis = "The default keyring is locked: vaults answer \"locked\" until it is unlocked."
            fix =
                probe.provider?.kind == .keePassXC
                ? "Unlock the database in KeePassXC (vaultctl never asks it to show its unlock dialog unless run "
                    + "with --interactive)"
                : "Unlock it in your desktop's keyring app (Passwords and Keys), or headless: " + Self.unlockCommand
            exitCode = ExitStatus.tryAgain
            return
        }
        if let insecure = directories.first(where: { !$0.secure }) {
            diagnosis = "The \(insecure.kind) directory \(insecure.path) is open to other users or not owned by you."
            fix = "chmod 700 \(insecure.path), and make sure you own it"
            exitCode = ExitStatus.permission
            return
        }
        diagnosis = "Ready: the Secret Service is reachable and the default keyring is unlocked."
        if probe.provider?.kind == .keePassXC {
            diagnosis += " With KeePassXC's default settings a vault's key can still be unapproved for a program."
        }
        fix = nil
        exitCode = ExitStatus.success
    }

    /// Inside a Flatpak sandbox the default key store is the Secret portal: the diagnosis is its answer.
    private mutating func diagnoseSandbox() {
        guard let sandbox, let secretPortal else { return }
        if let insecure = directories.first(where: { !$0.secure }) {
            diagnosis = "The \(insecure.kind) directory \(insecure.path) is open to other users or not owned by you."
            fix = "chmod 700 \(insecure.path), and make sure you own it"
            exitCode = ExitStatus.permission
            return
        }
        guard let error = secretPortal.error else {
            diagnosis = "Ready: inside the Flatpak sandbox of \(sandbox), the Secret portal answers with the app's own "
                + "secret (the default key store here; the manifest needs no --talk-name)."
            fix = nil
            exitCode = ExitStatus.success
            return
        }
        diagnosis = "Inside the Flatpak sandbox of \(sandbox), the Secret portal cannot be used: \(error.message)"
        switch error.code {
        case .locked:
            fix = "Unlock the keyring on the host (log in, or open Passwords and Keys), then retry"
            exitCode = ExitStatus.tryAgain
        case .timeout:
            fix = "Restart the keyring daemon on the host: " + Self.unlockCommand
            exitCode = ExitStatus.tryAgain
        case .io:
            fix = "Restart the keyring daemon on the host (its portal backend failed): " + Self.unlockCommand
            exitCode = ExitStatus.ioError
        default:
            fix = "On the host: install xdg-desktop-portal and a Secret portal backend for the desktop "
                + "(gnome-keyring, or KWallet's), and log in again"
            exitCode = ExitStatus.unavailable
        }
    }

    /// The command that forgets `key`, runnable as printed: in the vault directory doctor looked in, where
    /// forget-key decides again whether a vault uses it.
    private func forgetCommand(_ key: StoredVaultKey) -> String {
        let directory = directories.first { $0.kind == "vault" }?.path ?? VaultDefaults.directory
        return "vaultctl --dir \(shellQuoted(directory)) vault forget-key --service \(shellQuoted(key.service)) "
            + "--key-id \(key.keyID) --yes"
    }

    /// `doctor --json`.
    struct JSON: Encodable {
        struct Libraries: Encodable {
            var libsodium: String
            var libsecret: String
        }

        struct Bus: Encodable {
            @Nullable var address: String?
            /// Null only in a build without the SecretService trait: nothing asked the bus.
            @Nullable var reachable: Bool?
        }

        struct Service: Encodable {
            struct Failure: Encodable {
                var kind: String
                @Nullable var domain: String?
                @Nullable var code: Int32?
                var message: String
            }

            var reachable: Bool
            @Nullable var error: Failure?
        }

        struct Collection: Encodable {
            var label: String
            var path: String
            var locked: Bool
            var `default`: Bool
        }

        struct KeyStore: Encodable {
            var name: String
            var ready: Bool
            var detail: String
        }

        struct Provider: Encodable {
            var name: String
            var program: String
            var pid: UInt32
        }

        struct Directory: Encodable {
            var kind: String
            var path: String
            var exists: Bool
            @Nullable var mode: String?
            @Nullable var owner: Int?
            var secure: Bool
        }

        var libraries: Libraries
        /// The app id of the Flatpak sandbox doctor runs in; null on the host.
        @Nullable var sandbox: String?
        var bus: Bus
        var secretService: Service
        var collections: [Collection]
        @Nullable var defaultCollection: String?
        @Nullable var provider: Provider?
        var notes: [String]
        var keyStores: [KeyStore]
        @Nullable var recommendedKeyStore: String?
        var directories: [Directory]
        /// As `vault keys --json` lists them.
        var unusedKeys: [VaultGroup.KeyReport]
        var diagnosis: String
        @Nullable var fix: String?
        var ok: Bool
    }

    var json: JSON {
        let service = JSON.Service(
            reachable: failure.map {
                $0.kind != .noSessionBus && $0.kind != .noSecretService && $0.kind != .timeout && !$0.askedNothing
            }
                ?? true,
            error: failure.map {
                JSON.Service.Failure(
                    kind: String(describing: $0.kind), domain: $0.domain, code: $0.code, message: $0.message)
            })
        return JSON(
            libraries: JSON.Libraries(libsodium: libsodium, libsecret: libsecret),
            sandbox: sandbox,
            bus: JSON.Bus(
                address: busAddress, reachable: failure?.askedNothing == true ? nil : failure?.kind != .noSessionBus),
            secretService: service,
            collections: (probe?.collections ?? []).map { collection in
                JSON.Collection(
                    label: collection.label, path: collection.path, locked: collection.locked,
                    default: collection.path == probe?.defaultCollectionPath)
            },
            defaultCollection: probe?.defaultCollectionPath,
            provider: probe?.provider.map {
                JSON.Provider(name: $0.name, program: $0.program, pid: $0.pid)
            },
            notes: notes,
            keyStores: keyStores.map { JSON.KeyStore(name: $0.name, ready: $0.ready, detail: $0.detail) },
            recommendedKeyStore: KeyStoreProbe.recommended(keyStores)?.name,
            directories: directories.map { directory in
                JSON.Directory(
                    kind: directory.kind, path: directory.path, exists: directory.exists,
                    mode: directory.mode.map(octalMode), owner: directory.owner, secure: directory.secure)
            },
            unusedKeys: unusedKeys.map(VaultGroup.KeyReport.init),
            diagnosis: diagnosis, fix: fix, ok: exitCode == ExitStatus.success)
    }

    var human: String {
        var lines: [String] = []
        lines.append("libsodium        \(libsodium)")
        lines.append("libsecret        \(libsecret)")
        if let sandbox { lines.append("sandbox          Flatpak app \(sandbox) (default key store: secret-portal)") }
        if let secretPortal {
            // The portal does not say which keyring keeps the secret: xdg-desktop-portal on the host picks the
            // backend (gnome-keyring on GNOME, KWallet on KDE), and the sandbox sees only the portal.
            let answer = secretPortal.error.map { "refused: \($0.code)" } ?? "answered with the app's secret"
            lines.append(
                "secret portal    \(answer) (its backend, the host's keyring, is not visible from the sandbox)")
        }
        let busState =
            failure?.kind == .noSessionBus ? "unreachable" : failure?.askedNothing == true ? "not asked" : "reachable"
        lines.append(
            "session bus      \(busState)\(busAddress.map { " (\($0))" } ?? " (DBUS_SESSION_BUS_ADDRESS unset)")")
        let serviceState: String
        switch failure?.kind {
        case nil: serviceState = "reachable"
        case .noSessionBus?, .noSecretService?: serviceState = "not reachable"
        case .timeout?: serviceState = "not answering"
        case .notBuiltIn?: serviceState = "not built in (the SecretService trait is off)"
        case .notLoaded?: serviceState = "no client (libsecret could not be loaded)"
        default: serviceState = "reachable, but: \(failure!.message)"
        }
        lines.append("secret service   \(serviceState)")
        if let provider = probe?.provider { lines.append("provider         \(provider.description)") }
        for collection in probe?.collections ?? [] {
            let isDefault = collection.path == probe?.defaultCollectionPath ? " (default)" : ""
            let label = collection.label.isEmpty ? collection.path : collection.label
            lines.append("keyring          \(label)\(isDefault): \(collection.locked ? "locked" : "unlocked")")
        }
        if probe != nil && probe?.defaultCollectionPath == nil {
            lines.append("keyring          no default keyring")
        }
        for directory in directories {
            let state: String
            if !directory.exists {
                state = "not created yet"
            } else {
                let mode = directory.mode.map(octalMode) ?? "?"
                state = "mode \(mode), \(directory.secure ? "private" : "INSECURE")"
            }
            let label = "\(directory.kind) directory"
            lines.append(
                label + String(repeating: " ", count: max(1, 17 - label.count)) + "\(directory.path) (\(state))")
        }
        for store in keyStores {
            let label = "key store " + store.name
            let padding = String(repeating: " ", count: max(1, 30 - label.count))
            lines.append(label + padding + (store.ready ? "ready: " : "unavailable: ") + store.detail)
        }
        if let recommended = KeyStoreProbe.recommended(keyStores) {
            lines.append("recommended      --key-store \(recommended.name)")
        }
        for key in unusedKeys {
            lines.append(
                "unused key       \(key.service) \(key.keyID) in \(key.place.kind), \(key.use.name): \(key.use.detail); "
                    + "forget it with `\(forgetCommand(key))`")
        }
        lines.append("")
        lines.append(diagnosis)
        if let fix { lines.append("Fix: \(fix)") }
        for note in notes { lines.append("Note: \(note)") }
        if !unusedKeys.isEmpty {
            lines.append(
                "Note: \(plural(unusedKeys.count, "master key")) kept for vaults that are gone (vault keys lists them): "
                    + "forget one only once sure no vault of yours needs it (a vault moved elsewhere shows here too)")
        }
        return lines.joined(separator: "\n")
    }
}
