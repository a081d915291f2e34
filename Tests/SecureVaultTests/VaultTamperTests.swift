import Foundation
import Testing

@testable import PrefsKV
@testable import SecureVault

/// The vault file's records, parsed with the engine's own format definitions, for damage and scanning tests.
struct VaultFileRecords {
    struct Record {
        var offset: Int
        var length: Int
        var tag: [UInt8]
        var valueRange: Range<Int>
        var valueType: UInt8
        var expiresAt: Int64
        /// Bound to its place by its value's AEAD (format version 6).
        var bound: Bool
    }

    var bytes: [UInt8]
    var records: [Record] = []
    var logEnd: Int

    /// Every well-formed record at an 8-aligned offset of the whole file (not only below the log end), so
    /// superseded records that are still in the file are found too.
    init(_ bytes: [UInt8]) {
        self.bytes = bytes
        logEnd =
            bytes.withUnsafeBytes {
                Format.decodeLogEnd(
                    UInt64(littleEndian: $0.loadUnaligned(fromByteOffset: Format.logEndOffset, as: UInt64.self)))
            } ?? bytes.count
        var found: [Record] = []
        bytes.withUnsafeBytes { raw in
            var offset = Format.logStart
            while offset + Format.recordHeaderSize <= raw.count {
                if let header = RecordHeader.plausible(in: raw, at: offset, limit: raw.count), header.kind == .set {
                    found.append(
                        Record(
                            offset: offset, length: header.length,
                            tag: Array(raw[header.keyOffset..<header.keyOffset + header.keyLength]),
                            valueRange: header.valueOffset..<header.valueOffset + header.valueLength,
                            valueType: header.valueType, expiresAt: header.expiresAt, bound: header.isBound))
                }
                offset += 8
            }
        }
        records = found
    }

    /// The live record of the item whose tag is `tag` (the last one below the log end).
    func record(tag: [UInt8]) -> Record? {
        records.last { $0.tag == tag && $0.offset < logEnd }
    }

    /// Recomputes a record's CRC32C after its bytes were changed on purpose, so only the sealer can object.
    mutating func fixChecksum(of record: Record) {
        let end = record.offset + record.length
        let crc = Array(bytes[record.offset..<end - 4]).withUnsafeBytes {
            bytes.withUnsafeBytes(RecordSeed.init(headerPage:)).checksum($0)
        }
        withUnsafeBytes(of: crc.littleEndian) { bytes.replaceSubrange(end - 4..<end, with: $0) }
    }

    /// Every plaintext the sealer can open in the file, superseded records included: a record bound to its place
    /// (format 6) is tried as a record of every image generation up to a few past the file's, as someone holding the
    /// key could (a record left by an earlier image of a reused file names that image).
    func openableValues(storeUUID: [UInt8], sealer: VaultSealer) -> [[UInt8]] {
        let generation = bytes.withUnsafeBytes {
            UInt64(littleEndian: $0.loadUnaligned(fromByteOffset: Format.generationOffset, as: UInt64.self))
        }
        return records.compactMap { record in
            bytes.withUnsafeBytes { raw in
                let head = UnsafeRawBufferPointer(rebasing: raw[record.offset..<record.valueRange.lowerBound])
                let sealed = UnsafeRawBufferPointer(rebasing: raw[record.valueRange])
                for candidate in record.bound ? Array(0...generation + 8) : [generation] {
                    let image = ImageIdentity(uuid: StoreUUID(bytes: storeUUID), generation: candidate)
                    if let plain = try? SealedValue.withPlaintext(
                        of: sealed, head: head, bound: record.bound, in: image, offset: record.offset,
                        type: record.valueType, expiresAt: record.expiresAt, sealer: sealer, { Array($0) })
                    {
                        return plain
                    }
                }
                return nil
            }
        }
    }
}

extension Vault {
    /// The sealer of the open vault (for tests that scan its file with the key).
    var testSealer: VaultSealer { opened.withLock { $0!.sealer } }
}

@Suite struct VaultTamperTests {
    @Test func aCiphertextMovedUnderAnotherNameIsTamperedEveryTime() throws {
        let dir = try VaultDirectory()
        let vault = try dir.vault()
        try vault.set("AAAA", for: "a")
        try vault.set("BBBB", for: "b")
        let sealer = vault.testSealer
        var file = VaultFileRecords(try dir.fileBytes())
        let a = try #require(file.record(tag: sealer.tag(forKey: "a")))
        let b = try #require(file.record(tag: sealer.tag(forKey: "b")))
        try #require(a.valueRange.count == b.valueRange.count)
        file.bytes.replaceSubrange(b.valueRange, with: file.bytes[a.valueRange])
        file.fixChecksum(of: b)
        try dir.writeFile(file.bytes)

        // The moved value's record no longer matches its authenticator: the vault refuses to answer at all (not
        // only for "b"), until `recover()` is asked for, which keeps what is authentic.
        let reopened = try dir.vault()
        expectVaultError(.tampered) { try reopened.string(for: "b") }
        expectVaultError(.tampered) { try reopened.string(for: "a") }
        #expect(reopened.sessionToken() == .unavailable(.corrupted))
        let report = try #require(try reopened.recover())
        #expect(report.recordsLost == 1 && report.damage.contains { $0.isTampering })
        let recovered = try dir.vault()
        #expect(try recovered.string(for: "a") == "AAAA")
        #expect(try recovered.string(for: "b") == nil)
    }

    @Test func anItemCopiedIntoAnotherVaultIsTampered() throws {
        let dir = try VaultDirectory()
        let source = try dir.vault("source")
        let target = try dir.vault("target")
        try source.set("from source", for: "k")
        try target.set("from target", for: "k")
        let sourceFile = VaultFileRecords(try dir.fileBytes("source"))
        var targetFile = VaultFileRecords(try dir.fileBytes("target"))
        let moved = try #require(sourceFile.record(tag: source.testSealer.tag(forKey: "k")))
        let victim = try #require(targetFile.record(tag: target.testSealer.tag(forKey: "k")))
        try #require(moved.valueRange.count == victim.valueRange.count)
        targetFile.bytes.replaceSubrange(victim.valueRange, with: sourceFile.bytes[moved.valueRange])
        targetFile.fixChecksum(of: victim)
        try dir.writeFile(targetFile.bytes, "target")

        expectVaultError(.tampered) { try dir.vault("target").string(for: "k") }
    }

    /// One flipped bit anywhere the vault keeps data is detected: never a wrong value, never "absent".
    @Test func everyFlippedBitInHeaderOrLogIsDetected() throws {
        let dir = try VaultDirectory()
        let vault = try dir.vault()
        try vault.set("first value", for: "a")
        try vault.set(Data([0, 1, 2, 255]), for: "b")
        try vault.setSessionToken("tok", expiresAt: nil)
        let original = try dir.fileBytes()
        let logEnd = VaultFileRecords(original).logEnd
        // The header's checksummed part and every byte of the log; plus a sample of the rest of the file.
        var offsets = Array(0..<Format.staticSize) + Array(Format.logStart..<logEnd)
        offsets += stride(from: Format.staticSize, to: original.count, by: 97).filter {
            !($0 >= Format.logStart && $0 < logEnd)
        }
        var detected = 0
        for (index, offset) in offsets.enumerated() {
            var damaged = original
            damaged[offset] ^= UInt8(1 << (index % 8))
            try dir.writeFile(damaged)
            let handle = try dir.vault()
            let mustDetect = offset < Format.staticSize || (offset >= Format.logStart && offset < logEnd)
            do {
                let a = try handle.string(for: "a")
                let b = try handle.data(for: "b")
                let token = handle.sessionToken()
                // Read without an error: only allowed where no data lives, and then every value is exact.
                #expect(!mustDetect, "flip at \(offset) went unnoticed")
                #expect(a == "first value" && b == Data([0, 1, 2, 255]), "flip at \(offset) changed a value")
                #expect(token == .valid(token: "tok", expiresAt: nil), "flip at \(offset) changed the token")
            } catch let error as VaultError {
                #expect([.corrupted, .tampered, .wrongKey, .keyMissing].contains(error.code), "\(offset): \(error)")
                detected += 1
            }
        }
        #expect(detected >= Format.staticSize + (logEnd - Format.logStart))
    }

    @Test func overwrittenAndRemovedValuesLeaveNoDecryptableCopyInTheFile() throws {
        let dir = try VaultDirectory()
        let vault = try dir.vault()
        try vault.set("oldSecretMarker-1", for: "overwritten")
        try vault.set("oldSecretMarker-2", for: "removed")
        try vault.set("kept", for: "other")
        let uuid = try #require(try PrefsStore.inspect(id: "app", directory: dir.path)).storeUUID
        let sealer = vault.testSealer
        func openable() throws -> [String] {
            VaultFileRecords(try dir.fileBytes()).openableValues(storeUUID: uuid, sealer: sealer)
                .map { String(decoding: $0, as: UTF8.self) }
        }
        // The scan sees the markers while they are live: it can find what it looks for.
        #expect(try openable().filter { $0.contains("oldSecretMarker") }.count == 2)

        try vault.set("new value", for: "overwritten")
        try vault.remove("removed")
        let left = try openable()
        #expect(!left.contains { $0.contains("oldSecretMarker") }, "\(left)")
        #expect(left.contains { $0.contains("new value") })
        #expect(left.contains { $0.contains("kept") })
        #expect(try vault.string(for: "overwritten") == "new value")
    }

    @Test func recoverKeepsEveryIntactItemOfADamagedVault() throws {
        let dir = try VaultDirectory()
        let vault = try dir.vault()
        try vault.set("one", for: "a")
        try vault.set("two", for: "b")
        try vault.setSessionToken("tok", expiresAt: nil)
        var file = VaultFileRecords(try dir.fileBytes())
        let b = try #require(file.record(tag: vault.testSealer.tag(forKey: "b")))
        file.bytes[b.valueRange.lowerBound + 3] ^= 0x10
        try dir.writeFile(file.bytes)
        let damaged = try dir.vault()
        #expect(damaged.sessionToken() == .unavailable(.corrupted))
        #expect(try dir.fileBytes() == file.bytes)  // reporting damage changed nothing

        let report = try #require(try damaged.recover())
        #expect(report.recordsLost == 1)
        #expect(report.quarantinePath.map { FileManager.default.fileExists(atPath: $0) } == true)
        let recovered = try dir.vault()
        #expect(try recovered.string(for: "a") == "one")
        #expect(try recovered.string(for: "b") == nil)
        #expect(recovered.sessionToken() == .valid(token: "tok", expiresAt: nil))
        #expect(try recovered.recover() == nil)  // a clean vault has nothing to recover
        #expect(recovered.status().itemCount == 2)
    }

    /// Issue 15: a vault whose header page is zeroed refuses (`corrupted`, the file byte-identical), as a vault does
    /// with any damage, and `recover()` reads its header from the copy that starts the log: nothing is lost.
    @Test func aZeroedHeaderPageIsRecoveredFromItsCopyLosingNothing() throws {
        let dir = try VaultDirectory()
        let vault = try dir.vault()
        try vault.set("one", for: "a")
        try vault.setSessionToken("tok", expiresAt: nil)
        var bytes = try dir.fileBytes()
        for i in 0..<Format.headerSize { bytes[i] = 0 }
        try dir.writeFile(bytes)
        let damaged = try dir.vault()
        #expect(damaged.sessionToken() == .unavailable(.corrupted))
        #expect(try dir.fileBytes() == bytes)
        let report = try #require(try damaged.recover())
        #expect(report.recordsLost == 0 && report.damage.map(\.range) == [0..<Format.headerSize], "\(report)")
        let recovered = try dir.vault()
        #expect(try recovered.string(for: "a") == "one")
        #expect(recovered.sessionToken() == .valid(token: "tok", expiresAt: nil))
    }
}
