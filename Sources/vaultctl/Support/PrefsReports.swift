import PrefsKV

/// A damaged range in `verify` and `repair` answers:
/// `{"keys": ["theme"], "length": 48, "offset": 4096, "reason": "checksum mismatch", "records": 1}`.
struct DamageReport: Encodable {
    var offset: Int
    var length: Int
    var records: Int
    var keys: [String]
    var reason: String

    init(_ damage: PrefsDamage) {
        offset = damage.range.lowerBound
        length = damage.range.count
        records = damage.records
        keys = damage.keys
        reason = damage.reason
    }
}

/// A value in `prefs get --json`: JSON's own types where they fit, base64 for bytes, and the stored text, as a
/// string, for JSON (exact, as in exports).
struct ValueReport: Encodable {
    var value: PrefsValue

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch value {
        case .bool(let flag): try container.encode(flag)
        case .int(let number): try container.encode(number)
        case .double(let number): try container.encode(number)
        case .string(let text), .json(let text): try container.encode(text)
        case .bytes: try container.encode(value.plainText)
        case .strings(let strings): try container.encode(strings)
        }
    }
}

/// Damaged ranges as a table: offset, length, records lost, keys named there, reason.
func damageTable(_ damage: [PrefsDamage]) -> String {
    table(
        ["OFFSET", "LENGTH", "RECORDS", "KEYS", "REASON"],
        damage.map { item in
            [
                String(item.range.lowerBound), String(item.range.count), String(item.records),
                item.keys.isEmpty ? "-" : item.keys.joined(separator: ","), item.reason,
            ]
        })
}
