import FoundationEssentials
import SecureVault

extension VaultItemInfo {
    /// Milliseconds since the Unix epoch, as `prefs list` and every vault answer give times in JSON.
    static func milliseconds(_ date: Date) -> Int64 {
        Int64((date.timeIntervalSince1970 * 1000).rounded())
    }

    /// Whether the item carries an expiry that has passed.
    func isExpired(now: Date = Date()) -> Bool {
        expiresAt.map { $0 <= now } ?? false
    }

    /// `{"key": "session", "kind": "sessionToken", "size": 24, "createdAt": 1700000000000, "updatedAt": ...,
    /// "expiresAt": 1700003600000, "expired": false}`: never the value.
    var json: [String: JSONValue] {
        [
            "key": .string(key), "kind": .string(kind), "size": .int(Int64(size)),
            "createdAt": .int(Self.milliseconds(createdAt)), "updatedAt": .int(Self.milliseconds(updatedAt)),
            "expiresAt": .optional(expiresAt.map(Self.milliseconds)), "expired": .bool(isExpired()),
        ]
    }

    /// `never`, or the UTC expiry followed by `(valid)` or `(expired)`.
    var expiryText: String {
        guard let expiresAt else { return "never" }
        return utcTimestamp(milliseconds: Self.milliseconds(expiresAt)) + (isExpired() ? " (expired)" : " (valid)")
    }

    /// A row of `vault list`: key, kind, size, created, updated, expiry.
    var row: [String] {
        [
            key, kind, String(size), utcTimestamp(milliseconds: Self.milliseconds(createdAt)),
            utcTimestamp(milliseconds: Self.milliseconds(updatedAt)), expiryText,
        ]
    }

    /// Whether the value is text (string, sessionToken) rather than bytes (data, secret), for `get --reveal`.
    var holdsText: Bool { kind == "string" || kind == "sessionToken" }
}

/// Label-value lines with the values aligned: `status` and `get` in plain mode.
func fields(_ pairs: [(String, String)]) -> String {
    let width = pairs.map(\.0.count).max() ?? 0
    return pairs.map { label, value in
        label + String(repeating: " ", count: width - label.count + 2) + value
    }.joined(separator: "\n")
}

/// `0600`, the permission bits of a mode in octal.
func octalMode(_ mode: Int) -> String {
    "0" + String(mode, radix: 8)
}
