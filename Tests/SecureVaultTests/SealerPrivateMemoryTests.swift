// A seal's output and an open's input may be a shared file mapping that another process writes while the seal or
// the open runs (issue 34). The seal must authenticate exactly what it encrypted, and the open decrypt exactly what
// it verified: a byte changed underneath may leave the value unreadable, never readable as another plaintext.
// Another thread plays the other process, flipping one ciphertext bit over and over while the seal or open runs.
import Foundation
import Synchronization
import Testing

@testable import SecureVault

@Suite struct SealerPrivateMemoryTests {
    static let rounds = 100

    /// The sealed value written while a bit of its ciphertext is flipped underneath either opens to the plaintext
    /// that was sealed or does not open. (Before the fix a value over 1 KiB was encrypted into the output and
    /// authenticated from there, so the tag could cover a flipped bit: it opened to another plaintext.)
    @Test(arguments: [64, 4_000, 65_536])
    func aSealWhoseOutputChangesUnderneathNeverOpensToAnotherPlaintext(length: Int) throws {
        let sealer = makeSealer()
        let ad = Array("store-uuid|tag".utf8)
        let plaintext = Sodium.randomBytes(count: length)
        let output = UnsafeMutableRawBufferPointer.allocate(byteCount: length + Sodium.AEAD.overhead, alignment: 16)
        defer { output.deallocate() }
        var outcomes = Outcomes()
        for _ in 0..<Self.rounds {
            flippingBit(at: output.baseAddress! + Sodium.AEAD.nonceBytes + length / 2) {
                plaintext.withUnsafeBytes { p in
                    ad.withUnsafeBytes { a in try! sealer.seal(p, associatedData: a, into: output) }
                }
            }
            outcomes.count(try? open(Array(output), ad, with: sealer), expected: plaintext)
        }
        #expect(outcomes.other == 0, "\(length) bytes: \(outcomes)")
    }

    /// An open of a sealed value a bit of whose ciphertext is flipped underneath either returns the plaintext that
    /// was sealed or fails. (Before the fix libsodium read the ciphertext from the caller's buffer twice, to verify
    /// the tag and then to decrypt: it could verify one and decrypt the other.)
    @Test(arguments: [64, 4_000, 65_536])
    func anOpenWhoseInputChangesUnderneathNeverReturnsAnotherPlaintext(length: Int) throws {
        let sealer = makeSealer()
        let ad = Array("store-uuid|tag".utf8)
        let plaintext = Sodium.randomBytes(count: length)
        let sealed = UnsafeMutableRawBufferPointer.allocate(byteCount: length + Sodium.AEAD.overhead, alignment: 16)
        defer { sealed.deallocate() }
        plaintext.withUnsafeBytes { p in
            ad.withUnsafeBytes { a in try! sealer.seal(p, associatedData: a, into: sealed) }
        }
        let original = Array(sealed)
        var outcomes = Outcomes()
        for _ in 0..<Self.rounds {
            sealed.copyBytes(from: original)
            var plain = [UInt8](repeating: 0, count: length)
            var refused = false
            flippingBit(at: sealed.baseAddress! + Sodium.AEAD.nonceBytes + length / 2) {
                plain.withUnsafeMutableBytes { out in
                    ad.withUnsafeBytes { a in
                        do {
                            try sealer.open(UnsafeRawBufferPointer(sealed), associatedData: a, into: out)
                        } catch {
                            refused = true
                        }
                    }
                }
            }
            outcomes.count(refused ? nil : plain, expected: plaintext)
        }
        #expect(outcomes.other == 0, "\(length) bytes: \(outcomes)")
    }

    // MARK: Helpers

    struct Outcomes: CustomStringConvertible {
        var same = 0
        var refused = 0
        var other = 0

        mutating func count(_ opened: [UInt8]?, expected: [UInt8]) {
            guard let opened else { return refused += 1 }
            if opened == expected { same += 1 } else { other += 1 }
        }

        var description: String { "\(same) opened as sealed, \(refused) refused, \(other) opened as another plaintext" }
    }

    /// Runs `body` while another thread flips the lowest bit of the byte at `address` over and over; it has started
    /// flipping before `body` runs and has stopped when this returns.
    func flippingBit(at address: UnsafeMutableRawPointer, _ body: () -> Void) {
        let target = UInt(bitPattern: address)
        let state = FlipperState()
        let flipper = Thread {
            let byte = UnsafeMutablePointer<UInt8>(bitPattern: target)!
            state.started.store(true, ordering: .releasing)
            while !state.stop.load(ordering: .acquiring) {
                byte.pointee ^= 1
                // A release after each flip: the compiler cannot merge or sink the flips.
                state.flips.wrappingAdd(1, ordering: .releasing)
            }
            state.stopped.store(true, ordering: .releasing)
        }
        flipper.start()
        while !state.started.load(ordering: .acquiring) { sched_yield() }
        body()
        state.stop.store(true, ordering: .releasing)
        while !state.stopped.load(ordering: .acquiring) { sched_yield() }
    }

    final class FlipperState: Sendable {
        let started = Atomic<Bool>(false)
        let stop = Atomic<Bool>(false)
        let stopped = Atomic<Bool>(false)
        let flips = Atomic<Int>(0)
    }

    func makeSealer() -> VaultSealer {
        VaultSealer(
            masterKey: SecretBytes.random(count: 32), identity: KeyIdentity.random(kind: .inMemory),
            service: "private-memory-test")
    }

    /// Opens a private copy of `sealed` through the sealer.
    func open(_ sealed: [UInt8], _ ad: [UInt8], with sealer: VaultSealer) throws -> [UInt8] {
        var plain = [UInt8](repeating: 0, count: sealed.count - Sodium.AEAD.overhead)
        try sealed.withUnsafeBytes { s in
            try ad.withUnsafeBytes { a in
                try plain.withUnsafeMutableBytes { try sealer.open(s, associatedData: a, into: $0) }
            }
        }
        return plain
    }
}
