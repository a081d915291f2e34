import PrefsKV

extension PrefsDamage {
    /// `{"offset": 4096, "length": 48, "records": 1, "keys": ["theme"], "reason": "checksum mismatch"}`
    var json: JSONValue {
        [
            "offset": .int(Int64(range.lowerBound)), "length": .int(Int64(range.count)),
            "records": .int(Int64(records)), "keys": .array(keys.map(JSONValue.string)), "reason": .string(reason),
        ]
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
