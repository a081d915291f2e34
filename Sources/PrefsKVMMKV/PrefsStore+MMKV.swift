// Importing an MMKV store into a PrefsKV store: its log replayed (MMKVFile.swift), each value decoded by the type
// the caller gives its key (MMKVType.swift; MMKV stores none), expired keys dropped and the others' expiry kept,
// in one transaction. Repeatable, and the MMKV files are only read.
public import PrefsKV
import SystemLayer

/// The crypt key of an encrypted MMKV store: AES-128 (MMKV's default; the key zero-padded or cut to 16 bytes, as
/// MMKV does) or AES-256 (a store MMKV opened with its AES-256 option; 32 bytes). Its bytes are overwritten with
/// zeros when the last copy of the key goes.
///
/// ```swift
/// let key = MMKVCryptKey.aes128(Array("my-crypt-key".utf8))
/// ```
public struct MMKVCryptKey: Sendable {
    /// The padded key in memory of its own, wiped at deinit.
    private final class Storage: @unchecked Sendable {
        // Immutable after init; only read (`withBytes`) and wiped at deinit.
        let bytes: UnsafeMutableRawBufferPointer

        init(_ key: [UInt8], length: Int) {
            bytes = .allocate(byteCount: length, alignment: 16)
            bytes.initializeMemory(as: UInt8.self, repeating: 0)
            for (i, byte) in key.prefix(length).enumerated() { bytes[i] = byte }
        }

        deinit {
            bytes.initializeMemory(as: UInt8.self, repeating: 0)
            bytes.deallocate()
        }
    }

    private let storage: Storage
    let bits: Int

    /// AES-128 with `key` zero-padded or cut to 16 bytes, as MMKV does with a crypt key of another length.
    public static func aes128(_ key: [UInt8]) -> MMKVCryptKey {
        MMKVCryptKey(storage: Storage(key, length: 16), bits: 128)
    }

    /// AES-256 with `key` zero-padded or cut to 32 bytes.
    public static func aes256(_ key: [UInt8]) -> MMKVCryptKey {
        MMKVCryptKey(storage: Storage(key, length: 32), bits: 256)
    }

    /// Calls `body` with the padded key.
    func withBytes<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R { body(UnsafeRawBufferPointer(storage.bytes)) }

    /// The plaintext of `ciphertext`: one AES-CFB-128 stream from `iv`.
    func decrypt(_ ciphertext: [UInt8], iv: [UInt8], path: String) throws(PrefsError) -> [UInt8] {
        let crypto = try LibCrypto.loaded(for: path)
        guard let context = crypto.newContext() else {
            throw PrefsError(.io, "OpenSSL could not allocate a cipher context", path: path)
        }
        // Frees OpenSSL's copy of the key schedule too (EVP_CIPHER_CTX_free cleanses it).
        defer { crypto.freeContext(context) }
        let cipher = bits == 256 ? crypto.aes256CFB() : crypto.aes128CFB()
        var plaintext = [UInt8](repeating: 0, count: ciphertext.count)
        var written: Int32 = 0
        let ok = withBytes { key in
            iv.withUnsafeBufferPointer { iv in
                crypto.decryptInit(
                    context, cipher, nil, key.baseAddress?.assumingMemoryBound(to: UInt8.self), iv.baseAddress) == 1
            }
        }
        // The log is at most MMKVLog.maximumLogLength bytes: its length fits OpenSSL's Int32.
        let decrypted =
            ok
            && ciphertext.withUnsafeBufferPointer { source in
                plaintext.withUnsafeMutableBufferPointer { target in
                    crypto.decryptUpdate(
                        context, target.baseAddress, &written, source.baseAddress, Int32(source.count)) == 1
                }
            }
        guard decrypted, Int(written) == ciphertext.count else {
            plaintext.wipe()
            throw PrefsError(.io, "OpenSSL could not decrypt the MMKV log", path: path)
        }
        return plaintext
    }
}

/// An MMKV store read, checked and decoded, ready to be written into a store (`PrefsStore.importMMKV`): read once,
/// so that vaultctl checks and imports the same values.
package struct MMKVImport {
    var values: [(key: String, value: PrefsValue, expiresAt: Int64)] = []
    var expired: [String] = []
    var untyped: [String] = []
    var unreadableFrom: Int?

    /// Reads the MMKV store at `path` and decodes its values; `now` (milliseconds since the Unix epoch) decides
    /// which have expired.
    package static func read(
        path: String, cryptKey: MMKVCryptKey?, types: [String: MMKVType], salvage: Bool,
        now: Int64 = Sys.nowMilliseconds()
    ) throws(PrefsError) -> MMKVImport {
        let log = try MMKVLog.read(path: path, cryptKey: cryptKey, salvage: salvage)
        var result = MMKVImport(unreadableFrom: log.unreadableFrom)
        for (key, encoded, offset) in log.values {
            var bytes = encoded
            var expiresAt: Int64 = 0
            if log.autoExpire {
                guard bytes.count >= 4 else {
                    throw PrefsError(
                        .corrupted,
                        "the value of key \"\(key)\" (record at offset \(offset) of \(path)) is "
                            + "\(bytes.count) bytes, too short for the expiry an auto-expiring store appends",
                        path: path)
                }
                let seconds = Int64(bytes.loadUInt32(at: bytes.count - 4))
                bytes.removeLast(4)
                if seconds != 0 && seconds * 1000 <= now {
                    result.expired.append(key)
                    continue
                }
                expiresAt = seconds * 1000
            }
            let value: PrefsValue
            if let type = PrefsStore.type(of: key, in: types) {
                guard let decoded = type.decode(bytes) else {
                    throw PrefsError(
                        .invalidInput,
                        "the value of key \"\(key)\" (record at offset \(offset) of \(path), "
                            + "\(bytes.count) bytes) is not MMKV's encoding of \(type); nothing was imported",
                        path: path)
                }
                value = decoded
            } else {
                result.untyped.append(key)
                value = .bytes(bytes)
            }
            do throws(PrefsError) {
                try PrefsStore.checkImported(key: key, value: value)
            } catch {
                throw PrefsError(
                    error.code, "the record at offset \(offset) of \(path) cannot be imported: \(error.message)",
                    path: path)
            }
            result.values.append((key, value, expiresAt))
        }
        result.values.sort { $0.key < $1.key }
        result.expired.sort()
        result.untyped.sort()
        return result
    }
}

extension PrefsStore {
    /// Imports an MMKV store, in one transaction: MMKV's log replayed (the last record of a key wins, an empty value
    /// deletes), each value decoded by the type `types` gives its key, keys whose auto-expiry has passed dropped
    /// and the others' expiry kept. The MMKV files are only read.
    ///
    /// ```swift
    /// // MMKV's files ~/.local/share/app/mmkv/ui and ui.crc
    /// let report = try store.importMMKV(
    ///     at: mmkvDirectory + "/ui", types: ["sidebar.width": .int32, "theme": .string, "recent.*": .strings])
    /// if !report.untyped.isEmpty { logger.warning("imported as bytes: \(report.untyped)") }
    /// ```
    ///
    /// MMKV stores no types: `types` maps a key, or a pattern with `*` (any run of characters), to how the app
    /// wrote it; a key matches itself first, then the longest pattern that matches it. A key with no type is
    /// imported as `bytes`, MMKV's encoding of the value as it is, and listed in ``PrefsImportReport/untyped``.
    /// Repeatable as ``importJSONObject(_:replacing:dryRun:)`` is: an import run again changes nothing.
    ///
    /// - Parameters:
    ///   - path: the MMKV data file (`<directory>/<mmapID>`); its meta file is `path + ".crc"`.
    ///   - cryptKey: the crypt key of an encrypted store.
    ///   - salvage: keep the records that parse when the checksum does not match or a record does not parse,
    ///     instead of refusing (``PrefsImportReport/unreadableFrom`` says where they stopped). A wrong key is
    ///     refused even so.
    /// - Throws: ``PrefsError/Code/corrupted`` naming the file (and the offset of a record that does not parse)
    ///   when the checksum does not match (or the meta file is another store's), the file is truncated or a record
    ///   does not parse; `wrongKey` when an encrypted log whose checksum matches does not parse under the key;
    ///   `encrypted` without a key for an encrypted store, `notEncrypted` with one for a plain store;
    ///   `invalidInput` when a value does not decode as its type, and `invalidKey` or `valueTooLarge` for a key or
    ///   value no store takes, naming the record's offset; `notFound` without the files. Nothing is written then.
    @discardableResult
    public func importMMKV(
        at path: String, cryptKey: MMKVCryptKey? = nil, types: [String: MMKVType] = [:], replacing: Bool = false,
        salvage: Bool = false, dryRun: Bool = false
    ) throws -> PrefsImportReport {
        let prepared = try MMKVImport.read(path: path, cryptKey: cryptKey, types: types, salvage: salvage)
        return try importMMKV(prepared, replacing: replacing, dryRun: dryRun) { _, _ in }
    }

    /// Writes an MMKV store read by `MMKVImport.read`, calling `progress(keysChecked, keys)` as it compares keys
    /// with the store (vaultctl's progress lines).
    package func importMMKV(
        _ prepared: MMKVImport, replacing: Bool, dryRun: Bool, progress: (Int, Int) -> Void
    ) throws -> PrefsImportReport {
        var report = try importTypedValues(prepared.values, replacing: replacing, dryRun: dryRun, progress: progress)
        report.expired = prepared.expired
        report.untyped = prepared.untyped
        report.unreadableFrom = prepared.unreadableFrom
        return report
    }

    /// The type `types` gives `key`: its own entry, else the longest pattern (with `*`) that matches it.
    static func type(of key: String, in types: [String: MMKVType]) -> MMKVType? {
        if let type = types[key] { return type }
        let text = Array(key.utf8)
        return
            types
            .filter { $0.key.contains("*") && Self.matches(text, Array($0.key.utf8)) }
            .max { ($0.key.utf8.count, $1.key) < ($1.key.utf8.count, $0.key) }?.value
    }

    /// Whether `text` matches `pattern`, where `*` stands for any run of bytes: the linear matcher that, on a
    /// mismatch, lets the last `*` take one byte more (never exponential, whatever the pattern).
    static func matches(_ text: [UInt8], _ pattern: [UInt8]) -> Bool {
        let star = UInt8(ascii: "*")
        var t = 0
        var p = 0
        var lastStar: Int?
        var resume = 0
        while t < text.count {
            if p < pattern.count && pattern[p] == star {
                lastStar = p
                p += 1
                resume = t
            } else if p < pattern.count && pattern[p] == text[t] {
                p += 1
                t += 1
            } else if let lastStar {
                p = lastStar + 1
                resume += 1
                t = resume
            } else {
                return false
            }
        }
        while p < pattern.count && pattern[p] == star { p += 1 }
        return p == pattern.count
    }
}
