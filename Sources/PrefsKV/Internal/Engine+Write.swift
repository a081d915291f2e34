// Appending records: the writer lock, compare-before-set, publishing the log end, automatic compaction.
import Logging
import SystemLayer

/// One change collected by a `PrefsTransaction`.
enum TransactionOp {
    case set(name: String, type: ValueType, value: [UInt8], expiresAt: Int64)
    case remove(name: String)
    case removeAll
}

extension Engine {
    // MARK: Writer lock

    /// Takes the writer lock (multi-process) and reads what other handles appended since.
    func beginWrite() throws(PrefsError) {
        guard file.writable, readOnlyCause == nil else { throw readOnlyError }
        if multiProcess { try lockWriter() }
        holdsWriterLock = true
        do throws(PrefsError) {
            try followIfUnlinked()
            try catchUpLocked()
            guard file.writable else { throw readOnlyError }
        } catch {
            endWrite()
            throw error
        }
    }

    /// Under the writer lock: when the data file was deleted or renamed over from outside while open, marks it
    /// superseded (so every handle on it stops using it) and follows the path: a replacing store is adopted, a
    /// deleted one is `notFound`. Nothing is ever written into a file that has no name.
    func followIfUnlinked() throws(PrefsError) {
        guard file.hasLostItsName else { return }
        if file.writable { file.setSuperseded(true) }
        // A deleted directory takes the lock file with it: a handle whose lock file is gone excludes nobody.
        guard lockFD < 0 || Engine.isCurrentLockFile(lockFD, paths: paths) else {
            throw PrefsError(
                .notFound, "the store was deleted while open, its lock file with it; reopen the store",
                path: paths.data)
        }
        try reload()
    }

    func endWrite() {
        guard holdsWriterLock else { return }
        holdsWriterLock = false
        if multiProcess { unlockWriter() }
    }

    // MARK: Single writes

    /// Writes one value to a plain store as a single committed record, unless it equals the current one
    /// (compare-before-set: then nothing is written, not even beyond the log end).
    func setOne(
        name: String, type: ValueType, expiresAt: Int64, valueLength: Int,
        fill: (UnsafeMutableRawBufferPointer) -> Void
    ) throws(PrefsError) {
        precondition(!isSealed)
        if let old = index[name], old.type == type, old.expiresAt == expiresAt, old.valueLength == valueLength,
            !old.isExpired(now: Sys.nowMilliseconds())
        {
            let unchanged = withUnsafeTemporaryAllocation(byteCount: valueLength, alignment: 8) { candidate in
                fill(candidate)
                return file.withBytes { bytes in
                    Sys.bytesEqual(
                        bytes.baseAddress! + old.valueOffset,
                        UnsafeRawPointer(candidate.baseAddress) ?? bytes.baseAddress!, count: valueLength)
                }
            }
            if unchanged { return }
        }
        var utf8Name = name
        try typed {
            try utf8Name.withUTF8 { key in
                try append(
                    name: name, key: UnsafeRawBufferPointer(key), type: type, expiresAt: expiresAt,
                    valueLength: valueLength, fill: fill)
            }
        }
        if wantsChanges { pendingChanges.append(PrefsChange(keys: [name], isExternal: false)) }
        maybeCompactAutomatically()
    }

    /// Appends and publishes one committed set record of a plain store.
    @inline(__always)
    private func append(
        name: String, key: UnsafeRawBufferPointer, type: ValueType, expiresAt: Int64, valueLength: Int,
        fill: (UnsafeMutableRawBufferPointer) -> Void
    ) throws(PrefsError) {
        let length = Format.recordLength(keyLength: key.count, valueLength: valueLength)
        let offset = knownEnd
        try ensureCapacity(offset + length)
        let seq = nextSeq
        file.withMutableBytes { bytes in
            _ = RecordWriter.write(
                into: bytes, at: offset, kind: .set, valueType: type.rawValue, flags: RecordFlags.commit,
                seq: seq, expiresAt: expiresAt, key: key, valueLength: valueLength, fillValue: fill)
        }
        let entry = Entry(
            RecordHeader(
                offset: offset, kind: .set, valueType: type.rawValue, flags: RecordFlags.commit,
                keyLength: key.count, valueLength: valueLength, seq: seq, expiresAt: expiresAt))
        try publish(end: offset + length, records: 1) { () in
            if let old = index.updateValue(entry, forKey: name) { liveBytes -= old.recordLength }
            liveBytes += entry.recordLength
        }
    }

    // MARK: Transactions

    /// A record about to be written by `commit`.
    private enum Planned {
        case set(indexKey: String, name: String, type: ValueType, value: [UInt8], expiresAt: Int64)
        case delete(indexKey: String, name: String)
        case removeAll
    }

    /// Commits a transaction's changes: one record with the commit flag for a single change, otherwise the
    /// changes followed by a commit record, published together. Unchanged values write nothing.
    func commit(_ ops: [TransactionOp]) throws(PrefsError) {
        precondition(holdsWriterLock, "commit without the writer lock")
        // The net effect per key, in first-touch order.
        var clearsAll = false
        var order: [String] = []
        var final: [ByteKey: TransactionOp] = [:]
        for op in ops {
            switch op {
            case .removeAll:
                clearsAll = true
                order.removeAll()
                final.removeAll()
            case .set(let name, _, _, _), .remove(let name):
                if final.updateValue(op, forKey: ByteKey(name)) == nil { order.append(name) }
            }
        }
        var planned: [Planned] = []
        var changed: [String] = []
        if clearsAll && !index.isEmpty {
            planned.append(.removeAll)
            if wantsChanges { changed += liveNames() }
        }
        for name in order {
            let indexKey = indexKey(forName: name)
            switch final[ByteKey(name)]! {
            case .set(_, let type, let value, let expiresAt):
                if !clearsAll,
                    try isUnchanged(indexKey: indexKey, name: name, type: type, value: value, expiresAt: expiresAt)
                {
                    continue
                }
                planned.append(.set(indexKey: indexKey, name: name, type: type, value: value, expiresAt: expiresAt))
                changed.append(name)
            case .remove:
                guard !clearsAll, let old = index[indexKey] else { continue }
                planned.append(.delete(indexKey: indexKey, name: name))
                if !old.isExpired(now: Sys.nowMilliseconds()) { changed.append(name) }
            case .removeAll:
                preconditionFailure()
            }
        }
        guard !planned.isEmpty else { return }
        try write(planned)
        if wantsChanges && !changed.isEmpty {
            pendingChanges.append(PrefsChange(keys: Engine.sortedUnique(changed), isExternal: false))
        }
        maybeCompactAutomatically()
    }

    /// The on-disk key of a name: its UTF-8 bytes, or the sealer's tag, which the index key already spells in
    /// hex (decoding it costs a hundredth of computing the tag again).
    private func diskKey(_ name: String, indexKey: String) -> [UInt8] {
        guard sealer != nil else { return Array(name.utf8) }
        return Engine.unhex(indexKey)
    }

    private func write(_ planned: [Planned]) throws(PrefsError) {
        let sealer = self.sealer
        let overhead = sealer?.overhead ?? 0
        // Lay out the records.
        struct Layout {
            var key: [UInt8]
            var valueLength: Int
            var length: Int
        }
        var layouts: [Layout] = []
        var total = 0
        for p in planned {
            let layout: Layout
            switch p {
            case .set(let indexKey, let name, _, let value, _):
                let key = diskKey(name, indexKey: indexKey)
                let valueLength = sealer == nil ? value.count : 4 + name.utf8.count + value.count + overhead
                layout = Layout(
                    key: key, valueLength: valueLength,
                    length: Format.recordLength(keyLength: key.count, valueLength: valueLength))
            case .delete(let indexKey, let name):
                let key = diskKey(name, indexKey: indexKey)
                layout = Layout(
                    key: key, valueLength: 0, length: Format.recordLength(keyLength: key.count, valueLength: 0))
            case .removeAll:
                layout = Layout(key: [], valueLength: 0, length: Format.recordLength(keyLength: 0, valueLength: 0))
            }
            layouts.append(layout)
            total += layout.length
        }
        let single = planned.count == 1
        let commitLength = Format.recordLength(keyLength: 0, valueLength: 4)
        if !single { total += commitLength }
        let start = knownEnd
        try ensureCapacity(start + total)
        let seq = nextSeq
        let flags = single ? RecordFlags.commit : 0
        let uuid = header.uuid
        var headers: [RecordHeader] = []
        try file.withMutableBytes { bytes throws(PrefsError) in
            var offset = start
            for (p, layout) in zip(planned, layouts) {
                var record: RecordHeader
                switch p {
                case .set(_, let name, let type, let value, let expiresAt):
                    let sealedFlag = sealer == nil ? 0 : RecordFlags.sealed
                    do {
                        _ = try layout.key.withUnsafeBytes { key in
                            try RecordWriter.write(
                                into: bytes, at: offset, kind: .set, valueType: type.rawValue,
                                flags: flags | sealedFlag,
                                seq: seq, expiresAt: expiresAt, key: key, valueLength: layout.valueLength
                            ) { out in
                                if let sealer {
                                    var plain = [UInt8]()
                                    // The plaintext copy is wiped once sealed: freed heap must not keep it.
                                    defer { plain.withUnsafeMutableBytes { Sys.zero($0) } }
                                    plain.reserveCapacity(4 + name.utf8.count + value.count)
                                    withUnsafeBytes(of: UInt32(name.utf8.count).littleEndian) {
                                        plain.append(contentsOf: $0)
                                    }
                                    plain.append(contentsOf: name.utf8)
                                    plain.append(contentsOf: value)
                                    try Engine.withAssociatedData(
                                        uuid: uuid, tag: key, type: type, expiresAt: expiresAt
                                    ) { ad in
                                        try plain.withUnsafeBytes { try sealer.seal($0, associatedData: ad, into: out) }
                                    }
                                } else if !value.isEmpty {
                                    value.withUnsafeBytes { out.copyMemory(from: $0) }
                                }
                            }
                        }
                    } catch {
                        throw PrefsError(
                            .io, "the sealer failed to seal the value of key \"\(name)\"", path: paths.data,
                            underlying: error)
                    }
                    record = RecordHeader(
                        offset: offset, kind: .set, valueType: type.rawValue, flags: flags | sealedFlag,
                        keyLength: layout.key.count, valueLength: layout.valueLength, seq: seq, expiresAt: expiresAt)
                case .delete:
                    let sealedFlag = sealer == nil ? 0 : RecordFlags.sealed
                    _ = layout.key.withUnsafeBytes { key in
                        RecordWriter.write(
                            into: bytes, at: offset, kind: .delete, valueType: 0, flags: flags | sealedFlag, seq: seq,
                            expiresAt: 0, key: key, valueLength: 0
                        ) { _ in }
                    }
                    record = RecordHeader(
                        offset: offset, kind: .delete, valueType: 0, flags: flags | sealedFlag,
                        keyLength: layout.key.count, valueLength: 0, seq: seq, expiresAt: 0)
                case .removeAll:
                    _ = RecordWriter.write(
                        into: bytes, at: offset, kind: .removeAll, valueType: 0, flags: flags, seq: seq, expiresAt: 0,
                        key: UnsafeRawBufferPointer(start: nil, count: 0), valueLength: 0
                    ) { _ in }
                    record = RecordHeader(
                        offset: offset, kind: .removeAll, valueType: 0, flags: flags, keyLength: 0, valueLength: 0,
                        seq: seq, expiresAt: 0)
                }
                headers.append(record)
                offset += layout.length
            }
            if !single {
                _ = RecordWriter.write(
                    into: bytes, at: offset, kind: .commit, valueType: 0, flags: RecordFlags.commit, seq: seq,
                    expiresAt: 0, key: UnsafeRawBufferPointer(start: nil, count: 0), valueLength: 4
                ) { out in out.storeBytes(of: UInt32(planned.count).littleEndian, as: UInt32.self) }
            }
        }
        let sealed = isSealed
        try publish(end: start + total, records: planned.count + (single ? 0 : 1)) { () in
            file.withBytes { bytes in
                for (p, record) in zip(planned, headers) {
                    Engine.applyToIndex(record, bytes: bytes, sealed: sealed, index: &index, liveBytes: &liveBytes)
                    if case .set(let indexKey, let name, _, let value, _) = p, sealed {
                        names[indexKey] = name
                        index[indexKey]?.plainCRC = value.withUnsafeBytes { CRC32C.checksum($0) }
                    }
                }
            }
        }
    }

    /// Compare-before-set: true when the key holds exactly this type, expiry and value and has not expired.
    private func isUnchanged(
        indexKey: String, name: String, type: ValueType, value: [UInt8], expiresAt: Int64
    ) throws(PrefsError) -> Bool {
        guard let old = index[indexKey], old.type == type, old.expiresAt == expiresAt,
            !old.isExpired(now: Sys.nowMilliseconds())
        else { return false }
        if !old.sealed {
            guard old.valueLength == value.count else { return false }
            return file.withBytes { bytes in
                value.withUnsafeBytes { v in
                    Sys.bytesEqual(
                        bytes.baseAddress! + old.valueOffset, v.baseAddress ?? bytes.baseAddress!, count: value.count)
                }
            }
        }
        // Sealed: the cached plaintext CRC rules out most changes without opening; equality is confirmed by
        // comparing plaintext, so a CRC collision can never skip a real change.
        let crc = value.withUnsafeBytes { CRC32C.checksum($0) }
        if let known = old.plainCRC, known != crc { return false }
        let same = try withPlaintext(of: old, expectedName: name) { _, plain throws(PrefsError) in
            plain.count == value.count && value.withUnsafeBytes { plain.elementsEqual($0) }
        }
        if same { index[indexKey]?.plainCRC = crc }
        return same
    }

    /// Names of live keys (unexpired).
    func liveNames() -> [String] {
        let now = Sys.nowMilliseconds()
        let keys = index.filter { !$0.value.isExpired(now: now) }.map(\.key)
        return names(forIndexKeys: keys)
    }

    // MARK: Publishing

    /// Makes the records in `[knownEnd, end)` part of the log, then applies them to the index.
    ///
    /// `.buffered`: one release store of the log-end word (the acknowledgement point for process crashes).
    /// `.synchronous`: fdatasync the records, publish, fdatasync again, so a power cut can never leave the
    /// log end pointing at bytes that did not reach the disk (and fsync the directory when a compaction since
    /// the last one left the file's name not yet durable).
    private func publish(end: Int, records: Int, apply: () -> Void) throws(PrefsError) {
        let synchronous = configuration.durability == .synchronous
        if synchronous { try file.syncData() }
        knownEndWord = file.publish(logEnd: end)
        knownEnd = end
        nextSeq += 1
        recordCount += records
        apply()
        if multiProcess && file.isWatched {
            // Observers in other processes wait on inotify, which stores through a mapping never wake.
            // Failing to wake them loses no data: the write is already published.
            try? file.announce(knownEndWord)
        }
        if synchronous {
            try file.syncData()
            syncDirectoryIfNeeded()
        }
    }

    /// Makes the mapping at least `end` bytes long: follows growth by another process, otherwise doubles
    /// the log area (or, when the disk is nearly full, grows by just what is needed).
    func ensureCapacity(_ end: Int) throws(PrefsError) {
        if end <= file.mappedLength { return }
        let size = try file.currentSize()
        if size >= end {
            try file.remap(length: size)
            return
        }
        let page = Sys.pageSize
        let needed = (end + page - 1) / page * page
        var doubled = Format.headerSize + max(file.mappedLength - Format.headerSize, 4096) * 2
        while doubled < needed { doubled = Format.headerSize + (doubled - Format.headerSize) * 2 }
        do throws(PrefsError) {
            try file.grow(to: doubled)
        } catch  where error.code == .diskFull && doubled > needed {
            try file.grow(to: needed)
        }
    }

    // MARK: Automatic compaction

    /// After a write: compacts when garbage is at least half the log and the log has reached three quarters
    /// of the configured threshold. A compaction sizes the new file at least at the threshold, so a store
    /// whose live data is under 3/8 of the threshold compacts before its file needs to grow: its file stays at
    /// the threshold. A failure is logged, not thrown (the write itself succeeded), and not retried until the
    /// log has grown by half again.
    func maybeCompactAutomatically() {
        guard let threshold = configuration.autoCompactionThreshold, knownEnd >= autoCompactionBlockedBelow
        else { return }
        let log = knownEnd - Format.logStart
        guard log > 0, log >= threshold / 4 * 3, (log - liveBytes) * 2 >= log else { return }
        do throws(PrefsError) {
            try compactLocked(minimumCapacity: threshold)
        } catch {
            autoCompactionBlockedBelow = knownEnd + log / 2
            pendingLog.append(
                (.warning, "automatic compaction of \(paths.data) failed; the store is intact: \(error.message)"))
        }
    }
}
