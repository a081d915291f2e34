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
    /// - `seed`: where every record's checksum starts (`Header.recordSeed` of the image scanned).
    /// - `auth`: in a version-2 sealed store scanned with its sealer, every record must also carry a matching
    ///   authenticator. One that verifies its CRC but not its authenticator (forged, replayed, moved) is not
    ///   applied, and the damaged range around it is marked as tampering.
    /// - `apply`: called for each committed record (set, delete, removeAll), in log order, with the bytes it lies
    ///   in at its offset: the mapping's, or in a sealed store the private copy that was checked.
    ///
    /// With `auth`, the range is first copied into private memory (`PrivateCopy.atOffsets`) and only the copy is
    /// read: another process writing the file meanwhile cannot change a record between its check and its use (its
    /// key taken for another, a commit's count, a field read again for the second pass).
    static func scan(
        _ bytes: UnsafeRawBufferPointer, from start: Int, to limit: Int, freeSpaceEndsLog: Bool,
        plainKeys: Bool, minimumSeq: UInt64 = 0, seed: RecordSeed, auth: RecordAuth? = nil,
        apply: (RecordHeader, UnsafeRawBufferPointer) -> Void
    ) -> ScanResult {
        precondition(start & 7 == 0 && start <= limit && limit <= bytes.count)
        guard auth != nil else {
            return scan(
                bytes, start, limit, freeSpaceEndsLog: freeSpaceEndsLog, plainKeys: plainKeys, minimumSeq: minimumSeq,
                seed: seed, auth: nil) { apply($0, bytes) }
        }
        return PrivateCopy.atOffsets(bytes, start..<limit) { copy in
            scan(
                copy, start, limit, freeSpaceEndsLog: freeSpaceEndsLog, plainKeys: plainKeys, minimumSeq: minimumSeq,
                seed: seed, auth: auth) { apply($0, copy) }
        }
    }

    @inline(__always)
    private static func scan(
        _ bytes: UnsafeRawBufferPointer, _ start: Int, _ limit: Int, freeSpaceEndsLog: Bool, plainKeys: Bool,
        minimumSeq: UInt64, seed: RecordSeed, auth: RecordAuth?, apply: (RecordHeader) -> Void
    ) -> ScanResult {
        // The common case, an intact log, takes two passes over the mapping and allocates nothing: the first
        // verifies every record and their order, the second applies them. Damage (rare) goes to the salvage
        // scan, which reads the range again from the start.
        guard
            let end = intactEnd(
                bytes, from: start, to: limit, freeSpaceEndsLog: freeSpaceEndsLog, minimumSeq, seed: seed, auth: auth)
        else {
            return salvage(
                bytes, from: start, to: limit, freeSpaceEndsLog: freeSpaceEndsLog, plainKeys: plainKeys,
                minimumSeq: minimumSeq, seed: seed, auth: auth, apply: apply)
        }
        var log = Reader(bytes: bytes, plainKeys: plainKeys, start: start, minimumSeq: minimumSeq)
        var offset = start
        // Every record below `end` verified in the first pass, and the header fields are read again without the
        // checksum: the log below a published end does not change when every writer keeps to the protocol, and a
        // sealed store's scan reads its private copy, which nobody else writes.
        while offset < end, let record = RecordHeader.plausible(in: bytes, at: offset, limit: end) {
            log.accept(record, apply)
            offset += record.length
        }
        log.finish()
        return log.result
    }

    /// Where the intact log in `[start, limit)` ends, when every record there verifies and their sequence
    /// numbers never decrease (up to trailing zeros, with `freeSpaceEndsLog`); nil when something is damaged.
    private static func intactEnd(
        _ bytes: UnsafeRawBufferPointer, from start: Int, to limit: Int, freeSpaceEndsLog: Bool,
        _ minimumSeq: UInt64, seed: RecordSeed, auth: RecordAuth?
    ) -> Int? {
        var offset = start
        var lastSeq = minimumSeq
        while offset < limit {
            guard case .record(let record) = found(in: bytes, at: offset, limit: limit, seed: seed, auth: auth),
                record.seq >= lastSeq
            else {
                return freeSpaceEndsLog && firstNonZero(bytes, from: offset, to: limit) == nil ? offset : nil
            }
            lastSeq = record.seq
            offset += record.length
        }
        return offset
    }

    /// What is at an offset of the log.
    enum Found {
        /// A record that verifies (and, with `auth`, is authentic).
        case record(RecordHeader)
        /// A record whose CRC verifies but whose authenticator does not (or that has none where it must).
        case unauthentic(RecordHeader)
        /// Nothing that verifies.
        case nothing
    }

    @inline(__always)
    static func found(
        in bytes: UnsafeRawBufferPointer, at offset: Int, limit: Int, seed: RecordSeed, auth: RecordAuth?
    ) -> Found {
        guard let record = RecordHeader.verified(in: bytes, at: offset, limit: limit, seed: seed) else {
            return .nothing
        }
        if let auth, !auth.isAuthentic(record, in: bytes) { return .unauthentic(record) }
        return .record(record)
    }

    /// The scan of a damaged range (see `scan`): keeps the longest run of verified records in sequence order.
    private static func salvage(
        _ bytes: UnsafeRawBufferPointer, from start: Int, to limit: Int, freeSpaceEndsLog: Bool,
        plainKeys: Bool, minimumSeq: UInt64, seed: RecordSeed, auth: RecordAuth?, apply: (RecordHeader) -> Void
    ) -> ScanResult {
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
        var offset = start
        while offset < limit {
            let next: RecordHeader?
            switch found(in: bytes, at: offset, limit: limit, seed: seed, auth: auth) {
            case .record(let record): next = record
            case .unauthentic:
                next = nil
                log.unauthentic.append(offset)
            case .nothing: next = nil
            }
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
                    bytes.load(fromByteOffset: offset, as: UInt32.self) == Format.recordMagic.littleEndian
                {
                    switch found(in: bytes, at: offset, limit: limit, seed: seed, auth: auth) {
                    case .record(let r):
                        records.append(r)
                        offset += r.length
                        continue
                    case .unauthentic:
                        // Its bytes are searched on: an authentic record may hide inside a forged length.
                        log.unauthentic.append(offset)
                    case .nothing:
                        break
                    }
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
        // Only reached when the first pass of `scan` and this one disagree: the range changed in between.
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
    ///
    /// A transaction's members are kept as runs of the log: the current run (its first offset and count, read
    /// again when they are applied) and, when damage fell among them, the runs before that damage. A committed
    /// transaction whose commit record verifies keeps the members that verify when damage took others (members
    /// are salvaged one by one); one without a verifying commit (torn at the end of the log, or its commit lost)
    /// is dropped whole.
    private struct Reader {
        let bytes: UnsafeRawBufferPointer
        let plainKeys: Bool
        var result: ScanResult
        /// The current run of members accepted since the last commit: where the first starts, how many, and the
        /// transaction's sequence number.
        var pendingStart = 0
        var pendingCount = 0
        var pendingSeq: UInt64 = 0
        /// Runs of the same transaction's members that damage separated from the current run: where each starts
        /// and ends, how many members it holds, and where in `result.damage` a report of it belongs.
        var earlierRuns: [(start: Int, end: Int, count: Int, damageIndex: Int)] = []
        /// Indices in `result.damage` of the ranges reported since the last commit.
        var damageSinceCommit: [Int] = []
        /// Offsets of records that verified their CRC but not their authenticator, in file order.
        var unauthentic: [Int] = []

        init(bytes: UnsafeRawBufferPointer, plainKeys: Bool, start: Int, minimumSeq: UInt64) {
            self.bytes = bytes
            self.plainKeys = plainKeys
            result = ScanResult(end: start)
            result.maxSeq = minimumSeq
        }

        /// Members of the pending transaction, in every run.
        var pendingTotal: Int { pendingCount + earlierRuns.reduce(0) { $0 + $1.count } }

        /// The members of a run, in log order.
        func forEach(run start: Int, count: Int, _ body: (RecordHeader) -> Void) {
            var offset = start
            for _ in 0..<count {
                // They verified when accepted: only the fields are read again. (Nil would mean the mapping
                // changed under the scan, which the log's protocol excludes; the rest is then not applied.)
                guard let member = RecordHeader.plausible(in: bytes, at: offset, limit: bytes.count) else { return }
                body(member)
                offset += member.length
            }
        }

        /// The pending members, in log order.
        func forEachPending(_ body: (RecordHeader) -> Void) {
            for run in earlierRuns { forEach(run: run.start, count: run.count, body) }
            forEach(run: pendingStart, count: pendingCount, body)
        }

        mutating func accept(_ record: RecordHeader, _ apply: (RecordHeader) -> Void) {
            // The header copy (only ever at the log start) is checked like any record, and is not part of the data.
            if record.kind == .header {
                result.end = record.offset + record.length
                return
            }
            // An index record holds no data: it is applied (so a reader knows where the newest table is) but not
            // counted, and it ends no transaction (none is open where one is written).
            if record.kind == .index {
                if pendingTotal > 0 { dropPending(upTo: record.offset, "a transaction's commit record is missing") }
                result.maxSeq = max(result.maxSeq, record.seq)
                apply(record)
                result.end = record.offset + record.length
                return
            }
            result.recordsKept += 1
            result.maxSeq = max(result.maxSeq, record.seq)
            if pendingTotal > 0 && pendingSeq != record.seq {
                dropPending(upTo: record.offset, "a transaction's commit record is missing")
            }
            if record.kind == .commit {
                let count = Int(
                    UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: record.valueOffset, as: UInt32.self)))
                let kept = pendingTotal
                if count == kept && kept > 0 && earlierRuns.isEmpty {
                    forEachPending(apply)
                    clearPending()
                } else if kept > 0 && count > kept && !damageSinceCommit.isEmpty {
                    // The commit verifies and damage since the last commit took the missing members: keep the
                    // members that verify, lose only what the damage hit.
                    forEachPending(apply)
                    for index in damageSinceCommit {
                        result.damage[index].reason +=
                            "; inside a committed transaction of \(count) record(s), whose other \(kept) verified "
                            + "and were kept (the transaction was partially salvaged)"
                    }
                    clearPending()
                } else {
                    // Members are missing with no damage to account for them, or more members than it counts:
                    // the whole transaction goes.
                    addPending(record)
                    dropPending(upTo: record.offset + record.length, "a transaction lost members")
                }
                damageSinceCommit.removeAll()
            } else if record.isCommit {
                if pendingTotal > 0 { dropPending(upTo: record.offset, "a transaction's commit record is missing") }
                apply(record)
                damageSinceCommit.removeAll()
            } else {
                addPending(record)
            }
            result.end = record.offset + record.length
        }

        private mutating func addPending(_ record: RecordHeader) {
            if pendingTotal == 0 { pendingSeq = record.seq }
            if pendingCount == 0 { pendingStart = record.offset }
            pendingCount += 1
        }

        private mutating func clearPending() {
            pendingCount = 0
            earlierRuns.removeAll()
        }

        /// A range that holds no record to keep; `next` is the record kept right after it, if any.
        mutating func damaged(_ range: Range<Int>, next: RecordHeader?) {
            // Members before the damage stay pending: their commit, if it verifies, decides.
            if pendingCount > 0 {
                earlierRuns.append((pendingStart, range.lowerBound, pendingCount, result.damage.count))
                pendingCount = 0
            }
            var damage = LogScanner.describe(bytes, range, plainKeys: plainKeys)
            let forged = unauthentic.filter { range.contains($0) }.count
            if forged > 0 {
                damage.isTampering = true
                damage.reason =
                    "\(forged) record(s) with a valid checksum fail authentication (forged, replayed or moved)"
            }
            // Sequence numbers go up by one per commit, so the record kept after the damage tells how many
            // commits the damage swallowed (when it does not sit inside the same transaction).
            if let next, next.seq > result.maxSeq + 1 {
                damage.records = max(damage.records, Int(clamping: next.seq - result.maxSeq - 1))
            }
            damageSinceCommit.append(result.damage.count)
            result.damage.append(damage)
            result.end = range.upperBound
        }

        /// Drops the pending transaction whole, reporting each of its runs where it lies in the log.
        mutating func dropPending(upTo end: Int, _ reason: String) {
            guard pendingTotal > 0 else { return }
            func report(_ start: Int, _ end: Int, _ count: Int, _ reason: String) -> PrefsDamage {
                var keys: [String] = []
                var dropped: [PrefsDamage.DroppedWrite] = []
                if plainKeys {
                    forEach(run: start, count: count) {
                        let name = LogScanner.keyName(bytes, $0)
                        if let name { keys.append(name) }
                        if let write = PrefsDamage.DroppedWrite($0, key: name) { dropped.append(write) }
                    }
                }
                var damage = PrefsDamage(range: start..<end, records: count, keys: keys, reason: reason)
                damage.droppedWrites = dropped
                return damage
            }
            result.recordsKept -= pendingTotal
            if pendingCount > 0 { result.damage.append(report(pendingStart, end, pendingCount, reason)) }
            // Earlier runs go before the damage that followed them (inserted last first, so indices hold).
            for run in earlierRuns.reversed() {
                result.damage.insert(
                    report(run.start, run.end, run.count, "damage follows a transaction's members"), at: run.damageIndex
                )
                damageSinceCommit = damageSinceCommit.map { $0 >= run.damageIndex ? $0 + 1 : $0 }
            }
            clearPending()
        }

        mutating func finish() {
            if pendingTotal > 0 { dropPending(upTo: result.end, "the log ends inside a transaction") }
        }
    }

    /// Counts the record headers still recognisable in a damaged range. It names no key: a record in the range
    /// failed its check, so the bytes where its key would be are not a key anyone wrote. What they spell, in a plain
    /// store, is kept apart as a hint (`PrefsDamage.unverifiedKeys`), never reported as a key.
    static func describe(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>, plainKeys: Bool) -> PrefsDamage {
        var records = 0
        var hints: [String] = []
        var noData = false
        var offset = range.lowerBound
        while offset + Format.recordHeaderSize <= range.upperBound {
            if bytes.load(fromByteOffset: offset, as: UInt32.self) == Format.recordMagic.littleEndian {
                // The header copy that starts a version-3 log holds no data: it is not a record lost.
                if offset == Format.logStart && bytes[offset + 4] == RecordKind.header.rawValue {
                    noData = true
                    offset += 8
                    continue
                }
                // Nor is an index record: a range that lies within one lost nothing.
                if bytes[offset + 4] == RecordKind.index.rawValue {
                    let valueLength = Int(
                        UInt32(littleEndian: bytes.load(fromByteOffset: offset + 12, as: UInt32.self)))
                    let end =
                        offset
                        + Format.recordLength(
                            keyLength: 0, valueLength: valueLength,
                            authenticated: bytes[offset + 6] & RecordFlags.authenticated != 0)
                    if offset == range.lowerBound && end >= range.upperBound { noData = true }
                    offset += 8
                    continue
                }
                records += 1
                let keyLength = Int(UInt32(littleEndian: bytes.load(fromByteOffset: offset + 8, as: UInt32.self)))
                let keyStart = offset + Format.recordHeaderSize
                if plainKeys, keyLength > 0, keyLength <= Format.maxKeyLength, keyStart + keyLength <= range.upperBound,
                    let name = String(
                        validating: UnsafeRawBufferPointer(rebasing: bytes[keyStart..<keyStart + keyLength]),
                        as: UTF8.self)
                {
                    hints.append(name)
                }
            }
            offset += 8
        }
        var damage = PrefsDamage(
            range: range, records: noData && records == 0 ? 0 : max(records, 1), keys: [],
            reason: "checksum mismatch")
        damage.unverifiedKeys = hints
        return damage
    }

    static func keyName(_ bytes: UnsafeRawBufferPointer, _ record: RecordHeader) -> String? {
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
