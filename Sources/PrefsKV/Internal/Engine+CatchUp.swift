// Catching up with other handles: what another handle or process appended, a compaction or restore that replaced
// the file, a file changed underneath without PrefsKV, a data file deleted or renamed over while open.
import SystemLayer

extension Engine {
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
        // This handle read a write its writer left past the published log end, and the log end moved: another
        // handle completed or forgot that write, or wrote after it. Read the file again rather than follow from an
        // end nobody published.
        if log.adoptedLeftWrite {
            try withWriterLock { () throws(PrefsError) in try reload() }
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

    func noteDeadWriter() {
        pendingLog.append(
            (.warning, "a process died holding the writer lock of \(paths.data); its unfinished write was dropped, or, a synchronous write whose records had reached the file whole, completed"))
    }

    /// The file changed underneath this handle without going through PrefsKV (truncated, or rewritten in place):
    /// reopens what the path names now, as an open would (recovering it when damaged), under the writer lock, and
    /// logs it.
    func reloadChangedFile() throws(PrefsError) {
        let before = log.adoptedIdentity
        try withWriterLock { () throws(PrefsError) in try reload() }
        // A newer image of this store in the same file is a compaction's that reused it (FileProtocols.md,
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
                // as it is (its copy must be byte-identical; ReliabilityHistory.md, "stop 32").
                if log.table != nil { try readWholeLog() }
                if log.file.isSuperseded && log.file.writable && log.fileIsNamed { log.file.setSuperseded(false) }
            } else {
                try reload()
            }
        }
        if log.file.logEndWord != log.knownEndWord && !log.file.isSuperseded { try refresh() }
        // A synchronous write flushed and never published: completed or forgotten before anyone appends.
        if log.file.writable && !log.file.isSuperseded {
            switch try log.resolvePending() {
            case .none: break
            case .published: if log.file.logEndWord != log.knownEndWord { try refresh() }
            case .stale:
                try reload()
                if try log.resolvePending() == .published && log.file.logEndWord != log.knownEndWord { try refresh() }
            }
        }
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
                log, damage: snapshot.damage, recordsKept: snapshot.recordCount, policy: .fail, watched: false,
                scanned: snapshot)
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
    func followIfUnlinked(checkingNow: Bool = false) throws(PrefsError) {
        // Unretained: the log holds its file (asked at every write). `checkingNow`: with `fstat` and `lstat` rather
        // than the watch's flag, which the watcher's thread raises a moment after the change.
        let unlinked =
            checkingNow
            ? log.file.isUnlinked : Unmanaged.passUnretained(log.file)._withUnsafeGuaranteedRef({ $0.hasLostItsName })
        guard unlinked else { return }
        if log.file.writable { log.file.setSuperseded(true) }
        // A deleted directory takes the lock file with it: a handle whose lock file is gone excludes nobody.
        guard lock.isCurrent else {
            throw PrefsError(
                .notFound, "the store was deleted while open, its lock file with it; reopen the store",
                path: paths.data)
        }
        try reload()
    }
}
