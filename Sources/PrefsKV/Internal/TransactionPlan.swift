// A transaction's commit, planned and written: the net effect per key (compare-before-set drops unchanged
// values), each record framed by the codec and appended to the log with one publish.
import SystemLayer

/// One change collected by a `PrefsTransaction`.
enum TransactionOp {
    case set(name: String, type: ValueType, value: [UInt8], expiresAt: Int64)
    case remove(name: String)
    case removeAll
}

struct TransactionPlan {
    /// A record about to be written.
    enum Record {
        case set(indexKey: String, name: String, type: ValueType, value: [UInt8], expiresAt: Int64)
        case delete(indexKey: String, name: String)
        case removeAll
    }

    var records: [Record] = []
    /// Names whose values change (observers are told).
    var changed: [String] = []

    /// The records `ops` need, in first-touch order, against the state of `log` (every key of it read); with
    /// `collectsChanges`, the names whose values change.
    init(_ ops: [TransactionOp], log: StoreLog, codec: RecordCodec, collectsChanges: Bool) throws(PrefsError) {
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
        if clearsAll && !log.index.isEmpty {
            records.append(.removeAll)
            if collectsChanges { changed += codec.liveNames(in: log) }
        }
        for name in order {
            let indexKey = codec.indexKey(forName: name)
            switch final[ByteKey(name)]! {
            case .set(_, let type, let value, let expiresAt):
                if !clearsAll,
                    try TransactionPlan.isUnchanged(
                        indexKey: indexKey, name: name, type: type, value: value, expiresAt: expiresAt, log: log,
                        codec: codec)
                {
                    continue
                }
                records.append(.set(indexKey: indexKey, name: name, type: type, value: value, expiresAt: expiresAt))
                changed.append(name)
            case .remove:
                guard !clearsAll, let old = log.index[indexKey] else { continue }
                records.append(.delete(indexKey: indexKey, name: name))
                if !old.isExpired(now: Sys.nowMilliseconds()) { changed.append(name) }
            case .removeAll:
                preconditionFailure()
            }
        }
    }

    /// Compare-before-set (`RecordCodec.holds`) of a value given as an array.
    private static func isUnchanged(
        indexKey: String, name: String, type: ValueType, value: [UInt8], expiresAt: Int64, log: StoreLog,
        codec: RecordCodec
    ) throws(PrefsError) -> Bool {
        try typed {
            try value.withUnsafeBytes { value in
                try RecordCodec.holds(
                    indexKey: indexKey, name: name, type: type, value: value, expiresAt: expiresAt, log: log,
                    sealed: codec.sealed)
            }
        }
    }

    /// Frames the records with `codec` and appends them to `log`: one record with the commit flag for a single
    /// change, otherwise the changes followed by a commit record, published together. With `learnsNames`, a sealed
    /// store remembers the names it wrote (a handle that reports changes).
    func write(log: StoreLog, codec: RecordCodec, learnsNames: Bool) throws(PrefsError) {
        let paths = log.paths
        let records = self.records
        let auth = log.auth
        let authenticated = auth != nil
        // Lay out the records.
        struct Layout {
            var key: [UInt8]
            var valueLength: Int
            var length: Int
        }
        var layouts: [Layout] = []
        var total = 0
        for record in records {
            let layout: Layout
            switch record {
            case .set(let indexKey, let name, _, let value, _):
                let key = codec.diskKey(name, indexKey: indexKey)
                let valueLength = codec.storedLength(name: name, valueLength: value.count)
                layout = Layout(
                    key: key, valueLength: valueLength,
                    length: Format.recordLength(
                        keyLength: key.count, valueLength: valueLength, authenticated: RecordAuth.signsSets(auth)))
            case .delete(let indexKey, let name):
                let key = codec.diskKey(name, indexKey: indexKey)
                layout = Layout(
                    key: key, valueLength: 0,
                    length: Format.recordLength(keyLength: key.count, valueLength: 0, authenticated: authenticated))
            case .removeAll:
                layout = Layout(
                    key: [], valueLength: 0,
                    length: Format.recordLength(keyLength: 0, valueLength: 0, authenticated: authenticated))
            }
            layouts.append(layout)
            total += layout.length
        }
        let single = records.count == 1
        let commitLength = Format.recordLength(keyLength: 0, valueLength: 4, authenticated: authenticated)
        if !single { total += commitLength }
        let flags = single ? RecordFlags.commit : 0
        let uuid = log.header.uuid
        let seed = log.recordSeed
        try log.append(length: total, records: records.count + (single ? 0 : 1)) {
            bytes, start, seq throws(PrefsError) -> [RecordHeader] in
            var offset = start
            var headers: [RecordHeader] = []
            for (record, layout) in zip(records, layouts) {
                let header: RecordHeader
                switch record {
                case .set(_, let name, let type, let value, let expiresAt):
                    do {
                        header = try layout.key.withUnsafeBytes { key in
                            try value.withUnsafeBytes { value in
                                try codec.writeSet(
                                    into: bytes, at: offset, flags: flags, seq: seq, name: name, key: key, type: type,
                                    value: value, expiresAt: expiresAt, storedLength: layout.valueLength, uuid: uuid,
                                    auth: auth, seed: seed)
                            }
                        }
                    } catch {
                        throw SealedRecordCodec.sealFailed(name, path: paths.data, error)
                    }
                case .delete:
                    header = layout.key.withUnsafeBytes { key in
                        RecordWriter.write(
                            into: bytes, at: offset, kind: .delete, valueType: 0, flags: flags | codec.recordFlags,
                            seq: seq, expiresAt: 0, key: key, valueLength: 0, auth: auth, seed: seed
                        ) { _ in }
                    }
                case .removeAll:
                    header = RecordWriter.write(
                        into: bytes, at: offset, kind: .removeAll, valueType: 0, flags: flags, seq: seq, expiresAt: 0,
                        key: UnsafeRawBufferPointer(start: nil, count: 0), valueLength: 0, auth: auth, seed: seed
                    ) { _ in }
                }
                headers.append(header)
                offset += header.length
            }
            if !single {
                _ = RecordWriter.write(
                    into: bytes, at: offset, kind: .commit, valueType: 0, flags: RecordFlags.commit, seq: seq,
                    expiresAt: 0, key: UnsafeRawBufferPointer(start: nil, count: 0), valueLength: 4, auth: auth,
                    seed: seed
                ) { out in out.storeBytes(of: UInt32(records.count).littleEndian, as: UInt32.self) }
            }
            return headers
        } applied: { _ in
            // A sealed store learns the plaintext CRCs it wrote (for compare-before-set), and, when it reports
            // changes, the names (as `SealedRecordCodec.set` does).
            guard case .sealed(let sealed) = codec else { return }
            for record in records {
                if case .set(let indexKey, let name, _, let value, _) = record {
                    value.withUnsafeBytes {
                        sealed.learn(indexKey: indexKey, name: learnsNames ? name : nil, value: $0, in: log)
                    }
                }
            }
        }
    }
}
