/// A stretch of a store file that did not verify, or a transaction that could not be completed.
///
/// ```swift
/// for damage in report.damage { print(damage.range, damage.records, damage.keys) }
/// ```
public struct PrefsDamage: Sendable, Equatable, CustomStringConvertible {
    /// The byte range in the file.
    public var range: Range<Int>
    /// Records lost there: record headers still recognisable in it, at least one (zero for the header's
    /// log-end word, which is not a record).
    public var records: Int
    /// Keys of records there that verified but were lost with the damage (the members of a transaction it cut
    /// short), in a plain store. A record that failed its check names none: the bytes where its key would be are
    /// not a key anyone wrote. A sealed store names none.
    public var keys: [String]
    /// Why it was dropped, e.g. "checksum mismatch".
    public var reason: String
    /// Whether records here verify their checksum but not their authenticator (a sealed store read with its
    /// sealer): someone who could write the file but does not hold the key changed it.
    package var isTampering = false
    /// What the bytes where a damaged record's key would lie spell, in a plain store: not keys (the record failed its
    /// check), never reported; a hint for ``PersistedState``, whose state absent after damage that may have named it
    /// hydrates as lost rather than never stored.
    package var unverifiedKeys: [String] = []

    public var description: String {
        "bytes \(range.lowerBound)..<\(range.upperBound): \(reason), \(records) record(s)"
            + (keys.isEmpty ? "" : ", keys \(keys)")
    }
}

/// What an open found and did when the file was damaged (``PrefsStore/lastRecovery``).
///
/// ```swift
/// if let report = store.lastRecovery {
///     showBanner("Some settings were reset (\(report.recordsLost) lost)")
/// }
/// ```
public struct PrefsRecoveryReport: Sendable, Equatable, CustomStringConvertible {
    /// The store file that was damaged.
    public var path: String
    /// Where the damaged original was copied (mode 0400), or nil when the directory is read-only.
    public var quarantinePath: String?
    /// Records that verified and were kept (commit records included).
    public var recordsKept: Int
    /// Records lost to damage (an estimate where record boundaries were destroyed; at least one per range).
    public var recordsLost: Int
    /// Keys of lost records, where their names could still be read.
    public var lostKeys: [String]
    /// Every damaged range with its reason.
    public var damage: [PrefsDamage]
    /// When the recovery happened, in milliseconds since the Unix epoch.
    public var recoveredAt: Int64

    public var description: String {
        "recovered damaged store \(path): \(findings); "
            + (quarantinePath.map { "original kept at \($0)" }
                ?? "the original was not copied aside (the store could not be written)")
    }

    /// Names the damaged records may have had (`PrefsDamage.unverifiedKeys`): hints, not keys.
    package var unverifiedLostKeys: [String] { damage.flatMap(\.unverifiedKeys) }

    /// What the damage costs, without what was done about it: records kept and lost, lost keys, damaged bytes.
    var findings: String {
        "kept \(recordsKept) record\(recordsKept == 1 ? "" : "s"), lost \(recordsLost)"
            + (lostKeys.isEmpty ? "" : " (keys: \(lostKeys.joined(separator: ", ")))")
            + "; damaged bytes: \(damage.map { "\($0.range.lowerBound)..<\($0.range.upperBound)" }.joined(separator: ", "))"
    }
}

/// The result of a full scan of a store file (``PrefsStore/verify()``).
///
/// ```swift
/// let report = try PrefsStore.verify(id: "ui", directory: dir)
/// exit(report.isClean ? 0 : 65)
/// ```
public struct PrefsVerifyReport: Sendable, Equatable {
    /// The file scanned.
    public var path: String
    /// Records whose checksum (and, in a sealed store with its sealer, authentication) verified.
    public var recordsVerified: Int
    /// Every damaged range, transaction or tampered record found.
    public var damage: [PrefsDamage]
    /// Whether the store is sealed: without its sealer, only checksums were verified.
    package var isSealed = false
    /// True when nothing is damaged.
    public var isClean: Bool { damage.isEmpty }
}
