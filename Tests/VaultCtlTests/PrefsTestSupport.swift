// Support for the `vaultctl prefs` tests: a private store directory, the built binary run on it, real bytes
// in real files, and a check that a JSON answer is exactly one document with sorted keys.
import Foundation
import Glibc
import TestSupport
import Testing

/// A store directory for one test (in /dev/shm when there is one), removed with its contents afterwards.
/// `vaultctl` runs with `--dir` set to it and with XDG_DATA_HOME inside it, so no test can reach a real store.
final class PrefsSandbox {
    let directory: String

    init() throws {
        var isDirectory: ObjCBool = false
        let base =
            FileManager.default.fileExists(atPath: "/dev/shm", isDirectory: &isDirectory) && isDirectory.boolValue
            ? "/dev/shm/" : NSTemporaryDirectory()
        var template = Array((base + "vaultctl-prefs-XXXXXX").utf8CString)
        guard template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) != nil else {
            throw SandboxError(description: "mkdtemp failed: errno \(errno)")
        }
        directory = String(cString: template.withUnsafeBufferPointer { $0.baseAddress! })
    }

    deinit {
        try? FileManager.default.removeItem(atPath: directory)
    }

    struct SandboxError: Error, CustomStringConvertible {
        var description: String
    }

    static var vaultctl: String { BuildProducts.executable("vaultctl") }

    /// `vaultctl --dir <sandbox> ARGUMENTS`, with `input` on stdin.
    func run(_ arguments: [String], input: Data = Data()) throws -> ChildResult {
        try ChildProcess.run(
            Self.vaultctl, ["--dir", directory] + arguments,
            environment: ["XDG_DATA_HOME": directory + "/xdg", "HOME": directory + "/home"], input: input)
    }

    /// Runs `arguments` and records an issue unless it exits 0.
    @discardableResult
    func succeed(
        _ arguments: [String], input: Data = Data(), sourceLocation: SourceLocation = #_sourceLocation
    )
        throws -> ChildResult
    {
        let result = try run(arguments, input: input)
        #expect(
            result.status == 0, "vaultctl \(arguments.joined(separator: " ")): \(result)",
            sourceLocation: sourceLocation)
        return result
    }

    func path(_ name: String) -> String { directory + "/" + name }

    /// The names in the directory, sorted.
    var files: [String] { ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).sorted() }

    func bytes(_ name: String) throws -> [UInt8] {
        Array(try Data(contentsOf: URL(fileURLWithPath: path(name))))
    }

    func write(_ bytes: [UInt8], to name: String) throws {
        try Data(bytes).write(to: URL(fileURLWithPath: path(name)))
    }

    /// Every file's name and bytes: "nothing changed" means this is equal before and after.
    func snapshot() throws -> [String: [UInt8]] {
        var out: [String: [UInt8]] = [:]
        for name in files { out[name] = try bytes(name) }
        return out
    }

    func mode(_ name: String) -> UInt32 {
        var info = stat()
        guard stat(path(name), &info) == 0 else { return 0 }
        return UInt32(info.st_mode) & 0o7777
    }

    // MARK: Stores with known bytes

    /// Offset of the first record: the log starts at 4096 with the 168-byte header copy
    /// (Documentation/FileFormat.md).
    static let firstRecordOffset = 4096 + 168
    /// Offset of the first record's value when the store's first write was `set STORE theme dark`: a record header
    /// is 32 bytes, then the 5-byte key.
    static let themeValueOffset = firstRecordOffset + 32 + 5
    /// The length of that record: (32 + 5 + 4 + 4 + 7) & ~7.
    static let themeRecordLength = 48

    /// A store `id` holding theme="dark" (its first record), width=240 and sidebar=true.
    func makeStore(_ id: String = "ui") throws {
        try succeed(["prefs", "set", id, "theme", "dark"])
        try succeed(["prefs", "set", id, "width", "240", "--type", "int"])
        try succeed(["prefs", "set", id, "sidebar", "true", "--type", "bool"])
    }

    /// 20 SIGKILLs spread over the first 1.2 s of `vaultctl prefs import ui <arguments>` (paths relative to the
    /// sandbox) into a store that holds a key of its own; after each, the store holds its key and either none of
    /// `keys` or all of them, each with the value `v-<key>`, and `after(round)` checks anything else (the source
    /// unchanged). Returns how many rounds ended with the old store and with the whole import.
    func killImports(
        _ arguments: String, keys: [String], after: (Int) throws -> Void = { _ in },
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> [String: Int] {
        var outcomes: [String: Int] = [:]
        for round in 0..<20 {
            _ = try? FileManager.default.removeItem(atPath: path("ui.prefs"))
            try succeed(["prefs", "set", "ui", "own", "kept"])
            let result = try ChildProcess.run(
                "/bin/bash",
                [
                    "-c",
                    #"cd "$D" && "$V" --dir "$D" prefs import ui $A >/dev/null 2>&1 & p=$!; sleep "$S"; kill -9 $p 2>/dev/null; wait $p; echo $?"#,
                ],
                environment: [
                    "V": Self.vaultctl, "D": directory, "A": arguments,
                    "S": String(format: "%.3f", Double((round * 137) % 1200) / 1000),
                ])
            let export = try succeed(["--json", "prefs", "export", "ui"]).standardOutput
            let entries = try #require(
                try jsonObject(export)["entries"] as? [[String: Any]], "\(result)", sourceLocation: sourceLocation)
            let values = Dictionary(
                uniqueKeysWithValues: entries.map { ($0["key"] as! String, $0["value"] as? String) })
            #expect(values["own"] == "kept", "round \(round): the store's own key was lost", sourceLocation: sourceLocation)
            let imported = keys.filter { values[$0] != nil }
            #expect(
                imported.isEmpty || imported.count == keys.count,
                "round \(round): \(imported.count) of \(keys.count) keys", sourceLocation: sourceLocation)
            #expect(
                imported.allSatisfy { values[$0] == "v-\($0)" }, "round \(round): a value the file does not hold",
                sourceLocation: sourceLocation)
            try after(round)
            outcomes[imported.isEmpty ? "old store" : "whole import", default: 0] += 1
        }
        return outcomes
    }

    /// `makeStore`, then one flipped bit in the value of `theme`: that record fails its checksum.
    func makeDamagedStore(_ id: String = "ui") throws {
        try makeStore(id)
        var data = try bytes(id + ".prefs")
        data[Self.themeValueOffset + 1] ^= 0x01
        try write(data, to: id + ".prefs")
    }

    /// Marks a store's header as sealed (flag bit 0) and fixes the header checksum: a store that only its
    /// key could read, whose records still verify by checksum.
    func markSealed(_ id: String) throws {
        var data = try bytes(id + ".prefs")
        data[12] |= 1
        let crc = crc32c(data[0..<124])
        for i in 0..<4 { data[124 + i] = UInt8(truncatingIfNeeded: crc >> (8 * UInt32(i))) }
        try write(data, to: id + ".prefs")
    }
}

/// The CRC32C a record of the store file `file` ends with, over `record` (its bytes from its magic up to the CRC):
/// from format version 5 (header bytes 8..<10) it covers the magic, then the header's generation (bytes 32..<40),
/// then the rest of the record (Documentation/FileFormat.md, "Records").
func recordCRC(_ record: some Collection<UInt8>, inFile file: [UInt8]) -> UInt32 {
    let bytes = Array(record)
    let version = Int(file[8]) | Int(file[9]) << 8
    guard version >= 5 else { return crc32c(bytes) }
    return crc32c(bytes[0..<4] + file[32..<40] + bytes[4...])
}

/// CRC32C (Castagnoli, reflected 0x82F63B78), as the file format uses.
func crc32c(_ bytes: some Collection<UInt8>) -> UInt32 {
    var crc: UInt32 = 0xFFFF_FFFF
    for byte in bytes {
        crc ^= UInt32(byte)
        for _ in 0..<8 { crc = crc & 1 != 0 ? (crc >> 1) ^ 0x82F6_3B78 : crc >> 1 }
    }
    return ~crc
}

/// Checks that `text` is exactly one JSON document whose objects all have their keys in ascending order, and
/// returns it parsed.
func jsonDocument(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> Any {
    var checker = SortedJSONChecker(bytes: Array(text.utf8))
    let problem = checker.check()
    #expect(problem == nil, "\(problem ?? ""):\n\(text)", sourceLocation: sourceLocation)
    return try JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])
}

/// A JSON number as an Int64 (JSONSerialization gives NSNumbers).
func number(_ value: Any?) -> Int64? {
    (value as? NSNumber)?.int64Value
}

/// `jsonDocument` for a top-level object.
func jsonObject(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> [String: Any] {
    try #require(
        try jsonDocument(text, sourceLocation: sourceLocation) as? [String: Any], sourceLocation: sourceLocation)
}

/// A small JSON scanner that checks structure and key order (byte order, as `.sortedKeys` writes them).
struct SortedJSONChecker {
    let bytes: [UInt8]
    var index = 0

    init(bytes: [UInt8]) { self.bytes = bytes }

    /// nil when the text is one document with sorted keys; otherwise what is wrong.
    mutating func check() -> String? {
        skipSpace()
        if let problem = value() { return problem }
        skipSpace()
        return index == bytes.count ? nil : "text after the document at byte \(index)"
    }

    private mutating func skipSpace() {
        while index < bytes.count, [0x20, 0x0A, 0x0D, 0x09].contains(bytes[index]) { index += 1 }
    }

    private mutating func value() -> String? {
        guard index < bytes.count else { return "unexpected end" }
        switch bytes[index] {
        case UInt8(ascii: "{"):
            index += 1
            var keys: [[UInt8]] = []
            skipSpace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
                index += 1
                return nil
            }
            while true {
                skipSpace()
                guard let key = string() else { return "expected a key at byte \(index)" }
                if let last = keys.last, !last.lexicographicallyPrecedes(key) {
                    return
                        "key \(String(decoding: key, as: UTF8.self)) is not after \(String(decoding: last, as: UTF8.self))"
                }
                keys.append(key)
                skipSpace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { return "expected : at \(index)" }
                index += 1
                skipSpace()
                if let problem = value() { return problem }
                skipSpace()
                guard index < bytes.count else { return "unterminated object" }
                if bytes[index] == UInt8(ascii: ",") {
                    index += 1
                    continue
                }
                guard bytes[index] == UInt8(ascii: "}") else { return "expected , or } at byte \(index)" }
                index += 1
                return nil
            }
        case UInt8(ascii: "["):
            index += 1
            skipSpace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
                index += 1
                return nil
            }
            while true {
                skipSpace()
                if let problem = value() { return problem }
                skipSpace()
                guard index < bytes.count else { return "unterminated array" }
                if bytes[index] == UInt8(ascii: ",") {
                    index += 1
                    continue
                }
                guard bytes[index] == UInt8(ascii: "]") else { return "expected , or ] at byte \(index)" }
                index += 1
                return nil
            }
        case UInt8(ascii: "\""):
            return string() == nil ? "unterminated string at byte \(index)" : nil
        default:
            let start = index
            while index < bytes.count, !",]} \n\r\t".utf8.contains(bytes[index]) { index += 1 }
            return index > start ? nil : "unexpected byte at \(index)"
        }
    }

    /// The raw (still escaped) bytes of a string.
    private mutating func string() -> [UInt8]? {
        guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { return nil }
        index += 1
        let start = index
        while index < bytes.count, bytes[index] != UInt8(ascii: "\"") {
            index += bytes[index] == UInt8(ascii: "\\") ? 2 : 1
        }
        guard index < bytes.count else { return nil }
        defer { index += 1 }
        return Array(bytes[start..<index])
    }
}
