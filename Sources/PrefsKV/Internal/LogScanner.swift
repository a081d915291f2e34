// Reads a log range: verifies every record, applies committed ones in order, resynchronises after damage.

/// The outcome of a scan.
struct ScanResult {
    /// The end of the last verified record, or where trailing zeros (free space) begin.
    var end: Int
    /// Verified records that were applied or were part of applied transactions.
    var recordsKept = 0
    var damage: [PrefsDamage] = []
    var maxSeq: UInt64 = 0
}

enum LogScanner {
    /// Scans `[start, limit)` of `bytes`.
    ///
    /// Records are read in order until the first one that does not verify. From there on (damage: rare) the
    /// scan salvages: it collects every record that verifies, then keeps the longest run of them, in file
    /// order, whose sequence numbers never decrease (the log's never do). Records that verify but break that
    /// order (a page of the log written elsewhere, record-shaped bytes inside a value) are counted as lost
    /// instead of being applied out of order, and the records around them are kept.
    ///
    /// - `freeSpaceEndsLog`: zeros up to `limit` end the log instead of being damage (used when the log-end
    ///   word is unusable and the whole file is scanned).
    /// - `minimumSeq`: records found after damage must not go back in sequence below it.
    /// - `apply`: called for each committed record (set, delete, removeAll), in log order.
    static func scan(
        _ bytes: UnsafeRawBufferPointer, from start: Int, to limit: Int, freeSpaceEndsLog: Bool,
        plainKeys: Bool, minimumSeq: UInt64 = 0, apply: (RecordHeader) -> Void
    ) -> ScanResult {
        precondition(start & 7 == 0 && start <= limit && limit <= bytes.count)
        var log = Reader(bytes: bytes, plainKeys: plainKeys, start: start, minimumSeq: minimumSeq)
        // Offsets only grow, so remembering the first non-zero byte found keeps zero checks linear overall.
        var nonZeroAt = -1
        func restIsZero(from position: Int) -> Bool {
            guard freeSpaceEndsLog else { return false }
            if nonZeroAt >= position { return false }
            if let found = firstNonZero(bytes, from: position, to: limit) {
                nonZeroAt = found
                return false
            }
            return true
        }

        // Verified records in file order, applied once the whole range is read: damage further on can show
        // that some of them are out of place.
        var records: [RecordHeader] = []
        records.reserveCapacity((limit - start) / 64)
        var offset = start
        while offset < limit {
            let next = RecordHeader.verified(in: bytes, at: offset, limit: limit)
            // A record that goes back in sequence is intact but out of place (a page written elsewhere).
            if let record = next, record.seq >= records.last?.seq ?? minimumSeq {
                records.append(record)
                offset += record.length
                continue
            }
            if next == nil && restIsZero(from: offset) { break }
            // Damage. Collect every record that verifies from here on (a verified record's bytes are not searched
            // for others), stopping at free space; then keep the longest run in sequence order.
            var end = limit
            if next == nil { offset += 8 }
            while offset < limit {
                if offset + Format.recordHeaderSize <= limit,
                    bytes.load(fromByteOffset: offset, as: UInt32.self) == Format.recordMagic.littleEndian,
                    let r = RecordHeader.verified(in: bytes, at: offset, limit: limit)
                {
                    records.append(r)
                    offset += r.length
                    continue
                }
                if restIsZero(from: offset) {
                    end = offset
                    break
                }
                offset += 8
            }
            var position = start
            for record in longestOrderedRun(records.filter { $0.seq >= minimumSeq }) {
                if record.offset > position { log.damaged(position..<record.offset, next: record) }
                log.accept(record, apply)
                position = record.offset + record.length
            }
            // `end` is past the damage (free space begins there, or the range ends).
            if position < end { log.damaged(position..<end, next: Optional<RecordHeader>.none) }
            log.finish()
            return log.result
        }
        for record in records { log.accept(record, apply) }
        log.finish()
        return log.result
    }

    /// The longest subsequence of `records` (in file order) whose sequence numbers never decrease; among
    /// equally long ones, the first found.
    static func longestOrderedRun(_ records: [RecordHeader]) -> [RecordHeader] {
        guard records.count > 1 else { return records }
        // Patience sorting: tails[k] is the index of the smallest last seq of a run of length k + 1.
        var tails: [Int] = []
        var previous = [Int](repeating: -1, count: records.count)
        for (i, record) in records.enumerated() {
            var low = 0
            var high = tails.count
            while low < high {
                let mid = (low + high) / 2
                if records[tails[mid]].seq <= record.seq { low = mid + 1 } else { high = mid }
            }
            if low > 0 { previous[i] = tails[low - 1] }
            if low == tails.count { tails.append(i) } else { tails[low] = i }
        }
        var run: [RecordHeader] = []
        var i = tails.last!
        while i >= 0 {
            run.append(records[i])
            i = previous[i]
        }
        return run.reversed()
    }

    /// Applies verified records in log order: holds transaction members until their commit record, and
    /// records damaged ranges and dropped transactions.
    private struct Reader {
        let bytes: UnsafeRawBufferPointer
        let plainKeys: Bool
        var result: ScanResult
        var pending: [RecordHeader] = []

        init(bytes: UnsafeRawBufferPointer, plainKeys: Bool, start: Int, minimumSeq: UInt64) {
            self.bytes = bytes
            self.plainKeys = plainKeys
            result = ScanResult(end: start)
            result.maxSeq = minimumSeq
        }

        mutating func accept(_ record: RecordHeader, _ apply: (RecordHeader) -> Void) {
            result.recordsKept += 1
            result.maxSeq = max(result.maxSeq, record.seq)
            if let last = pending.last, last.seq != record.seq {
                dropPending(upTo: record.offset, "a transaction's commit record is missing")
            }
            if record.kind == .commit {
                let count = Int(
                    UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: record.valueOffset, as: UInt32.self)))
                if count == pending.count && !pending.isEmpty {
                    for member in pending { apply(member) }
                    pending.removeAll()
                } else {
                    // Members were lost to damage before it: the whole transaction goes.
                    pending.append(record)
                    dropPending(upTo: record.offset + record.length, "a transaction lost members")
                }
            } else if record.isCommit {
                if !pending.isEmpty { dropPending(upTo: record.offset, "a transaction's commit record is missing") }
                apply(record)
            } else {
                pending.append(record)
            }
            result.end = record.offset + record.length
        }

        /// A range that holds no record to keep; `next` is the record kept right after it, if any.
        mutating func damaged(_ range: Range<Int>, next: RecordHeader?) {
            dropPending(upTo: range.lowerBound, "damage follows a transaction's members")
            var damage = LogScanner.describe(bytes, range, plainKeys: plainKeys)
            // Sequence numbers go up by one per commit, so the record kept after the damage tells how many
            // commits the damage swallowed (when it does not sit inside the same transaction).
            if let next, next.seq > result.maxSeq + 1 {
                damage.records = max(damage.records, Int(clamping: next.seq - result.maxSeq - 1))
            }
            result.damage.append(damage)
            result.end = range.upperBound
        }

        mutating func dropPending(upTo end: Int, _ reason: String) {
            guard let first = pending.first else { return }
            let keys = plainKeys ? pending.compactMap { LogScanner.keyName(bytes, $0) } : []
            result.damage.append(
                PrefsDamage(range: first.offset..<end, records: pending.count, keys: keys, reason: reason))
            result.recordsKept -= pending.count
            pending.removeAll()
        }

        mutating func finish() {
            if !pending.isEmpty { dropPending(upTo: result.end, "the log ends inside a transaction") }
        }
    }

    /// Counts and names the record headers still recognisable in a damaged range.
    static func describe(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>, plainKeys: Bool) -> PrefsDamage {
        var records = 0
        var keys: [String] = []
        var offset = range.lowerBound
        while offset + Format.recordHeaderSize <= range.upperBound {
            if bytes.load(fromByteOffset: offset, as: UInt32.self) == Format.recordMagic.littleEndian {
                records += 1
                let keyLength = Int(UInt32(littleEndian: bytes.load(fromByteOffset: offset + 8, as: UInt32.self)))
                let keyStart = offset + Format.recordHeaderSize
                if plainKeys, keyLength > 0, keyLength <= Format.maxKeyLength, keyStart + keyLength <= range.upperBound,
                    let name = String(
                        validating: UnsafeRawBufferPointer(
                            rebasing: bytes[keyStart..<keyStart + keyLength]), as: UTF8.self)
                {
                    keys.append(name)
                }
            }
            offset += 8
        }
        return PrefsDamage(range: range, records: max(records, 1), keys: keys, reason: "checksum mismatch")
    }

    fileprivate static func keyName(_ bytes: UnsafeRawBufferPointer, _ record: RecordHeader) -> String? {
        guard record.keyLength > 0 else { return nil }
        return String(validating: record.key(in: bytes), as: UTF8.self)
    }

    private static func firstNonZero(_ bytes: UnsafeRawBufferPointer, from start: Int, to end: Int) -> Int? {
        var i = start
        while i + 8 <= end {
            if bytes.load(fromByteOffset: i, as: UInt64.self) != 0 { break }
            i += 8
        }
        while i < end {
            if bytes[i] != 0 { return i }
            i += 1
        }
        return nil
    }
}
