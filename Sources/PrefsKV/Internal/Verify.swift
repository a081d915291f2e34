// Verify: a full scan of a mapped file and, with a sealer, an authentication of every sealed value. Read-only.

enum Verify {
    /// Scans a mapped file completely and, with a sealer, opens every sealed value. Changes nothing.
    static func verify(
        file: MappedFile, header: Header, sealer: (any PrefsSealer)?, path: String, logEndKnown: Bool = true
    ) -> PrefsVerifyReport {
        var snapshot = Snapshot(file: file, header: header)
        // With the sealer, a version-2 store's records are authenticated by the scan itself.
        StoreLog.scan(into: &snapshot, sealer: sealer, logEndKnown: logEndKnown)
        var damage = snapshot.damage
        var verified = snapshot.recordCount
        if let sealer, header.isEncrypted {
            // Authenticate every committed set record, live or not.
            file.withBytes { bytes in
                let limit = snapshot.end
                _ = LogScanner.scan(
                    bytes, from: Format.logStart, to: limit, freeSpaceEndsLog: true, plainKeys: false,
                    seed: header.recordSeed, auth: RecordAuth(header: header, sealer: sealer)
                ) { record in
                    guard record.kind == .set, record.isSealed else { return }
                    let head = UnsafeRawBufferPointer(rebasing: bytes[record.offset..<record.valueOffset])
                    let ok =
                        (try? SealedRecordCodec.withPlaintext(
                            of: record.value(in: bytes), head: head, bound: record.isBound, in: ImageIdentity(header),
                            offset: record.offset, type: record.valueType, expiresAt: record.expiresAt, sealer: sealer
                        ) { _ in () }) != nil
                    if !ok {
                        verified -= 1
                        damage.append(
                            PrefsDamage(
                                range: record.offset..<record.offset + record.length, records: 1, keys: [],
                                reason: "a sealed value fails to authenticate (tampered or moved)", isTampering: true))
                    }
                }
            }
        }
        return PrefsVerifyReport(path: path, recordsVerified: verified, damage: damage, isSealed: header.isEncrypted)
    }
}
