import Foundation
import Testing

@testable import PrefsKV

/// Lines of 16 bytes as `OFFSET: xxxx xxxx ...`, the all-zero ones left out (as in Documentation/FileFormat.md).
func hexDump(_ bytes: [UInt8]) -> [String] {
    stride(from: 0, to: bytes.count, by: 16).compactMap { offset in
        let line = bytes[offset..<min(offset + 16, bytes.count)]
        guard line.contains(where: { $0 != 0 }) else { return nil }
        let pairs = stride(from: line.startIndex, to: line.endIndex, by: 2).map {
            line[$0..<min($0 + 2, line.endIndex)].map { String(format: "%02x", $0) }.joined()
        }
        return String(format: "%08x: ", offset) + pairs.joined(separator: " ")
    }
}

@Suite struct FileFormatTests {
    static let documentPath = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Documentation/FileFormat.md").path

    /// The example store of FileFormat.md, written by the library: a header with a fixed UUID and creation
    /// time, then `theme = "dark"`, a transaction `sidebar = true, width = 240`, and `remove theme`.
    static func exampleStore() throws -> (TempDir, [UInt8]) {
        let dir = try TempDir("format")
        let header = Header(
            flags: 0, uuid: StoreUUID(bytes: Array(0x10...0x1F)), generation: 0, createdAt: 1_767_225_600_000, keyCheck: [])
        try writeBytes(header.page(logEnd: 4096) + [UInt8](repeating: 0, count: 4096), to: dir.file("ui.prefs"))
        let store = try openStore(dir)
        try store.set("dark", forKey: "theme")
        try store.write { tx in
            try tx.set(true, forKey: "sidebar")
            try tx.set(240, forKey: "width")
        }
        try store.removeValue(forKey: "theme")
        return (dir, try readBytes(dir.file("ui.prefs")))
    }

    @Test func theWorkedExampleInFileFormatMdIsWhatTheCodeWrites() throws {
        let (_, bytes) = try Self.exampleStore()
        let document = try String(contentsOfFile: Self.documentPath, encoding: .utf8)
        let lines = document.components(separatedBy: "\n")
        let begin = try #require(lines.firstIndex(of: "<!-- worked-example:begin -->"))
        let end = try #require(lines.firstIndex(of: "<!-- worked-example:end -->"))
        let shown = lines[begin..<end].filter { $0.count > 10 && $0.dropFirst(8).hasPrefix(": ") }
        let actual = hexDump(bytes)
        #expect(shown == actual, "FileFormat.md must show exactly:\n\(actual.joined(separator: "\n"))")
    }

    @Test func theExampleStoreReadsBackAsDocumented() throws {
        let (dir, _) = try Self.exampleStore()
        let store = try openStore(dir)
        #expect(try store.allKeys == ["sidebar", "width"])
        #expect(try store.bool(forKey: "sidebar") == true)
        #expect(try store.int(forKey: "width") == 240)
        #expect(try store.stats().recordCount == 5)
    }

    /// The scanner's spelled-out checks of a kind byte and a value-type byte answer what the enums' own
    /// `init(rawValue:)` answers, for every byte.
    @Test func theScannersKindAndTypeChecksAgreeWithTheEnumsForEveryByte() {
        for byte in UInt8.min...UInt8.max {
            #expect(RecordKind.decoding(byte) == RecordKind(rawValue: byte), "kind \(byte)")
            #expect(ValueType.isValid(byte) == (ValueType(rawValue: byte) != nil), "type \(byte)")
        }
    }

    @Test func theLogEndWordCarriesCheckBitsThatCatchEverySingleBitFlip() {
        for offset in [4096, 4160, 1 << 20, (1 << 40) + 8] {
            let word = Format.encodeLogEnd(offset)
            #expect(Format.decodeLogEnd(word) == offset)
            for bit in 0..<64 { #expect(Format.decodeLogEnd(word ^ (1 << UInt64(bit))) == nil, "bit \(bit)") }
        }
    }
}
