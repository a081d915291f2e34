// The stores under test behind one small protocol, so that every workload runs the same loop on each.
public import FoundationEssentials
import PrefsKV
@_spi(Testing) import SecureVault

/// One key-value store, opened in a directory of its own.
public protocol KVEngine: AnyObject {
    func setInt(_ key: String, _ value: Int) throws
    func setString(_ key: String, _ value: String) throws
    func getInt(_ key: String) throws -> Int?
    /// A value of any size (the value-size curves); a get returns a copy the caller owns, in every engine.
    func setBytes(_ key: String, _ value: Data) throws
    func getBytes(_ key: String) throws -> Data?
    /// SQLite "one transaction for all": BEGIN before the timed loop, COMMIT inside the timed section.
    func beginBatch() throws
    func endBatch() throws
    /// The files whose sizes are reported.
    var files: [String] { get }
}

extension KVEngine {
    public func beginBatch() throws {}
    public func endBatch() throws {}
}

/// Every store configuration the harness measures. The raw value names it in worker arguments and reports.
public enum EngineKind: String, CaseIterable, Sendable, Codable {
    /// PrefsKV's defaults: `.multiProcess` sharing (two flock calls per write), `.buffered` durability.
    case prefs = "prefskv"
    /// PrefsKV with `.singleProcess` sharing: no lock per write.
    case prefsSingle = "prefskv-single"
    /// PrefsKV sealed by SecureVault (XChaCha20-Poly1305, keyed BLAKE2b key tags), default sharing.
    case prefsSealed = "prefskv-encrypted"
    /// The same sealed store opened with `cachesPlaintext` (the opt-in cache of opened values, for encrypted
    /// preferences that are not secrets): what MMKV encrypted does for every store.
    case prefsSealedCached = "prefskv-encrypted-cached"
    /// PrefsKV's defaults with an `ObservedPref` (a typed key's Observable model) following a key: every write
    /// then runs the store's observer dispatch. The cost of an observed write.
    case prefsObserved = "prefskv-observed"
    /// PrefsKV at its strictest durability: `.synchronous` (fdatasync twice per write), default sharing.
    case prefsSynchronous = "prefskv-synchronous"
    /// SQLite, WAL, synchronous=NORMAL, prepared statements, a transaction per set (autocommit).
    case sqlite = "sqlite"
    /// The same, one transaction for all the sets of a run.
    case sqliteBatch = "sqlite-one-txn"
    /// SQLite, WAL, synchronous=FULL, a transaction per set.
    case sqliteFull = "sqlite-full"
    /// LMDB, a write transaction per put, MDB_NOSYNC.
    case lmdbNoSync = "lmdb-nosync"
    /// LMDB, a write transaction per put, synced at each commit (its default).
    case lmdbSync = "lmdb-sync"

    public var isPrefsKV: Bool { rawValue.hasPrefix("prefskv") }

    /// Opens (creating) the engine's store in `directory`.
    public func open(in directory: String) throws -> any KVEngine {
        switch self {
        case .prefs: return try PrefsEngine(directory: directory, sharing: .multiProcess)
        case .prefsObserved: return try PrefsEngine(directory: directory, sharing: .multiProcess, observed: true)
        case .prefsSingle: return try PrefsEngine(directory: directory, sharing: .singleProcess)
        case .prefsSealed: return try PrefsEngine(directory: directory, sharing: .multiProcess, sealed: true)
        case .prefsSealedCached:
            return try PrefsEngine(directory: directory, sharing: .multiProcess, sealed: true, cached: true)
        case .prefsSynchronous:
            return try PrefsEngine(directory: directory, sharing: .multiProcess, durability: .synchronous)
        case .sqlite: return try SQLiteEngine(directory: directory, synchronous: "NORMAL", batch: false)
        case .sqliteBatch: return try SQLiteEngine(directory: directory, synchronous: "NORMAL", batch: true)
        case .sqliteFull: return try SQLiteEngine(directory: directory, synchronous: "FULL", batch: false)
        case .lmdbNoSync: return try LMDBEngine(directory: directory, sync: false)
        case .lmdbSync: return try LMDBEngine(directory: directory, sync: true)
        }
    }
}

public struct BenchError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// PrefsKV through its public API.
final class PrefsEngine: KVEngine {
    let store: PrefsStore
    /// Keeps the vault that holds a sealed store's key alive (its key cache is per process anyway).
    let vault: Vault?

    init(
        directory: String, sharing: PrefsStore.Sharing, durability: PrefsStore.Durability = .buffered,
        sealed: Bool = false, cached: Bool = false, observed: Bool = false
    ) throws {
        var configuration = PrefsStore.Configuration()
        configuration.cachesPlaintext = cached
        configuration.sharing = sharing
        configuration.durability = durability
        if sealed {
            // The sealer an app gets from `Vault.encryptedPreferences`: its key is an item of a vault whose own
            // master key comes from a passphrase at the test-only cost (no Secret Service needed, and cheap to
            // derive in a cold process; the Secret Service's cost is measured by the vault workloads).
            var vaultConfiguration = Vault.Configuration(directory: directory + "/vault")
            vaultConfiguration.keyStore = .passphrase(SecretBytes(utf8: "benchmark"), cost: .insecureForTesting)
            let vault = try Vault(service: "bench-keys", configuration: vaultConfiguration)
            self.vault = vault
            store = try vault.encryptedPreferences(id: "bench", directory: directory, configuration: configuration)
        } else {
            vault = nil
            store = try PrefsStore(id: "bench", directory: directory, configuration: configuration)
        }
        follower = observed ? store.observable(Self.followed) : nil
    }

    /// The key an observed engine's model follows (the workloads write other keys: the cost measured is the
    /// observer dispatch every write runs, not a UI update).
    static let followed = PrefsKey<Int>("followed", default: 0)
    /// The model of an observed engine, kept alive while it runs.
    let follower: ObservedPref<Int>?

    func setInt(_ key: String, _ value: Int) throws { try store.set(value, forKey: key) }
    func setString(_ key: String, _ value: String) throws { try store.set(value, forKey: key) }
    func getInt(_ key: String) throws -> Int? { try store.int(forKey: key) }
    func setBytes(_ key: String, _ value: Data) throws { try store.set(value, forKey: key) }
    func getBytes(_ key: String) throws -> Data? { try store.data(forKey: key) }
    var files: [String] { [store.path] }
}
