// Poly1305 in 64-bit limbs (the seal's authenticator, Sources/SecureVault/Internal/Poly1305.swift) against RFC 8439's
// vector and libsodium's crypto_onetimeauth_poly1305, byte for byte: random keys and lengths, and the keys and
// messages that drive the accumulator to its extremes (r = 0, 1 and the largest clamped r; every value of h around
// p = 2^130 - 5, where the final subtraction decides the tag).
import CSodium
import Testing

@testable import SecureVault

@Suite struct Poly1305Tests {
    /// RFC 8439, section 2.5.2.
    @Test func theRFCVectorGivesItsTag() {
        let key = hex("85d6be7857556d337f4452fe42d506a80103808afb0db2fd4abff6af4149f51b")
        let message = Array("Cryptographic Forum Research Group".utf8)
        #expect(tag(message, key) == hex("a8061dc1305136c6c22b8baf0c0127a9"))
        #expect(reference(message, key) == hex("a8061dc1305136c6c22b8baf0c0127a9"))
    }

    /// Random keys, every message length from 0 to 300 bytes, several times over.
    @Test func randomKeysAndLengthsMatchLibsodium() {
        for round in 0..<8 {
            for length in 0...300 {
                let key = Sodium.randomBytes(count: 32)
                let message = Sodium.randomBytes(count: length)
                let ours = tag(message, key)
                #expect(ours == reference(message, key), "round \(round), \(length) bytes")
                if ours != reference(message, key) { return }
            }
        }
    }

    /// The extremes of the accumulator: r = 0 (the tag is s), r = 1 and the largest clamped r, with s = 0 and
    /// s = 2^128 - 1 (its addition wraps), over messages of all-ones and all-zero bytes of up to 40 blocks, whole
    /// and partial.
    @Test func extremeKeysAndMessagesMatchLibsodium() {
        let rs: [[UInt8]] = [
            [UInt8](repeating: 0, count: 16),
            [1] + [UInt8](repeating: 0, count: 15),
            [UInt8](repeating: 0xFF, count: 16),  // clamped to the largest r
        ]
        let ss: [[UInt8]] = [[UInt8](repeating: 0, count: 16), [UInt8](repeating: 0xFF, count: 16)]
        for r in rs {
            for s in ss {
                for fill: UInt8 in [0x00, 0xFF] {
                    for length in [1, 15, 16, 17, 31, 32, 33, 64, 100, 128, 255, 256, 640] {
                        let message = [UInt8](repeating: fill, count: length)
                        let key = r + s
                        #expect(tag(message, key) == reference(message, key), "r \(r[0]), s \(s[0]), \(length)")
                    }
                }
            }
        }
    }

    /// With r = 1, h is the sum of the blocks (each with its top bit) modulo p: two whole blocks whose sum is
    /// p + k for every k in -4...3, and a whole block plus a partial one around p too. Each tag needs the final
    /// subtraction exactly when k >= 0.
    @Test func everyAccumulatorAroundPMatchesLibsodium() {
        let r: [UInt8] = [1] + [UInt8](repeating: 0, count: 15)
        let allOnes = [UInt8](repeating: 0xFF, count: 16)
        for s in [[UInt8](repeating: 0, count: 16), Sodium.randomBytes(count: 16)] {
            // (2^128 - 1) + 2^128 + m2 + 2^128 = p + k  <=>  m2 = 2^128 - 4 + k
            for k in -4...3 {
                var second = allOnes
                let low = UInt64.max - 3 &+ UInt64(bitPattern: Int64(k))
                withUnsafeBytes(of: low.littleEndian) { second.replaceSubrange(0..<8, with: $0) }
                let message = allOnes + second
                #expect(tag(message, r + s) == reference(message, r + s), "h = p + \(k)")
            }
            // A partial last block: its 1 byte lands at 2^(8 * length).
            for length in 1..<16 {
                let message = allOnes + allOnes + [UInt8](repeating: 0xFF, count: length)
                #expect(tag(message, r + s) == reference(message, r + s), "partial \(length)")
            }
        }
    }

    private func tag(_ message: [UInt8], _ key: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 16)
        message.withUnsafeBytes { m in
            key.withUnsafeBytes { k in
                out.withUnsafeMutableBytes { Poly1305.authenticate(m, key: k.baseAddress!, into: $0.baseAddress!) }
            }
        }
        return out
    }

    private func reference(_ message: [UInt8], _ key: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 16)
        _ = crypto_onetimeauth_poly1305(&out, message, UInt64(message.count), key)
        return out
    }
}
