// New store images and compaction. Every image is written to a temporary file, flushed, and renamed over its
// destination; the old file is never modified except for its superseded word, so a crash at any instant leaves
// either the old or the new image under the name. Recovery, restore and rekey install their images here too.
import SystemLayer

/// Writing a store image to a temporary file.
enum StoreImage {
    /// Creates `temporary` (replacing a stale one), sizes it with real blocks (`writingBlocks`, a `.synchronous`
    /// store: the free space after the records written with zeros too, up to `StoreLog.writtenAhead` bytes of it:
    /// `Sys.writeZeros`), writes the header page and the
    /// header-copy record (version 3, authenticated with `auth` when sealed), and lets `fill` write the
    /// `logLength` bytes of records from `header.firstRecordOffset`, then flushes it (unless `flush` is false: an
    /// image whose header names a base image, `Header.baseGeneration`). The result is mapped writable; on any
    /// failure the temporary file is removed.
    static func write(
        temporary: String, finalPath: String, header: Header, auth: RecordAuth?, logLength: Int, capacity: Int,
        watched: Bool, flush: Bool = true, writingBlocks: Bool = false,
        fill: (UnsafeMutableRawBufferPointer) throws(PrefsError) -> Void
    ) throws(PrefsError) -> MappedFile {
        let capacity = max(capacity, header.firstRecordOffset + logLength)
        _ = Sys.unlink(temporary)
        let fd = try Sys.open(temporary, .createNew).orThrow("open", "cannot create a new store image", path: temporary)
        do throws(PrefsError) {
            try Sys.fchmod(fd, 0o600).orThrow("fchmod", "cannot set the new image's mode", path: temporary)
            try Sys.allocate(fd, offset: 0, length: capacity).orThrow(
                "posix_fallocate", "cannot allocate \(capacity) bytes for a new store image", path: temporary)
            if writingBlocks {
                // The free space after the records (which the copy writes through the mapping).
                let free = header.firstRecordOffset + logLength
                try Sys.writeZeros(fd, offset: free, length: min(capacity - free, StoreLog.writtenAhead)).orThrow(
                    "pwrite", "cannot write the new store image's blocks", path: temporary)
            }
        } catch {
            Sys.close(fd)
            _ = Sys.unlink(temporary)
            throw error
        }
        do throws(PrefsError) {
            let image = try MappedFile(fd: fd, path: finalPath, writable: true)
            let page = header.page(logEnd: header.firstRecordOffset + logLength, watched: watched)
            try image.withMutableBytes { bytes throws(PrefsError) in
                page.withUnsafeBytes { bytes.copyMemory(from: $0) }
                _ = Header.writeCopy(of: header, into: bytes, auth: auth)
                try fill(bytes)
            }
            image.adoptedIdentity = HeaderIdentity(header)
            if flush { try image.syncData() }
            return image
        } catch {
            _ = Sys.unlink(temporary)
            throw error
        }
    }

    /// Writes an image into `spare`, a file an earlier image of the store used and this handle kept mapped
    /// (`StoreLog.spare`, named `<id>.prefs.tmp`), instead of into a new file: its blocks are allocated and its
    /// pages cached and mapped, so the image costs neither page faults nor a file to create and, later, to free.
    /// Grown to `capacity` with real blocks when smaller (never shrunk: another process may still map it, and
    /// `usableSpare` takes no file much larger than the image needs). Then the superseded word is set and the new
    /// generation stored, and the earlier image's log is zeroed from its end down (`MappedFile.beginRewrite`: a
    /// handle still on the earlier image reopens the path, and a read of it that overlaps this fails its record
    /// check; free space then reads as zeros, as in a new file), then the header copy and the records are written,
    /// then the header page, superseded still set: the caller clears it once the file has the data name again. Not flushed (only a buffered store's automatic compaction
    /// reuses a file). Bytes of the earlier image that a power loss may leave on the disk fail their checksums in
    /// this image (format version 5, `RecordSeed`), and the earlier image's header names the same base image
    /// (`StoreLog.usableSpare`), so a cut finds either image recoverable.
    static func rewrite(
        spare: MappedFile, header: Header, auth: RecordAuth?, logLength: Int, capacity: Int, watched: Bool,
        fill: (UnsafeMutableRawBufferPointer) throws(PrefsError) -> Void
    ) throws(PrefsError) -> MappedFile {
        let size = try spare.currentSize()
        let capacity = max(capacity, header.firstRecordOffset + logLength, size)
        if size < capacity {
            try Sys.allocate(spare.fd, offset: size, length: capacity - size).orThrow(
                "posix_fallocate", "cannot grow the reused store image to \(capacity) bytes", path: spare.path)
        }
        try spare.remap(length: capacity)
        spare.beginRewrite(identity: HeaderIdentity(header))
        let end = header.firstRecordOffset + logLength
        var page = header.page(logEnd: end, watched: watched)
        page.withUnsafeMutableBytes { $0.storeBytes(of: UInt64(1), toByteOffset: Format.supersededOffset, as: UInt64.self) }
        try spare.withMutableBytes { bytes throws(PrefsError) in
            _ = Header.writeCopy(of: header, into: bytes, auth: auth)
            try fill(bytes)
            page.withUnsafeBytes { UnsafeMutableRawBufferPointer(rebasing: bytes[0..<Format.headerSize]).copyMemory(from: $0) }
        }
        return spare
    }

    /// An image of the store at `paths`, written to its temporary file.
    static func write(
        paths: StorePaths, header: Header, auth: RecordAuth?, logLength: Int, capacity: Int, watched: Bool,
        flush: Bool = true, writingBlocks: Bool = false,
        fill: (UnsafeMutableRawBufferPointer) throws(PrefsError) -> Void
    ) throws(PrefsError) -> MappedFile {
        try write(
            temporary: paths.temporary, finalPath: paths.data, header: header, auth: auth, logLength: logLength,
            capacity: capacity, watched: watched, flush: flush, writingBlocks: writingBlocks, fill: fill)
    }

    /// Copies `entries`' records (live entries in log order) from `source` (an image of `sourceHeader`, whose
    /// records' checksums start with its seed) into the log of an image of `header`, from its first record offset,
    /// numbered 1, 2, 3..., authenticated with `auth` for the image (a sealed store; an image that binds values seals
    /// each value again for its new place). Returns false when a source record is no longer the one its entry means
    /// (the file changed underneath: a copy gets a fresh checksum, so it must not be made of bytes nobody wrote).
    /// Throws `tampered` when a sealed value that verified its checksum does not open with the store's key, so that
    /// it cannot be sealed again for the new image (a record of a version-1 log, which no authenticator vouched for,
    /// forged by someone without the key): no image is written, and the store stays as it was (`sourcePath` names
    /// it).
    static func copyRecords(
        _ entries: some Sequence<Entry>, from source: UnsafeRawBufferPointer, sourceHeader: Header, sourcePath: String,
        into bytes: UnsafeMutableRawBufferPointer, header: Header, auth: RecordAuth?, verifiesRecords: Bool = false
    ) throws(PrefsError) -> Bool {
        let sourceSeed = sourceHeader.recordSeed
        let seed = header.recordSeed
        var offset = header.firstRecordOffset
        for (i, entry) in entries.enumerated() {
            let intact =
                entry.sealed
                ? RecordHeader.verified(in: source, at: entry.recordOffset, limit: source.count, seed: sourceSeed)?.length
                    == entry.recordLength
                : entry.crcOffset + 4 <= source.count
                    && UInt32(littleEndian: source.load(fromByteOffset: entry.crcOffset, as: UInt32.self))
                        == entry.recordCRC
                    && (!verifiesRecords
                        || RecordHeader.verified(
                            in: source, at: entry.recordOffset, limit: source.count, seed: sourceSeed)?.length
                            == entry.recordLength)
            guard intact else { return false }
            guard
                let length = copy(
                    recordHeader(of: entry, in: source), from: source, sourceHeader: sourceHeader, into: bytes,
                    at: offset, seq: UInt64(i + 1), auth: auth, seed: seed)
            else {
                throw PrefsError(
                    .tampered,
                    "the sealed value of the record at offset \(entry.recordOffset) does not open with the store's "
                        + "key (forged, or sealed with another key), so it cannot be sealed again for a new image: "
                        + "none was written and the store was left as it was", path: sourcePath)
            }
            offset += length
        }
        return true
    }

    /// Copies a verified record of `source`, an image `sourceImage`, into a new image at `offset` with sequence
    /// number `seq` and returns its length: as it is (`RecordWriter.copy`, with a new authenticator under `auth`),
    /// or, for a sealed set record copied into an image that binds values, sealed again for its new place
    /// (`SealedValue.copy`). Nil when a sealed value does not open (its bytes changed, or it was forged).
    ///
    /// In a sealed store nothing is copied as it lies in `source` (a mapping another process may write): a bound set
    /// record is opened and sealed again from a private copy (`SealedValue.copy`), and any other record of an
    /// authenticated source is copied into private memory and checked again there (its CRC, and its authenticator
    /// in `sourceHeader`'s image under the same sealer) before the copy is written from it. Nil when that check
    /// fails.
    static func copy(
        _ record: RecordHeader, from source: UnsafeRawBufferPointer, sourceHeader: Header,
        into bytes: UnsafeMutableRawBufferPointer, at offset: Int, seq: UInt64, auth: RecordAuth?, seed: RecordSeed
    ) -> Int? {
        if let auth, auth.bindsValues, record.kind == .set {
            return SealedValue.copy(
                record, from: source, sourceImage: ImageIdentity(sourceHeader), into: bytes, at: offset, seq: seq,
                image: ImageIdentity(uuid: auth.uuid, generation: auth.generation), seed: seed, sealer: auth.sealer)
        }
        if let auth, let sourceAuth = RecordAuth(header: sourceHeader, sealer: auth.sealer) {
            guard record.offset + record.length <= source.count else { return nil }
            return PrivateCopy.of(source, record.offset..<record.offset + record.length) { copy -> Int? in
                guard
                    let checked = RecordHeader.verified(in: copy, at: 0, limit: copy.count, seed: sourceHeader.recordSeed),
                    checked.kind == record.kind, checked.length == record.length,
                    sourceAuth.isAuthentic(checked, in: copy, fileOffset: record.offset)
                else { return nil }
                return RecordWriter.copy(checked, from: copy, into: bytes, at: offset, seq: seq, auth: auth, seed: seed)
            }
        }
        return RecordWriter.copy(record, from: source, into: bytes, at: offset, seq: seq, auth: auth, seed: seed)
    }

    /// The bytes `entries`' records take in an image whose set records carry an authenticator or not (a version-1
    /// sealed store's records grow by an authenticator when its first version-2 image is written; a set record of
    /// version 6 is bound by its value instead: `RecordAuth.signsSets`).
    static func length(of entries: some Sequence<Entry>, authenticated: Bool) -> Int {
        entries.reduce(0) {
            $0 + Format.recordLength(keyLength: $1.keyLength, valueLength: $1.valueLength, authenticated: authenticated)
        }
    }

    /// The record header of an index entry (a committed set record), with its sequence number read from `source`.
    static func recordHeader(of entry: Entry, in source: UnsafeRawBufferPointer) -> RecordHeader {
        RecordHeader(
            offset: entry.recordOffset, kind: .set, valueType: entry.type.rawValue,
            flags: RecordFlags.commit | (entry.sealed ? RecordFlags.sealed : 0)
                | (entry.authenticated ? RecordFlags.authenticated : 0) | (entry.bound ? RecordFlags.bound : 0),
            keyLength: entry.keyLength, valueLength: entry.valueLength,
            seq: UInt64(littleEndian: source.loadUnaligned(fromByteOffset: entry.recordOffset + 16, as: UInt64.self)),
            expiresAt: entry.expiresAt)
    }
}

extension StoreLog {
    // MARK: Compaction

    /// Under the writer lock: writes the live records to a new image sized 4096 + 2 x live bytes (so the
    /// file is at most twice the live data plus the header page; an automatic compaction's, below, may be larger),
    /// then swaps it in. Returns whether expired entries were dropped.
    ///
    /// The index is carried over, not rebuilt: each live entry's record offset is updated in place (no
    /// rehashing, no rescan of the image). Builds with `PREFSKV_INTERNAL_CHECKS` (debug builds: the tests)
    /// also scan every new image and check that it gives back exactly this index.
    ///
    /// The image is flushed before the rename and the directory right after it (`flushDirectoryAfterRename`: a
    /// failure is not thrown here, `compact()` throws it), unless `deferred` (a buffered
    /// store's automatic compaction: FileProtocols.md, "Compaction"), which makes sure the store has a base image
    /// (`<id>.prefs.prev`, the newest file made durable), names it in the new image's header and renames the image
    /// in place unflushed: a power cut before the next `sync()` then recovers from the base image and whatever of
    /// the data file verifies (`Recovery.restoreBase`). When no base image can be trusted, the compaction flushes.
    /// `compact()` and every other image are flushed: they promise durability.
    ///
    /// A deferred compaction also keeps the file it replaces, when that is an unflushed image and not the base: the
    /// image's name and the temporary name are exchanged (`<id>.prefs.tmp` then names the replaced file, which stays
    /// mapped as `spare`), and the next deferred compaction writes its image into that file (`StoreImage.rewrite`)
    /// while its header names the same base (`usableSpare`). So a run of automatic compactions between two syncs
    /// alternates between two files, creating, faulting in and freeing none.
    ///
    /// `threshold` (an automatic compaction: the auto-compaction threshold; nil for `compact()` and a recovery)
    /// sizes the new file at least that large, so that a small store does not grow its file again in several steps
    /// (each an `fallocate` and a new mapping) before the next compaction. And when the next automatic compaction
    /// will run at twice the live data rather than at three quarters of the threshold (`Engine.
    /// maybeCompactAutomatically`: the live data and the index record it expects, above 3/8 of the threshold), the
    /// log gets room beyond that point (`triggerRoom`; a page for a trigger beyond `roomLimit` thresholds), so that
    /// the write which reaches it does not first double the file, and the next compaction can write into this file
    /// again as its spare (`usableSpare`): the file then stays within 2.25 x live + two index records + two pages.
    /// (A single value larger than the room still grows it.)
    func compact(threshold: Int?, watched: Bool, deferred: Bool = false) throws(PrefsError) -> Bool {
        precondition(table == nil, "a compaction copies every key: the whole log is read first")
        let now = Sys.nowMilliseconds()
        var newHeader = header.nextImage()
        // Whether the image's set records carry an authenticator (their lengths count it): the image's version and
        // the sealer decide, not its base, chosen below.
        let authenticated = RecordAuth.signsSets(RecordAuth(header: newHeader, sealer: sealer))
        // The live entries' positions in the index, in log order, and the log they make: one word a key beside the
        // index (a million keys' compaction had 64 MB of arrays of positions and entry copies, the largest part of
        // that store's peak memory). Sorted as plain integers, (record offset / 8) << bits | position, while both
        // fit in a word (sorting positions with a closure that reads the entries was a large share of a compaction),
        // then masked back to positions in place. The copy and the index update below read each entry by position.
        // (An entry's offset beyond the file would only misplace it in the order: the position bits are kept.)
        let positionBits = Self.bitCount(Swift.max(index.count - 1, 0))
        let packs = positionBits + Self.bitCount(file.mappedLength >> 3) <= UInt64.bitWidth
        var order: [UInt64] = []
        order.reserveCapacity(index.count)
        var expired: [String] = []
        var length = 0
        for position in 0..<index.count {
            let entry = index[position: position]
            if entry.isExpired(now: now) {
                expired.append(index.keys[position])
                continue
            }
            length += Format.recordLength(
                keyLength: entry.keyLength, valueLength: entry.valueLength, authenticated: authenticated)
            order.append(packs ? UInt64(entry.recordOffset >> 3) << positionBits | UInt64(position) : UInt64(position))
        }
        if packs {
            order.sort()
            let mask: UInt64 = positionBits == UInt64.bitWidth ? ~0 : 1 << positionBits - 1
            for i in order.indices { order[i] &= mask }
        } else {
            order.sort { index[position: Int($0)].recordOffset < index[position: Int($1)].recordOffset }
        }
        let live = order
        let base = deferred ? prepareBase() : nil
        if let base { newHeader.baseWord = base + 1 }
        let auth = RecordAuth(header: newHeader, sealer: sealer)
        assert(RecordAuth.signsSets(auth) == authenticated, "an image's base changed how its records are authenticated")
        var capacity = max(Format.headerSize + 2 * length, (threshold ?? 0) / Sys.pageSize * Sys.pageSize)
        if let threshold {
            // The index record the store will keep for these keys (StoreLog+Table.swift), which the trigger counts
            // as live.
            let pieces = newHeader.authenticatesTablePieces
            let table =
                newHeader.hasIndexRecords && live.count >= IndexTable.minimumKeys
                    && IndexTable.fits(keyCount: live.count, pieces: pieces)
                ? IndexTable.recordLength(
                    keyCount: live.count, authenticated: auth != nil, pieces: pieces) : 0
            let trigger = 2 * (length + table)
            if trigger >= threshold / 4 * 3 {
                let room = trigger / Self.roomLimit <= threshold ? Self.triggerRoom(logLength: length) : Sys.pageSize
                capacity = max(capacity, Format.headerSize + trigger + room)
            }
        }
        // A file whose flush failed may have lost pages since the index was made: every record's CRC is checked.
        let verifies = file.flushFailed
        let fill = { (bytes: UnsafeMutableRawBufferPointer) throws(PrefsError) -> Void in
            let intact = try self.file.withBytes { source throws(PrefsError) in
                try StoreImage.copyRecords(
                    live.lazy.map { self.index[position: Int($0)] }, from: source, sourceHeader: self.header,
                    sourcePath: self.paths.data, into: bytes, header: newHeader, auth: auth, verifiesRecords: verifies)
            }
            if !intact || self.file.hasFaulted { throw self.changedUnderneath() }
        }
        let image: MappedFile
        let reused: Bool
        if let base, let spare = usableSpare(base: base, generation: newHeader.generation, capacity: capacity) {
            self.spare = nil
            do throws(PrefsError) {
                image = try StoreImage.rewrite(
                    spare: spare, header: newHeader, auth: auth, logLength: length, capacity: capacity,
                    watched: watched, fill: fill)
            } catch {
                // Its bytes are neither image now: it is dropped (the next image is written to a new file).
                _ = Sys.unlink(paths.temporary)
                throw error
            }
            reused = true
        } else {
            spare = nil  // StoreImage.write removes its name
            image = try StoreImage.write(
                paths: paths, header: newHeader, auth: auth, logLength: length, capacity: capacity, watched: watched,
                flush: base == nil, writingBlocks: synchronous, fill: fill)
            reused = false
        }
        // The replaced file becomes the next spare when it is an unflushed image (never the base, nor a file a
        // sync() or a flushed path made the store's durable state).
        // And only when it is small enough to be written into (`spareFits`, against this image's size):
        // a file grown far past it, or left by a store that lost most of its data, would stay beside the data file
        // unused until the next sync().
        let keepsReplaced =
            base != nil && base != header.generation && header.baseGeneration == base
            && Self.spareFits(size: file.mappedLength, capacity: image.mappedLength)
        let replaced = file
        let exchanged = try rename(image, temporary: paths.temporary, exchange: keepsReplaced)
        if reused { image.setSuperseded(false) }
        if exchanged { spare = replaced }
        // A flushed image is the store's durable state once its name is: a base image, if any, is stale from then on
        // (and may hold values since deleted), and removed after the directory flush, never before. An unflushed
        // image keeps it (its directory is flushed by the next `sync()`).
        let nameDurable = base == nil && flushDirectoryAfterRename()

        // The image holds the live records in the same order, back to back after the header copy.
        var offset = newHeader.firstRecordOffset
        image.withBytes { bytes in
            let bound = auth?.bindsValues ?? false
            for word in live {
                // Each entry read and written back once (a setter per field checked the storage's uniqueness each).
                let position = Int(word)
                var entry = index[position: position]
                entry.recordOffset = offset
                entry.authenticated = authenticated
                entry.bound = bound
                let length = entry.recordLength
                // A copy is renumbered, so its CRC is new: the entry learns it (reads check it).
                if !entry.sealed {
                    entry.recordCRC = UInt32(littleEndian: bytes.load(fromByteOffset: offset + length - 4, as: UInt32.self))
                }
                index[position: position] = entry
                offset += length
            }
        }
        for key in expired { index.removeValue(forKey: key) }
        file = image
        header = newHeader
        liveBytes = length
        recordCount = live.count
        tailRecords = live.count
        indexBytes = 0
        skippedDamage = false
        nextSeq = UInt64(live.count) + 1
        knownEnd = newHeader.firstRecordOffset + length
        adoptedLeftWrite = false
        knownEndWord = image.logEndWord
        #if PREFSKV_INTERNAL_CHECKS
        var check = Snapshot(file: image, header: newHeader)
        StoreLog.scanLog(into: &check, sealer: sealer, logEndKnown: true, limit: nil)
        // (Unless something outside PrefsKV shrank the new file already: the next access reopens it.)
        precondition(
            image.hasFaulted
                || check.damage.isEmpty && check.end == knownEnd && check.liveBytes == liveBytes
                    && check.index.count == index.count
                    && check.index.allSatisfy {
                        index[$0.key]?.recordOffset == $0.value.recordOffset
                            && index[$0.key]?.authenticated == $0.value.authenticated
                            && index[$0.key]?.bound == $0.value.bound
                            && ($0.value.sealed || index[$0.key]?.recordCRC == $0.value.recordCRC)
                    },
            "a compacted image does not give back the index it was written from")
        #endif
        // The name taken as durable only when the directory flush after the rename succeeded; otherwise the next
        // synchronous write or `sync()` flushes the directory again (`syncDirectoryIfNeeded`), and `compact()`
        // throws the failure (`Engine.compactLocked`).
        if nameDurable { directorySyncedGeneration = newHeader.generation }
        return !expired.isEmpty
    }

    /// The bits `value` (not negative) needs: 0 for 0.
    private static func bitCount(_ value: Int) -> Int { Int.bitWidth - value.leadingZeroBitCount }

    /// Flushes the directory after an image was renamed over the data file, then removes the base image, which the
    /// renamed image makes stale (in this order: a removal that reached the disk before the rename would leave a
    /// power cut the old name without its base). A failure is kept in `directoryFlushFailure`, for `compact()` to
    /// throw, and leaves the name taken as not durable: the next synchronous write, `sync()` or flushed compaction
    /// flushes the directory again (`syncDirectoryIfNeeded`). (Before, the error was dropped and the name taken as
    /// durable, so later synchronous writes returned that a power cut could lose with the name.) The base stays
    /// until a flush succeeds: the image names none, so a base left there is never read.
    private func flushDirectoryAfterRename() -> Bool {
        if let error = syncDirectoryChecked(paths) {
            directoryFlushFailure = error
            staleBaseMayRemain = true
            return false
        }
        directoryFlushFailure = nil
        if case .success = Sys.unlink(paths.previous) { syncDirectory(paths) }
        return true
    }

    /// Under the writer lock, once the directory was flushed for the current file (`syncDirectoryIfNeeded`): removes
    /// a base image an image naming none left because its directory flush failed (`flushDirectoryAfterRename`), so
    /// that it does not stay until the next compaction (after a rekey it holds values under the old key). A base the
    /// current file names is never touched.
    func removeStaleBaseIfNeeded() {
        guard staleBaseMayRemain, header.baseGeneration == nil, directorySyncedGeneration == header.generation
        else { return }
        if case .success = Sys.unlink(paths.previous) { syncDirectory(paths) }
        staleBaseMayRemain = false
    }

    // MARK: Installing an image

    /// Swaps a flushed image in: marks the current file superseded (other handles then reopen the path),
    /// renames the image over the data file, fsyncs the directory, and adopts the image (scanning it). A base
    /// image is stale from then on and removed once the directory is flushed (after a rekey it holds values under
    /// the old key). A failed directory flush is not thrown (a restore, a rekey and a recovery have taken effect):
    /// it leaves the name taken as not durable (`flushDirectoryAfterRename`).
    func install(_ image: MappedFile, header newHeader: Header) throws(PrefsError) {
        spare = nil  // StoreImage.write removed its name
        try rename(image, temporary: paths.temporary)
        let nameDurable = flushDirectoryAfterRename()
        var snapshot = Snapshot(file: image, header: newHeader)
        StoreLog.scanLog(into: &snapshot, sealer: sealer, logEndKnown: true, limit: nil)
        // An image this handle just wrote verifies, unless something outside PrefsKV changed it since the rename.
        if !snapshot.damage.isEmpty {
            assert(
                image.hasFaulted || image.headerIdentity != HeaderIdentity(newHeader),
                "a freshly written image does not verify")
            throw changedUnderneath()
        }
        adopt(snapshot)
        if nameDurable { directorySyncedGeneration = newHeader.generation }
    }

    /// Marks the current file superseded and renames the image over the data file; the caller flushes the directory
    /// (a flushed image: `flushDirectoryAfterRename`, right after; an unflushed one's, the next `sync()`). With
    /// `exchange`, the two names are exchanged instead (`renameat2`), so that the temporary name then holds the
    /// replaced file; returns whether they were (false: renamed, on a file system that cannot exchange names).
    @discardableResult
    private func rename(
        _ image: MappedFile, temporary: String, exchange: Bool = false
    ) throws(PrefsError) -> Bool {
        let marks = file.writable && !file.isUnreadableOriginal
        if marks { file.setSuperseded(true) }
        var exchanged = false
        var call = "rename"
        var result = Result<Void, Errno>.success(())
        if exchange {
            call = "renameat2"
            result = Sys.exchange(temporary, paths.data)
            if case .success = result { exchanged = true }
        }
        // Renamed instead where exchanging names is not supported (EINVAL: the file system; ENOSYS: the kernel); any
        // other failure would fail a rename the same way.
        if !exchanged, case .failure(let e) = result, [Errno.invalidArgument, .noSystemCall, .notSupported].contains(e) {
            call = "rename"
            result = Sys.rename(temporary, paths.data)
        } else if !exchange {
            result = Sys.rename(temporary, paths.data)
        }
        if case .failure(let e) = result {
            if marks { file.setSuperseded(false) }
            _ = Sys.unlink(temporary)
            throw PrefsError.system(e, call, "cannot put the new store image in place", path: paths.data)
        }
        return exchanged
    }

    /// The log room an automatically compacted image has beyond its next trigger (twice its live records,
    /// `logLength`, and index record): a quarter of the live records, at least a page, rounded up to a page. An
    /// automatic compaction runs when the dead records are half the log, so when the log is twice the live data:
    /// without this room the write that reaches that point is the one that finds the file full, and doubles it just
    /// before the compaction; the replaced file, twice too large, could not be the next image's spare (a sealed
    /// store's live data, above 3/8 of the threshold, did that at every compaction).
    ///
    /// A store whose trigger is beyond `roomLimit` thresholds (live data and index record above 2 MiB at the
    /// default threshold of 256 KiB) gets a page instead (`compact`): it compacts after writing at least 8
    /// thresholds, and a quarter of its live data would stay in its file (14 MB of a million keys' 146 MB) to spare
    /// a doubling only a write larger than a page, or live data that grew, still needs.
    static func triggerRoom(logLength: Int) -> Int {
        max(logLength / 4 + Sys.pageSize - 1, Sys.pageSize) / Sys.pageSize * Sys.pageSize
    }

    /// The largest trigger, in thresholds, whose image gets `triggerRoom` rather than a page.
    static let roomLimit = 16

    /// Whether a spare file of `size` bytes may take an image of `capacity` bytes: it is never shrunk, so at most an
    /// eighth (or 16 KiB) larger.
    static func spareFits(size: Int, capacity: Int) -> Bool { size <= capacity + max(capacity / 8, 16 * 1024) }

    /// The spare file (`spare`) when the next deferred compaction, whose image of generation `generation` names the
    /// base image of generation `base` and needs `capacity` bytes, may write into it: still named `<id>.prefs.tmp`,
    /// not faulted, never failed a flush, not the base's file, at most an eighth (or 16 KiB) larger than `capacity`
    /// (it is never shrunk), and its header (as it maps it) of this store, verifying, of an older generation (records
    /// of the earlier image must fail their checksums in the new one), and naming that same base. A power cut while it is being
    /// rewritten may leave its earlier image's header on the disk: that image was renamed in place after the same
    /// base, so it holds everything the base holds, or is damaged and restored from it. Anything else drops the
    /// spare (nil).
    func usableSpare(base: UInt64, generation: UInt64, capacity: Int) -> MappedFile? {
        guard let spare else { return nil }
        guard spare.writable, !spare.hasFaulted, !spare.flushFailed, case .success(let named) = Sys.lstat(paths.temporary),
            named.isSameFile(as: spare.identity), case .success(let previous) = Sys.lstat(paths.previous),
            !previous.isSameFile(as: spare.identity),
            let spareHeader = spare.withBytes({ try? Header.parse(UnsafeRawBufferPointer(rebasing: $0[0..<Format.headerSize]), wholePage: true) }),
            spareHeader.uuid == header.uuid, spareHeader.baseGeneration == base, spareHeader.generation != base,
            spareHeader.generation < generation, let size = try? spare.currentSize(),
            Self.spareFits(size: size, capacity: capacity)
        else {
            self.spare = nil
            return nil
        }
        return spare
    }
}
