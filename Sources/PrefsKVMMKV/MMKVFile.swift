// Reading an MMKV store as MMKV 2.x writes it (Documentation/Importing.md, "MMKV"): the data file `<id>` is a
// log of `varint keyLength, key, varint valueLength, value` records after a 4-byte legacy length and a varint
// that readers skip; the meta file `<id>.crc` holds the log's length, its zlib CRC-32, the AES IV and the flags.
// An encrypted log is one AES-CFB-128 stream under the crypt key. The files are only read, and only as far as
// the log goes.
import PrefsKV
import SystemLayer

/// One MMKV store's log, checked and decrypted, replayed: the last record of a key wins, an empty value deletes.
struct MMKVLog {
    /// Each live key's value bytes as MMKV encoded them (with its 4-byte expiry when `autoExpire`), in the order
    /// the keys were first written, with the offset of its record in the data file.
    var values: [(key: String, value: [UInt8], offset: Int)] = []
    /// The meta file's flag for auto key expiry: every value ends with a 4-byte expiry in Unix seconds.
    var autoExpire = false
    /// Where records stopped parsing in a salvaging read (a data-file offset), nil when every record parsed.
    var unreadableFrom: Int?

    /// Offsets in the meta file (MMKVMetaInfo): CRC-32, version, IV, actual size, flags.
    private enum Meta {
        static let crc = 0
        static let version = 4
        static let iv = 12
        static let actualSize = 28
        static let flags = 104
        static let length = 112
    }
    /// The payload starts after MMKV's legacy 4-byte length.
    private static let payloadStart = 4
    /// The longest log read: MMKV keeps a store in memory too, and a length beyond this is a damaged or hostile
    /// meta file, not an app's preferences.
    static let maximumLogLength = 1 << 30

    /// Reads the store whose data file is `path` (its meta file is `path + ".crc"`). `salvage`: keep the records
    /// that parse when the checksum does not match or a record does not parse, instead of refusing. A wrong crypt
    /// key is refused whatever `salvage` says: a checksum that matches proves the bytes are MMKV's.
    static func read(path: String, cryptKey: MMKVCryptKey?, salvage: Bool) throws(PrefsError) -> MMKVLog {
        let metaPath = path + ".crc"
        let meta = try readFile(metaPath, what: "MMKV meta file", upTo: 4096)
        guard meta.count >= Meta.length else {
            throw PrefsError(
                .corrupted,
                "the MMKV meta file \(metaPath) is \(meta.count) bytes long, shorter than MMKV's \(Meta.length)",
                path: metaPath)
        }
        let version = meta.loadUInt32(at: Meta.version)
        // Before version 3 the meta file had no length: the data file's first word held it.
        let legacyLength = version >= 3 ? nil : try readFile(path, what: "MMKV data file", upTo: 4).loadUInt32(at: 0)
        let actualSize = Int(legacyLength ?? meta.loadUInt32(at: Meta.actualSize))
        guard actualSize <= maximumLogLength else {
            throw PrefsError(
                .corrupted,
                "the MMKV meta file \(metaPath) gives a log of \(actualSize) bytes, more than the \(maximumLogLength) "
                    + "an importer reads: it is damaged, or not MMKV's", path: metaPath)
        }
        // An IV is written at encryption (meta version 2 on) and never cleared: a store decrypted since keeps it,
        // so the IV says "perhaps encrypted", and the log decides. Before version 2 the key itself was the IV.
        var iv = Array(meta[Meta.iv..<Meta.iv + 16])
        if version < 2, let cryptKey { iv = Array(cryptKey.withBytes { Array($0) }.prefix(16)) }
        let mayBeEncrypted = iv.contains { $0 != 0 }
        if cryptKey != nil, !mayBeEncrypted {
            throw PrefsError(
                .notEncrypted,
                "a crypt key was given, but the MMKV store \(path) is not encrypted (its meta file holds no IV)",
                path: path)
        }
        var log = MMKVLog()
        // The flags came with meta version 4; MMKV reads them up to version 6 and takes a higher one for damage.
        log.autoExpire = (4...6).contains(version) && meta.loadUInt64(at: Meta.flags) & 1 != 0

        let data = try readFile(path, what: "MMKV data file", upTo: payloadStart + actualSize)
        var end = payloadStart + actualSize
        var checksumFailure: String?
        if end > data.count {
            checksumFailure =
                "truncated: its meta file says the log is \(actualSize) bytes from offset \(payloadStart), the file "
                + "holds \(max(data.count - payloadStart, 0))"
            end = max(data.count, payloadStart)
        } else {
            let stored = meta.loadUInt32(at: Meta.crc)
            let computed = data.withUnsafeBytes { bytes in Self.crc32(bytes[payloadStart..<end]) }
            if stored != computed {
                checksumFailure =
                    "damaged: the CRC-32 of its log (bytes \(payloadStart)..<\(end)) is \(hex(computed)), its meta "
                    + "file says \(hex(stored)) (or \(metaPath) is another store's)"
            }
        }
        if let checksumFailure, !salvage {
            throw PrefsError(
                .corrupted,
                "the MMKV data file \(path) is \(checksumFailure); nothing was imported (--salvage, or "
                    + "salvage: true, keeps the records that parse)", path: path)
        }
        if checksumFailure != nil { log.unreadableFrom = end }
        guard end > payloadStart else { return log }

        let stored = Array(data[payloadStart..<end])
        var decrypted: [UInt8]?
        defer {
            if var plaintext = decrypted { plaintext.wipe() }
        }
        if let cryptKey { decrypted = try cryptKey.decrypt(stored, iv: iv, path: path) }
        let parsed = Self.replay(decrypted ?? stored)
        if cryptKey != nil, let failure = parsed.failure, checksumFailure == nil {
            // The bytes are MMKV's (the checksum matches): the key is wrong, or the store is no longer encrypted.
            if Self.replay(stored).failure == nil {
                throw PrefsError(
                    .notEncrypted,
                    "the MMKV store \(path) reads without a crypt key: it is not encrypted any more (its "
                        + "meta file keeps the IV of an earlier encryption); import it without one", path: path)
            }
            throw PrefsError(
                .wrongKey,
                "the MMKV log of \(path) does not parse at offset \(payloadStart + failure.position) "
                    + "(\(failure.what)) with this crypt key, though its checksum matches: the key is wrong; nothing "
                    + "was imported", path: path)
        }
        if cryptKey == nil, mayBeEncrypted, parsed.failure != nil {
            throw PrefsError(
                .encrypted,
                "the MMKV store \(path) is encrypted (its meta file holds an IV and the log does not read "
                    + "without a key): give its crypt key", path: path)
        }
        if let failure = parsed.failure {
            let offset = payloadStart + failure.position
            guard salvage else {
                throw PrefsError(
                    .corrupted,
                    "the MMKV log of \(path) does not parse at offset \(offset) (\(failure.what)): the file "
                        + "is damaged; nothing was imported (--salvage, or salvage: true, keeps the records before it)",
                    path: path)
            }
            log.unreadableFrom = min(log.unreadableFrom ?? offset, offset)
        }
        log.values = parsed.values.map { ($0.key, $0.value, payloadStart + $0.position) }
        return log
    }

    /// Replays a decrypted log: each live key (compared byte for byte, as MMKV does) with its last value and where
    /// its record starts, in the order keys were first written; and the first record that does not parse.
    private static func replay(
        _ payload: [UInt8]
    ) -> (values: [(key: String, value: [UInt8], position: Int)], failure: VarintReader.Failure?) {
        var reader = VarintReader(bytes: payload)
        var index: [[UInt8]: Int] = [:]
        var records: [(key: String, value: [UInt8]?, position: Int)] = []
        var failure: VarintReader.Failure?
        do throws(VarintReader.Failure) {
            _ = try reader.varint()  // MMKV's "item size holder": skipped by its own reader too
            while reader.position < payload.count {
                let position = reader.position
                let keyBytes = try reader.lengthPrefixed()
                let value = try reader.lengthPrefixed()
                guard !keyBytes.isEmpty, let key = ModifiedUTF8.decode(keyBytes) else {
                    throw VarintReader.Failure(position: position, what: "a key that is not UTF-8 text")
                }
                let record = (key, value.isEmpty ? nil : value, position)
                if let at = index[keyBytes] {
                    records[at] = record
                } else {
                    index[keyBytes] = records.count
                    records.append(record)
                }
            }
        } catch {
            failure = error
        }
        return (records.compactMap { record in record.value.map { (record.key, $0, record.position) } }, failure)
    }

    /// zlib's CRC-32 (IEEE 802.3: reflected, polynomial 0xEDB88320, all ones in and out), what MMKV's meta file
    /// holds; a byte a step through a table (an import reads the log once; zlib is not linked for it).
    static func crc32(_ bytes: Slice<UnsafeRawBufferPointer>) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes { crc = crc32Table[Int(UInt8(truncatingIfNeeded: crc) ^ byte)] ^ (crc >> 8) }
        return ~crc
    }

    /// Each byte's CRC-32 remainder, computed once.
    private static let crc32Table: [UInt32] = (0..<256).map { (index: UInt32) in
        (0..<8).reduce(index) { crc, _ in crc & 1 != 0 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
    }

    private static func hex(_ value: UInt32) -> String {
        let digits = String(value, radix: 16)
        return "0x" + String(repeating: "0", count: 8 - digits.count) + digits
    }

    /// The first `limit` bytes of the file at `path` (fewer when it is shorter), read without following a symbolic
    /// link and without waiting on a FIFO.
    private static func readFile(_ path: String, what: String, upTo limit: Int) throws(PrefsError) -> [UInt8] {
        let fd: Int32
        switch Sys.open(path, .readOnlyNonBlocking) {
        case .success(let opened): fd = opened
        case .failure(let e):
            let code: PrefsError.Code =
                e == .noEntry ? .notFound : e == .accessDenied || e == .notPermitted ? .permissionDenied : .io
            let why = e == .symbolicLink ? "it is a symbolic link, which is not followed" : e.text
            throw PrefsError(code, "cannot open the \(what) \(path): \(why)", path: path, errno: e.rawValue)
        }
        defer { Sys.close(fd) }
        let size: Int
        switch Sys.fstat(fd) {
        case .success(let status) where status.isRegular: size = min(status.size, limit)
        case .success: throw PrefsError(.invalidInput, "the \(what) \(path) is not a regular file", path: path)
        case .failure(let e):
            throw PrefsError(.io, "cannot read the \(what) \(path): \(e.text)", path: path, errno: e.rawValue)
        }
        var bytes = [UInt8](repeating: 0, count: size)
        var done = 0
        while done < size {
            let result = bytes.withUnsafeMutableBytes { buffer in
                Sys.pread(fd, into: UnsafeMutableRawBufferPointer(rebasing: buffer[done...]), at: done)
            }
            switch result {
            case .success(0): throw PrefsError(.io, "the \(what) \(path) shrank while it was read", path: path)
            case .success(let count): done += count
            case .failure(let e):
                throw PrefsError(.io, "cannot read the \(what) \(path): \(e.text)", path: path, errno: e.rawValue)
            }
        }
        return bytes
    }
}

/// Text as MMKV's platforms write it: UTF-8, or on Android the JVM's modified UTF-8 (`GetStringUTFChars`), which
/// writes a character outside the Basic Multilingual Plane as two 3-byte surrogates (CESU-8) and U+0000 as
/// `C0 80`. Both decode to the same `String`.
enum ModifiedUTF8 {
    static func decode(_ bytes: [UInt8]) -> String? {
        if let text = String(validating: bytes, as: UTF8.self) { return text }
        var scalars = String.UnicodeScalarView()
        var i = 0
        func continuation(_ at: Int) -> UInt32? {
            at < bytes.count && bytes[at] & 0xC0 == 0x80 ? UInt32(bytes[at] & 0x3F) : nil
        }
        func surrogate(_ at: Int) -> UInt32? {
            guard at + 2 < bytes.count, bytes[at] == 0xED, let b = continuation(at + 1), let c = continuation(at + 2)
            else { return nil }
            return 0xD000 | b << 6 | c
        }
        while i < bytes.count {
            let byte = bytes[i]
            if byte == 0xC0, i + 1 < bytes.count, bytes[i + 1] == 0x80 {
                scalars.append("\u{0}")
                i += 2
            } else if let high = surrogate(i), (0xD800...0xDBFF).contains(high), let low = surrogate(i + 3),
                (0xDC00...0xDFFF).contains(low),
                let scalar = Unicode.Scalar(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))
            {
                scalars.append(scalar)
                i += 6
            } else {
                // Anything else must be a well-formed UTF-8 sequence on its own.
                let length = byte < 0x80 ? 1 : byte >= 0xF0 ? 4 : byte >= 0xE0 ? 3 : 2
                guard i + length <= bytes.count,
                    let piece = String(validating: bytes[i..<i + length], as: UTF8.self)
                else { return nil }
                scalars.append(contentsOf: piece.unicodeScalars)
                i += length
            }
        }
        return String(scalars)
    }
}

/// Reads protobuf varints and length-prefixed byte runs, as MMKV writes them.
struct VarintReader {
    let bytes: [UInt8]
    var position = 0

    struct Failure: Error {
        /// Where in `bytes` the item that failed starts.
        var position: Int
        var what: String
    }

    /// A varint of up to 10 bytes (64 bits).
    mutating func varint() throws(Failure) -> UInt64 {
        let start = position
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while position < bytes.count {
            let byte = bytes[position]
            position += 1
            guard shift < 64, shift < 63 || byte & 0x7E == 0 else {
                throw Failure(position: start, what: "a varint longer than 64 bits")
            }
            value |= UInt64(byte & 0x7F) << shift
            if byte & 0x80 == 0 { return value }
            shift += 7
        }
        throw Failure(position: start, what: "a varint cut by the end of the data")
    }

    /// A varint length, then that many bytes.
    mutating func lengthPrefixed() throws(Failure) -> [UInt8] {
        let start = position
        let length = try varint()
        guard length <= UInt64(bytes.count - position) else {
            throw Failure(position: start, what: "a length of \(length) bytes past the end of the data")
        }
        defer { position += Int(length) }
        return Array(bytes[position..<position + Int(length)])
    }

    var atEnd: Bool { position == bytes.count }

    /// The bytes as one varint and nothing else, nil when they are not.
    var onlyVarint: UInt64? {
        var reader = self
        guard let value = try? reader.varint(), reader.atEnd else { return nil }
        return value
    }

    /// The bytes as one length-prefixed run and nothing else, nil when they are not.
    var onlyLengthPrefixed: [UInt8]? {
        var reader = self
        guard let value = try? reader.lengthPrefixed(), reader.atEnd else { return nil }
        return value
    }
}

extension [UInt8] {
    func loadUInt32(at offset: Int) -> UInt32 {
        guard offset + 4 <= count else { return 0 }
        return (0..<4).reduce(0) { $0 | UInt32(self[offset + $1]) << (8 * UInt32($1)) }
    }

    func loadUInt64(at offset: Int) -> UInt64 {
        guard offset + 8 <= count else { return 0 }
        return (0..<8).reduce(0) { $0 | UInt64(self[offset + $1]) << (8 * UInt64($1)) }
    }

    /// Overwrites the bytes with zeros (decrypted values are secrets of the app's).
    mutating func wipe() {
        withUnsafeMutableBytes { _ = $0.initializeMemory(as: UInt8.self, repeating: 0) }
    }
}
