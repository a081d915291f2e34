// The base image of a buffered store (Documentation/FileProtocols.md, "Compaction"): an automatic compaction of a
// `.buffered` store does not wait for the disk. The newest file made durable (flushed by a `sync()`, or by the
// flushed path that installed it) keeps a second name, `<id>.prefs.prev`, before the first unflushed image is
// renamed over the data file, and every such image names that base's generation in its header. A `sync()` (or a
// synchronous write) flushes the current image and the directory, and only then removes the base. A power cut
// in between finds either an image that verifies, or a damaged one whose base is still there:
// `Recovery.restoreBase` writes one image of the base and every record of the damaged image that verifies.
import SystemLayer

extension StoreLog {
    /// Under the writer lock, before a deferred compaction: the generation of the base image the new image may
    /// name, making one when needed; nil when none can be trusted (the compaction then flushes).
    ///
    /// - The current file names a base that `<id>.prefs.prev` holds: that base stays.
    /// - The current file names no base, or names one that a `sync()` removed (no `.prev`): the current file is
    ///   durable up to the last promise (it was flushed when installed, or by that `sync()`), so it becomes the base:
    ///   linked as `.prev` (replacing a stale one), then the directory fsynced, so that the link is durable before
    ///   any unflushed image is renamed over the data file.
    /// - Anything else in `.prev` (another store's, another owner's, not a store): nil.
    ///
    /// A base found so is remembered with its `lstat` (`verifiedBase`): the next compaction that names it takes it
    /// again on one `lstat` showing the same file, unchanged since (the same change time), instead of opening it and
    /// reading its header (six system calls, a sixth of a small store's compaction).
    func prepareBase() -> UInt64? {
        let current = header.generation
        if let base = header.baseGeneration, verifiedBase.holds(base, of: header.uuid, paths: paths) { return base }
        var status: FileStatus?
        let existing = StoreLog.baseHeader(paths: paths, sealer: sealer, status: &status)
        if let base = header.baseGeneration {
            if case .ours(let baseHeader) = existing, baseHeader.uuid == header.uuid,
                baseHeader.generation == base
            {
                if let status { verifiedBase = VerifiedBase(status: status, uuid: header.uuid, generation: base) }
                return base
            }
            guard case .absent = existing else { return nil }
        }
        // A file whose flush failed is not known durable: no base, and the compaction flushes its image (which
        // replaces it).
        if file.flushFailed { return nil }
        if header.baseGeneration != nil {
            // (A base named but gone: made again below from the current file, durable since the `sync()` that
            // removed it.)
        } else if case .absent = existing {
            // Nothing to replace.
        } else if directorySyncedGeneration != current && (try? syncDirectoryIfNeeded()) == nil {
            // The current file's name is not known durable (its directory flush failed): the base it replaced is
            // not removed before it is (a removal that reached the disk first would leave a power cut the old name
            // without its base); no base, and the compaction flushes its image.
            return nil
        } else if case .failure = Sys.unlink(paths.previous) {
            return nil
        }
        guard case .success = Sys.link(paths.data, paths.previous) else { return nil }
        // The link must be on the disk before an unflushed image is renamed over the data file.
        guard syncDirectoryChecked(paths) == nil else { return nil }
        return current
    }

    /// Under the writer lock, after the current file was flushed (a `sync()`, a synchronous write): when it is an
    /// image renamed in place unflushed, makes its name durable, then removes its base image and makes that
    /// durable too (a base that came back after a power cut would be taken for the base of the next unflushed
    /// image, and lack what this flush promised). Once per image and handle. Throws when the directory cannot be
    /// flushed: the promise cannot be kept.
    func releaseBaseIfNeeded() throws(PrefsError) {
        guard header.baseGeneration != nil, baseReleasedGeneration != header.generation else { return }
        if let error = syncDirectoryChecked(paths) { throw error }
        directorySyncedGeneration = header.generation
        switch Sys.unlink(paths.previous) {
        case .success, .failure(.noEntry): break
        case .failure(let e):
            throw PrefsError.system(e, "unlink", "cannot remove the store's base image", path: paths.previous)
        }
        if let error = syncDirectoryChecked(paths) { throw error }
        baseReleasedGeneration = header.generation
        dropSpare()
    }

    /// Under the writer lock, once the base image is gone: drops this handle's spare file and removes
    /// `<id>.prefs.tmp`, whichever handle's spare it is (a spare names the base just removed: no later compaction may
    /// write into it; under the writer lock nothing else is being written there), so that the directory holds no
    /// more than the store's file.
    func dropSpare() {
        spare = nil
        _ = Sys.unlink(paths.temporary)
    }

    /// Whether `<id>.prefs.prev` exists (one `lstat`): a handle reading a persisted table then reads its image
    /// whole before the base may go.
    var baseFileExists: Bool {
        if case .success = Sys.lstat(paths.previous) { return true }
        return false
    }

    /// What `<id>.prefs.prev` holds.
    enum BaseFile {
        case absent
        /// A store file of this user whose header verifies (and, sealed, matches the sealer).
        case ours(Header)
        /// Anything else: not a regular file, another owner's or open to others, not a store, a wrong key.
        case foreign
    }

    /// Reads the header of `<id>.prefs.prev` (never following a link, never blocking on a FIFO), checked as the
    /// data file's is (FileTrust) and against the sealer.
    static func baseHeader(paths: StorePaths, sealer: (any PrefsSealer)?) -> BaseFile {
        var status: FileStatus?
        return baseHeader(paths: paths, sealer: sealer, status: &status)
    }

    /// `baseHeader`, and the `fstat` of the file it read (set when the file was opened).
    static func baseHeader(paths: StorePaths, sealer: (any PrefsSealer)?, status known: inout FileStatus?) -> BaseFile {
        let fd: Int32
        switch Sys.open(paths.previous, .readOnlyNonBlocking) {
        case .success(let f): fd = f
        case .failure(let e) where e == .noEntry: return .absent
        case .failure: return .foreign
        }
        defer { Sys.close(fd) }
        guard case .success(let status) = Sys.fstat(fd), status.isRegular,
            (try? FileTrust.checkFile(status, path: paths.previous, isData: true, writable: true)) != nil,
            let header = try? readHeader(fd: fd, path: paths.previous, sealer: sealer)
        else { return .foreign }
        known = status
        return .ours(header)
    }
}

/// The base image a handle last verified (`StoreLog.prepareBase`): `<id>.prefs.prev`'s status then, and the store and
/// generation its header named. A file whose `lstat` gives the same device, inode, size, mode, owner, link count and
/// change time is the same file, not written or changed since (the kernel sets the change time at every write call
/// and metadata change, and no call sets it back; a store through a shared mapping sets it only at the first store
/// into a page since that page was written back, and a kernel before 6.13 keeps it to a clock tick: a write into the
/// base within the tick of its check, keeping its size, is not seen here), so its header is still the one verified.
/// Nothing here is trusted further: PrefsKV never writes into a base, and a recovery reads the base whole and checks
/// every record of it (`Recovery.restoreBase`).
struct VerifiedBase {
    private var status = FileStatus(size: 0, device: 0, inode: 0, mode: 0)
    private var uuid = StoreUUID(low: 0, high: 0)
    private var generation: UInt64 = 0
    private var valid = false

    init() {}

    init(status: FileStatus, uuid: StoreUUID, generation: UInt64) {
        self.status = status
        self.uuid = uuid
        self.generation = generation
        valid = true
    }

    /// Whether `<id>.prefs.prev` is still the verified base of generation `generation` of store `uuid` (one `lstat`).
    func holds(_ generation: UInt64, of uuid: StoreUUID, paths: StorePaths) -> Bool {
        guard valid, generation == self.generation, uuid == self.uuid,
            case .success(let now) = Sys.lstat(paths.previous)
        else { return false }
        return now == status
    }
}

extension Recovery {
    /// The base image of the damaged file `log` holds, when `<id>.prefs.prev` is the one its header names (same
    /// store, that generation, checked as the data file is).
    static func usableBase(of log: StoreLog) -> Bool {
        guard let base = log.header.baseGeneration,
            case .ours(let header) = StoreLog.baseHeader(paths: log.paths, sealer: log.sealer)
        else { return false }
        return header.uuid == log.header.uuid && header.generation == base
    }

    /// Under the writer lock, for a damaged data file whose base image is there (`usableBase`) and a policy that
    /// salvages: the state of a buffered store cut by a power loss before a `sync()` made its newest image durable.
    /// Copies the damaged file aside byte for byte (its quarantine copy), reads the base (a tail written to it after
    /// its last flush and cut too is damage like any: the base is then quarantined as well), and installs one new
    /// image: the base's live records, then every committed record of the damaged file that verifies, in its log
    /// order (renumbered, and in a sealed store authenticated for the new image). What the base holds is what was
    /// promised durable, and nothing that verifies in the newer file is lost. The image is flushed and renamed over
    /// the data file as any recovery's, and the base removed after: a kill before the rename leaves both files as
    /// they were (the next open does this again), after it the restored store.
    static func restoreBase(
        _ log: StoreLog, damage: [PrefsDamage], recordsKept: Int, watched: Bool
    ) throws(PrefsError) -> (report: PrefsRecoveryReport, baseRecovery: PrefsRecoveryReport?) {
        let paths = log.paths
        let damaged = log.file
        let damagedHeader = log.header
        var report = Recovery.report(path: paths.data, damage: damage, recordsKept: recordsKept)
        report.quarantinePath = try quarantine(damaged, paths: paths)
        // The records of the damaged file that verify, in log order.
        let records = committedRecords(of: damaged, header: damagedHeader, sealer: log.sealer)
        let touched = touches(of: records, in: damaged, damage: damage)
        // The base, read whole.
        let fd = try Sys.open(paths.previous, .readOnlyNonBlocking).orThrow(
            "open", "cannot open the store's base image", path: paths.previous)
        let base = try StoreLog.scannedSnapshot(fd: fd, path: paths.previous, sealer: log.sealer, writable: false)
        var baseRecovery: PrefsRecoveryReport?
        if !base.damage.isEmpty {
            baseRecovery = Recovery.report(path: paths.previous, damage: base.damage, recordsKept: base.recordCount)
            baseRecovery?.quarantinePath = try quarantine(base.file, paths: paths)
        }
        // One image of both: the base's live records in its log order, then the damaged file's records.
        let now = Sys.nowMilliseconds()
        let live = base.index.values.filter { !$0.isExpired(now: now) }.sorted { $0.recordOffset < $1.recordOffset }
        let newHeader = damagedHeader.nextImage()
        let auth = RecordAuth(header: newHeader, sealer: log.sealer)
        let baseLength = StoreImage.length(of: live, authenticated: RecordAuth.signsSets(auth))
        let length =
            baseLength
            + records.reduce(0) {
                $0
                    + Format.recordLength(
                        keyLength: $1.keyLength, valueLength: $1.valueLength,
                        authenticated: $1.kind == .set ? RecordAuth.signsSets(auth) : auth != nil)
            }
        let image = try StoreImage.write(
            paths: paths, header: newHeader, auth: auth, logLength: length, capacity: Format.headerSize + 2 * length,
            watched: watched, writingBlocks: log.synchronous
        ) { bytes throws(PrefsError) in
            let intact = try base.file.withBytes { source throws(PrefsError) in
                try StoreImage.copyRecords(
                    live, from: source, sourceHeader: base.header, sourcePath: paths.previous, into: bytes,
                    header: newHeader, auth: auth)
            }
            if !intact || base.file.hasFaulted || damaged.hasFaulted { throw log.changedUnderneath() }
            let copied = damaged.withBytes { source in
                var offset = newHeader.firstRecordOffset + baseLength
                for (i, record) in records.enumerated() {
                    guard
                        let length = StoreImage.copy(
                            record, from: source, sourceHeader: damagedHeader, into: bytes, at: offset,
                            seq: UInt64(live.count + 1 + i), auth: auth, seed: newHeader.recordSeed)
                    else { return false }
                    offset += length
                }
                return true
            }
            if !copied || damaged.hasFaulted { throw log.changedUnderneath() }
        }
        try log.install(image, header: newHeader)
        nameCost(&report, touches: touched, index: log.index)
        if var recovered = baseRecovery, recovered.damage.contains(where: { !$0.droppedWrites.isEmpty }) {
            // The base's dropped writes, weighed against the base's committed records and then every record of the
            // damaged file, all applied after them.
            var touches = touches(of: committedRecords(of: base.file, header: base.header, sealer: log.sealer),
                in: base.file, damage: recovered.damage)
            let after = Int.max
            damaged.withBytes { bytes in
                for record in records {
                    if record.kind == .removeAll {
                        touches.lastClear = after
                    } else if record.keyLength > 0 {
                        touches.last[Array(record.key(in: bytes))] = after
                    }
                }
            }
            nameCost(&recovered, touches: touches, index: log.index)
            baseRecovery = recovered
        }
        return (report, baseRecovery)
    }
}

extension Recovery {
    /// Under the writer lock, at an open that salvages: the data file has no header copy that verifies (an image a
    /// buffered store's compaction renamed in place unflushed, whose first pages never reached the disk) and
    /// `<id>.prefs.prev`, a store file of this user, is there. Unless the data file reads by now, it keeps its bytes
    /// under a quarantine name (a link, mode 0400), the base image is renamed back over it, and the base is read.
    /// Nil when the data file is not a regular file or there is no such base: the open goes on as before.
    static func restoreBaseOverUnreadable(
        paths: StorePaths, directory: Int32, sealer: (any PrefsSealer)?, readOnlyCause: inout Errno?,
        unreadable: PrefsError
    ) throws(PrefsError) -> (snapshot: Snapshot, report: PrefsRecoveryReport?)? {
        do throws(PrefsError) {
            let snapshot = try StoreLog.loadSnapshot(
                paths: paths, directory: directory, sealer: sealer, readOnlyCause: &readOnlyCause, create: true)
            return (snapshot, nil)
        } catch  where error.code == .notAStore || error.code == .corrupted {
            guard case .success(let status) = Sys.lstat(paths.data), status.isRegular, neverWritten(paths.data),
                case .ours = StoreLog.baseHeader(paths: paths, sealer: sealer)
            else { return nil }
            let path = freeQuarantinePath(paths)
            try Sys.link(paths.data, path).orThrow("link", "cannot keep the unreadable store file aside", path: path)
            _ = Sys.chmod(path, 0o400)
            try Sys.rename(paths.previous, paths.data).orThrow(
                "rename", "cannot put the store's base image back in place", path: paths.data)
            syncDirectory(paths)
            let snapshot = try StoreLog.loadSnapshot(
                paths: paths, directory: directory, sealer: sealer, readOnlyCause: &readOnlyCause, create: false)
            let damage = PrefsDamage(
                range: 0..<status.size, records: 0, keys: [],
                reason: "no copy of the header verifies (\(error.message)): an image renamed in place before it was "
                    + "flushed, cut by a power loss; the store was restored from its base image \(paths.previous), "
                    + "its state as of the last sync()")
            let report = PrefsRecoveryReport(
                path: paths.data, quarantinePath: path, recordsKept: 0, recordsLost: 0, lostKeys: [],
                damage: [damage], recoveredAt: Sys.nowMilliseconds())
            return (snapshot, report)
        }
    }

    /// Whether the first sector of the file's header page and the first sector of its header copy (offset 4096)
    /// read as zeros (or are not there): what an image whose blocks were preallocated holds where nothing it wrote
    /// reached the disk. A header damaged any other way (a flipped bit, a page of garbage) is not a cut image's,
    /// and is never answered with a base image, which could be stale.
    static func neverWritten(_ path: String) -> Bool {
        guard case .success(let fd) = Sys.open(path, .readOnlyNonBlocking) else { return false }
        defer { Sys.close(fd) }
        return withUnsafeTemporaryAllocation(byteCount: 512, alignment: 8) { sector in
            for offset in [0, Format.logStart] {
                sector.initializeMemory(as: UInt8.self, repeating: 0)
                guard case .success = Sys.pread(fd, into: sector, at: offset) else { return false }
                if sector.contains(where: { $0 != 0 }) { return false }
            }
            return true
        }
    }
}
