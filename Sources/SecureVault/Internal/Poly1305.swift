// Poly1305 (RFC 8439, section 2.5) in 64-bit limbs, for the seal of short values (`Sodium.AEAD.sealIETF`).
//
// Why not libsodium's: on x86-64 libsodium runs its SSE2 Poly1305, built for long messages, whose set-up (the powers
// of r) and tail handling cost about 1,550 instructions for the dozen blocks a sealed int authenticates, half of the
// whole seal. This one costs about 40 instructions a block. It computes the same function, byte for byte
// (Poly1305Tests: RFC 8439's vectors, the values of h that need the final subtraction, and random keys and lengths
// against libsodium's), and every value it authenticates is verified on reading by libsodium's own
// ChaCha20-Poly1305 decryption. Constant time: no branch or memory access depends on the key or the message, only on
// the message's length; the multiplications are the processor's 64 x 64 -> 128-bit multiply.

/// The Poly1305 one-time authenticator.
enum Poly1305 {
    static let keyBytes = 32
    static let tagBytes = 16

    /// Writes the tag of `message` under the one-time `key` (32 bytes: r, then s) into `tag` (16 bytes).
    static func authenticate(
        _ message: UnsafeRawBufferPointer, key: UnsafeRawPointer, into tag: UnsafeMutableRawPointer
    ) {
        // r, clamped (its top four bits of every 32-bit word and low two bits of words 1 to 3 cleared): r1 is then a
        // multiple of 4 below 2^60, and r0 below 2^60.
        let r0 = UInt64(littleEndian: key.loadUnaligned(as: UInt64.self)) & 0x0FFF_FFFC_0FFF_FFFF
        let r1 = UInt64(littleEndian: key.loadUnaligned(fromByteOffset: 8, as: UInt64.self)) & 0x0FFF_FFFC_0FFF_FFFC
        // h * r1 * 2^128 = h * (r1 / 4) * 2^130, which is h * 5 * (r1 / 4) = h * (r1 + r1 / 4) modulo 2^130 - 5.
        let s1 = r1 &+ (r1 >> 2)
        // The accumulator h = h0 + h1 * 2^64 + h2 * 2^128, kept below 2^130 + 2^66 between blocks (h2 at most 5).
        var h0: UInt64 = 0
        var h1: UInt64 = 0
        var h2: UInt64 = 0
        var offset = 0
        while offset < message.count {
            let remaining = message.count - offset
            var m0: UInt64
            var m1: UInt64
            var top: UInt64  // the bit above the block: 2^128 for a whole block
            if remaining >= 16 {
                m0 = UInt64(littleEndian: message.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
                m1 = UInt64(littleEndian: message.loadUnaligned(fromByteOffset: offset + 8, as: UInt64.self))
                top = 1
            } else {
                // The last, partial block: its bytes, then a 1 byte, then zeros (the 1 is the block's top bit).
                var block: (UInt64, UInt64) = (0, 0)
                withUnsafeMutableBytes(of: &block) { bytes in
                    bytes.copyMemory(from: UnsafeRawBufferPointer(rebasing: message[offset...]))
                    bytes[remaining] = 1
                }
                m0 = UInt64(littleEndian: block.0)
                m1 = UInt64(littleEndian: block.1)
                top = 0
            }
            offset += 16
            // h += block
            var carry: UInt64
            (h0, carry) = add(h0, m0, 0)
            (h1, carry) = add(h1, m1, carry)
            h2 = h2 &+ top &+ carry
            // h *= r, folding what lies at and above 2^130 back in (times 5). With h2 <= 7, r0 < 2^60, s1 < 2^61:
            // d0 < 2^126, d1 < 2^126 and d2 < 2^64, so no limb overflows.
            let a = h0.multipliedFullWidth(by: r0)
            let b = h1.multipliedFullWidth(by: s1)
            let c = h0.multipliedFullWidth(by: r1)
            let d = h1.multipliedFullWidth(by: r0)
            var d0Low: UInt64
            (d0Low, carry) = add(a.low, b.low, 0)
            let d0High = a.high &+ b.high &+ carry
            var d1Low: UInt64
            var d1High: UInt64
            (d1Low, carry) = add(c.low, d.low, 0)
            d1High = c.high &+ d.high &+ carry
            (d1Low, carry) = add(d1Low, h2 &* s1, 0)
            d1High = d1High &+ carry
            (d1Low, carry) = add(d1Low, d0High, 0)
            d1High = d1High &+ carry
            let d2 = h2 &* r0 &+ d1High
            // d2 = 4q + (d2 & 3): q * 2^130 is q * 5 = (d2 & ~3) + q.
            h0 = d0Low
            h1 = d1Low
            h2 = d2 & 3
            (h0, carry) = add(h0, d2 & ~3, 0)
            (h1, carry) = add(h1, 0, carry)
            h2 = h2 &+ carry
            (h0, carry) = add(h0, d2 >> 2, 0)
            (h1, carry) = add(h1, 0, carry)
            h2 = h2 &+ carry
        }
        // h modulo 2^130 - 5: fold h2's bits above 2^130 (h is then below 2^130 + 5), then subtract p once if h >= p,
        // choosing by a mask (no branch).
        var carry: UInt64
        let q = h2 >> 2
        h2 &= 3
        (h0, carry) = add(h0, q &* 5, 0)
        (h1, carry) = add(h1, 0, carry)
        h2 = h2 &+ carry
        var g0: UInt64
        var g1: UInt64
        (g0, carry) = add(h0, 5, 0)
        (g1, carry) = add(h1, 0, carry)
        let g2 = h2 &+ carry &- 4  // h + 5 - 2^130: its top bit is clear exactly when h >= p
        let useG = (g2 >> 63) &- 1  // all ones when h >= p
        h0 = (h0 & ~useG) | (g0 & useG)
        h1 = (h1 & ~useG) | (g1 & useG)
        // tag = (h + s) mod 2^128
        let s0 = UInt64(littleEndian: key.loadUnaligned(fromByteOffset: 16, as: UInt64.self))
        let sHigh = UInt64(littleEndian: key.loadUnaligned(fromByteOffset: 24, as: UInt64.self))
        (g0, carry) = add(h0, s0, 0)
        g1 = h1 &+ sHigh &+ carry
        tag.storeBytes(of: g0.littleEndian, as: UInt64.self)
        tag.storeBytes(of: g1.littleEndian, toByteOffset: 8, as: UInt64.self)
    }

    /// `a + b + carry` (carry 0 or 1) and its carry out.
    @inline(__always)
    private static func add(_ a: UInt64, _ b: UInt64, _ carry: UInt64) -> (UInt64, UInt64) {
        let (sum, first) = a.addingReportingOverflow(b)
        let (total, second) = sum.addingReportingOverflow(carry)
        return (total, (first ? 1 : 0) | (second ? 1 : 0))
    }
}
