// The log's side of its persisted index (IndexTable.swift has the format, Engine+PersistedIndex.swift the policy):
// looking a key up in the table a handle opened from, and appending an index record of every key.
import SystemLayer

extension StoreLog {
    /// What `lookUp` found.
    enum LookUp {
        /// The key's entry, now in `index` too.
        case found(Entry)
        /// The store holds no such key.
        case absent
        /// The persisted table did not verify where the lookup read it: read the whole log.
        case tableDamaged
    }

    /// Looks `key`, which `index` does not hold, up in the persisted table of a lazy handle, and keeps what it
    /// finds in `index`.
    func lookUp(_ key: String) -> LookUp {
        guard let table else { return .absent }
        let sealed = header.isEncrypted
        let auth = self.auth
        let found = file.withBytes { bytes in table.probe(key, in: bytes, sealed: sealed, auth: auth) }
        switch found {
        case .found(let record):
            // Already counted in the table's live bytes.
            let entry = Entry(record)
            index.updateValue(entry, forKey: key)
            return .found(entry)
        case .absent:
            return .absent
        case .damaged:
            return .tableDamaged
        }
    }

    /// Appends an index record of the whole index (this handle read the whole log: `table` is nil) and names it
    /// in the header's index word. It holds no data: the log end moves past it, the sequence number does not.
    /// Under the writer lock.
    func appendIndex() throws(PrefsError) {
        precondition(table == nil, "an index record is written from an index of every key")
        guard header.hasIndexRecords, knownEnd < 1 << 40, !skippedDamage else { return }
        let auth = self.auth
        let pieces = header.authenticatesTablePieces ? auth : nil
        guard IndexTable.fits(keyCount: index.count, pieces: pieces != nil) else { return }
        let valueLength = IndexTable.valueLength(keyCount: index.count, pieces: pieces != nil)
        let length = IndexTable.recordLength(keyCount: index.count, authenticated: auth != nil, pieces: pieces != nil)
        let offset = knownEnd
        try ensureCapacity(offset + length)
        let seq = nextSeq - 1
        let seed = UInt64.random(in: 1...UInt64.max)
        let index = self.index
        let liveBytes = self.liveBytes
        let recordCount = self.recordCount
        file.withMutableBytes { bytes in
            _ = RecordWriter.write(
                into: bytes, at: offset, kind: .index, valueType: 0, flags: RecordFlags.commit, seq: seq, expiresAt: 0,
                key: UnsafeRawBufferPointer(start: nil, count: 0), valueLength: valueLength, auth: auth,
                seed: recordSeed
            ) { value in
                IndexTable.write(
                    index, into: value, recordOffset: offset, seq: UInt64(seq), liveBytes: liveBytes,
                    recordCount: recordCount, seed: seed, recordSeed: recordSeed, pieces: pieces)
            }
        }
        if synchronous { try file.syncData() }
        if hasChangedUnderneath { throw changedUnderneath() }
        knownEndWord = file.publish(logEnd: offset + length)
        knownEnd = offset + length
        adoptedLeftWrite = false
        file.publishIndex(at: offset)
        tailRecords = 0
        indexBytes = length
        if synchronous { try file.syncData() }
        #if PREFSKV_INTERNAL_CHECKS
        file.withBytes { bytes in
            let table = IndexTable.read(in: bytes, at: offset, limit: knownEnd, auth: auth, recordSeed: recordSeed)
            precondition(table != nil, "an index record just written does not read back")
            if let auth {
                // The whole record as a scan checks it (a table of pieces: every piece), not only what lookups reach.
                let whole = PrivateCopy.of(bytes, offset..<offset + length) { copy -> Bool in
                    guard let record = RecordHeader.verified(in: copy, at: 0, limit: copy.count, seed: recordSeed)
                    else { return false }
                    return auth.isAuthentic(record, in: copy, fileOffset: offset)
                }
                precondition(whole, "an index record just written does not verify whole")
            }
            for (key, entry) in index {
                guard case .found(let record) = table!.probe(key, in: bytes, sealed: header.isEncrypted, auth: auth)
                else { preconditionFailure("an index record just written does not give back its keys") }
                precondition(record.offset == entry.recordOffset, "an index record names another record")
            }
        }
        #endif
    }
}
