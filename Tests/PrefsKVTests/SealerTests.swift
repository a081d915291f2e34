import Foundation
import TestSealer
import Testing

@testable import PrefsKV

func openSealed(_ dir: TempDir, key: UInt64 = 1) throws -> PrefsStore {
    try openStore(dir) { $0.sealer = TestSealer(key: key) }
}

/// Whether `needle` occurs in `haystack`.
func contains(_ haystack: [UInt8], _ needle: String) -> Bool {
    let n = Array(needle.utf8)
    guard n.count <= haystack.count else { return false }
    return (0...(haystack.count - n.count)).contains { haystack[$0..<$0 + n.count].elementsEqual(n) }
}

@Suite struct SealerTests {
    /// A sealer whose tags are cheap (PrefsKV computes them at every access, the index key on the stack for reads)
    /// and one whose tags PrefsKV remembers write the same store: each reads, overwrites, deletes and lists what the
    /// other wrote, through a persisted index too (the table is probed with the same index keys).
    @Test(arguments: [true, false])
    func cheapAndRememberedTagsMakeTheSameStore(writerCheap: Bool) throws {
        let dir = try TempDir("sealed-tags")
        let keys = (0..<300).map { "key-\($0)" }  // enough for a persisted index (256 keys)
        func open(cheap: Bool) throws -> PrefsStore {
            try openStore(dir) { $0.sealer = TestSealer(key: 4, tagsAreCheap: cheap) }
        }
        do {
            let store = try open(cheap: writerCheap)
            for (i, key) in keys.enumerated() { try store.set(Int64(i), forKey: key) }
            try store.set("s", forKey: "gone")
            try store.removeValue(forKey: "gone")
        }
        for cheap in [!writerCheap, writerCheap] {
            let store = try open(cheap: cheap)
            #expect(store.engine.withLock { $0.log.table != nil }, "the open reads a persisted index")
            for (i, key) in keys.enumerated() where i % 37 == 0 { #expect(try store.int64(forKey: key) == Int64(i)) }
            #expect(try store.int64(forKey: "gone") == nil)
            #expect(try store.contains("key-5") && !store.contains("absent"))
            try store.set(Int64(-1), forKey: "key-1")
            #expect(try store.int64(forKey: "key-1") == -1)
            try store.set(Int64(1), forKey: "key-1")
            #expect(try store.allKeys == keys.sorted())
        }
    }

    @Test func aSealedStoreKeepsKeysAndValuesOffTheDisk() throws {
        let dir = try TempDir("sealed")
        do {
            let store = try openSealed(dir)
            try store.set("token-value-0123456789", forKey: "session-token")
            try store.set(Int64(0x0102_0304_0506_0708), forKey: "user-id")
            try store.write { tx in
                try tx.set(["alpha-secret", "beta-secret"], forKey: "recovery-codes")
                try tx.setCodable(Layout(columns: 9, title: "private-title"), forKey: "layout")
            }
            try store.set("old-value", forKey: "removed-key")
            try store.removeValue(forKey: "removed-key")
            #expect(try store.allKeys == ["layout", "recovery-codes", "session-token", "user-id"])
        }
        let bytes = try readBytes(dir.file("ui.prefs"))
        for secret in [
            "token-value", "session-token", "user-id", "alpha-secret", "recovery-codes", "private-title",
            "layout", "old-value", "removed-key",
        ] {
            #expect(!contains(bytes, secret), "\(secret) is readable on disk")
        }
        #expect(!contains(bytes, String(decoding: [8, 7, 6, 5, 4, 3, 2, 1], as: UTF8.self)))
        let store = try openSealed(dir)
        #expect(try store.string(forKey: "session-token") == "token-value-0123456789")
        #expect(try store.int64(forKey: "user-id") == 0x0102_0304_0506_0708)
        #expect(try store.strings(forKey: "recovery-codes") == ["alpha-secret", "beta-secret"])
        #expect(try store.decode(Layout.self, forKey: "layout") == Layout(columns: 9, title: "private-title"))
        #expect(try store.string(forKey: "removed-key") == nil)
        #expect(try store.count == 4)
        #expect(try store.allKeys == ["layout", "recovery-codes", "session-token", "user-id"])
        expectError(.typeMismatch) { try store.int64(forKey: "session-token") }
        #expect(try store.verify().isClean)
    }

    @Test func aWrongKeyOrAMissingSealerIsAnErrorThatLeavesTheFileByteIdentical() throws {
        let dir = try TempDir("wrong-key")
        do {
            let store = try openSealed(dir, key: 1)
            try store.set("secret", forKey: "token")
        }
        let plainDir = try TempDir("plain")
        _ = try openStore(plainDir)
        let sealedBytes = try readBytes(dir.file("ui.prefs"))
        let plainBytes = try readBytes(plainDir.file("ui.prefs"))
        expectError(.wrongKey) { try openSealed(dir, key: 2) }
        expectError(.encrypted) { try openStore(dir) }
        expectError(.notEncrypted) { try openSealed(plainDir) }
        #expect(try readBytes(dir.file("ui.prefs")) == sealedBytes)
        #expect(try readBytes(plainDir.file("ui.prefs")) == plainBytes)
        #expect(dir.files == ["ui.prefs", "ui.prefs.lock"])
        #expect(try openSealed(dir, key: 1).string(forKey: "token") == "secret")
    }

    /// Rewrites a record's value (or expiry) with another's and repairs the CRC: a keyless checksum cannot tell,
    /// the value's seal can (format 6: its associated data binds the record's header, key and place; format 2 to 5
    /// had an authenticator for this), so the open finds it before any value is read.
    @Test func aCiphertextMovedUnderAnotherKeyOrRedatedIsTampering() throws {
        let dir = try TempDir("tamper")
        do {
            let store = try openSealed(dir)
            try store.set("aaaaaaaa", forKey: "first")
            try store.set("bbbbbbbb", forKey: "second")
        }
        let original = try readBytes(dir.file("ui.prefs"))
        let tagLength = 16
        // A set record of format 6 has no authenticator: its value is bound to its place.
        let length = recordLength(key: tagLength, value: 4 + 6 + 8 + 16, authenticated: false)
        let first = firstRecordOffset(sealed: true)
        let second = first + length
        func repairCRC(_ b: inout [UInt8], _ offset: Int, _ length: Int) {
            let crc = recordChecksum(b[offset..<offset + length - 4], inFile: b)
            withUnsafeBytes(of: crc.littleEndian) { for i in 0..<4 { b[offset + length - 4 + i] = $0[i] } }
        }
        /// What each kind of store makes of the altered file: verify with the key finds the one record, verify
        /// without it cannot; `.fail` refuses it as tampered and leaves it byte-identical; `.salvage` drops it.
        func expectTampering(_ altered: [UInt8]) throws {
            try writeBytes(altered, to: dir.file("ui.prefs"))
            let report = try PrefsStore.verify(id: "ui", directory: dir.path, sealer: TestSealer(key: 1))
            #expect(report.damage.map(\.range) == [first..<first + length])
            #expect(report.damage.allSatisfy { $0.isTampering })
            #expect(try PrefsStore.verify(id: "ui", directory: dir.path).isClean)  // checksums alone cannot tell
            expectError(.tampered) {
                try openStore(dir) {
                    $0.sealer = TestSealer(key: 1)
                    $0.recovery = .fail
                }
            }
            #expect(try readBytes(dir.file("ui.prefs")) == altered)
            let salvaged = try openSealed(dir)
            let recovery = try #require(salvaged.lastRecovery)
            #expect(recovery.damage.map(\.range) == [first..<first + length] && recovery.recordsLost == 1)
            #expect(try salvaged.string(forKey: "first") == nil)
            #expect(try salvaged.string(forKey: "second") == "bbbbbbbb")
        }
        // The second key's sealed value moved under the first key's tag (value and padding).
        var moved = original
        let valueStart = 32 + tagLength
        let valueEnd = length - 4
        moved.replaceSubrange(
            first + valueStart..<first + valueEnd, with: original[second + valueStart..<second + valueEnd])
        repairCRC(&moved, first, length)
        try expectTampering(moved)
        // An expiry pushed into the future.
        var redated = original
        redated[first + 24 + 6] = 0x01  // 2^48 ms: far in the future
        repairCRC(&redated, first, length)
        try expectTampering(redated)
    }

    @Test func settingAnUnchangedSealedValueWritesNothing() throws {
        let dir = try TempDir("sealed-cbs")
        let store = try openSealed(dir)
        try store.set("same", forKey: "k")
        let before = try store.stats().logBytes
        try store.set("same", forKey: "k")
        #expect(try store.stats().logBytes == before)
        let reopened = try openSealed(dir)  // no cached plaintext checksum: compares by opening
        try reopened.set("same", forKey: "k")
        #expect(try reopened.stats().logBytes == before)
        try reopened.set("different", forKey: "k")
        #expect(try reopened.stats().logBytes > before)
    }

    @Test func rekeyRewritesEveryValueAtomically() throws {
        let dir = try TempDir("rekey")
        let store = try openSealed(dir, key: 1)
        for i in 0..<50 { try store.set("value-\(i)", forKey: "key-\(i)") }
        try store.rekey(to: TestSealer(key: 2))
        #expect(try store.string(forKey: "key-7") == "value-7")
        expectError(.wrongKey) { try openSealed(dir, key: 1) }
        let reopened = try openSealed(dir, key: 2)
        #expect(try reopened.count == 50)
        #expect(try reopened.string(forKey: "key-49") == "value-49")
        try reopened.rekey(to: nil)
        let plain = try openStore(dir)
        #expect(try plain.string(forKey: "key-0") == "value-0")
        #expect(contains(try readBytes(dir.file("ui.prefs")), "value-0"))
        try plain.rekey(to: TestSealer(key: 3))
        #expect(!contains(try readBytes(dir.file("ui.prefs")), "value-0"))
        #expect(try openSealed(dir, key: 3).string(forKey: "key-3") == "value-3")
    }

    @Test func aDamagedSealedStoreIsSalvagedWithoutItsKeyNames() throws {
        let dir = try TempDir("sealed-damage", memory: true)
        do {
            let store = try openSealed(dir)
            for i in 0..<5 { try store.set("v\(i)", forKey: "k\(i)") }
        }
        var bytes = try readBytes(dir.file("ui.prefs"))
        let length = recordLength(key: 16, value: 4 + 2 + 2 + 16)  // a bound set record: no authenticator
        bytes[firstRecordOffset(sealed: true) + 2 * length + 50] ^= 0x40
        try writeBytes(bytes, to: dir.file("ui.prefs"))
        let store = try openSealed(dir)
        let report = try #require(store.lastRecovery)
        #expect(report.recordsLost == 1 && report.lostKeys.isEmpty)
        #expect(try store.allKeys == ["k0", "k1", "k3", "k4"])
        #expect(try store.verify().isClean)
    }

    /// A sealed store's index keys are the hex of its tags: the word-at-a-time encoder spells every byte value, at
    /// every position and for every length (with a tail of fewer than four bytes), as a byte-by-byte reference
    /// does, and `unhex` reads it back.
    @Test func indexKeysSpellEveryByteInLowercaseHex() {
        func reference(_ bytes: [UInt8]) -> String {
            bytes.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }
                .joined()
        }
        var generator = SystemRandomNumberGenerator()
        var samples: [[UInt8]] = (0...20).map { length in
            (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
        }
        samples.append((0...255).map { UInt8($0) })
        samples.append((0...255).reversed().map { UInt8($0) })
        for bytes in samples {
            let text = bytes.withUnsafeBytes { RecordCodec.hex($0) }
            #expect(text == reference(bytes), "\(bytes)")
            #expect(RecordCodec.unhex(text) == bytes)
        }
    }
}
