// A `.synchronous` write left past the published log end (format version 7, FileProtocols.md "Durability"): its
// records, pending word and check flushed, its log end not yet on the disk, because its writer was killed between
// the two or the power went. A scan reads it when it is whole (`scanWithPendingWrite`); a writer completes or
// forgets it before appending (`resolvePending`). The publish that leaves the word is `StoreLog.publish`.
import SystemLayer

extension StoreLog {
    /// Whether the pending word of `file` names a write past its log end (and the scan must look at it under the
    /// byte lock). Most files: no pending word, or one at or before the log end, and no checksum computed.
    static func mayHavePendingWrite(_ file: MappedFile) -> Bool {
        let raw = file.pendingWord
        guard raw != 0, let end = Format.decodeLogEnd(file.logEndWord), Int(raw & 0xFFFF_FFFF_FFFF) > end else {
            return false
        }
        return Format.decodePending(raw, logEnd: end) != nil
    }

    /// The write the pending word of `file` names past its log end `[published, end)`, when the file maps it and
    /// its bytes give the pending check word.
    static func namedWrite(_ file: MappedFile) -> (published: Int, end: Int)? {
        // (A log end that is not one, below the log's start or not a multiple of 8, names no write either.)
        guard let published = Format.decodeLogEnd(file.logEndWord), published >= Format.logStart, published & 7 == 0,
            let end = Format.decodePending(file.pendingWord, logEnd: published), end <= file.mappedLength,
            file.pendingCheckHolds(logEnd: published, end: end)
        else { return nil }
        return (published, end)
    }

    /// `scanLog` of a file whose pending word names a write past its log end: the words are read again under the
    /// shared byte lock its writer holds exclusively from before it stores that word until after it publishes
    /// (`StoreLog.publish`), held through the scan, so that no writer completes, clears or replaces the write
    /// meanwhile (`resolvePending` takes it exclusively). The write is part of the log when its bytes give the
    /// pending check word, the scan reads its records through to its end without damage, continuing the log (their
    /// sequence numbers after its own), and an `fdatasync` of the file succeeds (its writer may have died before its
    /// own; a file system that cannot flush, EINVAL or EROFS, holds what it holds); otherwise the log ends at the
    /// published log end. Fails closed: a byte lock that cannot be taken (ENOLCK) throws rather than read the file
    /// without a write that may have returned.
    static func scanWithPendingWrite(into snapshot: inout Snapshot, sealer: (any PrefsSealer)?) throws(PrefsError) {
        let file = snapshot.file
        try file.lockPendingWord(exclusive: false)
        guard let (published, end) = namedWrite(file) else {
            // (Published meanwhile, by the writer the lock waited for, or naming nothing whole: an ordinary scan,
            // without the lock.)
            file.unlockPendingWord()
            scanLog(into: &snapshot, sealer: sealer, logEndKnown: true, limit: nil)
            return
        }
        defer { file.unlockPendingWord() }
        var withWrite = snapshot
        scanLog(into: &withWrite, sealer: sealer, logEndKnown: true, limit: end)
        if withWrite.end == end, withWrite.damage.allSatisfy({ $0.range.upperBound <= published }), settled(file) {
            withWrite.pendingWrite = true
            withWrite.pendingCheck = file.pendingCheckWord
            snapshot = withWrite
        } else {
            scanLog(into: &snapshot, sealer: sealer, logEndKnown: true, limit: nil)
        }
    }

    /// Whether the file's data is on the disk as far as its file system can tell.
    private static func settled(_ file: MappedFile) -> Bool {
        switch Sys.fdatasync(file.fd) {
        case .success: return true
        case .failure(let error):
            if error == .invalidArgument || error == .readOnlyFileSystem { return true }
            file.noteFlushFailed()
            return false
        }
    }

    /// What `resolvePending` did.
    enum PendingResolution {
        /// Nothing was left past the log end (the hot path), or what was is forgotten.
        case none
        /// The left write is published: the log end moved (the caller catches up).
        case published
        /// This handle read a left write at its open that the file no longer holds as it read it: the caller
        /// reads the file again.
        case stale
    }

    /// Under the writer lock, caught up with the published log end: a `.synchronous` write flushed but not
    /// published (its process was killed in between, or the power went before its log end reached the disk) is
    /// completed when its bytes give the pending check word and every record it names verifies and continues the
    /// log, and forgotten otherwise (its pending word cleared), so that every handle appends after the same end. A
    /// handle that read that write at its open (`knownEnd` already past it) publishes it when the file still names
    /// it with the check it read.
    func resolvePending() throws(PrefsError) -> PendingResolution {
        let raw = file.pendingWord
        // (The hot path of every write: one load, and no checksum while the word names nothing past the log end. A
        // handle that read a left write looks whatever the word says: a cleared word means it was forgotten.)
        guard adoptedLeftWrite || raw != 0 && Int(raw & 0xFFFF_FFFF_FFFF) > knownEnd, header.hasPendingWord
        else { return .none }
        try file.lockPendingWord(exclusive: true)
        defer { file.unlockPendingWord() }
        // (A write past this handle's mapping: the file grew in another process, which then died.)
        if let published = Format.decodeLogEnd(file.logEndWord),
            let end = Format.decodePending(file.pendingWord, logEnd: published), end > file.mappedLength
        {
            let size = try file.currentSize()
            if size >= end { try file.remap(length: size) }
        }
        let named = StoreLog.namedWrite(file)
        if adoptedLeftWrite {
            guard let named, named.end == knownEnd, file.pendingCheckWord == adoptedCheck else { return .stale }
            try complete(named.end)
            knownEndWord = file.logEndWord
            adoptedLeftWrite = false
            return .published
        }
        if let (published, end) = named, knownEnd == published {
            let scanned = file.withBytes { bytes in
                LogScanner.scan(
                    bytes, from: published, to: end, freeSpaceEndsLog: false, plainKeys: !header.isEncrypted,
                    minimumSeq: nextSeq - 1, seed: recordSeed, auth: auth
                ) { _, _ in }
            }
            if scanned.damage.isEmpty && scanned.end == end {
                try complete(end)
                return .published
            }
        }
        file.storePending(0)
        return .none
    }

    /// Publishes the left write ending at `end`: its writer may have died before its flush, so only once the file
    /// is on the disk.
    private func complete(_ end: Int) throws(PrefsError) {
        try file.syncData()
        _ = file.publish(logEnd: end)
    }
}
