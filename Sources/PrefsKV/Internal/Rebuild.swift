// Rebuilding a store whose every header copy is gone (Documentation/Recovery.md, "No header verifies"): the body
// is scanned for records that verify under a header of last resort, and the result recovered as any damaged
// file. Only on request (`PrefsStore.repair`, `unreadableFile = .quarantineAndRebuild`): an open never guesses.
import SystemLayer

extension StoreLog {
    /// Maps the data file (writable: the caller recovers it, copying it aside first) and scans its body for
    /// records that verify, under the header that keeps the most of them:
    ///
    /// - a plain store's records verify by their checksum, under a new header;
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
        if sealer == nil {
            // Sealed records in the body: rebuilding them needs the key (a plain rebuild would drop them all).
            var sealed = false
            file.withBytes { bytes in
                _ = LogScanner.scan(
                    bytes, from: Format.logStart, to: bytes.count & ~7, freeSpaceEndsLog: true, plainKeys: false
                ) { if $0.isSealed { sealed = true } }
            }
            if sealed {
                throw PrefsError(
                    .encrypted,
                    "no copy of the header verifies and the records of the file are sealed: rebuilding it needs its "
                        + "sealer; the file was left untouched", path: paths.data)
            }
        }
        var best: Snapshot?
        for header in file.withBytes({ candidateHeaders(in: $0, sealer: sealer) }) {
            var snapshot = Snapshot(file: file, header: header)
            scan(into: &snapshot, sealer: sealer, logEndKnown: false)
            if best == nil || snapshot.recordCount > best!.recordCount { best = snapshot }
        }
        var rebuilt = best!
        if sealer != nil && rebuilt.recordCount == 0 {
            // Nothing authenticated under any identity: an empty store under a new one, and one range for the
            // body, whose records cannot be told from forgeries.
            rebuilt = Snapshot(file: file, header: Header.new(keyCheck: sealer!.keyCheck))
            let end = file.mappedLength & ~7
            if end > Format.logStart {
                var body = file.withBytes { LogScanner.describe($0, Format.logStart..<end, plainKeys: false) }
                body.reason =
                    "no record authenticates with the key under a store identity (UUID and generation) legible in "
                    + "a header copy: they cannot be told from forged or replayed ones, and were not kept"
                rebuilt.damage = [body]
            }
        }
        rebuilt.damage.insert(
            PrefsDamage(
                range: 0..<Format.headerSize, records: 0, keys: [],
                reason: "no copy of the header verifies (\(unreadable.message)); the store was rebuilt from the "
                    + "records of its body that verify"), at: 0)
        return rebuilt
    }

    /// The headers a rebuild tries: a new one for a plain store; for a sealed one, each distinct identity
    /// legible in the header page and in the header-copy record (read whatever their checksums say), with the
    /// sealer's key check, in the current version.
    private static func candidateHeaders(in bytes: UnsafeRawBufferPointer, sealer: (any PrefsSealer)?) -> [Header] {
        guard let sealer else { return [Header.new(keyCheck: nil)] }
        var headers: [Header] = []
        // The static part's fields, at the start of the page and in the value of a header-copy record.
        for start in [0, Format.logStart + Format.recordHeaderSize] where start + Format.staticSize <= bytes.count {
            func word(_ offset: Int) -> UInt64 {
                UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: start + offset, as: UInt64.self))
            }
            var header = Header.new(keyCheck: sealer.keyCheck)
            header.uuid = StoreUUID(low: word(Format.uuidOffset), high: word(Format.uuidOffset + 8))
            header.generation = word(Format.generationOffset)
            header.createdAt = Int64(bitPattern: word(Format.createdAtOffset))
            if !headers.contains(where: { $0.uuid == header.uuid && $0.generation == header.generation }) {
                headers.append(header)
            }
        }
        return headers.isEmpty ? [Header.new(keyCheck: sealer.keyCheck)] : headers
    }
}
