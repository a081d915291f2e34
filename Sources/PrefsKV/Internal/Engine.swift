// The store's state and its file protocol. Lives inside `PrefsStore`'s Mutex: nothing here is thread-safe.
import Logging
import SystemLayer

#if !_endian(little)
#error("PrefsKV reads its little-endian format natively; a big-endian port must byte-swap the mapped words")
#endif

/// Where a key's current value lives in the mapping: 32 bytes, so that an index of 10,000 keys stays in cache.
struct Entry {
    var recordOffset: Int
    var expiresAt: Int64
    private var keyLength32: UInt32
    private var valueLength32: UInt32
    /// Sealed stores only, memory only: CRC32C of the plaintext value, when `hasPlainCRC`.
    private var plainCRC32: UInt32 = 0
    var type: ValueType
    var sealed: Bool
    private var hasPlainCRC = false

    init(_ record: RecordHeader) {
        recordOffset = record.offset
        keyLength32 = UInt32(record.keyLength)
        valueLength32 = UInt32(record.valueLength)
        expiresAt = record.expiresAt
        type = ValueType(rawValue: record.valueType)!
        sealed = record.isSealed
    }

    var keyLength: Int { Int(keyLength32) }
    var valueLength: Int { Int(valueLength32) }
    var plainCRC: UInt32? {
        get { hasPlainCRC ? plainCRC32 : nil }
        set {
            hasPlainCRC = newValue != nil
            plainCRC32 = newValue ?? 0
        }
    }
    var recordLength: Int { Format.recordLength(keyLength: keyLength, valueLength: valueLength) }
    var valueOffset: Int { recordOffset + Format.recordHeaderSize + keyLength }
    var keyOffset: Int { recordOffset + Format.recordHeaderSize }

    @inline(__always)
    func isExpired(now: @autoclosure () -> Int64) -> Bool { expiresAt != 0 && expiresAt <= now() }
}

/// The file names of one store.
struct StorePaths {
    let id: String
    let directory: String
    let data: String
    let lock: String
    let temporary: String

    init(id: String, directory: String) {
        self.id = id
        self.directory = directory
        let base = directory.hasSuffix("/") ? directory + id : directory + "/" + id
        data = base + ".prefs"
        lock = data + ".lock"
        temporary = data + ".tmp"
    }

    var dataFileName: String { id + ".prefs" }
}

/// A data file opened, mapped and scanned.
struct Snapshot {
    var file: MappedFile
    var header: Header
    var index = KeyIndex()
    var liveBytes = 0
    var recordCount = 0
    var maxSeq: UInt64 = 0
    var end = Format.logStart
    var endWord: UInt64 = 0
    var damage: [PrefsDamage] = []
}

// @unchecked Sendable: every access goes through `PrefsStore.engine`, a Mutex; the conformance only lets
// closures of the calling task be passed into it under that lock.
final class Engine: @unchecked Sendable {
    let paths: StorePaths
    let configuration: PrefsStore.Configuration
    @exclusivity(unchecked) var sealer: (any PrefsSealer)? {
        didSet { indexKeyCache.removeAll() }
    }
    /// Sealed stores: key name to index key (hex of the sealer's tag), for names used through this handle.
    /// A tag costs a keyed hash (BLAKE2b, about a microsecond with its hex); a lookup here a tenth of that.
    /// Cleared when the sealer changes (rekey) and when it grows past `indexKeyCacheLimit` names.
    @exclusivity(unchecked) var indexKeyCache: [ByteKey: String] = [:]
    static let indexKeyCacheLimit = 4096
    /// The lock file (never replaced), or -1 when a read-only directory has none.
    let lockFD: Int32
    /// The writer lock of a multi-process handle (a robust mutex in the lock file), nil when it uses `flock`:
    /// single-process handles, read-only ones, and handles that joined processes using `flock`.
    let lockPage: LockPage?
    let multiProcess: Bool
    /// Why this handle cannot write (the errno of the failed writable open), nil when it can.
    let readOnlyCause: Errno?

    // Every access to this state happens under `PrefsStore.engine`'s Mutex, one thread at a time, so runtime
    // exclusivity checks (a measurable share of a 60 ns read) cannot find anything the lock does not exclude.

    @exclusivity(unchecked) var file: MappedFile
    @exclusivity(unchecked) var header: Header
    @exclusivity(unchecked) var index: KeyIndex
    /// Sealed stores: index key (hex tag) to key name, learned by opening records.
    @exclusivity(unchecked) var names: [String: String] = [:]
    @exclusivity(unchecked) var liveBytes: Int
    @exclusivity(unchecked) var recordCount: Int
    @exclusivity(unchecked) var nextSeq: UInt64
    @exclusivity(unchecked) var knownEnd: Int
    @exclusivity(unchecked) var knownEndWord: UInt64

    @exclusivity(unchecked) var lastRecovery: PrefsRecoveryReport?
    @exclusivity(unchecked) var holdsWriterLock = false
    /// Set while someone observes: catch-ups then work out which keys changed.
    @exclusivity(unchecked) var wantsChanges = false
    @exclusivity(unchecked) var pendingChanges: [PrefsChange] = []
    @exclusivity(unchecked) var pendingLog: [(level: Logger.Level, message: Logger.Message)] = []
    @exclusivity(unchecked) var autoCompactionBlockedBelow = 0
    /// The generation of the file whose name this handle knows to be durable (an fsync of the directory
    /// followed its rename); nil until this handle has synced the directory itself.
    @exclusivity(unchecked) var directorySyncedGeneration: UInt64?

    /// Whether the index is keyed by sealer tags; mirrors `header.isEncrypted` for the read path.
    @exclusivity(unchecked) var isSealed = false
    @inline(__always) var hasPendingEvents: Bool { !pendingChanges.isEmpty || !pendingLog.isEmpty }

    private init(
        paths: StorePaths, configuration: PrefsStore.Configuration, lockFD: Int32, lockPage: LockPage?,
        readOnlyCause: Errno?, snapshot: consuming Snapshot
    ) {
        self.paths = paths
        self.configuration = configuration
        self.sealer = configuration.sealer
        self.lockFD = lockFD
        self.lockPage = lockPage
        self.multiProcess = configuration.sharing == .multiProcess
        self.readOnlyCause = readOnlyCause
        file = snapshot.file
        header = snapshot.header
        index = snapshot.index
        liveBytes = snapshot.liveBytes
        recordCount = snapshot.recordCount
        nextSeq = snapshot.maxSeq + 1
        knownEnd = snapshot.end
        knownEndWord = snapshot.endWord
        isSealed = snapshot.header.isEncrypted
    }

    deinit {
        if lockFD >= 0 { Sys.close(lockFD) }
    }

    // MARK: Open

    /// Opens (creating when absent) the store `id` in `directory`.
    ///
    /// `attempt` counts the restarts after a wipe (`PrefsStore.destroy`) removed the lock file between this
    /// open's `open(2)` of it and its presence lock.
    static func open(
        id: String, directory: String, configuration: PrefsStore.Configuration, attempt: Int = 0
    ) throws(PrefsError) -> Engine {
        try validate(storeID: id)
        let paths = StorePaths(id: id, directory: directory)

        // The lock file: created 0600 once, never replaced. A read-only directory may have none. When it
        // exists (every open but the first) this is one open(2); the directory is only looked at, and made,
        // when the file is missing.
        var lockFD: Int32 = -1
        var readOnlyCause: Errno?
        var opened = Sys.open(paths.lock, .readWrite)
        if case .failure(let e) = opened, e == .noEntry {
            try ensureDirectory(directory)
            switch Sys.open(paths.lock, .createNew) {
            case .success(let fd):
                if case .failure(let e) = Sys.fchmod(fd, 0o600) {
                    Sys.close(fd)
                    throw PrefsError.system(e, "fchmod", "cannot set the lock file's mode", path: paths.lock)
                }
                opened = .success(fd)
            case .failure(let e) where e == .exists:
                opened = Sys.open(paths.lock, .readWrite)  // another opener created it meanwhile
            case .failure(let e) where isReadOnlyCause(e):
                readOnlyCause = e
            case .failure(let e):
                throw PrefsError.system(e, "open", "cannot create the lock file", path: paths.lock)
            }
        }
        if readOnlyCause == nil {
            switch opened {
            case .success(let fd): lockFD = fd
            case .failure(let e) where isReadOnlyCause(e):
                readOnlyCause = e
                lockFD = (try? Sys.open(paths.lock, .readOnly).get()) ?? -1
            case .failure(let e): throw PrefsError.system(e, "open", "cannot open the lock file", path: paths.lock)
            }
        }
        // Until the engine owns the lock file, this function closes it on failure.
        var lockOwned = true
        var lockFileSize = 0
        defer { if lockOwned && lockFD >= 0 { Sys.close(lockFD) } }

        // The presence lock: excludes a single-process handle from any other.
        if lockFD >= 0 {
            let exclusive = configuration.sharing == .singleProcess && readOnlyCause == nil
            switch Sys.presenceLock(lockFD, exclusive: exclusive) {
            case .success: break
            case .failure(let e) where e == .wouldBlock:
                throw PrefsError(
                    .busy,
                    exclusive
                        ? "cannot open the store for single-process use: another handle has it open"
                        : "cannot open the store: a single-process handle holds it exclusively",
                    path: paths.data)
            case .failure(let e):
                throw PrefsError.system(e, "fcntl(F_OFD_SETLK)", "cannot lock the store", path: paths.lock)
            }
            // The open lock: opens, wipes and lock-page set-ups take turns.
            try Sys.lockExclusive(lockFD).orThrow("flock", "cannot take the writer lock", path: paths.lock)
            // A wipe unlinks the lock file while it holds the presence lock exclusively; a lock taken after
            // that on the unlinked file would exclude nobody. Holding the presence lock now, check that the
            // path still names our file, and start over with the new one otherwise (closing this one releases
            // its locks). Its size, read under the open lock, tells whether a lock page was set up.
            guard let size = currentLockFileSize(lockFD, paths: paths) else {
                guard attempt < 8 else {
                    throw PrefsError(
                        .busy, "cannot open the store: its lock file keeps being replaced", path: paths.lock)
                }
                return try open(id: id, directory: directory, configuration: configuration, attempt: attempt + 1)
            }
            lockFileSize = size
        }
        // The writer lock of a multi-process handle: the lock page's mutex, set up afresh when no other handle
        // has the store open and the page is not ready for use (checked under the open lock, so no handle can
        // appear before it is ready).
        var lockPage: LockPage?
        do throws(PrefsError) {
            if lockFD >= 0 && readOnlyCause == nil && configuration.sharing == .multiProcess {
                let alone = try Sys.presenceAlone(lockFD).orThrow(
                    "fcntl(F_OFD_GETLK)", "cannot inspect the store's lock", path: paths.lock)
                lockPage = try LockPage.open(fd: lockFD, path: paths.lock, fileSize: lockFileSize, alone: alone)
            }
        } catch {
            Sys.unlock(lockFD)
            throw error
        }
        // An intact data file is read without the writer lock (a multi-process handle holds only the open lock
        // then): its records up to the published log end never change, another handle's compaction marks it
        // superseded, which the first access notices, and recovery, creation and clearing a stale superseded
        // flag all happen under the writer lock, below. Taking the lock page's mutex writes to the lock file's
        // page, a journaled ext4 page fault in a fresh process: about a tenth of a first open.
        // (No `Snapshot?` here: an optional snapshot is copied and destroyed through its type metadata.)
        let snapshot: Snapshot
        var writerLocked = false
        do throws(PrefsError) {
            if lockPage != nil,
                case .intact(let intact) = try loadSnapshotIfIntact(
                    paths: paths, sealer: configuration.sealer, readOnlyCause: &readOnlyCause)
            {
                snapshot = intact
            } else {
                _ = try lockPage?.lock(path: paths.lock)
                writerLocked = lockPage != nil
                snapshot = try loadSnapshot(
                    paths: paths, sealer: configuration.sealer, readOnlyCause: &readOnlyCause, create: true)
            }
        } catch {
            if writerLocked { lockPage?.unlock() }
            if lockFD >= 0 { Sys.unlock(lockFD) }
            throw error
        }
        // The snapshot moves into the engine, its damage (nearly always none) out of it first. (A copy of the
        // snapshot went through its fields' type metadata, instantiated at a fresh process's first open.)
        let damage = snapshot.damage
        let engine = Engine(
            paths: paths, configuration: configuration, lockFD: lockFD, lockPage: lockPage,
            readOnlyCause: readOnlyCause, snapshot: snapshot)
        lockOwned = false
        // The engine owns the lock file now (and closes it if recovery throws); release the locks through it.
        // A handle without a lock page holds its writer lock already: it is the open lock (flock).
        engine.holdsWriterLock = true
        defer { engine.endOpenLock(writerLocked: writerLocked || lockPage == nil) }
        if !damage.isEmpty {
            try engine.recover(damage: damage, recordsKept: engine.recordCount)
        }
        return engine
    }

    /// Whether `lockFD` is the file `paths.lock` names now (not one a wipe unlinked).
    static func isCurrentLockFile(_ lockFD: Int32, paths: StorePaths) -> Bool {
        currentLockFileSize(lockFD, paths: paths) != nil
    }

    /// The size of the lock file `lockFD` when it is the file `paths.lock` names now, nil otherwise.
    static func currentLockFileSize(_ lockFD: Int32, paths: StorePaths) -> Int? {
        guard case .success(let held) = Sys.fstat(lockFD), case .success(let named) = Sys.lstat(paths.lock),
            held.inode == named.inode && held.device == named.device
        else { return nil }
        return held.size
    }

    /// Releases the locks taken for the open: the open lock, and the writer lock when the open took it.
    func endOpenLock(writerLocked: Bool) {
        holdsWriterLock = false
        if writerLocked { lockPage?.unlock() }
        if lockFD >= 0 { Sys.unlock(lockFD) }
    }

    /// Takes the writer lock of a multi-process handle: the lock page's mutex, or `flock` without one.
    func lockWriter() throws(PrefsError) {
        if let lockPage {
            if try lockPage.lock(path: paths.lock) {
                pendingLog.append(
                    (
                        .warning,
                        "a process died holding the writer lock of \(paths.data); its unfinished write was dropped"
                    ))
            }
        } else {
            try Sys.lockExclusive(lockFD).orThrow("flock", "cannot take the writer lock", path: paths.lock)
        }
    }

    func unlockWriter() {
        if let lockPage { lockPage.unlock() } else { Sys.unlock(lockFD) }
    }

    static func isReadOnlyCause(_ e: Errno) -> Bool {
        e == .readOnlyFileSystem || e == .accessDenied || e == .notPermitted
    }

    static func validate(storeID id: String) throws(PrefsError) {
        let allowed = id.utf8.allSatisfy { c in
            (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x2E
                || c == 0x5F || c == 0x2D
        }
        // Not `id.contains("..")`: that goes through the string-processing module's generic searcher, whose
        // metadata a fresh process instantiates at its first open (about 100 µs, for a two-byte pattern).
        var previous: UInt8 = 0
        var doubleDot = false
        for c in id.utf8 {
            if c == 0x2E && previous == 0x2E { doubleDot = true }
            previous = c
        }
        guard allowed, (1...128).contains(id.utf8.count), id != ".", !doubleDot else {
            throw PrefsError(.invalidKey, "invalid store id \"\(id)\": use 1 to 128 of A-Z a-z 0-9 . _ -, no \"..\"")
        }
    }

    /// Creates `directory` and missing parents with mode 0700.
    static func ensureDirectory(_ directory: String) throws(PrefsError) {
        if case .success = Sys.lstat(directory) { return }
        var path = ""
        for component in directory.split(separator: "/", omittingEmptySubsequences: true) {
            path += "/" + component
            if case .success = Sys.lstat(path) { continue }
            switch Sys.mkdir(path, permissions: 0o700) {
            case .success:
                try Sys.chmod(path, 0o700).orThrow("chmod", "cannot set the directory's mode", path: path)
            case .failure(let e) where e == .exists: continue
            case .failure(let e): throw PrefsError.system(e, "mkdir", "cannot create the store directory", path: path)
            }
        }
    }

    /// Opens the data file (creating it when absent and allowed), validates its header against the sealer,
    /// maps it and scans the log. Damage is returned in the snapshot, not acted on.
    static func loadSnapshot(
        paths: StorePaths, sealer: (any PrefsSealer)?, readOnlyCause: inout Errno?, create: Bool
    ) throws(PrefsError) -> Snapshot {
        var fd: Int32
        switch Sys.open(paths.data, readOnlyCause == nil ? .readWrite : .readOnly) {
        case .success(let f): fd = f
        case .failure(let e) where e == .noEntry && create && readOnlyCause == nil:
            try createStoreFile(paths: paths, sealer: sealer)
            fd = try Sys.open(paths.data, .readWrite).orThrow(
                "open", "cannot open the new store file", path: paths.data)
        case .failure(let e) where e == .noEntry && readOnlyCause != nil:
            throw PrefsError.system(readOnlyCause!, "open", "cannot create the store file", path: paths.data)
        case .failure(let e) where isReadOnlyCause(e) && readOnlyCause == nil:
            fd = try Sys.open(paths.data, .readOnly).orThrow("open", "cannot open the store file", path: paths.data)
            readOnlyCause = e
        case .failure(let e):
            throw PrefsError.system(e, "open", "cannot open the store file", path: paths.data)
        }
        let snapshot = try scannedSnapshot(fd: fd, path: paths.data, sealer: sealer, writable: readOnlyCause == nil)
        let file = snapshot.file
        // A superseded flag on the file the path names is stale: a compactor was killed before its rename.
        // We hold the writer lock (or cannot write at all), so no compaction is under way. A damaged file is
        // left as it is: its quarantine copy must be byte-identical, and recovery replaces it anyway.
        if snapshot.damage.isEmpty && file.isSuperseded && file.writable { file.setSuperseded(false) }
        return snapshot
    }

    /// What `loadSnapshotIfIntact` found.
    enum IntactLoad {
        /// The existing file, present, not superseded, and scanned without damage.
        case intact(Snapshot)
        /// Anything else: `loadSnapshot` under the writer lock deals with it.
        case needsWriterLock
    }

    /// The snapshot of the existing data file when it can be used as it is: present, not superseded, and
    /// scanned without damage. Errors that `loadSnapshot` would throw the same way (not a store, a wrong
    /// key...) are thrown.
    static func loadSnapshotIfIntact(
        paths: StorePaths, sealer: (any PrefsSealer)?, readOnlyCause: inout Errno?
    ) throws(PrefsError) -> IntactLoad {
        let fd: Int32
        switch Sys.open(paths.data, readOnlyCause == nil ? .readWrite : .readOnly) {
        case .success(let f): fd = f
        case .failure: return .needsWriterLock  // missing, or read-only: `loadSnapshot` sorts it out
        }
        let snapshot = try scannedSnapshot(fd: fd, path: paths.data, sealer: sealer, writable: readOnlyCause == nil)
        return snapshot.damage.isEmpty && !snapshot.file.isSuperseded ? .intact(snapshot) : .needsWriterLock
    }

    /// Maps the data file `fd`, reads its header from the mapping (one `fstat`, no read: the scan goes through
    /// the same pages) and scans its log. Takes ownership of `fd`: it is closed on failure. A file that is not
    /// regular or is shorter than a header page is never mapped; `readHeader` names its problem. Errors leave
    /// the file untouched.
    static func scannedSnapshot(
        fd: Int32, path: String, sealer: (any PrefsSealer)?, writable: Bool
    ) throws(PrefsError) -> Snapshot {
        let status: FileStatus
        switch Sys.fstat(fd) {
        case .success(let s): status = s
        case .failure(let e):
            Sys.close(fd)
            throw PrefsError.system(e, "fstat", "cannot inspect the store file", path: path)
        }
        guard status.isRegular && status.size >= Format.headerSize else {
            defer { Sys.close(fd) }
            _ = try readHeader(fd: fd, path: path, sealer: sealer)
            // Unreachable: a header needs a whole page, and only a regular file has one to read.
            throw PrefsError(.notAStore, "the store file is shorter than its header", path: path)
        }
        let file = try MappedFile(fd: fd, path: path, writable: writable, status: status)
        let header = try file.withBytes { bytes throws(PrefsError) in
            try checkedHeader(UnsafeRawBufferPointer(rebasing: bytes[0..<Format.headerSize]), path: path, sealer: sealer)
        }
        var snapshot = Snapshot(file: file, header: header)
        scan(into: &snapshot)
        return snapshot
    }

    /// Reads and checks the header of an open file; errors leave the file untouched.
    static func readHeader(
        fd: Int32, path: String, sealer: (any PrefsSealer)?, checkSealer: Bool = true
    ) throws(PrefsError) -> Header {
        let status = try Sys.fstat(fd).orThrow("fstat", "cannot inspect the store file", path: path)
        guard status.isRegular else { throw PrefsError(.notAStore, "the store path is not a regular file", path: path) }
        // The page is read into the stack: no array, whose storage type a fresh process would instantiate.
        return try withUnsafeTemporaryAllocation(byteCount: Format.headerSize, alignment: 8) {
            page throws(PrefsError) -> Header in
            let count = try Sys.pread(fd, into: page, at: 0).orThrow(
                "pread", "cannot read the store header", path: path)
            return try checkedHeader(
                UnsafeRawBufferPointer(rebasing: page[0..<count]), path: path, sealer: sealer, checkSealer: checkSealer)
        }
    }

    /// Parses a header page (`bytes` is what the file holds of it) and checks it against the sealer.
    static func checkedHeader(
        _ bytes: UnsafeRawBufferPointer, path: String, sealer: (any PrefsSealer)?, checkSealer: Bool = true
    ) throws(PrefsError) -> Header {
        let header: Header
        do throws(Header.Problem) {
            header = try Header.parse(bytes)
        } catch {
            switch error {
            case .notAStore(let why):
                throw PrefsError(.notAStore, "not a PrefsKV store: \(why); the file was left untouched", path: path)
            case .unsupportedVersion(let v):
                throw PrefsError(
                    .unsupportedVersion,
                    "the store was written by format version \(v); this library reads version \(Format.version); "
                        + "the file was left untouched", path: path)
            case .damaged(let why):
                throw PrefsError(
                    .corrupted, "the store header cannot be read: \(why); the file was left untouched", path: path)
            }
        }
        guard checkSealer else { return header }
        // Plain ifs, not a switch over a (Bool, sealer) tuple: that tuple's metadata would be instantiated at run
        // time, in a fresh process's first open.
        if let sealer {
            guard header.isEncrypted else {
                throw PrefsError(.notEncrypted, "the store is not sealed and was opened with a sealer", path: path)
            }
            guard sealer.keyCheck == header.keyCheck else {
                throw PrefsError(.wrongKey, "the sealer's key check does not match the store's: wrong key", path: path)
            }
        } else if header.isEncrypted {
            throw PrefsError(.encrypted, "the store is sealed and was opened without a sealer", path: path)
        }
        return header
    }

    /// Writes a new empty store through a temporary file and a rename, so the data path never names a
    /// half-written file.
    static func createStoreFile(paths: StorePaths, sealer: (any PrefsSealer)?) throws(PrefsError) {
        var header = Header.new(keyCheck: sealer?.keyCheck)
        if let sealer {
            precondition(sealer.keyCheck.count <= Format.maxKeyCheckLength, "a sealer's key check is at most 64 bytes")
            precondition(sealer.overhead <= Format.maxSealerOverhead, "a sealer's overhead is at most 1024 bytes")
            header.keyCheck = sealer.keyCheck
        }
        let image = try writeImage(
            paths: paths, header: header, logLength: 0, capacity: Format.headerSize + 4096, watched: false
        ) { _ throws(PrefsError) in }
        try Sys.rename(paths.temporary, paths.data).orThrow("rename", "cannot create the store file", path: paths.data)
        _ = image
        syncDirectory(paths)
    }

    /// Scans the whole log of a freshly mapped snapshot.
    static func scan(into snapshot: inout Snapshot) {
        let file = snapshot.file
        let size = file.mappedLength
        let word = file.logEndWord
        snapshot.endWord = word
        let sealed = snapshot.header.isEncrypted
        var limit = size
        var extraDamage: PrefsDamage?
        var freeSpaceEndsLog = false
        if let end = Format.decodeLogEnd(word), end >= Format.logStart, end & 7 == 0 {
            if end <= size {
                limit = end
            } else {
                extraDamage = PrefsDamage(
                    range: size..<end, records: 1, keys: [], reason: "the file ends before the log end")
            }
        } else {
            // The log-end word is damaged: salvage-scan the whole file; zeros after the last record are free.
            freeSpaceEndsLog = true
            snapshot.damage.append(
                PrefsDamage(
                    range: Format.logEndOffset..<Format.logEndOffset + 8, records: 0, keys: [],
                    reason: "the header's log-end word is damaged"))
        }
        // Slots for one key per 64 bytes of log (a typical record is 48 to 64 bytes), and array room for as
        // many keys as the log can hold records (no copy while the scan fills them).
        let log = max(0, limit - Format.logStart)
        var index = KeyIndex(
            minimumCapacity: log / 64,
            reservedCapacity: log / Format.recordLength(keyLength: 1, valueLength: 0))
        var liveBytes = 0
        let result = file.withBytes { bytes in
            LogScanner.scan(
                bytes, from: Format.logStart, to: limit, freeSpaceEndsLog: freeSpaceEndsLog, plainKeys: !sealed
            ) { record in
                applyToIndex(record, bytes: bytes, sealed: sealed, index: &index, liveBytes: &liveBytes)
            }
        }
        snapshot.index = index
        snapshot.liveBytes = liveBytes
        snapshot.recordCount = result.recordsKept
        snapshot.maxSeq = result.maxSeq
        snapshot.end = result.end
        snapshot.damage += result.damage
        if var extra = extraDamage {
            // Merge with a damaged range running to the end of the file (the torn last record).
            if let last = snapshot.damage.last, last.range.upperBound == size {
                extra = PrefsDamage(
                    range: last.range.lowerBound..<extra.range.upperBound, records: last.records, keys: last.keys,
                    reason: extra.reason)
                snapshot.damage.removeLast()
            }
            snapshot.damage.append(extra)
        }
    }

    /// The index key of a record: its key for a plain store, the hex of its tag for a sealed one.
    @inline(__always)
    static func indexKey(_ keyBytes: UnsafeRawBufferPointer, sealed: Bool) -> String {
        sealed ? hex(keyBytes) : String(decoding: keyBytes, as: UTF8.self)
    }

    static func hex(_ bytes: some Collection<UInt8>) -> String {
        String(unsafeUninitializedCapacity: bytes.count * 2) { out in
            var i = 0
            for b in bytes {
                out[i] = hexDigit(b >> 4)
                out[i + 1] = hexDigit(b & 15)
                i += 2
            }
            return i
        }
    }

    @inline(__always)
    private static func hexDigit(_ nibble: UInt8) -> UInt8 { nibble < 10 ? 0x30 + nibble : 0x57 + nibble }

    /// The bytes of a lowercase hex string made by `hex`.
    static func unhex(_ text: String) -> [UInt8] {
        var text = text
        return text.withUTF8 { digits in
            precondition(digits.count % 2 == 0, "an index key of a sealed store is hex")
            func value(_ c: UInt8) -> UInt8 { c <= 0x39 ? c - 0x30 : c - 0x57 }
            return (0..<digits.count / 2).map { value(digits[2 * $0]) << 4 | value(digits[2 * $0 + 1]) }
        }
    }

    /// Applies one committed record to an index.
    @inline(__always)
    static func applyToIndex(
        _ record: RecordHeader, bytes: UnsafeRawBufferPointer, sealed: Bool, index: inout KeyIndex,
        liveBytes: inout Int
    ) {
        switch record.kind {
        case .set:
            guard record.isSealed == sealed else { return }
            let entry = Entry(record)
            if let old = index.updateValue(entry, forKey: indexKey(record.key(in: bytes), sealed: sealed)) {
                liveBytes -= old.recordLength
            }
            liveBytes += entry.recordLength
        case .delete:
            if let old = index.removeValue(forKey: indexKey(record.key(in: bytes), sealed: sealed)) {
                liveBytes -= old.recordLength
            }
        case .removeAll:
            index.removeAll(keepingCapacity: true)
            liveBytes = 0
        case .commit:
            break
        }
    }

    // MARK: Catching up with other handles

    /// Catches up when the mapped header says another handle wrote, compacted or restored. Two atomic loads
    /// when nothing changed.
    @inline(__always)
    func refreshIfNeeded() throws(PrefsError) {
        if file.logEndWord == knownEndWord && !file.isSuperseded { return }
        try refresh()
    }

    func refresh() throws(PrefsError) {
        if file.isSuperseded {
            try withWriterLock { () throws(PrefsError) in try catchUpLocked() }
            return
        }
        let word = file.logEndWord
        guard word != knownEndWord else { return }
        guard let end = Format.decodeLogEnd(word), end >= knownEnd, end & 7 == 0 else {
            // The log end is damaged or went backwards under us: reload the file (recovering it if needed).
            try withWriterLock { () throws(PrefsError) in try reload() }
            return
        }
        if end > file.mappedLength {
            let size = try file.currentSize()
            guard size >= end else {
                try withWriterLock { () throws(PrefsError) in try reload() }
                return
            }
            try file.remap(length: size)
        }
        appendScan(to: end, word: word)
    }

    /// Reads records other handles appended in `[knownEnd, end)`.
    private func appendScan(to end: Int, word: UInt64) {
        let sealed = isSealed
        var changed: [String] = []
        var removedAll = false
        let wants = wantsChanges
        var index = self.index
        self.index = KeyIndex()  // keep the index uniquely referenced while it is mutated
        var liveBytes = self.liveBytes
        let result = file.withBytes { bytes in
            LogScanner.scan(
                bytes, from: knownEnd, to: end, freeSpaceEndsLog: false, plainKeys: !sealed, minimumSeq: nextSeq - 1
            ) { record in
                if wants {
                    if record.kind == .removeAll {
                        removedAll = true
                        changed += index.keys
                    } else if record.kind != .commit {
                        changed.append(Engine.indexKey(record.key(in: bytes), sealed: sealed))
                    }
                }
                Engine.applyToIndex(record, bytes: bytes, sealed: sealed, index: &index, liveBytes: &liveBytes)
            }
        }
        self.index = index
        self.liveBytes = liveBytes
        recordCount += result.recordsKept
        nextSeq = max(nextSeq, result.maxSeq + 1)
        knownEnd = end
        knownEndWord = word
        if !result.damage.isEmpty {
            pendingLog.append(
                (
                    .error,
                    "damaged records appeared in \(paths.data) while it was open: \(result.damage); they were skipped"
                ))
        }
        _ = removedAll
        if wants && !changed.isEmpty {
            pendingChanges.append(PrefsChange(keys: names(forIndexKeys: changed), isExternal: true))
        }
    }

    /// Takes the writer lock for `body` unless this handle already holds it (or cannot take it).
    func withWriterLock(_ body: () throws(PrefsError) -> Void) throws(PrefsError) {
        if holdsWriterLock || lockFD < 0 || !multiProcess {
            try body()
            return
        }
        try lockWriter()
        holdsWriterLock = true
        defer {
            holdsWriterLock = false
            unlockWriter()
        }
        try body()
    }

    /// Under the writer lock: follows a compaction or restore by another handle, then reads new records.
    func catchUpLocked() throws(PrefsError) {
        if file.isSuperseded {
            if case .success(let status) = Sys.lstat(paths.data), status.inode == file.identity.inode,
                status.device == file.identity.device
            {
                // Still our file: the flag is stale, from a compactor killed between flag and rename.
                if file.writable { file.setSuperseded(false) }
            } else {
                try reload()
            }
        }
        if file.logEndWord != knownEndWord && !file.isSuperseded { try refresh() }
    }

    /// Opens the file the path names now and replaces the state with it (recovering it when damaged).
    func reload() throws(PrefsError) {
        var cause = readOnlyCause
        let snapshot = try Engine.loadSnapshot(paths: paths, sealer: sealer, readOnlyCause: &cause, create: false)
        let old = (file: file, index: index)
        adopt(snapshot)
        if !snapshot.damage.isEmpty {
            try recover(damage: snapshot.damage, recordsKept: snapshot.recordCount)
        }
        if wantsChanges {
            if file.writable && multiProcess && !file.isWatched { file.setWatched(true) }
            let changed = changedKeys(from: old.file, oldIndex: old.index)
            if !changed.isEmpty { pendingChanges.append(PrefsChange(keys: changed, isExternal: true)) }
        }
    }

    /// Replaces the file and index with a snapshot's.
    func adopt(_ snapshot: Snapshot) {
        file = snapshot.file
        header = snapshot.header
        isSealed = snapshot.header.isEncrypted
        index = snapshot.index
        liveBytes = snapshot.liveBytes
        recordCount = snapshot.recordCount
        // The file is the truth: a new image is numbered from 1 again.
        nextSeq = snapshot.maxSeq + 1
        knownEnd = snapshot.end
        knownEndWord = snapshot.endWord
        names = names.filter { index[$0.key] != nil }
        autoCompactionBlockedBelow = 0
    }

    // MARK: Names

    /// Key names for index keys, sorted: the keys themselves in a plain store; names learned by opening
    /// records in a sealed one (unreadable ones are left out).
    func names(forIndexKeys keys: [String]) -> [String] {
        guard isSealed else { return Engine.sortedUnique(keys) }
        var out: [String] = []
        for key in keys {
            if let name = try? name(forIndexKey: key) { out.append(name) }
        }
        return Engine.sortedUnique(out)
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

    /// The name of a sealed entry, opening its record the first time.
    func name(forIndexKey key: String) throws(PrefsError) -> String? {
        guard isSealed else { return key }
        if let name = names[key] { return name }
        guard let entry = index[key] else { return nil }
        let name = try withPlaintext(of: entry, expectedName: nil) { name, _ in name }
        names[key] = name
        return name
    }

    // MARK: Reading values

    /// The index key for a key name: the name itself, or the hex of the sealer's tag.
    @inline(__always)
    func indexKey(forName name: String) -> String {
        guard isSealed, let sealer else { return name }
        if let known = indexKeyCache[ByteKey(name)] { return known }
        let key = Engine.hex(sealer.tag(forKey: name))
        if indexKeyCache.count >= Engine.indexKeyCacheLimit { indexKeyCache.removeAll(keepingCapacity: true) }
        indexKeyCache[ByteKey(name)] = key
        return key
    }

    /// The live (unexpired) entry for an index key.
    @inline(__always)
    func liveEntry(_ key: String) -> Entry? {
        guard let entry = index[key], !entry.isExpired(now: Sys.nowMilliseconds()) else { return nil }
        return entry
    }

    /// Passes the plain value bytes of `entry` to `body`: straight from the mapping, or opened by the sealer.
    @inline(__always)
    func withValue<R>(
        of entry: Entry, name: String, _ body: (UnsafeRawBufferPointer) throws(PrefsError) -> R
    ) throws(PrefsError) -> R {
        if !entry.sealed {
            return try file.withBytes { bytes throws(PrefsError) in
                try body(
                    UnsafeRawBufferPointer(rebasing: bytes[entry.valueOffset..<entry.valueOffset + entry.valueLength]))
            }
        }
        return try withPlaintext(of: entry, expectedName: name) { _, value throws(PrefsError) in try body(value) }
    }

    /// Opens a sealed entry: plaintext is `u32 nameLength | name | value`.
    func withPlaintext<R>(
        of entry: Entry, expectedName: String?,
        _ body: (String, UnsafeRawBufferPointer) throws(PrefsError) -> R
    ) throws(PrefsError) -> R {
        guard let sealer else {
            throw PrefsError(.encrypted, "a sealed record was found without a sealer", path: paths.data)
        }
        let uuid = header.uuid
        do {
            return try file.withBytes { bytes in
                let tag = UnsafeRawBufferPointer(rebasing: bytes[entry.keyOffset..<entry.keyOffset + entry.keyLength])
                let sealed = UnsafeRawBufferPointer(
                    rebasing: bytes[entry.valueOffset..<entry.valueOffset + entry.valueLength])
                return try Engine.withAssociatedData(uuid: uuid, tag: tag, type: entry.type, expiresAt: entry.expiresAt)
                {
                    ad in
                    try sealer.open(sealed, associatedData: ad) { plain in
                        guard plain.count >= 4 else { throw SealedPayloadError() }
                        let nameLength = Int(UInt32(littleEndian: plain.loadUnaligned(as: UInt32.self)))
                        guard 4 + nameLength <= plain.count else { throw SealedPayloadError() }
                        let nameBytes = UnsafeRawBufferPointer(rebasing: plain[4..<4 + nameLength])
                        let name: String
                        if let expectedName {
                            // The sealed name must be exactly the one asked for: compare bytes, no decoding.
                            var expected = expectedName
                            let same = expected.withUTF8 { $0.count == nameLength && nameBytes.elementsEqual($0) }
                            guard same else { throw SealedPayloadError() }
                            name = expectedName
                        } else {
                            guard let decoded = String(validating: nameBytes, as: UTF8.self) else {
                                throw SealedPayloadError()
                            }
                            name = decoded
                        }
                        return try body(name, UnsafeRawBufferPointer(rebasing: plain[(4 + nameLength)...]))
                    }
                }
            }
        } catch let error as PrefsError {
            throw error
        } catch {
            throw PrefsError(
                .tampered,
                "a sealed record \(expectedName.map { "for key \"\($0)\" " } ?? "")failed to open: it was altered, "
                    + "moved or sealed with another key", path: paths.data, underlying: error)
        }
    }

    /// Builds `store UUID | tag | valueType | expiresAt (i64 LE)`, the associated data of a sealed value.
    static func withAssociatedData<R>(
        uuid: StoreUUID, tag: UnsafeRawBufferPointer, type: ValueType, expiresAt: Int64,
        _ body: (UnsafeRawBufferPointer) throws -> R
    ) rethrows -> R {
        // On the stack (a heap array here was a third of a warm sealed read's allocations).
        let count = 16 + tag.count + 9
        return try withUnsafeTemporaryAllocation(byteCount: count, alignment: 8) { ad in
            uuid.withUnsafeBytes { ad.copyMemory(from: $0) }
            let rest = UnsafeMutableRawBufferPointer(rebasing: ad[16...])
            if !tag.isEmpty { rest.copyMemory(from: tag) }
            rest[tag.count] = type.rawValue
            rest.storeBytes(of: expiresAt.littleEndian, toByteOffset: tag.count + 1, as: Int64.self)
            return try body(UnsafeRawBufferPointer(ad))
        }
    }

    var readOnlyError: PrefsError {
        let cause = readOnlyCause ?? .readOnlyFileSystem
        return PrefsError.system(cause, "open", "cannot write: the store was opened read-only", path: paths.data)
    }

    func takeEvents() -> (changes: [PrefsChange], log: [(level: Logger.Level, message: Logger.Message)]) {
        defer {
            pendingChanges.removeAll()
            pendingLog.removeAll()
        }
        return (pendingChanges, pendingLog)
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

/// A sealed value's plaintext does not have the expected shape (or names another key).
struct SealedPayloadError: Error {}

/// fsyncs the store's directory so that a rename or a new file name survives a power loss. Failures are
/// ignored: the data is already in place for every process; only power-loss durability of the name is at risk.
func syncDirectory(_ paths: StorePaths) {
    guard case .success(let fd) = Sys.open(paths.directory, .directory) else { return }
    _ = Sys.fsync(fd)
    Sys.close(fd)
}
