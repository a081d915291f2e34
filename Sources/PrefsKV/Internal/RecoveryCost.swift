// What a recovery cost each key its dropped writes name (`PrefsRecoveryReport.lostKeys`, `revertedKeys`): a dropped
// write costs its key nothing when a later committed write replaced it, its newest value when an older one
// survived, and its value when none did. Only the report changes here: what is kept was decided by the scan.

import SystemLayer

extension Recovery {
    /// The committed writes of a damaged file, by key: where each key was last written (set or removed) and where
    /// every key was last removed (`removeAll`). Read only for the keys dropped writes name, after damage.
    struct Touches {
        /// By the key's bytes (two spellings of one name in Unicode are two keys).
        var last: [[UInt8]: Int] = [:]
        var lastClear = -1

        /// Whether a committed write after `offset` replaced what a write of `key` (nil: of every key) did there.
        func replaced(_ key: String?, after offset: Int) -> Bool {
            if lastClear > offset { return true }
            guard let key else { return false }
            return (last[Array(key.utf8)] ?? -1) > offset
        }
    }

    /// The committed records (set, delete, removeAll) of `file`, a store file under `header`, in log order: to its
    /// log end when that word still reads, else to the free space after the last record, as a scan that found
    /// damage in it reads it.
    static func committedRecords(
        of file: MappedFile, header: Header, sealer: (any PrefsSealer)?
    ) -> [RecordHeader] {
        var records: [RecordHeader] = []
        file.withBytes { bytes in
            let size = file.mappedLength & ~7
            var limit = size
            var freeSpaceEndsLog = true
            if let end = Format.decodeLogEnd(file.logEndWord), end >= Format.logStart, end & 7 == 0, end <= size {
                limit = end
                freeSpaceEndsLog = false
            }
            _ = LogScanner.scan(
                bytes, from: Format.logStart, to: limit, freeSpaceEndsLog: freeSpaceEndsLog,
                plainKeys: !header.isEncrypted, seed: header.recordSeed,
                auth: RecordAuth(header: header, sealer: sealer)
            ) { record, _ in
                switch record.kind {
                case .set, .delete, .removeAll: records.append(record)
                case .commit, .header, .index: break
                }
            }
        }
        return records
    }

    /// Where `records` (committed, of `file`) last wrote each key a dropped write of `damage` names (every key,
    /// when a dropped write is a `removeAll`: what it would have removed).
    static func touches(of records: [RecordHeader], in file: MappedFile, damage: [PrefsDamage]) -> Touches {
        let writes = damage.flatMap(\.droppedWrites)
        let named = Set(writes.compactMap { $0.key.map { Array($0.utf8) } })
        let every = writes.contains { $0.effect == .removeAll }
        var touches = Touches()
        guard !writes.isEmpty else { return touches }
        file.withBytes { bytes in
            for record in records {
                if record.kind == .removeAll {
                    touches.lastClear = record.offset
                } else if record.keyLength > 0 {
                    let key = Array(record.key(in: bytes))
                    if every || named.contains(key) { touches.last[key] = record.offset }
                }
            }
        }
        return touches
    }

    /// Names in `report` what the dropped writes of its damage cost each key, the damage found by a scan of `file`
    /// (under `header`) and `index` what survives of it (what the recovered store holds). Nothing to do, and nothing
    /// read, when the damage dropped no write that names a key (a sealed store's never does).
    static func nameCost(
        _ report: inout PrefsRecoveryReport, file: MappedFile, header: Header, sealer: (any PrefsSealer)?,
        index: KeyIndex
    ) {
        guard report.damage.contains(where: { !$0.droppedWrites.isEmpty }) else { return }
        let records = committedRecords(of: file, header: header, sealer: sealer)
        nameCost(&report, touches: touches(of: records, in: file, damage: report.damage), index: index)
    }

    /// `nameCost` against what `index` holds: its keys whose value has not expired.
    static func nameCost(_ report: inout PrefsRecoveryReport, touches: Touches, index: KeyIndex) {
        let now = Sys.nowMilliseconds()
        nameCost(
            &report, touches: touches, isPresent: { index[$0].map { !$0.isExpired(now: now) } ?? false },
            presentKeys: { index.compactMap { $0.value.isExpired(now: now) ? nil : $0.key } })
    }

    /// Names in `report` what its dropped writes cost each key, given what the recovered store holds (`isPresent`: a
    /// live, unexpired value; `presentKeys`: the keys a dropped `removeAll` would have removed) and the file's
    /// committed writes (`touches`). A key is judged by the last write of it, committed or dropped, a `removeAll`
    /// writing every key: a committed one means it is as it should be (a key whose dropped writes it replaced is
    /// `supersededKeys`); a dropped set means the value it set is missing: `revertedKeys` when the store holds an
    /// older one, else `lostKeys`; a dropped delete or `removeAll` means it should be absent: `revertedKeys` when the
    /// store holds a value (it came back), else nothing.
    static func nameCost(
        _ report: inout PrefsRecoveryReport, touches: Touches, isPresent: (String) -> Bool,
        presentKeys: () -> [String]
    ) {
        let writes = report.damage.flatMap(\.droppedWrites)
        guard !writes.isEmpty else { return }
        var lost: [String] = []
        var reverted: [String] = []
        var superseded: [String] = []
        var seen: Set<[UInt8]> = []
        func note(_ key: String, _ list: inout [String]) {
            if seen.insert(Array(key.utf8)).inserted { list.append(key) }
        }
        // The newest dropped write of each key it names, and the newest dropped removeAll.
        var newest: [[UInt8]: PrefsDamage.DroppedWrite] = [:]
        var clear = -1
        for write in writes {
            if let key = write.key {
                let bytes = Array(key.utf8)
                if (newest[bytes]?.offset ?? -1) < write.offset { newest[bytes] = write }
            } else {
                clear = max(clear, write.offset)
            }
        }
        /// The cost to `key` of its last dropped write, at `offset`, that `sets` it (else removes it).
        func judge(_ key: String, droppedAt offset: Int, sets: Bool) {
            if touches.replaced(key, after: offset) { return }
            if isPresent(key) {
                note(key, &reverted)
            } else if sets {
                note(key, &lost)
            }
        }
        let byOffset = newest.values.sorted { $0.offset < $1.offset }
        for write in byOffset {
            guard let key = write.key else { continue }
            if clear > write.offset {
                judge(key, droppedAt: clear, sets: false)
            } else {
                judge(key, droppedAt: write.offset, sets: write.effect == .set)
            }
        }
        // The keys a dropped removeAll would have removed and no dropped write of their own names.
        if clear >= 0 {
            for key in presentKeys().sorted() where newest[Array(key.utf8)] == nil {
                judge(key, droppedAt: clear, sets: false)
            }
        }
        for write in byOffset { if let key = write.key { note(key, &superseded) } }
        report.lostKeys = lost
        report.revertedKeys = reverted
        report.supersededKeys = superseded
    }
}
