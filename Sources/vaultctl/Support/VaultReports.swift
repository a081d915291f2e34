import FoundationEssentials
import SecureVault

extension VaultItemInfo {
    /// Milliseconds since the Unix epoch, as `prefs keys` and every vault answer give times in JSON.
    static func milliseconds(_ date: Date) -> Int64 {
        Int64((date.timeIntervalSince1970 * 1000).rounded())
    }

    /// Whether the item carries an expiry that has passed.
    func isExpired(now: Date = Date()) -> Bool {
        expiresAt.map { $0 <= now } ?? false
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

/// An item in `vault list`, `get` and `set` answers: `{"createdAt": 1700000000000, "expired": false,
/// "expiresAt": 1700003600000, "key": "session", "kind": "sessionToken", "size": 24, "updatedAt": ...}`, times
/// in milliseconds since the Unix epoch; never the value unless revealed.
struct ItemReport: Encodable {
    /// The vault's service: in `get` and `set` answers, left out of `list`'s items.
    var service: String?
    var key: String
    var kind: String
    var size: Int
    var createdAt: Int64
    var updatedAt: Int64
    @Nullable var expiresAt: Int64?
    var expired: Bool
    /// The value itself: only in `get --reveal --json`.
    var value: String?

    init(_ item: VaultItemInfo, service: String? = nil, value: String? = nil) {
        self.service = service
        key = item.key
        kind = item.kind
        size = item.size
        createdAt = VaultItemInfo.milliseconds(item.createdAt)
        updatedAt = VaultItemInfo.milliseconds(item.updatedAt)
        expiresAt = item.expiresAt.map(VaultItemInfo.milliseconds)
        expired = item.isExpired()
        self.value = value
    }
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
