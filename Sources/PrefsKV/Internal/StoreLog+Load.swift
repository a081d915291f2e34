// Loading a data file into a snapshot: open it (creating an empty store when allowed), check its header
// against the sealer, map it and scan its log. Damage is returned in the snapshot, not acted on (recovery is
// Recovery.swift's). Every error leaves the file untouched.
import SystemLayer

extension StoreLog {
    /// Opens the data file (creating it when absent and allowed), validates its header against the sealer,
    /// maps it and scans the log. Damage is returned in the snapshot, not acted on. `directory`: the store
    /// directory's descriptor (`StoreLock.directoryFD`) the file is opened in, or `Sys.atWorkingDirectory` to
    /// open it by its path (a reload: the path may name a new directory by now).
    static func loadSnapshot(
        paths: StorePaths, directory: Int32, sealer: (any PrefsSealer)?, readOnlyCause: inout Errno?, create: Bool,
        lazy: Bool = false
    ) throws(PrefsError) -> Snapshot {
        let name = directory == Sys.atWorkingDirectory ? paths.data : paths.dataFileName
        var fd: Int32
        switch Sys.open(at: directory, name, readOnlyCause == nil ? .readWrite : .readOnly) {
        case .success(let f): fd = f
        case .failure(let e) where e == .noEntry && create && readOnlyCause == nil:
            try createStoreFile(paths: paths, sealer: sealer)
            fd = try Sys.open(at: directory, name, .readWrite).orThrow(
                "open", "cannot open the new store file", path: paths.data)
        case .failure(let e) where e == .noEntry && !create:
            throw PrefsError.system(e, "open", "cannot open the store file", path: paths.data)
        case .failure(let e) where e == .noEntry && readOnlyCause != nil:
            throw PrefsError.system(readOnlyCause!, "open", "cannot create the store file", path: paths.data)
        case .failure(let e) where StoreLock.isReadOnlyCause(e) && readOnlyCause == nil:
            fd = try Sys.open(at: directory, name, .readOnly).orThrow(
                "open", "cannot open the store file", path: paths.data)
            readOnlyCause = e
        case .failure(let e):
            throw PrefsError.system(e, "open", "cannot open the store file", path: paths.data)
        }
        let snapshot = try scannedSnapshot(
            fd: fd, path: paths.data, sealer: sealer, writable: readOnlyCause == nil,
            ownedOnly: readOnlyCause == nil || readOnlyCause == .readOnlyByChoice, lazy: lazy)
        let file = snapshot.file
        // A superseded flag on the file the path names is stale: a compactor was killed before its rename.
        // We hold the writer lock (or cannot write at all), so no compaction is under way. A damaged file is
        // left as it is: its quarantine copy must be byte-identical, and recovery replaces it anyway. So is a file
        // read from its persisted table, whose log before the table was not read: damage may lie there
        // (the engine's `catchUpLocked` reads the whole log before it clears the flag).
        if snapshot.damage.isEmpty && file.indexTable == nil && file.isSuperseded && file.writable {
            file.setSuperseded(false)
        }
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
        paths: StorePaths, directory: Int32, sealer: (any PrefsSealer)?, readOnlyCause: inout Errno?, lazy: Bool
    ) throws(PrefsError) -> IntactLoad {
        let fd: Int32
        switch Sys.open(at: directory, paths.dataFileName, readOnlyCause == nil ? .readWrite : .readOnly) {
        case .success(let f): fd = f
        case .failure: return .needsWriterLock  // missing, or read-only: `loadSnapshot` sorts it out
        }
        let snapshot = try scannedSnapshot(
            fd: fd, path: paths.data, sealer: sealer, writable: readOnlyCause == nil,
            ownedOnly: readOnlyCause == nil || readOnlyCause == .readOnlyByChoice, lazy: lazy)
        // (A file written again with a newer image while this scanned it, as a buffered store's spare file can be,
        // no longer holds the image it mapped: its generation word tells.)
        let unchanged = snapshot.file.headerIdentity == snapshot.file.adoptedIdentity
        // (A synchronous write flushed and not yet published may be in flight: only the writer lock tells.)
        return snapshot.damage.isEmpty && !snapshot.file.isSuperseded && unchanged && !snapshot.pendingWrite
            ? .intact(snapshot) : .needsWriterLock
    }

    /// Maps the data file `fd`, reads its header from the mapping (one `fstat`, no read: the scan goes through
    /// the same pages) and scans its log. Takes ownership of `fd`: it is closed on failure. A file that is not
    /// regular or is shorter than a header page is never mapped; `readHeader` names its problem. Errors leave
    /// the file untouched. `lazy`: when the file names an index record, its table and the records after it are
    /// read instead of the whole log (`lazyScan`). `ownedOnly`: hold the file to the owner rules of a handle that
    /// can write (`FileTrust.checkFile`), which a read-only handle by choice is; the default is `writable`.
    static func scannedSnapshot(
        fd: Int32, path: String, sealer: (any PrefsSealer)?, writable: Bool, ownedOnly: Bool? = nil, lazy: Bool = false
    ) throws(PrefsError) -> Snapshot {
        let status: FileStatus
        switch Sys.fstat(fd) {
        case .success(let s): status = s
        case .failure(let e):
            Sys.close(fd)
            throw PrefsError.system(e, "fstat", "cannot inspect the store file", path: path)
        }
        // The owner and mode, from this fstat: a file planted by another user, or one others may write or
        // read, is refused before its header is read or anything is written to it.
        do throws(PrefsError) {
            try FileTrust.checkFile(status, path: path, isData: true, writable: ownedOnly ?? writable)
        } catch {
            Sys.close(fd)
            throw error
        }
        guard status.isRegular && status.size >= Format.headerSize else {
            defer { Sys.close(fd) }
            _ = try readHeader(fd: fd, path: path, sealer: sealer)
            // Unreachable: a header needs a whole page, and only a regular file has one to read.
            throw PrefsError(.notAStore, "the store file is shorter than its header", path: path)
        }
        let file = try MappedFile(fd: fd, path: path, writable: writable, status: status)
        // (The damage goes through an inout array, not a returned tuple: a tuple's metadata would be instantiated
        // at run time in a fresh process's first open.)
        var headerDamage: [PrefsDamage] = []
        let header = try file.withBytes { bytes throws(PrefsError) in
            try trustedHeader(bytes, path: path, sealer: sealer, damage: &headerDamage)
        }
        var snapshot = Snapshot(file: file, header: header)
        snapshot.damage = headerDamage
        if lazy && headerDamage.isEmpty && header.hasIndexRecords && lazyScan(into: &snapshot, sealer: sealer) {
            return snapshot
        }
        try scan(into: &snapshot, sealer: sealer, logEndKnown: headerDamage.isEmpty)
        return snapshot
    }

    /// Opens the file at `path` (a store's data file, or a backup) read-only, reads its header, maps it and scans its
    /// whole log: what a check or a tool reads, with no lock taken and nothing changed or created. With `headerCopy`,
    /// a header page that does not verify is replaced by the copy at the log start when that verifies, and reported
    /// as the snapshot's first damage (the log end is then found by the scan); otherwise the header page must verify.
    /// `checkSealer`: the header's key check is compared with `sealer`'s (without a sealer, a sealed store's records
    /// are checked by checksum alone). `noun`: what the file is, in the error of an open that fails.
    static func readOnlySnapshot(
        path: String, sealer: (any PrefsSealer)?, checkSealer: Bool, headerCopy: Bool, noun: String = "the store file"
    ) throws(PrefsError) -> Snapshot {
        let fd = try Sys.open(path, .readOnly).orThrow("open", "cannot open \(noun)", path: path)
        let header: Header
        var headerDamage: [PrefsDamage] = []
        let file: MappedFile
        if headerCopy {
            do throws(PrefsError) {
                // A file shorter than a header page has no header copy: its header page's problem is the answer.
                let status = try Sys.fstat(fd).orThrow("fstat", "cannot inspect the store file", path: path)
                if !status.isRegular || status.size < Format.headerSize {
                    _ = try readHeader(fd: fd, path: path, sealer: sealer, checkSealer: checkSealer)
                }
            } catch {
                Sys.close(fd)
                throw error
            }
            file = try MappedFile(fd: fd, path: path, writable: false)
            header = try file.withBytes { bytes throws(PrefsError) in
                try trustedHeader(bytes, path: path, sealer: sealer, checkSealer: checkSealer, damage: &headerDamage)
            }
        } else {
            do throws(PrefsError) {
                header = try readHeader(fd: fd, path: path, sealer: sealer, checkSealer: checkSealer)
            } catch {
                Sys.close(fd)
                throw error
            }
            file = try MappedFile(fd: fd, path: path, writable: false)
        }
        var snapshot = Snapshot(file: file, header: header)
        snapshot.damage = headerDamage
        try scan(into: &snapshot, sealer: sealer, logEndKnown: headerDamage.isEmpty)
        return snapshot
    }

    /// Reads the newest index record the header names and the records after it, instead of the whole log: the
    /// snapshot's index then holds the keys of those records, and the table the rest (`StoreLog.table`). False,
    /// with the snapshot untouched, when that cannot be done: no index word or one that does not verify, a table
    /// whose header does not (or, in a sealed store, whose record does not authenticate), records after it that
    /// delete or clear keys, damage among them, or a lookup in the table that does not verify. The whole log is
    /// then read, as without a table, and finds whatever damage there is.
    static func lazyScan(into snapshot: inout Snapshot, sealer: (any PrefsSealer)?) -> Bool {
        let file = snapshot.file
        // A synchronous write between its flush and its publish: waited for (an open racing a busy writer still
        // reads the table); a write left past the log end sends the open to the whole scan, which reads it.
        if snapshot.header.hasPendingWord && mayHavePendingWrite(file) {
            guard (try? file.lockPendingWord(exclusive: false)) != nil else { return false }
            file.unlockPendingWord()
        }
        let word = file.logEndWord
        guard let end = Format.decodeLogEnd(word), end >= Format.logStart, end & 7 == 0, end <= file.mappedLength,
            let at = Format.decodeLogEnd(file.indexWord), at >= Format.logStart, at < end,
            !snapshot.header.hasPendingWord || Format.decodePending(file.pendingWord, logEnd: end) == nil
        else { return false }
        let sealed = snapshot.header.isEncrypted
        let auth = RecordAuth(header: snapshot.header, sealer: sealer)
        guard sealed == (auth != nil) else { return false }
        var index = KeyIndex()
        var liveBytes = 0
        var tail = 0
        var newestIndex = 0
        var usable = true
        var table: IndexTable?
        let result = file.withBytes { bytes -> ScanResult? in
            // In a sealed store the table must be authentic (one forged or replayed would hide or redirect keys): it is
            // checked as a private copy, which its lookups read.
            guard
                let found = IndexTable.read(
                    in: bytes, at: at, limit: end, auth: auth, recordSeed: snapshot.header.recordSeed)
            else { return nil }
            table = found
            newestIndex = found.recordLength
            liveBytes = found.liveBytes
            return LogScanner.scan(
                bytes, from: found.end, to: end, freeSpaceEndsLog: false, plainKeys: !sealed, minimumSeq: found.seq,
                seed: snapshot.header.recordSeed, auth: auth
            ) { record, recordBytes in
                tail = record.kind == .index ? 0 : tail + 1
                if record.kind == .index { newestIndex = record.length }
                usable =
                    usable
                    && StoreLog.applyAfterTable(
                        record, in: recordBytes, table: found, mapping: bytes, sealed: sealed, auth: auth,
                        index: &index, liveBytes: &liveBytes)
            }
        }
        guard let result, let table, usable, result.damage.isEmpty else { return false }
        snapshot.index = index
        file.indexTable = table
        snapshot.tailRecords = tail
        snapshot.indexBytes = newestIndex
        snapshot.liveBytes = liveBytes
        snapshot.recordCount = table.recordCount + result.recordsKept
        snapshot.maxSeq = max(table.seq, result.maxSeq)
        snapshot.end = result.end
        snapshot.endWord = word
        return true
    }

    /// The header an open trusts, read from a mapped file of at least a page: the header page's, or when that
    /// page does not verify (damaged, zeroed, not starting with the magic), the copy that starts a version-3 log,
    /// appending the damage to report for the header page to `damage` (the file is then recovered like any
    /// damaged one). Throws the header page's problem when no copy verifies either, and the sealer's mismatch
    /// (wrong key...) whichever header it is checked against. Errors leave the file untouched.
    static func trustedHeader(
        _ bytes: UnsafeRawBufferPointer, path: String, sealer: (any PrefsSealer)?, checkSealer: Bool = true,
        damage: inout [PrefsDamage]
    ) throws(PrefsError) -> Header {
        let page = UnsafeRawBufferPointer(rebasing: bytes[0..<min(bytes.count, Format.headerSize)])
        let header: Header
        do throws(Header.Problem) {
            header = try Header.parse(page)
        } catch {
            let why: String
            var problem = error
            switch error {
            case .notAStore(let reason), .damaged(let reason): why = reason
            case .unsupportedVersion(let v):
                // The version is read before the checksum. A newer header whose checksum verifies is one: refused.
                // One whose checksum does not may have a damaged version field: a copy of a version this library
                // reads decides; without one it stays a newer format (never rebuilt: a newer library may lay its
                // header out differently).
                let crc = UInt32(
                    littleEndian: page.loadUnaligned(fromByteOffset: Format.staticCRCOffset, as: UInt32.self))
                if page.count >= Format.staticSize
                    && crc == CRC32C.checksum(UnsafeRawBufferPointer(rebasing: page[0..<Format.staticCRCOffset]))
                {
                    throw headerError(error, path: path)
                }
                why = "it names format version \(v) and its checksum does not match"
            }
            // The copy is parsed and authenticated as one private copy of its record (`PrivateCopy`).
            let copyEnd = min(
                bytes.count & ~7,
                Format.logStart
                    + Format.recordLength(keyLength: 0, valueLength: Format.staticSize, authenticated: true))
            let (copy, authentic) = PrivateCopy.atOffsets(bytes, Format.logStart..<max(copyEnd, Format.logStart)) {
                bytes -> (Header?, Bool) in
                let copy: Header?
                do throws(Header.Problem) {
                    copy = try Header.fromCopy(in: bytes)
                } catch {
                    problem = error  // the copy verifies and names a newer version
                    copy = nil
                }
                guard let copy, checkSealer, let sealer, let auth = RecordAuth(header: copy, sealer: sealer),
                    let record = Header.copyRecord(in: bytes)
                else { return (copy, true) }
                return (copy, auth.isAuthentic(record, in: bytes))
            }
            guard let copy else { throw headerError(problem, path: path) }
            // In a sealed store the copy must be authentic too: one forged without the key (another identity, to
            // make every real record fail) is tampering, and nothing is written.
            if !authentic, let sealer {
                try check(copy, against: sealer, path: path)  // a wrong key is that, not tampering
                throw PrefsError(
                    .tampered,
                    "the header page does not verify and the copy of the header verifies its checksum but not its "
                        + "authenticator: it was forged by someone without the key; the file was left untouched",
                    path: path)
            }
            header = copy
            damage.append(
                PrefsDamage(
                range: 0..<Format.headerSize, records: 0, keys: [],
                reason: "the header page does not verify (\(why)); the store was read with the copy of its header "
                        + "at byte \(Format.logStart)"))
        }
        if checkSealer { try check(header, against: sealer, path: path) }
        return header
    }

    /// Reads and checks the header of an open file; errors leave the file untouched.
    static func readHeader(
        fd: Int32, path: String, sealer: (any PrefsSealer)?, checkSealer: Bool = true
    ) throws(PrefsError) -> Header {
        let status = try Sys.fstat(fd).orThrow("fstat", "cannot inspect the store file", path: path)
        guard status.isRegular else { throw PrefsError(.notAStore, "the store path is not a regular file", path: path) }
        // The page and the header copy after it are read into the stack: no array, whose storage type a fresh
        // process would instantiate. A damaged header page is read from its copy (`trustedHeader`).
        let length = Format.logStart + Format.headerCopyLength(authenticated: true)
        return try withUnsafeTemporaryAllocation(byteCount: length, alignment: 8) {
            page throws(PrefsError) -> Header in
            let count = try Sys.pread(fd, into: page, at: 0).orThrow(
                "pread", "cannot read the store header", path: path)
            var damage: [PrefsDamage] = []
            return try trustedHeader(
                UnsafeRawBufferPointer(rebasing: page[0..<count]), path: path, sealer: sealer,
                checkSealer: checkSealer, damage: &damage)
        }
    }

    /// The error for a header page that cannot be read.
    private static func headerError(_ problem: Header.Problem, path: String) -> PrefsError {
        switch problem {
        case .notAStore(let why):
            PrefsError(.notAStore, "not a PrefsKV store: \(why); the file was left untouched", path: path)
        case .unsupportedVersion(let v):
            PrefsError(
                .unsupportedVersion,
                "the store was written by format version \(v); this library reads versions up to \(Format.version); "
                    + "the file was left untouched", path: path)
        case .damaged(let why):
            PrefsError(.corrupted, "the store header cannot be read: \(why); the file was left untouched", path: path)
        }
    }

    /// Checks a header against the sealer the store is opened with (or without).
    static func check(_ header: Header, against sealer: (any PrefsSealer)?, path: String) throws(PrefsError) {
        // Plain ifs, not a switch over a (Bool, sealer) tuple: that tuple's metadata would be instantiated at run
        // time, in a fresh process's first open.
        if let sealer {
            guard header.isEncrypted else {
                throw PrefsError(.notEncrypted, "the store is not sealed and was opened with a sealer", path: path)
            }
            guard Header.sameKeyCheck(sealer.keyCheck, header.keyCheck) else {
                throw PrefsError(.wrongKey, "the sealer's key check does not match the store's: wrong key", path: path)
            }
            guard header.authenticatesRecords || sealer.acceptsUnauthenticatedLog else {
                throw PrefsError(
                    .tampered,
                    "the store's header names format version \(header.version), whose records are not authenticated, "
                        + "but its key was only ever used with authenticated records: the header was rewritten; the "
                        + "file was left untouched", path: path)
            }
        } else if header.isEncrypted {
            throw PrefsError(.encrypted, "the store is sealed and was opened without a sealer", path: path)
        }
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
        let image = try StoreImage.write(
            paths: paths, header: header, auth: RecordAuth(header: header, sealer: sealer), logLength: 0,
            capacity: Format.headerSize + 4096, watched: false
        ) { _ throws(PrefsError) in }
        try Sys.rename(paths.temporary, paths.data).orThrow("rename", "cannot create the store file", path: paths.data)
        _ = image
        syncDirectory(paths)
    }

    /// Scans the whole log of a freshly mapped snapshot; with the sealer of a sealed store of version 2 or later,
    /// every record's authenticator is checked too. `logEndKnown: false` (the header page did not verify): the
    /// log-end word is not read, and the whole file is scanned up to the free space after the last record. A
    /// `.synchronous` write its writer left past the log end is read when whole (`scanWithPendingWrite`).
    static func scan(into snapshot: inout Snapshot, sealer: (any PrefsSealer)?, logEndKnown: Bool = true)
        throws(PrefsError)
    {
        if logEndKnown && snapshot.header.hasPendingWord && mayHavePendingWrite(snapshot.file) {
            try scanWithPendingWrite(into: &snapshot, sealer: sealer)
        } else {
            scanLog(into: &snapshot, sealer: sealer, logEndKnown: logEndKnown, limit: nil)
        }
    }

    /// `scan`, up to the log end, or to `pendingEnd` (a left write's end, past it) when given.
    static func scanLog(into snapshot: inout Snapshot, sealer: (any PrefsSealer)?, logEndKnown: Bool, limit pendingEnd: Int?) {
        let file = snapshot.file
        let size = file.mappedLength
        let word = file.logEndWord
        snapshot.endWord = word
        let sealed = snapshot.header.isEncrypted
        var limit = size
        var extraDamage: PrefsDamage?
        var freeSpaceEndsLog = false
        if !logEndKnown {
            freeSpaceEndsLog = true
            limit = size & ~7
        } else if let end = Format.decodeLogEnd(word), end >= Format.logStart, end & 7 == 0 {
            if end <= size {
                limit = pendingEnd ?? end
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
        var tail = 0
        var newestIndex = 0
        let result = file.withBytes { bytes in
            LogScanner.scan(
                bytes, from: Format.logStart, to: limit, freeSpaceEndsLog: freeSpaceEndsLog, plainKeys: !sealed,
                seed: snapshot.header.recordSeed, auth: RecordAuth(header: snapshot.header, sealer: sealer)
            ) { record, recordBytes in
                tail = record.kind == .index ? 0 : tail + 1
                if record.kind == .index { newestIndex = record.length }
                StoreLog.applyToIndex(record, bytes: recordBytes, sealed: sealed, index: &index, liveBytes: &liveBytes)
            }
        }
        snapshot.index = index
        snapshot.tailRecords = tail
        snapshot.indexBytes = newestIndex
        snapshot.liveBytes = liveBytes
        snapshot.recordCount = result.recordsKept
        snapshot.maxSeq = result.maxSeq
        snapshot.end = result.end
        snapshot.damage += result.damage
        if var extra = extraDamage {
            // Merge with a damaged range running to the end of the file (the torn last record, or the members of a
            // transaction whose commit was cut off): what that range says of its records (their keys and dropped
            // writes, the names it hints at, tampering) is kept.
            if var last = snapshot.damage.last, last.range.upperBound == size {
                last.range = last.range.lowerBound..<extra.range.upperBound
                last.records = max(last.records, extra.records)
                last.reason = extra.reason
                extra = last
                snapshot.damage.removeLast()
            }
            snapshot.damage.append(extra)
        }
    }
}
