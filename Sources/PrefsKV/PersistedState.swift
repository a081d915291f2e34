public import FoundationEssentials
public import Logging
import Synchronization
import SystemLayer

/// A piece of app state kept in a ``PrefsStore`` under a name, with a version and a migration: the
/// `persist` pattern of Zustand, in Swift.
///
/// The state is hydrated when the `PersistedState` is created, and hydration never throws: when nothing is
/// stored it is the defaults; when what is stored cannot be used (written by a newer version of the app, not
/// decodable, a failed migration, a read error) it is the defaults too, and one error naming the store file
/// is logged. A damaged store file is salvaged by the store's own open (``PrefsStore/Configuration/recovery``,
/// `.salvage` by default), which logs that one error itself: a state whose record was lost then hydrates to
/// its defaults without logging again, and every state whose record survived keeps its value (a damaged header
/// page too: the header is read from its copy). A data file that cannot be read as a store at all (not a store,
/// no copy of its header verifies) is rebuilt by ``PrefsStore/openOrLog(id:directory:configuration:ifUnreadable:)``
/// from the records of its body that verify, the original kept aside, with one error naming both files: the
/// states whose records survived keep their values, the others are their defaults, and the user's next choices
/// are saved. A store that
/// cannot be opened at all (denied permissions, a newer format, or a bad file with `ifUnreadable: .refuse`)
/// gives nil, logged once, and states created on a nil store are their defaults, kept in memory for this run.
///
/// ```swift
/// struct Editor: Codable, Sendable { var fontSize = 13; var wrapsLines = true }
///
/// let ui = try PrefsStore(id: "ui", directory: try AppDirectory("com.example.app").preferences)
/// let editor = PersistedState(name: "editor", version: 2, defaults: Editor(), store: ui) { stored in
///     // Version 1 stored the font size as a string.
///     struct V1: Decodable { var fontSize: String }
///     let old = try stored.decode(V1.self)
///     return Editor(fontSize: Int(old.fontSize) ?? 13)
/// }
/// editor.value.fontSize                        // hydrated before the first frame
/// try editor.update { $0.wrapsLines = false }  // persisted at once; setting an equal value writes nothing
/// ```
///
/// On disk the state is one JSON value under the key `name`: `{"state":...,"version":N}`, encoded with
/// sorted keys, so equal states give identical bytes and the store's compare-before-set writes nothing for
/// an unchanged state. Hydration writes only after a successful migration (the migrated state, at the
/// current version); it never writes over a value it could not read. That value stays in the store until
/// the app sets the state, which replaces it with a healthy one.
///
/// Thread-safe. ``value`` is this handle's copy; ``observe(_:)`` also reports (and takes in) changes made by
/// other handles and processes. ``update(_:)`` changes the stored state atomically, across threads and processes.
public final class PersistedState<Value: Codable & Sendable>: Sendable {
    /// The state's name: its key in the store.
    public let name: String
    /// The version this app writes. A stored state of a lower version is migrated; a higher one is unreadable.
    public let version: Int
    /// The state when nothing usable is stored.
    public let defaults: Value
    /// The store holding the state; nil when it could not be opened (the state then lives in memory).
    public let store: PrefsStore?

    private let logger: Logger
    private let migrate: (@Sendable (StoredState) throws -> Value)?
    /// The key of the store's own type (`PrefsKey<Int>`...) the state was made from: read and written as that
    /// type, never as a state (PersistedState+Keys.swift); nil for a state.
    private let native: NativeValue<Value>?
    /// How long a written state lives (a Codable key's lifetime: PersistedState+Keys.swift); nil: until replaced.
    private let lifetime: Duration?
    private let current: SanitizedMutex<(value: Value, hydration: Hydration)>
    /// Serializes the changes of a state without a store, as the store's writer lock serializes the others:
    /// an update's transform runs under it, never under `current`, so it may read ``value``.
    private let memoryWrites = SanitizedMutex<Void>(())

    /// Creates the state and hydrates it from `store`. Never throws; see ``hydration`` for what it found.
    ///
    /// ```swift
    /// let theme = PersistedState(name: "theme", version: 1, defaults: AppTheme.light, store: ui)
    /// ```
    ///
    /// - Parameters:
    ///   - name: the key in the store (not empty). Each state of a store needs its own name.
    ///   - version: the version of `Value`'s shape. The default is 0.
    ///   - defaults: the state when nothing usable is stored.
    ///   - store: where the state lives; nil when it could not be opened (see
    ///     ``PrefsStore/openOrLog(id:directory:configuration:ifUnreadable:)``): the state is then the defaults, kept in
    ///     memory only, and nothing more is logged.
    ///   - logger: where a hydration failure is logged (once, at error level, never with a value). The default
    ///     is the store's ``PrefsStore/Configuration/logger``.
    ///   - migrate: turns a state stored at a lower version into the current `Value`; the result is written
    ///     back at once. Without it, an older state is unreadable: the defaults, and one logged error.
    public convenience init(
        name: String, version: Int = 0, defaults: Value, store: PrefsStore?, logger: Logger? = nil,
        migrate: (@Sendable (_ stored: StoredState) throws -> Value)? = nil
    ) {
        self.init(
            name: name, version: version, defaults: defaults, store: store, logger: logger, migrate: migrate,
            native: nil, lifetime: nil)
    }

    init(
        name: String, version: Int, defaults: Value, store: PrefsStore?, logger: Logger?,
        migrate: (@Sendable (_ stored: StoredState) throws -> Value)?, native: NativeValue<Value>?,
        lifetime: Duration?
    ) {
        precondition(!name.isEmpty, "PersistedState: the name (its key in the store) must not be empty")
        self.native = native
        self.lifetime = lifetime
        self.name = name
        self.version = version
        self.defaults = defaults
        self.store = store
        self.logger = logger ?? store?.configuration.logger ?? Logger(label: "prefskv")
        self.migrate = migrate
        self.current = SanitizedMutex((defaults, store == nil ? .noStore : .absent))
        rehydrate()
    }

    /// The current state.
    ///
    /// ```swift
    /// applyTheme(theme.value)
    /// ```
    public var value: Value { current.withLock { $0.value } }

    /// What the last hydration found.
    ///
    /// ```swift
    /// if case .unreadable(let reason) = theme.hydration { print("theme reset:", reason) }
    /// ```
    public var hydration: Hydration { current.withLock { $0.hydration } }

    /// Replaces the state and persists it before returning. A state equal to the stored one writes nothing.
    ///
    /// The new value is the state from now on even when saving fails: the error says it was not saved (disk
    /// full, read-only directory...), and the next change tries again. Without a store, the state changes in
    /// memory only.
    ///
    /// ```swift
    /// try theme.set(.dark)
    /// ```
    public func set(_ newValue: Value) throws {
        guard let store else {
            memoryWrites.withLock { _ in current.withLock { $0.value = newValue } }
            return
        }
        let envelope = native == nil ? try encoded(newValue) : []
        if let native {
            // A value the store refuses (too long, a bad name) is refused before anything changes, as a state's is.
            var check = PrefsTransaction(store: store)
            try native.write(&check, newValue, name, native.expiresAfter)
        }
        do {
            try store.write { tx in
                // Under the store's writer lock: concurrent sets reach memory and disk in the same order.
                try write(newValue, envelope: envelope, to: &tx)
                current.withLock { $0.value = newValue }
            }
        } catch {
            current.withLock { $0.value = newValue }
            throw error
        }
    }

    /// Changes the state in place, atomically, and persists it before returning; returns the new state. The
    /// transform runs on the state stored now, under the store's writer lock, and its result is written before
    /// the lock is released: updates made at the same time by other threads, handles and processes are applied
    /// one after the other, and none is lost (DataStore's `updateData`).
    ///
    /// ```swift
    /// // Two processes of the app at once, each changing its own field: both changes are kept.
    /// try sidebar.update { $0.isExpanded.toggle() }   // in one
    /// try sidebar.update { $0.width = 312 }           // in the other
    /// ```
    ///
    /// The transform runs exactly once, under the lock: keep it short (every writer of the store, in every
    /// process, waits for it), and change nothing but its argument (setting this state or writing through the
    /// store from inside it is a programmer error; a write through the store traps). It starts from the stored
    /// state as hydration reads it (an older version migrated; the defaults when nothing usable is stored), not
    /// from ``value``, which may not have followed another process's change yet; ``value`` is the result
    /// afterwards. A result equal to the stored state writes nothing.
    ///
    /// If `transform` throws, nothing is written, the state is unchanged and the error is rethrown. A store that
    /// cannot be written (read-only) or a stored state that cannot be read (an I/O error; a state that does not
    /// decode is replaced, as `set` replaces it) throws before the transform runs, and nothing changes. When
    /// saving fails after it ran (disk full), the result is the state from now on, in memory, as with ``set(_:)``.
    /// Without a store, the transform runs on ``value`` under the state's own lock.
    @discardableResult
    public func update(_ transform: (inout Value) throws -> Void) throws -> Value {
        guard let store else {
            return try memoryWrites.withLock { _ in
                var next = value
                try transform(&next)
                current.withLock { $0.value = next }
                return next
            }
        }
        return try store.write { tx in
            var next = try storedState(in: tx)
            try transform(&next)
            let envelope = native == nil ? try encoded(next) : []
            // Under the store's writer lock, as in `set`: memory and disk take the updates in the same order.
            try write(next, envelope: envelope, to: &tx)
            current.withLock { $0.value = next }
            return next
        }
    }

    /// Removes the stored state and goes back to the defaults (Zustand's `clearStorage`).
    ///
    /// ```swift
    /// try theme.reset()
    /// ```
    public func reset() throws {
        guard let store else {
            memoryWrites.withLock { _ in current.withLock { $0 = (defaults, .noStore) } }
            return
        }
        try store.write { tx in
            current.withLock { $0 = (defaults, .absent) }
            tx.removeValue(forKey: name)
        }
    }

    /// Reads the state from the store again (after another process changed it, say) and returns it. Never
    /// throws: failures are handled as at creation. Without a store, returns the state as it is.
    ///
    /// ```swift
    /// let latest = theme.rehydrate()
    /// ```
    @discardableResult
    public func rehydrate() -> Value {
        guard let store else { return value }
        let (value, hydration) = load(from: store)
        current.withLock { $0 = (value, hydration) }
        if case .unreadable(let reason) = hydration {
            logger.error(
                "PersistedState '\(name)': \(reason) in \(store.path); using the defaults",
                metadata: ["prefskv.path": "\(store.path)"])
        }
        return value
    }

    /// Calls `callback` with the new state after every change of it, made through this handle or any other
    /// handle or process (another's change is hydrated first). Keep the observation: releasing it stops the
    /// callbacks.
    ///
    /// ```swift
    /// let observation = theme.observe { applyTheme($0) }
    /// ```
    public func observe(_ callback: @escaping @Sendable (Value) -> Void) -> PrefsObservation {
        guard let store else { return PrefsObservation {} }
        return store.observe { [weak self] change in
            guard let self, change.keys.contains(self.name) else { return }
            // Hydrated again even for this process's changes: the key may have been written around the state
            // (through its typed key, say), not only through `set`.
            callback(self.rehydrate())
        }
    }

    /// A stream of the state: its value now, then after every change (another process's included), until the
    /// consuming task is cancelled.
    ///
    /// ```swift
    /// for await theme in themeState.values() { applyTheme(theme) }
    /// ```
    public func values() -> AsyncStream<Value> {
        let (stream, continuation) = AsyncStream<Value>.makeStream(bufferingPolicy: .bufferingNewest(16))
        let observation = observe { continuation.yield($0) }
        continuation.yield(value)
        // The stream keeps the state (and its store) alive until it ends.
        continuation.onTermination = { [self] _ in
            observation.cancel()
            _ = self
        }
        return stream
    }

    // MARK: Hydration

    /// What hydration found in the store.
    public enum Hydration: Sendable, Equatable, CustomStringConvertible {
        /// The stored state, at the current version.
        case stored
        /// A state of this older version, migrated and written back.
        case migrated(from: Int)
        /// Nothing stored: the defaults.
        case absent
        /// The store's recovery lost this state's record when it salvaged a damaged file (and logged that):
        /// the defaults.
        case lost
        /// Something is stored but it cannot be used; the reason names it (never the value). The defaults,
        /// and one logged error.
        case unreadable(String)
        /// There is no store (it could not be opened, and its open logged why): the defaults, in memory.
        case noStore

        /// `stored`, `migrated from version N`, `absent`, `lost`, `unreadable: <reason>` or `no store`.
        public var description: String {
            switch self {
            case .stored: return "stored"
            case .migrated(let version): return "migrated from version \(version)"
            case .absent: return "absent"
            case .lost: return "lost"
            case .unreadable(let reason): return "unreadable: \(reason)"
            case .noStore: return "no store"
            }
        }
    }

    /// A state stored at an older version, as a migration receives it.
    ///
    /// ```swift
    /// struct V1: Decodable { var expanded: Bool }
    /// let old = try stored.decode(V1.self)
    /// ```
    public struct StoredState: Sendable {
        /// The version the state was stored with.
        public let version: Int
        /// The whole stored JSON value: `{"state":...,"version":N}`.
        public let json: Data

        /// Decodes the stored state as `type`: the shape `Value` had at ``version``.
        public func decode<T: Decodable>(_ type: T.Type) throws -> T {
            try JSONDecoder().decode(Envelope<T>.self, from: json).state
        }
    }

    /// The stored form of `state`: its envelope as JSON, checked as a store value under ``name``.
    private func encoded(_ state: Value) throws -> [UInt8] {
        try ValueCodec.validate(key: name)
        let envelope = Array(try ValueCodec.json(Envelope(state: state, version: version), key: name))
        try ValueCodec.validate(length: envelope.count, key: name)
        return envelope
    }

    /// The state stored now, read through `tx` (under the writer lock, caught up with every process) and taken
    /// as hydration takes it, without writing a migration back (the update writes its result). A value of another
    /// type under the name is unusable like one that does not decode: the defaults. A failed read throws.
    private func storedState(in tx: PrefsTransaction) throws -> Value {
        do {
            if let native { return try native.read(tx.store, name) ?? defaults }
            return state(from: try tx.json(forKey: name), lost: false).value
        } catch let error as PrefsError where error.code == .typeMismatch {
            return defaults
        }
    }

    /// Writes `state` (its `envelope`, for a state) through `tx`.
    private func write(_ state: Value, envelope: [UInt8], to tx: inout PrefsTransaction) throws {
        if let native {
            try native.write(&tx, state, name, native.expiresAfter)
        } else {
            tx.operations.append(
                .set(name: name, type: .json, value: envelope, expiresAt: ValueCodec.expiresAt(lifetime)))
        }
    }

    /// Whether the store's last recovery lost the record under the name (a key of a record lost with it, or the
    /// bytes where a damaged record's key lay): a state absent after it is lost, not never stored.
    private func lostByRecovery(_ store: PrefsStore) -> Bool {
        store.lastRecovery.map { $0.lostKeys.contains(name) || $0.unverifiedLostKeys.contains(name) } ?? false
    }

    private func load(from store: PrefsStore) -> (Value, Hydration) {
        if let native { return native.load(name, from: store, defaults: defaults, lost: lostByRecovery(store)) }
        let json: Data?
        do {
            json = try store.readFixed(name, .json, { Data($0) })
        } catch let error as PrefsError {
            return (defaults, .unreadable("the stored state cannot be read (\(error.code): \(error.message))"))
        } catch {
            return (defaults, .unreadable("the stored state cannot be read (\(error))"))
        }
        let (value, hydration) = state(from: json, lost: json == nil && lostByRecovery(store))
        guard case .migrated(let from) = hydration else { return (value, hydration) }
        do {
            try set(value)
        } catch {
            // The migrated state is used; the old one stays on disk and is migrated again next time.
            let message =
                "PersistedState '\(name)': the state migrated from version \(from) could not be saved "
                + "in \(store.path): \(error)"
            logger.error("\(message)", metadata: ["prefskv.path": "\(store.path)"])
        }
        return (value, hydration)
    }

    /// What the stored JSON (nil: nothing stored; `lost`: the store's recovery lost it) holds: the state, decoded
    /// or migrated (not yet written back), else the defaults and why.
    private func state(from json: Data?, lost: Bool) -> (value: Value, hydration: Hydration) {
        guard let json else { return (defaults, lost ? .lost : .absent) }
        guard let stored = try? JSONDecoder().decode(VersionOnly.self, from: json) else {
            return (defaults, .unreadable("the stored state is not a versioned state"))
        }
        if stored.version == version {
            do {
                return (try JSONDecoder().decode(Envelope<Value>.self, from: json).state, .stored)
            } catch {
                return (defaults, .unreadable("the stored state (version \(version)) does not decode as \(Value.self)"))
            }
        }
        guard stored.version < version else {
            return (
                defaults,
                .unreadable("the stored state has version \(stored.version), newer than this app's \(version)")
            )
        }
        guard let migrate else {
            return (defaults, .unreadable("the stored state has version \(stored.version) and no migration"))
        }
        let migrated: Value
        do {
            migrated = try migrate(StoredState(version: stored.version, json: json))
        } catch {
            return (
                defaults, .unreadable("migrating the stored state from version \(stored.version) failed: \(error)")
            )
        }
        return (migrated, .migrated(from: stored.version))
    }
}

/// The stored form of a state.
struct Envelope<State> {
    var state: State
    var version: Int
}

extension Envelope: Encodable where State: Encodable {}
extension Envelope: Decodable where State: Decodable {}

/// The version of a stored state, read before its state is decoded.
private struct VersionOnly: Decodable {
    var version: Int
}

extension PrefsStore {
    /// Opens the store like ``init(id:directory:configuration:)-(_,String,_)``, but never throws: when the store cannot be
    /// opened, logs one error naming the file and returns nil. Meant for app state the defaults can stand in
    /// for: give the result to ``PersistedState``, whose states are then their defaults, in memory, for this run.
    ///
    /// A damaged log or header page is not a failure: the open salvages it (and logs that) as `init` does. A data
    /// file that cannot be read as a store at all (not a store, no copy of its header verifies) is rebuilt by
    /// default (`ifUnreadable: .quarantineAndRebuild`: the records of its body that verify are kept, the original
    /// is kept as `<id>.prefs.corrupt-<time>`, mode 0400, and one error is logged naming both files), so that the
    /// user's next choices are saved again instead of living in memory on every launch; pass `.refuse` to leave
    /// such a file as it is and get nil.
    /// What still fails: a newer format, a wrong key, denied permissions, a read-only directory.
    ///
    /// ```swift
    /// let ui = PrefsStore.openOrLog(id: "ui", directory: app.preferences)
    /// let theme = PersistedState(name: "theme", version: 0, defaults: "light", store: ui)
    /// ```
    public static func openOrLog(
        id: String, directory: String = PrefsStore.defaultDirectory, configuration: Configuration = Configuration(),
        ifUnreadable: UnreadableFilePolicy = .quarantineAndRebuild
    ) -> PrefsStore? {
        var configuration = configuration
        configuration.unreadableFile = ifUnreadable
        do {
            return try PrefsStore(id: id, directory: directory, configuration: configuration)
        } catch {
            let path = (error as? PrefsError)?.path ?? Sys.joinPath(directory, id + ".prefs")
            configuration.logger.error(
                "cannot open the store \(path): \(error); the app state it holds lives in memory for now",
                metadata: ["prefskv.path": "\(path)"])
            return nil
        }
    }
}
