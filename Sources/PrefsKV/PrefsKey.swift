public import FoundationEssentials
import Logging

/// A key of a preference store, declared once with its type and default, then read and written without
/// optionals or type arguments (as sindresorhus/Defaults' keys are):
///
/// ```swift
/// enum Theme: String, Codable, Sendable { case light, dark, system }
///
/// extension PrefsKeys {
///     static let theme = PrefsKey<Theme>("theme", default: .system)
///     static let fontSize = PrefsKey<Int>("fontSize", default: 13)
///     static let hint = PrefsKey<String>("hint", default: "", expiresAfter: .seconds(3600))
/// }
///
/// let theme = store[.theme]               // .system until set; never nil, never throws
/// try store.set(.dark, for: .theme)
/// for await size in store.values(of: .fontSize) { apply(size) }   // this value, then each change
/// ```
///
/// `Bool`, `Int`, `Int64`, `Double`, `String`, `Data` and `[String]` are stored as the store's own types (what
/// `vaultctl prefs get` prints, and what the typed getters such as ``PrefsStore/string(forKey:)`` read);
/// anything else `Codable` is stored as a ``PersistedState`` of version 0 stores its state, so a
/// `PersistedState` built on the key (`PersistedState(key, version:store:)`) reads the same
/// value, and migrates it when the type's shape changes: one mechanism, two ways in. A `PersistedState` built
/// on a key of the store's own types reads and writes it as that type (it has no versions).
public final class PrefsKey<Value: Sendable>: PrefsKeys, @unchecked Sendable {
    /// The key's name in the store.
    public let name: String
    /// The value when nothing usable is stored (absent, expired, unreadable).
    public let defaultValue: Value
    /// How long a written value lives (nil: until it is replaced or removed).
    public let expiresAfter: Duration?

    let read: @Sendable (PrefsStore, String) throws -> Value?
    let write: @Sendable (inout PrefsTransaction, Value, String, Duration?) throws -> Void
    /// Whether the value is stored as a version-0 state (a Codable key), so a ``PersistedState`` can take it.
    let storedAsState: Bool

    // Immutable after init: every stored property is a `let` of a Sendable type.
    private init(
        _ name: String, default defaultValue: Value, expiresAfter: Duration?,
        storedAsState: Bool = false,
        read: @escaping @Sendable (PrefsStore, String) throws -> Value?,
        write: @escaping @Sendable (inout PrefsTransaction, Value, String, Duration?) throws -> Void
    ) {
        precondition(!name.isEmpty, "PrefsKey: the name must not be empty")
        self.name = name
        self.defaultValue = defaultValue
        self.expiresAfter = expiresAfter
        self.read = read
        self.write = write
        self.storedAsState = storedAsState
        super.init()
    }

    /// A key of any `Codable` value, stored as JSON the way a ``PersistedState`` of version 0 stores it
    /// (`{"state":...,"version":0}`): when the value's shape changes, a `PersistedState` on the same key with
    /// version 1 and a migration takes over the values written so far.
    public convenience init(_ name: String, default defaultValue: Value, expiresAfter: Duration? = nil)
    where Value: Codable {
        self.init(
            name, default: defaultValue, expiresAfter: expiresAfter, storedAsState: true,
            read: { store, key in
                guard let stored = try store.decode(Envelope<Value>.self, forKey: key) else { return nil }
                guard stored.version == 0 else {
                    throw PrefsError(
                        .typeMismatch,
                        "key \"\(key)\" holds a state of version \(stored.version): read it through its PersistedState")
                }
                return stored.state
            },
            write: { tx, value, key, lifetime in
                try tx.setCodable(Envelope(state: value, version: 0), forKey: key, expiresAfter: lifetime)
            })
    }

    /// A key of a `Bool`, stored as a bool.
    public convenience init(_ name: String, default defaultValue: Bool, expiresAfter: Duration? = nil)
    where Value == Bool {
        self.init(
            name, default: defaultValue, expiresAfter: expiresAfter, read: { try $0.bool(forKey: $1) },
            write: { tx, value, key, lifetime in try tx.set(value, forKey: key, expiresAfter: lifetime) })
    }

    /// A key of an `Int`, stored as an int.
    public convenience init(_ name: String, default defaultValue: Int, expiresAfter: Duration? = nil)
    where Value == Int {
        self.init(
            name, default: defaultValue, expiresAfter: expiresAfter, read: { try $0.int(forKey: $1) },
            write: { tx, value, key, lifetime in try tx.set(value, forKey: key, expiresAfter: lifetime) })
    }

    /// A key of an `Int64`, stored as an int.
    public convenience init(_ name: String, default defaultValue: Int64, expiresAfter: Duration? = nil)
    where Value == Int64 {
        self.init(
            name, default: defaultValue, expiresAfter: expiresAfter, read: { try $0.int64(forKey: $1) },
            write: { tx, value, key, lifetime in try tx.set(value, forKey: key, expiresAfter: lifetime) })
    }

    /// A key of a `Double`, stored as a double.
    public convenience init(_ name: String, default defaultValue: Double, expiresAfter: Duration? = nil)
    where Value == Double {
        self.init(
            name, default: defaultValue, expiresAfter: expiresAfter, read: { try $0.double(forKey: $1) },
            write: { tx, value, key, lifetime in try tx.set(value, forKey: key, expiresAfter: lifetime) })
    }

    /// A key of a `String`, stored as a string.
    public convenience init(_ name: String, default defaultValue: String, expiresAfter: Duration? = nil)
    where Value == String {
        self.init(
            name, default: defaultValue, expiresAfter: expiresAfter, read: { try $0.string(forKey: $1) },
            write: { tx, value, key, lifetime in try tx.set(value, forKey: key, expiresAfter: lifetime) })
    }

    /// A key of `Data`, stored as bytes.
    public convenience init(_ name: String, default defaultValue: Data, expiresAfter: Duration? = nil)
    where Value == Data {
        self.init(
            name, default: defaultValue, expiresAfter: expiresAfter, read: { try $0.data(forKey: $1) },
            write: { tx, value, key, lifetime in try tx.set(value, forKey: key, expiresAfter: lifetime) })
    }

    /// A key of a `[String]`, stored as a string list.
    public convenience init(_ name: String, default defaultValue: [String], expiresAfter: Duration? = nil)
    where Value == [String] {
        self.init(
            name, default: defaultValue, expiresAfter: expiresAfter, read: { try $0.strings(forKey: $1) },
            write: { tx, value, key, lifetime in try tx.set(value, forKey: key, expiresAfter: lifetime) })
    }
}

/// The namespace an app declares its keys in, as static members, so that `store[.theme]` finds them (each
/// ``PrefsKey`` is a `PrefsKeys`, as Defaults' keys are).
///
/// ```swift
/// extension PrefsKeys {
///     static let theme = PrefsKey<Theme>("theme", default: .system)
/// }
/// ```
public class PrefsKeys: @unchecked Sendable {  // no state: the keys are its subclass's immutable instances
    fileprivate init() {}
}

extension Optional where Wrapped == PrefsStore {
    /// The value of `key` in the store, or the key's default when there is no store: what
    /// ``PrefsStore/openOrLog(id:directory:configuration:ifUnreadable:)`` returns when the store cannot be opened
    /// reads as defaults, with no `?? default` repeated at every read.
    ///
    /// ```swift
    /// let ui = PrefsStore.openOrLog(id: "ui", directory: app.preferences)   // PrefsStore?
    /// let width = ui[.sidebarWidth]                                         // 240 when ui is nil
    /// ```
    public subscript<Value>(key: PrefsKey<Value>) -> Value {
        switch self {
        case .some(let store): store[key]
        case .none: key.defaultValue
        }
    }
}

extension PrefsStore {
    /// The value of `key`: the stored one, else (absent, expired) the key's default. Never throws: a value
    /// that cannot be read (another type under the name, damaged JSON) gives the default and logs one error
    /// naming the store and the key, never the value; ``value(of:)`` throws instead.
    ///
    /// ```swift
    /// let theme = store[PrefsKeys.theme]
    /// ```
    public subscript<Value>(key: PrefsKey<Value>) -> Value {
        do {
            return try value(of: key)
        } catch {
            // Once per key and handle (a render loop reads it every frame), and the code only: a decoding
            // error's text can quote the stored value.
            let first = loggedUnreadableKeys.withLock { logged in
                guard !logged.contains(key.name) else { return false }
                logged.append(key.name)
                return true
            }
            if first {
                let code = (error as? PrefsError)?.code.description ?? "decoding failed"
                configuration.logger.error(
                    "store \(path): key \"\(key.name)\" cannot be read (\(code)), so its default is used",
                    metadata: ["prefskv.path": "\(path)", "prefskv.key": "\(key.name)"])
            }
            return key.defaultValue
        }
    }

    // No setter: a write can fail (a full disk, a read-only store, a changed file) and a subscript's setter cannot
    // throw, so `store[key] = value` would have to drop the failure. Writes are `try store.set(value, for: key)`,
    // or `ObservedPref.set` in a model (issue 40, point 7; a property wrapper has the same setter).

    /// The value of `key`, or its default when nothing is stored (or the value expired).
    ///
    /// ```swift
    /// let size = try store.value(of: PrefsKeys.fontSize)
    /// ```
    ///
    /// - Throws: ``PrefsError/Code/typeMismatch`` when the key holds another type, ``PrefsError/Code/invalidInput``
    ///   when its JSON does not decode.
    public func value<Value>(of key: PrefsKey<Value>) throws -> Value {
        try key.read(self, key.name) ?? key.defaultValue
    }

    /// Stores `value` under `key` (with the key's lifetime).
    ///
    /// ```swift
    /// try store.set(.dark, for: PrefsKeys.theme)
    /// ```
    public func set<Value>(_ value: Value, for key: PrefsKey<Value>) throws {
        try write { tx throws in try key.write(&tx, value, key.name, key.expiresAfter) }
    }

    /// Changes the value of `key` atomically and returns the new value: `transform` runs on the value stored
    /// now (the key's default when nothing is stored or it expired), under the writer lock, and its result is
    /// stored (with the key's lifetime, from now) before the lock is released. Updates made at the same time by
    /// other threads, handles and processes are applied one after the other and none is lost, where
    /// `set(store[key] + 1, for: key)` loses them (DataStore's `updateData`).
    ///
    /// ```swift
    /// let launches = try store.update(PrefsKeys.launchCount) { $0 += 1 }
    /// ```
    ///
    /// The transform runs exactly once, under the lock: keep it short (every writer of the store, in every
    /// process, waits for it), and do not write through the store from inside it (that traps). A result equal
    /// to the stored value writes nothing (for a key without a lifetime). If `transform` throws, nothing is
    /// written and the error is rethrown.
    ///
    /// - Throws: what ``value(of:)`` throws for a stored value that cannot be read (the transform does not run
    ///   then, and nothing is written), the transform's error, and the store's write errors.
    @discardableResult
    public func update<Value>(_ key: PrefsKey<Value>, _ transform: (inout Value) throws -> Void) throws -> Value {
        try write { tx throws in
            var updated = try value(of: key)
            try transform(&updated)
            try key.write(&tx, updated, key.name, key.expiresAfter)
            return updated
        }
    }

    /// Removes the stored value of `key`: it reads as its default again.
    ///
    /// ```swift
    /// try store.reset(PrefsKeys.theme)
    /// ```
    public func reset<Value>(_ key: PrefsKey<Value>) throws {
        try removeValue(forKey: key.name)
    }

    /// Calls `callback` with the value of `key` after every change of it, made through this handle or any
    /// other (another process's included). Keep the observation: releasing it stops the callbacks.
    ///
    /// ```swift
    /// let observation = store.observe(PrefsKeys.theme) { applyTheme($0) }
    /// ```
    public func observe<Value>(_ key: PrefsKey<Value>, _ callback: @escaping @Sendable (Value) -> Void)
        -> PrefsObservation
    {
        observe { [weak self] change in
            guard let self, change.keys.contains(key.name) else { return }
            callback(self[key])
        }
    }

    /// The value of `key` now, then after every change of it (another process's included), until the
    /// consuming task is cancelled.
    ///
    /// ```swift
    /// for await theme in store.values(of: PrefsKeys.theme) { applyTheme(theme) }
    /// ```
    public func values<Value>(of key: PrefsKey<Value>) -> AsyncStream<Value> {
        let (stream, continuation) = AsyncStream<Value>.makeStream(bufferingPolicy: .bufferingNewest(16))
        let observation = observe(key) { continuation.yield($0) }
        continuation.yield(self[key])
        // The stream keeps the store (and so its observers) alive until it ends.
        continuation.onTermination = { [self] _ in
            observation.cancel()
            _ = self
        }
        return stream
    }
}
