// The sealed implementation of RecordCodec. On disk a sealed set record's key is the sealer's tag of the name,
// and its value `seal(u32 nameLength | name | value)` with associated data
// `store UUID | tag | valueType | expiresAt (i64 LE)` (PrefsSealer.swift, Documentation/FileFormat.md).
import SystemLayer

final class SealedRecordCodec {
    let sealer: any PrefsSealer
    /// Index key (hex tag) to key name, learned by opening records, and by writing them while the handle reports
    /// changes (the one case a name is needed after its record is gone: a change that deletes the key elsewhere,
    /// in an image that is no longer readable; `RecordCodec.names`).
    @exclusivity(unchecked) var names: [SealedIndexKey: String] = [:]
    /// Key name to index key (hex of the sealer's tag), for names used through this handle.
    /// A tag costs a keyed hash (BLAKE2b) and its hex; a lookup here much less.
    /// Cleared when it grows past `indexKeyCacheLimit` names (about 100 bytes each: at most 1.6 MiB); a new
    /// sealer (rekey) gets a new codec.
    /// Unused when the sealer's tags are cheaper than a lookup here (`PrefsSealer.tagsAreCheap`).
    @exclusivity(unchecked) var indexKeyCache: [ByteKey: String] = [:]
    static let indexKeyCacheLimit = 16_384
    /// `!sealer.tagsAreCheap`, read once.
    let cachesIndexKeys: Bool
    /// The length of the sealer's tags when they are cheap (0 otherwise).
    let cheapTagLength: Int

    /// Private memory where a sealed `set` assembles its plaintext (`u32 nameLength | name | value`, up to
    /// `scratchCapacity` bytes), wiped after each write: allocated at the first one, instead of a temporary
    /// allocation per write, whose closure retained what it captured. Used only under the engine's lock.
    @exclusivity(unchecked) private var scratch: UnsafeMutableRawPointer?
    static let scratchCapacity = 512

    deinit {
        if let scratch {
            Sys.zero(UnsafeMutableRawBufferPointer(start: scratch, count: SealedRecordCodec.scratchCapacity))
            scratch.deallocate()
        }
    }

    /// The values this handle opened, when the app opted in (`Configuration.cachesPlaintext`; PlaintextCache.swift).
    /// A new sealer (rekey) gets a new codec, and so an empty cache.
    let plaintexts: PlaintextCache?

    init(sealer: any PrefsSealer, cachesPlaintext: Bool = false) {
        self.sealer = sealer
        plaintexts = cachesPlaintext ? PlaintextCache() : nil
        cachesIndexKeys = !sealer.tagsAreCheap
        cheapTagLength = sealer.tagsAreCheap ? sealer.tag(forKey: "").count : 0
        precondition(cheapTagLength <= 64, "a cheap sealer's tags are at most 64 bytes")
    }

    static func missingSealer(_ paths: StorePaths) -> PrefsError {
        PrefsError(.encrypted, "a sealed record was found without a sealer", path: paths.data)
    }

    @inline(__always)
    func indexKey(forName name: String) -> String {
        guard cachesIndexKeys else { return withIndexKeyBytes(forName: name) { String(decoding: $0, as: UTF8.self) } }
        if let known = indexKeyCache[ByteKey(name)] { return known }
        let key = sealer.tag(forKey: name).withUnsafeBytes { RecordCodec.hex($0) }
        if indexKeyCache.count >= SealedRecordCodec.indexKeyCacheLimit {
            indexKeyCache.removeAll(keepingCapacity: true)
        }
        indexKeyCache[ByteKey(name)] = key
        return key
    }

    /// Passes `body` the index key of `name` (the hex of the sealer's tag) as UTF-8 bytes on the stack, without
    /// making a `String` (32 characters: an allocation): a read through a sealer whose tags are cheap.
    @inline(__always)
    func withIndexKeyBytes<R>(forName name: String, _ body: (UnsafeRawBufferPointer) -> R) -> R {
        withTagAndIndexKey(forName: name) { _, key in body(key) }
    }

    /// Passes `body` the sealer's tag of `name` and its hex (the index key, as UTF-8), both on the stack: a write
    /// through a sealer whose tags are cheap, which needs the tag for its record and the hex for the index.
    @inline(__always)
    func withTagAndIndexKey<R>(
        forName name: String, _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> R
    ) rethrows -> R {
        precondition(!cachesIndexKeys, "index keys on the stack are for sealers whose tags are cheap")
        let length = cheapTagLength
        // The tag, then its hex, in one stack buffer (at most 3 x 64 bytes).
        return try withUnsafeTemporaryAllocation(byteCount: 3 * length, alignment: 8) { buffer in
            let tag = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<length])
            let key = UnsafeMutableRawBufferPointer(rebasing: buffer[length...])
            sealer.tag(forKey: name, into: tag)
            RecordCodec.hex(UnsafeRawBufferPointer(tag), into: key)
            return try body(UnsafeRawBufferPointer(tag), UnsafeRawBufferPointer(key))
        }
    }

    /// The name of a sealed entry, opening its record the first time.
    func name(forIndexKey key: String, in log: StoreLog) throws(PrefsError) -> String? {
        if let name = names[SealedIndexKey(key)] { return name }
        guard let entry = log.index[key] else { return nil }
        let name = try withPlaintext(of: entry, expectedName: nil, in: log) { name, _ in name }
        names[SealedIndexKey(key)] = name
        return name
    }

    /// After a set record of `name` was published: remembers its plaintext CRC (so that compare-before-set rules out
    /// most changes without opening the record) and, when `name` is given, the name of its index key.
    func learn(indexKey: String, name: String?, value: UnsafeRawBufferPointer, in log: StoreLog) {
        if let name { learn(indexKey: indexKey, name: name) }
        log.remember(plainCRC: CRC32C.checksum(value), of: indexKey)
    }

    /// Remembers the name of an index key (a set whose entry was published with its plaintext CRC already).
    @inline(__always)
    func learn(indexKey: String, name: String) {
        names[SealedIndexKey(indexKey)] = name
    }

    /// The error of a seal that failed while writing `name`'s value.
    static func sealFailed(_ name: String, path: String, _ error: any Error) -> PrefsError {
        PrefsError(.io, "the sealer failed to seal the value of key \"\(name)\"", path: path, underlying: error)
    }

    /// Opens a sealed entry: plaintext is `u32 nameLength | name | value`.
    func withPlaintext<R>(
        of entry: Entry, expectedName: String?, in log: StoreLog,
        _ body: (String, UnsafeRawBufferPointer) throws(PrefsError) -> R
    ) throws(PrefsError) -> R {
        try withPlaintext(
            of: entry, expectedName: expectedName, in: log.file, image: log.image,
            path: log.paths.data, body)
    }

    /// Opens `entry`'s record, whose key is `name`, into a value for the plaintext cache.
    func openForCache(_ entry: Entry, name: String, indexKey: String, in log: StoreLog) throws(PrefsError)
        -> PlaintextCache.Value
    {
        let image = log.image
        return try withOpened(of: entry, expectedName: name, in: log.file, image: image, path: log.paths.data) {
            _, value, record in
            PlaintextCache.Value.make(
                name: name, indexKey: indexKey, image: image, entry: entry, record: record, value: value)
        }
    }

    /// The name sealed in `entry`'s record in `file`, an image `image` of the store, for a key that is no longer in
    /// the index (`RecordCodec.names`); nil when the record does not open there.
    func name(of entry: Entry, inFormerImage file: MappedFile, image: ImageIdentity) -> String? {
        try? withPlaintext(of: entry, expectedName: nil, in: file, image: image, path: file.path) { name, _ in name }
    }

    private func withPlaintext<R>(
        of entry: Entry, expectedName: String?, in file: MappedFile, image: ImageIdentity, path: String,
        _ body: (String, UnsafeRawBufferPointer) throws(PrefsError) -> R
    ) throws(PrefsError) -> R {
        try withOpened(of: entry, expectedName: expectedName, in: file, image: image, path: path) {
            name, value, _ throws(PrefsError) in try body(name, value)
        }
    }

    /// `withPlaintext`, also passing `body` the private copy of the record that was opened (from its magic to the end
    /// of its sealed value).
    private func withOpened<R>(
        of entry: Entry, expectedName: String?, in file: MappedFile, image: ImageIdentity, path: String,
        _ body: (String, UnsafeRawBufferPointer, _ record: UnsafeRawBufferPointer) throws(PrefsError) -> R
    ) throws(PrefsError) -> R {
        let sealer = self.sealer
        do {
            return try file.withBytes { bytes in
                // Opened as a private copy: the mapping is shared with whoever can write the file.
                try SealedValue.withPrivateRecord(
                    in: bytes, at: entry.recordOffset, keyLength: entry.keyLength, valueLength: entry.valueLength
                ) { head, sealed in
                    try SealedValue.withPlaintext(
                        of: sealed, head: head, bound: entry.bound, in: image, offset: entry.recordOffset,
                        type: entry.type.rawValue, expiresAt: entry.expiresAt, sealer: sealer
                    ) { plain in
                        try SealedValue.withNameAndValue(plain, expectedName: expectedName) {
                            name, value throws(PrefsError) in
                            // One private copy: the head, then the sealed value (`SealedValue.withPrivateRecord`).
                            precondition(head.baseAddress! + head.count == sealed.baseAddress!, "one private copy")
                            let length = head.count + sealed.count
                            return try body(name, value, UnsafeRawBufferPointer(start: head.baseAddress, count: length))
                        }
                    }
                }
            }
        } catch let error as PrefsError {
            throw error
        } catch {
            throw PrefsError(
                .tampered,
                "a sealed record \(expectedName.map { "for key \"\($0)\" " } ?? "")failed to open: it was altered, "
                    + "moved or sealed with another key", path: path, underlying: error)
        }
    }


    // MARK: Writing

    /// The codec's set record of `name` (`RecordCodec.writeSet`): its key is its tag `key`, its value
    /// `seal(u32 nameLength | name | value)`, bound to `binding` (version 6) or authenticated by `signer`
    /// (`SealedValue.writeSet`). The plaintext is assembled in a temporary buffer, wiped once sealed.
    @inline(__always)
    func writeSet(
        into bytes: UnsafeMutableRawBufferPointer, at offset: Int, flags: UInt8, seq: UInt64, name: String,
        key: UnsafeRawBufferPointer, type: ValueType, value: UnsafeRawBufferPointer, expiresAt: Int64,
        storedLength: Int, uuid: StoreUUID, signer: RecordAuth?, binding: ImageIdentity?, seed: RecordSeed
    ) throws -> RecordHeader {
        let plainLength = 4 + name.utf8.count + value.count
        precondition(storedLength == plainLength + sealer.overhead, "a sealed value's stored length")
        return try withUnsafeTemporaryAllocation(byteCount: plainLength, alignment: 16) { plain in
            defer { Sys.zero(plain) }
            let valueStart = SealedValue.assemble(name: name, into: plain)
            if !value.isEmpty { UnsafeMutableRawBufferPointer(rebasing: plain[valueStart...]).copyMemory(from: value) }
            return try SealedValue.writeSet(
                into: bytes, at: offset, flags: flags, seq: seq, plaintext: UnsafeRawBufferPointer(plain), key: key,
                type: type.rawValue, expiresAt: expiresAt, uuid: uuid, signer: signer, binding: binding, seed: seed,
                sealer: sealer)
        }
    }

    /// Passes `body` the tag of `name` (a set record's key) and its index key, computing the tag once: with cheap
    /// tags it is made on the stack beside its hex, otherwise decoded from the remembered index key.
    @inline(__always)
    func withTagAndIndexKey<R>(
        ofName name: String, _ body: (UnsafeRawBufferPointer, String) throws(PrefsError) -> R
    ) throws(PrefsError) -> R {
        try typed {
            if cachesIndexKeys {
                let indexKey = indexKey(forName: name)
                return try withUnsafeTemporaryAllocation(byteCount: indexKey.utf8.count / 2, alignment: 8) { tag in
                    RecordCodec.unhex(indexKey, into: tag)
                    return try body(UnsafeRawBufferPointer(tag), indexKey)
                }
            }
            return try withTagAndIndexKey(forName: name) { tag, indexKeyBytes in
                try body(tag, String(decoding: indexKeyBytes, as: UTF8.self))
            }
        }
    }

    /// A sealed store's single value (the engine's `set`): what a one-change commit does (compare-before-set, one
    /// committed record sealed in place, the plaintext CRC learned), without planning a transaction (its arrays and
    /// dictionaries cost as much as the rest of the write). `tag` and `indexKey` are `name`'s
    /// (`withTagAndIndexKey`). The plaintext `u32 nameLength | name | value` is assembled in `scratch` (or, when
    /// longer, a temporary buffer) and wiped after. False when the key already held this value (nothing written);
    /// with `learnsName`, the name of the index key is remembered (a handle that reports changes).
    @inline(__always)
    func set(
        name: String, indexKey: String, tag: UnsafeRawBufferPointer, type: ValueType, expiresAt: Int64,
        valueLength: Int, in log: StoreLog, learnsName: Bool, fill: (UnsafeMutableRawBufferPointer) -> Void
    ) throws(PrefsError) -> Bool {
        let plainLength = 4 + name.utf8.count + valueLength
        // The log and this codec are used unretained (the engine holds both, and nothing here replaces them).
        return try typed {
            try Unmanaged.passUnretained(log)._withUnsafeGuaranteedRef { log in
                try Unmanaged.passUnretained(self)._withUnsafeGuaranteedRef { sealed in
                    guard plainLength <= SealedRecordCodec.scratchCapacity else {
                        return try withUnsafeTemporaryAllocation(byteCount: plainLength, alignment: 16) { buffer in
                            defer { Sys.zero(buffer) }
                            return try sealed.writeSet(
                                plain: buffer, name: name, indexKey: indexKey, tag: tag, log: log, type: type,
                                expiresAt: expiresAt, learnsName: learnsName, fill: fill)
                        }
                    }
                    let scratch = sealed.scratch ?? sealed.allocateScratch()
                    let plain = UnsafeMutableRawBufferPointer(start: scratch, count: plainLength)
                    defer { Sys.zero(plain) }
                    return try sealed.writeSet(
                        plain: plain, name: name, indexKey: indexKey, tag: tag, log: log, type: type,
                        expiresAt: expiresAt, learnsName: learnsName, fill: fill)
                }
            }
        }
    }

    @inline(never)
    private func allocateScratch() -> UnsafeMutableRawPointer {
        let scratch = UnsafeMutableRawPointer.allocate(byteCount: SealedRecordCodec.scratchCapacity, alignment: 16)
        self.scratch = scratch
        return scratch
    }

    /// `set` with its plaintext buffer: the plaintext is assembled in `plain`, compared with the current value, and
    /// sealed into the record.
    @inline(__always)
    private func writeSet(
        plain: UnsafeMutableRawBufferPointer, name: String, indexKey: String, tag: UnsafeRawBufferPointer,
        log: StoreLog, type: ValueType, expiresAt: Int64, learnsName: Bool,
        fill: (UnsafeMutableRawBufferPointer) -> Void
    ) throws -> Bool {
        let valueStart = SealedValue.assemble(name: name, into: plain)
        let filled = UnsafeMutableRawBufferPointer(rebasing: plain[valueStart...])
        fill(filled)
        let value = UnsafeRawBufferPointer(filled)
        if try RecordCodec.holds(
            indexKey: indexKey, name: name, type: type, value: value, expiresAt: expiresAt, log: log, sealed: self)
        {
            return false
        }
        let storedLength = plain.count + sealer.overhead
        // A version-6 image binds the value to the image (no `RecordAuth` copied: it carries the sealer); an older
        // one authenticates the record, or (version 1) neither.
        let binding: ImageIdentity? = log.header.bindsValues ? log.image : nil
        let signer = binding == nil ? log.auth : nil
        let uuid = log.header.uuid
        let seed = log.recordSeed
        let sealer = self.sealer
        let length = Format.recordLength(keyLength: tag.count, valueLength: storedLength, authenticated: signer != nil)
        let plaintext = UnsafeRawBufferPointer(plain)
        try log.appendSealedSet(indexKey: indexKey, length: length, plainCRC: CRC32C.checksum(value)) {
            bytes, offset, seq throws(PrefsError) -> RecordHeader in
            do {
                return try SealedValue.writeSet(
                    into: bytes, at: offset, flags: RecordFlags.commit, seq: seq, plaintext: plaintext, key: tag,
                    type: type.rawValue, expiresAt: expiresAt, uuid: uuid, signer: signer, binding: binding,
                    seed: seed, sealer: sealer)
            } catch {
                throw SealedRecordCodec.sealFailed(name, path: log.paths.data, error)
            }
        }
        // Only a handle that reports changes needs the name later, for a key whose record goes (deleted or replaced
        // by another process); anything else opens the record when it asks (`name(forIndexKey:)`).
        if learnsName { learn(indexKey: indexKey, name: name) }
        return true
    }
}

/// The index key of a sealed store (the hex of a tag) as a dictionary key, hashed with the index's own seeded hash
/// of its bytes and compared byte for byte: Swift's `String` hashing (SipHash-1-3 over the 32 characters, after
/// checking their normalisation) was most of the cost of remembering a name at each sealed write.
struct SealedIndexKey: Hashable {
    let key: String

    @inline(__always)
    init(_ key: String) { self.key = key }

    static func == (a: SealedIndexKey, b: SealedIndexKey) -> Bool { KeyIndex.sameBytes(a.key, b.key) }

    func hash(into hasher: inout Hasher) { hasher.combine(KeyIndex.hash(key)) }
}
