public import FoundationEssentials
import Logging
import PrefsKV
import Synchronization
package import SystemLayer

/// A keychain for an app's secrets: values sealed with XChaCha20-Poly1305 under a per-vault master key kept in
/// the Secret Service (or another explicit ``KeyStore``), stored in a crash-safe PrefsKV file.
///
/// The service names the app's vault, like `keychainService` in expo-secure-store. Reads return `nil` when an
/// item is absent and throw a ``VaultError`` when the answer cannot be known (a locked keyring, no Secret
/// Service, a missing master key, a damaged file): a locked keyring is never reported as "no item".
///
/// ```swift
/// let vault = try Vault(service: "com.example.app")
/// try vault.set("s3cr3t", for: "apiToken")
/// let token = try vault.string(for: "apiToken")       // "s3cr3t"
/// try vault.remove("apiToken")
/// ```
///
/// The master key is read from the key store once per process (with ``Accessibility/afterFirstUnlock``) and
/// kept in guarded memory. Writes reach the disk before they return. Item names are not stored in clear.
/// All methods are thread-safe and block on the key store for at most ``Configuration/deadline`` (the Secret
/// portal's connecting to the bus: that deadline for each read, in whole seconds); the `async` twins run that
/// blocking work off the cooperative thread pool.
public final class Vault: Sendable {
    /// The vault's name (`[A-Za-z0-9._-]`, 1 to 128 characters).
    public let service: String
    /// The configuration the vault was created with.
    public let configuration: Configuration

    let keys: MasterKeys
    /// Where this vault logs (a default logger is made for each message: only failures and notices are logged).
    var logger: Logger { configuration.logger }
    /// The open store and its sealer, once the master key has been read.
    let opened = SanitizedMutex<OpenVault?>(nil)
    /// The private directory of a ``temporary(service:)`` vault, removed with this handle; nil otherwise.
    let temporaryDirectory: TemporaryDirectory?

    /// The largest value an item may hold: 64 KiB.
    public static let maximumValueSize = 64 * 1024

    /// Where vaults live by default: `$XDG_DATA_HOME/securevault` (or `~/.local/share/securevault`), one
    /// directory for every app of the user. An app may pass its own instead (`AppDirectory.vaults`).
    ///
    /// ```swift
    /// let configuration = Vault.Configuration(directory: try AppDirectory("com.example.notes").vaults)
    /// ```
    public static var defaultDirectory: String { VaultDefaults.directory }

    /// Creates a handle on the vault `service`. Touches neither the disk nor the key store: the file is
    /// created by the first write, and the master key is read by the first access.
    ///
    /// ```swift
    /// var configuration = Vault.Configuration()
    /// configuration.accessibility = .whenUnlocked
    /// let vault = try Vault(service: "com.example.app", configuration: configuration)
    /// ```
    ///
    /// - Throws: ``VaultError/Code/invalidKey`` when `service` breaks the naming rule.
    public convenience init(service: String, configuration: Configuration = Configuration()) throws {
        try self.init(service: service, configuration: configuration, temporaryDirectory: nil)
    }

    init(service: String, configuration: Configuration, temporaryDirectory: TemporaryDirectory?) throws {
        try Self.validate(name: service, what: "service name", as: .fileName)
        self.temporaryDirectory = temporaryDirectory
        self.service = service
        self.configuration = configuration
        if case .systemdCredential(let name, _) = configuration.keyStore.storage {
            try Self.validate(name: name, what: "systemd credential name", as: .fileName)
        }
        self.keys = MasterKeys(
            store: configuration.keyStore, service: service, directory: Self.directory(of: configuration),
            deadline: configuration.deadline,
            prompting: configuration.prompting, cache: configuration.keyCache)
    }

    /// The vault's data file.
    public var path: String { Sys.joinPath(storeDirectory, service + ".prefs") }

    /// The configured directory without a trailing `/`; `.` (the working directory) for an empty one. A relative
    /// directory stays relative: it names a directory under the working directory of each call.
    var storeDirectory: String { Self.directory(of: configuration) }

    static func directory(of configuration: Configuration) -> String {
        let directory = configuration.directory
        if directory.isEmpty { return "." }
        return directory.hasSuffix("/") && directory.count > 1 ? String(directory.dropLast()) : directory
    }

    var lockPath: String { Sys.joinPath(storeDirectory, service + ".vault.lock") }

    // MARK: Items

    /// Stores `value` (UTF-8, at most 64 KiB) under `key`, replacing any previous value. Once this returns, the
    /// value is on disk and no decryptable copy of the previous value remains in the vault file.
    ///
    /// An empty value is refused with ``VaultError/Code/invalidValue`` (it is most often an unset variable, not a
    /// secret) unless `allowEmpty` is true.
    ///
    /// ```swift
    /// try vault.set("s3cr3t", for: "apiToken")
    /// try vault.set("", for: "optionalNote", allowEmpty: true)
    /// ```
    public func set(_ value: String, for key: String, allowEmpty: Bool = false) throws {
        var copy = value
        try copy.withUTF8 { utf8 in
            try store(
                kind: .string, payload: UnsafeRawBufferPointer(utf8), for: key, expiresAt: 0, allowEmpty: allowEmpty)
        }
    }

    /// Stores bytes (at most 64 KiB) under `key`. Empty bytes are ``VaultError/Code/invalidValue`` unless
    /// `allowEmpty` is true.
    ///
    /// ```swift
    /// try vault.set(Data([1, 2, 3]), for: "deviceKey")
    /// ```
    public func set(_ value: Data, for key: String, allowEmpty: Bool = false) throws {
        try value.withUnsafeBytes {
            try store(kind: .data, payload: $0, for: key, expiresAt: 0, allowEmpty: allowEmpty)
        }
    }

    /// Stores secret bytes (at most 64 KiB) under `key` without copying them out of guarded memory. Empty bytes
    /// are ``VaultError/Code/invalidValue`` unless `allowEmpty` is true.
    ///
    /// ```swift
    /// try vault.set(SecretBytes.random(count: 32), for: "databaseKey")
    /// ```
    public func set(_ value: SecretBytes, for key: String, allowEmpty: Bool = false) throws {
        try value.withUnsafeBytes {
            try store(kind: .secret, payload: $0, for: key, expiresAt: 0, allowEmpty: allowEmpty)
        }
    }

    /// The string stored under `key`, or nil when there is none.
    ///
    /// ```swift
    /// if let token = try vault.string(for: "apiToken") { authorize(token) }
    /// ```
    ///
    /// - Throws: ``VaultError`` when the answer cannot be known: `locked`, `unavailable`, `timeout`,
    ///   `keyMissing`, `wrongKey`, `corrupted`, `tampered`; also when the value is not UTF-8.
    public func string(for key: String) throws -> String? {
        try read(key, "reading item '\(key)'") { _, payload in
            String(validating: payload, as: UTF8.self).map { Result<String, VaultError>.success($0) }
                ?? .failure(
                    VaultError(
                        code: .corrupted, message: "vault '\(service)': item '\(key)' does not hold UTF-8 text"))
        }?.get()
    }

    /// The bytes stored under `key`, or nil when there is none.
    ///
    /// ```swift
    /// let deviceKey = try vault.data(for: "deviceKey")
    /// ```
    public func data(for key: String) throws -> Data? {
        try read(key, "reading item '\(key)'") { _, payload in Data(payload) }
    }

    /// The bytes stored under `key` in guarded memory, or nil when there is none.
    ///
    /// ```swift
    /// let databaseKey = try vault.secret(for: "databaseKey")
    /// ```
    public func secret(for key: String) throws -> SecretBytes? {
        try read(key, "reading item '\(key)'") { _, payload in
            SecretBytes(count: payload.count) { $0.copyMemory(from: payload) }
        }
    }

    /// Removes `key`. Removing an absent key (or from a vault that has no file yet) succeeds. Once this
    /// returns, no decryptable copy of the value remains in the vault file.
    ///
    /// ```swift
    /// try vault.remove("apiToken")
    /// ```
    public func remove(_ key: String) throws {
        try Self.validate(name: key, what: "key name", as: .itemName)
        try perform("removing item '\(key)'") { () throws(VaultError) in
            guard let store = try openStore(create: false) else { return }
            try prefs {
                guard try store.contains(key) else { return }
                try store.removeValue(forKey: key)
                // Append-only log: the old record is still in the file until the log is rewritten.
                try store.compact()
            }
        }
    }

    /// Whether `key` holds a value.
    ///
    /// ```swift
    /// if try vault.contains("apiToken") { ... }
    /// ```
    public func contains(_ key: String) throws -> Bool {
        try Self.validate(name: key, what: "key name", as: .itemName)
        return try perform("checking item '\(key)'") { () throws(VaultError) -> Bool in
            guard let store = try openStore(create: false) else { return false }
            return try prefs { try store.contains(key) }
        }
    }

    /// The names of every item, sorted.
    ///
    /// ```swift
    /// for key in try vault.allKeys() { print(key) }
    /// ```
    public func allKeys() throws -> [String] {
        try perform("listing items") { () throws(VaultError) -> [String] in
            guard let store = try openStore(create: false) else { return [] }
            return try prefs { try store.allKeys.sorted() }
        }
    }

    /// Removes every item (the vault file and its master key stay; see `wipe()` to remove those too).
    ///
    /// ```swift
    /// try vault.removeAll()
    /// ```
    public func removeAll() throws {
        try perform("removing all items") { () throws(VaultError) in
            guard let store = try openStore(create: false) else { return }
            try prefs {
                guard try store.count > 0 else { return }
                try store.removeAll()
                try store.compact()
            }
        }
    }

    // MARK: Plumbing

    /// Seals `payload` in an envelope under `key`, keeping the item's creation time. An empty payload is
    /// `invalidValue` unless `allowEmpty`.
    func store(
        kind: ItemEnvelope.Kind, payload: UnsafeRawBufferPointer, for key: String, expiresAt: Int64, allowEmpty: Bool
    ) throws {
        try Self.validate(name: key, what: "key name", as: .itemName)
        guard allowEmpty || !payload.isEmpty else {
            let error = VaultError(
                code: .invalidValue,
                message: "vault '\(service)': the value for '\(key)' is empty (an unset variable?); nothing was "
                    + "stored: an empty \(kind == .sessionToken ? "session token" : "value") is stored only when "
                    + "allowed explicitly")
            logger.error("\(error.description)")
            throw error
        }
        guard payload.count <= Self.maximumValueSize else {
            let error = VaultError(
                code: .valueTooLarge,
                message: "vault '\(service)': the value for '\(key)' is \(payload.count) bytes; "
                    + "the limit is \(Self.maximumValueSize) bytes (64 KiB)")
            logger.error("\(error.description)")
            throw error
        }
        try perform("writing item '\(key)'") { () throws(VaultError) in
            let store = try openStore(create: true)!
            try prefs {
                let now = Sys.nowMilliseconds()
                let previous = try store.withBytes(forKey: key) { bytes in ItemEnvelope.decode(bytes)?.0 }
                let envelope = ItemEnvelope(
                    kind: kind, createdAt: previous??.createdAt ?? now, updatedAt: now, expiresAt: expiresAt)
                try envelope.withEncoded(payload: payload) { try store.setBytes($0, forKey: key) }
                if previous != nil {
                    // The replaced value's record stays in the append-only log until it is rewritten.
                    try store.compact()
                }
            }
        }
    }

    /// Opens the item `key` and passes its envelope and payload to `body` (the payload is wiped afterwards).
    func read<R: Sendable>(
        _ key: String, _ operation: @autoclosure () -> String, _ body: (ItemEnvelope, UnsafeRawBufferPointer) -> R
    ) throws -> R? {
        try Self.validate(name: key, what: "key name", as: .itemName)
        return try perform(operation()) { () throws(VaultError) -> R? in
            guard let store = try openStore(create: false) else { return nil }
            // What the item decoded to is kept here, and the read answers a non-generic `ItemRead`: the store's
            // generic read of a new type (`Decoded<R>` before) cost a fresh process the runtime's instantiation of
            // that type from its mangled name (PerformanceIssues36-39.md, issue 39).
            var value: R?
            let found: ItemRead? = try prefs {
                try store.withBytes(forKey: key) { bytes -> ItemRead in
                    guard let (envelope, payload) = ItemEnvelope.decode(bytes) else {
                        if let version = bytes.first, version > ItemEnvelope.version { return .newer(version) }
                        return .notAnItem
                    }
                    // A read retried after the file changed underneath runs this again: `value` is then the
                    // second run's, the one `found` describes (the first one's is released, and wiped if secret).
                    value = body(envelope, payload)
                    return .item
                }
            }
            switch found {
            case .none: return nil
            case .notAnItem?:
                throw VaultError(
                    code: .corrupted,
                    message: "vault '\(service)': item '\(key)' opened but its contents are not "
                        + "a SecureVault item", path: path)
            case .newer(let version)?:
                throw VaultError(
                    code: .unsupportedVersion,
                    message: "vault '\(service)': item '\(key)' was written by a newer SecureVault (item format "
                        + "\(version); this one reads \(ItemEnvelope.version)); it was left untouched", path: path)
            case .item?: return value
            }
        }
    }

    /// What a read found under a key: an item (its value kept by the caller), bytes that are no item, or an item of a
    /// newer format.
    private enum ItemRead: Sendable {
        case item
        case notAnItem
        case newer(UInt8)
    }

    /// Runs a vault operation, logging its failure once at error level (never a value: messages hold none).
    /// The operation's description is built only on failure (building it cost a tenth of a warm read). An
    /// operation that met a handle gone stale under another process is retried once with a fresh one.
    func perform<R>(
        _ operation: @autoclosure () -> String, _ body: () throws(VaultError) -> R
    ) throws(VaultError) -> R {
        do {
            do {
                return try body()
            } catch where error.isStaleHandle {
                forgetKey()
                return try body()
            }
        } catch {
            logger.error("\(operation()) failed: \(error.description)")
            throw error
        }
    }

    /// Runs PrefsKV calls, turning their errors into vault errors. An open store that another process
    /// re-keyed (rotation) answers `wrongKey` to this handle, and one it wiped answers `notFound`: those are
    /// marked stale, so `perform` retries with a fresh handle.
    func prefs<R>(_ body: () throws -> R) throws(VaultError) -> R {
        do {
            return try body()
        } catch let error as PrefsError where [.wrongKey, .encrypted, .notFound].contains(error.code) {
            let stale = opened.withLock { open in
                defer { open = nil }
                return open != nil
            }
            var vaultError = VaultError(error, vault: service)
            vaultError.isStaleHandle = stale
            throw vaultError
        } catch {
            throw VaultError.wrapping(error, vault: service)
        }
    }

    /// Checks a service or key name against the package's naming rule (`Names`): `invalidKey` when it breaks it.
    ///
    /// A service name is the id of the vault's PrefsKV store, so it follows the file-name rule (no `..` inside,
    /// which PrefsKV refused anyway at the vault's first access); a key name, an item inside the file, may
    /// contain `..`.
    package static func validate(name: String, what: String, as role: Names.Role) throws(VaultError) {
        guard Names.isValid(name, as: role) else {
            throw VaultError(
                code: .invalidKey, message: "invalid \(what) '\(name.prefix(140))': \(Names.ruleText(role))")
        }
    }
}

/// The store of an open vault and the sealer its master key gave.
struct OpenVault: Sendable {
    var store: PrefsStore
    var sealer: VaultSealer
}
