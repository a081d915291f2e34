import PrefsKV

/// What `Vault.status()` found. Reading it never prompts and never needs the master key.
public struct VaultStatus: Sendable {
    /// The vault's service name.
    public var service: String
    /// The key store in use: `secretService`, `passphrase`, `kernelKeyring:session` (`:user`, `:persistent`)
    /// or `inMemory`.
    public var keyStore: String
    /// `afterFirstUnlock` or `whenUnlocked`.
    public var accessibility: String
    /// The vault's data file.
    public var path: String
    /// Whether the data file exists (a vault gets one at its first write).
    public var fileExists: Bool
    /// The permission problem of the vault file (or, without a file, its directory) or of its key file, if any.
    public var permissionProblem: String?
    /// Items in the vault, counted without opening any; nil without a file or when the file is unreadable.
    public var itemCount: Int?
    /// Whether a D-Bus session bus answered; nil when the key store is not the Secret Service, or when this build
    /// has none (the package's `SecretService` trait off).
    public var sessionBusReachable: Bool?
    /// Whether a Secret Service answered on it; nil when not asked or not known.
    public var secretServiceReachable: Bool?
    /// Whether the default keyring exists; nil when not known.
    public var hasDefaultKeyring: Bool?
    /// Whether the default keyring is locked; nil when not known.
    public var keyringLocked: Bool?
    /// Whether this process already holds the vault's master key.
    public var keyLoaded: Bool
    /// For a kernel keyring key store: whether the keyring can be reached; nil for other key stores.
    public var kernelKeyringReachable: Bool? = nil
    /// For a kernel keyring key store: the state of the key the file names ("present", "absent", "revoked",
    /// "expired"), found by a search that never reads the key; nil for other key stores and without a file.
    public var kernelKeyState: String? = nil
    /// The first failure met while gathering this status.
    public var problem: VaultError?
}

extension Vault {
    /// Reports the key store, the Secret Service's reachability and lock state, the file and its item count,
    /// without prompting and without the master key: it works with a locked keyring.
    ///
    /// ```swift
    /// let status = vault.status()
    /// if status.keyringLocked == true { print("unlock your keyring") }
    /// ```
    public func status() -> VaultStatus {
        var status = VaultStatus(
            service: service, keyStore: configuration.keyStore.description,
            accessibility: configuration.accessibility.rawValue, path: path, fileExists: false,
            permissionProblem: nil, itemCount: nil, sessionBusReachable: nil, secretServiceReachable: nil,
            hasDefaultKeyring: nil, keyringLocked: nil, keyLoaded: opened.withLock { $0 != nil }, problem: nil)
        do {
            try checkDirectory(create: false)
            try checkFile()
            // The key file as an open checks it (owner, mode), without reading the key.
            try keys.fileKeys?.checkKeyFileTrust()
        } catch {
            status.permissionProblem = error.message
            status.problem = error
        }
        do {
            if let inspection = try PrefsStore.inspect(id: service, directory: storeDirectory) {
                status.fileExists = true
                status.itemCount = try inspection.scanLog().liveKeyCount
            }
        } catch {
            status.fileExists = true
            status.problem = status.problem ?? VaultError.wrapping(error, vault: service)
        }
        if case .secretService = configuration.keyStore.storage {
            do {
                let state = try LibSecret.collectionState(deadline: configuration.deadline)
                status.sessionBusReachable = true
                status.secretServiceReachable = true
                status.hasDefaultKeyring = state != .missing
                status.keyringLocked = state == .missing ? nil : state == .locked
            } catch {
                switch error.kind {
                case .noSessionBus:
                    status.sessionBusReachable = false
                    status.secretServiceReachable = false
                case .noSecretService:
                    status.sessionBusReachable = true
                    status.secretServiceReachable = false
                case .notBuiltIn, .notLoaded:
                    status.secretServiceReachable = false  // nothing asked: the session bus is not known
                default:
                    status.sessionBusReachable = true
                }
                status.problem =
                    status.problem ?? VaultError(error, operation: "checking the keyring of vault '\(service)'")
            }
        }
        if case .kernelKeyring(let keyring) = configuration.keyStore.storage {
            switch KernelKeys.serial(of: keyring) {
            case .success(let serial):
                status.kernelKeyringReachable = true
                if let identity = (try? existingIdentity()) ?? nil {
                    status.kernelKeyState = KernelKeys.state(keys.kernelName(identity), in: serial)
                }
            case .failure:
                status.kernelKeyringReachable = false
            }
        }
        return status
    }
}
