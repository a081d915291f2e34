import PrefsKV
import Synchronization
import SystemLayer

/// Where a vault's master key lives. Always an explicit choice: a vault never falls back from one key store
/// to another, and ``Vault/status()`` names the one in use.
///
/// ```swift
/// var configuration = Vault.Configuration()
/// configuration.keyStore = .secretService                       // the default: gnome-keyring, KeePassXC...
/// configuration.keyStore = .passphrase(SecretBytes(utf8: pw))   // headless servers that choose it
/// configuration.keyStore = .inMemory(InMemoryKeys())            // tests
/// ```
public struct KeyStore: Sendable, CustomStringConvertible {
    enum Storage: Sendable {
        case secretService
        case passphrase(SecretBytes, PassphraseCost)
        case inMemory(InMemoryKeys)
    }

    let storage: Storage

    /// The freedesktop Secret Service (gnome-keyring, KeePassXC...) through libsecret: one random 256-bit key
    /// per vault, in the default collection, under attributes that are random ids only.
    public static let secretService = KeyStore(storage: .secretService)

    /// A key derived from a passphrase with Argon2id; the salt and cost are kept in the vault file's header.
    /// A wrong passphrase is reported as ``VaultError/Code/wrongKey``.
    public static func passphrase(_ passphrase: SecretBytes, cost: PassphraseCost = .interactive) -> KeyStore {
        KeyStore(storage: .passphrase(passphrase, cost))
    }

    /// Keys held in memory by `keys`, for tests: share one ``InMemoryKeys`` between vaults to simulate a
    /// keyring, and remove keys from it to simulate a keyring reset.
    public static func inMemory(_ keys: InMemoryKeys) -> KeyStore {
        KeyStore(storage: .inMemory(keys))
    }

    /// `secretService`, `passphrase` or `inMemory`.
    public var description: String { kind.name }

    var kind: KeyIdentity.Kind {
        switch storage {
        case .secretService: return .secretService
        case .passphrase: return .passphrase
        case .inMemory: return .inMemory
        }
    }
}

/// The cost of deriving a key from a passphrase with Argon2id.
public struct PassphraseCost: Sendable, Equatable {
    let passes: UInt16
    let memoryKiB: UInt32

    /// 2 passes over 64 MiB: about 0.15 s here. The default.
    public static let interactive = PassphraseCost(passes: 2, memoryKiB: 64 * 1024)
    /// 3 passes over 256 MiB: about 1.3 s here.
    public static let moderate = PassphraseCost(passes: 3, memoryKiB: 256 * 1024)
    /// 1 pass over 8 KiB: no protection at all, for tests only.
    public static let insecureForTesting = PassphraseCost(passes: 1, memoryKiB: 8)
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

    func load(_ name: String) -> SecretBytes? { keys.withLock { $0[name] } }
    func save(_ key: SecretBytes, as name: String) { keys.withLock { $0[name] = key } }
    func delete(_ name: String) { keys.withLock { _ = $0.removeValue(forKey: name) } }
}
