// What the public layer asks of a handle beyond reads and writes: flushing (`sync`), sizes and counts, the full
// check, marking the file watched for observers, a backup, and the live entries in order. Each runs under the
// handle's lock, like everything in the engine; the public layer reaches the log and the lock only through here.
import SystemLayer

extension Engine {
    /// `PrefsStore.sync`: flushes the file; after an automatic compaction of a buffered store, makes its rename
    /// durable and removes the base image kept until then.
    func sync() throws(PrefsError) {
        try refreshIfNeeded()
        guard log.file.writable else { return }
        if log.file.flushFailed { try withWriterLock { () throws(PrefsError) in try rewriteAfterFailedFlush() } }
        try log.file.syncData()
        // Flushed into a file deleted or replaced while open: that is not durable for anyone.
        if log.file.isUnlinked {
            try withWriterLock { () throws(PrefsError) in try followIfUnlinked(checkingNow: true) }
            try log.file.syncData()
        }
        // A compaction of a buffered store leaves its rename to be made durable here.
        try log.syncDirectoryIfNeeded()
        // And its base image (FileProtocols.md, "Compaction") to be removed, under the writer lock, from the file the
        // name holds then, flushed: no compaction may rename an unflushed image over it in between. A handle that
        // opened that file from its persisted table reads all of it first: damage a power loss left in it is found,
        // and recovered from the base, while the base is still there.
        if log.header.baseGeneration != nil {
            try withWriterLock { () throws(PrefsError) in
                try catchUpLocked()
                if log.table != nil, log.baseFileExists { try readWholeLog() }
                try log.file.syncData()
                try log.releaseBaseIfNeeded()
            }
        } else if log.staleBaseMayRemain {
            // A base left by a compaction whose directory flush failed, once the directory is flushed.
            try withWriterLock { () throws(PrefsError) in
                try catchUpLocked()
                try log.syncDirectoryIfNeeded()
                log.removeStaleBaseIfNeeded()
            }
        }
    }

    /// Under the writer lock, before a `sync()` or a synchronous write promises durability: when a flush of the
    /// current file failed (`MappedFile.flushFailed`), writes every live record into a new image, flushed, and
    /// renames it over the data file (a compaction, as `compact()` makes), so that nothing the failed flush may
    /// have left off the disk is taken as flushed by a later `fdatasync` of the same file. A file deleted or
    /// replaced meanwhile is followed first (never brought back by the rename). The copy checks each plain record's
    /// CRC over its bytes (a compaction of a file that never failed a flush checks only that its stored CRC is the
    /// index's: the record is still the one the index means); when a record no longer verifies (pages the kernel
    /// dropped after the failed flush, read back from the disk), the file is read again whole and recovered as any
    /// damage is (salvaged into a new file, or thrown under `RecoveryPolicy.fail`): `compactLocked`. Throws what that
    /// throws: the store as it was, or (when only the directory could not be flushed) the new file in place with
    /// its name flushed again by the next promise.
    func rewriteAfterFailedFlush() throws(PrefsError) {
        try followIfUnlinked(checkingNow: true)
        try catchUpLocked()
        guard log.file.flushFailed, log.file.writable else { return }
        pendingLog.append(
            (.warning, "a flush of \(paths.data) failed earlier: the store is written into a new file"))
        try compactLocked()
    }

    /// `PrefsStore.stats`.
    func stats() throws(PrefsError) -> PrefsStats {
        try readWholeLog()
        let now = Sys.nowMilliseconds()
        var keys = 0
        var live = 0
        for entry in log.index.values where !entry.isExpired(now: now) {
            keys += 1
            live += entry.recordLength
        }
        // The newest persisted index is live too: it is what the next open reads.
        live += log.indexBytes
        let length = max(0, log.knownEnd - log.header.firstRecordOffset)
        return PrefsStats(
            keyCount: keys, liveBytes: live, logBytes: length, fileBytes: try log.file.currentSize(),
            recordCount: log.recordCount, garbageRatio: length == 0 ? 0 : Double(length - live) / Double(length),
            generation: log.header.generation, lastRecovery: lastRecovery)
    }

    /// The number of live (unexpired) keys.
    func liveCount() throws(PrefsError) -> Int {
        try readWholeLog()
        let now = Sys.nowMilliseconds()
        return log.index.values.reduce(0) { $0 + ($1.isExpired(now: now) ? 0 : 1) }
    }

    /// Every live entry with its name, in no particular order (`PrefsStore.entries`); `body` is given each.
    func forEachLiveEntry(_ body: (String, Entry) throws(PrefsError) -> Void) throws(PrefsError) {
        try readWholeLog()
        let now = Sys.nowMilliseconds()
        for (key, entry) in log.index where !entry.isExpired(now: now) {
            guard let name = try name(forIndexKey: key) else { continue }
            try body(name, entry)
        }
    }

    /// `PrefsStore.verify()`: the whole mapped file checked (Verify.swift). Changes nothing.
    func verify() throws(PrefsError) -> PrefsVerifyReport {
        try Verify.verify(file: log.file, header: log.header, sealer: sealer, path: paths.data)
    }

    /// `PrefsStore.backup(to:)`: a compacted image of every live record (Backup.swift).
    func backup(to path: String) throws(PrefsError) {
        try readWholeLog()
        try log.backup(to: path)
    }

    /// Starts reporting changes (an observer was added): the whole log is read, since observers compare whole
    /// indexes, and in a multi-process store the file is marked watched, so that writers in other processes raise
    /// inotify events.
    func startReportingChanges() throws(PrefsError) {
        try readWholeLog()
        wantsChanges = true
        guard multiProcess, log.file.writable, readOnlyCause == nil else { return }
        try withWriterLock { () throws(PrefsError) in
            try catchUpLocked()
            log.file.setWatched(true)
        }
    }

    /// Marks the file watched again when another handle's new image left it unmarked while this one observes.
    func keepWatched() throws(PrefsError) {
        guard wantsChanges && log.file.writable && multiProcess && !log.file.isWatched else { return }
        try withWriterLock { () throws(PrefsError) in log.file.setWatched(true) }
    }

    /// After the open: an open that read the whole log of a store with enough keys leaves a persisted index for
    /// the next one.
    func writeIndexAfterOpen() {
        if log.table == nil { writeIndexIfDue(minimumTail: 1) }
    }
}
