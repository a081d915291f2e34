import Foundation
import TestKit
import SystemLayer
import Testing

@testable import PrefsKV

/// The store's hash table against a model (a dictionary keyed by the keys' bytes), through random inserts,
/// overwrites, removals and clears, checked completely after every step.
@Suite struct KeyIndexTests {
    /// An entry that records which step wrote it.
    static func entry(_ step: Int) -> Entry {
        Entry(
            RecordHeader(
                offset: step * 8, kind: .set, valueType: ValueType.int64.rawValue, flags: 0, keyLength: 1,
                valueLength: 8, seq: 0, expiresAt: 0))
    }

    static func check(_ index: KeyIndex, against model: [[UInt8]: Int], absent: [String]) {
        #expect(index.count == model.count)
        for (bytes, step) in model {
            let key = String(decoding: bytes, as: UTF8.self)
            #expect(index[key]?.recordOffset == step * 8, "key \(key)")
        }
        for key in absent where model[Array(key.utf8)] == nil { #expect(index[key] == nil, "key \(key)") }
        var seen = 0
        for (key, entry) in index {
            #expect(model[Array(key.utf8)] == entry.recordOffset / 8)
            seen += 1
        }
        #expect(seen == model.count)
    }

    @Test(arguments: [0, 1, 2, 3])
    func matchesAModelThroughRandomChanges(seed: UInt64) {
        var random = SplitMix(state: seed)
        // Keys of every length class the hash treats apart (0, 1-3, 4-7, 8-16, longer), few enough that
        // operations hit existing keys often.
        let keys = (0..<600).map { i -> String in
            switch i % 5 {
            case 0: return i == 0 ? "" : String(repeating: "k", count: i % 4)
            case 1: return "k\(i)"
            case 2: return "key.\(i)"
            case 3: return "a.longer.key.\(i)"
            default: return String(repeating: "long key \(i) ", count: 1 + i % 7)
            }
        }
        var index = KeyIndex(minimumCapacity: seed == 0 ? 0 : 100)
        var model: [[UInt8]: Int] = [:]
        for step in 1...6_000 {
            let key = keys[Int(random.next() % UInt64(keys.count))]
            let bytes = Array(key.utf8)
            switch random.next() % 10 {
            case 0..<6:
                let old = index.updateValue(Self.entry(step), forKey: key)
                #expect(old?.recordOffset == model[bytes].map { $0 * 8 })
                model[bytes] = step
            case 6..<9:
                let old = index.removeValue(forKey: key)
                #expect(old?.recordOffset == model[bytes].map { $0 * 8 })
                model[bytes] = nil
            default:
                if random.next() % 20 == 0 {
                    index.removeAll(keepingCapacity: random.next() % 2 == 0)
                    model.removeAll()
                }
            }
            if step % 500 == 0 { Self.check(index, against: model, absent: keys) }
        }
        Self.check(index, against: model, absent: keys)
    }

    /// An entry stays 32 bytes (two to a cache line) with its flags packed into one byte, the bound flag of
    /// format 6 among them, and each flag reads back what was set, independently of the others.
    @Test func anEntryIsThirtyTwoBytesWithIndependentFlags() {
        #expect(MemoryLayout<Entry>.size == 32 && MemoryLayout<Entry>.stride == 32)
        var entry = Entry(
            RecordHeader(
                offset: 4096, kind: .set, valueType: ValueType.int64.rawValue,
                flags: RecordFlags.commit | RecordFlags.sealed | RecordFlags.bound, keyLength: 16, valueLength: 61,
                seq: 1, expiresAt: 0))
        #expect(entry.bound && !entry.authenticated && entry.plainCRC == nil)
        entry.plainCRC = 7
        entry.authenticated = true
        entry.bound = false
        #expect(!entry.bound && entry.authenticated && entry.plainCRC == 7)
        entry.plainCRC = nil
        #expect(!entry.bound && entry.authenticated && entry.plainCRC == nil)
    }

    @Test func growsFromEmptyAndPositionsStayDense() {
        var index = KeyIndex()
        #expect(index["missing"] == nil)
        #expect(index.removeValue(forKey: "missing") == nil)
        for i in 0..<10_000 { index["key.\(i)"] = Self.entry(i) }
        #expect(index.count == 10_000)
        for i in stride(from: 0, to: 10_000, by: 2) { index["key.\(i)"] = nil }
        #expect(index.count == 5_000)
        #expect(index.keys.count == 5_000 && index.values.count == 5_000)
        for i in 0..<10_000 { #expect((index["key.\(i)"] != nil) == (i % 2 == 1)) }
        for position in 0..<index.count {
            #expect(index.position(of: index.keys[position]) == position)
        }
    }

    /// An index grown far past the size from which its buffers are pages of their own (`Sys.pagedBufferBytes`:
    /// moved by `mremap` when they grow, not copied) keeps every key, heap-allocated strings among them, and a copy
    /// made on the way stays as it was. (Enough keys that both buffers, the items and the 8-byte hashes, grow from
    /// `malloc` to pages and then from pages to larger pages.)
    @Test func anIndexGrownPastItsPagedBuffersKeepsEveryKey() {
        let count = 3 * Sys.pagedBufferBytes / MemoryLayout<UInt64>.stride / 2
        #expect(count > 2 * Sys.pagedBufferBytes / MemoryLayout<KeyIndex.Item>.stride)
        let key = { (i: Int) in i % 3 == 0 ? "a key long enough to live on the heap, number \(i)" : "key.\(i)" }
        var index = KeyIndex()
        var copy = KeyIndex()
        for i in 0..<count {
            index[key(i)] = Self.entry(i)
            if i == count / 3 { copy = index }
        }
        #expect(index.count == count && copy.count == count / 3 + 1)
        for i in 0..<count {
            #expect(index[key(i)]?.recordOffset == i * 8, "key \(i)")
            #expect(copy[key(i)]?.recordOffset == (i <= count / 3 ? i * 8 : nil), "key \(i) of the copy")
        }
        for position in 0..<index.count {
            #expect(index.keys[position] == key(index.values[position].recordOffset / 8))
        }
        for i in stride(from: 0, to: count, by: 2) { index[key(i)] = nil }
        #expect(index.count == count / 2)
        for i in 0..<count { #expect((index[key(i)] != nil) == (i % 2 == 1)) }
    }

    /// The index owns its buffers and copies them on write: a copy (a snapshot kept by a reload, an iteration
    /// in progress) never sees the changes made through the other.
    @Test func copiesAreIndependent() {
        var original = KeyIndex()
        for i in 0..<100 { original["key.\(i)"] = Self.entry(i) }
        var copy = original
        let iterator = original.makeIterator()
        copy["key.0"] = Self.entry(1_000)  // an overwrite: the first change makes the copy its own buffers
        #expect(copy["key.0"]?.recordOffset == 8_000 && original["key.0"]?.recordOffset == 0)
        copy["key.1"] = nil
        #expect(copy["key.1"] == nil && copy.position(of: "key.99") != nil && original["key.1"] != nil)
        copy["new"] = Self.entry(2_000)
        #expect(original.count == 100 && copy.count == 100)
        #expect(original["key.0"]?.recordOffset == 0 && copy["key.0"]?.recordOffset == 8_000)
        #expect(original["key.1"] != nil && copy["key.1"] == nil)
        #expect(original["new"] == nil && copy["new"]?.recordOffset == 16_000)
        original.removeAll(keepingCapacity: true)
        #expect(original.isEmpty && copy.count == 100)
        var remaining = iterator
        var seen = 0
        while let (key, entry) = remaining.next() {
            #expect(key == "key.\(entry.recordOffset / 8)")
            seen += 1
        }
        #expect(seen == 100)
        var cleared = copy
        cleared.removeAll()
        #expect(cleared.isEmpty && cleared["new"] == nil && copy["new"] != nil)
        cleared["again"] = Self.entry(3)
        #expect(cleared.count == 1 && copy["again"] == nil)
    }

    @Test func keysAreComparedByTheirBytes() {
        let precomposed = "caf\u{E9}"
        let combining = "cafe\u{301}"
        #expect(precomposed == combining)  // Swift's String equality: canonical equivalence
        var index = KeyIndex()
        index[precomposed] = Self.entry(1)
        index[combining] = Self.entry(2)
        #expect(index.count == 2)
        #expect(index[precomposed]?.recordOffset == 8)
        #expect(index[combining]?.recordOffset == 16)
        #expect(KeyIndex.sortedUnique([combining, precomposed, combining]).count == 2)
        // Byte order is code point order: "e" + U+0301 (65 CC 81) before U+00E9 (C3 A9), "b" before "ba".
        #expect(
            KeyIndex.sortedUnique(["ba", precomposed, "b", combining, "a"]).map { Array($0.utf8) }
                == ["a", "b", "ba", combining, precomposed].map { Array($0.utf8) })
    }
}
