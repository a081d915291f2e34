// Rekey: every live value re-sealed with a new sealer (or stored in clear) in a new image with the new key check.

enum Rekey {
    /// Writes the new image of `log` (whose entries `codec` opens) for `newSealer` to the temporary file, and
    /// returns it with its header; the caller installs it.
    static func image(
        of log: StoreLog, codec: RecordCodec, to newSealer: (any PrefsSealer)?, watched: Bool
    ) throws(PrefsError) -> (MappedFile, Header) {
        if let newSealer {
            precondition(newSealer.keyCheck.count <= Format.maxKeyCheckLength, "a key check is at most 64 bytes")
            precondition(newSealer.overhead <= Format.maxSealerOverhead, "a sealer's overhead is at most 1024 bytes")
        }
        let newCodec = RecordCodec(sealer: newSealer)
        struct Item {
            var name: String
            var type: ValueType
            var value: [UInt8]
            var expiresAt: Int64
            var key: [UInt8]
            var storedLength: Int
        }
        let (live, _) = log.liveEntriesInOrder()
        let header = log.header
        var newHeader = header
        newHeader.keyCheck = newSealer?.keyCheck ?? []
        newHeader.flags = newSealer == nil ? header.flags & ~Format.flagEncrypted : header.flags | Format.flagEncrypted
        newHeader = newHeader.nextImage()
        let auth = RecordAuth(header: newHeader, sealer: newSealer)
        var items: [Item] = []
        var length = 0
        for entry in live {
            let (name, value) = try codec.plainEntry(entry, in: log)
            let key = newSealer?.tag(forKey: name) ?? Array(name.utf8)
            let stored = newCodec.storedLength(name: name, valueLength: value.count)
            items.append(
                Item(
                    name: name, type: entry.type, value: value, expiresAt: entry.expiresAt, key: key,
                    storedLength: stored))
            length += Format.recordLength(
                keyLength: key.count, valueLength: stored, authenticated: RecordAuth.signsSets(auth))
        }
        let uuid = header.uuid
        let image = try StoreImage.write(
            paths: log.paths, header: newHeader, auth: auth, logLength: length,
            capacity: Format.headerSize + 2 * length, watched: watched, writingBlocks: log.synchronous
        ) { bytes throws(PrefsError) in
            var offset = newHeader.firstRecordOffset
            for (i, item) in items.enumerated() {
                do {
                    offset += try item.key.withUnsafeBytes { key in
                        try item.value.withUnsafeBytes { value in
                            try newCodec.writeSet(
                                into: bytes, at: offset, flags: RecordFlags.commit, seq: UInt64(i + 1),
                                name: item.name, key: key, type: item.type, value: value, expiresAt: item.expiresAt,
                                storedLength: item.storedLength, uuid: uuid, auth: auth, seed: newHeader.recordSeed)
                        }
                    }.length
                } catch let error as PrefsError {
                    throw error
                } catch {
                    throw PrefsError(
                        .io, "the new sealer failed to seal a value", path: log.paths.data, underlying: error)
                }
            }
        }
        return (image, newHeader)
    }
}
