// Verify: a full scan of a mapped file and, with a sealer, an authentication of every sealed value. Read-only.

enum Verify {
    /// Scans a mapped file completely and, with a sealer, opens every sealed value. Changes nothing.
    static func verify(
        file: MappedFile, header: Header, sealer: (any PrefsSealer)?, path: String
    ) throws(PrefsError) -> PrefsVerifyReport {
        var snapshot = Snapshot(file: file, header: header)
        // With the sealer, a version-2 store's records are authenticated by the scan itself.
        try StoreLog.scan(into: &snapshot, sealer: sealer)
        return report(on: snapshot, sealer: sealer, path: path)
    }

    /// The report on a snapshot whose whole log was scanned with `sealer` (`StoreLog.scan`, or
    /// `StoreLog.readOnlySnapshot`): its damage, and, with a sealer, every sealed value that does not open.
    static func report(on snapshot: Snapshot, sealer: (any PrefsSealer)?, path: String) -> PrefsVerifyReport {
        let file = snapshot.file
        let header = snapshot.header
        var damage = snapshot.damage
        var verified = snapshot.recordCount
        if let sealer, header.isEncrypted {
            // Authenticate every committed set record, live or not.
            file.withBytes { bytes in
                let limit = snapshot.end
                _ = LogScanner.scan(
                    bytes, from: Format.logStart, to: limit, freeSpaceEndsLog: true, plainKeys: false,
                    seed: header.recordSeed, auth: RecordAuth(header: header, sealer: sealer)
                ) { record, recordBytes in
                    guard record.kind == .set, record.isSealed else { return }
                    let ok = SealedValue.opens(record, in: recordBytes, image: ImageIdentity(header), sealer: sealer)
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
