// A sealed set record's value, `seal(u32 nameLength | name | value)` under the store's sealer: the one place a
// sealed value is sealed into a record, opened, checked and sealed again for a new place, and where its associated
// data is built. Stateless (the sealer is passed in): the sealed codec's reads and writes, record authentication (a
// bound record is checked by opening its value), compaction's copy and verify all come here.
//
// Associated data: in an image that binds values (version 6), the record's context and its bytes from its kind byte
// to the end of its key (`withBindingData`); before, `store UUID | tag | valueType | expiresAt (i64 LE)`
// (`withAssociatedData`). Documentation/FileFormat.md, "Sealed stores".
import SystemLayer

enum SealedValue {
    /// "PKVv", little-endian: the context of a bound value's associated data.
    private static let bindingDomain: UInt32 = 0x7656_4B50

    /// The stored length of the sealed value of `name` holding `valueLength` plain bytes.
    static func storedLength(name: String, valueLength: Int, sealer: any PrefsSealer) -> Int {
        4 + name.utf8.count + valueLength + sealer.overhead
    }


    // MARK: Associated data

    /// Passes `body` the associated data that binds a sealed set record at file offset `offset` of `image`:
    /// `"PKVv" | version u8 (6) | 3 zero bytes | store UUID | generation u64 | offset u64`, then the record's bytes
    /// from its kind byte to the end of its key (`head`: the record from its magic to the end of its key). Built on
    /// the stack: `head` may lie in a shared mapping, and what is sealed or checked is this copy.
    @inline(__always)
    static func withBindingData<R>(
        image: ImageIdentity, head: UnsafeRawBufferPointer, offset: Int,
        _ body: (UnsafeRawBufferPointer) throws -> R
    ) rethrows -> R {
        precondition(head.count >= Format.recordHeaderSize, "a record's head is its header and key")
        let covered = head.count - 4
        return try withUnsafeTemporaryAllocation(byteCount: RecordAuth.contextSize + covered, alignment: 8) { data in
            RecordAuth.storeContext(
                into: data, domain: bindingDomain, version: Format.boundVersion, image: image, offset: offset)
            UnsafeMutableRawBufferPointer(rebasing: data[RecordAuth.contextSize...]).copyMemory(
                from: UnsafeRawBufferPointer(rebasing: head[4...]))
            return try body(UnsafeRawBufferPointer(data))
        }
    }

    /// `withBindingData` of the set record a writer is about to seal at `offset` of `image`, made from its own
    /// values (the bytes `RecordWriter` stores from them, by the same `RecordWriter.storeFields`): what is sealed is
    /// never read back from a file another process can write.
    @inline(__always)
    static func withBindingData<R>(
        image: ImageIdentity, offset: Int, kind: RecordKind, valueType: UInt8, flags: UInt8, valueLength: Int,
        seq: UInt64, expiresAt: Int64, key: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer) throws -> R
    ) rethrows -> R {
        let size = RecordAuth.contextSize + Format.recordHeaderSize - 4 + key.count
        return try withUnsafeTemporaryAllocation(byteCount: size, alignment: 8) { data in
            RecordAuth.storeContext(into: data, domain: bindingDomain, version: Format.boundVersion, image: image, offset: offset)
            // Record bytes 4..<32 and the key, laid out as in the record: its magic would lie 4 bytes before them.
            RecordWriter.storeFields(
                into: data.baseAddress! + (RecordAuth.contextSize - 4), kind: kind, valueType: valueType, flags: flags,
                valueLength: valueLength, seq: seq, expiresAt: expiresAt, key: key)
            return try body(UnsafeRawBufferPointer(data))
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
        // On the stack: a warm sealed read allocates nothing for it.
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

    // MARK: Sealing

    /// Writes the sealed set record of an assembled `plaintext` (`u32 nameLength | name | value`, `assemble`)
    /// whose key is its tag `key`: bound to `binding` (an image of version 6) or authenticated by `signer`, its
    /// value sealed by `sealer` with its associated data. Every sealed set record is framed here: the codec's,
    /// the transaction writer's, a rekey's and compaction's copy. Throws what the sealer throws.
    @inline(__always)
    static func writeSet(
        into bytes: UnsafeMutableRawBufferPointer, at offset: Int, flags: UInt8, seq: UInt64,
        plaintext: UnsafeRawBufferPointer, key: UnsafeRawBufferPointer, type: UInt8, expiresAt: Int64,
        uuid: StoreUUID, signer: RecordAuth?, binding: ImageIdentity?, seed: RecordSeed, sealer: any PrefsSealer
    ) throws -> RecordHeader {
        let storedLength = plaintext.count + sealer.overhead
        if let binding {
            return try RecordWriter.writeBound(
                into: bytes, at: offset, valueType: type, flags: flags, seq: seq, expiresAt: expiresAt,
                key: key, valueLength: storedLength, image: binding, seed: seed
            ) { out, ad in
                try sealer.seal(plaintext, associatedData: ad, into: out)
            }
        }
        return try RecordWriter.write(
            into: bytes, at: offset, kind: .set, valueType: type, flags: flags | RecordFlags.sealed,
            seq: seq, expiresAt: expiresAt, key: key, valueLength: storedLength, auth: signer, seed: seed
        ) { out in
            try withAssociatedData(uuid: uuid, tag: key, type: type, expiresAt: expiresAt) { ad in
                try sealer.seal(plaintext, associatedData: ad, into: out)
            }
        }
    }

    // MARK: Opening

    /// Splits a plaintext `u32 nameLength | name | value` and passes the name and value to `body`; with
    /// `expectedName`, the sealed name must be exactly that one (bytes compared, nothing decoded).
    @inline(__always)
    static func withNameAndValue<R>(
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
    /// it is `bound` (version 6, `withBindingData`, made from a private copy of `head`, whose type and
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
                try withBindingData(image: image, head: head, offset: offset) { ad in
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

    /// Passes `body` a private copy of the head (magic to the end of the key) and the sealed value of the set record
    /// at `offset` of `bytes` whose key and value are `keyLength` and `valueLength` bytes long (`PrivateCopy`): what
    /// is opened and checked is the copy, which nobody else writes. Throws when the record does not fit `bytes`.
    @inline(__always)
    static func withPrivateRecord<R>(
        in bytes: UnsafeRawBufferPointer, at offset: Int, keyLength: Int, valueLength: Int,
        _ body: (_ head: UnsafeRawBufferPointer, _ sealed: UnsafeRawBufferPointer) throws -> R
    ) throws -> R {
        let headLength = Format.recordHeaderSize + keyLength
        guard offset >= 0, offset + headLength + valueLength <= bytes.count else { throw SealedPayloadError() }
        return try PrivateCopy.of(bytes, offset..<offset + headLength + valueLength) { copy in
            try body(
                UnsafeRawBufferPointer(rebasing: copy[0..<headLength]), UnsafeRawBufferPointer(rebasing: copy[headLength...]))
        }
    }

    /// Whether the value of the sealed set record `record` (its CRC verified) of `image` opens, bound or not (as a
    /// private copy).
    static func opens(
        _ record: RecordHeader, in bytes: UnsafeRawBufferPointer, image: ImageIdentity, sealer: any PrefsSealer
    ) -> Bool {
        (try? withPrivateRecord(
            in: bytes, at: record.offset, keyLength: record.keyLength, valueLength: record.valueLength
        ) { head, sealed in
            try withPlaintext(
                of: sealed, head: head, bound: record.isBound, in: image, offset: record.offset,
                type: record.valueType, expiresAt: record.expiresAt, sealer: sealer
            ) { _ in () }
        }) != nil
    }

    /// Whether the bound set record `record` (its CRC verified) of `image` is authentic: flagged bound, its padding
    /// zeros (the seal does not cover it), and its value opens with the associated data of its place, `fileOffset`
    /// (into a buffer wiped after).
    static func isAuthentic(
        _ record: RecordHeader, in bytes: UnsafeRawBufferPointer, image: ImageIdentity, fileOffset: Int,
        sealer: any PrefsSealer
    ) -> Bool {
        guard record.isBound else { return false }
        let valueEnd = record.valueOffset + record.valueLength
        for i in valueEnd..<record.offset + record.length - Format.recordTrailerSize where bytes[i] != 0 {
            return false
        }
        let head = UnsafeRawBufferPointer(rebasing: bytes[record.offset..<record.valueOffset])
        return
            (try? withPlaintext(
                of: record.value(in: bytes), head: head, bound: true, in: image, offset: fileOffset,
                type: record.valueType, expiresAt: record.expiresAt, sealer: sealer
            ) { _ in () }) != nil
    }

    /// Copies the sealed set record `record` of `source`, an image `sourceImage`, into `bytes` at `offset` of
    /// `image`, an image that binds values: its value is opened with the associated data it was sealed with, and
    /// sealed again, bound to its new place under a fresh nonce (`flags`: its flags in the new image). Returns the
    /// copy's length; nil when it does not open there (its bytes changed). The record is copied once into private
    /// memory (the source may be a shared mapping): the open checks that copy, and the new record is made from it.
    static func copy(
        _ record: RecordHeader, from source: UnsafeRawBufferPointer, sourceImage: ImageIdentity,
        into bytes: UnsafeMutableRawBufferPointer, at offset: Int, seq: UInt64, image: ImageIdentity, seed: RecordSeed,
        sealer: any PrefsSealer
    ) -> Int? {
        guard record.isSealed else { return nil }
        return try? withPrivateRecord(
            in: source, at: record.offset, keyLength: record.keyLength, valueLength: record.valueLength
        ) { head, sealed in
            try withPlaintext(
                of: sealed, head: head, bound: record.isBound, in: sourceImage, offset: record.offset,
                type: record.valueType, expiresAt: record.expiresAt, sealer: sealer
            ) { plain in
                try RecordWriter.writeBound(
                    into: bytes, at: offset, valueType: record.valueType, flags: record.flags | RecordFlags.commit,
                    seq: seq, expiresAt: record.expiresAt,
                    key: UnsafeRawBufferPointer(rebasing: head[Format.recordHeaderSize...]), valueLength: sealed.count,
                    image: image, seed: seed
                ) { out, ad in
                    try sealer.seal(plain, associatedData: ad, into: out)
                }.length
            }
        }
    }
}

/// A sealed value's plaintext does not have the expected shape (or names another key).
struct SealedPayloadError: Error {}
