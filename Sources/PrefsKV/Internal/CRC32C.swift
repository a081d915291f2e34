// CRC32C (Castagnoli, reflected polynomial 0x82F63B78): the processor's crc32 instruction when it has one
// (x86-64 SSE4.2, through CPrefsKV; this file is the only caller of its CRC functions), otherwise slicing-by-8
// in plain Swift.
// Both give the same values (tested: CRC32CTests).
//
// Check value: CRC32C("123456789") == 0xE3069283. Every record and the header's static part carry one;
// the log's end offset carries 16 bits of one (see Documentation/FileFormat.md).

/// A running CRC32C: feed bytes with `update`, read `value`.
internal import CPrefsKV

struct CRC32C {
    /// Whether the processor computes CRC32C itself (about 8 bytes a cycle instead of 1 to 2).
    static let hardware = prefs_crc32c_hardware_available() != 0

    /// Eight tables of 256 entries, 8 KiB, built once on first use.
    private static let tables: [UInt32] = {
        var t = [UInt32](repeating: 0, count: 8 * 256)
        for i in 0..<256 {
            var c = UInt32(i)
            for _ in 0..<8 { c = (c & 1) != 0 ? (c >> 1) ^ 0x82F6_3B78 : c >> 1 }
            t[i] = c
        }
        for i in 0..<256 {
            var c = t[i]
            for k in 1..<8 {
                c = (c >> 8) ^ t[Int(c & 0xFF)]
                t[k * 256 + i] = c
            }
        }
        return t
    }()

    private var state: UInt32 = 0xFFFF_FFFF

    init() {}

    private init(state: UInt32) { self.state = state }

    /// A CRC32C that has been fed the little-endian bytes of `value` (a constant prefix computed once).
    static func afterPrefix(littleEndian value: UInt32) -> CRC32C {
        var crc = CRC32C()
        crc.update(littleEndian: value)
        return CRC32C(state: crc.state)
    }

    /// The CRC32C of everything fed so far.
    var value: UInt32 { ~state }

    /// The CRC32C of `bytes`.
    static func checksum(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
        var crc = CRC32C()
        crc.update(bytes)
        return crc.value
    }

    /// The CRC32C of an array of bytes.
    static func checksum(_ bytes: [UInt8]) -> UInt32 {
        bytes.withUnsafeBytes { checksum($0) }
    }

    /// Feeds the little-endian bytes of `value`.
    mutating func update(littleEndian value: UInt32) {
        withUnsafeBytes(of: value.littleEndian) { update($0) }
    }

    /// Feeds `bytes`.
    @inline(__always)
    mutating func update(_ bytes: UnsafeRawBufferPointer) {
        guard let p = bytes.baseAddress, !bytes.isEmpty else { return }
        if CRC32C.hardware {
            state = prefs_crc32c_update(state, p, bytes.count)
        } else {
            updateInSoftware(bytes)
        }
    }

    /// Slicing-by-8: the portable path, and the reference the hardware path is tested against.
    mutating func updateInSoftware(_ bytes: UnsafeRawBufferPointer) {
        guard var p = bytes.baseAddress, !bytes.isEmpty else { return }
        var n = bytes.count
        var c = state
        CRC32C.tables.withUnsafeBufferPointer { t in
            let t = t.baseAddress!
            while n >= 8 {
                let word = UInt64(littleEndian: p.loadUnaligned(as: UInt64.self))
                let lo = UInt32(truncatingIfNeeded: word) ^ c
                let hi = UInt32(truncatingIfNeeded: word >> 32)
                c =
                    t[7 * 256 + Int(lo & 0xFF)] ^ t[6 * 256 + Int((lo >> 8) & 0xFF)]
                    ^ t[5 * 256 + Int((lo >> 16) & 0xFF)] ^ t[4 * 256 + Int(lo >> 24)]
                    ^ t[3 * 256 + Int(hi & 0xFF)] ^ t[2 * 256 + Int((hi >> 8) & 0xFF)]
                    ^ t[1 * 256 + Int((hi >> 16) & 0xFF)] ^ t[Int(hi >> 24)]
                p += 8
                n -= 8
            }
            while n > 0 {
                c = (c >> 8) ^ t[Int((c ^ UInt32(p.load(as: UInt8.self))) & 0xFF)]
                p += 1
                n -= 1
            }
        }
        state = c
    }
}
