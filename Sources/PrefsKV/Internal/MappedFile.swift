// One open store file and its shared mapping: the single owner of the descriptor and the mapped region.
import CPrefsKV
import Synchronization
import SystemLayer

#if !_endian(little)
#error("PrefsKV reads its little-endian format natively; a big-endian port must byte-swap the mapped words")
#endif

/// An open data file (or compaction image) mapped `MAP_SHARED`.
///
/// The mapping is reached only through `withBytes`/`withMutableBytes`; the dynamic header words through the
/// atomic accessors. Not thread-safe: it lives inside the store's `Mutex`.
final class MappedFile {
    let fd: Int32
    let path: String
    let writable: Bool
    /// Device and inode at open: tells whether the path still names this file.
    let identity: FileStatus
    // Accessed only under the store's Mutex (see Engine).
    @exclusivity(unchecked) private var base: UnsafeMutableRawPointer
    /// Bytes mapped (the file's size when last mapped).
    @exclusivity(unchecked) private(set) var mappedLength: Int
    /// A file no copy of whose header verified, mapped to be rebuilt: none of its words is PrefsKV's to write (its
    /// superseded word is not set when the rebuilt image replaces it).
    @exclusivity(unchecked) var isUnreadableOriginal = false
    /// The mapping's slot in the SIGBUS guard (CPrefsKV's prefs_guard.h), or -1 when unguarded.
    @exclusivity(unchecked) private var guardSlot: Int32 = -1
    /// The guard's count of faults answered inside the mapping with a zero page: an access past the end of a file
    /// that shrank underneath it.
    @exclusivity(unchecked) private var faultCount: UnsafeMutablePointer<Atomic<UInt32>>
    /// Whether an earlier mapping of this file (before a remap) took a fault.
    @exclusivity(unchecked) private var faultedBefore = false
    /// The persisted index an open read instead of this file's log (`StoreLog.table`); nil when the whole log was
    /// read. Kept here, with the file it describes, so that a snapshot carries it without a field of its own (an
    /// optional field was copied through type metadata built at run time, in a fresh process's first open), and
    /// a handle that adopts another file (a whole read, a compaction, a recovery) drops it with the old file.
    @exclusivity(unchecked) var indexTable: IndexTable?
    /// The header words naming the store and image as this handle adopted them (`StoreLog.adoptedIdentity`): read
    /// when the file is mapped, set again when this handle writes a new image into it (`beginRewrite`).
    @exclusivity(unchecked) var adoptedIdentity = HeaderIdentity(uuidLow: 0, uuidHigh: 0, generation: 0)
    /// Set when an `fdatasync` of this file failed, in this handle or any other of this process (`FailedFlushes`: a
    /// mapping of the file made after the error, which Linux would not tell of it, knows it too). What reached the
    /// disk is then unknown, and a later flush of the same file may succeed without it (Linux reports a writeback
    /// error once for each open file, and may have marked the pages that failed clean): the store's next promise of
    /// durability writes it into a new file instead (`Engine.rewriteAfterFailedFlush`), and the file is never taken
    /// as a spare nor made a base image.
    @exclusivity(unchecked) private(set) var flushFailed = false

    /// Maps the whole of `fd` (at least one header page). Takes ownership of `fd`: it is closed on failure.
    /// `status` is the file's `fstat`, when the caller has just made it.
    init(fd: Int32, path: String, writable: Bool, status known: FileStatus? = nil) throws(PrefsError) {
        self.fd = fd
        self.path = path
        self.writable = writable
        do throws(PrefsError) {
            let status: FileStatus
            if let known {
                status = known
            } else {
                status = try Sys.fstat(fd).orThrow("fstat", "cannot inspect the store file", path: path)
            }
            precondition(status.size >= Format.headerSize, "mapping a file shorter than its header")
            identity = status
            mappedLength = status.size
            base = try Sys.map(fd, length: status.size, writable: writable).orThrow(
                "mmap", "cannot map the store file", path: path)
        } catch {
            Sys.close(fd)
            throw error
        }
        faultCount = MappedFile.counter(prefs_guard_no_faults())
        guardMapping()
        adoptedIdentity = headerIdentity
        flushFailed = FailedFlushes.contains(identity, adoptedIdentity)
    }

    deinit {
        if let linkWatch { LinkWatcher.shared.unwatch(linkWatch.flag, watch: linkWatch.watch) }
        prefs_guard_unregister(guardSlot)
        Sys.unmap(base, length: mappedLength)
        Sys.close(fd)
    }

    // MARK: The SIGBUS guard

    /// Registers the current mapping with the SIGBUS guard (installed once per process). Without a free slot, or
    /// when the handler cannot be installed, the mapping is unguarded: a shrink underneath it is then the SIGBUS
    /// it always was.
    private func guardMapping() {
        guard prefs_guard_install() == 0 else { return }
        guardSlot = prefs_guard_register(base, mappedLength)
        faultCount = MappedFile.counter(
            guardSlot >= 0 ? prefs_guard_fault_count(guardSlot) : prefs_guard_no_faults())
    }

    private static func counter(_ word: UnsafeMutablePointer<UInt32>) -> UnsafeMutablePointer<Atomic<UInt32>> {
        UnsafeMutableRawPointer(word).assumingMemoryBound(to: Atomic<UInt32>.self)
    }

    /// Passes the value bytes of the plain record `entry` means to `body`, then checks (`stillHolds`) that the
    /// record is still the one the index means: nil when it is not (what `body` returned came from another file's
    /// bytes, or zeros).
    @inline(__always)
    func withValue<R, E: Error>(
        of entry: Entry, _ body: (UnsafeRawBufferPointer) throws(E) -> R
    ) throws(E) -> R? {
        // Everything the check needs is read from `self` before `body` runs: after it, only raw memory is touched
        // (the mapping, and the guard's counter in static memory), so the caller need not retain this file across
        // the call (a retain and release per read cost more than the check).
        let bytes = UnsafeRawBufferPointer(start: base, count: mappedLength)
        let faults = faultCount
        let faultedBefore = self.faultedBefore
        @inline(__always) func intact() -> Bool {
            // The value's loads come before the CRC word's (`beginRewrite` zeros that word before the value). x86-64
            // keeps loads in order; a fence there (even the compiler's alone) would be paid by every warm read.
            #if arch(arm64)
            prefs_load_fence()
            #endif
            return UInt32(littleEndian: bytes.load(fromByteOffset: entry.crcOffset, as: UInt32.self))
                == entry.recordCRC
                && faults.pointee.load(ordering: .acquiring) == 0 && !faultedBefore
        }
        let result: R
        do throws(E) {
            result = try body(
                UnsafeRawBufferPointer(rebasing: bytes[entry.valueOffset..<entry.valueOffset + entry.valueLength]))
        } catch {
            // Bytes that do not decode may be another file's: then that is the answer.
            if !intact() { return nil }
            throw error
        }
        return intact() ? result : nil
    }

    /// Whether the plain record `entry` means is still where the index holds it in this mapping (`bytes`): its
    /// stored CRC32C is the one the index recorded (it covers the record's key, sequence number and value), and no
    /// access went past the end of the file. One load from the mapping and one atomic load.
    @inline(__always)
    func stillHolds(_ entry: Entry, in bytes: UnsafeRawBufferPointer) -> Bool {
        UInt32(littleEndian: bytes.load(fromByteOffset: entry.crcOffset, as: UInt32.self)) == entry.recordCRC
            && !hasFaulted
    }

    /// Before this handle writes a new image into the file (a compaction reusing the file an earlier image used,
    /// `StoreImage.rewrite`): marks it superseded, stores the new image's generation (a handle on the earlier image
    /// then finds the file changed, `StoreLog.hasChangedUnderneath`, and reopens the path), then zeros the log from
    /// its end down to its start, 8 bytes at a time with release stores. So every record of the earlier image loses
    /// its CRC word before any byte of its value changes: a read of it that overlaps the rewrite (a handle in another
    /// process still on that image) fails its check after the read (`withValue`, `stillHolds`, which compare that
    /// word) and is made again on the file the path names, and reads cost nothing more. Adopts the new identity.
    func beginRewrite(identity: HeaderIdentity) {
        setSuperseded(true)
        word(Format.generationOffset).pointee.store(identity.generation, ordering: .sequentiallyConsistent)
        var offset = mappedLength & ~7
        while offset > Format.logStart {
            offset -= 8
            word(offset).pointee.store(0, ordering: .releasing)
        }
        // Every zero is visible before any byte of the new image is.
        atomicMemoryFence(ordering: .sequentiallyConsistent)
        adoptedIdentity = identity
        indexTable = nil
    }

    /// Whether an access to the mapping went past the end of the file since it was mapped (the file shrank
    /// underneath it: truncated, or rewritten in place): what was read there was zeros, and what was written there
    /// reached no file. One atomic load.
    @inline(__always)
    var hasFaulted: Bool { faultCount.pointee.load(ordering: .acquiring) != 0 || faultedBefore }

    /// The inotify watch raising a flag when this file may have lost its name; set up by the first write.
    @exclusivity(unchecked) private var linkWatch: (flag: LinkFlag, watch: Int32)?
    @exclusivity(unchecked) private var linkWatchTried = false
    /// `linkWatch`'s flag, unretained (`linkWatch` holds it), for the check at every write.
    @exclusivity(unchecked) private var linkFlag: Unmanaged<LinkFlag>?

    /// Remaps after the file grew (here or in another process) to `length` bytes.
    func remap(length: Int) throws(PrefsError) {
        guard length != mappedLength else { return }
        let fresh = try Sys.map(fd, length: length, writable: writable).orThrow(
            "mmap", "cannot map the grown store file", path: path)
        faultedBefore = hasFaulted
        prefs_guard_unregister(guardSlot)
        guardSlot = -1
        Sys.unmap(base, length: mappedLength)
        base = fresh
        mappedLength = length
        guardMapping()
    }

    /// Whether the file lost its name while open: deleted, replaced by a rename over it, or moved away. Writes
    /// into it would reach no later open. One `fstat` and one `stat` of the path.
    var isUnlinked: Bool {
        guard case .success(let status) = Sys.fstat(fd) else { return false }
        if status.links == 0 { return true }
        // Moved away: the inode still has a name, but not ours. (Only a name that is not there says so: a failure
        // that tells nothing of the name, EACCES or ENOMEM, does not.)
        switch Sys.lstat(path) {
        case .success(let named): return !named.isSameFile(as: status)
        case .failure(let e): return e == .noEntry || e == .notADirectory
        }
    }

    /// `isUnlinked`, but paying for it only when the process's inotify watch saw this file's link count change
    /// or the file move since the last check (the first call sets the watch up and checks once).
    var hasLostItsName: Bool {
        if !linkWatchTried {
            linkWatchTried = true
            linkWatch = LinkWatcher.shared.watch(fileDescriptor: fd)
            linkFlag = linkWatch.map { Unmanaged.passUnretained($0.flag) }
            return isUnlinked  // anything that happened before the watch existed
        }
        guard let linkFlag else { return isUnlinked }  // no inotify: check every time
        // A plain load on the hot path (the flag unretained: `linkWatch` holds it); the read-modify-write only when
        // the flag is up.
        guard linkFlag._withUnsafeGuaranteedRef({ $0.raised.load(ordering: .acquiring) }),
            let linkWatch, linkWatch.flag.raised.exchange(false, ordering: .acquiringAndReleasing)
        else { return false }
        if isUnlinked {
            linkWatch.flag.raised.store(true, ordering: .releasing)  // stays lost
            return true
        }
        return false
    }

    /// Whether the watcher thread has raised this file's flag since the last write checked it; nil when the file
    /// has no inotify watch (yet, or at all). For tests: they wait for the watcher's event instead of sleeping.
    var linkFlagIsRaised: Bool? {
        linkWatch.map { $0.flag.raised.load(ordering: .acquiring) }
    }

    /// The file's current size.
    func currentSize() throws(PrefsError) -> Int {
        try Sys.fstat(fd).orThrow("fstat", "cannot inspect the store file", path: path).size
    }

    /// Grows the file to `length` bytes with real blocks (so later stores through the mapping cannot raise
    /// SIGBUS for lack of space) and maps the new size. ENOSPC becomes `diskFull` and changes nothing.
    /// `writingBlocks` (a `.synchronous` store): the first `StoreLog.writtenAhead` bytes of the new blocks are also
    /// written with zeros (`Sys.writeZeros`); should that fail, the file stays extended (its new blocks allocated,
    /// reading as zeros) and is not mapped further, and the error names `pwrite`.
    func grow(to length: Int, writingBlocks: Bool = false) throws(PrefsError) {
        precondition(writable && length > mappedLength)
        let current = try currentSize()
        if length > current {
            try Sys.allocate(fd, offset: current, length: length - current).orThrow(
                "posix_fallocate", "cannot grow the store file to \(length) bytes", path: path)
            if writingBlocks {
                try Sys.writeZeros(fd, offset: current, length: min(length - current, StoreLog.writtenAhead)).orThrow(
                    "pwrite", "cannot write the store file's new blocks", path: path)
            }
        }
        try remap(length: max(length, current))
    }

    @inline(__always)
    func withBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try body(UnsafeRawBufferPointer(start: base, count: mappedLength))
    }

    @inline(__always)
    func withMutableBytes<R, E: Error>(_ body: (UnsafeMutableRawBufferPointer) throws(E) -> R) throws(E) -> R {
        precondition(writable, "writing through a read-only mapping")
        return try body(UnsafeMutableRawBufferPointer(start: base, count: mappedLength))
    }

    /// The words of the header that name the store and its image (UUID, generation): a file rewritten in place by
    /// something other than PrefsKV (`cp` of another store or of an older copy over it) changes them.
    var headerIdentity: HeaderIdentity {
        withBytes { bytes in
            HeaderIdentity(
                uuidLow: bytes.load(fromByteOffset: Format.uuidOffset, as: UInt64.self),
                uuidHigh: bytes.load(fromByteOffset: Format.uuidOffset + 8, as: UInt64.self),
                generation: bytes.load(fromByteOffset: Format.generationOffset, as: UInt64.self))
        }
    }

    // The dynamic header words. Each is one aligned 8-byte word in shared memory, loaded with acquire and
    // stored with release ordering, so another process's record bytes are visible once its log end is.

    @inline(__always)
    private func word(_ offset: Int) -> UnsafeMutablePointer<Atomic<UInt64>> {
        (base + offset).assumingMemoryBound(to: Atomic<UInt64>.self)
    }

    /// The raw log-end word (see `Format.decodeLogEnd`). Little-endian on disk; this code runs on
    /// little-endian machines only (checked at compile time, at the top of this file).
    @inline(__always)
    var logEndWord: UInt64 { word(Format.logEndOffset).pointee.load(ordering: .acquiring) }

    @inline(__always)
    var isSuperseded: Bool { word(Format.supersededOffset).pointee.load(ordering: .acquiring) != 0 }

    /// The header's generation word (static, but stored again first when a compaction writes a newer image into
    /// this file: `beginRewrite`).
    @inline(__always)
    var generationWord: UInt64 { word(Format.generationOffset).pointee.load(ordering: .acquiring) }

    @inline(__always)
    var isWatched: Bool { word(Format.watchedOffset).pointee.load(ordering: .relaxed) != 0 }

    /// Publishes a new log end: the acknowledgement point of a write.
    @inline(__always)
    func publish(logEnd: Int) -> UInt64 {
        let raw = Format.encodeLogEnd(logEnd)
        word(Format.logEndOffset).pointee.store(raw, ordering: .releasing)
        return raw
    }

    /// The raw pending word (`Format.encodePending`).
    var pendingWord: UInt64 { word(Format.pendingWordOffset).pointee.load(ordering: .acquiring) }

    /// The raw pending check word (`Format.pendingCheck`).
    var pendingCheckWord: UInt64 { word(Format.pendingCheckOffset).pointee.load(ordering: .acquiring) }

    /// Names the records after the log end, written and about to be flushed, as a `.synchronous` write's (0: none),
    /// with the checksum of their bytes.
    func storePending(_ raw: UInt64, check: UInt64 = 0) {
        word(Format.pendingCheckOffset).pointee.store(check, ordering: .releasing)
        word(Format.pendingWordOffset).pointee.store(raw, ordering: .releasing)
    }

    /// Whether the pending check word gives the bytes `[logEnd, end)` (inside the mapping).
    func pendingCheckHolds(logEnd: Int, end: Int) -> Bool {
        let check = pendingCheckWord
        return withBytes { Format.pendingCheck($0, logEnd: logEnd, end: end) } == check
    }

    /// Takes the lock on the pending word's byte (an open file description lock, waited for): exclusive while a
    /// writer's flush and publish are in flight or a writer resolves a left write, shared while a scan reads one
    /// (StoreLog+Pending.swift).
    func lockPendingWord(exclusive: Bool) throws(PrefsError) {
        try Sys.byteLock(fd, at: Format.pendingWordOffset, exclusive: exclusive).orThrow(
            "fcntl", "cannot lock the pending word of the store file", path: path)
    }

    /// `lockPendingWord(exclusive: true)`, false when the file system has no such locks (ENOLCK, EINVAL).
    func tryLockPendingWord() -> Bool {
        if case .success = Sys.byteLock(fd, at: Format.pendingWordOffset, exclusive: true) { return true }
        return false
    }

    func unlockPendingWord() {
        Sys.byteUnlock(fd, at: Format.pendingWordOffset)
    }

    /// The raw index word: where the newest index record is (encoded as the log end is), or 0.
    var indexWord: UInt64 { word(Format.indexWordOffset).pointee.load(ordering: .acquiring) }

    /// Names the index record at `offset` (already inside the published log) as the newest.
    func publishIndex(at offset: Int) {
        word(Format.indexWordOffset).pointee.store(Format.encodeLogEnd(offset), ordering: .releasing)
    }

    func setSuperseded(_ value: Bool) {
        word(Format.supersededOffset).pointee.store(value ? 1 : 0, ordering: .sequentiallyConsistent)
    }

    func setWatched(_ value: Bool) {
        word(Format.watchedOffset).pointee.store(value ? 1 : 0, ordering: .releasing)
    }

    /// Writes the log-end word again with `pwrite`: the same bytes, but a write(2)-family call raises the
    /// inotify IN_MODIFY event that stores through a mapping never raise.
    func announce(_ raw: UInt64) throws(PrefsError) {
        try withUnsafeBytes(of: raw.littleEndian) { bytes throws(PrefsError) in
            try Sys.pwrite(fd, bytes, at: Format.logEndOffset).orThrow(
                "pwrite", "cannot announce a write to observers", path: path)
        }
    }

    func syncData() throws(PrefsError) {
        if case .failure(let e) = Sys.fdatasync(fd) {
            noteFlushFailed()
            throw PrefsError.system(e, "fdatasync", "cannot flush the store file", path: path)
        }
    }

    /// Records that a flush of this file failed (`flushFailed`), for every mapping of it this process makes from now
    /// on (a handle that has it mapped already learns of the error from its own next flush, which fails).
    func noteFlushFailed() {
        flushFailed = true
        FailedFlushes.record(identity, headerIdentity)
    }
}

/// The header words of a mapped file that name its store and image, as they were when a handle adopted it.
struct HeaderIdentity: Equatable {
    var uuidLow: UInt64
    var uuidHigh: UInt64
    var generation: UInt64

    /// The store and image these words name (they are the header's little-endian words, loaded as they lie).
    var image: ImageIdentity {
        ImageIdentity(
            uuid: StoreUUID(low: UInt64(littleEndian: uuidLow), high: UInt64(littleEndian: uuidHigh)),
            generation: UInt64(littleEndian: generation))
    }

    init(uuidLow: UInt64, uuidHigh: UInt64, generation: UInt64) {
        self.uuidLow = uuidLow
        self.uuidHigh = uuidHigh
        self.generation = generation
    }

    /// The words `header` puts in a page (this code runs on little-endian machines only).
    init(_ header: Header) {
        self.init(uuidLow: header.uuid.low, uuidHigh: header.uuid.high, generation: header.generation)
    }
}

/// The files of which an `fdatasync` failed in this process (`MappedFile.flushFailed`), each by its device and inode
/// and the store and image its header named then: a later file given the same inode number (a file system reuses
/// freed ones) holds another image, and is not taken for it. Only grows, by one entry per failed flush. A count read
/// first keeps the set (and its generic metadata) off every open until a flush has failed.
enum FailedFlushes {
    private struct File: Hashable {
        let device: UInt64
        let inode: UInt64
        let uuidLow: UInt64
        let uuidHigh: UInt64
        let generation: UInt64

        init(_ status: FileStatus, _ image: HeaderIdentity) {
            device = status.device
            inode = status.inode
            uuidLow = image.uuidLow
            uuidHigh = image.uuidHigh
            generation = image.generation
        }
    }

    private static let count = Atomic<Int>(0)
    private static let files = SanitizedMutex<Set<File>>([])

    static func record(_ status: FileStatus, _ image: HeaderIdentity) {
        _ = files.withLock { $0.insert(File(status, image)) }
        count.add(1, ordering: .releasing)
    }

    static func contains(_ status: FileStatus, _ image: HeaderIdentity) -> Bool {
        guard count.load(ordering: .acquiring) > 0 else { return false }
        return files.withLock { $0.contains(File(status, image)) }
    }
}
