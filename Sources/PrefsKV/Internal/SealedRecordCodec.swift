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
    /// A tag costs a keyed hash (BLAKE2b, about a microsecond with its hex); a lookup here a tenth of that.
    /// Cleared when it grows past `indexKeyCacheLimit` names (about 100 bytes each: at most 1.6 MiB); a new
    /// sealer (rekey) gets a new codec.
    /// Unused when the sealer's tags are cheaper than a lookup here (`PrefsSealer.tagsAreCheap`).
    @exclusivity(unchecked) var indexKeyCache: [ByteKey: String] = [:]
    static let indexKeyCacheLimit = 16_384
    /// `!sealer.tagsAreCheap`, read once.
    let cachesIndexKeys: Bool
    /// The length of the sealer's tags when they are cheap (0 otherwise).
    let cheapTagLength: Int

    init(sealer: any PrefsSealer) {
        self.sealer = sealer
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
        log.index[indexKey]?.plainCRC = CRC32C.checksum(value)
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

    static func storedLength(name: String, valueLength: Int, sealer: any PrefsSealer) -> Int {
        4 + name.utf8.count + valueLength + sealer.overhead
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

    /// The name sealed in `entry`'s record in `file`, an image `image` of the store, for a key that is no longer in
    /// the index (`RecordCodec.names`); nil when the record does not open there.
    func name(of entry: Entry, inFormerImage file: MappedFile, image: ImageIdentity) -> String? {
        try? withPlaintext(of: entry, expectedName: nil, in: file, image: image, path: file.path) { name, _ in name }
    }

    private func withPlaintext<R>(
        of entry: Entry, expectedName: String?, in file: MappedFile, image: ImageIdentity, path: String,
        _ body: (String, UnsafeRawBufferPointer) throws(PrefsError) -> R
    ) throws(PrefsError) -> R {
        let sealer = self.sealer
        do {
            return try file.withBytes { bytes in
                guard entry.valueOffset + entry.valueLength <= bytes.count else { throw SealedPayloadError() }
                let head = UnsafeRawBufferPointer(rebasing: bytes[entry.recordOffset..<entry.valueOffset])
                let sealed = UnsafeRawBufferPointer(
                    rebasing: bytes[entry.valueOffset..<entry.valueOffset + entry.valueLength])
                return try SealedRecordCodec.withPlaintext(
                    of: sealed, head: head, bound: entry.bound, in: image, offset: entry.recordOffset,
                    type: entry.type.rawValue, expiresAt: entry.expiresAt, sealer: sealer
                ) { plain in
                    try SealedRecordCodec.withNameAndValue(plain, expectedName: expectedName, body)
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

    /// Splits a plaintext `u32 nameLength | name | value` and passes the name and value to `body`; with
    /// `expectedName`, the sealed name must be exactly that one (bytes compared, nothing decoded).
    @inline(__always)
    private static func withNameAndValue<R>(
        _ plain: UnsafeRawBufferPointer, expectedName: String?,
        _ body: (String, UnsafeRawBufferPointer) throws(PrefsError) -> R
    ) throws -> R {
        guard plain.count >= 4 else { throw SealedPayloadError() }
        let nameLength = Int(UInt32(littleEndian: plain.loadUnaligned(as: UInt32.self)))
        guard 4 + nameLength <= plain.count else { throw SealedPayloadError() }
        let nameBytes = UnsafeRawBufferPointer(rebasing: plain[4..<4 + nameLength])
        let name: String
        if let expectedName {
            var expected = expectedName
            let same = expected.withUTF8 { $0.count == nameLength && nameBytes.elementsEqual($0) }
            guard same else { throw SealedPayloadError() }
            name = expectedName
        } else {
            guard let decoded = String(validating: nameBytes, as: UTF8.self) else { throw SealedPayloadError() }
            name = decoded
        }
        return try body(name, UnsafeRawBufferPointer(rebasing: plain[(4 + nameLength)...]))
    }

    /// Opens `sealed`, the value of a sealed set record whose bytes from its magic to the end of its key are `head`,
    /// at file offset `offset` of `image`, and passes its plaintext to `body`; `type` and `expiresAt` are what the
    /// caller takes the record's type and expiry to be (its entry's). The associated data is the record's binding when
    /// it is `bound` (version 6, `RecordAuth.withBindingData`, made from a private copy of `head`, whose type and
    /// expiry must then be `type` and `expiresAt`), otherwise `store UUID | tag | type | expiresAt`. The plaintext
    /// lives in a temporary buffer, wiped before it is released (a guarded allocation per read would cost ten times
    /// the read); the sealer opens into it without a generic call.
    @inline(__always)
    static func withPlaintext<R>(
        of sealed: UnsafeRawBufferPointer, head: UnsafeRawBufferPointer, bound: Bool, in image: ImageIdentity,
        offset: Int, type: UInt8, expiresAt: Int64, sealer: any PrefsSealer,
        _ body: (UnsafeRawBufferPointer) throws -> R
    ) throws -> R {
        let length = sealed.count - sealer.overhead
        guard length >= 0, head.count >= Format.recordHeaderSize else { throw SealedPayloadError() }
        return try withUnsafeTemporaryAllocation(byteCount: max(length, 1), alignment: 16) { buffer in
            defer { Sys.zero(buffer) }
            let plain = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<length])
            if bound {
                try RecordAuth.withBindingData(image: image, head: head, offset: offset) { ad in
                    // The copy the seal is checked against says what the caller will take the value for.
                    let fields = RecordAuth.contextSize - 4
                    guard ad[fields + 5] == type,
                        Int64(littleEndian: ad.loadUnaligned(fromByteOffset: fields + 24, as: Int64.self)) == expiresAt
                    else { throw SealedPayloadError() }
                    try sealer.open(sealed, associatedData: ad, into: plain)
                }
            } else {
                try withAssociatedData(
                    uuid: image.uuid, tag: UnsafeRawBufferPointer(rebasing: head[Format.recordHeaderSize...]),
                    type: type, expiresAt: expiresAt
                ) { ad in
                    try sealer.open(sealed, associatedData: ad, into: plain)
                }
            }
            return try body(UnsafeRawBufferPointer(plain))
        }
    }

    /// `RecordCodec.writeSet` of a sealed store: the record of `name`, whose key is its tag `key`, with its value
    /// sealed in place; bound to `binding` (version 6) or authenticated by `signer`. The plaintext is assembled in
    /// a temporary buffer, wiped once sealed.
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
            let valueStart = SealedRecordCodec.assemble(name: name, into: plain)
            if !value.isEmpty { UnsafeMutableRawBufferPointer(rebasing: plain[valueStart...]).copyMemory(from: value) }
            return try writeSet(
                into: bytes, at: offset, flags: flags, seq: seq, plaintext: UnsafeRawBufferPointer(plain), key: key,
                type: type, expiresAt: expiresAt, uuid: uuid, signer: signer, binding: binding, seed: seed)
        }
    }

    /// `writeSet` of an assembled `plaintext` (`u32 nameLength | name | value`, `assemble`).
    @inline(__always)
    func writeSet(
        into bytes: UnsafeMutableRawBufferPointer, at offset: Int, flags: UInt8, seq: UInt64,
        plaintext: UnsafeRawBufferPointer, key: UnsafeRawBufferPointer, type: ValueType, expiresAt: Int64,
        uuid: StoreUUID, signer: RecordAuth?, binding: ImageIdentity?, seed: RecordSeed
    ) throws -> RecordHeader {
        let sealer = self.sealer
        let storedLength = plaintext.count + sealer.overhead
        if let binding {
            return try RecordWriter.writeBound(
                into: bytes, at: offset, valueType: type.rawValue, flags: flags, seq: seq, expiresAt: expiresAt,
                key: key, valueLength: storedLength, image: binding, seed: seed
            ) { out, ad in
                try sealer.seal(plaintext, associatedData: ad, into: out)
            }
        }
        return try RecordWriter.write(
            into: bytes, at: offset, kind: .set, valueType: type.rawValue, flags: flags | RecordFlags.sealed,
            seq: seq, expiresAt: expiresAt, key: key, valueLength: storedLength, auth: signer, seed: seed
        ) { out in
            try SealedRecordCodec.withAssociatedData(uuid: uuid, tag: key, type: type.rawValue, expiresAt: expiresAt) {
                ad in
                try sealer.seal(plaintext, associatedData: ad, into: out)
            }
        }
    }

    /// Stores `u32 nameLength | name` at the start of `plain` and returns where the value goes after it.
    @inline(__always)
    static func assemble(name: String, into plain: UnsafeMutableRawBufferPointer) -> Int {
        KeyIndex.withUTF8(name) { nameBytes in
            precondition(plain.count >= 4 + nameBytes.count, "a sealed plaintext holds its name")
            plain.storeBytes(of: UInt32(nameBytes.count).littleEndian, as: UInt32.self)
            if !nameBytes.isEmpty {
                UnsafeMutableRawBufferPointer(rebasing: plain[4..<4 + nameBytes.count]).copyMemory(from: nameBytes)
            }
            return 4 + nameBytes.count
        }
    }

    /// Builds `store UUID | tag | valueType | expiresAt (i64 LE)`, the associated data of a sealed value of an image
    /// that does not bind values (before version 6).
    static func withAssociatedData<R>(
        uuid: StoreUUID, tag: UnsafeRawBufferPointer, type: UInt8, expiresAt: Int64,
        _ body: (UnsafeRawBufferPointer) throws -> R
    ) rethrows -> R {
        // On the stack (a heap array here was a third of a warm sealed read's allocations).
        let count = 16 + tag.count + 9
        return try withUnsafeTemporaryAllocation(byteCount: count, alignment: 8) { ad in
            uuid.withUnsafeBytes { ad.copyMemory(from: $0) }
            let rest = UnsafeMutableRawBufferPointer(rebasing: ad[16...])
            if !tag.isEmpty { rest.copyMemory(from: tag) }
            rest[tag.count] = type
            rest.storeBytes(of: expiresAt.littleEndian, toByteOffset: tag.count + 1, as: Int64.self)
            return try body(UnsafeRawBufferPointer(ad))
        }
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

/// A sealed value's plaintext does not have the expected shape (or names another key).
struct SealedPayloadError: Error {}
