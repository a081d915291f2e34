public import FoundationEssentials

/// Changes collected by ``PrefsStore/write(_:)`` and committed together.
///
/// Reads see the store as it was when the transaction began (caught up with every process under the
/// writer lock), not the transaction's own changes.
///
/// ```swift
/// try store.write { tx in
///     try tx.set("dark", forKey: "theme")
///     try tx.set(true, forKey: "sidebarExpanded")
/// }
/// ```
public struct PrefsTransaction {
    let store: PrefsStore
    var operations: [TransactionOp] = []

    init(store: PrefsStore) {
        self.store = store
    }

    private mutating func add(_ key: String, _ type: ValueType, _ value: [UInt8], _ ttl: Duration?) throws {
        try ValueCodec.validate(key: key)
        try ValueCodec.validate(length: value.count, key: key)
        operations.append(.set(name: key, type: type, value: value, expiresAt: ValueCodec.expiresAt(ttl)))
    }

    /// Stores a Bool when the transaction commits.
    ///
    /// ```swift
    /// try tx.set(true, forKey: "onboarded")
    /// ```
    public mutating func set(_ value: Bool, forKey key: String, expiresAfter: Duration? = nil) throws {
        try add(key, .bool, ValueCodec.bytes(value), expiresAfter)
    }

    /// Stores an integer (as Int64) when the transaction commits.
    ///
    /// ```swift
    /// try tx.set(3, forKey: "columns")
    /// ```
    public mutating func set(_ value: Int, forKey key: String, expiresAfter: Duration? = nil) throws {
        try add(key, .int64, ValueCodec.bytes(Int64(value)), expiresAfter)
    }

    /// Stores an Int64 when the transaction commits.
    ///
    /// ```swift
    /// try tx.set(Int64(7), forKey: "launchCount")
    /// ```
    public mutating func set(_ value: Int64, forKey key: String, expiresAfter: Duration? = nil) throws {
        try add(key, .int64, ValueCodec.bytes(value), expiresAfter)
    }

    /// Stores a Double when the transaction commits.
    ///
    /// ```swift
    /// try tx.set(1.5, forKey: "zoom")
    /// ```
    public mutating func set(_ value: Double, forKey key: String, expiresAfter: Duration? = nil) throws {
        try add(key, .double, ValueCodec.bytes(value), expiresAfter)
    }

    /// Stores a String when the transaction commits.
    ///
    /// ```swift
    /// try tx.set("dark", forKey: "theme")
    /// ```
    public mutating func set(_ value: String, forKey key: String, expiresAfter: Duration? = nil) throws {
        try add(key, .string, Array(value.utf8), expiresAfter)
    }

    /// Stores bytes when the transaction commits.
    ///
    /// ```swift
    /// try tx.set(Data([0xFF]), forKey: "blob")
    /// ```
    public mutating func set(_ value: Data, forKey key: String, expiresAfter: Duration? = nil) throws {
        try add(key, .bytes, Array(value), expiresAfter)
    }

    /// Stores an array of strings when the transaction commits.
    ///
    /// ```swift
    /// try tx.set(["a", "b"], forKey: "tags")
    /// ```
    public mutating func set(_ value: [String], forKey key: String, expiresAfter: Duration? = nil) throws {
        try add(key, .stringArray, ValueCodec.encode(value), expiresAfter)
    }

    /// Stores an Encodable value as JSON when the transaction commits.
    ///
    /// ```swift
    /// try tx.setCodable(["width": 240], forKey: "layout")
    /// ```
    public mutating func setCodable<T: Encodable>(_ value: T, forKey key: String, expiresAfter: Duration? = nil) throws
    {
        try add(key, .json, Array(try ValueCodec.json(value, key: key)), expiresAfter)
    }

    /// Removes `key` when the transaction commits.
    ///
    /// ```swift
    /// tx.removeValue(forKey: "legacyTheme")
    /// ```
    public mutating func removeValue(forKey key: String) {
        operations.append(.remove(name: key))
    }

    /// Removes every key when the transaction commits; later changes in the same transaction still apply.
    ///
    /// ```swift
    /// tx.removeAll()
    /// try tx.set(1, forKey: "schemaVersion")
    /// ```
    public mutating func removeAll() {
        operations.append(.removeAll)
    }

    /// The Int64 under `key` when the transaction began.
    ///
    /// ```swift
    /// let n = try tx.int64(forKey: "counter") ?? 0
    /// ```
    public func int64(forKey key: String) throws -> Int64? { try store.int64(forKey: key) }

    /// The Bool under `key` when the transaction began.
    ///
    /// ```swift
    /// let on = try tx.bool(forKey: "flag") ?? false
    /// ```
    public func bool(forKey key: String) throws -> Bool? { try store.bool(forKey: key) }

    /// The Double under `key` when the transaction began.
    ///
    /// ```swift
    /// let zoom = try tx.double(forKey: "zoom") ?? 1
    /// ```
    public func double(forKey key: String) throws -> Double? { try store.double(forKey: key) }

    /// The String under `key` when the transaction began.
    ///
    /// ```swift
    /// let theme = try tx.string(forKey: "theme")
    /// ```
    public func string(forKey key: String) throws -> String? { try store.string(forKey: key) }

    /// The bytes under `key` when the transaction began.
    ///
    /// ```swift
    /// let blob = try tx.data(forKey: "blob")
    /// ```
    public func data(forKey key: String) throws -> Data? { try store.data(forKey: key) }

    /// The string array under `key` when the transaction began.
    ///
    /// ```swift
    /// let tags = try tx.strings(forKey: "tags") ?? []
    /// ```
    public func strings(forKey key: String) throws -> [String]? { try store.strings(forKey: key) }

    /// Decodes the JSON under `key` as it was when the transaction began.
    ///
    /// ```swift
    /// let layout = try tx.decode(Layout.self, forKey: "layout")
    /// ```
    public func decode<T: Decodable>(_ type: T.Type, forKey key: String) throws -> T? {
        try store.decode(type, forKey: key)
    }

    /// The JSON bytes under `key` when the transaction began, undecoded (a ``PersistedState`` looks at the
    /// version before it decodes the state).
    func json(forKey key: String) throws -> Data? {
        try store.readFixed(key, .json) { Data($0) }
    }
}

@available(*, unavailable)
extension PrefsTransaction: Sendable {}
