import Foundation
import TestSupport
import Testing

/// `vaultctl vault` on a vault file damaged for real while its key is in the keyring: a flipped byte
/// (corrupted, 65) and a sealed value moved under another item's name with its checksum made valid again
/// (tampered, 65). Nothing may print a value it could not vouch for, and nothing may change the file.
@Suite struct VaultDamageTests {
    @Test func checksumsAreComputedAsTheFileFormatSays() {
        #expect(crc32c(Array("123456789".utf8)) == 0xE306_9283)
    }

    @Test func aFlippedByteIsCorrupted65EverywhereAndTheFileStaysByteIdentical() throws {
        let vault = try VaultSandbox()
        let alpha = VaultSandbox.secret("alpha")
        let bravo = VaultSandbox.secret("bravo")
        try vault.input("set-alpha", alpha, secret: alpha)
        try vault.input("set-bravo", bravo, secret: bravo)
        var damaged: [UInt8] = []
        var record: VaultSandbox.Record?
        try vault.run(
            pauses: [
                "flip": {
                    var bytes = try Array(Data(contentsOf: URL(fileURLWithPath: vault.vaultFile())))
                    let records = VaultSandbox.records(bytes)
                    let first = try #require(records.first, "no record in the vault file")
                    try #require(records.count == 2 && records.allSatisfy { $0.checksumMatches(bytes) })
                    bytes[first.valueRange.lowerBound + first.valueLength / 2] ^= 0x10
                    try Data(bytes).write(to: URL(fileURLWithPath: vault.vaultFile()))
                    damaged = bytes
                    record = first
                }
            ],
            script: """
                V set-alpha vault set --service app alpha
                V set-bravo vault set --service app bravo
                PAUSE flip
                V get vault get --service app bravo --reveal
                V get-json --json vault get --service app bravo
                V list vault list --service app
                V verify vault verify --service app
                V verify-json --json vault verify --service app
                V status --json vault status --service app
                """)
        let first = try #require(record)
        for name in ["get", "list"] {
            let step = try vault.step(name)
            #expect(step.status == 65 && step.standardOutput.isEmpty, "\(step)")
            #expect(step.standardError.hasPrefix("vaultctl: corrupted: "), "\(step)")
        }
        #expect(try vault.step("get-json").errorCode() == "corrupted")

        let verify = try vault.step("verify")
        #expect(verify.status == 65, "\(verify)")
        let length = String(first.length)
        #expect(
            verify.lines == [
                "vault app is DAMAGED: 0 items failed to open, 1 damaged range, 0 items opened, \(vault.vaultFile())",
                "OFFSET  LENGTH  RECORDS  KEYS  REASON",
                "\(first.offset)    " + length + String(repeating: " ", count: 8 - length.count)
                    + "1        -     checksum mismatch",
            ], "\(verify)")
        let report = try jsonObject(try vault.step("verify-json").standardOutput)
        #expect(report["clean"] as? Bool == false, "\(report)")
        let damage = try #require(report["damage"] as? [[String: Any]])
        #expect(damage.count == 1 && number(damage.first?["offset"]) == Int64(first.offset), "\(report)")
        #expect(number(damage.first?["length"]) == Int64(first.length) && number(damage.first?["records"]) == 1)

        // status needs no key and no intact record: it still answers.
        let status = try vault.step("status")
        #expect(status.status == 0, "\(status)")
        let statusObject = try jsonObject(status.standardOutput)
        #expect((statusObject["vaultId"] as? String)?.count == 32)

        #expect(try Array(Data(contentsOf: URL(fileURLWithPath: vault.vaultFile()))) == damaged)
        let files = try FileManager.default.contentsOfDirectory(atPath: vault.vaultDirectory)
        #expect(!files.contains { $0.contains("corrupt") }, "a command quarantined or recovered the file: \(files)")
    }

    @Test func aSealedValueMovedUnderAnotherNameIsTampered65() throws {
        let vault = try VaultSandbox()
        // Names and values of equal length: the two sealed records have the same size.
        let alpha = VaultSandbox.secret("alpha")
        let bravo = VaultSandbox.secret("bravo")
        try vault.input("set-alpha", alpha, secret: alpha)
        try vault.input("set-bravo", bravo, secret: bravo)
        var moved: [UInt8] = []
        var record: VaultSandbox.Record?
        try vault.run(
            revealing: ["reveal-bravo"],
            pauses: [
                "move": {
                    var bytes = try Array(Data(contentsOf: URL(fileURLWithPath: vault.vaultFile())))
                    let records = VaultSandbox.records(bytes)
                    try #require(records.count == 2 && records.allSatisfy { $0.checksumMatches(bytes) })
                    let (first, second) = (records[0], records[1])
                    try #require(first.length == second.length && first.valueLength == second.valueLength)
                    // bravo's sealed value under alpha's tag, and alpha's checksum made valid again.
                    bytes.replaceSubrange(first.valueRange, with: bytes[second.valueRange])
                    first.fixChecksum(&bytes)
                    #expect(first.checksumMatches(bytes))
                    try Data(bytes).write(to: URL(fileURLWithPath: vault.vaultFile()))
                    moved = bytes
                    record = first
                }
            ],
            script: """
                V set-alpha vault set --service app alpha
                V set-bravo vault set --service app bravo
                PAUSE move
                V get vault get --service app alpha --reveal
                V get-json --json vault get --service app alpha
                V reveal-bravo vault get --service app bravo --reveal
                V list vault list --service app
                V list-json --json vault list --service app
                V verify vault verify --service app
                V verify-json --json vault verify --service app
                """)
        let first = try #require(record)
        let get = try vault.step("get")
        #expect(get.status == 65 && get.standardOutput.isEmpty, "\(get)")
        #expect(get.standardError.hasPrefix("vaultctl: tampered: "), "\(get)")
        #expect(try vault.step("get-json").errorCode() == "tampered")
        // The moved record fails its authenticator (format 2): the vault answers nothing until it is recovered,
        // not even the item whose record was copied.
        let reveal = try vault.step("reveal-bravo")
        #expect(reveal.status == 65 && reveal.standardOutput.isEmpty, "\(reveal)")
        let list = try vault.step("list")
        #expect(list.status == 65 && list.standardOutput.isEmpty, "\(list)")
        #expect(list.standardError.hasPrefix("vaultctl: tampered: "), "\(list)")
        #expect(try vault.step("list-json").errorCode() == "tampered")

        // verify authenticates every record with the key: the moved one fails although its checksum is valid.
        let verify = try vault.step("verify")
        #expect(verify.status == 65, "\(verify)")
        #expect(verify.lines.first?.hasPrefix("vault app is DAMAGED: ") == true, "\(verify)")
        #expect(
            verify.lines.contains { $0.hasPrefix("\(first.offset) ") && $0.contains("fail authentication") }, "\(verify)")
        let report = try jsonObject(try vault.step("verify-json").standardOutput)
        #expect(report["clean"] as? Bool == false && number(report["itemsOpened"]) == 0, "\(report)")
        let damage = try #require(report["damage"] as? [[String: Any]])
        #expect(damage.map { number($0["offset"]) } == [Int64(first.offset)], "\(report)")
        #expect(number(damage.first?["length"]) == Int64(first.length))

        #expect(try Array(Data(contentsOf: URL(fileURLWithPath: vault.vaultFile()))) == moved)
    }

    /// Issue 14, point 2, as it was reproduced: a delete record appended with a valid CRC32C (no key needed), and
    /// an older record of the same item copied to the end (sequence number and CRC fixed). Both were "absent" (66)
    /// or the old value with verify clean; both are tampered (65) now, on read and in verify, and no command
    /// prints a value or changes the file.
    @Test func aForgedDeleteOrAReplayedRecordIsTampered65NeverAbsentOrOld() throws {
        let vault = try VaultSandbox()
        let old = VaultSandbox.secret("old")
        let new = VaultSandbox.secret("new")
        try vault.input("set-old", old, secret: old)
        try vault.input("set-new", new, secret: new)
        func u64(_ bytes: [UInt8], _ at: Int) -> UInt64 {
            (0..<8).reduce(0) { $0 | UInt64(bytes[at + $1]) << (8 * UInt64($1)) }
        }
        func le(_ value: UInt64, _ count: Int) -> [UInt8] {
            (0..<count).map { UInt8(truncatingIfNeeded: value >> (8 * UInt64($0))) }
        }
        /// `bytes` with `record` appended at the log end, the log-end word (offset | 16 check bits) moved past it.
        func appending(_ record: [UInt8], to bytes: [UInt8]) -> [UInt8] {
            var out = bytes
            let end = Int(u64(bytes, 256) & 0xFFFF_FFFF_FFFF)
            if out.count < end + record.count { out += [UInt8](repeating: 0, count: end + record.count - out.count) }
            out.replaceSubrange(end..<end + record.count, with: record)
            let newEnd = UInt64(end + record.count)
            let check = UInt64(crc32c(le(newEnd, 8)) & 0xFFFF)
            out.replaceSubrange(256..<264, with: le(newEnd | check << 48, 8))
            return out
        }
        /// `record` with its CRC made valid for the file `file` (the generation in its header is public).
        func withChecksum(_ record: [UInt8], for file: [UInt8]) -> [UInt8] {
            Array(record[0..<record.count - 4]) + le(UInt64(recordCRC(record[0..<record.count - 4], inFile: file)), 4)
        }
        var files: [String: [UInt8]] = [:]
        func vaultBytes() throws -> [UInt8] { try Array(Data(contentsOf: URL(fileURLWithPath: vault.vaultFile()))) }
        /// The only record of the file (an overwrite compacts the vault, so that no old value stays decryptable).
        func onlyRecord(_ bytes: [UInt8]) throws -> VaultSandbox.Record {
            let records = VaultSandbox.records(bytes)
            try #require(records.count == 1 && records[0].checksumMatches(bytes))
            return records[0]
        }
        try vault.run(
            pauses: [
                "keep-old": { files["old"] = try vaultBytes() },
                "forge-delete": {
                    let bytes = try vaultBytes()
                    files["original"] = bytes
                    let last = try onlyRecord(bytes)
                    let tag = Array(bytes[last.offset + 32..<last.offset + 32 + last.keyLength])
                    // kind 2 (delete), flags commit | sealed, the item's tag, the next sequence number, no value.
                    var delete: [UInt8] = Array("PKVr".utf8) + [2, 0, 3, 0] + le(UInt64(tag.count), 4) + le(0, 4)
                    delete += le(u64(bytes, last.offset + 16) + 1, 8) + le(0, 8) + tag
                    delete += [UInt8](repeating: 0, count: (delete.count + 4 + 7) / 8 * 8 - delete.count)
                    let forged = appending(withChecksum(delete, for: bytes), to: bytes)
                    files["deleted"] = forged
                    try Data(forged).write(to: URL(fileURLWithPath: vault.vaultFile()))
                },
                "replay": {
                    let bytes = try #require(files["original"])
                    let current = try onlyRecord(bytes)
                    // The item's record from the copy taken before it was overwritten (the old value), with the
                    // next sequence number.
                    let oldBytes = try #require(files["old"])
                    let old = try onlyRecord(oldBytes)
                    var replayed = Array(oldBytes[old.offset..<old.offset + old.length])
                    replayed.replaceSubrange(16..<24, with: le(u64(bytes, current.offset + 16) + 1, 8))
                    let forged = appending(withChecksum(replayed, for: bytes), to: bytes)
                    files["replayed"] = forged
                    try Data(forged).write(to: URL(fileURLWithPath: vault.vaultFile()))
                },
            ],
            script: """
                V set-old vault set --service app token
                PAUSE keep-old
                V set-new vault set --service app token
                PAUSE forge-delete
                V get-deleted vault get --service app token --reveal
                V verify-deleted vault verify --service app
                PAUSE replay
                V get-replayed vault get --service app token --reveal
                V verify-replayed vault verify --service app
                """)
        for name in ["get-deleted", "get-replayed"] {
            let step = try vault.step(name)
            #expect(step.status == 65 && step.standardOutput.isEmpty, "\(step)")
            #expect(step.standardError.hasPrefix("vaultctl: tampered: "), "\(step)")
        }
        for name in ["verify-deleted", "verify-replayed"] {
            let step = try vault.step(name)
            #expect(step.status == 65, "\(step)")
            #expect(step.lines.contains { $0.contains("fail authentication") }, "\(step)")
        }
        #expect(try Array(Data(contentsOf: URL(fileURLWithPath: vault.vaultFile()))) == files["replayed"])
    }

    /// A vault of 300 items has a persisted table (FileFormat.md, "Index records"; sealed: authenticated, from version 8
    /// in pieces). Someone without the key trades the record offsets of two of its slots, check bits and the record's
    /// CRC made right, which would make both items `notFound` (66) or answer one with the other's secret: every
    /// `vault get` (of every tenth item: the table holds one piece, which every lookup of an item the table holds
    /// reaches) answers its own secret or `tampered` (65, nothing printed), at least one is refused, `vault verify`
    /// says tampered (65), and nothing changes the file.
    @Test func aForgedTableIsTampered65NeverAbsentOrAnotherItem() throws {
        let vault = try VaultSandbox()
        let count = 300
        var secrets: [String] = []
        for i in 0..<count {
            let secret = VaultSandbox.secret("item\(i)")
            secrets.append(secret)
            try vault.input("set-\(i)", secret, secret: secret)
        }
        func u64(_ bytes: [UInt8], _ at: Int) -> UInt64 {
            (0..<8).reduce(0) { $0 | UInt64(bytes[at + $1]) << (8 * UInt64($1)) }
        }
        func le(_ value: UInt64, _ count: Int) -> [UInt8] {
            (0..<count).map { UInt8(truncatingIfNeeded: value >> (8 * UInt64($0))) }
        }
        var forged: [UInt8] = []
        try vault.run(
            revealing: Set((0..<count).map { "get-\($0)" }),
            pauses: [
                "forge": {
                    var bytes = try Array(Data(contentsOf: URL(fileURLWithPath: vault.vaultFile())))
                    // The index word (offset 280) names the newest table: record header 32 bytes, table header 56,
                    // a sealed version-8 table's 16-byte MAC for each 512 slots, then the slots.
                    let table = Int(u64(bytes, 280) & 0xFFFF_FFFF_FFFF)
                    try #require(table >= 4096 && bytes[table + 4] == 6, "the vault file has no table")
                    try #require(bytes[8] == 8, "format version 8")
                    let value = table + 32
                    let slotCount = Int(u64(bytes, value))
                    let seed = u64(bytes, value + 32)
                    let slots = value + 56 + 16 * ((slotCount + 511) / 512)
                    func slot(_ i: Int) -> UInt64 { u64(bytes, slots + 8 * i) }
                    func check(_ i: Int, _ word: UInt64) -> UInt64 {
                        let crc = UInt64(crc32c(le(UInt64(i), 8) + le(word & ~0xFFFF, 8) + le(seed, 8)) & 0xFFFF)
                        return crc == 0 ? 1 : crc
                    }
                    let used = (0..<slotCount).filter { slot($0) >> 27 != 0 }
                    try #require(used.count >= 2)
                    let (a, b) = (used[0], used[1])
                    let (wordA, wordB) = (slot(a), slot(b))
                    let offsetBits: UInt64 = ~0 << 27
                    for (i, word) in [(a, wordA & ~offsetBits | wordB & offsetBits), (b, wordB & ~offsetBits | wordA & offsetBits)] {
                        let fixed = word & ~0xFFFF | check(i, word)
                        bytes.replaceSubrange(slots + 8 * i..<slots + 8 * i + 8, with: le(fixed, 8))
                    }
                    let valueLength = Int(u64(bytes, table + 12) & 0xFFFF_FFFF)
                    let length = (32 + valueLength + 16 + 4 + 7) / 8 * 8
                    let crc = recordCRC(bytes[table..<table + length - 4], inFile: bytes)
                    bytes.replaceSubrange(table + length - 4..<table + length, with: le(UInt64(crc), 4))
                    try Data(bytes).write(to: URL(fileURLWithPath: vault.vaultFile()))
                    forged = bytes
                }
            ],
            script: """
                for i in $(seq 0 \(count - 1)); do V set-$i vault set --service app item$i; done
                PAUSE forge
                for i in $(seq 0 10 \(count - 1)); do V get-$i vault get --service app item$i --reveal; done
                V verify vault verify --service app
                """)
        var refused = 0
        for i in 0..<count where vault.steps.contains("get-\(i)") {
            let step = try vault.step("get-\(i)")
            if step.status == 0 {
                #expect(step.standardOutput.trimmingCharacters(in: .newlines) == secrets[i], "item\(i): its own secret")
            } else {
                #expect(step.status == 65 && step.standardOutput.isEmpty, "\(step)")
                #expect(step.standardError.hasPrefix("vaultctl: tampered: "), "\(step)")
                refused += 1
            }
        }
        #expect(refused > 0, "the forged slots are found by the reads that reach them")
        let verify = try vault.step("verify")
        #expect(verify.status == 65 && verify.lines.contains { $0.contains("fail authentication") }, "\(verify)")
        #expect(try Array(Data(contentsOf: URL(fileURLWithPath: vault.vaultFile()))) == forged)
    }
}

