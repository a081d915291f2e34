// The persisted-index policy of a handle (IndexTable.swift has the format): a handle that opened from a table looks
// keys it has not seen up in it, and reads the whole log before anything that needs every key; after writes, at
// open and at close, an index record is appended when enough records were written since the last one.
import SystemLayer

extension Engine {
    // MARK: Reading through the table

    @inline(never)
    func liveEntryFromTable(_ key: String) throws(PrefsError) -> Entry? {
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
    func lookUpInTable(_ key: String) throws(PrefsError) {
        guard log.index[key] == nil else { return }
        if case .tableDamaged = log.lookUp(key) { try readTableDamaged() }
    }

    @inline(never)
    func readTableDamaged() throws(PrefsError) {
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

    // MARK: Writing tables

    /// About how many keys the store holds: the index's, or for a handle reading a persisted table, the larger of
    /// the table's and the index's (keys added since the table are not told from keys looked up in it).
    var keyCountEstimate: Int { max(log.table?.keyCount ?? 0, log.index.count) }

    /// Appends an index record when the records since the last one are at least twice the key count (and
    /// `IndexTable.tail`): tables then cost a bounded share of writing (about 8 bytes a record), and an open reads
    /// at most about twice as many records as the store has keys. A failure is logged, not thrown: the write
    /// succeeded, and a table only saves work.
    func maybeWriteIndex() {
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
}
