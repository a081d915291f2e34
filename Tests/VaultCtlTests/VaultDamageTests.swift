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
                "4096    " + length + String(repeating: " ", count: 8 - length.count)
                    + "1        -     checksum mismatch",
            ], "\(verify)")
        let report = try jsonObject(try vault.step("verify-json").standardOutput)
        #expect(report["clean"] as? Bool == false, "\(report)")
        let damage = try #require(report["damage"] as? [[String: Any]])
        #expect(damage.count == 1 && number(damage.first?["offset"]) == 4096, "\(report)")
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
        // The item whose record was copied is intact.
        #expect(try vault.step("reveal-bravo").standardOutput == bravo + "\n")

        // list shows what opens and says what does not.
        let list = try vault.step("list")
        #expect(list.status == 65, "\(list)")
        #expect(list.lines.count == 2 && list.lines[1].hasPrefix("bravo "), "\(list)")
        #expect(list.standardError.contains("1 item of vault \"app\" could not be opened"), "\(list)")
        let listed = try vault.step("list-json")
        #expect(listed.status == 65 && listed.standardError.isEmpty, "\(listed)")
        let object = try jsonObject(listed.standardOutput)
        #expect(number(object["unreadable"]) == 1 && (object["items"] as? [Any])?.count == 1, "\(object)")

        // verify opens every record with the key: the moved one fails although its checksum is valid.
        let verify = try vault.step("verify")
        #expect(verify.status == 65, "\(verify)")
        #expect(verify.lines.first?.hasPrefix("vault app is DAMAGED: ") == true, "\(verify)")
        #expect(verify.lines.contains { $0.hasPrefix("4096 ") }, "\(verify)")
        let report = try jsonObject(try vault.step("verify-json").standardOutput)
        #expect(report["clean"] as? Bool == false && number(report["itemsOpened"]) == 1, "\(report)")
        let damage = try #require(report["damage"] as? [[String: Any]])
        #expect(damage.map { number($0["offset"]) } == [4096], "\(report)")
        #expect(number(damage.first?["length"]) == Int64(first.length))

        #expect(try Array(Data(contentsOf: URL(fileURLWithPath: vault.vaultFile()))) == moved)
    }
}
