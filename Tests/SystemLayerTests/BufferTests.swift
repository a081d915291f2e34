// Sys.allocateBuffer / resizeBuffer / freeBuffer: bytes kept across every kind of resize (malloc to malloc, to
// pages, pages to pages, back to malloc).
import SystemLayer
import Testing

@Suite struct BufferTests {
    static func fill(_ buffer: UnsafeMutableRawPointer, bytes: Int) {
        for i in 0..<bytes / 8 {
            buffer.storeBytes(of: UInt64(i) &* 0x9E37_79B9_7F4A_7C15, toByteOffset: 8 * i, as: UInt64.self)
        }
    }

    static func holds(_ buffer: UnsafeMutableRawPointer, bytes: Int) -> Bool {
        (0..<bytes / 8).allSatisfy {
            buffer.load(fromByteOffset: 8 * $0, as: UInt64.self) == UInt64($0) &* 0x9E37_79B9_7F4A_7C15
        }
    }

    @Test func aBufferKeepsItsBytesThroughEveryResize() {
        let paged = Sys.pagedBufferBytes
        // Sizes in turn: none (an empty index's buffers), small, still small, paged (from malloc), paged and larger
        // (moved pages), not a whole number of pages, the same number of pages, fewer pages, small again.
        let sizes = [0, 64, 4_096, paged + 8, 3 * paged, 3 * paged + 24, 3 * paged + 48, 2 * paged, 1_024]
        var buffer = Sys.allocateBuffer(bytes: sizes[0])
        Self.fill(buffer, bytes: sizes[0])
        for (old, new) in zip(sizes, sizes.dropFirst()) {
            buffer = Sys.resizeBuffer(buffer, from: old, to: new)
            #expect(Self.holds(buffer, bytes: Swift.min(old, new)), "resized from \(old) to \(new) bytes")
            Self.fill(buffer, bytes: new)
        }
        #expect(Self.holds(buffer, bytes: sizes.last!))
        Sys.freeBuffer(buffer, bytes: sizes.last!)
        let large = Sys.allocateBuffer(bytes: 2 * paged)
        Self.fill(large, bytes: 2 * paged)
        #expect(Self.holds(large, bytes: 2 * paged))
        Sys.freeBuffer(large, bytes: 2 * paged)
        Sys.freeBuffer(Sys.allocateBuffer(bytes: 0), bytes: 0)
    }
}
