import PrefsKV
import Synchronization
import SystemLayer

/// Where a vault's master key lives. Always an explicit choice: a vault never falls back from one key store
/// to another, and `Vault.status()` names the one in use.
///
/// ```swift
/// var configuration = Vault.Configuration()
/// configuration.keyStore = .secretService                       // the default: gnome-keyring, KeePassXC...
/// configuration.keyStore = .passphrase(SecretBytes(utf8: pw))   // headless servers that choose it
/// configuration.keyStore = .kernelKeyring(.user)                // servers, SSH sessions: gone at reboot
/// configuration.keyStore = .keyFile("/run/secrets/vault-key")    // containers with a mounted secret
/// configuration.keyStore = .systemdCredential(name: "app-vault") // services: sealed by the host key / TPM2
/// configuration.keyStore = .inMemory(InMemoryKeys())            // tests
/// ```
public struct KeyStore: Sendable, CustomStringConvertible {
    enum Storage: Sendable {
        case secretService
        /// The passphrase, the cost new keys are derived at, and the largest cost a header may ask for.
        case passphrase(SecretBytes, PassphraseCost, maximum: PassphraseCost)
        case inMemory(InMemoryKeys)
        case kernelKeyring(KernelKeyring)
        case keyFile(path: String)
        /// The credential's name, and its sealed file (nil: `<name>.cred` in the vault's directory).
        case systemdCredential(name: String, file: String?)
        case secretPortal
    }

    let storage: Storage

    /// The freedesktop Secret Service (gnome-keyring, KeePassXC...) through libsecret: one random 256-bit key
    /// per vault, in the default collection, under attributes that are random ids only.
    public static let secretService = KeyStore(storage: .secretService)

    /// The Secret portal of a Flatpak sandbox (`org.freedesktop.portal.Secret`): the desktop's keyring keeps a
    /// secret for the app alone (by its app id), with no `--talk-name` in the manifest and no access to any other
    /// secret of the user. As with a key file, each vault's random master key is kept wrapped under a key derived
    /// from that secret (HKDF-SHA256), in `<service>.<key id>.vaultkey` beside the vault file; nothing of the
    /// portal's secret is written or logged. The default key store inside a sandbox; outside one it is refused
    /// (``VaultError/Code/unavailable``), because the portal then gives every host program one shared secret.
    ///
    /// ```swift
    /// var configuration = Vault.Configuration(service: "org.example.Notes")
    /// configuration.keyStore = .secretPortal   // what a sandboxed app gets by default
    /// ```
    public static let secretPortal = KeyStore(storage: .secretPortal)

    /// The default of ``Vault/Configuration/keyStore``: the Secret portal inside a Flatpak sandbox, else the
    /// Secret Service.
    package static var processDefault: KeyStore { FlatpakSandbox.current == nil ? .secretService : .secretPortal }

    /// A key derived from a passphrase with Argon2id; the salt and cost are kept in the vault file's header.
    /// A wrong passphrase is reported as ``VaultError/Code/wrongKey``.
    ///
    /// ```swift
    /// configuration.keyStore = .passphrase(SecretBytes(utf8: pw))                      // interactive
    /// configuration.keyStore = .passphrase(SecretBytes(utf8: pw), cost: .sensitive)   // seconds, 1 GiB
    /// ```
    ///
    /// New keys (a new vault, `Vault.rotateKey()`) are derived at `cost`. Opening an existing vault derives its
    /// key at the cost its header names, so whoever can write the file could ask every open for hours of work
    /// or terabytes of memory: a header asking for more passes or more memory than `maximumCost`, or for less
    /// than libsodium's minimum, is refused as ``VaultError/Code/corrupted`` before anything is derived, and the
    /// file is left untouched.
    ///
    /// - Parameters:
    ///   - passphrase: the passphrase, in guarded memory.
    ///   - cost: the cost of keys this vault derives. The default is ``PassphraseCost/interactive``.
    ///   - maximumCost: the largest cost a header may ask for, passes and memory each; never below `cost`. The
    ///     default, ``PassphraseCost/moderate``, opens every vault written at `.interactive` or `.moderate`; an
    ///     app whose vaults were written at `.sensitive` but that now derives at a lower cost passes
    ///     `maximumCost: .sensitive`.
    public static func passphrase(
        _ passphrase: SecretBytes, cost: PassphraseCost = .interactive, maximumCost: PassphraseCost = .moderate
    ) -> KeyStore {
        KeyStore(storage: .passphrase(passphrase, cost, maximum: cost.widened(to: maximumCost)))
    }

    /// The Linux kernel's key retention service (keyrings(7)): one random 256-bit key per vault, a "user" key
    /// named `securevault:<service>:<vault id>:<key id>` in the chosen keyring. For secrets that must not
    /// outlive a reboot (or the login session), where no Secret Service runs: servers, containers, SSH
    /// sessions. Nothing is written to disk but the vault file; the key lives in kernel memory only.
    ///
    /// ```swift
    /// configuration.keyStore = .kernelKeyring(.user)
    /// ```
    ///
    /// A revoked or expired key is ``VaultError/Code/keyMissing`` (the message says which), a full key quota
    /// (`/proc/sys/kernel/keys/maxbytes`) ``VaultError/Code/diskFull``, a keyring this process cannot reach
    /// (no session keyring, no persistent keyrings in this kernel, key system calls blocked by a container's
    /// seccomp profile) ``VaultError/Code/unavailable``. Any process of the same user that can reach the
    /// keyring can read the key, as with every other key store.
    public static func kernelKeyring(_ keyring: KernelKeyring) -> KeyStore {
        KeyStore(storage: .kernelKeyring(keyring))
    }

    /// A key file a deployment provides (a Kubernetes or Docker secret mounted into a container): exactly 32
    /// random bytes, a regular file of this user that no other user may read or write (mode 0400 or 0600, the
    /// ssh rule; a symbolic link to one is followed, as Kubernetes mounts secrets through links).
    ///
    /// ```swift
    /// configuration.keyStore = .keyFile("/run/secrets/vault-key")
    /// ```
    ///
    /// The key file is the root secret: it is only read, never changed or deleted (a mounted secret is
    /// read-only; several vaults may share one). Each master key is random and kept wrapped under it in
    /// `<service>.<key id>.vaultkey` beside the vault file, so `Vault.rotateKey()` and `Vault.wipe()` work as
    /// with a keyring: a wipe deletes the wrapped key, and a copy of the vault file made before cannot be opened
    /// afterwards, key file or not. A missing key file is ``VaultError/Code/keyMissing`` (a key file is never
    /// created silently: ``createKeyFile(at:)``, or `vaultctl vault init --key-store key-file:PATH`), one of
    /// another user or open to others ``VaultError/Code/permissionDenied``, one of another length or that does not
    /// open the vault's wrapped key ``VaultError/Code/wrongKey``. Whoever can read the key file and the vault's
    /// directory can read the vault.
    public static func keyFile(_ path: String) -> KeyStore {
        KeyStore(storage: .keyFile(path: path))
    }

    /// Creates a key file for ``keyFile(_:)`` at `path`: 32 random bytes, mode 0600, flushed to disk. An existing
    /// file is left as it is (neither read nor checked).
    ///
    /// ```swift
    /// try KeyStore.createKeyFile(at: "/etc/myapp/vault.key")
    /// ```
    ///
    /// - Returns: true when it was created, false when a file was already there.
    /// - Throws: ``VaultError`` when the file cannot be created (its directory missing or not writable).
    @discardableResult
    public static func createKeyFile(at path: String) throws -> Bool {
        try FileKeys.createKeyFile(at: path)
    }

    /// A systemd credential (systemd-creds(1)): the root secret is sealed by `systemd-creds encrypt` with the
    /// machine's host key (`/var/lib/systemd/credential.secret`, root's), and with its TPM2 too where the
    /// machine has one, so the sealed file is useless on another machine.
    ///
    /// ```swift
    /// configuration.keyStore = .systemdCredential(name: "app-vault")
    /// ```
    ///
    /// Read from `$CREDENTIALS_DIRECTORY/<name>` when the process runs as a service whose unit has
    /// `LoadCredentialEncrypted=<name>:<file>` (systemd decrypts it: the service may run as any user; the file must
    /// be as systemd makes it, a regular file of this user or root that group and others cannot write, else
    /// ``VaultError/Code/permissionDenied``), else by
    /// running `systemd-creds decrypt` on `file` (as root: the host key is root's). A vault created where neither
    /// exists seals a new one into `file` (mode 0600). Each master key is kept wrapped under it as for
    /// ``keyFile(_:)``; the credential itself is never changed or deleted. No `systemd-creds`, or one that cannot
    /// use the host key as this user, is ``VaultError/Code/unavailable``; a credential sealed for another name or
    /// machine ``VaultError/Code/wrongKey``; one that does not answer within the deadline
    /// ``VaultError/Code/timeout``.
    ///
    /// - Parameters:
    ///   - name: the credential's name (`[A-Za-z0-9._-]`), sealed into it and checked when it is unsealed.
    ///   - file: the sealed credential file; nil: `<name>.cred` in the vault's directory.
    public static func systemdCredential(name: String, file: String? = nil) -> KeyStore {
        KeyStore(storage: .systemdCredential(name: name, file: file))
    }

    /// Which kernel keyring holds a vault's key (keyrings(7)).
    ///
    /// ```swift
    /// configuration.keyStore = .kernelKeyring(.persistent)
    /// ```
    public enum KernelKeyring: String, Sendable, CaseIterable {
        /// Its number in a vault header's key identity (see KeyIdentity).
        var code: UInt16 {
            switch self {
            case .session: return 1
            case .user: return 2
            case .persistent: return 3
            }
        }

        /// The login session's keyring: gone at logout and at reboot. Needs a session keyring (a login made by
        /// PAM's `pam_keyinit`, or `keyctl session`); a process without one gets ``VaultError/Code/unavailable``.
        case session
        /// The user's keyring: shared by every process of the user, gone at reboot.
        case user
        /// The user's persistent keyring: shared by every process of the user, survives logout, gone at
        /// reboot, and after `/proc/sys/kernel/keys/persistent_keyring_expiry` seconds (3 days by default)
        /// without use.
        case persistent
    }

    /// Keys held in memory by `keys`, for tests: share one ``InMemoryKeys`` between vaults to simulate a
    /// keyring, and remove keys from it to simulate a keyring reset.
    public static func inMemory(_ keys: InMemoryKeys) -> KeyStore {
        KeyStore(storage: .inMemory(keys))
    }

    /// `secretService`, `passphrase`, `kernelKeyring:user` (`:session`, `:persistent`), `keyFile:<path>`,
    /// `systemdCredential:<name>`, `secretPortal` or `inMemory`.
    public var description: String {
        switch storage {
        case .kernelKeyring(let keyring): return "kernelKeyring:\(keyring.rawValue)"
        case .keyFile(let path): return "keyFile:\(path)"
        case .systemdCredential(let name, _): return "systemdCredential:\(name)"
        default: return kind.name
        }
    }

    /// How `vaultctl --key-store` spells it: `secret-service`, `passphrase`, `keyring:user`, `key-file:PATH`,
    /// `systemd-creds:NAME[:FILE]`, `secret-portal`; `in-memory` (which names no object, so cannot be parsed back).
    package var spelling: String {
        switch storage {
        case .secretService: return "secret-service"
        case .passphrase: return "passphrase"
        case .kernelKeyring(let keyring): return "keyring:\(keyring.rawValue)"
        case .keyFile(let path): return "key-file:\(path)"
        case .systemdCredential(let name, let file): return "systemd-creds:\(name)" + (file.map { ":\($0)" } ?? "")
        case .secretPortal: return "secret-portal"
        case .inMemory: return "in-memory"
        }
    }

    /// The key file's path, for ``keyFile(_:)``; nil for other key stores.
    package var keyFilePath: String? {
        if case .keyFile(let path) = storage { return path }
        return nil
    }

    var kind: KeyIdentity.Kind {
        switch storage {
        case .secretService: return .secretService
        case .passphrase: return .passphrase
        case .inMemory: return .inMemory
        case .kernelKeyring: return .kernelKeyring
        case .keyFile: return .keyFile
        case .systemdCredential: return .systemdCredential
        case .secretPortal: return .secretPortal
        }
    }
}

extension KeyStore {
    /// The key store `spelling` names (see ``spelling``); nil when it names none. A passphrase is spelled
    /// without one: the key store returned holds an empty passphrase, enough to delete (nothing) but not to
    /// derive a key.
    package init?(spelling: String) {
        switch spelling {
        case "secret-service": self = .secretService
        case "passphrase": self = .passphrase(SecretBytes([]))
        case "secret-portal": self = .secretPortal
        default:
            if spelling.hasPrefix("keyring:"),
                let keyring = KernelKeyring(rawValue: String(spelling.dropFirst("keyring:".count)))
            {
                self = .kernelKeyring(keyring)
            } else if spelling.hasPrefix("key-file:"), spelling.count > "key-file:".count {
                self = .keyFile(String(spelling.dropFirst("key-file:".count)))
            } else if spelling.hasPrefix("systemd-creds:") {
                let parts = spelling.dropFirst("systemd-creds:".count).split(
                    separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
                guard let name = parts.first, !name.isEmpty, parts.count == 1 || !parts[1].isEmpty else { return nil }
                self = .systemdCredential(name: String(name), file: parts.count == 2 ? String(parts[1]) : nil)
            } else {
                return nil
            }
        }
    }
}

/// A per-session cache of a vault's master key in a kernel keyring, in front of a slow or interactive key store:
/// a passphrase is derived once per login instead of once per process, a Secret Service is asked once.
///
/// ```swift
/// configuration.keyStore = .passphrase(SecretBytes(utf8: pw))
/// configuration.keyCache = .kernelKeyring(.session, timeout: .seconds(8 * 3600))
/// ```
///
/// Opt-in, because it is a trade: for `timeout` after a process read the key, any process that possesses the
/// keyring (for `.session`, the processes of that login session; for `.user`, every process of the user) opens
/// the vault without the key store, so without the passphrase (as ssh-agent does for a key). The cached key
/// expires in the kernel after `timeout` (whole seconds, at least one), is named `securevault-cache:<service>:
/// <vault id>:<key id>`, is checked against the file's key check before use (a key planted under the name is
/// dropped and the key store asked), and is invalidated when the vault's key is rotated or wiped. A cache that
/// cannot be used (no session keyring, a full quota) is skipped: the key store is asked as without one.
public struct KeyCache: Sendable, Equatable {
    let keyring: KeyStore.KernelKeyring
    let timeout: Duration

    /// A cache in the kernel's `keyring`, each entry kept for `timeout`.
    public static func kernelKeyring(_ keyring: KeyStore.KernelKeyring = .session, timeout: Duration) -> KeyCache {
        KeyCache(keyring: keyring, timeout: timeout)
    }

    /// The timeout in whole seconds, at least one.
    var timeoutSeconds: UInt32 {
        UInt32(clamping: max(timeout.components.seconds + (timeout.components.attoseconds > 0 ? 1 : 0), 1))
    }
}

/// The cost of deriving a key from a passphrase with Argon2id: libsodium's three presets.
///
/// ```swift
/// configuration.keyStore = .passphrase(SecretBytes(utf8: pw), cost: .moderate)
/// ```
///
/// A vault derives its key once per process, so the cost is paid at each process's first access. (What one
/// derivation takes at each preset, measured: Documentation/KeyStores.md, "The passphrase key store's cost".)
public struct PassphraseCost: Sendable, Equatable {
    let passes: UInt16
    let memoryKiB: UInt32

    /// 2 passes over 64 MiB (libsodium's INTERACTIVE), the cheapest preset. The default.
    public static let interactive = PassphraseCost(passes: 2, memoryKiB: 64 * 1024)
    /// 3 passes over 256 MiB (libsodium's MODERATE).
    public static let moderate = PassphraseCost(passes: 3, memoryKiB: 256 * 1024)
    /// 4 passes over 1 GiB (libsodium's SENSITIVE, its largest preset): 1 GiB of memory at every open.
    public static let sensitive = PassphraseCost(passes: 4, memoryKiB: 1024 * 1024)
    /// 1 pass over 8 KiB, libsodium's minimum: no protection at all. For this package's tests, the fuzz
    /// target and the benchmarks (`@_spi(Testing) import SecureVault`); not part of the public API.
    @_spi(Testing) public static let insecureForTesting = PassphraseCost(passes: 1, memoryKiB: 8)

    /// `2 passes over 65536 KiB`, for messages.
    var text: String { "\(passes) pass\(passes == 1 ? "" : "es") over \(memoryKiB) KiB" }

    /// The smallest cost libsodium accepts (1 pass over 8 KiB).
    static var minimum: PassphraseCost {
        let minimum = Sodium.PasswordHashCost.minimum
        return PassphraseCost(passes: UInt16(minimum.operations), memoryKiB: UInt32(minimum.memoryBytes / 1024))
    }

    /// Whether `other` asks for no more passes and no more memory than this cost.
    func covers(_ other: PassphraseCost) -> Bool {
        other.passes <= passes && other.memoryKiB <= memoryKiB
    }

    /// The larger of the two, passes and memory each.
    func widened(to other: PassphraseCost) -> PassphraseCost {
        PassphraseCost(passes: max(passes, other.passes), memoryKiB: max(memoryKiB, other.memoryKiB))
    }
}

/// An in-memory key store for tests.
///
/// ```swift
/// let keys = InMemoryKeys()
/// var configuration = Vault.Configuration(directory: dir)
/// configuration.keyStore = .inMemory(keys)
/// ```
public final class InMemoryKeys: Sendable {
    private let keys = SanitizedMutex<[String: SecretBytes]>([:])

    public init() {}

    /// How many keys it holds.
    public var count: Int { keys.withLock { $0.count } }

    /// Forgets every key, as a keyring reset would.
    public func removeAll() { keys.withLock { $0.removeAll() } }

    /// Failures a test injects into the next calls, as a key store whose D-Bus replies are lost would fail: each
    /// counter is how many of the next calls fail.
    package struct Faults: Sendable, Equatable {
        /// Saves fail after the key was kept (the reply of a call the key store completed never came).
        package var savesKeptThenFailed = 0
        /// Deletes fail, deleting nothing.
        package var deletesFailed = 0
        /// Deletes fail after the key was deleted (the reply of a call the key store completed never came).
        package var deletesDoneThenFailed = 0

        package init(savesKeptThenFailed: Int = 0, deletesFailed: Int = 0, deletesDoneThenFailed: Int = 0) {
            self.savesKeptThenFailed = savesKeptThenFailed
            self.deletesFailed = deletesFailed
            self.deletesDoneThenFailed = deletesDoneThenFailed
        }
    }

    private let faults = SanitizedMutex(Faults())

    /// Makes the next calls fail as `faults` says (tests of the vault's error paths).
    package func inject(_ faults: Faults) { self.faults.withLock { $0 = faults } }

    /// The injected failures not used yet.
    package var remainingFaults: Faults { faults.withLock { $0 } }

    /// Whether this call is one a test made fail (counting it).
    func failing(_ counter: WritableKeyPath<Faults, Int>) -> Bool {
        faults.withLock { faults in
            guard faults[keyPath: counter] > 0 else { return false }
            faults[keyPath: counter] -= 1
            return true
        }
    }

    func load(_ name: String) -> SecretBytes? { keys.withLock { $0[name] } }
    func save(_ key: SecretBytes, as name: String) { keys.withLock { $0[name] = key } }
    @discardableResult
    func delete(_ name: String) -> Bool { keys.withLock { $0.removeValue(forKey: name) != nil } }
    /// Whether some key's name starts with `prefix`.
    func contains(prefix: String) -> Bool { keys.withLock { $0.keys.contains { $0.hasPrefix(prefix) } } }
}
