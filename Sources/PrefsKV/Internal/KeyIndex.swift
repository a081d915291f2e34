// The in-memory index of a store: index key (a key's UTF-8, or the hex of a sealed key's tag) to Entry.
import SystemLayer

/// An open-addressing hash table from index key to ``Entry``, built for the read path and the open scan.
///
/// Why not `[String: Entry]`: a `Dictionary` hashes a `String` with SipHash-1-3 over its Unicode-normalised
/// form, most of a warm read of a short key, and an open's scan spent much of its time inserting into one
/// (Performance.md, "Costs the code's comments rest on"). Its generic metadata is also instantiated by name at a
/// fresh process's first open, which checks `String: Hashable` by scanning the runtime's conformance records. This table hashes
/// the UTF-8 bytes with a seeded multiply-mix hash (one multiply per 8 bytes) and compares keys byte for
/// byte, as the file does: two spellings of "é" (precomposed and combining) are two keys, as they are in a
/// sealed store, in SQLite's BINARY collation and in MMKV.
///
/// Layout: the keys with their entries, and their hashes, live in two dense buffers (a position is an index into
/// them, so iteration and compaction walk plain memory; a key and its entry share a cache line or two, so a read
/// that misses the cache misses once for both); `slots` is a power-of-two table of 64-bit words, linear probing,
/// at most 3/4 full, each word the top 32 bits of its key's hash (compared before the key) and its position + 1,
/// 0 for an empty slot. A removal shifts the following run back (no tombstones) and moves the last position into
/// the hole.
///
/// The buffers are allocated directly and owned by one final class (copied on write), not Swift arrays: an
/// array of `Item` needs its storage class's generic metadata, which a fresh process instantiates by name at its
/// first open (tens of microseconds of runtime work, for the first store an app opens).
///
/// The seed is random per process: a store file cannot be crafted to make every key collide.
struct KeyIndex: Sequence {
    /// A key and its entry.
    struct Item {
        var key: String
        var entry: Entry
    }

    /// nil until the index first holds a key or is given a capacity. (No property observer to refresh
    /// `lookup`: `isKnownUniquelyReferenced(&storage)` would then copy the reference out and back, with a retain,
    /// a release and the observer, on every write.)
    private var storage: Storage?
    /// The storage's slot table and items as plain pointers, refreshed after every change (`changed()`): a read
    /// uses only these, so it never retains the storage (a retain and a release were a sixth of a warm read).
    private var lookup = Lookup(nil)

    /// What a lookup reads: the slot table, its mask (-1 when there are no slots) and the items.
    private struct Lookup {
        var slots: UnsafeMutablePointer<UInt64>?
        var mask: Int
        var items: UnsafeMutablePointer<Item>?

        init(_ storage: Storage?) {
            slots = storage?.slots
            mask = (storage?.slotCount ?? 0) - 1
            items = storage?.items
        }
    }

    private static let tagMask: UInt64 = 0xFFFF_FFFF_0000_0000
    private static let positionMask: UInt64 = 0x0000_0000_FFFF_FFFF

    /// An index with slots for `minimumCapacity` keys, and room in its buffers for `reservedCapacity` keys
    /// (reserved address space is not touched, so it costs no memory until used).
    init(minimumCapacity: Int = 0, reservedCapacity: Int = 0) {
        let reserved = Swift.max(minimumCapacity, reservedCapacity)
        if reserved > 0 {
            storage = Storage(
                capacity: reserved, slotCount: minimumCapacity > 0 ? KeyIndex.slotCount(for: minimumCapacity) : 0)
            lookup = Lookup(storage)
        }
    }

    var count: Int { storage?.count ?? 0 }
    var isEmpty: Bool { count == 0 }
    /// Index keys, by position.
    var keys: Column<String> { Column(storage: storage) { $0.key } }
    /// Entries, by position.
    var values: Column<Entry> { Column(storage: storage) { $0.entry } }

    /// The storage, unshared and allocated, for a change (`lookup` follows a new storage). A change that
    /// reallocates a buffer (an insert that grows) refreshes `lookup` itself (`changed`).
    @inline(__always)
    private mutating func unique() -> Storage {
        if storage == nil {
            storage = Storage(capacity: 0, slotCount: 0)
            changed()
        } else if !isKnownUniquelyReferenced(&storage) {
            storage = storage!.copy()
            changed()
        }
        return storage.unsafelyUnwrapped
    }

    /// Refreshes `lookup` after the storage's buffers may have been reallocated.
    @inline(__always)
    private mutating func changed() {
        lookup = Lookup(storage)
    }

    // MARK: Lookup

    /// Finds `key` through the lookup pointers: its slot and position, or nil.
    @inline(__always)
    private func find(_ key: String) -> (slot: Int, position: Int)? {
        guard lookup.mask >= 0 else { return nil }
        return KeyIndex.find(
            key, hash: KeyIndex.hash(key), slots: lookup.slots.unsafelyUnwrapped, mask: lookup.mask,
            items: lookup.items.unsafelyUnwrapped)
    }

    /// Finds `key` in a slot table: its slot and position, or nil. (No closure here: one would retain and
    /// release.)
    @inline(__always)
    fileprivate static func find(
        _ key: String, hash: UInt64, slots: UnsafeMutablePointer<UInt64>, mask: Int,
        items: UnsafeMutablePointer<Item>
    ) -> (slot: Int, position: Int)? {
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

    /// The entry under `key`, or nil. Setting nil removes it.
    subscript(key: String) -> Entry? {
        @inline(__always) get {
            guard let position = find(key)?.position else { return nil }
            return lookup.items.unsafelyUnwrapped[position].entry
        }
        set {
            if let newValue {
                updateValue(newValue, forKey: key)
            } else {
                removeValue(forKey: key)
            }
        }
    }

    /// The entry whose key's UTF-8 bytes are `key`, or nil: a lookup with no `String` made (a sealed store's hex
    /// index key, written on the stack for a read).
    @inline(__always)
    func entry(utf8 key: UnsafeRawBufferPointer) -> Entry? {
        guard lookup.mask >= 0 else { return nil }
        let hash = KeyIndex.hash(key)
        let slots = lookup.slots.unsafelyUnwrapped
        let items = lookup.items.unsafelyUnwrapped
        let tag = hash & KeyIndex.tagMask
        var slot = Int(truncatingIfNeeded: hash) & lookup.mask
        while true {
            let word = slots[slot]
            if word == 0 { return nil }
            if word & KeyIndex.tagMask == tag {
                let position = Int(truncatingIfNeeded: word & KeyIndex.positionMask) - 1
                if KeyIndex.withUTF8(items[position].key, { KeyIndex.equal($0, key) }) { return items[position].entry }
            }
            slot = (slot + 1) & lookup.mask
        }
    }

    /// The position of `key`, or nil.
    @inline(__always)
    func position(of key: String) -> Int? {
        find(key)?.position
    }

    /// The entry at `position` (0..<count).
    subscript(position position: Int) -> Entry {
        get {
            precondition(position >= 0 && position < count, "index position out of range")
            return storage.unsafelyUnwrapped.items[position].entry
        }
        set {
            precondition(position >= 0 && position < count, "index position out of range")
            unique().items[position].entry = newValue
        }
    }

    // MARK: Changes

    /// Sets `entry` under `key`; returns the entry it replaced.
    @discardableResult
    mutating func updateValue(_ entry: Entry, forKey key: String) -> Entry? {
        let hash = KeyIndex.hash(key)
        let storage = unique()
        if let found = storage.find(key, hash: hash) {
            let old = storage.items[found.position].entry
            storage.items[found.position].entry = entry
            return old
        }
        precondition(storage.count < Int(UInt32.max) - 1, "a store holds fewer than 2^32 keys")
        if (storage.count + 1) * 4 > storage.slotCount * 3 {
            storage.growSlots(to: KeyIndex.slotCount(for: storage.count + 1))
        }
        storage.append(Item(key: key, entry: entry), hash: hash)
        storage.insertSlot(hash: hash, position: storage.count - 1)
        changed()
        return nil
    }

    /// Removes `key`; returns its entry.
    @discardableResult
    mutating func removeValue(forKey key: String) -> Entry? {
        guard let found = find(key) else { return nil }
        let storage = unique()
        let old = storage.items[found.position].entry
        storage.removeSlot(at: found.slot)
        let last = storage.count - 1
        if found.position != last {
            // Move the last position into the hole and point its slot there.
            let lastSlot = storage.slot(of: last)
            storage.items[found.position] = (storage.items + last).move()
            storage.hashes[found.position] = storage.hashes[last]
            storage.slots[lastSlot] = (storage.slots[lastSlot] & KeyIndex.tagMask) | UInt64(found.position + 1)
        } else {
            (storage.items + last).deinitialize(count: 1)
        }
        storage.count = last
        return old
    }

    /// Removes every key.
    mutating func removeAll(keepingCapacity: Bool = false) {
        guard storage != nil else { return }
        guard keepingCapacity else {
            storage = nil
            changed()
            return
        }
        let storage = unique()
        storage.items.deinitialize(count: storage.count)
        storage.count = 0
        storage.slots.update(repeating: 0, count: storage.slotCount)
    }

    /// The number of slots for `count` keys: a power of two at least 4/3 of it (and at least 8).
    fileprivate static func slotCount(for count: Int) -> Int {
        var slots = 8
        while slots * 3 < count * 4 { slots *= 2 }
        return slots
    }

    /// The buffers of an index: items and hashes by position (`capacity` of them allocated, `count`
    /// initialized), and the slot table.
    fileprivate final class Storage {
        var items: UnsafeMutablePointer<Item>
        var hashes: UnsafeMutablePointer<UInt64>
        var capacity: Int
        var count = 0
        var slots: UnsafeMutablePointer<UInt64>
        var slotCount: Int

        init(capacity: Int, slotCount: Int) {
            self.capacity = capacity
            items = Sys.allocateBuffer(bytes: capacity * MemoryLayout<Item>.stride)
                .bindMemory(to: Item.self, capacity: capacity)
            hashes = Sys.allocateBuffer(bytes: capacity * MemoryLayout<UInt64>.stride)
                .bindMemory(to: UInt64.self, capacity: capacity)
            self.slotCount = slotCount
            slots = Storage.zeroedSlots(slotCount)
        }

        deinit {
            items.deinitialize(count: count)
            Sys.freeBuffer(items, bytes: capacity * MemoryLayout<Item>.stride)
            Sys.freeBuffer(hashes, bytes: capacity * MemoryLayout<UInt64>.stride)
            Sys.free(slots)
        }

        /// A zeroed slot table from `calloc`: a large one comes straight from the kernel, already zero, so its
        /// pages cost nothing until a key lands in them.
        static func zeroedSlots(_ count: Int) -> UnsafeMutablePointer<UInt64> {
            guard let slots = Sys.allocateZeroed(Swift.max(count, 1), of: UInt64.self) else {
                fatalError("out of memory for a key index of \(count) slots")
            }
            return slots
        }

        func copy() -> Storage {
            let copy = Storage(capacity: capacity, slotCount: slotCount)
            copy.items.initialize(from: items, count: count)
            copy.hashes.initialize(from: hashes, count: count)
            copy.slots.update(from: slots, count: slotCount)
            copy.count = count
            return copy
        }

        func append(_ item: Item, hash: UInt64) {
            if count == capacity {
                // Moved bit for bit (an item, a `String` and plain fields, is bitwise movable); a large buffer's
                // pages are moved, not copied (`Sys.resizeBuffer`).
                let grown = Swift.max(8, capacity * 2)
                items = Sys.resizeBuffer(
                    items, from: capacity * MemoryLayout<Item>.stride, to: grown * MemoryLayout<Item>.stride
                ).bindMemory(to: Item.self, capacity: grown)
                hashes = Sys.resizeBuffer(
                    hashes, from: capacity * MemoryLayout<UInt64>.stride, to: grown * MemoryLayout<UInt64>.stride
                ).bindMemory(to: UInt64.self, capacity: grown)
                capacity = grown
            }
            (items + count).initialize(to: item)
            hashes[count] = hash
            count += 1
        }

        /// Finds `key`: its slot and position, or nil.
        @inline(__always)
        func find(_ key: String, hash: UInt64) -> (slot: Int, position: Int)? {
            guard slotCount > 0 else { return nil }
            return KeyIndex.find(key, hash: hash, slots: slots, mask: slotCount - 1, items: items)
        }

        func growSlots(to newCount: Int) {
            Sys.free(slots)
            slots = Storage.zeroedSlots(newCount)
            slotCount = newCount
            for position in 0..<count { insertSlot(hash: hashes[position], position: position) }
        }

        /// Puts `position` in the first empty slot of `hash`'s run (there is one: the table is at most 3/4 full).
        func insertSlot(hash: UInt64, position: Int) {
            let mask = slotCount - 1
            var slot = Int(truncatingIfNeeded: hash) & mask
            while slots[slot] != 0 { slot = (slot + 1) & mask }
            slots[slot] = (hash & KeyIndex.tagMask) | UInt64(position + 1)
        }

        /// The slot holding `position`.
        func slot(of position: Int) -> Int {
            let mask = slotCount - 1
            var slot = Int(truncatingIfNeeded: hashes[position]) & mask
            while slots[slot] & KeyIndex.positionMask != UInt64(position + 1) { slot = (slot + 1) & mask }
            return slot
        }

        /// Empties `slot`, shifting back the words after it that would otherwise be cut off from their home slot.
        func removeSlot(at slot: Int) {
            let mask = slotCount - 1
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
    }

    // MARK: Hashing

    /// The bytes of `key`, without copying when it is stored contiguously (always, for a native string).
    @inline(__always)
    static func withUTF8<R>(_ key: String, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        if let result = try key.utf8.withContiguousStorageIfAvailable({ try body(UnsafeRawBufferPointer($0)) }) {
            return result
        }
        var copy = key
        return try copy.withUTF8 { try body(UnsafeRawBufferPointer($0)) }
    }

    /// Whether `a`'s UTF-8 bytes sort before `b`'s (code point order).
    static func bytesPrecede(_ a: String, _ b: String) -> Bool {
        withUTF8(a) { a in
            withUTF8(b) { b in
                let common = Swift.min(a.count, b.count)
                let order = common == 0 ? 0 : Sys.compareBytes(a.baseAddress!, b.baseAddress!, count: common)
                return order < 0 || (order == 0 && a.count < b.count)
            }
        }
    }

    /// Keys in UTF-8 byte order (code point order), each byte sequence once: keys are compared byte for byte,
    /// so two spellings of one text are two keys (a `Set<String>` would merge them).
    static func sortedUnique(_ keys: [String]) -> [String] {
        var out: [String] = []
        for key in keys.sorted(by: bytesPrecede) where !(out.last.map { sameBytes($0, key) } ?? false) {
            out.append(key)
        }
        return out
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
    func makeIterator() -> Iterator { Iterator(storage: storage) }

    struct Iterator: IteratorProtocol {
        fileprivate let storage: Storage?
        var position = 0

        mutating func next() -> (key: String, value: Entry)? {
            guard let storage, position < storage.count else { return nil }
            defer { position += 1 }
            return (storage.items[position].key, storage.items[position].entry)
        }
    }

    /// One field of the items (`keys`, `values`), by position.
    struct Column<Element>: RandomAccessCollection {
        fileprivate let storage: Storage?
        fileprivate let field: (Item) -> Element
        var startIndex: Int { 0 }
        var endIndex: Int { storage?.count ?? 0 }
        subscript(position: Int) -> Element {
            precondition(position >= 0 && position < endIndex, "index position out of range")
            return field(storage.unsafelyUnwrapped.items[position])
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
