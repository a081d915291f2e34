import Foundation
import Testing

@testable import PrefsKV

@Suite struct BackupAndExportTests {
    @Test func aBackupRestoresTheStoreAndOtherHandlesFollow() throws {
        let dir = try TempDir("backup")
        let store = try openStore(dir)
        let other = try openStore(dir)
        try store.set("dark", forKey: "theme")
        try store.set(3, forKey: "columns")
        try store.set("temporary", forKey: "expiring", expiresAfter: .milliseconds(1))
        let backup = dir.file("ui-backup.prefs")
        usleep(5000)
        try store.backup(to: backup)
        #expect(try PrefsStore.verify(id: "ui-backup", directory: dir.path).isClean)
        try store.set("light", forKey: "theme")
        try store.removeValue(forKey: "columns")
        try store.set(true, forKey: "added-later")
        #expect(try other.string(forKey: "theme") == "light")
        try store.restore(from: backup)
        #expect(try store.allKeys == ["columns", "theme"])
        #expect(try store.string(forKey: "theme") == "dark")
        #expect(try other.string(forKey: "theme") == "dark")
        #expect(try other.int(forKey: "columns") == 3)
        #expect(try other.contains("added-later") == false)
        #expect(try openStore(dir).allKeys == ["columns", "theme"])
    }

    @Test func aDamagedOrForeignBackupIsRefusedAndTheStoreStaysAsItWas() throws {
        let dir = try TempDir("bad-backup")
        let store = try openStore(dir)
        try store.set("dark", forKey: "theme")
        let backup = dir.file("b.prefs")
        try store.backup(to: backup)
        try store.set("light", forKey: "theme")
        var bytes = try readBytes(backup)
        bytes[4096 + 40] ^= 0x01
        try writeBytes(bytes, to: backup)
        let before = try readBytes(store.path)
        expectError(.invalidInput) { try store.restore(from: backup) }
        expectError(.notFound) { try store.restore(from: dir.file("absent.prefs")) }
        try writeBytes(Array("not a store at all".utf8), to: backup)
        expectError(.notAStore) { try store.restore(from: backup) }
        let sealedDir = try TempDir("sealed-backup")
        let sealed = try openSealed(sealedDir)
        try sealed.set("x", forKey: "y")
        try sealed.backup(to: backup)
        expectError(.encrypted) { try store.restore(from: backup) }
        expectError(.wrongKey) { try openSealed(sealedDir, key: 9) }
        #expect(try readBytes(store.path) == before)
        #expect(try store.string(forKey: "theme") == "light")
    }

    @Test func exportThenImportRestoresEveryValueAndReExportsByteForByte() throws {
        let dir = try TempDir("export")
        let store = try openStore(dir)
        try store.set(true, forKey: "bool")
        try store.set(Int64.min, forKey: "int-min")
        try store.set(Int64.max, forKey: "int-max")
        let subnormal = Double.leastNonzeroMagnitude * 2027
        for (i, d) in [0.1, -0.0, .pi, subnormal, .greatestFiniteMagnitude, .nan, .infinity, -.infinity, 1.0]
            .enumerated()
        {
            try store.set(d, forKey: "double-\(i)")
        }
        try store.set("quote \" slash / tab \t unicode ☾ 🌙", forKey: "string")
        try store.set(Data([0, 1, 2, 255]), forKey: "bytes")
        try store.set(["", "a", "ü"], forKey: "strings")
        try store.setCodable(Layout(columns: 2, title: "t"), forKey: "json")
        try store.set("soon gone", forKey: "expires", expiresAfter: .seconds(3600))
        let document = try store.exportJSON()

        let target = try TempDir("import")
        let imported = try openStore(target, id: "copy")
        try imported.set("to be replaced", forKey: "old")
        try imported.importJSON(document)
        let again = try imported.exportJSON()
        let rewritten = String(decoding: again, as: UTF8.self).replacingOccurrences(of: "\"copy\"", with: "\"ui\"")
        #expect(rewritten == String(decoding: document, as: UTF8.self))
        #expect(try imported.contains("old") == false)
        #expect(try imported.int64(forKey: "int-min") == Int64.min)
        #expect(try imported.int64(forKey: "int-max") == Int64.max)
        #expect(try imported.double(forKey: "double-1")?.sign == .minus)
        #expect(try imported.double(forKey: "double-3") == subnormal)
        #expect(try imported.double(forKey: "double-5")?.isNaN == true)
        #expect(try imported.double(forKey: "double-7") == -.infinity)
        #expect(try imported.data(forKey: "bytes") == Data([0, 1, 2, 255]))
        #expect(try imported.decode(Layout.self, forKey: "json") == Layout(columns: 2, title: "t"))
        #expect(try imported.entries().first { $0.key == "expires" }?.expiresAt != nil)

        // The document's shape, byte for byte, for a small store.
        let smallDir = try TempDir("small")
        let small = try openStore(smallDir, id: "ui")
        try small.set("dark", forKey: "theme")
        try small.set(Data([1, 2, 3]), forKey: "blob")
        try small.set(.infinity, forKey: "zoom")
        #expect(
            String(decoding: try small.exportJSON(), as: UTF8.self) == """
                {
                  "entries" : [
                    {
                      "key" : "blob",
                      "type" : "bytes",
                      "value" : "AQID"
                    },
                    {
                      "key" : "theme",
                      "type" : "string",
                      "value" : "dark"
                    },
                    {
                      "key" : "zoom",
                      "type" : "double",
                      "value" : "inf"
                    }
                  ],
                  "format" : "prefskv-export",
                  "store" : "ui",
                  "version" : 1
                }
                """)
    }

    @Test func importRefusesAMalformedDocumentAndChangesNothing() throws {
        let dir = try TempDir("bad-import")
        let store = try openStore(dir)
        try store.set("kept", forKey: "k")
        for document in [
            "not json",
            #"{"format":"other","version":1,"store":"x","entries":[]}"#,
            #"{"format":"prefskv-export","version":2,"store":"x","entries":[]}"#,
            #"{"format":"prefskv-export","version":1,"store":"x","entries":[{"key":"a","type":"uuid","value":1}]}"#,
            #"{"format":"prefskv-export","version":1,"store":"x","entries":[{"key":"a","type":"bytes","value":"!!"}]}"#,
            #"{"format":"prefskv-export","version":1,"store":"x","entries":[{"key":"a","type":"int","value":"1"}]}"#,
        ] {
            expectError(.invalidInput) { try store.importJSON(Data(document.utf8)) }
        }
        expectError(.invalidKey) {
            try store.importJSON(
                Data(
                    #"{"format":"prefskv-export","version":1,"store":"x","entries":[{"key":"","type":"int","value":1}]}"#
                        .utf8))
        }
        #expect(try store.allKeys == ["k"])
    }
}
