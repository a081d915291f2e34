public import FoundationEssentials
public import Logging

// A `PersistedState` made from a `PrefsKey` (issue 40, point 7). A Codable key's values are a state of version 0; a
// key of the store's own types (`PrefsKey<Int>`...) is read and written as that type, so the state and the key
// (`store[key]`, `vaultctl prefs get`) always agree. Such a key has no versions: a version or migration given with one
// is a compile-time warning (the deprecated overloads below, more specific than the Codable one) and traps.

extension PersistedState where Value: Codable {
    /// The state kept under `key` (its name and default).
    ///
    /// A Codable key's values are this state at version 0, so a state with a higher version and a migration takes
    /// over what the key wrote. A key of one of the store's own types (`PrefsKey<Int>`, `PrefsKey<String>`...) is
    /// read and written as that type: the state and `store[key]` see the same value, and such a key has no
    /// versions (giving it a version or a migration is a compile-time warning, and traps).
    ///
    /// A key's lifetime (`expiresAfter`) holds for the state's writes too: each write starts it again, so setting
    /// an equal value of such a key does write. A value that expires reads as the defaults from the next
    /// ``rehydrate()`` on (an expiry is not a change an observer hears).
    ///
    /// ```swift
    /// let theme = PersistedState(PrefsKeys.theme, store: ui)                  // reads what store[.theme] wrote
    /// let width = PersistedState(PrefsKeys.sidebarWidth, store: ui)           // an Int key: stored as an int
    /// let layout = PersistedState(PrefsKeys.layout, version: 1, store: ui) { old in
    ///     Layout(columns: try old.decode(LayoutV0.self).columns, width: 240)
    /// }
    /// ```
    public convenience init(
        _ key: PrefsKey<Value>, version: Int = 0, store: PrefsStore?, logger: Logger? = nil,
        migrate: (@Sendable (_ stored: StoredState) throws -> Value)? = nil
    ) {
        self.init(stateOf: key, version: version, store: store, logger: logger, migrate: migrate)
    }

    /// The state of `key`: as a state when the key stores one, else as the key's own type (version 0, no migration).
    fileprivate convenience init(
        stateOf key: PrefsKey<Value>, version: Int, store: PrefsStore?, logger: Logger?,
        migrate: (@Sendable (_ stored: StoredState) throws -> Value)?
    ) {
        var native: NativeValue<Value>?
        if !key.storedAsState {
            precondition(
                version == 0 && migrate == nil,
                "PersistedState(\(key.name)): a key of the store's own type (Int, String...) is stored as that type "
                    + "and has no versions; drop the version and migration, or declare the key with a Codable type of "
                    + "the app's")
            native = NativeValue(read: key.read, write: key.write, expiresAfter: key.expiresAfter)
        }
        self.init(
            name: key.name, version: version, defaults: key.defaultValue, store: store, logger: logger,
            migrate: migrate, native: native, lifetime: key.expiresAfter)
    }
}

/// How a state made from a key of the store's own types reads and writes it (the key's own accessors).
struct NativeValue<Value: Sendable>: Sendable {
    let read: @Sendable (PrefsStore, String) throws -> Value?
    let write: @Sendable (inout PrefsTransaction, Value, String, Duration?) throws -> Void
    let expiresAfter: Duration?

    /// Hydration: the stored value, else the defaults and why (`lost`: the store's recovery lost its record).
    func load(
        _ name: String, from store: PrefsStore, defaults: Value, lost: Bool
    ) -> (Value, PersistedState<Value>.Hydration) where Value: Codable {
        do {
            guard let value = try read(store, name) else { return (defaults, lost ? .lost : .absent) }
            return (value, .stored)
        } catch let error as PrefsError where error.code == .typeMismatch {
            return (defaults, .unreadable("the stored value is not of type \(Value.self)"))
        } catch let error as PrefsError {
            return (defaults, .unreadable("the stored value cannot be read (\(error.code): \(error.message))"))
        } catch {
            return (defaults, .unreadable("the stored value cannot be read (\(error))"))
        }
    }
}

extension PersistedState where Value == Bool {
    /// Deprecated, to warn at compile time: a `PrefsKey<Bool>` is stored as that type and has no versions. Without
    /// `version` and `migrate`, the state reads and writes the key's value.
    @available(
        *, deprecated,
        message:
            "a PrefsKey of the store's own type is stored as that type and has no versions: drop version and migrate, and the state reads and writes the key's value"
    )
    public convenience init(
        _ key: PrefsKey<Bool>, version: Int, store: PrefsStore?, logger: Logger? = nil,
        migrate: (@Sendable (_ stored: StoredState) throws -> Value)? = nil
    ) {
        self.init(stateOf: key, version: version, store: store, logger: logger, migrate: migrate)
    }
}

extension PersistedState where Value == Int {
    /// Deprecated, to warn at compile time: a `PrefsKey<Int>` is stored as that type and has no versions. Without
    /// `version` and `migrate`, the state reads and writes the key's value.
    @available(
        *, deprecated,
        message:
            "a PrefsKey of the store's own type is stored as that type and has no versions: drop version and migrate, and the state reads and writes the key's value"
    )
    public convenience init(
        _ key: PrefsKey<Int>, version: Int, store: PrefsStore?, logger: Logger? = nil,
        migrate: (@Sendable (_ stored: StoredState) throws -> Value)? = nil
    ) {
        self.init(stateOf: key, version: version, store: store, logger: logger, migrate: migrate)
    }
}

extension PersistedState where Value == Int64 {
    /// Deprecated, to warn at compile time: a `PrefsKey<Int64>` is stored as that type and has no versions. Without
    /// `version` and `migrate`, the state reads and writes the key's value.
    @available(
        *, deprecated,
        message:
            "a PrefsKey of the store's own type is stored as that type and has no versions: drop version and migrate, and the state reads and writes the key's value"
    )
    public convenience init(
        _ key: PrefsKey<Int64>, version: Int, store: PrefsStore?, logger: Logger? = nil,
        migrate: (@Sendable (_ stored: StoredState) throws -> Value)? = nil
    ) {
        self.init(stateOf: key, version: version, store: store, logger: logger, migrate: migrate)
    }
}

extension PersistedState where Value == Double {
    /// Deprecated, to warn at compile time: a `PrefsKey<Double>` is stored as that type and has no versions. Without
    /// `version` and `migrate`, the state reads and writes the key's value.
    @available(
        *, deprecated,
        message:
            "a PrefsKey of the store's own type is stored as that type and has no versions: drop version and migrate, and the state reads and writes the key's value"
    )
    public convenience init(
        _ key: PrefsKey<Double>, version: Int, store: PrefsStore?, logger: Logger? = nil,
        migrate: (@Sendable (_ stored: StoredState) throws -> Value)? = nil
    ) {
        self.init(stateOf: key, version: version, store: store, logger: logger, migrate: migrate)
    }
}

extension PersistedState where Value == String {
    /// Deprecated, to warn at compile time: a `PrefsKey<String>` is stored as that type and has no versions. Without
    /// `version` and `migrate`, the state reads and writes the key's value.
    @available(
        *, deprecated,
        message:
            "a PrefsKey of the store's own type is stored as that type and has no versions: drop version and migrate, and the state reads and writes the key's value"
    )
    public convenience init(
        _ key: PrefsKey<String>, version: Int, store: PrefsStore?, logger: Logger? = nil,
        migrate: (@Sendable (_ stored: StoredState) throws -> Value)? = nil
    ) {
        self.init(stateOf: key, version: version, store: store, logger: logger, migrate: migrate)
    }
}

extension PersistedState where Value == Data {
    /// Deprecated, to warn at compile time: a `PrefsKey<Data>` is stored as that type and has no versions. Without
    /// `version` and `migrate`, the state reads and writes the key's value.
    @available(
        *, deprecated,
        message:
            "a PrefsKey of the store's own type is stored as that type and has no versions: drop version and migrate, and the state reads and writes the key's value"
    )
    public convenience init(
        _ key: PrefsKey<Data>, version: Int, store: PrefsStore?, logger: Logger? = nil,
        migrate: (@Sendable (_ stored: StoredState) throws -> Value)? = nil
    ) {
        self.init(stateOf: key, version: version, store: store, logger: logger, migrate: migrate)
    }
}

extension PersistedState where Value == [String] {
    /// Deprecated, to warn at compile time: a `PrefsKey<[String]>` is stored as that type and has no versions. Without
    /// `version` and `migrate`, the state reads and writes the key's value.
    @available(
        *, deprecated,
        message:
            "a PrefsKey of the store's own type is stored as that type and has no versions: drop version and migrate, and the state reads and writes the key's value"
    )
    public convenience init(
        _ key: PrefsKey<[String]>, version: Int, store: PrefsStore?, logger: Logger? = nil,
        migrate: (@Sendable (_ stored: StoredState) throws -> Value)? = nil
    ) {
        self.init(stateOf: key, version: version, store: store, logger: logger, migrate: migrate)
    }
}

extension PersistedState where Value == Bool {
    /// Deprecated, to warn at compile time: a `PrefsKey<Bool>` is stored as that type and has no versions to migrate
    /// from. Without `migrate`, the state reads and writes the key's value.
    @available(
        *, deprecated,
        message:
            "a PrefsKey of the store's own type is stored as that type and has no versions: drop the migration, and the state reads and writes the key's value"
    )
    public convenience init(
        _ key: PrefsKey<Bool>, store: PrefsStore?, logger: Logger? = nil,
        migrate: @escaping @Sendable (_ stored: StoredState) throws -> Value
    ) {
        self.init(stateOf: key, version: 0, store: store, logger: logger, migrate: migrate)
    }
}

extension PersistedState where Value == Int {
    /// Deprecated, to warn at compile time: a `PrefsKey<Int>` is stored as that type and has no versions to migrate
    /// from. Without `migrate`, the state reads and writes the key's value.
    @available(
        *, deprecated,
        message:
            "a PrefsKey of the store's own type is stored as that type and has no versions: drop the migration, and the state reads and writes the key's value"
    )
    public convenience init(
        _ key: PrefsKey<Int>, store: PrefsStore?, logger: Logger? = nil,
        migrate: @escaping @Sendable (_ stored: StoredState) throws -> Value
    ) {
        self.init(stateOf: key, version: 0, store: store, logger: logger, migrate: migrate)
    }
}

extension PersistedState where Value == Int64 {
    /// Deprecated, to warn at compile time: a `PrefsKey<Int64>` is stored as that type and has no versions to migrate
    /// from. Without `migrate`, the state reads and writes the key's value.
    @available(
        *, deprecated,
        message:
            "a PrefsKey of the store's own type is stored as that type and has no versions: drop the migration, and the state reads and writes the key's value"
    )
    public convenience init(
        _ key: PrefsKey<Int64>, store: PrefsStore?, logger: Logger? = nil,
        migrate: @escaping @Sendable (_ stored: StoredState) throws -> Value
    ) {
        self.init(stateOf: key, version: 0, store: store, logger: logger, migrate: migrate)
    }
}

extension PersistedState where Value == Double {
    /// Deprecated, to warn at compile time: a `PrefsKey<Double>` is stored as that type and has no versions to migrate
    /// from. Without `migrate`, the state reads and writes the key's value.
    @available(
        *, deprecated,
        message:
            "a PrefsKey of the store's own type is stored as that type and has no versions: drop the migration, and the state reads and writes the key's value"
    )
    public convenience init(
        _ key: PrefsKey<Double>, store: PrefsStore?, logger: Logger? = nil,
        migrate: @escaping @Sendable (_ stored: StoredState) throws -> Value
    ) {
        self.init(stateOf: key, version: 0, store: store, logger: logger, migrate: migrate)
    }
}

extension PersistedState where Value == String {
    /// Deprecated, to warn at compile time: a `PrefsKey<String>` is stored as that type and has no versions to migrate
    /// from. Without `migrate`, the state reads and writes the key's value.
    @available(
        *, deprecated,
        message:
            "a PrefsKey of the store's own type is stored as that type and has no versions: drop the migration, and the state reads and writes the key's value"
    )
    public convenience init(
        _ key: PrefsKey<String>, store: PrefsStore?, logger: Logger? = nil,
        migrate: @escaping @Sendable (_ stored: StoredState) throws -> Value
    ) {
        self.init(stateOf: key, version: 0, store: store, logger: logger, migrate: migrate)
    }
}

extension PersistedState where Value == Data {
    /// Deprecated, to warn at compile time: a `PrefsKey<Data>` is stored as that type and has no versions to migrate
    /// from. Without `migrate`, the state reads and writes the key's value.
    @available(
        *, deprecated,
        message:
            "a PrefsKey of the store's own type is stored as that type and has no versions: drop the migration, and the state reads and writes the key's value"
    )
    public convenience init(
        _ key: PrefsKey<Data>, store: PrefsStore?, logger: Logger? = nil,
        migrate: @escaping @Sendable (_ stored: StoredState) throws -> Value
    ) {
        self.init(stateOf: key, version: 0, store: store, logger: logger, migrate: migrate)
    }
}

extension PersistedState where Value == [String] {
    /// Deprecated, to warn at compile time: a `PrefsKey<[String]>` is stored as that type and has no versions to migrate
    /// from. Without `migrate`, the state reads and writes the key's value.
    @available(
        *, deprecated,
        message:
            "a PrefsKey of the store's own type is stored as that type and has no versions: drop the migration, and the state reads and writes the key's value"
    )
    public convenience init(
        _ key: PrefsKey<[String]>, store: PrefsStore?, logger: Logger? = nil,
        migrate: @escaping @Sendable (_ stored: StoredState) throws -> Value
    ) {
        self.init(stateOf: key, version: 0, store: store, logger: logger, migrate: migrate)
    }
}
