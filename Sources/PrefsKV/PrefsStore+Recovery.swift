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
    /// Keys of records there that verified but were dropped with the damage (the members of a transaction it cut
    /// short), in a plain store. A record that failed its check names none: the bytes where its key would be are
    /// not a key anyone wrote. A sealed store names none. A write dropped here may have cost its key nothing (a
    /// later write replaced it): what each key lost is in ``PrefsRecoveryReport/lostKeys`` and
    /// ``PrefsRecoveryReport/revertedKeys``.
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
    /// The writes of `keys`, with where each lay and what it did: what the recovery report weighs against what
    /// survived (`Recovery.nameCost`). A plain store's only.
    package var droppedWrites: [DroppedWrite] = []

    /// A write that verified but was dropped with damage (a member of a transaction the damage cut short).
    package struct DroppedWrite: Sendable, Equatable {
        package enum Effect: Sendable, Equatable {
            /// It set the key's value.
            case set
            /// It removed the key.
            case delete
            /// It removed every key.
            case removeAll
        }
        /// The key it wrote (nil for `removeAll`, or a name that is not UTF-8).
        package var key: String?
        /// Its offset in the damaged file.
        package var offset: Int
        package var effect: Effect

        init?(_ record: RecordHeader, key: String?) {
            switch record.kind {
            case .set: effect = .set
            case .delete: effect = .delete
            case .removeAll: effect = .removeAll
            case .commit, .header, .index: return nil
            }
            guard key != nil || effect == .removeAll else { return nil }
            self.key = key
            offset = record.offset
        }
    }

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
    /// Keys whose value is gone: a write of theirs that verified was dropped with the damage (a transaction it cut
    /// short), nothing later replaced it, and no older value survived. A key that failed its check is not named (its
    /// name is not readable), nor one a later write replaced, nor one that kept an older value (``revertedKeys``).
    public var lostKeys: [String]
    /// Keys that kept an older value (or came back, when their removal was dropped): their newest write verified
    /// but was dropped with the damage, and the value they had before it survived.
    ///
    /// ```swift
    /// if let report = store.lastRecovery, report.revertedKeys.contains("theme") {
    ///     showBanner("Your theme was reset to an earlier choice")
    /// }
    /// ```
    public var revertedKeys: [String] = []
    /// Keys whose dropped writes a later write replaced: they cost nothing (named in the findings only).
    package var supersededKeys: [String] = []
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

    /// What the lost records cost each key they name: the keys whose value is gone, then those that kept an older
    /// value, then those a later write replaced (" (keys: a; reverted to an older value: b; replaced by a later
    /// write: c)"), or "" when they name none.
    package var keyCosts: String {
        let parts = [
            lostKeys.isEmpty ? nil : "keys: " + lostKeys.joined(separator: ", "),
            revertedKeys.isEmpty ? nil : "reverted to an older value: " + revertedKeys.joined(separator: ", "),
            supersededKeys.isEmpty ? nil : "replaced by a later write: " + supersededKeys.joined(separator: ", "),
        ].compactMap { $0 }
        return parts.isEmpty ? "" : " (" + parts.joined(separator: "; ") + ")"
    }

    /// What the damage costs, without what was done about it: records kept and lost, lost keys, damaged bytes.
    var findings: String {
        "kept \(recordsKept) record\(recordsKept == 1 ? "" : "s"), lost \(recordsLost)" + keyCosts
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
