// Backup and restore: a compacted image of the live records written elsewhere, and a backup checked record by
// record before a copy of it is installed as the store.
import SystemLayer

extension StoreLog {
    /// Writes a compacted image of the live data to `destination` (through `destination.tmp-<pid>` and a
    /// rename, then an fsync of its directory).
    func backup(to destination: String) throws(PrefsError) {
        // Never over the store's own data file (a rename over it would bypass the superseded protocol).
        if case .success(let status) = Sys.lstat(destination),
            status.isSameFile(as: file.identity)
        {
            throw PrefsError(.invalidInput, "a backup cannot be written over the store's own data file", path: destination)
        }
        let (live, _) = liveEntriesInOrder()
        let temporary = "\(destination).tmp-\(Sys.processID())"
        // The backup is an image of this generation, renumbered and (sealed) authenticated for its own offsets.
        let backupHeader = header.nextImage(generation: header.generation)
        let auth = RecordAuth(header: backupHeader, sealer: sealer)
        let length = StoreImage.length(of: live, authenticated: RecordAuth.signsSets(auth))
        let image = try StoreImage.write(
            temporary: temporary, finalPath: destination, header: backupHeader, auth: auth, logLength: length,
            capacity: Format.headerSize + length, watched: false
        ) { bytes throws(PrefsError) in
            let intact = try file.withBytes { source throws(PrefsError) in
                try StoreImage.copyRecords(
                    live, from: source, sourceHeader: header, sourcePath: paths.data, into: bytes, header: backupHeader,
                    auth: auth)
            }
            if !intact || file.hasFaulted { throw changedUnderneath() }
        }
        _ = image
        if case .failure(let e) = Sys.rename(temporary, destination) {
            _ = Sys.unlink(temporary)
            throw PrefsError.system(e, "rename", "cannot put the backup in place", path: destination)
        }
        syncDirectory(StorePaths(id: "x", directory: Sys.parentDirectory(of: destination)))
    }

    /// Validates the image at `source` completely (header, key check against `sealer`, every record), then
    /// swaps a copy of its live records in as the store. A damaged backup is refused and the store is left as
    /// it was.
    func restore(from source: String, sealer: (any PrefsSealer)?, watched: Bool) throws(PrefsError) {
        let backupPath = source
        let backup = try StoreLog.readOnlySnapshot(
            path: source, sealer: sealer, checkSealer: true, headerCopy: false, noun: "the backup")
        let backupFile = backup.file
        let backupHeader = backup.header
        guard backup.damage.isEmpty else {
            throw PrefsError(
                .invalidInput, "the backup is damaged and was not restored: \(backup.damage)", path: source)
        }
        let now = Sys.nowMilliseconds()
        let live = backup.index.values.filter { !$0.isExpired(now: now) }.sorted { $0.recordOffset < $1.recordOffset }
        let newHeader = backupHeader.nextImage(generation: max(header.generation, backupHeader.generation) + 1)
        let auth = RecordAuth(header: newHeader, sealer: sealer)
        let length = StoreImage.length(of: live, authenticated: RecordAuth.signsSets(auth))
        let image = try StoreImage.write(
            paths: paths, header: newHeader, auth: auth, logLength: length, capacity: Format.headerSize + 2 * length,
            watched: watched, writingBlocks: synchronous
        ) { bytes throws(PrefsError) in
            let intact = try backupFile.withBytes { source throws(PrefsError) in
                try StoreImage.copyRecords(
                    live, from: source, sourceHeader: backupHeader, sourcePath: backupPath, into: bytes, header: newHeader,
                    auth: auth)
            }
            if !intact || backupFile.hasFaulted {
                throw PrefsError(.invalidInput, "the backup changed while it was being restored", path: source)
            }
        }
        try install(image, header: newHeader)
    }
}
