/// What the vault stores under an item's name (inside the sealed value): metadata, then the secret.
///
/// Layout: `version (1) | kind (1) | createdAt ms (i64) | updatedAt ms (i64) | expiresAt ms (i64, 0 = none) |
/// payload`. Metadata lives inside the ciphertext, so not even timestamps are readable on disk.
struct ItemEnvelope {
    enum Kind: UInt8 {
        case string = 1
        case data = 2
        case secret = 3
        case sessionToken = 4

        var name: String {
            switch self {
            case .string: return "string"
            case .data: return "data"
            case .secret: return "secret"
            case .sessionToken: return "sessionToken"
            }
        }
    }

    static let version: UInt8 = 1
    static let headerLength = 26

    var kind: Kind
    var createdAt: Int64
    var updatedAt: Int64
    var expiresAt: Int64

    /// Writes the envelope header followed by `payload` into a buffer, passes it to `body`, then wipes it.
    func withEncoded<R>(payload: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        let length = Self.headerLength + payload.count
        return try withUnsafeTemporaryAllocation(byteCount: length, alignment: 8) { buffer in
            defer { Sodium.zero(buffer) }
            buffer[0] = Self.version
            buffer[1] = kind.rawValue
            buffer.storeBytes(of: createdAt.littleEndian, toByteOffset: 2, as: Int64.self)
            buffer.storeBytes(of: updatedAt.littleEndian, toByteOffset: 10, as: Int64.self)
            buffer.storeBytes(of: expiresAt.littleEndian, toByteOffset: 18, as: Int64.self)
            if payload.count > 0 {
                UnsafeMutableRawBufferPointer(rebasing: buffer[Self.headerLength...]).copyMemory(from: payload)
            }
            return try body(UnsafeRawBufferPointer(buffer))
        }
    }

    /// Parses the header of a stored value; nil when it is not a valid envelope.
    static func decode(_ bytes: UnsafeRawBufferPointer) -> (ItemEnvelope, payload: UnsafeRawBufferPointer)? {
        guard bytes.count >= headerLength, bytes[0] == version, let kind = Kind(rawValue: bytes[1]) else { return nil }
        let envelope = ItemEnvelope(
            kind: kind,
            createdAt: Int64(littleEndian: bytes.loadUnaligned(fromByteOffset: 2, as: Int64.self)),
            updatedAt: Int64(littleEndian: bytes.loadUnaligned(fromByteOffset: 10, as: Int64.self)),
            expiresAt: Int64(littleEndian: bytes.loadUnaligned(fromByteOffset: 18, as: Int64.self)))
        return (envelope, UnsafeRawBufferPointer(rebasing: bytes[headerLength...]))
    }
}
