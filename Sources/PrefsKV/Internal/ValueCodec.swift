// Typed value encodings (see Documentation/FileFormat.md, "Values"), key validation and expiry times.
import FoundationEssentials
import SystemLayer

enum ValueCodec {
    static func validate(key: String) throws(PrefsError) {
        let length = key.utf8.count
        guard length > 0, length <= Format.maxKeyLength else {
            throw PrefsError(
                .invalidKey,
                length == 0
                    ? "a key must not be empty" : "a key is at most 16 KiB of UTF-8; this one is \(length) bytes")
        }
    }

    static func validate(length: Int, key: String) throws(PrefsError) {
        guard length <= Format.maxValueLength else {
            throw PrefsError(
                .valueTooLarge, "the value for key \"\(key)\" is \(length) bytes; the limit is 64 MiB")
        }
    }

    /// Milliseconds since the epoch at which a value set now with `ttl` expires; 0 for none. A zero or
    /// negative time-to-live gives a value that is already expired.
    static func expiresAt(_ ttl: Duration?) -> Int64 {
        guard let ttl else { return 0 }
        let (seconds, attoseconds) = ttl.components
        let milliseconds = seconds.multipliedReportingOverflow(by: 1000)
        let delta =
            milliseconds.overflow ? Int64.max / 2 : milliseconds.partialValue + attoseconds / 1_000_000_000_000_000
        let (sum, overflow) = Sys.nowMilliseconds().addingReportingOverflow(delta)
        return overflow ? Int64.max : max(sum, 1)
    }

    /// `u32 count`, then per string `u32 byteLength | UTF-8 bytes` (all little-endian).
    static func encode(_ strings: [String]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(4 + strings.reduce(0) { $0 + 4 + $1.utf8.count })
        withUnsafeBytes(of: UInt32(strings.count).littleEndian) { out.append(contentsOf: $0) }
        for s in strings {
            withUnsafeBytes(of: UInt32(s.utf8.count).littleEndian) { out.append(contentsOf: $0) }
            out.append(contentsOf: s.utf8)
        }
        return out
    }

    /// Decodes `encode(_:)`'s layout; nil when the lengths do not add up.
    static func decodeStrings(_ bytes: UnsafeRawBufferPointer) -> [String]? {
        guard bytes.count >= 4 else { return nil }
        let count = Int(UInt32(littleEndian: bytes.loadUnaligned(as: UInt32.self)))
        guard count <= (bytes.count - 4) / 4 else { return nil }
        var strings: [String] = []
        strings.reserveCapacity(count)
        var offset = 4
        for _ in 0..<count {
            guard offset + 4 <= bytes.count else { return nil }
            let length = Int(UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt32.self)))
            offset += 4
            guard length <= bytes.count - offset else { return nil }
            strings.append(String(decoding: bytes[offset..<offset + length], as: UTF8.self))
            offset += length
        }
        return offset == bytes.count ? strings : nil
    }

    /// JSON for `setCodable`.
    static func json<T: Encodable>(_ value: T, key: String) throws(PrefsError) -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        do {
            return try encoder.encode(value)
        } catch {
            throw PrefsError(.invalidInput, "the value for key \"\(key)\" cannot be encoded as JSON", underlying: error)
        }
    }

    /// The plain bytes of a typed value given by the transaction API.
    static func bytes(_ value: Bool) -> [UInt8] { [value ? 1 : 0] }
    static func bytes(_ value: Int64) -> [UInt8] { withUnsafeBytes(of: value.littleEndian) { Array($0) } }
    static func bytes(_ value: Double) -> [UInt8] { withUnsafeBytes(of: value.bitPattern.littleEndian) { Array($0) } }
}
