// prefs_nonce_next: a prefix per process (a child after fork draws its own), a counter that never repeats.
import CForkProbe
import CPrefsKV
import Testing

@Suite struct NonceSourceTests {
    @Test func aChildAfterForkDrawsItsOwnPrefixAndTheParentGoesOn() throws {
        var before = [UInt8](repeating: 0, count: 24)
        var child = [UInt8](repeating: 0, count: 24)
        var after = [UInt8](repeating: 0, count: 24)
        #expect(fork_probe_nonces(&before, &child, &after) == 0)
        // The parent's prefix stays and its counter goes on (other tests of this process take nonces meanwhile);
        // the child's prefix is another (without MADV_WIPEONFORK it would have continued the parent's sequence
        // from the same counter: the parent's next nonce).
        #expect(after[0..<16] == before[0..<16])
        #expect(counter(after) > counter(before))
        #expect(child[0..<16] != before[0..<16])
        #expect(child != after)
        #expect(counter(child) == 0)
    }

    @Test func consecutiveNoncesShareThePrefixAndCountUp() {
        var first = [UInt8](repeating: 0, count: 24)
        var second = [UInt8](repeating: 0, count: 24)
        #expect(prefs_nonce_next(&first) == 0)
        #expect(prefs_nonce_next(&second) == 0)
        #expect(first[0..<16] == second[0..<16])
        #expect(counter(second) > counter(first))
        #expect(first[0..<16].contains { $0 != 0 }, "a drawn prefix, not zeros")
    }

    func counter(_ nonce: [UInt8]) -> UInt64 {
        nonce[16..<24].reversed().reduce(0) { $0 << 8 | UInt64($1) }
    }
}
