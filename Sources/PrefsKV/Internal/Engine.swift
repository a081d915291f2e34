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

#if !_endian(little)
#error("PrefsKV reads its little-endian format natively; a big-endian port must byte-swap the mapped words")
#endif

/// One change collected by a `PrefsTransaction`.
enum TransactionOp {
    case set(name: String, type: ValueType, value: [UInt8], expiresAt: Int64)
    case remove(name: String)
    case removeAll
}

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
    // exclusivity checks (a measurable share of a 60 ns read) cannot find anything the lock does not exclude.

    @exclusivity(unchecked) var codec: RecordCodec
    @exclusivity(unchecked) var lastRecovery: PrefsRecoveryReport?
    /// Set while someone observes: catch-ups then work out which keys changed.
    @exclusivity(unchecked) var wantsChanges = false
    @exclusivity(unchecked) var pendingChanges: [PrefsChange] = []
    @exclusivity(unchecked) var pendingLog: [(level: Logger.Level, message: Logger.Message)] = []
    @exclusivity(unchecked) var autoCompactionBlockedBelow = 0
    /// `IndexTable.tail`, read once (a static is a lazy global, checked at each access).
    private let indexTail = IndexTable.tail
    /// Set when reading the whole log failed (the file is damaged and the store must not salvage): a handle that
    /// knows its file is damaged appends nothing to it.
    @exclusivity(unchecked) private var wholeLogFailed = false
    /// Private memory where a sealed write assembles its plaintext (`u32 nameLength | name | value`, up to
    /// `sealScratchCapacity` bytes), wiped after each write: allocated at the first sealed write, instead of a
    /// temporary allocation per write, whose closure retained what it captured (a tenth of a sealed write's
    /// bookkeeping). Used only under the engine's lock, like everything here.
    @exclusivity(unchecked) private var sealScratch: UnsafeMutableRawPointer?
    static let sealScratchCapacity = 512

    @inline(__always) var hasPendingEvents: Bool { !pendingChanges.isEmpty || !pendingLog.isEmpty }
    var sealer: (any PrefsSealer)? { codec.sealer }
    var multiProcess: Bool { lock.multiProcess }
    /// New images are marked watched while this handle's observers rely on other processes' inotify events.
    private var watchesImages: Bool { wantsChanges && multiProcess }

    deinit {
        if let sealScratch {
            Sys.zero(UnsafeMutableRawBufferPointer(start: sealScratch, count: Engine.sealScratchCapacity))
            sealScratch.deallocate()
        }
    }

    private init(
        paths: StorePaths, configuration: PrefsStore.Configuration, lock: StoreLock, readOnlyCause: Errno?,
        snapshot: consuming Snapshot
    ) {
        self.paths = paths
        self.configuration = configuration
        self.lock = lock
        self.readOnlyCause = readOnlyCause
        codec = RecordCodec(sealer: configuration.sealer)
        log = StoreLog(paths: paths, configuration: configuration, snapshot: snapshot)
    }

    // MARK: Open

    /// Opens (creating when absent) the store `id` in `directory`.
    static func open(
        id: String, directory: String, configuration: PrefsStore.Configuration
    ) throws(PrefsError) -> Engine {
        try validate(storeID: id)
        let paths = StorePaths(id: id, directory: directory)
        let lock = try StoreLock.acquire(paths: paths, for: .open(configuration.sharing))
        var readOnlyCause = lock.readOnlyCause
        // An intact data file is read without the writer lock (a multi-process handle holds only the open lock
        // then): its records up to the published log end never change, another handle's compaction marks it
        // superseded, which the first access notices, and recovery, creation and clearing a stale superseded
        // flag all happen under the writer lock, below. Taking the lock page's mutex writes to the lock file's
        // page, a journaled ext4 page fault in a fresh process: about a tenth of a first open.
        // (No `Snapshot?` here: an optional snapshot is copied and destroyed through its type metadata.)
        let snapshot: Snapshot
        var pageLocked = false
        // (An array, not an optional: destroying a `PrefsRecoveryReport?` instantiates its metadata at run time, in
        // every fresh process's first open; an array is one release.)
        var setAside: [PrefsRecoveryReport] = []
        var mustSalvage = false
        do throws(PrefsError) {
            if lock.lockPage != nil,
                case .intact(let intact) = try StoreLog.loadSnapshotIfIntact(
                    paths: paths, directory: lock.directoryFD, sealer: configuration.sealer,
                    readOnlyCause: &readOnlyCause, lazy: true)
            {
                snapshot = intact
            } else {
                pageLocked = try lock.lockPageForOpen()
                snapshot = try StoreLog.loadSnapshot(
                    paths: paths, directory: lock.directoryFD, sealer: configuration.sealer,
                    readOnlyCause: &readOnlyCause, create: true, lazy: true)
            }
        } catch {
            // A file no copy of whose header verifies, beside a base image: a buffered store's unflushed image cut
            // by a power loss; the base image is put back (BaseImage.swift), the file kept aside.
            var restored: (snapshot: Snapshot, report: PrefsRecoveryReport?)?
            if configuration.recovery == .salvage, readOnlyCause == nil,
                error.code == .notAStore || error.code == .corrupted,
                case .ours = StoreLog.baseHeader(paths: paths, sealer: configuration.sealer)
            {
                do throws(PrefsError) {
                    if !pageLocked { pageLocked = try lock.lockPageForOpen() }
                    restored = try Recovery.restoreBaseOverUnreadable(
                        paths: paths, directory: lock.directoryFD, sealer: configuration.sealer,
                        readOnlyCause: &readOnlyCause, unreadable: error)
                } catch {
                    lock.endOpenLock(pageLocked: pageLocked)
                    throw error
                }
            }
            if let restored {
                snapshot = restored.snapshot
                if let report = restored.report { setAside = [report] }
            } else {
                // Otherwise refused (the default), or, when the app chose that (`unreadableFile`), rebuilt from the
                // records of its body that verify, its original kept aside, under the writer lock.
                guard configuration.unreadableFile == .quarantineAndRebuild, readOnlyCause == nil,
                    error.code == .notAStore || error.code == .corrupted
                else {
                    lock.endOpenLock(pageLocked: pageLocked)
                    throw error
                }
                do throws(PrefsError) {
                    if !pageLocked { pageLocked = try lock.lockPageForOpen() }
                    let rebuilt = try Recovery.rebuild(
                        paths: paths, directory: lock.directoryFD, sealer: configuration.sealer,
                        readOnlyCause: &readOnlyCause, unreadable: error)
                    snapshot = rebuilt.snapshot
                    if let report = rebuilt.setAside { setAside = [report] }
                    mustSalvage = rebuilt.mustSalvage
                } catch {
                    lock.endOpenLock(pageLocked: pageLocked)
                    throw error
                }
            }
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
        guard case .sealed(let sealed) = codec, !sealed.cachesIndexKeys else {
            return try liveEntry(codec.indexKey(forName: name))
        }
        let log = self.log
        if let entry = sealed.withIndexKeyBytes(forName: name, { log.index.entry(utf8: $0) }) {
            return entry.isExpired(now: Sys.nowMilliseconds()) ? nil : entry
        }
        guard log.table != nil else { return nil }
        return try liveEntryFromTable(sealed.indexKey(forName: name))
    }

    @inline(never)
    private func liveEntryFromTable(_ key: String) throws(PrefsError) -> Entry? {
        switch log.lookUp(key) {
        case .found(let entry): return entry.isExpired(now: Sys.nowMilliseconds()) ? nil : entry
        case .absent: return nil
        case .tableDamaged:
            try readTableDamaged()
            return log.liveEntry(key)
        }
    }

    /// Makes the index hold `key`'s entry when the persisted table has it (a handle reading one; nothing to do
    /// otherwise); when the table does not verify where the lookup read it, reads the whole log instead (which
    /// finds and recovers the damage, as an open would).
    @inline(__always)
    func lookUp(_ key: @autoclosure () -> String) throws(PrefsError) {
        guard log.table != nil else { return }
        try lookUpInTable(key())
    }

    @inline(never)
    private func lookUpInTable(_ key: String) throws(PrefsError) {
        guard log.index[key] == nil else { return }
        if case .tableDamaged = log.lookUp(key) { try readTableDamaged() }
    }

    @inline(never)
    private func readTableDamaged() throws(PrefsError) {
        pendingLog.append(
            (.warning, "the persisted index of \(paths.data) does not verify; the store's whole log is read"))
        try readWholeLog()
    }

    /// Reads the whole log when this handle opened from a persisted index (`StoreLog.table`): before anything
    /// that needs every key (enumeration, counting, transactions, compaction, observers). It reopens the file as
    /// an open without a table would, under the writer lock, recovering it when damaged.
    func readWholeLog() throws(PrefsError) {
        guard log.table != nil else { return }
        do throws(PrefsError) {
            try withWriterLock { () throws(PrefsError) in try reload(lazy: false, reportsChanges: false) }
            wholeLogFailed = false
        } catch {
            // Damage under `.fail` (nothing adopted): this handle's writes throw too until a whole read succeeds.
            wholeLogFailed = true
            throw error
        }
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
        let now = Sys.nowMilliseconds()
        let keys = log.index.filter { !$0.value.isExpired(now: now) }.map(\.key)
        return codec.names(forIndexKeys: keys, in: log)
    }

    /// Keys in UTF-8 byte order (code point order), each byte sequence once: keys are compared byte for byte,
    /// so two spellings of one text are two keys (a `Set<String>` would merge them).
    static func sortedUnique(_ keys: [String]) -> [String] {
        var out: [String] = []
        for key in keys.sorted(by: KeyIndex.bytesPrecede)
        where !(out.last.map { KeyIndex.sameBytes($0, key) } ?? false) {
            out.append(key)
        }
        return out
    }

    // MARK: Catching up with other handles

    /// Catches up when the mapped header says another handle wrote, compacted or restored. Two atomic loads
    /// when nothing changed.
    @inline(__always)
    func refreshIfNeeded() throws(PrefsError) {
        if log.isUpToDate { return }
        try refresh()
    }

    func refresh() throws(PrefsError) {
        // A superseded file first: a compaction may be writing a new image into it (its identity changes then),
        // which the catch-up follows like any replaced file.
        if log.file.isSuperseded {
            try withWriterLock { () throws(PrefsError) in try catchUpLocked() }
            return
        }
        if log.hasChangedUnderneath {
            try reloadChangedFile()
            return
        }
        var changed: [String] = []
        var vanished = KeyIndex()
        var damage: [PrefsDamage] = []
        guard
            try log.readAppended(
                collectingChanges: wantsChanges, changed: &changed, vanished: &vanished, damage: &damage)
        else {
            // The log end is damaged or went backwards under us: reload the file (recovering it if needed).
            try withWriterLock { () throws(PrefsError) in try reload() }
            return
        }
        if !damage.isEmpty {
            // Until the whole file is read again, no table may be written from an index that lacks them: it would
            // hide the damage from later opens.
            log.skippedDamage = true
            pendingLog.append(
                (.error, "damaged records appeared in \(paths.data) while it was open: \(damage); they were skipped"))
            // Records that fail authentication were written by someone without the key: a store that must not
            // salvage says so to its reader (they were not applied either way).
            if configuration.recovery == .fail && damage.contains(where: \.isTampering) {
                throw PrefsError(
                    .tampered,
                    "records appended to the sealed store while it was open fail authentication (forged, replayed "
                        + "or moved); they were not applied: \(damage)", path: paths.data)
            }
        }
        if !changed.isEmpty {
            let names = codec.names(
                forIndexKeys: changed, in: log, formerImage: (log.file, vanished, log.image))
            pendingChanges.append(PrefsChange(keys: names, isExternal: true))
        }
    }

    /// Takes the writer lock for `body` unless this handle already holds it (or cannot take it).
    func withWriterLock(_ body: () throws(PrefsError) -> Void) throws(PrefsError) {
        try lock.withWriterLock(ownerDied: noteDeadWriter, body)
    }

    private func noteDeadWriter() {
        pendingLog.append(
            (.warning, "a process died holding the writer lock of \(paths.data); its unfinished write was dropped"))
    }

    /// The file changed underneath this handle without going through PrefsKV (truncated, or rewritten in place):
    /// reopens what the path names now, as an open would (recovering it when damaged), under the writer lock, and
    /// logs it.
    func reloadChangedFile() throws(PrefsError) {
        let before = log.adoptedIdentity
        try withWriterLock { () throws(PrefsError) in try reload() }
        // A newer image of this store in the same file is a compaction's that reused it (FileFormat.md,
        // "Compaction"): nothing to warn about.
        let after = log.adoptedIdentity
        if after.uuidLow == before.uuidLow && after.uuidHigh == before.uuidHigh && after.generation > before.generation
        {
            return
        }
        let message =
            "\(paths.data) was changed underneath this handle by something other than PrefsKV; the handle "
            + "reopened it (restore a store with restore(from:), which replaces the file atomically)"
        pendingLog.append((.warning, "\(message)"))
    }

    /// Under the writer lock: follows a file changed underneath, or a compaction or restore by another handle,
    /// then reads new records.
    func catchUpLocked() throws(PrefsError) {
        if log.hasChangedUnderneath { try reload() }
        if log.file.isSuperseded {
            if log.fileIsNamed {
                // Still our file: the flag is stale, from a compactor killed between flag and rename. It is cleared
                // once the whole log is known to be intact: a handle reading a persisted table reads the whole log
                // first, which clears it (`StoreLog.loadSnapshot`) or, when the log is damaged, quarantines the file
                // as it is (its copy must be byte-identical: found by make torture, seed 7504408272214365528).
                if log.table != nil { try readWholeLog() }
                if log.file.isSuperseded && log.file.writable && log.fileIsNamed { log.file.setSuperseded(false) }
            } else {
                try reload()
            }
        }
        if log.file.logEndWord != log.knownEndWord && !log.file.isSuperseded { try refresh() }
    }

    /// Opens the file the path names now and replaces the state with it (recovering it when damaged); from its
    /// persisted index when it has one, unless `lazy` is false or someone observes the store.
    /// `reportsChanges: false`: the same file read again (`readWholeLog`), which changes nothing an observer hears.
    func reload(lazy: Bool = true, reportsChanges: Bool = true) throws(PrefsError) {
        var cause = readOnlyCause
        let snapshot = try StoreLog.loadSnapshot(
            paths: paths, directory: Sys.atWorkingDirectory, sealer: sealer, readOnlyCause: &cause, create: false,
            lazy: lazy && !wantsChanges)
        // A store that must not salvage adopts nothing damaged: the damage is thrown, and the handle keeps what it
        // had, so every access that needs the damaged file finds it again and throws again (adopting what verified
        // would serve older values of the keys the damage hit, and a table written from them would hide it).
        if !snapshot.damage.isEmpty && configuration.recovery == .fail {
            _ = try Recovery.recover(
                log, damage: snapshot.damage, recordsKept: snapshot.recordCount, policy: .fail, watched: false)
        }
        let old = (file: log.file, index: log.index)
        log.adopt(snapshot)
        autoCompactionBlockedBelow = 0
        if !snapshot.damage.isEmpty {
            try recover(damage: snapshot.damage, recordsKept: snapshot.recordCount)
        }
        if wantsChanges && reportsChanges {
            if log.file.writable && multiProcess && !log.file.isWatched { log.file.setWatched(true) }
            noteChanges(from: old.file, oldIndex: old.index, isExternal: true)
        }
        // Only now: the changes above name the keys the new state lacks by the names learned for them (a sealed
        // key's record is gone with the old image, so its name is nowhere else).
        let index = log.index
        codec.retainNames { index[$0] != nil }
    }

    /// Under the writer lock: when the data file was deleted or renamed over from outside while open, marks it
    /// superseded (so every handle on it stops using it) and follows the path: a replacing store is adopted, a
    /// deleted one is `notFound`. Nothing is ever written into a file that has no name.
    func followIfUnlinked() throws(PrefsError) {
        // Unretained: the log holds its file (asked at every write).
        guard Unmanaged.passUnretained(log.file)._withUnsafeGuaranteedRef({ $0.hasLostItsName }) else { return }
        if log.file.writable { log.file.setSuperseded(true) }
        // A deleted directory takes the lock file with it: a handle whose lock file is gone excludes nobody.
        guard lock.isCurrent else {
            throw PrefsError(
                .notFound, "the store was deleted while open, its lock file with it; reopen the store",
                path: paths.data)
        }
        try reload()
    }

    // MARK: Writing

    /// Takes the writer lock (multi-process) and reads what other handles appended since.
    func beginWrite() throws(PrefsError) {
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
        try typed {
            try utf8Name.withUTF8 { key in
                try log.appendSet(
                    name: name, key: UnsafeRawBufferPointer(key), type: type, expiresAt: expiresAt,
                    valueLength: valueLength, fill: fill)
            }
        }
        if wantsChanges { pendingChanges.append(PrefsChange(keys: [name], isExternal: false)) }
        afterWrite()
    }

    /// A sealed store's single value: what a one-change commit does (compare-before-set, one committed record
    /// sealed in place, the name and plaintext CRC learned), without planning a transaction (its arrays and
    /// dictionaries were half of a sealed write's instructions). The plaintext lives in a temporary buffer,
    /// wiped before it is released.
    private func setSealed(
        name: String, type: ValueType, expiresAt: Int64, valueLength: Int, fill: (UnsafeMutableRawBufferPointer) -> Void
    ) throws(PrefsError) {
        guard case .sealed(let sealed) = codec else { preconditionFailure("setSealed on a plain store") }
        // The tag is computed once here, and used for the lookup and the record: with cheap tags it is made on the
        // stack beside its hex (the index key), otherwise decoded from the remembered index key.
        let wrote = try typed {
            if sealed.cachesIndexKeys {
                let indexKey = sealed.indexKey(forName: name)
                return try withUnsafeTemporaryAllocation(byteCount: indexKey.utf8.count / 2, alignment: 8) { tag in
                    RecordCodec.unhex(indexKey, into: tag)
                    return try setSealed(
                        name: name, indexKey: indexKey, tag: UnsafeRawBufferPointer(tag), sealed: sealed, type: type,
                        expiresAt: expiresAt, valueLength: valueLength, fill: fill)
                }
            }
            return try sealed.withTagAndIndexKey(forName: name) { tag, indexKeyBytes in
                try setSealed(
                    name: name, indexKey: String(decoding: indexKeyBytes, as: UTF8.self), tag: tag, sealed: sealed,
                    type: type, expiresAt: expiresAt, valueLength: valueLength, fill: fill)
            }
        }
        guard wrote else { return }
        if wantsChanges { pendingChanges.append(PrefsChange(keys: [name], isExternal: false)) }
        afterWrite()
    }

    /// `setSealed` once the tag (the record's key) and its hex (`indexKey`) are known; false when the key already
    /// held this value (nothing written).
    @inline(__always)
    private func setSealed(
        name: String, indexKey: String, tag: UnsafeRawBufferPointer, sealed: SealedRecordCodec, type: ValueType,
        expiresAt: Int64, valueLength: Int, fill: (UnsafeMutableRawBufferPointer) -> Void
    ) throws(PrefsError) -> Bool {
        try lookUp(indexKey)
        let plainLength = 4 + name.utf8.count + valueLength
        // The log and the codec are used unretained (this engine holds both, and nothing here replaces them): their
        // retains and releases, and the sealed codec's, were a tenth of a sealed write's bookkeeping.
        return try typed {
            try Unmanaged.passUnretained(log)._withUnsafeGuaranteedRef { log in
                try Unmanaged.passUnretained(sealed)._withUnsafeGuaranteedRef { sealed in
                    guard plainLength <= Engine.sealScratchCapacity else {
                        return try withUnsafeTemporaryAllocation(byteCount: plainLength, alignment: 16) { buffer in
                            defer { Sys.zero(buffer) }
                            return try writeSealed(
                                plain: buffer, name: name, indexKey: indexKey, tag: tag, sealed: sealed, log: log,
                                type: type, expiresAt: expiresAt, fill: fill)
                        }
                    }
                    let scratch = sealScratch ?? allocateSealScratch()
                    let plain = UnsafeMutableRawBufferPointer(start: scratch, count: plainLength)
                    defer { Sys.zero(plain) }
                    return try writeSealed(
                        plain: plain, name: name, indexKey: indexKey, tag: tag, sealed: sealed, log: log, type: type,
                        expiresAt: expiresAt, fill: fill)
                }
            }
        }
    }

    @inline(never)
    private func allocateSealScratch() -> UnsafeMutableRawPointer {
        let scratch = UnsafeMutableRawPointer.allocate(byteCount: Engine.sealScratchCapacity, alignment: 16)
        sealScratch = scratch
        return scratch
    }

    /// Writes `name`'s value, made by `fill`, sealed: its plaintext `u32 nameLength | name | value` is assembled in
    /// `plain` (private memory the caller wipes), compared with the current value, and sealed into the record.
    @inline(__always)
    private func writeSealed(
        plain: UnsafeMutableRawBufferPointer, name: String, indexKey: String, tag: UnsafeRawBufferPointer,
        sealed: SealedRecordCodec, log: StoreLog, type: ValueType, expiresAt: Int64,
        fill: (UnsafeMutableRawBufferPointer) -> Void
    ) throws -> Bool {
        let valueStart = SealedRecordCodec.assemble(name: name, into: plain)
        let filled = UnsafeMutableRawBufferPointer(rebasing: plain[valueStart...])
        fill(filled)
        let value = UnsafeRawBufferPointer(filled)
        if try TransactionPlan.isUnchanged(
            indexKey: indexKey, name: name, type: type, value: value, expiresAt: expiresAt, log: log, sealed: sealed)
        {
            return false
        }
        let storedLength = plain.count + sealed.sealer.overhead
        // A version-6 image binds the value to the image (no `RecordAuth` copied: its sealer made that 650
        // instructions); an older one authenticates the record, or (version 1) neither.
        let binding: ImageIdentity? = log.header.bindsValues ? log.image : nil
        let signer = binding == nil ? log.auth : nil
        let uuid = log.header.uuid
        let seed = log.recordSeed
        let length = Format.recordLength(keyLength: tag.count, valueLength: storedLength, authenticated: signer != nil)
        let plaintext = UnsafeRawBufferPointer(plain)
        try log.appendSealedSet(indexKey: indexKey, length: length, plainCRC: CRC32C.checksum(value)) {
            bytes, offset, seq throws(PrefsError) -> RecordHeader in
            do {
                return try sealed.writeSet(
                    into: bytes, at: offset, flags: RecordFlags.commit, seq: seq, plaintext: plaintext, key: tag,
                    type: type, expiresAt: expiresAt, uuid: uuid, signer: signer, binding: binding, seed: seed)
            } catch {
                throw SealedRecordCodec.sealFailed(name, path: log.paths.data, error)
            }
        }
        // Only a handle that reports changes needs the name later, for a key whose record goes (deleted or replaced
        // by another process); anything else opens the record when it asks (`name(forIndexKey:)`).
        if wantsChanges { sealed.learn(indexKey: indexKey, name: name) }
        return true
    }

    /// About how many keys the store holds: the index's, or for a handle reading a persisted table, the larger of
    /// the table's and the index's (keys added since the table are not told from keys looked up in it).
    private var keyCountEstimate: Int { max(log.table?.keyCount ?? 0, log.index.count) }

    /// Commits a transaction's changes: one record with the commit flag for a single change, otherwise the
    /// changes followed by a commit record, published together. Unchanged values write nothing.
    func commit(_ ops: [TransactionOp]) throws(PrefsError) {
        precondition(lock.holdsWriterLock, "commit without the writer lock")
        try readWholeLog()
        var plan = try TransactionPlan(ops, engine: self)
        guard !plan.records.isEmpty else { return }
        try plan.write(engine: self)
        if wantsChanges && !plan.changed.isEmpty {
            pendingChanges.append(PrefsChange(keys: Engine.sortedUnique(plan.changed), isExternal: false))
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

    /// Appends an index record when the records since the last one are at least twice the key count (and
    /// `IndexTable.tail`): tables then cost a bounded share of writing (about 8 bytes a record), and an open reads
    /// at most about twice as many records as the store has keys. A failure is logged, not thrown: the write
    /// succeeded, and a table only saves work.
    private func maybeWriteIndex() {
        guard log.header.hasIndexRecords, log.tailRecords >= max(indexTail, 2 * keyCountEstimate),
            keyCountEstimate >= IndexTable.minimumKeys
        else { return }
        do throws(PrefsError) {
            try readWholeLog()
            try log.appendIndex()
        } catch {
            log.tailRecords = 0  // not tried again before as many records again (a full disk stays full a while)
            pendingLog.append((.warning, "writing the persisted index of \(paths.data) failed: \(error.message)"))
        }
    }

    /// When the handle was opened by reading the whole log (`minimumTail` 1), and when it closes
    /// (`IndexTable.closingTail`): appends an index record if the store has enough keys and at least `minimumTail`
    /// records were applied since the last one, so that the next open reads the table instead of the log (an app
    /// whose stores are never closed, or whose last writes deleted keys, gets one at its next open). Nothing is
    /// thrown or logged: the store loses nothing without it.
    /// A handle that reads a persisted table writes a new one only when the records after it are at least half
    /// its keys: it must read the whole log first, about what the next open would save.
    func writeIndexIfDue(minimumTail: Int = IndexTable.closingTail) {
        func due() -> Bool {
            let tail = log.table == nil ? minimumTail : max(minimumTail, keyCountEstimate / 2)
            return keyCountEstimate >= IndexTable.minimumKeys && log.tailRecords >= tail
        }
        guard readOnlyCause == nil, log.file.writable, log.header.hasIndexRecords, due() else { return }
        do throws(PrefsError) {
            try beginWrite()
            defer { endWrite() }
            // Caught up: another handle may have written one, or compacted.
            guard due() else { return }
            try readWholeLog()
            try log.appendIndex()
        } catch {
            // Nothing to report: the store was removed or replaced meanwhile, or the disk is full; the next open
            // reads the log.
        }
    }

    // MARK: Images

    /// Under the writer lock: compacts the log into a new image (Compaction.swift); `deferred`: without waiting
    /// for the disk, the previous image kept as the store's base until the next `sync()`.
    func compactLocked(minimumCapacity: Int = 0, deferred: Bool = false) throws(PrefsError) {
        guard log.file.writable else { throw readOnlyError }
        try readWholeLog()
        if try log.compact(minimumCapacity: minimumCapacity, watched: watchesImages, deferred: deferred) {
            let index = log.index
            codec.retainNames { index[$0] != nil }
        }
        autoCompactionBlockedBelow = 0
    }

    /// After a write: compacts when garbage is at least half the log and the log has reached three quarters
    /// of the configured threshold. A compaction sizes the new file at least at the threshold, so a store
    /// whose live data is under 3/8 of the threshold compacts before its file needs to grow: its file stays at
    /// the threshold. A failure is logged, not thrown (the write itself succeeded), and not retried until the
    /// log has grown by half again.
    func maybeCompactAutomatically() {
        let knownEnd = log.knownEnd
        guard let threshold = configuration.autoCompactionThreshold, knownEnd >= autoCompactionBlockedBelow
        else { return }
        let length = knownEnd - log.header.firstRecordOffset
        guard length > 0, length >= threshold / 4 * 3, (length - log.liveBytes - log.indexBytes) * 2 >= length
        else { return }
        do throws(PrefsError) {
            // A buffered store promises power-loss durability up to the last sync() only: its automatic
            // compactions do not wait for the disk (FileFormat.md, "Compaction").
            try compactLocked(minimumCapacity: threshold, deferred: !log.synchronous)
        } catch {
            autoCompactionBlockedBelow = knownEnd + length / 2
            pendingLog.append(
                (.warning, "automatic compaction of \(paths.data) failed; the store is intact: \(error.message)"))
        }
    }

    /// Acts on damage found by a scan (the snapshot is already adopted, holding what verified): Recovery.swift.
    func recover(
        damage: [PrefsDamage], recordsKept: Int, policy: PrefsStore.RecoveryPolicy? = nil
    ) throws(PrefsError) {
        let policy = policy ?? configuration.recovery
        let report: PrefsRecoveryReport
        if policy == .salvage && log.file.writable && Recovery.usableBase(of: log) {
            // An image a buffered store's compaction left unflushed, cut by a power loss: its base image is the
            // durable state, and what verifies of the damaged file goes on top of it (BaseImage.swift).
            let restored = try Recovery.restoreBase(
                log, damage: damage, recordsKept: recordsKept, watched: watchesImages)
            report = restored.report
            let message =
                "\(paths.data): its newest image was not flushed when its writer stopped (a power loss?); the store "
                + "was restored from its base image \(paths.previous) (its state as of the last sync()) and every "
                + "record of the damaged image that verifies was applied again"
            pendingLog.append((.warning, "\(message)"))
            if let base = restored.baseRecovery { pendingLog.append((.error, "\(base.description)")) }
        } else {
            report = try Recovery.recover(
                log, damage: damage, recordsKept: recordsKept, policy: policy, watched: watchesImages)
        }
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
        try readWholeLog()
        let (image, header) = try Rekey.image(of: log, codec: codec, to: newSealer, watched: watchesImages)
        let oldCodec = codec
        codec = RecordCodec(sealer: newSealer)
        log.sealer = newSealer
        do throws(PrefsError) {
            try log.install(image, header: header)
        } catch {
            codec = oldCodec
            log.sealer = oldCodec.sealer
            throw error
        }
        autoCompactionBlockedBelow = 0
    }

    // MARK: Events

    /// Queues the keys whose values differ between an old mapping and the current state.
    private func noteChanges(from oldFile: MappedFile, oldIndex: KeyIndex, isExternal: Bool) {
        let changed = codec.names(
            forIndexKeys: log.changedIndexKeys(from: oldFile, oldIndex: oldIndex), in: log,
            formerImage: log.stillShowsItsImage(oldFile) ? (oldFile, oldIndex, oldFile.adoptedIdentity.image) : nil)
        if !changed.isEmpty { pendingChanges.append(PrefsChange(keys: changed, isExternal: isExternal)) }
    }

    var readOnlyError: PrefsError {
        let cause = readOnlyCause ?? .readOnlyFileSystem
        return PrefsError.system(cause, "open", "cannot write: the store was opened read-only", path: paths.data)
    }

    /// The queued changes and log lines, taken; with `externalOnly`, the changes of other processes only (this
    /// handle's own writes stay queued, in order, for the writer that made them).
    func takeEvents(
        externalOnly: Bool = false
    ) -> (
        changes: [PrefsChange], log: [(level: Logger.Level, message: Logger.Message)]
    ) {
        defer { pendingLog.removeAll() }
        guard externalOnly, pendingChanges.contains(where: { !$0.isExternal }) else {
            defer { pendingChanges.removeAll() }
            return (pendingChanges, pendingLog)
        }
        let external = pendingChanges.filter(\.isExternal)
        pendingChanges.removeAll { $0.isExternal }
        return (external, pendingLog)
    }
}

/// Runs a closure given to a standard-library `rethrows` function whose body throws only `PrefsError`, and
/// restores the typed error.
@inline(__always)
func typed<R>(_ body: () throws -> R) throws(PrefsError) -> R {
    do {
        return try body()
    } catch let error as PrefsError {
        throw error
    } catch {
        throw PrefsError(.io, "unexpected error: \(error)", underlying: error)
    }
}
