// What a recovery cost each key its dropped writes name (`PrefsRecoveryReport.lostKeys`, `revertedKeys`): a dropped
// write costs its key nothing when a later committed write replaced it, its newest value when an older one
// survived, and its value when none did. Only the report changes here: what is kept was decided by the scan.

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

    /// Names in `report` what its dropped writes cost each key, given what the recovered store holds (`isPresent`,
    /// `presentKeys`; the keys a dropped `removeAll` would have removed) and the file's committed writes: a key
    /// whose every dropped write a later one replaced costs nothing (`supersededKeys`); otherwise a key the store
    /// still holds kept an older value (`revertedKeys`), and a key it does not hold lost its value (`lostKeys`)
    /// unless its dropped write removed it anyway.
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
        // A key whose newest dropped write was not replaced decides by that write; the others are superseded.
        var newest: [[UInt8]: PrefsDamage.DroppedWrite] = [:]
        var clears: [Int] = []
        for write in writes {
            if let key = write.key {
                if (newest[Array(key.utf8)]?.offset ?? -1) < write.offset { newest[Array(key.utf8)] = write }
            } else if !touches.replaced(nil, after: write.offset) {
                clears.append(write.offset)
            }
        }
        let byOffset = newest.values.sorted { $0.offset < $1.offset }
        for write in byOffset {
            guard let key = write.key else { continue }
            if touches.replaced(key, after: write.offset) {
                continue
            } else if isPresent(key) {
                note(key, &reverted)
            } else if write.effect == .set {
                note(key, &lost)
            }
        }
        // A dropped removeAll: every key the store holds that no committed write after it touched kept its value.
        if let clear = clears.min() {
            for key in presentKeys().sorted() where (touches.last[Array(key.utf8)] ?? -1) < clear {
                note(key, &reverted)
            }
        }
        for write in byOffset { if let key = write.key { note(key, &superseded) } }
        report.lostKeys = lost
        report.revertedKeys = reverted
        report.supersededKeys = superseded
    }
}
