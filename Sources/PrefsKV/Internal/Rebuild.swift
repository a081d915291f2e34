// Rebuilding a store whose every header copy is gone (Documentation/FileFormat.md, "Rebuilding a store no copy of
// whose header verifies"): the body is scanned for records that verify under a header of last resort, and the
// result recovered as any damaged file. Only on request (`PrefsStore.repair`, `unreadableFile = .quarantineAndRebuild`): an open never guesses.
import SystemLayer

extension StoreLog {
    /// Maps the data file (writable: the caller recovers it, copying it aside first) and scans its body for
    /// records that verify, under the header that keeps the most of them:
    ///
    /// - a plain store's records verify by their checksum, which from version 5 starts with the image's
    ///   generation: each generation still legible in the header page and the header-copy record is tried (and no
    ///   generation, for older versions), and when none verifies any record, the generation is searched for
    ///   (`searchGeneration`) among the first 2^24;
    /// - a sealed store's records are bound to its identity (UUID and generation), which only a header copy
    ///   holds: every identity still legible in the header page and in the header-copy record, whether their
    ///   checksums verify or not, is tried, and one under which records authenticate with the key is kept (a
    ///   wrong identity, or a wrong key, authenticates none). With none, the store is rebuilt empty.
    ///
    /// The snapshot's damage starts with the header page, naming `unreadable`; it always holds damage, so the
    /// caller's recovery writes a new image (with new header copies) and keeps the original.
    static func rebuiltSnapshot(
        paths: StorePaths, directory: Int32, sealer: (any PrefsSealer)?, unreadable: PrefsError
    ) throws(PrefsError) -> Snapshot {
        let fd = try Sys.open(at: directory, paths.dataFileName, .readWrite).orThrow(
            "open", "cannot open the store file", path: paths.data)
        let status: FileStatus
        do throws(PrefsError) {
            status = try Sys.fstat(fd).orThrow("fstat", "cannot inspect the store file", path: paths.data)
            try FileTrust.checkFile(status, path: paths.data, isData: true, writable: true)
        } catch {
            Sys.close(fd)
            throw error
        }
        let file = try MappedFile(fd: fd, path: paths.data, writable: true, status: status)
        // Its bytes are only read: the recovery copies them aside and installs a new image by a rename.
        file.isUnreadableOriginal = true
        // What the body holds by the shape of its records (their checksums start with a generation not known yet),
        // and what the damaged header copies still say.
        let shaped = file.withBytes { plausibleRecords(in: $0) }
        let sealedRecords = shaped.count { ($0.kind == .set || $0.kind == .delete) && $0.isSealed }
        let plainRecords = shaped.count { ($0.kind == .set || $0.kind == .delete) && !$0.isSealed }
        let legible = file.withBytes { legibleHeaders(in: $0) }
        // Whether the store is sealed, by most of its records: damage can flip a record's sealed flag (a flipped
        // record no longer verifies its checksum, and is lost as any damaged record), so one record that looks
        // sealed does not make a plain body sealed, nor the reverse. Only a body with as many of each (none, usually)
        // is told by a sealed flag still legible in a header copy.
        let looksSealed =
            sealedRecords > plainRecords
            || (sealedRecords == plainRecords && legible.contains(where: { $0.flags & Format.flagEncrypted != 0 }))
        guard let sealer else {
            // Rebuilding sealed records needs the key (a plain rebuild would drop them all).
            if looksSealed {
                throw PrefsError(
                    .encrypted,
                    "no copy of the header verifies and the store is sealed: rebuilding it needs its sealer; the file "
                        + "was left untouched", path: paths.data)
            }
            return rebuiltPlain(file: file, legible: legible, records: shaped, unreadable: unreadable)
        }
        if !looksSealed && plainRecords > 0 {
            throw PrefsError(
                .notEncrypted,
                "no copy of the header verifies and the records of the file are not sealed: it was opened with a "
                    + "sealer; the file was left untouched", path: paths.data)
        }
        var best: Snapshot?
        for header in candidateHeaders(legible, sealer: sealer) {
            var snapshot = Snapshot(file: file, header: header)
            scanLog(into: &snapshot, sealer: sealer, logEndKnown: false, limit: nil)
            if best == nil || snapshot.recordCount > best!.recordCount { best = snapshot }
        }
        if let best, best.recordCount > 0 {
            var snapshot = best
            snapshot.damage.insert(headerDamage(unreadable), at: 0)
            return snapshot
        }
        // Nothing authenticates: a wrong key must not become an empty store under it, and records that cannot be
        // authenticated cannot be told from forgeries.
        let keyChecks = legible.map(\.keyCheck).filter { !$0.isEmpty }
        if !keyChecks.isEmpty && !keyChecks.contains(where: { Header.sameKeyCheck($0, sealer.keyCheck) }) {
            throw PrefsError(
                .wrongKey,
                "no copy of the header verifies, and the key check still legible in it is not the sealer's: wrong key; "
                    + "the file was left untouched", path: paths.data)
        }
        if sealedRecords > 0 {
            throw PrefsError(
                .corrupted,
                "no copy of the header verifies and no record of the file authenticates with the key under a store "
                    + "identity (UUID and generation) still legible in it: a wrong key cannot be told from a lost "
                    + "identity, and records that do not authenticate are never kept; nothing was rebuilt and the file "
                    + "was left untouched", path: paths.data)
        }
        return rebuilt(file: file, header: Header.new(keyCheck: sealer.keyCheck), unreadable: unreadable)
    }

    /// The snapshot of a rebuild under `header`: the body scanned, the header page reported first.
    private static func rebuilt(file: MappedFile, header: Header, unreadable: PrefsError) -> Snapshot {
        var snapshot = Snapshot(file: file, header: header)
        scanLog(into: &snapshot, sealer: nil, logEndKnown: false, limit: nil)
        snapshot.damage.insert(headerDamage(unreadable), at: 0)
        return snapshot
    }

    /// A plain rebuild: the body scanned under each generation still legible (version 5: the records' checksums
    /// start with it) and under none (older versions); when no record verifies under any of them, under the
    /// generation `searchGeneration` finds. The header that keeps the most records wins.
    private static func rebuiltPlain(
        file: MappedFile, legible: [LegibleHeader], records: [RecordHeader], unreadable: PrefsError
    ) -> Snapshot {
        func header(generation: UInt64?) -> Header {
            var header = Header.new(keyCheck: nil)
            if let generation {
                header.generation = generation
            } else {
                header.version = Format.indexVersion
            }
            return header
        }
        var best: Snapshot?
        func consider(_ header: Header) {
            var snapshot = Snapshot(file: file, header: header)
            scanLog(into: &snapshot, sealer: nil, logEndKnown: false, limit: nil)
            if best == nil || snapshot.recordCount > best!.recordCount { best = snapshot }
        }
        consider(header(generation: nil))
        for generation in Set(legible.map(\.generation)) { consider(header(generation: generation)) }
        // A search when no candidate keeps even half of the records that look whole (a legible header may be an
        // earlier image's, left in a file a newer image was written into): with a record the best one does not
        // verify, below the highest legible generation plus 2^16 (at least 2^24).
        let data = records.filter { $0.kind != .header }
        if best!.recordCount * 2 < data.count {
            let seed = best!.header.recordSeed
            let unverified = file.withBytes { bytes in
                data.filter { RecordHeader.verified(in: bytes, at: $0.offset, limit: bytes.count, seed: seed) == nil }
            }
            let top = max(legible.map(\.generation).max().map { $0 &+ (1 << 16) } ?? 0, 1 << 24)
            let found = file.withBytes { searchGeneration(records: unverified, in: $0, below: top) }
            for generation in found { consider(header(generation: generation)) }
        }
        var snapshot = best!
        snapshot.damage.insert(headerDamage(unreadable), at: 0)
        return snapshot
    }

    /// The records of the body whose fields are plausible (their checksums not checked), in file order: from the
    /// log start, each one skipped whole, and 8 bytes at a time where none is.
    private static func plausibleRecords(in bytes: UnsafeRawBufferPointer) -> [RecordHeader] {
        var records: [RecordHeader] = []
        let limit = bytes.count & ~7
        var offset = Format.logStart
        while offset < limit {
            if let record = RecordHeader.plausible(in: bytes, at: offset, limit: limit) {
                records.append(record)
                offset += record.length
            } else {
                offset += 8
            }
        }
        return records
    }

    /// The generations in the 2^24 below `top` under which the shortest of `records` verifies its checksum (version
    /// 5: the checksum starts with the generation, which only the lost headers held): about a second of CRC32C at
    /// worst, for a path taken only when no header does. Usually one; a wrong one (a 2^-8 chance over the whole
    /// range) verifies nothing else, and the caller keeps the generation under which most records verify.
    static func searchGeneration(
        records: [RecordHeader], in bytes: UnsafeRawBufferPointer, below top: UInt64 = 1 << 24
    ) -> [UInt64] {
        guard
            let record = records.filter({ $0.kind != .header }).min(by: { $0.length < $1.length })
        else { return [] }
        let body = UnsafeRawBufferPointer(rebasing: bytes[record.offset + 4..<record.offset + record.length - 4])
        var found: [UInt64] = []
        for generation in (top > 1 << 24 ? top - (1 << 24) : 0)..<top {
            var crc = RecordSeed(generation: generation).start
            crc.update(body)
            if crc.value == record.crc { found.append(generation) }
        }
        return found
    }

    private static func headerDamage(_ unreadable: PrefsError) -> PrefsDamage {
        PrefsDamage(
            range: 0..<Format.headerSize, records: 0, keys: [],
            reason: "no copy of the header verifies (\(unreadable.message)); the store was rebuilt from the records "
                + "of its body that verify")
    }

    /// The fields of the header's static part still legible where its magic is: at the start of the page, and in
    /// the value of a header-copy record at 4096. Their checksums are not checked (neither verifies).
    struct LegibleHeader {
        var flags: UInt32
        var uuid: StoreUUID
        var generation: UInt64
        var createdAt: Int64
        var keyCheck: [UInt8]
    }

    private static func legibleHeaders(in bytes: UnsafeRawBufferPointer) -> [LegibleHeader] {
        var starts: [Int] = []
        if bytes.count >= Format.staticSize && bytes.load(as: UInt64.self) == Format.fileMagic.littleEndian {
            starts.append(0)
        }
        let copy = Format.logStart + Format.recordHeaderSize
        if bytes.count >= copy + Format.staticSize
            && bytes.load(fromByteOffset: Format.logStart, as: UInt32.self) == Format.recordMagic.littleEndian
            && bytes[Format.logStart + 4] == RecordKind.header.rawValue
        {
            starts.append(copy)
        }
        return starts.map { start in
            func word(_ offset: Int) -> UInt64 {
                UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: start + offset, as: UInt64.self))
            }
            let keyCheckLength = Int(
                UInt16(
                    littleEndian: bytes.loadUnaligned(fromByteOffset: start + Format.keyCheckLengthOffset, as: UInt16.self)
                ))
            let keyCheck =
                keyCheckLength <= Format.maxKeyCheckLength
                ? Array(bytes[start + Format.keyCheckOffset..<start + Format.keyCheckOffset + keyCheckLength]) : []
            return LegibleHeader(
                flags: UInt32(
                    littleEndian: bytes.loadUnaligned(fromByteOffset: start + Format.flagsOffset, as: UInt32.self)),
                uuid: StoreUUID(low: word(Format.uuidOffset), high: word(Format.uuidOffset + 8)),
                generation: word(Format.generationOffset), createdAt: Int64(bitPattern: word(Format.createdAtOffset)),
                keyCheck: keyCheck)
        }
    }

    /// The headers a sealed rebuild tries: each distinct identity legible in the damaged header copies, with the
    /// sealer's key check, in the current version (record checksums that start with the generation, set records
    /// bound by their values), in version 5 (the same checksums, set records with authenticators) and in version 4
    /// (checksums that do not start with the generation).
    private static func candidateHeaders(_ legible: [LegibleHeader], sealer: any PrefsSealer) -> [Header] {
        var headers: [Header] = []
        for fields in legible
        where !headers.contains(where: { $0.uuid == fields.uuid && $0.generation == fields.generation }) {
            var header = Header.new(keyCheck: sealer.keyCheck)
            header.uuid = fields.uuid
            header.generation = fields.generation
            header.createdAt = fields.createdAt
            headers.append(header)
            header.version = Format.seededVersion
            headers.append(header)
            header.version = Format.indexVersion
            headers.append(header)
        }
        return headers
    }
}
