// Bringing an app's settings in from JSON files it kept before: a flat settings object (electron-store's
// config.json, a hand-written settings file) becomes typed keys, and a Zustand `persist` payload becomes a
// PersistedState of its name and version, so that the app's migration runs on it. Repeatable: a key that already
// holds the value is left, one the app changed since is kept unless told; one transaction; the file only read.
public import FoundationEssentials

/// What an import from a JSON file did (or, with `dryRun`, would do). Key lists are sorted.
public struct PrefsImportReport: Sendable, Equatable {
    /// Keys written: absent before, or (with `replacing`) holding another value.
    public var imported: [String] = []
    /// Keys that already held exactly this value: nothing written.
    public var unchanged: [String] = []
    /// Keys the store holds another value for, left as they are (an import run again after the app changed them).
    public var kept: [String] = []
    /// Keys whose value is JSON `null`: nothing to store.
    public var skipped: [String] = []
    /// Keys whose expiry had passed (an MMKV file with auto key expiry): not imported.
    public var expired: [String] = []
    /// Keys the caller gave no type for (an MMKV file, which stores none): imported as `bytes`, MMKV's encoding of
    /// the value as it is.
    public var untyped: [String] = []
    /// The offset in the source file where records stopped parsing, when a salvaging import kept only the records
    /// before it; nil when every record parsed.
    public var unreadableFrom: Int?
    /// The type each key of the file gets: `bool`, `int`, `double`, `string`, `bytes`, `strings` or `json`.
    public var types: [String: String] = [:]
    /// Nothing was written.
    public var dryRun = false
}

extension PrefsStore {
    /// Imports a flat JSON object as typed keys, in one transaction: `true`/`false` as `bool`, an integer as
    /// `int` (exact to 64 bits), another number as `double`, a string as `string`, an array of strings as
    /// `strings`, anything else (objects, mixed arrays) as `json`, its JSON text, which ``decode(_:forKey:)``
    /// reads into the app's `Codable` type; `null` is skipped. The file is only read.
    ///
    /// ```swift
    /// // electron-store kept {"theme": "dark", "zoom": 1.25, "window": {"width": 900}}
    /// let report = try store.importJSONObject(try Data(contentsOf: URL(fileURLWithPath: configJSON)))
    /// ```
    ///
    /// Repeatable: a key that already holds the same value is ``PrefsImportReport/unchanged``, and one holding
    /// another value is ``PrefsImportReport/kept`` (the app may have changed it since) unless `replacing`.
    ///
    /// - Throws: ``PrefsError/Code/invalidInput`` when the data is not JSON, not an object, or has a key no store
    ///   accepts or a value too large (nothing is written); what a write throws.
    @discardableResult
    public func importJSONObject(
        _ data: Data, replacing: Bool = false, dryRun: Bool = false
    ) throws
        -> PrefsImportReport
    {
        try importJSONObject(data, replacing: replacing, dryRun: dryRun) { _, _ in }
    }

    /// ``importJSONObject(_:replacing:dryRun:)``, calling `progress(keysChecked, keys)` as it compares keys with the
    /// store (vaultctl's progress lines).
    package func importJSONObject(
        _ data: Data, replacing: Bool, dryRun: Bool, progress: (Int, Int) -> Void
    ) throws -> PrefsImportReport {
        guard case .object(let members) = try JSONValue.parse(data, what: "the document") else {
            throw PrefsError(.invalidInput, "the document is not a JSON object of settings ({\"key\": value, ...})")
        }
        var values: [(String, ValueType, [UInt8])] = []
        var skipped: [String] = []
        for (key, value) in members.sorted(by: { $0.key < $1.key }) {
            try ValueCodec.validate(key: key)
            guard let (type, bytes) = try value.stored(key: key) else {
                skipped.append(key)
                continue
            }
            try ValueCodec.validate(length: bytes.count, key: key)
            values.append((key, type, bytes))
        }
        var report = try importValues(
            values.map { ($0.0, $0.1, $0.2, 0) }, replacing: replacing, dryRun: dryRun, progress: progress)
        report.skipped = skipped
        return report
    }

    /// Imports a Zustand `persist` payload, `{"state": ..., "version": n}` (what its JSON storage wrote), as the
    /// ``PersistedState`` named `name`: stored as that state at version `n`, so that a `PersistedState` of a higher
    /// version migrates it at its first hydration, as it would any state an older release wrote.
    ///
    /// ```swift
    /// try store.importPersistedState(try Data(contentsOf: URL(fileURLWithPath: payload)), as: "settings")
    /// let settings = PersistedState(name: "settings", version: 2, defaults: Settings(), store: store) { old in ... }
    /// ```
    ///
    /// Repeatable as ``importJSONObject(_:replacing:dryRun:)`` is.
    ///
    /// - Throws: ``PrefsError/Code/invalidInput`` when the data is not such a payload (no `state`, a `version` that
    ///   is not a non-negative integer) or `name` is no key; nothing is written.
    @discardableResult
    public func importPersistedState(
        _ data: Data, as name: String, replacing: Bool = false, dryRun: Bool = false
    )
        throws -> PrefsImportReport
    {
        try ValueCodec.validate(key: name)
        guard case .object(let members) = try JSONValue.parse(data, what: "the payload") else {
            throw PrefsError(.invalidInput, "the payload is not a JSON object ({\"state\": ..., \"version\": n})")
        }
        guard let state = members["state"] else {
            throw PrefsError(.invalidInput, "the payload has no \"state\" field (a Zustand persist payload has one)")
        }
        let version: Int64
        switch members["version"] {
        case nil: version = 0  // Zustand's default
        case .int(let value)? where value >= 0: version = value
        default: throw PrefsError(.invalidInput, "the payload's \"version\" is not a non-negative integer")
        }
        let envelope = try JSONValue.object(["state": state, "version": .int(version)]).canonical(key: name)
        try ValueCodec.validate(length: envelope.count, key: name)
        var report = try importValues(
            [(name, .json, envelope, 0)], replacing: replacing, dryRun: dryRun, progress: { _, _ in })
        report.types = [name: "json"]
        return report
    }

    /// Imports typed values another module read from a file (the MMKV importer, PrefsKVMMKV), as
    /// ``importJSONObject(_:replacing:dryRun:)`` does: keys and sizes checked first (nothing written when one fails),
    /// one transaction. `expiresAt`: milliseconds since the Unix epoch, 0 for never.
    package func importTypedValues(
        _ values: [(key: String, value: PrefsValue, expiresAt: Int64)], replacing: Bool, dryRun: Bool,
        progress: (Int, Int) -> Void = { _, _ in }
    ) throws -> PrefsImportReport {
        var stored: [(String, ValueType, [UInt8], Int64)] = []
        for (key, value, expiresAt) in values {
            try ValueCodec.validate(key: key)
            let (type, bytes) = (value.valueType, value.encoded)
            try ValueCodec.validate(length: bytes.count, key: key)
            stored.append((key, type, bytes, expiresAt))
        }
        return try importValues(stored, replacing: replacing, dryRun: dryRun, progress: progress)
    }

    /// Throws what an import of `key` with `value` would (`invalidKey`, `valueTooLarge`), before anything is written:
    /// the MMKV importer names the record's offset with it.
    package static func checkImported(key: String, value: PrefsValue) throws(PrefsError) {
        try ValueCodec.validate(key: key)
        try ValueCodec.validate(length: value.encoded.count, key: key)
    }

    /// Writes `values` (with their expiry) in one transaction under the writer lock, each compared there with what
    /// the store holds: the same value and expiry is `unchanged`. `progress(checked, total)` is called every 4,096
    /// keys compared and once at the end.
    private func importValues(
        _ values: [(String, ValueType, [UInt8], Int64)], replacing: Bool, dryRun: Bool,
        progress: (Int, Int) -> Void
    ) throws
        -> PrefsImportReport
    {
        func plan() throws -> (PrefsImportReport, [TransactionOp]) {
            var report = PrefsImportReport(dryRun: dryRun)
            var ops: [TransactionOp] = []
            defer { progress(values.count, values.count) }
            for (i, (key, type, bytes, expiresAt)) in values.enumerated() {
                if i & 4095 == 0 { progress(i, values.count) }
                report.types[key] = type.name
                switch try storedValue(key) {
                case let (storedType, stored, storedExpiry)?
                where storedType == type && stored == bytes && storedExpiry == expiresAt:
                    report.unchanged.append(key)
                    continue
                case .some where !replacing:
                    report.kept.append(key)
                    continue
                default:
                    report.imported.append(key)
                    ops.append(.set(name: key, type: type, value: bytes, expiresAt: expiresAt))
                }
            }
            return (report, ops)
        }
        guard !dryRun else { return try plan().0 }
        return try write { tx in
            let (report, ops) = try plan()
            tx.operations = ops
            return report
        }
    }

    /// The type, plain bytes and expiry of `key`'s live value, nil when it has none.
    private func storedValue(_ key: String) throws -> (ValueType, [UInt8], Int64)? {
        try read { e throws(PrefsError) -> (ValueType, [UInt8], Int64)? in
            guard let entry = try e.liveEntry(forName: key) else { return nil }
            return (entry.type, try e.withValue(of: entry, name: key) { Array($0) }, entry.expiresAt)
        }
    }
}

/// A JSON value as a file holds it: integers kept exact, objects re-encoded with sorted keys.
enum JSONValue: Codable, Equatable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    /// Parses `data`; a document that is not JSON is `invalidInput` naming where (the decoder's words).
    static func parse(_ data: Data, what: String) throws(PrefsError) -> JSONValue {
        do {
            return try JSONDecoder().decode(JSONValue.self, from: data)
        } catch {
            let context: String
            if case .dataCorrupted(let corrupted)? = error as? DecodingError,
                let underlying = corrupted.underlyingError
            {
                context = ": \(underlying)"
            } else {
                context = ""
            }
            throw PrefsError(.invalidInput, "\(what) is not JSON\(context)", underlying: error)
        }
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Int64.self) {
            self = .int(value)
        } else if let value = try? container.decode(Double.self) {
            self = .double(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .int(let value): try container.encode(value)
        case .double(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }

    /// Its JSON text with sorted keys: what `setCodable` and `PersistedState` store, so an equal value gives equal
    /// bytes.
    func canonical(key: String) throws(PrefsError) -> [UInt8] { Array(try ValueCodec.json(self, key: key)) }

    /// The store's type and bytes for this value as a key's, nil for `null`.
    func stored(key: String) throws(PrefsError) -> (ValueType, [UInt8])? {
        switch self {
        case .null: return nil
        case .bool(let value): return (.bool, ValueCodec.bytes(value))
        case .int(let value): return (.int64, ValueCodec.bytes(value))
        case .double(let value): return (.double, ValueCodec.bytes(value))
        case .string(let value): return (.string, Array(value.utf8))
        case .array(let items):
            let strings = items.compactMap { item -> String? in
                if case .string(let text) = item { return text }
                return nil
            }
            if strings.count == items.count { return (.stringArray, ValueCodec.encode(strings)) }
            return (.json, try canonical(key: key))
        case .object: return (.json, try canonical(key: key))
        }
    }
}
