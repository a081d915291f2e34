// What vaultctl needs beyond the public API: typed values without knowing their type, store files by name
// and quarantine copies. `package`, not `public`: apps do not need it.
import SystemLayer

/// A stored value with its type, as vaultctl reads and writes it.
package enum PrefsValue: Sendable, Equatable {
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case bytes([UInt8])
    case strings([String])
    /// The stored JSON text (see ``PrefsStore/setCodable(_:forKey:expiresAfter:)``).
    case json(String)

    /// `bool`, `int`, `double`, `string`, `bytes`, `strings` or `json`: the names of exports and of
    /// ``PrefsEntryInfo/type``.
    package var typeName: String { valueType.name }

    var valueType: ValueType {
        switch self {
        case .bool: .bool
        case .int: .int64
        case .double: .double
        case .string: .string
        case .bytes: .bytes
        case .strings: .stringArray
        case .json: .json
        }
    }

    /// Decodes a stored encoding of `type`; nil when the bytes do not fit it.
    init?(type: ValueType, bytes: UnsafeRawBufferPointer) {
        switch type {
        case .bool:
            guard bytes.count == 1 else { return nil }
            self = .bool(bytes[0] != 0)
        case .int64:
            guard bytes.count == 8 else { return nil }
            self = .int(Int64(littleEndian: bytes.loadUnaligned(as: Int64.self)))
        case .double:
            guard bytes.count == 8 else { return nil }
            self = .double(Double(bitPattern: UInt64(littleEndian: bytes.loadUnaligned(as: UInt64.self))))
        case .string: self = .string(String(decoding: bytes, as: UTF8.self))
        case .bytes: self = .bytes(Array(bytes))
        case .stringArray:
            guard let strings = ValueCodec.decodeStrings(bytes) else { return nil }
            self = .strings(strings)
        case .json: self = .json(String(decoding: bytes, as: UTF8.self))
        }
    }

    /// The stored encoding.
    var encoded: [UInt8] {
        switch self {
        case .bool(let value): ValueCodec.bytes(value)
        case .int(let value): ValueCodec.bytes(value)
        case .double(let value): ValueCodec.bytes(value)
        case .string(let text), .json(let text): Array(text.utf8)
        case .bytes(let bytes): bytes
        case .strings(let strings): ValueCodec.encode(strings)
        }
    }
}

/// The files of one store in a directory (``PrefsStore/storeFiles(in:)``).
package struct PrefsStoreFiles: Sendable, Equatable {
    /// The store id: the data file's name without `.prefs`.
    package var id: String
    /// `<directory>/<id>.prefs`.
    package var dataPath: String
    /// `<directory>/<id>.prefs.corrupt-<time>[-n]`, sorted.
    package var quarantinePaths: [String]
}

/// A quarantine copy of a damaged store (``PrefsStore/quarantineCopies(in:store:)``).
package struct PrefsQuarantineCopy: Sendable, Equatable {
    /// The store it is a copy of.
    package var store: String
    /// `<directory>/<store>.prefs.corrupt-<stamp>[-n]`.
    package var path: String
    /// When it was made, UTC, as its name says: `yyyyMMdd'T'HHmmss'Z'`.
    package var stamp: String
    /// The `n` of a second copy made in the same second (0 for the first).
    package var attempt: Int
}

extension PrefsStore {
    /// The quarantine copies in `directory` (of `store` only, when given), oldest first (by the time in their
    /// names, then their number). A missing directory has none. Opens and changes nothing.
    package static func quarantineCopies(in directory: String, store: String? = nil) throws -> [PrefsQuarantineCopy] {
        if let store { try StorePaths.validate(storeID: store) }
        let names: [String]
        switch Sys.directoryEntries(directory) {
        case .success(let found): names = found
        case .failure(let e) where e == .noEntry: return []
        case .failure(let e): throw PrefsError.system(e, "opendir", "cannot list the store directory", path: directory)
        }
        let marker = Array(".prefs.corrupt-".utf8)
        var copies: [PrefsQuarantineCopy] = []
        for name in names {
            // The last marker: a store id may itself contain one (`ui.prefs.corrupt-x` is a store's id).
            let bytes = Array(name.utf8)
            guard bytes.count > marker.count,
                let start = (0...(bytes.count - marker.count)).last(where: { bytes[$0..<$0 + marker.count].elementsEqual(marker) })
            else { continue }
            let id = String(decoding: bytes[..<start], as: UTF8.self)
            guard store == nil || id == store, StorePaths.isValid(storeID: id),
                Recovery.isQuarantineName(name, dataFileName: id + ".prefs")
            else { continue }
            let suffix = bytes[(start + marker.count)...]
            let stamp = String(decoding: suffix.prefix(16), as: UTF8.self)
            let attempt = suffix.count > 17 ? Int(String(decoding: suffix.dropFirst(17), as: UTF8.self)) ?? 0 : 0
            copies.append(PrefsQuarantineCopy(store: id, path: join(directory, name), stamp: stamp, attempt: attempt))
        }
        return copies.sorted { ($0.stamp, $0.attempt, $0.store) < ($1.stamp, $1.attempt, $1.store) }
    }

    /// The value under `key` with its type, or nil when absent or expired.
    package func value(forKey key: String) throws -> PrefsValue? {
        try read { e throws(PrefsError) -> PrefsValue? in
            guard let entry = try e.liveEntry(forName: key) else { return nil }
            return try e.withValue(of: entry, name: key) { bytes throws(PrefsError) -> PrefsValue in
                guard let value = PrefsValue(type: entry.type, bytes: bytes) else {
                    throw PrefsError(
                        .corrupted, "the \(entry.type.name) value under key \"\(key)\" has an invalid encoding",
                        path: e.paths.data)
                }
                return value
            }
        }
    }

    /// Stores `value` under `key` with its type. A `.json` value is stored as the text given: the caller
    /// checks that it is JSON.
    package func set(_ value: PrefsValue, forKey key: String, expiresAfter: Duration? = nil) throws {
        let bytes = value.encoded
        try bytes.withUnsafeBytes { bytes in
            try writeOne(key, value.valueType, expiresAfter, length: bytes.count) { out in
                if !bytes.isEmpty { out.copyMemory(from: bytes) }
            }
        }
    }

    /// Throws ``PrefsError/Code/invalidKey`` for a key no store accepts (empty, or over 16 KiB of UTF-8).
    package static func validate(key: String) throws {
        try ValueCodec.validate(key: key)
    }

    /// The data file of the store `id` in `directory`, `<directory>/<id>.prefs`, after checking the id.
    package static func dataPath(id: String, directory: String) throws -> String {
        try StorePaths.validate(storeID: id)
        return StorePaths(id: id, directory: directory).data
    }

    /// The quarantine copies of the store `id` in `directory`, sorted.
    package static func quarantineCopies(id: String, directory: String) throws -> [String] {
        try StorePaths.validate(storeID: id)
        return try Recovery.quarantineCopies(of: StorePaths(id: id, directory: directory)).map { join(directory, $0) }
    }

    /// Every store in `directory`: each regular file named `<id>.prefs`, with its quarantine copies, sorted by
    /// id. Lock files, temporary images and quarantine copies are not stores. Opens and changes nothing.
    package static func storeFiles(in directory: String) throws -> [PrefsStoreFiles] {
        let names = try Sys.directoryEntries(directory).orThrow(
            "opendir", "cannot list the store directory", path: directory)
        var stores: [PrefsStoreFiles] = []
        for name in names where name.hasSuffix(".prefs") && name.utf8.count > ".prefs".utf8.count {
            let path = join(directory, name)
            guard case .success(let status) = Sys.lstat(path), status.isRegular else { continue }
            let quarantined = names.filter { Recovery.isQuarantineName($0, dataFileName: name) }.sorted()
            stores.append(
                PrefsStoreFiles(
                    id: String(name.dropLast(".prefs".count)), dataPath: path,
                    quarantinePaths: quarantined.map { join(directory, $0) }))
        }
        return stores.sorted { $0.id < $1.id }
    }

    private static func join(_ directory: String, _ name: String) -> String {
        Sys.joinPath(directory, name)
    }
}
