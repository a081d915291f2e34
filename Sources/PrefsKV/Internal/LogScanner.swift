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
    /// - `freeSpaceEndsLog`: zeros up to `limit` end the log instead of being damage (used when the log-end
    ///   word is unusable and the whole file is scanned).
    /// - `minimumSeq`: records found by resynchronisation must not go back in sequence (the log's sequence
    ///   numbers never decrease), which rejects record-like bytes inside a value.
    /// - `apply`: called for each committed record (set, delete, removeAll), in log order.
    static func scan(
        _ bytes: UnsafeRawBufferPointer, from start: Int, to limit: Int, freeSpaceEndsLog: Bool,
        plainKeys: Bool, minimumSeq: UInt64 = 0, apply: (RecordHeader) -> Void
    ) -> ScanResult {
        precondition(start & 7 == 0 && start <= limit && limit <= bytes.count)
        var result = ScanResult(end: start)
        result.maxSeq = minimumSeq
        var pending: [RecordHeader] = []
        var offset = start
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

        func dropPending(upTo end: Int, _ reason: String) {
            guard let first = pending.first else { return }
            let keys = plainKeys ? pending.compactMap { keyName(bytes, $0) } : []
            result.damage.append(
                PrefsDamage(range: first.offset..<end, records: pending.count, keys: keys, reason: reason))
            result.recordsKept -= pending.count
            pending.removeAll()
        }

        while offset < limit {
            if let record = RecordHeader.verified(in: bytes, at: offset, limit: limit) {
                result.recordsKept += 1
                result.maxSeq = max(result.maxSeq, record.seq)
                if let last = pending.last, last.seq != record.seq {
                    dropPending(upTo: offset, "a transaction's commit record is missing")
                }
                if record.kind == .commit {
                    let count = Int(
                        UInt32(
                            littleEndian: bytes.loadUnaligned(
                                fromByteOffset: record.valueOffset, as: UInt32.self)))
                    if count == pending.count && !pending.isEmpty {
                        for member in pending { apply(member) }
                        pending.removeAll()
                    } else {
                        // Members were lost to damage before it: the whole transaction goes.
                        pending.append(record)
                        dropPending(upTo: offset + record.length, "a transaction lost members")
                    }
                } else if record.isCommit {
                    if !pending.isEmpty { dropPending(upTo: offset, "a transaction's commit record is missing") }
                    apply(record)
                } else {
                    pending.append(record)
                }
                offset += record.length
                result.end = offset
                continue
            }
            if restIsZero(from: offset) { break }
            // Damage: step 8 bytes at a time to the next record that verifies and does not go back in sequence.
            let damageStart = offset
            offset += 8
            while offset < limit {
                if offset + Format.recordHeaderSize <= limit,
                    bytes.load(fromByteOffset: offset, as: UInt32.self) == Format.recordMagic.littleEndian,
                    let r = RecordHeader.verified(in: bytes, at: offset, limit: limit), r.seq >= result.maxSeq
                {
                    break
                }
                if restIsZero(from: offset) { break }
                offset += 8
            }
            offset = min(offset, limit)
            dropPending(upTo: damageStart, "damage follows a transaction's members")
            var damage = describe(bytes, damageStart..<offset, plainKeys: plainKeys)
            // Sequence numbers go up by one per commit, so the record found after the damage tells how many
            // commits the damage swallowed (when it does not sit inside the same transaction).
            if offset < limit, let next = RecordHeader.verified(in: bytes, at: offset, limit: limit),
                next.seq > result.maxSeq + 1
            {
                damage.records = max(damage.records, Int(clamping: next.seq - result.maxSeq - 1))
            }
            result.damage.append(damage)
            result.end = offset
        }
        if !pending.isEmpty { dropPending(upTo: result.end, "the log ends inside a transaction") }
        return result
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

    private static func keyName(_ bytes: UnsafeRawBufferPointer, _ record: RecordHeader) -> String? {
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
