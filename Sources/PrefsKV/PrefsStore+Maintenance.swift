import SystemLayer

extension PrefsStore {
    /// Flushes the store file to the disk (`fdatasync`): every write made before survives a power loss. After an
    /// automatic compaction of a `.buffered` store (which does not wait for the disk) it also makes the new file's
    /// name durable and removes the previous image kept until then (`<id>.prefs.prev`). After a flush of the file
    /// failed (a call threw ``PrefsError/Code/io``), it first writes the store into a new file and flushes that: a
    /// later flush of the same file could succeed without what the failed one lost.
    ///
    /// ```swift
    /// try store.set(token, forKey: "session")
    /// try store.sync()
    /// ```
    public func sync() throws {
        try engine.withLock { e throws(PrefsError) in try e.sync() }
    }

    /// Rewrites the live records into a new file (written, flushed, renamed over the old one, directory
    /// flushed) sized at most twice the live bytes plus the header page. Other handles and processes pick
    /// the new file up on their next access. Runs on its own after writes that leave garbage at half the
    /// log or more (see ``Configuration/autoCompactionThreshold``). A failure (a full disk, a flush of the new
    /// file that fails) leaves the store as it was; a failed flush of the directory throws ``PrefsError/Code/io``
    /// with the new file in place, its name's durability unknown until the next synchronous write or ``sync()``
    /// flushes the directory again.
    ///
    /// ```swift
    /// try store.compact()
    /// ```
    public func compact() throws {
        checkNotInsideTransaction()
        let deliver = try gate.withLock { _ throws(PrefsError) in
            try engine.withLock { e throws(PrefsError) in
                try e.beginWrite(replacesFile: true)
                defer { e.endWrite() }
                try e.compactLocked()
                return e.hasPendingEvents
            }
        }
        if deliver { deliverEvents() }
    }

    /// Sizes and counts of the store.
    ///
    /// ```swift
    /// let stats = try store.stats()
    /// print(stats.garbageRatio)
    /// ```
    public func stats() throws -> PrefsStats {
        try read { e throws(PrefsError) in try e.stats() }
    }

    /// Scans the whole log (and, in a sealed store, opens every sealed value) and reports any damage.
    /// Changes nothing.
    ///
    /// ```swift
    /// let report = try store.verify()
    /// assert(report.isClean)
    /// ```
    public func verify() throws -> PrefsVerifyReport {
        try read { e throws(PrefsError) in try e.verify() }
    }

    /// Scans the store file `<directory>/<id>.prefs` without opening the store: takes no lock (but, while a
    /// `.synchronous` write is in flight or was left past the log end, the pending byte of the file, shared, which
    /// waits for that write's writer: FileProtocols.md, "Sharing between processes"), never creates, recovers or
    /// modifies anything. Without a sealer, a sealed store's records are checked by checksum only. Throws for an
    /// absent file or an unreadable header.
    ///
    /// ```swift
    /// let report = try PrefsStore.verify(id: "ui", directory: dir)
    /// for damage in report.damage { print(damage) }
    /// ```
    public static func verify(
        id: String, directory: String = PrefsStore.defaultDirectory, sealer: (any PrefsSealer)? = nil
    ) throws -> PrefsVerifyReport {
        try StorePaths.validate(storeID: id)
        let paths = StorePaths(id: id, directory: directory)
        let snapshot = try StoreLog.readOnlySnapshot(
            path: paths.data, sealer: sealer, checkSealer: sealer != nil, headerCopy: true)
        return Verify.report(on: snapshot, sealer: sealer, path: paths.data)
    }

    /// Repairs the store file `<directory>/<id>.prefs` and returns what was done, or nil when it was intact
    /// (nothing is written then). Ends in a store that opens:
    ///
    /// - a damaged log or header page is salvaged as an open under ``RecoveryPolicy/salvage`` does (every record
    ///   that verifies is kept, the original copied aside byte for byte);
    /// - a file no copy of whose header verifies (zeroed pages, truncated inside its header, not a store at all) is
    ///   rebuilt from the records of its body that verify, as ``UnreadableFilePolicy/quarantineAndRebuild`` does:
    ///   a plain store's by checksum, a sealed store's (give its sealer in `configuration`) by authenticating them
    ///   with the key; with nothing left, the store is empty and the report says 0 kept. The original is kept
    ///   read-only beside it (``PrefsRecoveryReport/quarantinePath``).
    ///
    /// What still throws, the file untouched: an absent file (``PrefsError/Code/notFound``), a sealed store
    /// without its sealer or with a wrong key, a sealed store none of whose records authenticates (its identity
    /// went with both header copies: a wrong key cannot be told from that), a newer format, a read-only directory,
    /// denied permissions.
    ///
    /// ```swift
    /// if let report = try PrefsStore.repair(id: "ui", directory: dir) {
    ///     print("kept \(report.recordsKept), lost \(report.recordsLost); original at \(report.quarantinePath!)")
    /// }
    /// ```
    public static func repair(
        id: String, directory: String = PrefsStore.defaultDirectory, configuration: Configuration = Configuration()
    ) throws -> PrefsRecoveryReport? {
        try StorePaths.validate(storeID: id)
        let paths = StorePaths(id: id, directory: directory)
        if case .failure(let e) = Sys.lstat(paths.data), e == .noEntry {
            throw PrefsError(.notFound, "there is no store file to repair", path: paths.data)
        }
        var configuration = configuration
        configuration.recovery = .salvage
        configuration.unreadableFile = .quarantineAndRebuild
        let store = try PrefsStore(id: id, directory: directory, configuration: configuration)
        // An open from the persisted index reads the table and the records after it: damage before the table is
        // found only when something reads every record (verify, export). A repair does, so that it answers what
        // they find, and salvages it.
        try store.engine.withLock { e throws(PrefsError) in try e.readWholeLog() }
        return store.lastRecovery
    }

    /// Writes a compacted image of the store to `path` atomically (temporary file, flush, rename, directory
    /// flush). Restore it with ``restore(from:)``.
    ///
    /// ```swift
    /// try store.backup(to: "/home/me/ui-backup.prefs")
    /// ```
    public func backup(to path: String) throws {
        try read { e throws(PrefsError) in try e.backup(to: path) }
    }

    /// Replaces the store's contents with a backup made by ``backup(to:)``, after checking every record of
    /// it; a damaged backup, or one sealed with another key, is refused and the store is left as it was.
    /// The swap is atomic; other handles and processes pick it up on their next access.
    ///
    /// ```swift
    /// try store.restore(from: "/home/me/ui-backup.prefs")
    /// ```
    public func restore(from path: String) throws {
        checkNotInsideTransaction()
        let deliver = try gate.withLock { _ throws(PrefsError) in
            try engine.withLock { e throws(PrefsError) in
                try e.beginWrite(replacesFile: true)
                defer { e.endWrite() }
                try e.restore(from: path)
                return e.hasPendingEvents
            }
        }
        if deliver { deliverEvents() }
    }

    /// Re-seals every value with `sealer` (or stores them in clear when nil) in a new image with the new key
    /// check, swapped in atomically. Other handles must reopen with the new sealer.
    ///
    /// ```swift
    /// try vault.rekey(to: newSealer)
    /// ```
    public func rekey(to sealer: (any PrefsSealer)?) throws {
        checkNotInsideTransaction()
        try gate.withLock { _ throws(PrefsError) in
            try engine.withLock { e throws(PrefsError) in
                try e.beginWrite()
                defer { e.endWrite() }
                try e.rekey(to: sealer)
            }
        }
    }
}
