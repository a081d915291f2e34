import SystemLayer

/// What the header of a store says, read without its key, without a lock and without changing it: for tools and
/// for the vault, which must learn which key a sealed store needs before it can open it. Reading it costs one
/// `pread` of the header page; what needs the log (live keys, damage) is ``scanLog()``, on demand.
///
/// ```swift
/// if let inspection = try PrefsStore.inspect(id: "vault", directory: dir), inspection.isSealed {
///     let key = try keyStore.load(keyCheck: inspection.keyCheck)
/// }
/// ```
package struct PrefsInspection: Sendable, Equatable {
    /// The data file.
    package var path: String
    /// Whether values and key names are sealed.
    package var isSealed: Bool
    /// The store's random UUID (kept across compaction and rekey).
    package var storeUUID: [UInt8]
    /// The key check the sealer wrote at creation (empty for a plain store).
    package var keyCheck: [UInt8]
    /// Number of compactions, restores and rekeys the file has seen.
    package var generation: UInt64
    /// Creation time, milliseconds since the Unix epoch.
    package var createdAt: Int64
    /// Bytes of the data file.
    package var fileBytes: Int
    /// Whether every record is authenticated (format version 2 and later: a sealed store written since record
    /// authentication; from version 6 a set record by its value's seal, any other by an authenticator); false for a
    /// plain store and a sealed store of version 1.
    package var authenticatesRecords = false
}

/// What a scan of a store's log finds without its key (``PrefsInspection/scanLog()``).
///
/// ```swift
/// let scan = try PrefsStore.inspect(id: "ui", directory: dir)?.scanLog()
/// print(scan?.liveKeyCount ?? 0)
/// ```
package struct PrefsLogScan: Sendable, Equatable {
    /// Live (not deleted, not expired) keys, counted by checksum alone.
    package var liveKeyCount: Int
    /// Damaged ranges found by the scan (empty when clean).
    package var damage: [PrefsDamage]
}

extension PrefsStore {
    /// Reads the header of the store `id` without a sealer, without a lock and without creating, recovering
    /// or modifying anything. The log is not read (see ``PrefsInspection/scanLog()``).
    ///
    /// ```swift
    /// let inspection = try PrefsStore.inspect(id: "ui", directory: dir)
    /// ```
    ///
    /// - Returns: nil when the store's data file does not exist.
    /// - Throws: for a file that is not a store, a newer format or an unreadable header.
    package static func inspect(
        id: String, directory: String = PrefsStore.defaultDirectory
    ) throws -> PrefsInspection? {
        try StorePaths.validate(storeID: id)
        let paths = StorePaths(id: id, directory: directory)
        let fd: Int32
        switch Sys.open(paths.data, .readOnly) {
        case .success(let opened): fd = opened
        case .failure(let error) where error == .noEntry: return nil
        case .failure(let error): throw PrefsError.system(error, "open", "cannot open the store file", path: paths.data)
        }
        defer { Sys.close(fd) }
        let header = try StoreLog.readHeader(fd: fd, path: paths.data, sealer: nil, checkSealer: false)
        let size = try Sys.fstat(fd).orThrow("fstat", "cannot inspect the store file", path: paths.data).size
        return PrefsInspection(
            path: paths.data, isSealed: header.isEncrypted, storeUUID: header.uuid.bytes, keyCheck: header.keyCheck,
            generation: header.generation, createdAt: header.createdAt, fileBytes: size,
            authenticatesRecords: header.authenticatesRecords)
    }
}

extension PrefsInspection {
    /// Maps the inspected file and scans its whole log, as an open would, without a sealer, a lock or any change:
    /// a sealed store's records are checked by checksum alone.
    ///
    /// ```swift
    /// let live = try inspection.scanLog().liveKeyCount
    /// ```
    ///
    /// - Throws: when the file can no longer be opened, or its header no longer reads.
    package func scanLog() throws -> PrefsLogScan {
        let snapshot = try StoreLog.readOnlySnapshot(path: path, sealer: nil, checkSealer: false, headerCopy: false)
        let now = Sys.nowMilliseconds()
        return PrefsLogScan(
            liveKeyCount: snapshot.index.values.filter { !$0.isExpired(now: now) }.count, damage: snapshot.damage)
    }
}

extension PrefsStore {
    /// Passes the bytes stored under `key` to `body` without copying them into a `Data`: for a sealed store the
    /// plaintext stays in private memory wiped after `body` returns, or, with `Configuration.cachesPlaintext`, in the
    /// plaintext cache.
    ///
    /// - Returns: nil when the key is absent or expired.
    package func withBytes<R: Sendable>(forKey key: String, _ body: (UnsafeRawBufferPointer) -> R) throws -> R? {
        try readFixed(key, .bytes, body)
    }

    /// Stores `bytes` under `key` as `set(_: Data, forKey:)` does, from a buffer the caller
    /// owns (and may wipe afterwards).
    package func setBytes(_ bytes: UnsafeRawBufferPointer, forKey key: String) throws {
        try writeOne(key, .bytes, nil, length: bytes.count) { out in
            if !bytes.isEmpty { out.copyMemory(from: bytes) }
        }
    }
}
