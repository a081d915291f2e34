public import FoundationEssentials
import SystemLayer

extension PrefsStore {
    /// Every live entry as a JSON document that ``importJSON(_:)`` turns back into the same store (and whose
    /// re-export is byte-identical):
    ///
    /// ```json
    /// {
    ///   "entries" : [
    ///     { "key" : "theme", "type" : "string", "value" : "dark" },
    ///     { "expiresAt" : 1767225600000, "key" : "token", "type" : "bytes", "value" : "AQID" }
    ///   ],
    ///   "format" : "prefskv-export",
    ///   "store" : "ui",
    ///   "version" : 1
    /// }
    /// ```
    ///
    /// Types: `bool`, `int` (exact Int64), `double` (a JSON number, or `"nan"`, `"inf"`, `"-inf"`),
    /// `string`, `bytes` (base64), `strings` (array), `json` (the stored JSON text, in a string).
    /// `expiresAt` is in milliseconds since the Unix epoch and absent for values that do not expire.
    /// Keys are sorted. A sealed store exports its values in clear: treat the document as a secret.
    ///
    /// ```swift
    /// let document = try store.exportJSON()
    /// ```
    public func exportJSON() throws -> Data {
        let entries = try read { e throws(PrefsError) in try e.exportEntries() }
        let document = ExportDocument(format: ExportDocument.formatName, version: 1, store: id, entries: entries)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
        do {
            return try encoder.encode(document)
        } catch {
            throw PrefsError(.io, "cannot encode the export of \(path)", path: path, underlying: error)
        }
    }

    /// Replaces the store's contents with a document from ``exportJSON()``, in one transaction. Entries that
    /// have already expired are skipped. A malformed document throws ``PrefsError/Code/invalidInput`` and
    /// changes nothing.
    ///
    /// ```swift
    /// try store.importJSON(try Data(contentsOf: exportURL))
    /// ```
    public func importJSON(_ data: Data) throws {
        let document = try Self.checkedExportDocument(data)
        var ops: [TransactionOp] = [.removeAll]
        let now = Sys.nowMilliseconds()
        for entry in document.entries {
            if let expiresAt = entry.expiresAt, expiresAt <= now { continue }
            ops.append(.set(name: entry.key, type: entry.type, value: entry.bytes, expiresAt: entry.expiresAt ?? 0))
        }
        try write { tx in tx.operations = ops }
    }

    /// Checks that `data` is a document ``importJSON(_:)`` accepts, without a store (for vaultctl, which must
    /// not create a store for a document it would refuse). Throws what `importJSON` would throw.
    package static func validateExport(_ data: Data) throws {
        _ = try checkedExportDocument(data)
    }

    /// What a decoding error means, in words: which field is missing or of the wrong kind, and where.
    static func plainWords(_ error: any Error) -> String {
        func place(_ path: [any CodingKey]) -> String {
            guard !path.isEmpty else { return "the document" }
            return path.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined()
                .trimmingPrefix(".").description
        }
        switch error as? DecodingError {
        case .keyNotFound(let key, let context)?:
            let container = context.codingPath.isEmpty ? "the document" : place(context.codingPath)
            return "\(container) has no \"\(key.stringValue)\" field"
        case .typeMismatch(let type, let context)?:
            return "\(place(context.codingPath)) is not \(Self.kind(type))"
        case .valueNotFound(let type, let context)?:
            return "\(place(context.codingPath)) is null, not \(Self.kind(type))"
        case .dataCorrupted(let context)?:
            return context.codingPath.isEmpty ? "it is not JSON" : "\(place(context.codingPath)) is not valid"
        default:
            return "it cannot be decoded"
        }
    }

    private static func kind(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: return "a string"
        case is Int.Type, is Int64.Type, is UInt8.Type: return "an integer"
        case is Double.Type: return "a number"
        case is Bool.Type: return "a boolean"
        default: return "what an export holds there"
        }
    }

    /// Decodes an export document and checks its format, version, keys and value sizes.
    private static func checkedExportDocument(_ data: Data) throws(PrefsError) -> ExportDocument {
        let document: ExportDocument
        do {
            document = try JSONDecoder().decode(ExportDocument.self, from: data)
        } catch {
            throw PrefsError(
                .invalidInput, "the document is not a PrefsKV export: \(Self.plainWords(error))", underlying: error)
        }
        guard document.format == ExportDocument.formatName, document.version == 1 else {
            throw PrefsError(
                .invalidInput,
                "the document's format is \"\(document.format)\" version \(document.version), "
                    + "expected \"\(ExportDocument.formatName)\" version 1")
        }
        for entry in document.entries {
            try ValueCodec.validate(key: entry.key)
            try ValueCodec.validate(length: entry.bytes.count, key: entry.key)
        }
        return document
    }

    /// Every live entry's key, type name, stored value size and expiry, sorted by key (for vaultctl).
    package func entries() throws -> [PrefsEntryInfo] {
        try read { e throws(PrefsError) in
            var out: [PrefsEntryInfo] = []
            try e.forEachLiveEntry { name, entry throws(PrefsError) in
                let size = try e.withValue(of: entry, name: name) { $0.count }
                out.append(
                    PrefsEntryInfo(
                        key: name, type: entry.type.name, valueSize: size,
                        expiresAt: entry.expiresAt == 0 ? nil : entry.expiresAt))
            }
            return out.sorted { $0.key < $1.key }
        }
    }
}

/// One entry as vaultctl lists it.
package struct PrefsEntryInfo: Sendable, Equatable {
    package var key: String
    /// `bool`, `int`, `double`, `string`, `bytes`, `strings` or `json`.
    package var type: String
    /// Bytes of the stored (plain) value.
    package var valueSize: Int
    /// Milliseconds since the Unix epoch, nil when it does not expire.
    package var expiresAt: Int64?
}

extension Engine {
    /// Live entries with plain values, sorted by key.
    func exportEntries() throws(PrefsError) -> [ExportEntry] {
        try readWholeLog()
        let now = Sys.nowMilliseconds()
        var out: [ExportEntry] = []
        for entry in log.index.values where !entry.isExpired(now: now) {
            let (name, value) = try plainEntry(entry)
            out.append(
                ExportEntry(
                    key: name, type: entry.type, bytes: value, expiresAt: entry.expiresAt == 0 ? nil : entry.expiresAt))
        }
        return out.sorted { $0.key < $1.key }
    }
}

struct ExportDocument: Codable, Sendable {
    static let formatName = "prefskv-export"
    var format: String
    var version: Int
    var store: String
    var entries: [ExportEntry]
}

/// An entry of the export document; `bytes` is the stored value encoding (see ValueCodec).
struct ExportEntry: Codable, Sendable {
    var key: String
    var type: ValueType
    var bytes: [UInt8]
    var expiresAt: Int64?

    init(key: String, type: ValueType, bytes: [UInt8], expiresAt: Int64?) {
        self.key = key
        self.type = type
        self.bytes = bytes
        self.expiresAt = expiresAt
    }

    private enum CodingKeys: String, CodingKey { case key, type, value, expiresAt }

    struct Invalid: Error, CustomStringConvertible {
        var description: String
    }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(key, forKey: .key)
        try c.encode(type.name, forKey: .type)
        try c.encodeIfPresent(expiresAt, forKey: .expiresAt)
        try bytes.withUnsafeBytes { raw in
            switch type {
            case .bool: try c.encode(raw.first != 0, forKey: .value)
            case .int64: try c.encode(Int64(littleEndian: raw.loadUnaligned(as: Int64.self)), forKey: .value)
            case .double:
                let d = Double(bitPattern: UInt64(littleEndian: raw.loadUnaligned(as: UInt64.self)))
                if d.isNaN {
                    try c.encode("nan", forKey: .value)
                } else if d.isInfinite {
                    try c.encode(d < 0 ? "-inf" : "inf", forKey: .value)
                } else {
                    try c.encode(d, forKey: .value)
                }
            case .string, .json: try c.encode(String(decoding: raw, as: UTF8.self), forKey: .value)
            case .bytes: try c.encode(Data(raw).base64EncodedString(), forKey: .value)
            case .stringArray: try c.encode(ValueCodec.decodeStrings(raw) ?? [], forKey: .value)
            }
        }
    }

    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        key = try c.decode(String.self, forKey: .key)
        let typeName = try c.decode(String.self, forKey: .type)
        guard let type = ValueType(name: typeName) else { throw Invalid(description: "unknown type \"\(typeName)\"") }
        self.type = type
        expiresAt = try c.decodeIfPresent(Int64.self, forKey: .expiresAt)
        switch type {
        case .bool: bytes = ValueCodec.bytes(try c.decode(Bool.self, forKey: .value))
        case .int64: bytes = ValueCodec.bytes(try c.decode(Int64.self, forKey: .value))
        case .double:
            if let text = try? c.decode(String.self, forKey: .value) {
                switch text {
                case "nan": bytes = ValueCodec.bytes(Double.nan)
                case "inf": bytes = ValueCodec.bytes(Double.infinity)
                case "-inf": bytes = ValueCodec.bytes(-Double.infinity)
                default:
                    // Never the text itself: messages name keys, not values.
                    throw Invalid(description: "the double of key \"\(key)\" is a string other than nan, inf or -inf")
                }
            } else {
                bytes = ValueCodec.bytes(try c.decode(Double.self, forKey: .value))
            }
        case .string, .json: bytes = Array(try c.decode(String.self, forKey: .value).utf8)
        case .bytes:
            guard let data = Data(base64Encoded: try c.decode(String.self, forKey: .value)) else {
                throw Invalid(description: "the bytes of key \"\(key)\" are not base64")
            }
            bytes = Array(data)
        case .stringArray: bytes = ValueCodec.encode(try c.decode([String].self, forKey: .value))
        }
    }
}
