public import PrefsKV

/// A sealer for the tests, the test helper and the fuzz targets only: a keyed XOR keystream with a keyed
/// 64-bit authenticator. Not cryptography; it exercises the seam (tags, associated data, overhead, tamper
/// detection) the way SecureVault's will.
public final class TestSealer: PrefsSealer {
    public let key: UInt64
    /// Whether stores written before record authentication (format 1) open with it.
    public let acceptsUnauthenticatedLog: Bool

    /// Whether PrefsKV computes its tags at every access instead of remembering them (`PrefsSealer.tagsAreCheap`):
    /// by default for odd keys and not for even ones, so that the suites run both of PrefsKV's paths.
    public let tagsAreCheap: Bool

    public init(key: UInt64, acceptsUnauthenticatedLog: Bool = true, tagsAreCheap: Bool? = nil) {
        self.key = key
        self.acceptsUnauthenticatedLog = acceptsUnauthenticatedLog
        self.tagsAreCheap = tagsAreCheap ?? (key % 2 == 1)
    }

    public var keyCheck: [UInt8] { bytes(mix(key ^ 0x6B65_7963_6865_636B)) }

    public func tag(forKey name: String) -> [UInt8] {
        let h = hash(Array(name.utf8), seed: key ^ 0x7461_67)
        return bytes(h) + bytes(mix(h ^ key))
    }

    public var overhead: Int { 16 }

    public func seal(
        _ plaintext: UnsafeRawBufferPointer, associatedData: UnsafeRawBufferPointer,
        into output: UnsafeMutableRawBufferPointer
    ) throws {
        precondition(output.count == plaintext.count + overhead)
        var generator = SystemRandomNumberGenerator()
        let nonce = UInt64.random(in: 0...UInt64.max, using: &generator)
        withUnsafeBytes(of: nonce.littleEndian) { output.baseAddress!.copyMemory(from: $0.baseAddress!, byteCount: 8) }
        var stream = mix(key ^ nonce)
        for i in 0..<plaintext.count {
            if i % 8 == 0 { stream = mix(stream) }
            output[8 + i] = plaintext[i] ^ UInt8(truncatingIfNeeded: stream >> ((i % 8) * 8))
        }
        let mac = authenticator(UnsafeRawBufferPointer(rebasing: output[0..<8 + plaintext.count]), associatedData)
        withUnsafeBytes(of: mac.littleEndian) {
            (output.baseAddress! + 8 + plaintext.count).copyMemory(from: $0.baseAddress!, byteCount: 8)
        }
    }

    public struct AuthenticationFailed: Error {}

    public func open<R>(
        _ sealed: UnsafeRawBufferPointer, associatedData: UnsafeRawBufferPointer,
        _ body: (UnsafeRawBufferPointer) throws -> R
    ) throws -> R {
        guard sealed.count >= overhead else { throw AuthenticationFailed() }
        let count = sealed.count - overhead
        let mac = UInt64(littleEndian: sealed.loadUnaligned(fromByteOffset: 8 + count, as: UInt64.self))
        guard mac == authenticator(UnsafeRawBufferPointer(rebasing: sealed[0..<8 + count]), associatedData) else {
            throw AuthenticationFailed()
        }
        let nonce = UInt64(littleEndian: sealed.loadUnaligned(as: UInt64.self))
        var plain = [UInt8](repeating: 0, count: count)
        var stream = mix(key ^ nonce)
        for i in 0..<count {
            if i % 8 == 0 { stream = mix(stream) }
            plain[i] = sealed[8 + i] ^ UInt8(truncatingIfNeeded: stream >> ((i % 8) * 8))
        }
        defer { for i in plain.indices { plain[i] = 0 } }
        return try plain.withUnsafeBytes(body)
    }

    /// Two keyed 64-bit hashes of context and record (a test stand-in for a MAC, not a secure one).
    public func authenticate(
        context: UnsafeRawBufferPointer, record: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer
    ) {
        precondition(output.count == 16)
        let first = mix(hash(Array(record), seed: key ^ 0x7265_63) ^ mix(hash(Array(context), seed: key ^ 0x6374_78)))
        let second = mix(first ^ key ^ UInt64(record.count))
        output.storeBytes(of: first.littleEndian, as: UInt64.self)
        output.storeBytes(of: second.littleEndian, toByteOffset: 8, as: UInt64.self)
    }

    private func authenticator(_ data: UnsafeRawBufferPointer, _ ad: UnsafeRawBufferPointer) -> UInt64 {
        mix(hash(Array(data), seed: key ^ 0x6D61_63) ^ mix(hash(Array(ad), seed: key ^ 0x6164)) ^ UInt64(ad.count))
    }

    private func hash(_ bytes: [UInt8], seed: UInt64) -> UInt64 {
        var h = mix(seed)
        for b in bytes { h = mix(h ^ UInt64(b)) }
        return mix(h ^ UInt64(bytes.count))
    }

    private func mix(_ x: UInt64) -> UInt64 {
        var z = x &+ 0x9E37_79B9_7F4A_7C15
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    private func bytes(_ x: UInt64) -> [UInt8] { withUnsafeBytes(of: x.littleEndian) { Array($0) } }
}
