// Writing records: one record's bytes laid out at an offset of a buffer, its CRC32C computed and its magic stored
// last; and a verified record copied into a new image.

/// Writes records into a mutable buffer (the mapping, beyond the published log end, or a new image).
enum RecordWriter {
    /// Writes one record at `offset` and returns its header (its `length` is the bytes it took). The value is
    /// produced by `fillValue` directly in place (in a sealed store, in the private copy the record is built in). With `auth` (a version-2 sealed store) the record is flagged
    /// authenticated and its authenticator is computed before the CRC, which starts with `seed` (the image's
    /// `Header.recordSeed`). The magic is stored last, after the CRC, so a half-written record never starts with it.
    /// A set record of an image that binds values is written with `writeBound` instead.
    @inline(__always)
    static func write(
        into bytes: UnsafeMutableRawBufferPointer, at offset: Int, kind: RecordKind, valueType: UInt8, flags: UInt8,
        seq: UInt64, expiresAt: Int64, key: UnsafeRawBufferPointer, valueLength: Int, auth: RecordAuth? = nil,
        seed: RecordSeed, fillValue: (UnsafeMutableRawBufferPointer) throws -> Void
    ) rethrows -> RecordHeader {
        precondition(kind != .set || !(auth?.bindsValues ?? false), "a bound set record is written by writeBound")
        return try write(
            into: bytes, at: offset, kind: kind, valueType: valueType, flags: flags, seq: seq, expiresAt: expiresAt,
            key: key, valueLength: valueLength, auth: auth, binding: nil, seed: seed
        ) { out, _ in try fillValue(out) }
    }

    /// Writes a sealed set record of `image`, an image that binds values (`RecordAuth.bindsValues`, version 6):
    /// flagged bound, with no authenticator; `sealValue` seals the value in place with the associated data it is
    /// given, the record's binding (`SealedValue.withBindingData`: its context, header and key, as written here).
    /// Takes the image alone, not the `RecordAuth`: copying one copies its sealer existential, on every write.
    @inline(__always)
    static func writeBound(
        into bytes: UnsafeMutableRawBufferPointer, at offset: Int, valueType: UInt8, flags: UInt8, seq: UInt64,
        expiresAt: Int64, key: UnsafeRawBufferPointer, valueLength: Int, image: ImageIdentity, seed: RecordSeed,
        sealValue: (UnsafeMutableRawBufferPointer, UnsafeRawBufferPointer) throws -> Void
    ) rethrows -> RecordHeader {
        try write(
            into: bytes, at: offset, kind: .set, valueType: valueType, flags: flags | RecordFlags.sealed, seq: seq,
            expiresAt: expiresAt, key: key, valueLength: valueLength, auth: nil, binding: image, seed: seed,
            fill: sealValue)
    }

    @inline(__always)
    private static func write(
        into bytes: UnsafeMutableRawBufferPointer, at offset: Int, kind: RecordKind, valueType: UInt8, flags: UInt8,
        seq: UInt64, expiresAt: Int64, key: UnsafeRawBufferPointer, valueLength: Int, auth: RecordAuth?,
        binding: ImageIdentity?, seed: RecordSeed,
        fill: (UnsafeMutableRawBufferPointer, UnsafeRawBufferPointer) throws -> Void
    ) rethrows -> RecordHeader {
        precondition(auth == nil || binding == nil, "a record is either authenticated or bound")
        let signed = auth != nil
        var flags = flags & ~(RecordFlags.authenticated | RecordFlags.bound)
        if signed { flags |= RecordFlags.authenticated }
        if binding != nil { flags |= RecordFlags.bound }
        let length = Format.recordLength(keyLength: key.count, valueLength: valueLength, authenticated: signed)
        precondition(offset & 7 == 0 && offset + length <= bytes.count, "record does not fit its buffer")
        let base = bytes.baseAddress! + offset
        base.storeBytes(of: 0, toByteOffset: 0, as: UInt32.self)
        let crc: UInt32
        if signed || binding != nil || flags & RecordFlags.sealed != 0 {
            // A sealed store's record is built whole in private memory (sealed, authenticated, checksummed there)
            // and copied into `bytes`, which may be a mapping another process writes meanwhile: what the
            // authenticator and the CRC cover is exactly what this writer laid out, never bytes read back.
            crc = try withUnsafeTemporaryAllocation(byteCount: length, alignment: 16) { record in
                let crc = try layOut(
                    at: record.baseAddress!, fileOffset: offset, length: length, kind: kind, valueType: valueType,
                    flags: flags, seq: seq, expiresAt: expiresAt, key: key, valueLength: valueLength, auth: auth,
                    binding: binding, seed: seed, fill: fill)
                (base + 4).copyMemory(from: record.baseAddress! + 4, byteCount: length - 4)
                return crc
            }
        } else {
            crc = try layOut(
                at: base, fileOffset: offset, length: length, kind: kind, valueType: valueType, flags: flags, seq: seq,
                expiresAt: expiresAt, key: key, valueLength: valueLength, auth: nil, binding: nil, seed: seed,
                fill: fill)
        }
        // The magic last, after the CRC, so a half-written record never starts with it.
        base.storeBytes(of: Format.recordMagic.littleEndian, toByteOffset: 0, as: UInt32.self)
        return RecordHeader(
            offset: offset, kind: kind, valueType: valueType, flags: flags, keyLength: key.count,
            valueLength: valueLength, seq: seq, expiresAt: expiresAt, crc: crc)
    }

    /// Lays out a record's bytes 4..<`length` at `base` (its fields, key, value from `fill`, padding, authenticator,
    /// CRC) for file offset `fileOffset`, and returns its CRC. The magic is the caller's to store, last.
    @inline(__always)
    private static func layOut(
        at base: UnsafeMutableRawPointer, fileOffset offset: Int, length: Int, kind: RecordKind, valueType: UInt8,
        flags: UInt8, seq: UInt64, expiresAt: Int64, key: UnsafeRawBufferPointer, valueLength: Int,
        auth: RecordAuth?, binding: ImageIdentity?, seed: RecordSeed,
        fill: (UnsafeMutableRawBufferPointer, UnsafeRawBufferPointer) throws -> Void
    ) rethrows -> UInt32 {
        storeFields(
            into: base, kind: kind, valueType: valueType, flags: flags, valueLength: valueLength, seq: seq,
            expiresAt: expiresAt, key: key)
        let valueStart = Format.recordHeaderSize + key.count
        let value = UnsafeMutableRawBufferPointer(start: base + valueStart, count: valueLength)
        if let binding {
            // The binding is made from this writer's own values, never read back from the record.
            try SealedValue.withBindingData(
                image: binding, offset: offset, kind: kind, valueType: valueType, flags: flags,
                valueLength: valueLength, seq: seq, expiresAt: expiresAt, key: key
            ) { ad in try fill(value, ad) }
        } else {
            try fill(value, UnsafeRawBufferPointer(start: nil, count: 0))
        }
        let padStart = valueStart + valueLength
        (base + padStart).initializeMemory(as: UInt8.self, repeating: 0, count: length - padStart)
        if auth != nil {
            auth.unsafelyUnwrapped.sign(UnsafeMutableRawBufferPointer(start: base, count: length), at: offset)
        }
        var crc = seed.start
        crc.update(UnsafeRawBufferPointer(start: base + 4, count: length - 8))
        base.storeBytes(of: crc.value.littleEndian, toByteOffset: length - 4, as: UInt32.self)
        return crc.value
    }

    /// Stores a record's bytes 4..<32 (kind, value type, flags, a zero byte, key length, value length, sequence
    /// number, expiry) and its key at `base`, the record's magic: what `write` lays out, and what a bound value's
    /// associated data repeats (`SealedValue.withBindingData`, at its own offset).
    @inline(__always)
    static func storeFields(
        into base: UnsafeMutableRawPointer, kind: RecordKind, valueType: UInt8, flags: UInt8, valueLength: Int,
        seq: UInt64, expiresAt: Int64, key: UnsafeRawBufferPointer
    ) {
        base.storeBytes(of: kind.rawValue, toByteOffset: 4, as: UInt8.self)
        base.storeBytes(of: valueType, toByteOffset: 5, as: UInt8.self)
        base.storeBytes(of: flags, toByteOffset: 6, as: UInt8.self)
        base.storeBytes(of: 0, toByteOffset: 7, as: UInt8.self)
        base.storeBytes(of: UInt32(key.count).littleEndian, toByteOffset: 8, as: UInt32.self)
        base.storeBytes(of: UInt32(valueLength).littleEndian, toByteOffset: 12, as: UInt32.self)
        base.storeBytes(of: seq.littleEndian, toByteOffset: 16, as: UInt64.self)
        base.storeBytes(of: expiresAt.littleEndian, toByteOffset: 24, as: Int64.self)
        if !key.isEmpty {
            (base + Format.recordHeaderSize).copyMemory(from: key.baseAddress!, byteCount: key.count)
        }
    }

    /// Copies a verified record into `bytes` at `offset` with sequence number `seq`, setting its commit flag
    /// (a new image holds only single committed records, numbered 1, 2, 3...), and returns its length. With
    /// `auth` the copy gets a new authenticator, for its new image and offset; its checksum starts with `seed`, the
    /// new image's. Its bytes are copied as they are: a sealed set record copied into an image that binds values is
    /// sealed again instead (`SealedValue.copy`; `StoreImage.copy` chooses).
    static func copy(
        _ record: RecordHeader, from source: UnsafeRawBufferPointer, into bytes: UnsafeMutableRawBufferPointer,
        at offset: Int, seq: UInt64, auth: RecordAuth?, seed: RecordSeed
    ) -> Int {
        let key = record.key(in: source)
        let value = record.value(in: source)
        return write(
            into: bytes, at: offset, kind: record.kind, valueType: record.valueType, flags: record.flags | RecordFlags.commit,
            seq: seq, expiresAt: record.expiresAt, key: key, valueLength: value.count, auth: auth, seed: seed
        ) { out in
            if !value.isEmpty { out.baseAddress!.copyMemory(from: value.baseAddress!, byteCount: value.count) }
        }.length
    }
}
