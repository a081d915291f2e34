public import FoundationEssentials
import Logging
import Synchronization
import SystemLayer

/// A memory-mapped, append-only, crash-safe store of typed values, in the spirit of MMKV.
///
/// Every change is a checksummed record appended to `<directory>/<id>.prefs`; a write is acknowledged when
/// the log end in the mapped header moves past it, so a process killed at any instant loses no acknowledged
/// write. Reads come from an in-memory index into the mapping: no system call when nothing changed.
/// Several processes may share a store; writers serialize on a file lock. Keys are compared by their UTF-8
/// bytes, as they are stored: `"caf\u{E9}"` and `"cafe\u{301}"` (equal as Swift strings) are two keys.
///
/// ```swift
/// let store = try PrefsStore(id: "ui")
/// try store.set("dark", forKey: "theme")
/// try store.set(true, forKey: "sidebarExpanded")
/// let theme = try store.string(forKey: "theme") ?? "system"
/// ```
///
/// All methods are thread-safe. A `write { tx in }` body runs under this handle's writer lock: calling the
/// same store's writing methods from inside it is a programmer error and traps; reading is fine.
public final class PrefsStore: Sendable {
    /// The store id, also the data file's name: `<id>.prefs`.
    public let id: String
    /// The directory holding the store's files.
    public let directory: String
    /// The data file: `<directory>/<id>.prefs`.
    public let path: String
    /// The configuration the store was opened with.
    public let configuration: Configuration

    let engine: SanitizedMutex<Engine>
    /// Serializes this process's write transactions (the file lock serializes processes).
    let gate = SanitizedMutex<Void>(())
    /// The thread running a `write` body, 0 when none: writing through the store from inside the body is a
    /// programmer error that would deadlock on `gate`; it traps with a message instead.
    let transactionThread = Atomic<UInt>(0)
    let observers = SanitizedMutex(ObserverRegistry())
    /// The typed keys whose unreadable value this handle has logged (once each: `store[key]`). A list, not a
    /// `Set<String>`: a handle's release destroys it, and the first `Set<String>` a process destroys makes the
    /// runtime resolve its metadata by searching the conformance records for `String: Hashable`, about 100 µs of a
    /// vault's first read (PerformanceIssues36-39.md, issue 36); a handle logs a few keys at most.
    let loggedUnreadableKeys = SanitizedMutex<[String]>([])
    /// The private directory of a ``temporary(id:configuration:)`` store, removed with this handle; nil otherwise.
    let temporaryDirectory: TemporaryDirectory?

    /// Opens the store `id` in `directory`, creating it (and the directory, mode 0700) when absent. A relative
    /// `directory` is relative to the working directory (an empty one is the working directory itself); keep
    /// the working directory unchanged while the store is open, or pass an absolute path.
    ///
    /// A damaged file is recovered according to `configuration.recovery` (see ``lastRecovery``). A file that
    /// is not a store, a newer format, an unreadable header or a wrong sealer key throws and leaves the file
    /// byte-identical. In a read-only directory an existing store opens for reading; writes then throw
    /// ``PrefsError/Code/readOnly``.
    ///
    /// ```swift
    /// let store = try PrefsStore(id: "ui", directory: "/home/me/.local/share/myapp")
    /// ```
    public convenience init(
        id: String, directory: String = PrefsStore.defaultDirectory, configuration: Configuration = Configuration()
    ) throws {
        try self.init(id: id, directory: directory, configuration: configuration, temporaryDirectory: nil)
    }

    init(id: String, directory: String, configuration: Configuration, temporaryDirectory: TemporaryDirectory?) throws {
        let engine = try Engine.open(id: id, directory: directory, configuration: configuration)
        engine.writeIndexAfterOpen()
        let events = engine.takeEvents()
        self.id = id
        self.directory = directory
        self.path = engine.paths.data
        self.configuration = configuration
        self.engine = SanitizedMutex(engine)
        self.temporaryDirectory = temporaryDirectory
        log(events.log)
    }

    deinit {
        observers.withLock { $0.stopWatching() }
        // A store with enough keys leaves a persisted index for the next open (Engine.writeIndexIfDue).
        let events = engine.withLock { e in
            e.writeIndexIfDue()
            return e.takeEvents()
        }
        log(events.log)
    }

    /// `$XDG_DATA_HOME/prefskv`, or `$HOME/.local/share/prefskv` when `XDG_DATA_HOME` is unset: one directory
    /// for every app of the user. An app passes its own instead (``AppDirectory/preferences``), so that two
    /// apps' stores named `ui` are two files.
    ///
    /// ```swift
    /// let store = try PrefsStore(id: "ui", directory: try AppDirectory("com.example.notes").preferences)
    /// ```
    public static var defaultDirectory: String {
        Sys.dataDirectory("prefskv")
    }

    /// The report of the recovery this handle's open (or a later reload) performed, nil when the file was
    /// intact.
    ///
    /// ```swift
    /// if let report = store.lastRecovery { logger.warning("settings partly reset: \(report)") }
    /// ```
    public var lastRecovery: PrefsRecoveryReport? {
        engine.withLock { $0.lastRecovery }
    }

    // MARK: Reading

    /// The Bool stored under `key`, or nil when absent or expired.
    ///
    /// Throws ``PrefsError/Code/typeMismatch`` when the key holds another type.
    ///
    /// ```swift
    /// let expanded = try store.bool(forKey: "sidebarExpanded") ?? true
    /// ```
    public func bool(forKey key: String) throws -> Bool? {
        try readFixed(key, .bool) { $0.count == 1 ? $0[0] != 0 : nil }
    }

    /// The Int64 stored under `key`, or nil when absent or expired. Does not allocate.
    ///
    /// ```swift
    /// let launches = try store.int64(forKey: "launchCount") ?? 0
    /// ```
    public func int64(forKey key: String) throws -> Int64? {
        try readFixed(key, .int64) { $0.count == 8 ? Int64(littleEndian: $0.loadUnaligned(as: Int64.self)) : nil }
    }

    /// The integer stored under `key` (stored as Int64), or nil when absent or expired.
    ///
    /// ```swift
    /// let width = try store.int(forKey: "sidebarWidth") ?? 240
    /// ```
    public func int(forKey key: String) throws -> Int? {
        try int64(forKey: key).map { Int($0) }
    }

    /// The Double stored under `key`, or nil when absent or expired. Does not allocate.
    ///
    /// ```swift
    /// let zoom = try store.double(forKey: "zoom") ?? 1.0
    /// ```
    public func double(forKey key: String) throws -> Double? {
        try readFixed(key, .double) {
            $0.count == 8 ? Double(bitPattern: UInt64(littleEndian: $0.loadUnaligned(as: UInt64.self))) : nil
        }
    }

    /// The String stored under `key`, or nil when absent or expired.
    ///
    /// ```swift
    /// let theme = try store.string(forKey: "theme") ?? "system"
    /// ```
    public func string(forKey key: String) throws -> String? {
        try readFixed(key, .string) { String(decoding: $0, as: UTF8.self) }
    }

    /// The bytes stored under `key`, or nil when absent or expired.
    ///
    /// ```swift
    /// let avatar = try store.data(forKey: "avatar")
    /// ```
    public func data(forKey key: String) throws -> Data? {
        try readFixed(key, .bytes) { Data($0) }
    }

    /// The string array stored under `key`, or nil when absent or expired.
    ///
    /// ```swift
    /// let recent = try store.strings(forKey: "recentSearches") ?? []
    /// ```
    public func strings(forKey key: String) throws -> [String]? {
        try readFixed(key, .stringArray) { ValueCodec.decodeStrings($0) }
    }

    /// Decodes the JSON stored under `key` (by ``setCodable(_:forKey:expiresAfter:)``), or nil when absent
    /// or expired. Throws ``PrefsError/Code/typeMismatch`` when the JSON does not decode as `type`.
    ///
    /// ```swift
    /// struct Layout: Codable { var columns: Int }
    /// let layout = try store.decode(Layout.self, forKey: "layout")
    /// ```
    public func decode<T: Decodable>(_ type: T.Type, forKey key: String) throws -> T? {
        guard let json = try readFixed(key, .json, { Data($0) }) else { return nil }
        do {
            return try JSONDecoder().decode(T.self, from: json)
        } catch {
            throw PrefsError(
                .typeMismatch, "the JSON under key \"\(key)\" does not decode as \(T.self)", path: path,
                underlying: error)
        }
    }

    /// Whether `key` holds a value that has not expired.
    ///
    /// ```swift
    /// if try !store.contains("onboarded") { showOnboarding() }
    /// ```
    public func contains(_ key: String) throws -> Bool {
        try read { e throws(PrefsError) in try e.liveEntry(forName: key) != nil }
    }

    /// Every live key, sorted by its UTF-8 bytes (code point order). In a sealed store, names are learned by
    /// opening each record once.
    ///
    /// ```swift
    /// for key in try store.allKeys { print(key) }
    /// ```
    public var allKeys: [String] {
        get throws { try read { e throws(PrefsError) in try e.liveNames() } }
    }

    /// The number of live (unexpired) keys.
    ///
    /// ```swift
    /// print(try store.count)
    /// ```
    public var count: Int {
        get throws {
            try read { e throws(PrefsError) in try e.liveCount() }
        }
    }

    // MARK: Writing

    /// Stores a Bool. With `expiresAfter`, the value reads as absent once that time has passed.
    ///
    /// Setting the value a key already holds (same type, bytes and expiry) writes nothing and notifies
    /// nobody.
    ///
    /// ```swift
    /// try store.set(true, forKey: "sidebarExpanded")
    /// ```
    public func set(_ value: Bool, forKey key: String, expiresAfter: Duration? = nil) throws {
        try writeOne(key, .bool, expiresAfter, length: 1) { $0.storeBytes(of: value ? 1 : 0, as: UInt8.self) }
    }

    /// Stores an integer as Int64.
    ///
    /// ```swift
    /// try store.set(240, forKey: "sidebarWidth")
    /// ```
    public func set(_ value: Int, forKey key: String, expiresAfter: Duration? = nil) throws {
        try set(Int64(value), forKey: key, expiresAfter: expiresAfter)
    }

    /// Stores an Int64.
    ///
    /// ```swift
    /// try store.set(Int64(42), forKey: "launchCount")
    /// ```
    public func set(_ value: Int64, forKey key: String, expiresAfter: Duration? = nil) throws {
        try writeOne(key, .int64, expiresAfter, length: 8) { $0.storeBytes(of: value.littleEndian, as: Int64.self) }
    }

    /// Stores a Double (its exact bit pattern).
    ///
    /// ```swift
    /// try store.set(1.25, forKey: "zoom")
    /// ```
    public func set(_ value: Double, forKey key: String, expiresAfter: Duration? = nil) throws {
        try writeOne(key, .double, expiresAfter, length: 8) {
            $0.storeBytes(of: value.bitPattern.littleEndian, as: UInt64.self)
        }
    }

    /// Stores a String (UTF-8, up to 64 MiB).
    ///
    /// ```swift
    /// try store.set("dark", forKey: "theme", expiresAfter: .seconds(3600))
    /// ```
    public func set(_ value: String, forKey key: String, expiresAfter: Duration? = nil) throws {
        var value = value
        try value.withUTF8 { utf8 in
            try writeOne(key, .string, expiresAfter, length: utf8.count) { out in
                if !utf8.isEmpty { out.copyMemory(from: UnsafeRawBufferPointer(utf8)) }
            }
        }
    }

    /// Stores bytes (up to 64 MiB).
    ///
    /// ```swift
    /// try store.set(Data([1, 2, 3]), forKey: "avatar")
    /// ```
    public func set(_ value: Data, forKey key: String, expiresAfter: Duration? = nil) throws {
        try value.withUnsafeBytes { bytes in
            try writeOne(key, .bytes, expiresAfter, length: bytes.count) { out in
                if !bytes.isEmpty { out.copyMemory(from: bytes) }
            }
        }
    }

    /// Stores an array of strings.
    ///
    /// ```swift
    /// try store.set(["swift", "mmap"], forKey: "recentSearches")
    /// ```
    public func set(_ value: [String], forKey key: String, expiresAfter: Duration? = nil) throws {
        let bytes = ValueCodec.encode(value)
        try bytes.withUnsafeBytes { bytes in
            try writeOne(key, .stringArray, expiresAfter, length: bytes.count) { out in
                if !bytes.isEmpty { out.copyMemory(from: bytes) }
            }
        }
    }

    /// Stores any Encodable value as JSON; read it back with ``decode(_:forKey:)``.
    ///
    /// ```swift
    /// try store.setCodable(Layout(columns: 3), forKey: "layout")
    /// ```
    public func setCodable<T: Encodable>(_ value: T, forKey key: String, expiresAfter: Duration? = nil) throws {
        let json = try ValueCodec.json(value, key: key)
        try json.withUnsafeBytes { bytes in
            try writeOne(key, .json, expiresAfter, length: bytes.count) { out in
                if !bytes.isEmpty { out.copyMemory(from: bytes) }
            }
        }
    }

    /// Removes `key`. Removing an absent key writes nothing.
    ///
    /// ```swift
    /// try store.removeValue(forKey: "sessionHint")
    /// ```
    public func removeValue(forKey key: String) throws {
        try ValueCodec.validate(key: key)
        try write { tx in tx.removeValue(forKey: key) }
    }

    /// Removes every key (one record). Observers are told every key it removed.
    ///
    /// ```swift
    /// try store.removeAll()
    /// ```
    public func removeAll() throws {
        try write { tx in tx.removeAll() }
    }

    /// Applies several changes together: after a crash either all of them are in the store or none is.
    /// The body runs under the writer lock (this process's and, in multi-process mode, the file lock), so
    /// a read-modify-write through `tx` is atomic across processes. Reads through `tx` see the store as it
    /// was when the transaction began (every process's writes included), not the transaction's own changes.
    /// If the body throws, nothing is written. Observers hear the changes of other handles that the
    /// transaction caught up with after it ends, with its own, never from inside the body.
    ///
    /// ```swift
    /// try store.write { tx in
    ///     let n = try tx.int64(forKey: "counter") ?? 0
    ///     try tx.set(n + 1, forKey: "counter")
    ///     try tx.set("dark", forKey: "theme")
    ///     tx.removeValue(forKey: "legacyTheme")
    /// }
    /// ```
    public func write<R>(_ body: (inout PrefsTransaction) throws -> R) throws -> R {
        checkNotInsideTransaction()
        let result: R
        let deliver: Bool
        do {
            (result, deliver) = try transact(body)
        } catch {
            // Other handles' changes the transaction caught up with are heard even when it wrote nothing.
            if engine.withLock({ $0.hasPendingEvents }) { deliverEvents() }
            throw error
        }
        if deliver { deliverEvents() }
        return result
    }

    // MARK: Plumbing

    /// `write`'s transaction, under the gate and the writer lock; whether it left events to deliver.
    private func transact<R>(_ body: (inout PrefsTransaction) throws -> R) throws -> (R, Bool) {
        try gate.withLock { _ in
            try engine.withLock { e throws(PrefsError) in try e.beginWrite() }
            var committed = false
            transactionThread.store(Sys.threadID(), ordering: .relaxed)
            defer {
                transactionThread.store(0, ordering: .relaxed)
                if !committed { engine.withLock { $0.endWrite() } }
            }
            var tx = PrefsTransaction(store: self)
            let result = try body(&tx)
            let ops = tx.operations
            let deliver = try engine.withLock { e throws(PrefsError) in
                defer { e.endWrite() }
                try e.commit(ops)
                return e.hasPendingEvents
            }
            committed = true
            return (result, deliver)
        }
    }

    /// Traps when called from inside this store's `write` body on the same thread (it would deadlock).
    @inline(__always)
    func checkNotInsideTransaction() {
        precondition(
            transactionThread.load(ordering: .relaxed) != Sys.threadID(),
            "PrefsStore: write through `tx` inside `write { tx in ... }`, not through the store itself")
    }

    /// Runs `body` on the caught-up engine, then delivers events it produced. A read that finds the file changed
    /// underneath (`changedUnderneath`: what it read may not be what the index means) reopens the file and runs
    /// once more; a second change in that time is thrown.
    @inline(__always)
    func read<R: Sendable>(_ body: (Engine) throws(PrefsError) -> R) throws -> R {
        do throws(PrefsError) {
            return try readOnce(body)
        } catch where error.code == .changedUnderneath {
            // Rare: outside the hot path, the handle reopens the file and the read runs once more.
            try engine.withLock { e throws(PrefsError) in try e.reloadChangedFile() }
            return try readOnce(body)
        }
    }

    @inline(__always)
    private func readOnce<R: Sendable>(_ body: (Engine) throws(PrefsError) -> R) throws(PrefsError) -> R {
        let (value, deliver) = try engine.withLock { e throws(PrefsError) in
            try e.refreshIfNeeded()
            return (try body(e), e.hasPendingEvents)
        }
        // A read inside this thread's `write` body leaves them to the write, which delivers them once it released
        // the writer lock: observers must not run while every other writer waits.
        if deliver && transactionThread.load(ordering: .relaxed) != Sys.threadID() {
            deliverEvents(externalOnly: true)
        }
        return value
    }

    /// Reads a value of `type`: nil when absent or expired, `typeMismatch` for another type.
    @inline(__always)
    func readFixed<R: Sendable>(
        _ key: String, _ type: ValueType, _ decode: (UnsafeRawBufferPointer) -> R?
    ) throws -> R? {
        try read { e throws(PrefsError) -> R? in
            // A sealed store's value kept by its opt-in plaintext cache (another type, or a value that does not
            // decode, is judged the usual way).
            if e.configuration.cachesPlaintext, let decoded = e.readCached(key, type: type, decode) { return decoded }
            guard let entry = try e.liveEntry(forName: key) else { return nil }
            guard entry.type == type else { throw PrefsStore.typeMismatch(key, entry.type, type, e) }
            // Decoded inside the read, judged after it (an error thrown from inside made every get retain and
            // release the key and the engine).
            let decoded = try e.withValue(of: entry, name: key) { bytes in decode(bytes) }
            guard let decoded else { throw e.invalidEncoding(of: entry, key: key) }
            return decoded
        }
    }

    /// `readFixed`'s error for a value of another type, built out of line: the read path then keeps nothing alive
    /// for it.
    @inline(never)
    static func typeMismatch(_ key: String, _ found: ValueType, _ wanted: ValueType, _ e: Engine) -> PrefsError {
        PrefsError(
            .typeMismatch, "key \"\(key)\" holds a value of type \(found.name), not \(wanted.name)", path: e.paths.data)
    }


    /// Writes one value under the writer lock (the engine appends it in place, or seals it through a commit).
    @inline(__always)
    func writeOne(
        _ key: String, _ type: ValueType, _ expiresAfter: Duration?, length: Int,
        fill: (UnsafeMutableRawBufferPointer) -> Void
    ) throws {
        try ValueCodec.validate(key: key)
        try ValueCodec.validate(length: length, key: key)
        let expiresAt = ValueCodec.expiresAt(expiresAfter)
        checkNotInsideTransaction()
        let deliver: Bool
        do {
            deliver = try gate.withLock { _ throws(PrefsError) in
                try engine.withLock { e throws(PrefsError) in
                    try e.beginWrite()
                    defer { e.endWrite() }
                    try e.set(name: key, type: type, expiresAt: expiresAt, valueLength: length, fill: fill)
                    return e.hasPendingEvents
                }
            }
        } catch {
            // A write published before it threw (a flush after its publish failed), and other handles' changes
            // caught up with, are heard all the same.
            if engine.withLock({ $0.hasPendingEvents }) { deliverEvents() }
            throw error
        }
        if deliver { deliverEvents() }
    }

    /// Logs and notifies what the engine queued, outside every lock. A writer delivers everything queued (its own
    /// changes first of all, before its write returns); a reader (`externalOnly`) only other processes' changes
    /// and the log lines: a reader on another thread, such as the watch's, must not take a writer's changes and
    /// deliver them late, after the writer's next ones (PrefsStoreTests.observersHearEveryChange... saw that under
    /// load).
    func deliverEvents(externalOnly: Bool = false) {
        let events = engine.withLock { $0.takeEvents(externalOnly: externalOnly) }
        log(events.log)
        guard !events.changes.isEmpty else { return }
        let callbacks = observers.withLock { Array($0.callbacks.values) }
        for change in events.changes {
            for callback in callbacks { callback(change) }
        }
    }

    func log(_ entries: [(level: Logger.Level, message: Logger.Message)]) {
        for entry in entries {
            configuration.logger.log(level: entry.level, entry.message, metadata: ["prefskv.path": "\(path)"])
        }
    }
}
