/// Keys whose values changed, delivered to observers (``PrefsStore/observe(_:)``, ``PrefsStore/changes()``).
///
/// ```swift
/// for await change in store.changes() where change.keys.contains("theme") {
///     applyTheme(try store.string(forKey: "theme"))
/// }
/// ```
public struct PrefsChange: Sendable, Equatable {
    /// The changed keys, sorted by their UTF-8 bytes (code point order). A `removeAll` lists every key it removed.
    public var keys: [String]
    /// True when the change was made through another handle or process, false when through this handle.
    public var isExternal: Bool

    /// A change of `keys`.
    ///
    /// ```swift
    /// let change = PrefsChange(keys: ["theme"], isExternal: false)
    /// ```
    public init(keys: [String], isExternal: Bool) {
        self.keys = keys
        self.isExternal = isExternal
    }
}

/// Sizes and counts of a store (``PrefsStore/stats()``).
///
/// ```swift
/// let stats = try store.stats()
/// print("\(stats.liveBytes) live of \(stats.fileBytes), garbage \(stats.garbageRatio)")
/// ```
public struct PrefsStats: Sendable, Equatable {
    /// Live keys (unexpired).
    public var keyCount: Int
    /// Bytes of the records holding live values, and of the newest persisted index (a table of the keys that the
    /// next open reads instead of the whole log, in a store of at least 256 keys): what a compacted log occupies.
    public var liveBytes: Int
    /// Bytes of the log (committed records, live or not).
    public var logBytes: Int
    /// Size of the file, header page and preallocated space included.
    public var fileBytes: Int
    /// Records in the log, commit records included.
    public var recordCount: Int
    /// `(logBytes - liveBytes) / logBytes`, 0 for an empty log.
    public var garbageRatio: Double
    /// Incremented by every compaction, recovery, restore and rekey.
    public var generation: UInt64
    /// The last recovery of this handle, if its open (or a reload) found damage.
    public var lastRecovery: PrefsRecoveryReport?
}
