// The store engine: the coordinator of one handle's seams. Lives inside `PrefsStore`'s Mutex: nothing here is
// thread-safe.
//
//   PrefsStore ─> Engine ─┬─> RecordCodec (plain | sealed): index keys, disk keys, framing, associated data
//                         ├─> StoreLog: mapping, log end, sequence, index, append, publish, catch-up
//                         ├─> images: Compaction, Recovery, Backup, Rekey, Verify (on the log)
//                         └─> StoreLock: lock file, presence and open locks, lock page, writer lock
//
// Each call enters each seam once, going down; the engine keeps what belongs to the handle: its configuration,
// why it cannot write, the last recovery report, and the events (changes, log lines) it owes the caller.
// Documentation/Architecture.md draws the layers.
import Logging
import SystemLayer

// @unchecked Sendable: every access goes through `PrefsStore.engine`, a Mutex; the conformance only lets
// closures of the calling task be passed into it under that lock.
final class Engine: @unchecked Sendable {
    let paths: StorePaths
    let configuration: PrefsStore.Configuration
    let lock: StoreLock
    let log: StoreLog
    /// Why this handle cannot write (the errno of the failed writable open), nil when it can.
    let readOnlyCause: Errno?

    // Every access to this state happens under `PrefsStore.engine`'s Mutex, one thread at a time, so runtime
    // exclusivity checks (a measurable share of a warm read) cannot find anything the lock does not exclude.

    @exclusivity(unchecked) var codec: RecordCodec {
        didSet { plaintexts = RecordCodec.plaintexts(of: codec) }
    }
    /// The codec's plaintext cache, when the app opted in (`Configuration.cachesPlaintext`), unretained: the codec
    /// holds it. A cached read then retains nothing (each retain cost a tenth of the read).
    @exclusivity(unchecked) private var plaintexts: Unmanaged<PlaintextCache>?
    @exclusivity(unchecked) var lastRecovery: PrefsRecoveryReport?
    /// Set while someone observes: catch-ups then work out which keys changed.
    @exclusivity(unchecked) var wantsChanges = false
    @exclusivity(unchecked) var pendingChanges: [PrefsChange] = []
    @exclusivity(unchecked) var pendingLog: [(level: Logger.Level, message: Logger.Message)] = []
    @exclusivity(unchecked) var autoCompactionBlockedBelow = 0
    /// `IndexTable.tail`, read once (a static is a lazy global, checked at each access).
    let indexTail = IndexTable.tail
    /// Set when reading the whole log failed (the file is damaged and the store must not salvage): a handle that
    /// knows its file is damaged appends nothing to it (Engine+PersistedIndex.swift).
    @exclusivity(unchecked) var wholeLogFailed = false

    @inline(__always) var hasPendingEvents: Bool { !pendingChanges.isEmpty || !pendingLog.isEmpty }
    var sealer: (any PrefsSealer)? { codec.sealer }
    var multiProcess: Bool { lock.multiProcess }
    /// New images are marked watched while this handle's observers rely on other processes' inotify events.
    var watchesImages: Bool { wantsChanges && multiProcess }

    private init(
        paths: StorePaths, configuration: PrefsStore.Configuration, lock: StoreLock, readOnlyCause: Errno?,
        snapshot: consuming Snapshot
    ) {
        self.paths = paths
        self.configuration = configuration
        self.lock = lock
        self.readOnlyCause = readOnlyCause
        codec = RecordCodec(sealer: configuration.sealer, cachesPlaintext: configuration.cachesPlaintext)
        plaintexts = RecordCodec.plaintexts(of: codec)
        log = StoreLog(paths: paths, configuration: configuration, snapshot: snapshot)
    }

    // MARK: Open

    /// Opens (creating when absent) the store `id` in `directory`.
    static func open(
        id: String, directory: String, configuration: PrefsStore.Configuration
    ) throws(PrefsError) -> Engine {
        try StorePaths.validate(storeID: id)
        try configuration.validate()
        let paths = StorePaths(id: id, directory: directory)
        let lock = try StoreLock.acquire(paths: paths, for: .open(configuration.sharing, readOnly: configuration.readOnly))
        var readOnlyCause = lock.readOnlyCause
        // What the open starts from, and which recovery it needs: Recovery.snapshotForOpen.
        // (No `Snapshot?` here: an optional snapshot is copied and destroyed through its type metadata. And an
        // array, not an optional, of reports: destroying a `PrefsRecoveryReport?` instantiates its metadata at run
        // time, in every fresh process's first open; an array is one release.)
        let snapshot: Snapshot
        var pageLocked = false
        var setAside: [PrefsRecoveryReport] = []
        var mustSalvage = false
        do throws(PrefsError) {
            snapshot = try Recovery.snapshotForOpen(
                paths: paths, lock: lock, configuration: configuration, readOnlyCause: &readOnlyCause,
                pageLocked: &pageLocked, setAside: &setAside, mustSalvage: &mustSalvage)
        } catch {
            lock.endOpenLock(pageLocked: pageLocked)
            throw error
        }
        // The snapshot moves into the engine, its damage (nearly always none) out of it first. (A copy of the
        // snapshot went through its fields' type metadata, instantiated at a fresh process's first open.)
        let damage = snapshot.damage
        let engine = Engine(
            paths: paths, configuration: configuration, lock: lock, readOnlyCause: readOnlyCause, snapshot: snapshot)
        // A handle without a lock page holds its writer lock already: it is the open lock (flock).
        lock.holdsWriterLock = true
        defer { lock.endOpenLock(pageLocked: pageLocked) }
        if let report = setAside.first {
            engine.lastRecovery = report
            engine.pendingLog.append((.error, "\(report.description)"))
        }
        if !damage.isEmpty {
            try engine.recover(
                damage: damage, recordsKept: engine.log.recordCount,
                policy: mustSalvage ? .salvage : configuration.recovery)
            // The report an app reads is about the file it had: the one set aside (both are logged).
            if let report = setAside.first { engine.lastRecovery = report }
        }
        // A synchronous write its writer left past the published log end, read by this open under the writer lock:
        // published now, so that later opens read the file without waiting for it (`StoreLog.resolvePending`).
        if engine.log.adoptedLeftWrite, pageLocked || lock.lockPage == nil, engine.log.file.writable,
            readOnlyCause == nil
        {
            _ = try engine.log.resolvePending()
        }
        return engine
    }

    // MARK: Reading

    /// The index key for a key name: the name itself, or the hex of the sealer's tag.
    @inline(__always)
    func indexKey(forName name: String) -> String { codec.indexKey(forName: name) }

    /// The live (unexpired) entry for an index key. A handle that opened from a persisted index looks a key it
    /// has not seen up in the table (out of line).
    @inline(__always)
    func liveEntry(_ key: String) throws(PrefsError) -> Entry? {
        if let entry = log.index[key] { return entry.isExpired(now: Sys.nowMilliseconds()) ? nil : entry }
        guard log.table != nil else { return nil }
        return try liveEntryFromTable(key)
    }

    /// The live entry of the key `name`. Through a sealer whose tags are cheap, the index is searched with the
    /// index key written on the stack; a `String` of it is made only when the persisted table must be asked.
    @inline(__always)
    func liveEntry(forName name: String) throws(PrefsError) -> Entry? {
        guard case .sealed(let sealed) = codec else { return try liveEntry(name) }
        // A name the plaintext cache holds: its index key without the sealer's tag.
        if let cache = sealed.plaintexts, let key = cache.indexKey(forName: name) { return try liveEntry(key) }
        guard !sealed.cachesIndexKeys else { return try liveEntry(sealed.indexKey(forName: name)) }
        let log = self.log
        if let entry = sealed.withIndexKeyBytes(forName: name, { log.index.entry(utf8: $0) }) {
            return entry.isExpired(now: Sys.nowMilliseconds()) ? nil : entry
        }
        guard log.table != nil else { return nil }
        return try liveEntryFromTable(sealed.indexKey(forName: name))
    }

    /// `decode` of the value of `name`, of `type`, from the plaintext cache when the handle keeps one and the value
    /// there is still the store's (`PlaintextCache.read`); nil sends the read the usual way. Inlined (out of line, a
    /// cached get cost 9% more); a read of a store without the cache tests `Configuration.cachesPlaintext` only.
    @inline(__always)
    func readCached<R>(_ name: String, type: ValueType, _ decode: (UnsafeRawBufferPointer) -> R?) -> R? {
        guard let plaintexts else { return nil }
        let log = self.log
        return plaintexts._withUnsafeGuaranteedRef { $0.read(name, type: type, in: log, decode) }
    }

    /// Passes the plain value bytes of `entry` to `body`: straight from the mapping, or opened by the sealer.
    @inline(__always)
    func withValue<R>(
        of entry: Entry, name: String, _ body: (UnsafeRawBufferPointer) throws(PrefsError) -> R
    ) throws(PrefsError) -> R {
        if !entry.sealed {
            // The plain read, checked after the bytes were used (`MappedFile.withValue(of:)`); the error is built
            // from the engine's own paths, so nothing needs to be retained across the read.
            guard let result = try log.file.withValue(of: entry, body) else {
                throw StoreLog.changedUnderneath(path: paths.data)
            }
            return result
        }
        return try codec.withSealedValue(of: entry, name: name, in: log, body)
    }

    /// The error of a value that its type cannot decode, judged as a failure inside the read would be: a sealed
    /// record that changed underneath (no longer intact, or the file's identity changed) is `changedUnderneath`, so
    /// the read reopens the file and runs again; otherwise `corrupted`. (A plain read was checked after its bytes
    /// were used: what it decoded is what the record holds.) Out of line: the read path keeps nothing alive for it.
    @inline(never)
    func invalidEncoding(of entry: Entry, key: String) -> PrefsError {
        let error = PrefsError(
            .corrupted, "the \(entry.type.name) value under key \"\(key)\" has an invalid encoding", path: paths.data)
        guard entry.sealed else { return error }
        do throws(PrefsError) {
            try log.checkingUnderneath(entry) { () throws(PrefsError) in throw error }
            return error
        } catch {
            return error
        }
    }

    /// The name and plain value bytes of an entry.
    func plainEntry(_ entry: Entry) throws(PrefsError) -> (String, [UInt8]) {
        try codec.plainEntry(entry, in: log)
    }

    /// The name of an entry, opening a sealed record the first time.
    func name(forIndexKey key: String) throws(PrefsError) -> String? {
        try codec.name(forIndexKey: key, in: log)
    }

    /// Names of live keys (unexpired), sorted.
    func liveNames() throws(PrefsError) -> [String] {
        try readWholeLog()
        return codec.liveNames(in: log)
    }

    // MARK: Writing

    /// Takes the writer lock (multi-process) and reads what other handles appended since. A synchronous handle whose
    /// file failed a flush writes it anew first (`rewriteAfterFailedFlush`), unless the caller `replacesFile` with a
    /// flushed image of its own (`compact()`, whose copy checks every record of such a file too, and `restore`, which
    /// reads a backup instead).
    func beginWrite(replacesFile: Bool = false) throws(PrefsError) {
        guard log.file.writable, readOnlyCause == nil else { throw readOnlyError }
        if multiProcess, try lock.lockWriter() { noteDeadWriter() }
        lock.holdsWriterLock = true
        do throws(PrefsError) {
            try followIfUnlinked()
            try catchUpLocked()
            guard log.file.writable else { throw readOnlyError }
            if wholeLogFailed { try readWholeLog() }
            // A synchronous write into an image left unflushed removes its base (`releaseBaseIfNeeded`): a handle
            // that opened it from its persisted table reads all of it first, so that damage a power loss left
            // there is found, and recovered from the base, while the base is still there.
            if log.synchronous, log.table != nil, log.header.baseGeneration != nil, log.baseFileExists {
                try readWholeLog()
            }
            if log.synchronous, log.file.flushFailed, !replacesFile { try rewriteAfterFailedFlush() }
        } catch {
            endWrite()
            throw error
        }
    }

    func endWrite() {
        guard lock.holdsWriterLock else { return }
        lock.holdsWriterLock = false
        if multiProcess { lock.unlockWriter() }
    }

    /// Writes one value, under the writer lock, unless it equals the current one (compare-before-set: then
    /// nothing is written). A plain store appends it in place as a single committed record; a sealed one seals
    /// it through a one-change commit.
    @inline(__always)
    func set(
        name: String, type: ValueType, expiresAt: Int64, valueLength: Int, fill: (UnsafeMutableRawBufferPointer) -> Void
    ) throws(PrefsError) {
        guard case .plain = codec else {
            try setSealed(name: name, type: type, expiresAt: expiresAt, valueLength: valueLength, fill: fill)
            return
        }
        try lookUp(name)
        if log.holds(name, type: type, expiresAt: expiresAt, valueLength: valueLength, fill: fill) { return }
        var utf8Name = name
        let published = log.knownEndWord
        do throws(PrefsError) {
            try typed {
                try utf8Name.withUTF8 { key in
                    try log.appendSet(
                        name: name, key: UnsafeRawBufferPointer(key), type: type, expiresAt: expiresAt,
                        valueLength: valueLength, fill: fill)
                }
            }
        } catch {
            throw queueIfPublished(error, since: published, [name])
        }
        if wantsChanges { pendingChanges.append(PrefsChange(keys: [name], isExternal: false)) }
        afterWrite()
    }

    /// A sealed store's single value, through its codec (`SealedRecordCodec.set`): the tag is computed once, and
    /// used for the lookup and the record.
    private func setSealed(
        name: String, type: ValueType, expiresAt: Int64, valueLength: Int, fill: (UnsafeMutableRawBufferPointer) -> Void
    ) throws(PrefsError) {
        guard case .sealed(let sealed) = codec else { preconditionFailure("setSealed on a plain store") }
        let published = log.knownEndWord
        let wrote: Bool
        do throws(PrefsError) {
            wrote = try sealed.withTagAndIndexKey(ofName: name) { tag, indexKey throws(PrefsError) -> Bool in
                try lookUp(indexKey)
                return try sealed.set(
                    name: name, indexKey: indexKey, tag: tag, type: type, expiresAt: expiresAt,
                    valueLength: valueLength, in: log, learnsName: wantsChanges, fill: fill)
            }
        } catch {
            throw queueIfPublished(error, since: published, [name])
        }
        guard wrote else { return }
        if wantsChanges { pendingChanges.append(PrefsChange(keys: [name], isExternal: false)) }
        afterWrite()
    }

    /// Commits a transaction's changes: one record with the commit flag for a single change, otherwise the
    /// changes followed by a commit record, published together. Unchanged values write nothing.
    func commit(_ ops: [TransactionOp]) throws(PrefsError) {
        precondition(lock.holdsWriterLock, "commit without the writer lock")
        try readWholeLog()
        let plan = try TransactionPlan(ops, log: log, codec: codec, collectsChanges: wantsChanges)
        guard !plan.records.isEmpty else { return }
        let published = log.knownEndWord
        do throws(PrefsError) {
            try plan.write(log: log, codec: codec, learnsNames: wantsChanges)
        } catch {
            throw queueIfPublished(error, since: published, plan.changed)
        }
        if wantsChanges && !plan.changed.isEmpty {
            pendingChanges.append(PrefsChange(keys: KeyIndex.sortedUnique(plan.changed), isExternal: false))
        }
        afterWrite()
    }

    /// After a write: compacts when that is due, otherwise appends an index record when enough records were
    /// written since the last one.
    @inline(__always)
    private func afterWrite() {
        maybeCompactAutomatically()
        if log.tailRecords >= indexTail { maybeWriteIndex() }
    }

    // MARK: Images

    /// Under the writer lock: compacts the log into a new image (Compaction.swift); `deferred`: without waiting
    /// for the disk, the previous image kept as the store's base until the next `sync()`.
    ///
    /// A file whose flush failed (`MappedFile.flushFailed`) may have lost pages: its copy checks every record
    /// (`StoreLog.compact`), and when one no longer verifies the file is read again whole and recovered as any damage
    /// is (a new file), then compacted only if it is still that file.
    func compactLocked(threshold: Int? = nil, deferred: Bool = false) throws(PrefsError) {
        guard log.file.writable else { throw readOnlyError }
        try readWholeLog()
        let expiredDropped: Bool
        do throws(PrefsError) {
            expiredDropped = try log.compact(threshold: threshold, watched: watchesImages, deferred: deferred)
        } catch where error.code == .changedUnderneath && log.file.flushFailed {
            try reload(lazy: false)
            guard log.file.flushFailed else { return }
            expiredDropped = try log.compact(threshold: threshold, watched: watchesImages, deferred: deferred)
        }
        if expiredDropped {
            let index = log.index
            codec.retainNames { index[$0] != nil }
        }
        autoCompactionBlockedBelow = 0
        // `compact()` promises a durable image: one whose name could not be flushed is in place (every handle reads
        // it) and throws. (An automatic compaction does not: the next synchronous write or sync() flushes the
        // directory again.)
        if threshold == nil, !deferred, let failure = log.directoryFlushFailure { throw failure }
    }

    /// After a write: compacts when garbage is at least half the log and the log has reached three quarters
    /// of the configured threshold. A compaction sizes the new file at least at the threshold, so a store
    /// whose live data is under 3/8 of the threshold compacts before its file needs to grow: its file stays at
    /// the threshold; a larger store's image has room beyond twice its live data and index record (a quarter of the
    /// live data, or a page when that trigger is beyond `StoreLog.roomLimit` thresholds), so that it too compacts
    /// before its file grows (`StoreLog.compact`, `triggerRoom`). A failure is logged, not thrown (the write itself
    /// succeeded), and not retried until the log has grown by half again.
    func maybeCompactAutomatically() {
        let knownEnd = log.knownEnd
        guard let threshold = configuration.autoCompactionThreshold, knownEnd >= autoCompactionBlockedBelow
        else { return }
        let length = knownEnd - log.header.firstRecordOffset
        guard length > 0, length >= threshold / 4 * 3, (length - log.liveBytes - log.indexBytes) * 2 >= length
        else { return }
        do throws(PrefsError) {
            // A buffered store promises power-loss durability up to the last sync() only: its automatic
            // compactions do not wait for the disk (FileProtocols.md, "Compaction").
            try compactLocked(threshold: threshold, deferred: !log.synchronous)
        } catch {
            autoCompactionBlockedBelow = knownEnd + length / 2
            pendingLog.append(
                (.warning, "automatic compaction of \(paths.data) failed; the store is intact: \(error.message)"))
        }
    }

    /// Acts on damage found by a scan (the snapshot is already adopted, holding what verified): Recovery.swift
    /// decides how (`Recovery.act`).
    func recover(
        damage: [PrefsDamage], recordsKept: Int, policy: PrefsStore.RecoveryPolicy? = nil
    ) throws(PrefsError) {
        let report = try Recovery.act(
            on: damage, in: log, recordsKept: recordsKept, policy: policy ?? configuration.recovery,
            watched: watchesImages, logLines: &pendingLog)
        // (The names of keys the recovery lost are kept: `reload` reports them to observers, then forgets them.)
        autoCompactionBlockedBelow = 0
        lastRecovery = report
        pendingLog.append((.error, "\(report.description)"))
    }

    /// Under the writer lock: replaces the store with a checked copy of a backup (Backup.swift).
    func restore(from source: String) throws(PrefsError) {
        guard log.file.writable else { throw readOnlyError }
        let old = (file: log.file, index: log.index)
        try log.restore(from: source, sealer: sealer, watched: watchesImages)
        autoCompactionBlockedBelow = 0
        if wantsChanges { noteChanges(from: old.file, oldIndex: old.index, isExternal: false) }
        // After the changes, which name keys the backup lacks by the names learned for them. (A name learned for
        // an index key stays right: the restored store has the same sealer, so the same tag for the same name.)
        let index = log.index
        codec.retainNames { index[$0] != nil }
    }

    /// Under the writer lock: re-seals every live value with `newSealer` (Rekey.swift).
    func rekey(to newSealer: (any PrefsSealer)?) throws(PrefsError) {
        guard log.file.writable else { throw readOnlyError }
        // Its values are read from the file: one whose flush failed is written anew first, every record checked.
        if log.file.flushFailed { try rewriteAfterFailedFlush() }
        try readWholeLog()
        let (image, header) = try Rekey.image(of: log, codec: codec, to: newSealer, watched: watchesImages)
        let oldSealer = sealer
        use(sealer: newSealer)
        do throws(PrefsError) {
            try log.install(image, header: header)
        } catch {
            use(sealer: oldSealer)
            throw error
        }
        autoCompactionBlockedBelow = 0
    }

    /// The one place the handle's sealer is set after its open: the codec (index keys, sealed values) and the log
    /// (record authentication) use the same one.
    private func use(sealer: (any PrefsSealer)?) {
        codec = RecordCodec(sealer: sealer, cachesPlaintext: configuration.cachesPlaintext)
        log.sealer = sealer
    }

    var readOnlyError: PrefsError {
        if configuration.readOnly {
            return PrefsError(.readOnly, "cannot write: the store was opened with Configuration.readOnly", path: paths.data)
        }
        let cause = readOnlyCause ?? .readOnlyFileSystem
        return PrefsError.system(cause, "open", "cannot write: the store was opened read-only", path: paths.data)
    }
}
