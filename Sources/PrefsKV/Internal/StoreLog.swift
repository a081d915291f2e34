// The log of one store handle: the mapped data file, its header, the index of the records it holds, the log
// end and the sequence number this handle knows; appending and publishing records, growing the mapping, and
// reading records other handles appended. Loading a file into a snapshot: StoreLog+Load.swift. Not thread-safe:
// used under `PrefsStore.engine`'s Mutex.
import SystemLayer

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
    /// Data records after the newest index record (all of them when there is none).
    var tailRecords = 0
    /// The length of the newest index record, 0 when there is none.
    var indexBytes = 0
    /// Whether `end` includes a synchronous write the pending word names past the published log end.
    var pendingWrite = false
    /// That write's pending check word (`Format.pendingCheck`) as the scan found it.
    var pendingCheck: UInt64 = 0
}

final class StoreLog {
    let paths: StorePaths
    /// `.synchronous` durability: fdatasync around every publish.
    let synchronous: Bool
    let multiProcess: Bool

    // Every access to this state happens under `PrefsStore.engine`'s Mutex, one thread at a time, so runtime
    // exclusivity checks (a measurable share of a warm read) cannot find anything the lock does not exclude.

    @exclusivity(unchecked) var file: MappedFile
    @exclusivity(unchecked) var header: Header {
        didSet { recordSeed = header.recordSeed }
    }
    /// Where the checksums of the current image's records start (`header.recordSeed`, kept with it).
    @exclusivity(unchecked) private(set) var recordSeed: RecordSeed
    /// The sealer of a sealed store (the engine's codec holds the same one): it authenticates the records of a
    /// version-2 file.
    @exclusivity(unchecked) var sealer: (any PrefsSealer)?
    /// Every key of the log, or, while `table` is set, the keys of the records after the table and those looked up
    /// in it since (see `table`).
    @exclusivity(unchecked) var index: KeyIndex {
        didSet { indexVersion &+= 1 }
    }
    /// Moves at every change of `index`, whatever made it (a write, a catch-up, a table lookup, a new image): the
    /// plaintext cache's proof that an entry it checked against the index is still the index's (PlaintextCache.swift).
    @exclusivity(unchecked) private(set) var indexVersion: UInt64 = 1
    /// The persisted index this handle reads keys from instead of the log before it (a lazy open): a key that
    /// `index` does not hold is looked up there (`lookUp`). Set only while no record after the table deletes or
    /// clears anything, so a key the table does not hold and `index` does not either is absent. Whatever needs
    /// every key (enumeration, counting, transactions, compaction, observers) reads the whole log first
    /// (the engine's `readWholeLog`), which clears it.
    var table: IndexTable? { file.indexTable }
    /// Data records applied since the newest index record: when to write the next one.
    @exclusivity(unchecked) var tailRecords: Int
    /// The length of the newest index record of the file, 0 when there is none: counted as live (it is what the
    /// next open reads), by statistics and by the garbage that triggers a compaction.
    @exclusivity(unchecked) var indexBytes: Int
    /// Set when a catch-up skipped damaged records other handles appended: no index record is written until the
    /// file is read again (a table of an index that lacks them would hide the damage from later opens).
    @exclusivity(unchecked) var skippedDamage = false
    @exclusivity(unchecked) var liveBytes: Int
    @exclusivity(unchecked) var recordCount: Int
    @exclusivity(unchecked) var nextSeq: UInt64
    @exclusivity(unchecked) var knownEnd: Int
    @exclusivity(unchecked) var knownEndWord: UInt64
    /// Whether `knownEnd` includes a write its writer left past the published log end (`Snapshot.pendingWrite`):
    /// published before this handle appends (`resolvePending`).
    var adoptedLeftWrite = false
    /// The pending check word of that write, as read (`Snapshot.pendingCheck`).
    var adoptedCheck: UInt64 = 0
    /// The generation of the file whose name this handle knows to be durable (an fsync of the directory
    /// followed its rename); nil until this handle has synced the directory itself.
    @exclusivity(unchecked) var directorySyncedGeneration: UInt64?
    /// The error of the last directory flush after a rename that failed (`flushDirectoryAfterRename`), until one
    /// succeeds: `compact()` throws it.
    @exclusivity(unchecked) var directoryFlushFailure: PrefsError?
    /// A base image may be left that the current file does not name (its directory flush failed):
    /// `removeStaleBaseIfNeeded` removes it once the directory is flushed.
    @exclusivity(unchecked) var staleBaseMayRemain = false
    /// The generation of the image renamed in place unflushed whose base image this handle removed after flushing
    /// it (`releaseBaseIfNeeded`).
    @exclusivity(unchecked) var baseReleasedGeneration: UInt64?
    /// `<id>.prefs.prev` as `prepareBase` last found it the base the current file names (`VerifiedBase`).
    @exclusivity(unchecked) var verifiedBase = VerifiedBase()
    /// The header words naming the store and image, as the mapping held them when this handle adopted the file.
    var adoptedIdentity: HeaderIdentity { file.adoptedIdentity }
    /// The file this handle's last automatic compaction of a buffered store replaced, still named
    /// `<id>.prefs.tmp` (`paths.temporary`) and mapped: the next such compaction writes its image into it instead
    /// of a new file, while it may (`usableSpare`). Nil when there is none. Touched only under the writer lock.
    @exclusivity(unchecked) var spare: MappedFile?

    init(paths: StorePaths, configuration: PrefsStore.Configuration, snapshot: consuming Snapshot) {
        self.paths = paths
        synchronous = configuration.durability == .synchronous
        multiProcess = configuration.sharing == .multiProcess
        file = snapshot.file
        header = snapshot.header
        recordSeed = snapshot.header.recordSeed
        sealer = configuration.sealer
        index = snapshot.index
        tailRecords = snapshot.tailRecords
        indexBytes = snapshot.indexBytes
        liveBytes = snapshot.liveBytes
        recordCount = snapshot.recordCount
        nextSeq = snapshot.maxSeq + 1
        knownEnd = snapshot.end
        knownEndWord = snapshot.endWord
        adoptedLeftWrite = snapshot.pendingWrite
        adoptedCheck = snapshot.pendingCheck
    }

    /// How the records of the current file are authenticated: nil for a plain store and a version-1 sealed one.
    var auth: RecordAuth? { RecordAuth(header: header, sealer: sealer) }
    /// The store and image of the current file (its header's UUID and generation, without copying the header).
    var image: ImageIdentity {
        @inline(__always) get { ImageIdentity(uuid: header.uuid, generation: header.generation) }
    }

    /// Replaces the file and index with a snapshot's.
    func adopt(_ snapshot: Snapshot) {
        file = snapshot.file
        header = snapshot.header
        index = snapshot.index
        tailRecords = snapshot.tailRecords
        indexBytes = snapshot.indexBytes
        skippedDamage = false
        liveBytes = snapshot.liveBytes
        recordCount = snapshot.recordCount
        // The file is the truth: a new image is numbered from 1 again.
        nextSeq = snapshot.maxSeq + 1
        knownEnd = snapshot.end
        knownEndWord = snapshot.endWord
        adoptedLeftWrite = snapshot.pendingWrite
        adoptedCheck = snapshot.pendingCheck
    }

    // MARK: Changes underneath

    /// Throws `changedUnderneath` unless the plain record `entry` means is still where the index holds it: its
    /// stored CRC32C is the one the index knows (which covers its key, sequence number and value), and no access to
    /// the mapping went past the end of the file (which reads zeros). Called after the bytes were used, so that a
    /// change during the read is seen too. One load from the mapping and one atomic load.
    @inline(__always)
    func checkStillHolds(_ entry: Entry) throws(PrefsError) {
        let file = self.file
        if !file.withBytes({ file.stillHolds(entry, in: $0) }) { throw changedUnderneath() }
    }

    /// Runs a read of the sealed record `entry` means. When it fails and the file changed underneath
    /// (`hasChangedUnderneath`), or the record no longer verifies its checksum (bytes changed in place), throws
    /// `changedUnderneath` instead of its error: the handle reopens the file, recovering it if it is damaged (a
    /// value of another store, or bytes no writer wrote, fail the sealer's authentication: that is not tampering
    /// with this store). A record that verifies its checksum but not the sealer's authentication is tampering.
    @inline(__always)
    func checkingUnderneath<R>(_ entry: Entry, _ read: () throws(PrefsError) -> R) throws(PrefsError) -> R {
        let result: R
        do throws(PrefsError) {
            result = try read()
        } catch {
            let intact = file.withBytes { bytes in
                RecordHeader.verified(in: bytes, at: entry.recordOffset, limit: bytes.count, seed: recordSeed)?.length
                    == entry.recordLength
            }
            if hasChangedUnderneath || !intact { throw changedUnderneath() }
            throw error
        }
        if file.hasFaulted { throw changedUnderneath() }
        return result
    }

    /// Whether the file changed underneath the mapping without going through PrefsKV since this handle adopted it:
    /// an access went past its end (it shrank), or its header no longer names the store and image it did.
    var hasChangedUnderneath: Bool {
        // Unretained: this log holds the file throughout (a write asks twice, and a retain and a
        // release per call are not free).
        let adopted = adoptedIdentity
        return Unmanaged.passUnretained(file)._withUnsafeGuaranteedRef { file in
            file.hasFaulted || file.headerIdentity != adopted
        }
    }

    /// The error a read or write gets when the file changed underneath it. (Never inlined: the read path stays
    /// small enough to be inlined itself.)
    @inline(never)
    func changedUnderneath() -> PrefsError { StoreLog.changedUnderneath(path: paths.data) }

    /// `changedUnderneath()` for the store file at `path`.
    @inline(never)
    static func changedUnderneath(path: String) -> PrefsError {
        PrefsError(
            .changedUnderneath,
            "the store file was changed underneath this handle by something other than PrefsKV (truncated, or "
                + "rewritten in place: a copy over it, a sync tool); restore a store with `restore(from:)`, which "
                + "replaces the file atomically", path: path)
    }

    // MARK: Reading

    /// Whether the mapped header says nobody wrote, compacted or restored since this handle last looked: three
    /// loads (the generation word too: a compaction may write a newer image into this file, FileProtocols.md
    /// "Compaction", and leave it with the same log end).
    @inline(__always)
    var isUpToDate: Bool {
        file.logEndWord == knownEndWord && !file.isSuperseded && file.generationWord == file.adoptedIdentity.generation
    }

    /// The live (unexpired) entry for an index key.
    @inline(__always)
    func liveEntry(_ key: String) -> Entry? {
        guard let entry = index[key], !entry.isExpired(now: Sys.nowMilliseconds()) else { return nil }
        return entry
    }

    /// Live entries in log order, and the bytes their records occupy.
    func liveEntriesInOrder() -> (entries: [Entry], length: Int) {
        precondition(table == nil, "the whole log is read before every entry is used")
        let now = Sys.nowMilliseconds()
        let live = index.values.filter { !$0.isExpired(now: now) }.sorted { $0.recordOffset < $1.recordOffset }
        return (live, live.reduce(0) { $0 + $1.recordLength })
    }

    /// Whether the file this handle maps is still the one the data path names (after a superseded flag).
    var fileIsNamed: Bool {
        guard case .success(let status) = Sys.lstat(paths.data) else { return false }
        return status.isSameFile(as: file.identity)
    }

    // MARK: Catching up with other handles

    /// Reads the records other handles appended since this handle last looked, when the published log end
    /// allows (`changed` collects their index keys when `collectChanges`, and `vanished` the entries of the sealed
    /// keys they delete, whose records in this file name them; `damage` what was skipped). False when
    /// the log end is damaged, went backwards or points past the file: the file must be reloaded under the writer
    /// lock.
    func readAppended(
        collectingChanges collectChanges: Bool, changed: inout [String], vanished: inout KeyIndex,
        damage: inout [PrefsDamage]
    ) throws(PrefsError) -> Bool {
        let word = file.logEndWord
        guard word != knownEndWord else { return true }
        guard let end = Format.decodeLogEnd(word), end >= knownEnd, end & 7 == 0 else { return false }
        if end > file.mappedLength {
            let size = try file.currentSize()
            guard size >= end else { return false }
            try file.remap(length: size)
        }
        return appendScan(
            to: end, word: word, collectChanges: collectChanges, changed: &changed, vanished: &vanished,
            damage: &damage)
    }

    /// Reads records other handles appended in `[knownEnd, end)`. False, with nothing changed, when this handle
    /// reads a persisted table and the records delete or clear keys, or a lookup in the table did not verify: the
    /// file must then be reloaded (its whole log read).
    private func appendScan(
        to end: Int, word: UInt64, collectChanges wants: Bool, changed: inout [String], vanished: inout KeyIndex,
        damage: inout [PrefsDamage]
    ) -> Bool {
        let sealed = header.isEncrypted
        var found: [String] = []
        var index = self.index
        self.index = KeyIndex()  // keep the index uniquely referenced while it is mutated
        var liveBytes = self.liveBytes
        var tail = tailRecords
        var newestIndex = indexBytes
        var usable = true
        let table = self.table
        let auth = self.auth
        let result = file.withBytes { bytes in
            LogScanner.scan(
                bytes, from: knownEnd, to: end, freeSpaceEndsLog: false, plainKeys: !sealed, minimumSeq: nextSeq - 1,
                seed: recordSeed, auth: auth
            ) { record, recordBytes in
                if wants {
                    // A sealed key that goes keeps its entry here: its record, still in this file, names it.
                    if record.kind == .removeAll {
                        found += index.keys
                        if sealed { for (key, entry) in index { vanished.updateValue(entry, forKey: key) } }
                    } else if record.kind != .commit && record.kind != .index {
                        let key = RecordCodec.indexKey(record.key(in: recordBytes), sealed: sealed)
                        found.append(key)
                        if sealed && record.kind == .delete, let entry = index[key] {
                            vanished.updateValue(entry, forKey: key)
                        }
                    }
                }
                tail = record.kind == .index ? 0 : tail + 1
                if record.kind == .index { newestIndex = record.length }
                if let table {
                    usable =
                        usable
                        && StoreLog.applyAfterTable(
                            record, in: recordBytes, table: table, mapping: bytes, sealed: sealed, auth: auth,
                            index: &index, liveBytes: &liveBytes)
                } else {
                    StoreLog.applyToIndex(
                        record, bytes: recordBytes, sealed: sealed, index: &index, liveBytes: &liveBytes)
                }
            }
        }
        // A lazy handle that cannot apply a record (a delete, a table lookup that does not verify) keeps the sets
        // applied before it (committed records, each applied once: applying them again is the same) and reloads.
        self.index = index
        self.liveBytes = liveBytes
        guard usable else { return false }
        tailRecords = tail
        indexBytes = newestIndex
        recordCount += result.recordsKept
        nextSeq = max(nextSeq, result.maxSeq + 1)
        knownEnd = end
        knownEndWord = word
        damage += result.damage
        changed += found
        return true
    }

    /// Whether `oldFile`, a file this log read before it adopted its current one, still shows the image it was read
    /// as: it is not the current file rewritten in place, and was not written again with a newer image since (a
    /// buffered store's spare file).
    func stillShowsItsImage(_ oldFile: MappedFile) -> Bool {
        !oldFile.identity.isSameFile(as: file.identity) && oldFile.headerIdentity == oldFile.adoptedIdentity
    }

    // MARK: Appending

    /// Compare-before-set in a plain store: true when `key` holds exactly this type, expiry and value (as
    /// `fill` writes it) and has not expired.
    @inline(__always)
    func holds(
        _ key: String, type: ValueType, expiresAt: Int64, valueLength: Int,
        fill: (UnsafeMutableRawBufferPointer) -> Void
    ) -> Bool {
        guard let old = index[key], old.type == type, old.expiresAt == expiresAt, old.valueLength == valueLength,
            !old.isExpired(now: Sys.nowMilliseconds())
        else { return false }
        return withUnsafeTemporaryAllocation(byteCount: valueLength, alignment: 8) { candidate in
            fill(candidate)
            // Equal bytes count only if the record is still the one the index means (not another file's).
            return file.withBytes { bytes in
                Sys.bytesEqual(
                    bytes.baseAddress! + old.valueOffset,
                    UnsafeRawPointer(candidate.baseAddress) ?? bytes.baseAddress!, count: valueLength)
                    && file.stillHolds(old, in: bytes)
            }
        }
    }

    /// Remembers the CRC32C of the plaintext of the sealed entry `indexKey` (compare-before-set rules out most
    /// changes with it, without opening the record).
    @inline(__always)
    func remember(plainCRC: UInt32, of indexKey: String) {
        index[indexKey]?.plainCRC = plainCRC
    }

    /// Compare-before-set for a value given as bytes, in a plain record.
    func holdsPlain(_ old: Entry, value: UnsafeRawBufferPointer) -> Bool {
        guard old.valueLength == value.count else { return false }
        return file.withBytes { bytes in
            Sys.bytesEqual(
                bytes.baseAddress! + old.valueOffset, value.baseAddress ?? bytes.baseAddress!, count: value.count)
                && file.stillHolds(old, in: bytes)
        }
    }

    /// Appends and publishes one committed set record of a plain store, keyed `name` in the index.
    @inline(__always)
    func appendSet(
        name: String, key: UnsafeRawBufferPointer, type: ValueType, expiresAt: Int64, valueLength: Int,
        fill: (UnsafeMutableRawBufferPointer) -> Void
    ) throws(PrefsError) {
        let length = Format.recordLength(keyLength: key.count, valueLength: valueLength)
        let offset = knownEnd
        try ensureCapacity(offset + length)
        let seq = nextSeq
        let record = file.withMutableBytes { bytes in
            RecordWriter.write(
                into: bytes, at: offset, kind: .set, valueType: type.rawValue, flags: RecordFlags.commit,
                seq: seq, expiresAt: expiresAt, key: key, valueLength: valueLength, seed: recordSeed, fillValue: fill)
        }
        let entry = Entry(record)
        try publish(end: offset + length, records: 1) { () in
            if let old = index.updateValue(entry, forKey: name) { liveBytes -= old.recordLength }
            liveBytes += entry.recordLength
        }
    }

    /// Appends and publishes one committed set record of a sealed store, `length` bytes written by `write` (given
    /// the mapping, the offset and the sequence number), keyed `indexKey` in the index with `plainCRC` (the CRC32C
    /// of its plaintext): the caller made the index key from the name, so it is not made again from the record's
    /// tag (a 32-character string, an allocation), and the entry is not looked up again to note the CRC.
    @inline(__always)
    func appendSealedSet(
        indexKey: String, length: Int, plainCRC: UInt32,
        write: (UnsafeMutableRawBufferPointer, Int, UInt64) throws(PrefsError) -> RecordHeader
    ) throws(PrefsError) {
        let offset = knownEnd
        try ensureCapacity(offset + length)
        let seq = nextSeq
        let record = try file.withMutableBytes { bytes throws(PrefsError) in try write(bytes, offset, seq) }
        precondition(record.kind == .set && record.isSealed && record.length == length, "one sealed set record")
        var entry = Entry(record)
        entry.plainCRC = plainCRC
        try publish(end: offset + length, records: 1) { () in
            if let old = index.updateValue(entry, forKey: indexKey) { liveBytes -= old.recordLength }
            liveBytes += entry.recordLength
        }
    }

    /// Appends `length` bytes of records written by `write` (given the mapping, the start offset and the
    /// sequence number, returning the headers it wrote), publishes them as `records` records, applies them to
    /// the index, then runs `applied` with the headers.
    func append(
        length: Int, records: Int,
        write: (UnsafeMutableRawBufferPointer, Int, UInt64) throws(PrefsError) -> [RecordHeader],
        applied: ([RecordHeader]) -> Void
    ) throws(PrefsError) {
        let start = knownEnd
        try ensureCapacity(start + length)
        let seq = nextSeq
        let headers = try file.withMutableBytes { bytes throws(PrefsError) in try write(bytes, start, seq) }
        let sealed = header.isEncrypted
        try publish(end: start + length, records: records) { () in
            file.withBytes { bytes in
                for record in headers {
                    StoreLog.applyToIndex(record, bytes: bytes, sealed: sealed, index: &index, liveBytes: &liveBytes)
                }
            }
            applied(headers)
        }
    }

    /// Makes the records in `[knownEnd, end)` part of the log, then applies them to the index.
    ///
    /// `.buffered`: one release store of the log-end word (the acknowledgement point for process crashes).
    /// `.synchronous`: the pending word names the records (`Format.encodePending`), one fdatasync makes them and it
    /// durable, then the log end is stored (what other processes follow: they never see a write before it is on
    /// the disk). The log end itself reaches the disk with the next flush; until then an open that finds the
    /// pending word beside the log end on the disk reads the records it names, and takes them whole or not at
    /// all (`StoreLog+Load.swift`, `resolvePending`). So a power cut can never leave the log end pointing at bytes
    /// that did not reach the disk, nor lose a write that returned. (And the directory is fsynced when a
    /// compaction since the last one left the file's name not yet durable.)
    @inline(__always)
    func publish(end: Int, records: Int, apply: () -> Void) throws(PrefsError) {
        // One flush where the pending word's byte can be locked; two (records, then log end) on a file system
        // without open file description locks, as version 6 does.
        // (And two while this handle's end includes a write it read past the published log end: that write's
        // records are on the disk, its scan flushed them, but the pending word names it beside that log end.)
        let oneFlush = synchronous && header.hasPendingWord && !adoptedLeftWrite && file.tryLockPendingWord()
        if synchronous && !oneFlush { try file.syncData() }
        // Records written into a file that shrank underneath the mapping reached memory no file holds: nothing is
        // acknowledged (the next access reopens the file).
        if hasChangedUnderneath {
            if oneFlush { file.unlockPendingWord() }
            throw changedUnderneath()
        }
        if oneFlush {
            // While the pending word names a write in flight, a scan that finds it waits (`scanWithPendingWrite`).
            let check = file.withBytes { Format.pendingCheck($0, logEnd: knownEnd, end: end) }
            file.storePending(Format.encodePending(end: end, logEnd: knownEnd), check: check)
            do throws(PrefsError) {
                try file.syncData()
                if hasChangedUnderneath { throw changedUnderneath() }
            } catch {
                // Not published, and no later writer may complete it (it may still appear after a power cut, as
                // a write whose flush failed may).
                file.storePending(0)
                file.unlockPendingWord()
                throw error
            }
        }
        knownEndWord = file.publish(logEnd: end)
        if oneFlush { file.unlockPendingWord() }
        knownEnd = end
        adoptedLeftWrite = false
        nextSeq += 1
        recordCount += records
        tailRecords += records
        apply()
        if multiProcess && file.isWatched {
            // Observers in other processes wait on inotify, which stores through a mapping never wake.
            // Failing to wake them loses no data: the write is already published.
            try? file.announce(knownEndWord)
        }
        if synchronous {
            if !oneFlush { try file.syncData() }
            try syncDirectoryIfNeeded()
            removeStaleBaseIfNeeded()
            // Written into an image a buffered handle's compaction left unflushed: now durable, so its base goes.
            try releaseBaseIfNeeded()
        }
    }

    /// How much of the blocks a `.synchronous` store allocates is written with zeros at once (`Sys.writeZeros`,
    /// `MappedFile.grow`, `StoreImage.write`): enough for many writes, and bounded, so that the one write that grows
    /// a large store does not write and flush tens of megabytes. Blocks past it are left as `posix_fallocate` gives
    /// them (each write into them costs what it did before).
    static let writtenAhead = 4 << 20

    /// Makes the mapping at least `end` bytes long: follows growth by another process, otherwise doubles
    /// the log area (or, when the disk is nearly full, grows by just what is needed).
    func ensureCapacity(_ end: Int) throws(PrefsError) {
        if end <= file.mappedLength { return }
        let size = try file.currentSize()
        // Shorter than mapped: something outside PrefsKV shrank it (growing it again would zero-fill a gap).
        if size < file.mappedLength { throw changedUnderneath() }
        if size >= end {
            try file.remap(length: size)
            return
        }
        let page = Sys.pageSize
        let needed = (end + page - 1) / page * page
        var doubled = Format.headerSize + max(file.mappedLength - Format.headerSize, 4096) * 2
        while doubled < needed { doubled = Format.headerSize + (doubled - Format.headerSize) * 2 }
        do throws(PrefsError) {
            try file.grow(to: doubled, writingBlocks: synchronous)
        } catch  where error.code == .diskFull && doubled > needed {
            try file.grow(to: needed, writingBlocks: synchronous)
        }
    }

    /// Makes the name of the current file durable if no fsync of the directory is known to have followed the
    /// rename that put it there (a compaction by this or another handle, or a file this handle did not see being
    /// installed). Called by `sync()`, synchronous writes and flushed compactions. A failure throws and leaves the
    /// name unsynced, so that the next of those flushes the directory again (a rename whose flush failed, taken
    /// as done, let a later synchronous write return that a power cut could lose with the name).
    func syncDirectoryIfNeeded() throws(PrefsError) {
        guard directorySyncedGeneration != header.generation else { return }
        if let error = syncDirectoryChecked(paths) { throw error }
        directorySyncedGeneration = header.generation
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
            if let old = index.updateValue(entry, forKey: RecordCodec.indexKey(record.key(in: bytes), sealed: sealed)) {
                liveBytes -= old.recordLength
            }
            liveBytes += entry.recordLength
        case .delete:
            if let old = index.removeValue(forKey: RecordCodec.indexKey(record.key(in: bytes), sealed: sealed)) {
                liveBytes -= old.recordLength
            }
        case .removeAll:
            index.removeAll(keepingCapacity: true)
            liveBytes = 0
        case .commit, .header, .index:
            break
        }
    }

    /// Applies one committed record that follows the persisted table `table` to the index of a lazy handle (which
    /// holds the keys of such records and those looked up): false when the record deletes or clears keys (a key
    /// the index then lacks could be the table's, yet absent), or when the key's entry in the table, whose live
    /// bytes it replaces, does not verify. `bytes`: what the record was checked in (the scan's); `mapping`: the
    /// file's, where the table's lookups read.
    static func applyAfterTable(
        _ record: RecordHeader, in bytes: UnsafeRawBufferPointer, table: IndexTable, mapping: UnsafeRawBufferPointer,
        sealed: Bool, auth: RecordAuth?, index: inout KeyIndex, liveBytes: inout Int
    ) -> Bool {
        switch record.kind {
        case .set:
            guard record.isSealed == sealed else { return true }
            let key = RecordCodec.indexKey(record.key(in: bytes), sealed: sealed)
            let entry = Entry(record)
            if let old = index.updateValue(entry, forKey: key) {
                liveBytes -= old.recordLength
            } else {
                switch table.probe(key, in: mapping, sealed: sealed, auth: auth) {
                case .found(let old): liveBytes -= Entry(old).recordLength
                case .absent: break
                case .damaged: return false
                }
            }
            liveBytes += entry.recordLength
            return true
        case .delete, .removeAll:
            return false
        case .commit, .header, .index:
            return true
        }
    }
}
