// New store images: compaction, recovery, backup, restore and rekey. Every image is written to a temporary
// file, flushed, and renamed over its destination; the old file is never modified except for its superseded
// word, so a crash at any instant leaves either the old or the new image under the name.
import Logging
import SystemLayer

extension Engine {
    /// Creates `temporary` (replacing a stale one), sizes it with real blocks, writes the header page and
    /// lets `fill` write the log from offset 4096, then flushes it. The result is mapped writable; on any
    /// failure the temporary file is removed.
    static func writeImage(
        temporary: String, finalPath: String, header: Header, logLength: Int, capacity: Int, watched: Bool,
        fill: (UnsafeMutableRawBufferPointer) throws(PrefsError) -> Void
    ) throws(PrefsError) -> MappedFile {
        precondition(capacity >= Format.headerSize + logLength)
        _ = Sys.unlink(temporary)
        let fd = try Sys.open(temporary, .createNew).orThrow("open", "cannot create a new store image", path: temporary)
        do throws(PrefsError) {
            try Sys.fchmod(fd, 0o600).orThrow("fchmod", "cannot set the new image's mode", path: temporary)
            try Sys.allocate(fd, offset: 0, length: capacity).orThrow(
                "posix_fallocate", "cannot allocate \(capacity) bytes for a new store image", path: temporary)
        } catch {
            Sys.close(fd)
            _ = Sys.unlink(temporary)
            throw error
        }
        do throws(PrefsError) {
            let image = try MappedFile(fd: fd, path: finalPath, writable: true)
            let page = header.page(logEnd: Format.logStart + logLength, watched: watched)
            try image.withMutableBytes { bytes throws(PrefsError) in
                page.withUnsafeBytes { bytes.copyMemory(from: $0) }
                try fill(bytes)
            }
            try image.syncData()
            return image
        } catch {
            _ = Sys.unlink(temporary)
            throw error
        }
    }

    static func writeImage(
        paths: StorePaths, header: Header, logLength: Int, capacity: Int, watched: Bool,
        fill: (UnsafeMutableRawBufferPointer) throws(PrefsError) -> Void
    ) throws(PrefsError) -> MappedFile {
        try writeImage(
            temporary: paths.temporary, finalPath: paths.data, header: header, logLength: logLength,
            capacity: capacity, watched: watched, fill: fill)
    }

    /// Live entries in log order, and the bytes their records occupy.
    func liveEntriesInOrder() -> (entries: [Entry], length: Int) {
        let now = Sys.nowMilliseconds()
        let live = index.values.filter { !$0.isExpired(now: now) }.sorted { $0.recordOffset < $1.recordOffset }
        return (live, live.reduce(0) { $0 + $1.recordLength })
    }

    /// The record header of an index entry (a committed set record; its sequence number is not kept).
    func recordHeader(of entry: Entry) -> RecordHeader {
        RecordHeader(
            offset: entry.recordOffset, kind: .set, valueType: entry.type.rawValue,
            flags: RecordFlags.commit | (entry.sealed ? RecordFlags.sealed : 0), keyLength: entry.keyLength,
            valueLength: entry.valueLength, seq: 0, expiresAt: entry.expiresAt)
    }

    /// Copies live entries' records from the current mapping into an image.
    private func copyRecords(_ entries: [Entry], into bytes: UnsafeMutableRawBufferPointer) {
        file.withBytes { source in
            var offset = Format.logStart
            for (i, entry) in entries.enumerated() {
                offset += RecordWriter.copy(
                    recordHeader(of: entry), from: source, into: bytes, at: offset, seq: UInt64(i + 1))
            }
        }
    }

    // MARK: Compaction

    /// Under the writer lock: writes the live records to a new image sized 4096 + 2 x live bytes (so the
    /// file is at most twice the live data plus the header page), then swaps it in.
    ///
    /// The index is carried over, not rebuilt: each live entry's record offset is updated in place (no
    /// rehashing, no rescan of the image). Builds with `PREFSKV_INTERNAL_CHECKS` (debug builds: the tests)
    /// also scan every new image and check that it gives back exactly this index.
    ///
    /// The directory is fsynced right after the rename, whatever the durability: deferring it to the next
    /// `sync()` (tried for the benchmarks) saved a few microseconds per automatic compaction on a disk, but left
    /// the name's durability to a later call that the power-loss model (PowerLossTests) did not hold for, and
    /// made `compact()` weaker than its documentation.
    ///
    /// `minimumCapacity` (automatic compaction: the auto-compaction threshold) sizes the new file at least that
    /// large, so that a small store does not grow its file again in several steps (each an `fallocate` and a new
    /// mapping) before the next compaction; the file then stays within max(2 x live + page, threshold).
    func compactLocked(minimumCapacity: Int = 0) throws(PrefsError) {
        guard file.writable else { throw readOnlyError }
        let now = Sys.nowMilliseconds()
        // Live entries in log order. The sort moves plain integers, (record offset / 8) << 20 | ordinal into
        // `positions` (offsets are below 2^48, so this fits while there are fewer than 2^20 keys): sorting the
        // entries with their dictionary indices and a closure cost half of a compaction.
        var positions: [Int] = []
        positions.reserveCapacity(index.count)
        var expired: [String] = []
        for position in 0..<index.count {
            if index.values[position].isExpired(now: now) {
                expired.append(index.keys[position])
            } else {
                positions.append(position)
            }
        }
        let ordinals: [Int]
        if positions.count < 1 << 20 {
            var packed = positions.indices.map {
                UInt64(index.values[positions[$0]].recordOffset >> 3) << 20 | UInt64($0)
            }
            packed.sort()
            ordinals = packed.map { Int($0 & (1 << 20 - 1)) }
        } else {
            ordinals = positions.indices.sorted {
                index.values[positions[$0]].recordOffset < index.values[positions[$1]].recordOffset
            }
        }
        let live = ordinals.map { (position: positions[$0], entry: index.values[positions[$0]]) }
        let length = live.reduce(0) { $0 + $1.entry.recordLength }
        var newHeader = header
        newHeader.generation += 1
        let image = try Engine.writeImage(
            paths: paths, header: newHeader, logLength: length,
            capacity: max(Format.headerSize + 2 * length, minimumCapacity / Sys.pageSize * Sys.pageSize),
            watched: wantsChanges && multiProcess
        ) { bytes throws(PrefsError) in
            file.withBytes { source in
                var offset = Format.logStart
                for (i, item) in live.enumerated() {
                    offset += RecordWriter.copy(
                        recordHeader(of: item.entry), from: source, into: bytes, at: offset, seq: UInt64(i + 1))
                }
            }
        }
        try rename(image, temporary: paths.temporary, syncDirectoryNow: true)

        // The image holds the live records in the same order, back to back from the log start.
        var offset = Format.logStart
        for item in live {
            index[position: item.position].recordOffset = offset
            offset += item.entry.recordLength
        }
        for key in expired { index.removeValue(forKey: key) }
        file = image
        header = newHeader
        liveBytes = length
        recordCount = live.count
        nextSeq = UInt64(live.count) + 1
        knownEnd = Format.logStart + length
        knownEndWord = image.logEndWord
        if !expired.isEmpty { names = names.filter { index[$0.key] != nil } }
        autoCompactionBlockedBelow = 0
        directorySyncedGeneration = newHeader.generation
        #if PREFSKV_INTERNAL_CHECKS
        var check = Snapshot(file: image, header: newHeader)
        Engine.scan(into: &check)
        precondition(
            check.damage.isEmpty && check.end == knownEnd && check.liveBytes == liveBytes
                && check.index.count == index.count
                && check.index.allSatisfy { index[$0.key]?.recordOffset == $0.value.recordOffset },
            "a compacted image does not give back the index it was written from")
        #endif
    }

    /// Swaps a flushed image in: marks the current file superseded (other handles then reopen the path),
    /// renames the image over the data file, fsyncs the directory, and adopts the image (scanning it).
    func install(_ image: MappedFile, header newHeader: Header, temporary: String) throws(PrefsError) {
        try rename(image, temporary: temporary, syncDirectoryNow: true)
        var snapshot = Snapshot(file: image, header: newHeader)
        Engine.scan(into: &snapshot)
        precondition(snapshot.damage.isEmpty, "a freshly written image does not verify")
        adopt(snapshot)
        directorySyncedGeneration = newHeader.generation
    }

    /// Marks the current file superseded and renames the flushed image over the data file.
    private func rename(_ image: MappedFile, temporary: String, syncDirectoryNow: Bool) throws(PrefsError) {
        if file.writable { file.setSuperseded(true) }
        if case .failure(let e) = Sys.rename(temporary, paths.data) {
            if file.writable { file.setSuperseded(false) }
            _ = Sys.unlink(temporary)
            throw PrefsError.system(e, "rename", "cannot put the new store image in place", path: paths.data)
        }
        if syncDirectoryNow { syncDirectory(paths) }
    }

    /// Makes the name of the current file durable if no fsync of the directory is known to have followed the
    /// rename that put it there (a buffered compaction by this or another handle, or a file this handle did not
    /// see being installed). Called by `sync()` and by synchronous writes.
    func syncDirectoryIfNeeded() {
        guard directorySyncedGeneration != header.generation else { return }
        syncDirectory(paths)
        directorySyncedGeneration = header.generation
    }

    // MARK: Recovery

    /// Acts on damage found by a scan (the snapshot is already adopted, holding what verified).
    func recover(damage: [PrefsDamage], recordsKept: Int) throws(PrefsError) {
        var report = PrefsRecoveryReport(
            path: paths.data, quarantinePath: nil, recordsKept: recordsKept,
            recordsLost: damage.reduce(0) { $0 + $1.records }, lostKeys: damage.flatMap(\.keys), damage: damage,
            recoveredAt: Sys.nowMilliseconds())
        if configuration.recovery == .fail {
            throw PrefsError(
                .corrupted,
                "the store is damaged and the recovery policy is .fail; the file was left untouched: "
                    + report.description, path: paths.data)
        }
        if file.writable {
            report.quarantinePath = try quarantine()
            try compactLocked()
        }
        lastRecovery = report
        pendingLog.append((.error, "prefskv: \(report.description)"))
    }

    /// Copies the damaged file, byte for byte, to `<data>.corrupt-<UTC time>[-n]`, mode 0400.
    func quarantine() throws(PrefsError) -> String {
        let base = paths.data + ".corrupt-" + Sys.utcTimestamp()
        var attempt = 0
        while true {
            let path = attempt == 0 ? base : "\(base)-\(attempt)"
            switch Sys.open(path, .createNew) {
            case .failure(let e) where e == .exists:
                attempt += 1
                continue
            case .failure(let e):
                throw PrefsError.system(e, "open", "cannot create the quarantine copy of a damaged store", path: path)
            case .success(let fd):
                defer { Sys.close(fd) }
                do {
                    try file.withBytes { bytes throws(PrefsError) in
                        try Sys.pwrite(fd, bytes, at: 0).orThrow(
                            "pwrite", "cannot copy a damaged store aside", path: path)
                    }
                    try Sys.fdatasync(fd).orThrow("fdatasync", "cannot flush the quarantine copy", path: path)
                    try Sys.fchmod(fd, 0o400).orThrow("fchmod", "cannot make the quarantine copy read-only", path: path)
                } catch {
                    _ = Sys.unlink(path)
                    throw error
                }
                syncDirectory(paths)
                return path
            }
        }
    }

    // MARK: Backup and restore

    /// Writes a compacted image of the live data to `destination` (through `destination.tmp-<pid>` and a
    /// rename, then an fsync of its directory).
    func backup(to destination: String) throws(PrefsError) {
        let (live, length) = liveEntriesInOrder()
        let temporary = "\(destination).tmp-\(Sys.processID())"
        let image = try Engine.writeImage(
            temporary: temporary, finalPath: destination, header: header, logLength: length,
            capacity: Format.headerSize + length, watched: false
        ) { bytes throws(PrefsError) in
            copyRecords(live, into: bytes)
        }
        _ = image
        if case .failure(let e) = Sys.rename(temporary, destination) {
            _ = Sys.unlink(temporary)
            throw PrefsError.system(e, "rename", "cannot put the backup in place", path: destination)
        }
        let directory = destination.split(separator: "/", omittingEmptySubsequences: false).dropLast()
            .joined(separator: "/")
        syncDirectory(StorePaths(id: "x", directory: directory.isEmpty ? "." : directory))
    }

    /// Validates the image at `source` completely (header, key check, every record), then swaps a copy of
    /// its live records in as the store. A damaged backup is refused and the store is left as it was.
    func restore(from source: String) throws(PrefsError) {
        guard file.writable else { throw readOnlyError }
        let fd = try Sys.open(source, .readOnly).orThrow("open", "cannot open the backup", path: source)
        let backupHeader: Header
        do throws(PrefsError) {
            backupHeader = try Engine.readHeader(fd: fd, path: source, sealer: sealer)
        } catch {
            Sys.close(fd)
            throw error
        }
        let backupFile = try MappedFile(fd: fd, path: source, writable: false)
        var backup = Snapshot(file: backupFile, header: backupHeader)
        Engine.scan(into: &backup)
        guard backup.damage.isEmpty else {
            throw PrefsError(
                .invalidInput, "the backup is damaged and was not restored: \(backup.damage)", path: source)
        }
        let now = Sys.nowMilliseconds()
        let live = backup.index.values.filter { !$0.isExpired(now: now) }.sorted { $0.recordOffset < $1.recordOffset }
        let length = live.reduce(0) { $0 + $1.recordLength }
        var newHeader = backupHeader
        newHeader.generation = max(header.generation, backupHeader.generation) + 1
        let oldFile = file
        let oldIndex = index
        let image = try Engine.writeImage(
            paths: paths, header: newHeader, logLength: length, capacity: Format.headerSize + 2 * length,
            watched: wantsChanges && multiProcess
        ) { bytes throws(PrefsError) in
            backupFile.withBytes { source in
                var offset = Format.logStart
                for (i, entry) in live.enumerated() {
                    offset += RecordWriter.copy(
                        recordHeader(of: entry), from: source, into: bytes, at: offset, seq: UInt64(i + 1))
                }
            }
        }
        names.removeAll()
        try install(image, header: newHeader, temporary: paths.temporary)
        if wantsChanges {
            let changed = changedKeys(from: oldFile, oldIndex: oldIndex)
            if !changed.isEmpty { pendingChanges.append(PrefsChange(keys: changed, isExternal: false)) }
        }
    }

    /// Keys whose values differ between an old mapping and the current state (names, sorted).
    func changedKeys(from oldFile: MappedFile, oldIndex: KeyIndex) -> [String] {
        var changed: [String] = []
        oldFile.withBytes { oldBytes in
            file.withBytes { newBytes in
                for (key, new) in index {
                    if let old = oldIndex[key], old.type == new.type, old.expiresAt == new.expiresAt,
                        old.valueLength == new.valueLength,
                        oldBytes[old.valueOffset..<old.valueOffset + old.valueLength].elementsEqual(
                            newBytes[new.valueOffset..<new.valueOffset + new.valueLength])
                    {
                        continue
                    }
                    changed.append(key)
                }
                for key in oldIndex.keys where index[key] == nil { changed.append(key) }
            }
        }
        return names(forIndexKeys: changed)
    }

    // MARK: Rekey

    /// Rewrites every live value sealed with `newSealer` (or in clear when nil) into a new image with the new
    /// key check, and swaps it in atomically.
    func rekey(to newSealer: (any PrefsSealer)?) throws(PrefsError) {
        guard file.writable else { throw readOnlyError }
        if let newSealer {
            precondition(newSealer.keyCheck.count <= Format.maxKeyCheckLength, "a key check is at most 64 bytes")
            precondition(newSealer.overhead <= Format.maxSealerOverhead, "a sealer's overhead is at most 1024 bytes")
        }
        struct Item {
            var name: String
            var type: ValueType
            var value: [UInt8]
            var expiresAt: Int64
            var key: [UInt8]
            var storedLength: Int
        }
        let (live, _) = liveEntriesInOrder()
        var items: [Item] = []
        var length = 0
        for entry in live {
            let (name, value) = try withPlainEntry(entry)
            let key = newSealer?.tag(forKey: name) ?? Array(name.utf8)
            let stored = newSealer == nil ? value.count : 4 + name.utf8.count + value.count + newSealer!.overhead
            items.append(
                Item(
                    name: name, type: entry.type, value: value, expiresAt: entry.expiresAt, key: key,
                    storedLength: stored))
            length += Format.recordLength(keyLength: key.count, valueLength: stored)
        }
        var newHeader = header
        newHeader.generation += 1
        newHeader.keyCheck = newSealer?.keyCheck ?? []
        newHeader.flags = newSealer == nil ? header.flags & ~Format.flagEncrypted : header.flags | Format.flagEncrypted
        let uuid = header.uuid
        let image = try Engine.writeImage(
            paths: paths, header: newHeader, logLength: length, capacity: Format.headerSize + 2 * length,
            watched: wantsChanges && multiProcess
        ) { bytes throws(PrefsError) in
            var offset = Format.logStart
            for (i, item) in items.enumerated() {
                do {
                    offset += try item.key.withUnsafeBytes { key in
                        try RecordWriter.write(
                            into: bytes, at: offset, kind: .set, valueType: item.type.rawValue,
                            flags: RecordFlags.commit | (newSealer == nil ? 0 : RecordFlags.sealed), seq: UInt64(i + 1),
                            expiresAt: item.expiresAt, key: key, valueLength: item.storedLength
                        ) { out in
                            guard let newSealer else {
                                item.value.withUnsafeBytes { if !$0.isEmpty { out.copyMemory(from: $0) } }
                                return
                            }
                            var plain = [UInt8]()
                            withUnsafeBytes(of: UInt32(item.name.utf8.count).littleEndian) {
                                plain.append(contentsOf: $0)
                            }
                            plain.append(contentsOf: item.name.utf8)
                            plain.append(contentsOf: item.value)
                            try Engine.withAssociatedData(
                                uuid: uuid, tag: key, type: item.type, expiresAt: item.expiresAt
                            ) {
                                ad in
                                try plain.withUnsafeBytes { try newSealer.seal($0, associatedData: ad, into: out) }
                            }
                        }
                    }
                } catch let error as PrefsError {
                    throw error
                } catch {
                    throw PrefsError(.io, "the new sealer failed to seal a value", path: paths.data, underlying: error)
                }
            }
        }
        let oldSealer = sealer
        sealer = newSealer
        names.removeAll()
        do throws(PrefsError) {
            try install(image, header: newHeader, temporary: paths.temporary)
        } catch {
            sealer = oldSealer
            throw error
        }
    }

    /// The name and plain value bytes of an entry.
    func withPlainEntry(_ entry: Entry) throws(PrefsError) -> (String, [UInt8]) {
        if !entry.sealed {
            return file.withBytes { bytes in
                (
                    String(decoding: bytes[entry.keyOffset..<entry.keyOffset + entry.keyLength], as: UTF8.self),
                    Array(bytes[entry.valueOffset..<entry.valueOffset + entry.valueLength])
                )
            }
        }
        return try withPlaintext(of: entry, expectedName: nil) { name, value in (name, Array(value)) }
    }

    // MARK: Verify

    /// Scans a mapped file completely and, with a sealer, opens every sealed value. Changes nothing.
    static func verify(
        file: MappedFile, header: Header, sealer: (any PrefsSealer)?, path: String
    ) -> PrefsVerifyReport {
        var snapshot = Snapshot(file: file, header: header)
        scan(into: &snapshot)
        var damage = snapshot.damage
        var verified = snapshot.recordCount
        if let sealer, header.isEncrypted {
            // Authenticate every committed set record, live or not.
            file.withBytes { bytes in
                let limit = snapshot.end
                _ = LogScanner.scan(bytes, from: Format.logStart, to: limit, freeSpaceEndsLog: true, plainKeys: false) {
                    record in
                    guard record.kind == .set, record.isSealed else { return }
                    let ok: Bool = Engine.withAssociatedData(
                        uuid: header.uuid, tag: record.key(in: bytes),
                        type: ValueType(rawValue: record.valueType)!, expiresAt: record.expiresAt
                    ) { ad in
                        (try? sealer.open(record.value(in: bytes), associatedData: ad) { _ in true }) ?? false
                    }
                    if !ok {
                        verified -= 1
                        damage.append(
                            PrefsDamage(
                                range: record.offset..<record.offset + record.length, records: 1, keys: [],
                                reason: "a sealed value fails to authenticate (tampered or moved)"))
                    }
                }
            }
        }
        return PrefsVerifyReport(path: path, recordsVerified: verified, damage: damage, isSealed: header.isEncrypted)
    }
}
