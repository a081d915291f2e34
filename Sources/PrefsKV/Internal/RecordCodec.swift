// How a store's records carry its keys and values: the index key of a name, the key written to the disk, a set
// record's value bytes (plain or sealed) and reading them back. Two implementations: plain (the key's UTF-8 and
// the value as it is) and sealed (SealedRecordCodec.swift: the sealer's tag and the sealed `name | value`).
//
// An enum over the two, not a protocol: the read path switches on a tag (no existential dispatch, no generic
// metadata at a fresh process's first open).
import SystemLayer

enum RecordCodec {
    case plain
    case sealed(SealedRecordCodec)

    /// `cachesPlaintext`: the sealed codec keeps what its reads open (`Configuration.cachesPlaintext`).
    init(sealer: (any PrefsSealer)?, cachesPlaintext: Bool = false) {
        if let sealer {
            self = .sealed(SealedRecordCodec(sealer: sealer, cachesPlaintext: cachesPlaintext))
        } else {
            self = .plain
        }
    }

    /// The plaintext cache of a sealed codec that keeps one, unretained (the codec holds it).
    static func plaintexts(of codec: RecordCodec) -> Unmanaged<PlaintextCache>? {
        guard case .sealed(let sealed) = codec, let cache = sealed.plaintexts else { return nil }
        return .passUnretained(cache)
    }

    /// Whether the index is keyed by sealer tags.
    @inline(__always)
    var isSealed: Bool {
        if case .plain = self { return false }
        return true
    }

    var sealer: (any PrefsSealer)? {
        switch self {
        case .plain: nil
        case .sealed(let sealed): sealed.sealer
        }
    }

    // MARK: Keys

    /// The index key for a key name: the name itself, or the hex of the sealer's tag.
    @inline(__always)
    func indexKey(forName name: String) -> String {
        switch self {
        case .plain: name
        case .sealed(let sealed): sealed.indexKey(forName: name)
        }
    }

    /// The index key of a record: its key for a plain store, the hex of its tag for a sealed one.
    @inline(__always)
    static func indexKey(_ keyBytes: UnsafeRawBufferPointer, sealed: Bool) -> String {
        sealed ? hex(keyBytes) : String(decoding: keyBytes, as: UTF8.self)
    }

    /// The on-disk key of a name: its UTF-8 bytes, or the sealer's tag, which the index key already spells in
    /// hex (decoding it costs a hundredth of computing the tag again).
    func diskKey(_ name: String, indexKey: String) -> [UInt8] {
        switch self {
        case .plain: Array(name.utf8)
        case .sealed: RecordCodec.unhex(indexKey)
        }
    }

    /// The flags every record of this codec carries besides the commit flag.
    @inline(__always)
    var recordFlags: UInt8 { isSealed ? RecordFlags.sealed : 0 }

    /// The lowercase hex of `bytes` (a sealed store's index key: its tag in hex).
    static func hex(_ bytes: UnsafeRawBufferPointer) -> String {
        String(unsafeUninitializedCapacity: bytes.count * 2) { out in
            hex(bytes, into: UnsafeMutableRawBufferPointer(out))
            return bytes.count * 2
        }
    }

    /// Writes `hex(bytes)` into `output` (exactly twice as many bytes as `bytes`): four bytes at a time, their eight
    /// digits made in one word, not one digit at a time: a sealed write spells its tag on every call.
    static func hex(_ bytes: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) {
        precondition(output.count == 2 * bytes.count, "hex output is twice the bytes")
        guard let source = bytes.baseAddress else { return }
        let out = output.baseAddress!
        var i = 0
        while i + 4 <= bytes.count {
            let word = UInt64(UInt32(littleEndian: source.loadUnaligned(fromByteOffset: i, as: UInt32.self)))
            out.storeBytes(of: hexDigits(word).littleEndian, toByteOffset: 2 * i, as: UInt64.self)
            i += 4
        }
        while i < bytes.count {
            let b = source.load(fromByteOffset: i, as: UInt8.self)
            out.storeBytes(of: hexDigit(b >> 4), toByteOffset: 2 * i, as: UInt8.self)
            out.storeBytes(of: hexDigit(b & 15), toByteOffset: 2 * i + 1, as: UInt8.self)
            i += 1
        }
    }

    /// The eight lowercase hex digits of the four bytes in the low half of `word` (the first byte lowest), as the
    /// bytes of a little-endian word: the first byte's high digit lowest.
    @inline(__always)
    static func hexDigits(_ word: UInt64) -> UInt64 {
        // Byte k to bits 16k..<16k+8, then its high nibble to byte 2k and its low nibble to byte 2k+1.
        var spread = (word | word << 16) & 0x0000_FFFF_0000_FFFF
        spread = (spread | spread << 8) & 0x00FF_00FF_00FF_00FF
        let nibbles = (spread >> 4) & 0x000F_000F_000F_000F | (spread & 0x000F_000F_000F_000F) << 8
        // "0" + n, and 39 more ("a" - "0" - 10) where n >= 10: n + 6 carries into bit 4 of its byte exactly then.
        let letters = ((nibbles &+ 0x0606_0606_0606_0606) >> 4) & 0x0101_0101_0101_0101
        return nibbles &+ 0x3030_3030_3030_3030 &+ letters &* 0x27
    }

    @inline(__always)
    private static func hexDigit(_ nibble: UInt8) -> UInt8 { nibble < 10 ? 0x30 + nibble : 0x57 + nibble }

    /// Writes the bytes of a lowercase hex string made by `hex` into `output` (exactly half as many bytes as the
    /// string has digits).
    static func unhex(_ text: String, into output: UnsafeMutableRawBufferPointer) {
        var text = text
        text.withUTF8 { digits in
            precondition(digits.count == 2 * output.count, "an index key of a sealed store is hex")
            func value(_ c: UInt8) -> UInt8 { c <= 0x39 ? c - 0x30 : c - 0x57 }
            for i in 0..<output.count { output[i] = value(digits[2 * i]) << 4 | value(digits[2 * i + 1]) }
        }
    }

    /// The bytes of a lowercase hex string made by `hex`.
    static func unhex(_ text: String) -> [UInt8] {
        let count = text.utf8.count
        precondition(count % 2 == 0, "an index key of a sealed store is hex")
        return [UInt8](unsafeUninitializedCapacity: count / 2) { out, initialized in
            unhex(text, into: UnsafeMutableRawBufferPointer(out))
            initialized = count / 2
        }
    }

    // MARK: Names

    /// Key names for index keys, sorted: the keys themselves in a plain store; in a sealed one, names learned or
    /// read from the keys' records (unreadable ones are left out). A key whose entry is gone is named by its record
    /// in `former`, entries of keys that went and the file (an image `image` of the store) their records lie in: the image a
    /// reload or a restore replaced, when that file still shows it (`StoreLog.stillShowsItsImage`), or this file
    /// for keys that records appended to it deleted.
    /// The names of the live (unexpired) keys of `log`'s index, sorted (every key read: the engine's `liveNames`).
    func liveNames(in log: StoreLog) -> [String] {
        let now = Sys.nowMilliseconds()
        return names(forIndexKeys: log.index.filter { !$0.value.isExpired(now: now) }.map(\.key), in: log)
    }

    func names(
        forIndexKeys keys: [String], in log: StoreLog,
        formerImage former: (file: MappedFile, index: KeyIndex, image: ImageIdentity)? = nil
    ) -> [String] {
        switch self {
        case .plain: return KeyIndex.sortedUnique(keys)
        case .sealed(let sealed):
            var out: [String] = []
            for key in keys {
                if let name = try? sealed.name(forIndexKey: key, in: log) {
                    out.append(name)
                } else if let former, let entry = former.index[key],
                    let name = sealed.name(of: entry, inFormerImage: former.file, image: former.image)
                {
                    out.append(name)
                }
            }
            return KeyIndex.sortedUnique(out)
        }
    }

    /// The name of an entry, opening a sealed record the first time.
    func name(forIndexKey key: String, in log: StoreLog) throws(PrefsError) -> String? {
        switch self {
        case .plain: key
        case .sealed(let sealed): try sealed.name(forIndexKey: key, in: log)
        }
    }

    /// Forgets learned names whose index keys `keep` rejects (after entries went away).
    func retainNames(where keep: (String) -> Bool) {
        if case .sealed(let sealed) = self { sealed.names = sealed.names.filter { keep($0.key.key) } }
    }

    // MARK: Values

    /// Passes the plaintext of the sealed record `entry` means to `body` (a plain record's read is
    /// the engine's `withValue`, checked by `MappedFile.withValue(of:)`). Out of line: inlined, it made the plain read
    /// path too large to be inlined itself (a retain and release of the log, its file and the codec per read, and a
    /// call, on every get).
    @inline(never)
    func withSealedValue<R>(
        of entry: Entry, name: String, in log: StoreLog, _ body: (UnsafeRawBufferPointer) throws(PrefsError) -> R
    ) throws(PrefsError) -> R {
        guard case .sealed(let sealed) = self else { throw SealedRecordCodec.missingSealer(log.paths) }
        if let cache = sealed.plaintexts {
            return try RecordCodec.withCachedValue(of: entry, name: name, in: log, sealed: sealed, cache: cache, body)
        }
        return try log.checkingUnderneath(entry) { () throws(PrefsError) in
            try sealed.withPlaintext(of: entry, expectedName: name, in: log) { _, value throws(PrefsError) in
                try body(value)
            }
        }
    }

    /// `withSealedValue` through the plaintext cache: the cached copy while the record it was opened from is the
    /// one `entry` means (`PlaintextCache.value`), otherwise the record opened (as without the cache, and checked the
    /// same way) and kept.
    private static func withCachedValue<R>(
        of entry: Entry, name: String, in log: StoreLog, sealed: SealedRecordCodec, cache: PlaintextCache,
        _ body: (UnsafeRawBufferPointer) throws(PrefsError) -> R
    ) throws(PrefsError) -> R {
        if let cached = cache.value(forName: name, entry: entry, image: log.image, file: log.file) {
            return try withExtendedLifetime(cached) { () throws(PrefsError) in try body(cached.value) }
        }
        let indexKey = sealed.indexKey(forName: name)
        let opened = try log.checkingUnderneath(entry) { () throws(PrefsError) in
            try sealed.openForCache(entry, name: name, indexKey: indexKey, in: log)
        }
        cache.insert(opened)
        return try withExtendedLifetime(opened) { () throws(PrefsError) in try body(opened.value) }
    }

    /// The name and plain value bytes of an entry.
    func plainEntry(_ entry: Entry, in log: StoreLog) throws(PrefsError) -> (String, [UInt8]) {
        if !entry.sealed {
            let plain = log.file.withBytes { bytes in
                (
                    String(decoding: bytes[entry.keyOffset..<entry.keyOffset + entry.keyLength], as: UTF8.self),
                    Array(bytes[entry.valueOffset..<entry.valueOffset + entry.valueLength])
                )
            }
            try log.checkStillHolds(entry)
            return plain
        }
        guard case .sealed(let sealed) = self else { throw SealedRecordCodec.missingSealer(log.paths) }
        return try log.checkingUnderneath(entry) { () throws(PrefsError) in
            try sealed.withPlaintext(of: entry, expectedName: nil, in: log) { name, value in (name, Array(value)) }
        }
    }

    // MARK: Changes

    /// Whether two entries of the same sealed key, at least one bound to its place (version 6: a new image seals
    /// every value again, so equal values differ in their bytes), open to the same plaintext (name and value). False
    /// when either does not open.
    private static func samePlaintext(
        _ old: Entry, in oldBytes: UnsafeRawBufferPointer, image oldImage: ImageIdentity, _ new: Entry,
        in newBytes: UnsafeRawBufferPointer, image newImage: ImageIdentity, sealer: (any PrefsSealer)?
    ) -> Bool {
        guard let sealer, old.sealed, new.sealed, old.bound || new.bound,
            old.valueOffset + old.valueLength <= oldBytes.count, new.valueOffset + new.valueLength <= newBytes.count
        else { return false }
        func open<R>(_ entry: Entry, _ bytes: UnsafeRawBufferPointer, _ image: ImageIdentity,
            _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
            try SealedValue.withPlaintext(
                of: UnsafeRawBufferPointer(rebasing: bytes[entry.valueOffset..<entry.valueOffset + entry.valueLength]),
                head: UnsafeRawBufferPointer(rebasing: bytes[entry.recordOffset..<entry.valueOffset]),
                bound: entry.bound, in: image, offset: entry.recordOffset, type: entry.type.rawValue,
                expiresAt: entry.expiresAt, sealer: sealer, body)
        }
        return
            (try? open(old, oldBytes, oldImage) { a in try open(new, newBytes, newImage) { b in a.elementsEqual(b) } })
            ?? false
    }

    /// Index keys whose values differ between an old mapping and the current state of `log`.
    func changedIndexKeys(in log: StoreLog, from oldFile: MappedFile, oldIndex: KeyIndex) -> [String] {
        precondition(log.table == nil, "observed stores read the whole log")
        let index = log.index
        var changed: [String] = []
        // The same inode rewritten in place (a change underneath), or the old file written again with a newer image
        // since (a buffered store's spare file): the old mapping shows bytes of another image, so nothing can be
        // compared; every key of either is reported.
        if !log.stillShowsItsImage(oldFile) {
            return Array(index.keys) + oldIndex.keys.filter { index[$0] == nil }
        }
        let oldImage = oldFile.adoptedIdentity.image
        let newImage = log.image
        let sealer = self.sealer
        oldFile.withBytes { oldBytes in
            log.file.withBytes { newBytes in
                for (key, new) in index {
                    if let old = oldIndex[key], old.type == new.type, old.expiresAt == new.expiresAt,
                        old.valueLength == new.valueLength,
                        oldBytes[old.valueOffset..<old.valueOffset + old.valueLength].elementsEqual(
                            newBytes[new.valueOffset..<new.valueOffset + new.valueLength])
                            || RecordCodec.samePlaintext(
                                old, in: oldBytes, image: oldImage, new, in: newBytes, image: newImage, sealer: sealer)
                    {
                        continue
                    }
                    changed.append(key)
                }
                for key in oldIndex.keys where index[key] == nil { changed.append(key) }
            }
        }
        return changed
    }

    // MARK: Framing

    /// The stored value length of a set record of `name` holding `valueLength` plain bytes.
    func storedLength(name: String, valueLength: Int) -> Int {
        switch self {
        case .plain: valueLength
        case .sealed(let sealed):
            SealedValue.storedLength(name: name, valueLength: valueLength, sealer: sealed.sealer)
        }
    }

    /// Writes a set record of `name` at `offset` (its on-disk key `key`, `storedLength` from `storedLength`)
    /// and returns its header; `auth` authenticates it (a version-2 sealed store) or, in an image that binds values
    /// (version 6), binds its sealed value, and its checksum starts with `seed` (the image's). Throws what the sealer
    /// throws.
    @inline(__always)
    func writeSet(
        into bytes: UnsafeMutableRawBufferPointer, at offset: Int, flags: UInt8, seq: UInt64, name: String,
        key: UnsafeRawBufferPointer, type: ValueType, value: UnsafeRawBufferPointer, expiresAt: Int64,
        storedLength: Int, uuid: StoreUUID, auth: RecordAuth?, seed: RecordSeed
    ) throws -> RecordHeader {
        switch self {
        case .plain:
            return RecordWriter.write(
                into: bytes, at: offset, kind: .set, valueType: type.rawValue, flags: flags, seq: seq,
                expiresAt: expiresAt, key: key, valueLength: storedLength, auth: auth, seed: seed
            ) { out in
                if !value.isEmpty { out.copyMemory(from: value) }
            }
        case .sealed(let sealed):
            let binds = auth?.bindsValues ?? false
            return try sealed.writeSet(
                into: bytes, at: offset, flags: flags, seq: seq, name: name, key: key, type: type, value: value,
                expiresAt: expiresAt, storedLength: storedLength, uuid: uuid, signer: binds ? nil : auth,
                binding: binds ? auth.map { ImageIdentity(uuid: $0.uuid, generation: $0.generation) } : nil,
                seed: seed)
        }
    }

    /// Compare-before-set: true when the key holds exactly this type, expiry and value and has not expired.
    /// `sealed`: the store's sealed codec, nil for a plain store.
    @inline(__always)
    static func holds(
        indexKey: String, name: String, type: ValueType, value: UnsafeRawBufferPointer, expiresAt: Int64,
        log: StoreLog, sealed: SealedRecordCodec?
    ) throws(PrefsError) -> Bool {
        guard let old = log.index[indexKey], old.type == type, old.expiresAt == expiresAt,
            !old.isExpired(now: Sys.nowMilliseconds())
        else { return false }
        if !old.sealed { return log.holdsPlain(old, value: value) }
        guard let sealed else { throw SealedRecordCodec.missingSealer(log.paths) }
        // Sealed: the cached plaintext CRC rules out most changes without opening; equality is confirmed by
        // comparing plaintext, so a CRC collision can never skip a real change.
        let crc = CRC32C.checksum(value)
        if let known = old.plainCRC, known != crc { return false }
        let same = try sealed.withPlaintext(of: old, expectedName: name, in: log) { _, plain throws(PrefsError) in
            plain.count == value.count && plain.elementsEqual(value)
        }
        if same { log.remember(plainCRC: crc, of: indexKey) }
        return same
    }

    /// The sealed codec, nil for a plain store.
    var sealed: SealedRecordCodec? {
        guard case .sealed(let sealed) = self else { return nil }
        return sealed
    }
}
