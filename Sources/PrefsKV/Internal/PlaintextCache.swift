// A sealed store's opt-in cache of opened values (`Configuration.cachesPlaintext`): what a read opened, kept in
// this handle's private memory with the record it was opened from, so that the next read of the key answers without
// the sealer. Off by default: a sealed store keeps no plaintext beyond the read that needs it.
//
// A cached value answers a read only while it is exactly what a read without the cache would answer: the index
// still means the record it was opened from (the same image, place, key and value lengths, type, expiry and
// framing), it has not expired, and the mapping holds, byte for byte, the record the seal was checked on (from its
// magic to the end of its sealed value: everything a read without the cache opens). The answer is the private copy,
// never bytes of the mapping: the mapping is only compared. A value a read finds no longer the store's is wiped at
// once; the values of a former image are dropped by the first read after it (or the first value kept after it).
// Documentation/SecureVault.md, "The plaintext cache (opt-in)".
import SystemLayer

final class PlaintextCache {
    /// What a cached value knows of itself and of the record it was opened from, in the order a read looks at it.
    struct Facts {
        /// `KeyIndex.hash` of the name's bytes.
        let nameHash: UInt64
        let name: String
        /// The `StoreLog.indexVersion` at which the index last meant this value's record for its name (0: not yet
        /// checked): while it has not moved, a read needs no lookup in the index.
        var indexVersion: UInt64 = 0
        /// Set when the value was found no longer the store's: its bytes are wiped, and it never answers again.
        var retired = false
        let expiresAt: Int64
        let type: ValueType
        /// The plain value, then the record as it was opened, from its magic to the end of its sealed value (the
        /// private copy the seal was checked on): both in the value's own elements.
        let valueCount: Int
        let recordCount: Int
        /// The index entry the value was opened from: where its record lies and how a read cuts it (key and value
        /// lengths, bound, authenticated), in the image `uuid`, `generation`.
        let entry: Entry
        let uuid: StoreUUID
        let generation: UInt64
        let indexKey: String
    }

    /// Whether `other` means the record the value of `facts` was opened from, cut the same way (its bytes aside).
    /// (On the pointer: a method of `Facts` copied it, with its strings, at every call.)
    @inline(__always)
    static func holds(_ facts: UnsafeMutablePointer<Facts>, _ other: Entry) -> Bool {
        let entry = facts.pointee.entry
        return entry.recordOffset == other.recordOffset && entry.keyLength == other.keyLength
            && entry.valueLength == other.valueLength && entry.type == other.type
            && entry.expiresAt == other.expiresAt && entry.bound == other.bound
            && entry.authenticated == other.authenticated && entry.sealed == other.sealed
    }

    /// Whether the value of `facts` belongs to `image`.
    @inline(__always)
    static func belongs(_ facts: UnsafeMutablePointer<Facts>, to image: ImageIdentity) -> Bool {
        facts.pointee.generation == image.generation && facts.pointee.uuid == image.uuid
    }

    /// One opened value: its facts, then its plain value and record in the same allocation (the value right after
    /// the facts: the fewest cache lines per read), wiped before it is freed.
    final class Value: ManagedBuffer<Facts, UInt8> {
        static func make(
            name: String, indexKey: String, image: ImageIdentity, entry: Entry, record: UnsafeRawBufferPointer,
            value: UnsafeRawBufferPointer
        ) -> Value {
            let facts = Facts(
                nameHash: KeyIndex.hash(name), name: name, expiresAt: entry.expiresAt, type: entry.type,
                valueCount: value.count, recordCount: record.count, entry: entry, uuid: image.uuid,
                generation: image.generation, indexKey: indexKey)
            let made = unsafeDowncast(
                Value.create(minimumCapacity: max(record.count + value.count, 1)) { _ in facts }, to: Value.self)
            let bytes = made.bytes
            if !value.isEmpty { bytes.copyMemory(from: value.baseAddress!, byteCount: value.count) }
            if !record.isEmpty { (bytes + value.count).copyMemory(from: record.baseAddress!, byteCount: record.count) }
            return made
        }

        deinit {
            Sys.zero(
                UnsafeMutableRawBufferPointer(start: bytes, count: facts.pointee.valueCount + facts.pointee.recordCount)
            )
        }

        /// The facts (the header: in place for the object's life).
        @inline(__always)
        var facts: UnsafeMutablePointer<Facts> { withUnsafeMutablePointerToHeader { $0 } }
        /// The value, then the record (the elements: in place for the object's life).
        @inline(__always)
        var bytes: UnsafeMutableRawPointer { withUnsafeMutablePointerToElements { UnsafeMutableRawPointer($0) } }

        /// The plain value (valid while the value lives).
        @inline(__always)
        var value: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: bytes, count: facts.pointee.valueCount) }
        /// The record it was opened from (valid while the value lives).
        @inline(__always)
        var record: UnsafeRawBufferPointer {
            UnsafeRawBufferPointer(start: bytes + facts.pointee.valueCount, count: facts.pointee.recordCount)
        }
        /// The bytes it holds (what the limits count).
        var size: Int { facts.pointee.valueCount + facts.pointee.recordCount }
    }

    /// Cached values by key name: an open-addressed table (linear probing, at most half full) on the index's own
    /// hash of the name's bytes, compared byte for byte as the index compares keys (a `Dictionary` keyed by the
    /// name's bytes cost five times the lookup). Nothing is removed but all at once, so no slot is ever a tombstone.
    /// Each value is held by one reference the table took (`passRetained`) and releases in `removeAll`.
    @exclusivity(unchecked) private var slots: UnsafeMutablePointer<Unmanaged<Value>?>
    @exclusivity(unchecked) private var capacity: Int
    @exclusivity(unchecked) private(set) var count = 0
    /// The image every cached value belongs to: a value of another one is never asked again, so all are dropped.
    @exclusivity(unchecked) private var image = ImageIdentity(uuid: StoreUUID(low: 0, high: 0), generation: 0)
    /// Set by a read that found a value of a former image: the read drops every value once it is done with it.
    @exclusivity(unchecked) private var sawFormerImage = false
    /// Bytes held (values and their records).
    @exclusivity(unchecked) private(set) var byteCount = 0

    /// A value larger than this is not kept (a large value's open costs little beside what its reader does with it).
    static let valueLimit = 64 * 1024
    /// What the cache holds at most (`byteLimit` counts each value with its record): past either limit it starts
    /// again empty.
    static let byteLimit = 8 * 1024 * 1024
    static let countLimit = 16_384
    private static let initialCapacity = 16

    init() {
        capacity = PlaintextCache.initialCapacity
        slots = .allocate(capacity: capacity)
        slots.initialize(repeating: nil, count: capacity)
    }

    deinit {
        releaseAll()
        slots.deallocate()
    }

    // MARK: Reading

    /// The value of `name`, whatever record it came from (unretained: the table holds it).
    @inline(__always)
    private func find(_ name: String) -> Unmanaged<Value>? {
        KeyIndex.withUTF8(name) { bytes -> Unmanaged<Value>? in
            let hash = KeyIndex.hash(bytes)
            let mask = capacity - 1
            var slot = Int(truncatingIfNeeded: hash) & mask
            while let candidate = slots[slot] {
                let found = candidate._withUnsafeGuaranteedRef { value in
                    let facts = value.facts
                    return facts.pointee.nameHash == hash
                        && KeyIndex.withUTF8(facts.pointee.name) { KeyIndex.equal($0, bytes) }
                }
                if found { return candidate }
                slot = (slot + 1) & mask
            }
            return nil
        }
    }

    /// The index key of a cached name, the sealer's tag not computed again.
    @inline(__always)
    func indexKey(forName name: String) -> String? {
        find(name)?._withUnsafeGuaranteedRef { $0.facts.pointee.indexKey }
    }

    /// A read through the cache: `decode` of the cached value of `name` when it is of `type` and still the one the
    /// store means in `log` (`isCurrent`), nil otherwise (the read then goes the usual way, which also judges a
    /// value that does not decode). No lookup in the index while the index has not changed since the value was last
    /// checked against it.
    @inline(__always)
    func read<R>(
        _ name: String, type: ValueType, in log: StoreLog, _ decode: (UnsafeRawBufferPointer) -> R?
    ) -> R? {
        // A new image (a compaction, a reload): its first read drops the former image's values.
        if count != 0 && !PlaintextCache.same(image, log.image) { removeAll() }
        guard let found = find(name) else { return nil }
        let result = found._withUnsafeGuaranteedRef { value -> R? in
            guard value.facts.pointee.type == type, isCurrent(value, in: log) else { return nil }
            return decode(value.value)
        }
        // Out of the value's scope: dropping the values frees it.
        if sawFormerImage { removeAll() }
        return result
    }

    /// Whether `value` is still what the store means for its name in `log`: checked against the index when the index
    /// changed since, not expired, and its record in place (`stillInPlace`); wiped (`retire`) when it is not.
    @inline(__always)
    private func isCurrent(_ value: Value, in log: StoreLog) -> Bool {
        let facts = value.facts
        if facts.pointee.indexVersion != log.indexVersion {
            guard check(value, against: log) else { return false }
        }
        guard facts.pointee.expiresAt == 0 || facts.pointee.expiresAt > Sys.nowMilliseconds(),
            stillInPlace(value, in: log.file)
        else {
            PlaintextCache.retire(value)
            return false
        }
        return true
    }

    /// Wipes a value found no longer the store's (expired, its record gone or changed): it never answers again,
    /// and is replaced when its key's value is next kept.
    @inline(never)
    private static func retire(_ value: Value) {
        value.facts.pointee.retired = true
        value.facts.pointee.indexVersion = 0
        Sys.zero(UnsafeMutableRawBufferPointer(start: value.bytes, count: value.size))
    }

    /// Whether two images are the same.
    @inline(__always)
    private static func same(_ a: ImageIdentity, _ b: ImageIdentity) -> Bool {
        a.generation == b.generation && a.uuid == b.uuid
    }

    /// Looks the value's index key up in the index: it must mean the record the value was opened from, in this
    /// image; then the index's version is remembered. A value the index no longer means is wiped (`retire`); one of
    /// a former image has the read drop them all (`sawFormerImage`). Out of line: once per value after each change
    /// of the index.
    @inline(never)
    private func check(_ value: Value, against log: StoreLog) -> Bool {
        let facts = value.facts
        guard !facts.pointee.retired else { return false }
        guard PlaintextCache.belongs(facts, to: log.image) else {
            sawFormerImage = true
            return false
        }
        guard let entry = KeyIndex.withUTF8(facts.pointee.indexKey, { log.index.entry(utf8: $0) }),
            PlaintextCache.holds(facts, entry)
        else {
            PlaintextCache.retire(value)
            return false
        }
        facts.pointee.indexVersion = log.indexVersion
        return true
    }

    /// The cached value of `name` when it was opened from the record `entry` means in `file` (of `image`), nil
    /// otherwise: the reads that have their entry already (`RecordCodec.withSealedValue`).
    func value(forName name: String, entry: Entry, image: ImageIdentity, file: MappedFile) -> Value? {
        guard let value = find(name)?.takeUnretainedValue(), !value.facts.pointee.retired else { return nil }
        guard PlaintextCache.belongs(value.facts, to: image), PlaintextCache.holds(value.facts, entry),
            stillInPlace(value, in: file)
        else {
            PlaintextCache.retire(value)
            return nil
        }
        return value
    }

    /// Whether `file` still holds, at `value`'s place, the record it was opened from, byte for byte.
    @inline(__always)
    private func stillInPlace(_ value: Value, in file: MappedFile) -> Bool {
        // Compared (anyone reading the file sees these bytes: no secret, no constant-time compare needed), never
        // used.
        let record = value.record
        let offset = value.facts.pointee.entry.recordOffset
        let same = file.withBytes { bytes -> Bool in
            offset + record.count <= bytes.count
                && Sys.bytesEqual(bytes.baseAddress! + offset, record.baseAddress!, count: record.count)
        }
        // A read of a truncated file's mapping faulted: what it compared is not the file.
        return same && !file.hasFaulted
    }

    // MARK: Keeping

    /// Keeps `value` as its name's, dropping every value of an earlier image first.
    func insert(_ value: Value) {
        let facts = value.facts
        if !PlaintextCache.belongs(facts, to: image) {
            removeAll()
            image = ImageIdentity(uuid: facts.pointee.uuid, generation: facts.pointee.generation)
        }
        guard facts.pointee.valueCount <= PlaintextCache.valueLimit else {
            // Not kept: the value it replaces must not stay either.
            if let old = find(facts.pointee.name) { PlaintextCache.retire(old.takeUnretainedValue()) }
            return
        }
        if byteCount + value.size > PlaintextCache.byteLimit || count >= PlaintextCache.countLimit { removeAll() }
        if 2 * (count + 1) > capacity { grow() }
        let mask = capacity - 1
        let nameHash = facts.pointee.nameHash
        var slot = Int(truncatingIfNeeded: nameHash) & mask
        while let other = slots[slot] {
            let old = other.takeUnretainedValue()
            if old.facts.pointee.nameHash == nameHash, KeyIndex.sameBytes(old.facts.pointee.name, facts.pointee.name) {
                byteCount += value.size - old.size
                slots[slot] = .passRetained(value)
                other.release()
                return
            }
            slot = (slot + 1) & mask
        }
        slots[slot] = .passRetained(value)
        count += 1
        byteCount += value.size
    }

    /// Doubles the table, each value moved with its reference.
    private func grow() {
        let (old, oldCapacity) = (slots, capacity)
        capacity *= 2
        slots = .allocate(capacity: capacity)
        slots.initialize(repeating: nil, count: capacity)
        let mask = capacity - 1
        for i in 0..<oldCapacity {
            guard let moved = old[i] else { continue }
            var slot = Int(truncatingIfNeeded: moved.takeUnretainedValue().facts.pointee.nameHash) & mask
            while slots[slot] != nil { slot = (slot + 1) & mask }
            slots[slot] = moved
        }
        old.deallocate()
    }

    /// Drops every value (each is wiped as it is freed).
    func removeAll() {
        releaseAll()
        if capacity != PlaintextCache.initialCapacity {
            slots.deallocate()
            capacity = PlaintextCache.initialCapacity
            slots = .allocate(capacity: capacity)
        }
        slots.initialize(repeating: nil, count: capacity)
        count = 0
        byteCount = 0
        sawFormerImage = false
    }

    private func releaseAll() {
        for i in 0..<capacity {
            slots[i]?.release()
            slots[i] = nil
        }
    }
}
