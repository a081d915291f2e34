// Recovery of a damaged data file (Documentation/FileProtocols.md, "Recovery"): the scan (StoreLog+Load.swift,
// LogScanner.swift) keeps every record that verifies and reports the damage; here the policy is applied, the damaged original is
// copied aside byte for byte (its quarantine copy), and a compacted image of what verified replaces it. The
// report types are public, in PrefsStore+Recovery.swift.
import Logging
import SystemLayer

enum Recovery {
    /// The snapshot an open starts from, and which recovery it needs. An intact data file is read without the
    /// writer lock (a multi-process handle holds only the open lock then): its records up to the published log end
    /// never change, another handle's compaction marks it superseded, which the first access notices, and
    /// recovery, creation and clearing a stale superseded flag all happen under the writer lock (the lock page's
    /// mutex, taken here when needed: `pageLocked`). Taking that mutex writes to the lock file's page, a journaled
    /// page fault in a fresh process, so an intact file's open does without it.
    ///
    /// A file no copy of whose header verifies is, under `.salvage` beside a base image, a buffered store's unflushed
    /// image cut by a power loss: the base image is put back (BaseImage.swift) and the file kept aside (`setAside`).
    /// Otherwise it is refused (the default), or, when the app chose that (`unreadableFile`), rebuilt from the
    /// records of its body that verify, its original kept aside (`mustSalvage`: what is left must be salvaged).
    /// The caller ends the open lock (`StoreLock.endOpenLock(pageLocked:)`), thrown or not.
    static func snapshotForOpen(
        paths: StorePaths, lock: StoreLock, configuration: PrefsStore.Configuration, readOnlyCause: inout Errno?,
        pageLocked: inout Bool, setAside: inout [PrefsRecoveryReport], mustSalvage: inout Bool
    ) throws(PrefsError) -> Snapshot {
        let sealer = configuration.sealer
        do throws(PrefsError) {
            if lock.lockPage != nil,
                case .intact(let intact) = try StoreLog.loadSnapshotIfIntact(
                    paths: paths, directory: lock.directoryFD, sealer: sealer, readOnlyCause: &readOnlyCause,
                    lazy: true)
            {
                return intact
            }
            pageLocked = try lock.lockPageForOpen()
            return try StoreLog.loadSnapshot(
                paths: paths, directory: lock.directoryFD, sealer: sealer, readOnlyCause: &readOnlyCause,
                create: !configuration.readOnly, lazy: true)
        } catch {
            let unreadable = error.code == .notAStore || error.code == .corrupted
            if configuration.recovery == .salvage, readOnlyCause == nil, unreadable,
                case .ours = StoreLog.baseHeader(paths: paths, sealer: sealer)
            {
                if !pageLocked { pageLocked = try lock.lockPageForOpen() }
                if let restored = try restoreBaseOverUnreadable(
                    paths: paths, directory: lock.directoryFD, sealer: sealer, readOnlyCause: &readOnlyCause,
                    unreadable: error)
                {
                    if let report = restored.report { setAside = [report] }
                    return restored.snapshot
                }
            }
            // (`readOnlyCause` as the base image's attempt left it.)
            guard configuration.unreadableFile == .quarantineAndRebuild, readOnlyCause == nil, unreadable else {
                throw error
            }
            if !pageLocked { pageLocked = try lock.lockPageForOpen() }
            let rebuilt = try rebuild(
                paths: paths, directory: lock.directoryFD, sealer: sealer, readOnlyCause: &readOnlyCause,
                unreadable: error)
            if let report = rebuilt.setAside { setAside = [report] }
            mustSalvage = rebuilt.mustSalvage
            return rebuilt.snapshot
        }
    }

    /// Acts on damage found by a scan of the file `log` holds (already adopted, holding what verified), as the
    /// policy says: under `.salvage`, an image a buffered store's compaction left unflushed, cut by a power loss, is
    /// replaced by its base image (the durable state) with what verifies of the damaged file on top of it
    /// (BaseImage.swift); anything else goes through `recover`. Lines for the log are appended to `logLines`.
    static func act(
        on damage: [PrefsDamage], in log: StoreLog, recordsKept: Int, policy: PrefsStore.RecoveryPolicy,
        watched: Bool, logLines: inout [(level: Logger.Level, message: Logger.Message)]
    ) throws(PrefsError) -> PrefsRecoveryReport {
        guard policy == .salvage && log.file.writable && usableBase(of: log) else {
            return try recover(log, damage: damage, recordsKept: recordsKept, policy: policy, watched: watched)
        }
        let restored = try restoreBase(log, damage: damage, recordsKept: recordsKept, watched: watched)
        let message =
            "\(log.paths.data): its newest image was not flushed when its writer stopped (a power loss?); the store "
            + "was restored from its base image \(log.paths.previous) (its state as of the last sync()) and every "
            + "record of the damaged image that verifies was applied again"
        logLines.append((.warning, "\(message)"))
        if let base = restored.baseRecovery { logLines.append((.error, "\(base.description)")) }
        return restored.report
    }

    /// Acts on damage found by a scan of the file `log` holds (already adopted, holding what verified): throws
    /// under `.fail`; otherwise, when the file is writable, quarantines it and compacts what verified into a new
    /// image. Returns the report.
    ///
    /// `scanned`: the snapshot the damage was found in, when the log has not adopted it (a refusal under `.fail`
    /// while catching up): what the report names is weighed against it, not against the log's older state.
    static func recover(
        _ log: StoreLog, damage: [PrefsDamage], recordsKept: Int, policy: PrefsStore.RecoveryPolicy, watched: Bool,
        scanned: Snapshot? = nil
    ) throws(PrefsError) -> PrefsRecoveryReport {
        let paths = log.paths
        var report = Recovery.report(path: paths.data, damage: damage, recordsKept: recordsKept)
        // What survives is what the scan's index holds (compaction keeps exactly its live entries).
        nameCost(
            &report, file: scanned?.file ?? log.file, header: scanned?.header ?? log.header, sealer: log.sealer,
            index: scanned?.index ?? log.index)
        if policy == .fail && damage.contains(where: \.isTampering) {
            throw PrefsError(
                .tampered,
                "records of the sealed store verify their checksum but not their authenticator: they were forged, "
                    + "replayed or moved by someone without the key; the file was left untouched (an open with the "
                    + "recovery policy .salvage, or a repair, keeps what verifies): " + report.findings, path: paths.data)
        }
        if policy == .fail {
            throw PrefsError(
                .corrupted,
                "the store is damaged and the recovery policy is .fail; the file was left untouched (an open with the "
                    + "recovery policy .salvage, or a repair, keeps what verifies): " + report.findings, path: paths.data)
        }
        if log.file.writable {
            report.quarantinePath = try quarantine(log.file, paths: paths)
            _ = try log.compact(threshold: nil, watched: watched)
        }
        return report
    }

    /// Copies the damaged file, byte for byte, to `<data>.corrupt-<UTC time>[-n]`, mode 0400.
    static func quarantine(_ file: MappedFile, paths: StorePaths) throws(PrefsError) -> String {
        let base = quarantineBase(paths)
        var attempt = 0
        while true {
            let path = quarantinePath(base, attempt: attempt)
            switch Sys.open(path, .createNew) {
            case .failure(let e) where e == .exists:
                attempt += 1
                continue
            case .failure(let e):
                throw PrefsError.system(e, "open", "cannot create the quarantine copy of a damaged store", path: path)
            case .success(let fd):
                defer { Sys.close(fd) }
                do {
                    try file.withBytes { bytes throws(PrefsError) in
                        try Sys.pwrite(fd, bytes, at: 0).orThrow(
                            "pwrite", "cannot copy a damaged store aside", path: path)
                    }
                    try Sys.fdatasync(fd).orThrow("fdatasync", "cannot flush the quarantine copy", path: path)
                    try Sys.fchmod(fd, 0o400).orThrow("fchmod", "cannot make the quarantine copy read-only", path: path)
                } catch {
                    _ = Sys.unlink(path)
                    throw error
                }
                syncDirectory(paths)
                return path
            }
        }
    }

    /// Under the writer lock, for `unreadableFile = .quarantineAndRebuild` (and `PrefsStore.repair`): no copy of
    /// the data file's header verifies (`unreadable`: not a store, or a header that does not verify). Reads it
    /// once more (another process may have replaced it meanwhile); when it is still unreadable and a regular file:
    ///
    /// - a file of at least a page is mapped and its body scanned for records that verify, under a header of last
    ///   resort (`StoreLog.rebuiltSnapshot`); the snapshot comes back with its damage, and the caller recovers it
    ///   as any damaged file (quarantine copy, compacted image), whatever its recovery policy;
    /// - a shorter file holds no record: it is renamed, bytes unchanged, to a free quarantine name (mode 0400) and
    ///   an empty store is created in its place; the report of what was set aside comes back with it.
    ///
    /// Returns the snapshot, the set-aside report, and whether the snapshot must be recovered whatever the policy.
    static func rebuild(
        paths: StorePaths, directory: Int32, sealer: (any PrefsSealer)?, readOnlyCause: inout Errno?,
        unreadable: PrefsError
    ) throws(PrefsError) -> (snapshot: Snapshot, setAside: PrefsRecoveryReport?, mustSalvage: Bool) {
        do throws(PrefsError) {
            let snapshot = try StoreLog.loadSnapshot(
                paths: paths, directory: directory, sealer: sealer, readOnlyCause: &readOnlyCause, create: true)
            return (snapshot, nil, false)
        } catch  where error.code == .notAStore || error.code == .corrupted {
            guard case .success(let status) = Sys.lstat(paths.data), status.isRegular else { throw error }
            if status.size >= Format.headerSize {
                let snapshot = try StoreLog.rebuiltSnapshot(
                    paths: paths, directory: directory, sealer: sealer, unreadable: error)
                return (snapshot, nil, true)
            }
            let path = try setAside(paths: paths)
            let snapshot = try StoreLog.loadSnapshot(
                paths: paths, directory: directory, sealer: sealer, readOnlyCause: &readOnlyCause, create: true)
            let damage = PrefsDamage(
                range: 0..<status.size, records: 0, keys: [],
                reason: "the file cannot be read as a store (\(error.message)) and is too short to hold a record; it "
                    + "was moved aside and an empty store started in its place")
            let report = PrefsRecoveryReport(
                path: paths.data, quarantinePath: path, recordsKept: 0, recordsLost: 0, lostKeys: [],
                damage: [damage], recoveredAt: Sys.nowMilliseconds())
            return (snapshot, report, false)
        }
    }

    /// Renames the data file, bytes unchanged, to `<data>.corrupt-<UTC time>[-n]` (a name not taken), mode 0400,
    /// and makes the rename durable.
    private static func setAside(paths: StorePaths) throws(PrefsError) -> String {
        let path = freeQuarantinePath(paths)
        try Sys.rename(paths.data, path).orThrow("rename", "cannot move the unreadable store file aside", path: path)
        _ = Sys.chmod(path, 0o400)
        syncDirectory(paths)
        return path
    }

    /// The report of a recovery of the file at `path` (its quarantine copy not made yet).
    static func report(path: String, damage: [PrefsDamage], recordsKept: Int) -> PrefsRecoveryReport {
        PrefsRecoveryReport(
            path: path, quarantinePath: nil, recordsKept: recordsKept,
            recordsLost: damage.reduce(0) { $0 + $1.records }, lostKeys: damage.flatMap(\.keys), damage: damage,
            recoveredAt: Sys.nowMilliseconds())
    }

    /// A quarantine name no file has yet (under the writer lock: nobody else makes one meanwhile).
    static func freeQuarantinePath(_ paths: StorePaths) -> String {
        let base = quarantineBase(paths)
        var attempt = 0
        var path = base
        while case .success = Sys.lstat(path) {
            attempt += 1
            path = quarantinePath(base, attempt: attempt)
        }
        return path
    }

    /// `<data>.corrupt-<UTC yyyyMMdd'T'HHmmss'Z'>`: the name every quarantine copy starts with, now.
    static func quarantineBase(_ paths: StorePaths) -> String { paths.data + ".corrupt-" + Sys.utcTimestamp() }

    /// The `attempt`th candidate name for a quarantine copy: `base`, then `base-1`, `base-2`...
    static func quarantinePath(_ base: String, attempt: Int) -> String {
        attempt == 0 ? base : "\(base)-\(attempt)"
    }

    /// Whether `name` is a quarantine copy of `dataFileName`: `<data>.corrupt-<yyyyMMdd'T'HHmmss'Z'>[-n]`.
    /// The exact shape matters: `ui.prefs.corrupt-x.prefs` is the data file of the store `ui.prefs.corrupt-x`.
    static func isQuarantineName(_ name: String, dataFileName: String) -> Bool {
        let prefix = dataFileName + ".corrupt-"
        guard name.hasPrefix(prefix) else { return false }
        let stamp = Array(name.utf8.dropFirst(prefix.utf8.count))
        func digits(_ range: Range<Int>) -> Bool { stamp[range].allSatisfy { $0 >= 0x30 && $0 <= 0x39 } }
        guard stamp.count >= 16, digits(0..<8), stamp[8] == UInt8(ascii: "T"), digits(9..<15),
            stamp[15] == UInt8(ascii: "Z")
        else { return false }
        if stamp.count == 16 { return true }
        return stamp.count > 17 && stamp[16] == UInt8(ascii: "-") && digits(17..<stamp.count)
    }

    /// The quarantine copies of the store at `paths`, sorted by name.
    static func quarantineCopies(of paths: StorePaths) throws(PrefsError) -> [String] {
        let names = try Sys.directoryEntries(paths.directory).orThrow(
            "opendir", "cannot list the store directory", path: paths.directory)
        return names.filter { isQuarantineName($0, dataFileName: paths.dataFileName) }.sorted()
    }
}
