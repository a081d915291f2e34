// The in-memory index of a store: index key (a key's UTF-8, or the hex of a sealed key's tag) to Entry.
import Glibc

/// An open-addressing hash table from index key to ``Entry``, built for the read path and the open scan.
///
/// Why not `[String: Entry]`: a `Dictionary` hashes a `String` with SipHash-1-3 over its Unicode-normalised
/// form, about 270 of the 500 instructions of a read of an 8-character key, and a scan of 10,000 records spent
/// 40% of its time inserting into one. Its generic metadata is also instantiated by name at a fresh process's
/// first open, which checks `String: Hashable` by scanning the runtime's conformance records. This table hashes the UTF-8 bytes with a seeded multiply-mix hash (a few instructions per 8
/// bytes) and compares keys byte for byte, as the file does: two spellings of "é" (precomposed and combining)
/// are two keys, as they are in a sealed store, in SQLite's BINARY collation and in MMKV.
///
/// Layout: the keys with their entries, and their hashes, live in two dense arrays (a position is an index into
/// them, so iteration and compaction walk plain arrays; a key and its entry share a cache line or two, so a read
/// that misses the cache misses once for both); `slots` is a power-of-two array of 64-bit words,
/// linear probing, at most 3/4 full, each word the top 32 bits of its key's hash (compared before the key) and
/// its position + 1, 0 for an empty slot. A removal shifts the following run back (no tombstones) and moves the
/// last position into the hole.
///
/// The seed is random per process: a store file cannot be crafted to make every key collide.
struct KeyIndex: Sequence {
    /// A key and its entry.
    struct Item {
        var key: String
        var entry: Entry
    }

    /// Keys and entries, by position.
    private(set) var items: [Item] = []
    /// Each position's full hash (for growing and for finding a moved position's slot).
    private var hashes: [UInt64] = []
    private var slots: [UInt64] = []

    private static let tagMask: UInt64 = 0xFFFF_FFFF_0000_0000
    private static let positionMask: UInt64 = 0x0000_0000_FFFF_FFFF

    /// An index with slots for `minimumCapacity` keys, and room in its arrays for `reservedCapacity` keys
    /// (reserved address space is not touched, so it costs no memory until used; a slot table is zeroed).
    init(minimumCapacity: Int = 0, reservedCapacity: Int = 0) {
        let reserved = Swift.max(minimumCapacity, reservedCapacity)
        if reserved > 0 {
            items.reserveCapacity(reserved)
            hashes.reserveCapacity(reserved)
        }
        if minimumCapacity > 0 { slots = [UInt64](repeating: 0, count: KeyIndex.slotCount(for: minimumCapacity)) }
    }

    var count: Int { items.count }
    var isEmpty: Bool { items.isEmpty }
    /// Index keys, by position.
    var keys: LazyMapSequence<[Item], String> { items.lazy.map(\.key) }
    /// Entries, by position.
    var values: LazyMapSequence<[Item], Entry> { items.lazy.map(\.entry) }

    // MARK: Lookup

    /// The entry under `key`, or nil. Setting nil removes it.
    subscript(key: String) -> Entry? {
        @inline(__always) get {
            guard let position = position(of: key) else { return nil }
            return items[position].entry
        }
        set {
            if let newValue {
                updateValue(newValue, forKey: key)
            } else {
                removeValue(forKey: key)
            }
        }
    }

    /// The position of `key`, or nil.
    @inline(__always)
    func position(of key: String) -> Int? {
        guard !slots.isEmpty else { return nil }
        return find(key, hash: KeyIndex.hash(key))?.position
    }

    /// The entry at `position` (0..<count).
    subscript(position position: Int) -> Entry {
        get { items[position].entry }
        set { items[position].entry = newValue }
    }

    /// Finds `key`: its slot and position, or nil. (No closure over `self` here: one would copy the index's
    /// array references in and out, a retain and release each, on every call.)
    @inline(__always)
    private func find(_ key: String, hash: UInt64) -> (slot: Int, position: Int)? {
        let mask = slots.count - 1
        let tag = hash & KeyIndex.tagMask
        var slot = Int(truncatingIfNeeded: hash) & mask
        while true {
            let word = slots[slot]
            if word == 0 { return nil }
            if word & KeyIndex.tagMask == tag {
                let position = Int(truncatingIfNeeded: word & KeyIndex.positionMask) - 1
                if KeyIndex.sameBytes(items[position].key, key) { return (slot, position) }
            }
            slot = (slot + 1) & mask
        }
    }

    // MARK: Changes

    /// Sets `entry` under `key`; returns the entry it replaced.
    @discardableResult
    mutating func updateValue(_ entry: Entry, forKey key: String) -> Entry? {
        let hash = KeyIndex.hash(key)
        if !slots.isEmpty, let found = find(key, hash: hash) {
            let old = items[found.position].entry
            items[found.position].entry = entry
            return old
        }
        precondition(items.count < Int(UInt32.max) - 1, "a store holds fewer than 2^32 keys")
        if (items.count + 1) * 4 > slots.count * 3 { grow(to: KeyIndex.slotCount(for: items.count + 1)) }
        let position = items.count
        items.append(Item(key: key, entry: entry))
        hashes.append(hash)
        insertSlot(hash: hash, position: position)
        return nil
    }

    /// Removes `key`; returns its entry.
    @discardableResult
    mutating func removeValue(forKey key: String) -> Entry? {
        guard !slots.isEmpty, let found = find(key, hash: KeyIndex.hash(key)) else { return nil }
        let old = items[found.position].entry
        removeSlot(at: found.slot)
        let last = items.count - 1
        if found.position != last {
            // Move the last position into the hole and point its slot there.
            let lastSlot = slot(of: last)
            items.swapAt(found.position, last)
            hashes.swapAt(found.position, last)
            slots[lastSlot] = (slots[lastSlot] & KeyIndex.tagMask) | UInt64(found.position + 1)
        }
        items.removeLast()
        hashes.removeLast()
        return old
    }

    /// Removes every key.
    mutating func removeAll(keepingCapacity: Bool = false) {
        items.removeAll(keepingCapacity: keepingCapacity)
        hashes.removeAll(keepingCapacity: keepingCapacity)
        if keepingCapacity {
            for i in slots.indices { slots[i] = 0 }
        } else {
            slots = []
        }
    }

    // MARK: Slots

    /// The number of slots for `count` keys: a power of two at least 4/3 of it (and at least 8).
    private static func slotCount(for count: Int) -> Int {
        var slots = 8
        while slots * 3 < count * 4 { slots *= 2 }
        return slots
    }

    private mutating func grow(to slotCount: Int) {
        slots = [UInt64](repeating: 0, count: slotCount)
        for position in hashes.indices { insertSlot(hash: hashes[position], position: position) }
    }

    /// Puts `position` in the first empty slot of `hash`'s run (there is one: the table is at most 3/4 full).
    private mutating func insertSlot(hash: UInt64, position: Int) {
        let mask = slots.count - 1
        var slot = Int(truncatingIfNeeded: hash) & mask
        while slots[slot] != 0 { slot = (slot + 1) & mask }
        slots[slot] = (hash & KeyIndex.tagMask) | UInt64(position + 1)
    }

    /// The slot holding `position`.
    private func slot(of position: Int) -> Int {
        let mask = slots.count - 1
        var slot = Int(truncatingIfNeeded: hashes[position]) & mask
        while slots[slot] & KeyIndex.positionMask != UInt64(position + 1) { slot = (slot + 1) & mask }
        return slot
    }

    /// Empties `slot`, shifting back the words after it that would otherwise be cut off from their home slot.
    private mutating func removeSlot(at slot: Int) {
        let mask = slots.count - 1
        var hole = slot
        var next = (slot + 1) & mask
        while slots[next] != 0 {
            let position = Int(truncatingIfNeeded: slots[next] & KeyIndex.positionMask) - 1
            let home = Int(truncatingIfNeeded: hashes[position]) & mask
            // The word at `next` may fill the hole when its home is not in (hole, next], cyclically.
            let homeAfterHole = (home - hole) & mask
            let nextAfterHole = (next - hole) & mask
            if homeAfterHole == 0 || homeAfterHole > nextAfterHole {
                slots[hole] = slots[next]
                hole = next
            }
            next = (next + 1) & mask
        }
        slots[hole] = 0
    }

    // MARK: Hashing

    /// The bytes of `key`, without copying when it is stored contiguously (always, for a native string).
    @inline(__always)
    static func withUTF8<R>(_ key: String, _ body: (UnsafeRawBufferPointer) -> R) -> R {
        if let result = key.utf8.withContiguousStorageIfAvailable({ body(UnsafeRawBufferPointer($0)) }) {
            return result
        }
        var copy = key
        return copy.withUTF8 { body(UnsafeRawBufferPointer($0)) }
    }

    /// Whether `a`'s UTF-8 bytes sort before `b`'s (code point order).
    static func bytesPrecede(_ a: String, _ b: String) -> Bool {
        withUTF8(a) { a in
            withUTF8(b) { b in
                let common = Swift.min(a.count, b.count)
                let order = common == 0 ? 0 : memcmp(a.baseAddress!, b.baseAddress!, common)
                return order < 0 || (order == 0 && a.count < b.count)
            }
        }
    }

    /// Whether two keys have the same UTF-8 bytes.
    static func sameBytes(_ a: String, _ b: String) -> Bool {
        withUTF8(a) { a in withUTF8(b) { b in equal(a, b) } }
    }

    @inline(__always)
    static func equal(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
        a.count == b.count && (a.count == 0 || Sys.bytesEqual(a.baseAddress!, b.baseAddress!, count: a.count))
    }

    /// This process's hash seed.
    private static let seed: UInt64 = UInt64.random(in: 1...UInt64.max)
    private static let k0: UInt64 = 0x9E37_79B9_7F4A_7C15
    private static let k1: UInt64 = 0xD6E8_FEB8_6659_FD93

    /// Folds a 128-bit product to 64 bits: every input bit reaches every output bit.
    @inline(__always)
    private static func mix(_ a: UInt64, _ b: UInt64) -> UInt64 {
        let product = a.multipliedFullWidth(by: b)
        return product.high ^ product.low
    }

    /// The hash of a key's UTF-8 bytes.
    @inline(__always)
    static func hash(_ key: String) -> UInt64 { withUTF8(key) { hash($0) } }

    /// A seeded hash of `bytes`: two 64-bit words per 16 bytes through `mix`, the length folded in.
    @inline(__always)
    static func hash(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
        let n = bytes.count
        var a: UInt64 = 0
        var b: UInt64 = 0
        var state = seed
        if n <= 16 {
            if n >= 8 {
                a = bytes.loadUnaligned(as: UInt64.self)
                b = bytes.loadUnaligned(fromByteOffset: n - 8, as: UInt64.self)
            } else if n >= 4 {
                a = UInt64(bytes.loadUnaligned(as: UInt32.self))
                b = UInt64(bytes.loadUnaligned(fromByteOffset: n - 4, as: UInt32.self))
            } else if n > 0 {
                a = UInt64(bytes[0]) << 16 | UInt64(bytes[n >> 1]) << 8 | UInt64(bytes[n - 1])
            }
        } else {
            var offset = 0
            while n - offset > 16 {
                state = mix(
                    bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self) ^ k0 ^ state,
                    bytes.loadUnaligned(fromByteOffset: offset + 8, as: UInt64.self) ^ k1 ^ state)
                offset += 16
            }
            a = bytes.loadUnaligned(fromByteOffset: n - 16, as: UInt64.self)
            b = bytes.loadUnaligned(fromByteOffset: n - 8, as: UInt64.self)
        }
        return mix(k0 ^ UInt64(n) ^ seed, mix(a ^ k0 ^ state, b ^ k1 ^ seed))
    }

    // MARK: Sequence

    /// Iterates (key, entry) pairs in position order (insertion order, reshuffled by removals).
    func makeIterator() -> Iterator { Iterator(items: items) }

    struct Iterator: IteratorProtocol {
        let items: [Item]
        var position = 0

        mutating func next() -> (key: String, value: Entry)? {
            guard position < items.count else { return nil }
            defer { position += 1 }
            return (items[position].key, items[position].entry)
        }
    }
}

/// A string hashed and compared by its UTF-8 bytes, as keys are in the file (a `String` key of a `Dictionary`
/// is compared by canonical equivalence, which would make two spellings of "é" one key).
struct ByteKey: Hashable {
    let string: String

    init(_ string: String) { self.string = string }

    static func == (a: ByteKey, b: ByteKey) -> Bool { KeyIndex.sameBytes(a.string, b.string) }

    func hash(into hasher: inout Hasher) {
        KeyIndex.withUTF8(string) { hasher.combine(bytes: $0) }
    }
}
