// VaultSealer's nonces (this process's prefix and a counter, prefs_nonce_next) and the XChaCha20-Poly1305 it
// computes through a per-prefix subkey: the bytes must be exactly XChaCha20-Poly1305's, and no nonce may repeat.
import CSodium
import Synchronization
import Testing

@testable import PrefsKV
@testable import SecureVault

@Suite struct SealerNonceTests {
    /// draft-irtf-cfrg-xchacha-03, appendix A.3.1, through the derived path: HChaCha20 of the nonce's first 16
    /// bytes once, then ChaCha20-Poly1305 with `0000 | nonce[16..<24]`.
    @Test func theDerivedPathGivesTheDraftsKnownAnswer() throws {
        let key = SecretBytes(hex("808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f"))
        let nonce = hex("404142434445464748494a4b4c4d4e4f5051525354555657")
        let ad = hex("50515253c0c1c2c3c4c5c6c7")
        let plaintext = Array(
            ("Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, "
                + "sunscreen would be it.").utf8)
        let expected = nonce
            + hex(
                "bd6d179d3e83d43b9576579493c0e939572a1700252bfaccbed2902c21396cbb731c7f1b0b4aa6440bf3a82f4eda7e39"
                    + "ae64c6708c54c216cb96b72e1213b4522f8c9ba40db5d945b11b69b982c1bb9e3f3fac2bc369488f76b2383565d3fff9"
                    + "21f9664c97637da9768812f615c68b13b52e")
            + hex("c0875924c1c7987947deafd8780acf49")
        var subkey = [UInt8](repeating: 0, count: Sodium.AEAD.subkeyBytes)
        nonce.withUnsafeBytes { n in
            subkey.withUnsafeMutableBytes { Sodium.AEAD.deriveSubkey(prefix: n.baseAddress!, key: key, into: $0.baseAddress!) }
        }
        // The output starts as garbage: the nonce is taken from the private copy and written out.
        var sealed = [UInt8](repeating: 0xEE, count: plaintext.count + Sodium.AEAD.overhead)
        sealed.withUnsafeMutableBytes { out in
            plaintext.withUnsafeBytes { p in
                ad.withUnsafeBytes { a in
                    subkey.withUnsafeBytes { k in
                        Sodium.AEAD.sealDerived(p, associatedData: a, subkey: k.baseAddress!, nonce: nonce, into: out)
                    }
                }
            }
        }
        #expect(sealed == expected)

        #expect(try openDerived(expected, ad, subkey: subkey) == plaintext)
        // One flipped bit in the nonce's counter part, the ciphertext or the tag: refused. (A flipped prefix byte
        // names another subkey: VaultSealer derives the subkey from the value's own prefix, checked below.)
        for position in [16, 23, 24, 60, expected.count - 1] {
            var altered = expected
            altered[position] ^= 0x01
            #expect(throws: Sodium.AEAD.OpenFailure.self) { try openDerived(altered, ad, subkey: subkey) }
        }
    }

    /// Every length, random keys and nonces: the derived seal equals libsodium's XChaCha20-Poly1305 byte for byte,
    /// and each opens the other's output.
    @Test func theDerivedPathEqualsLibsodiumsXChaCha20Poly1305() throws {
        for length in [0, 1, 15, 16, 17, 63, 64, 65, 200, 4096] {
            let key = SecretBytes.random(count: 32)
            let nonce = Sodium.randomBytes(count: 24)
            let ad = Sodium.randomBytes(count: length % 40)
            let plaintext = Sodium.randomBytes(count: length)
            var reference = [UInt8](repeating: 0, count: 24 + length + 16)
            var cipherLength: UInt64 = 0
            reference.replaceSubrange(0..<24, with: nonce)
            key.withUnsafeBytes { k in
                reference.withUnsafeMutableBufferPointer { out in
                    _ = crypto_aead_xchacha20poly1305_ietf_encrypt(
                        out.baseAddress! + 24, &cipherLength, plaintext, UInt64(length), ad, UInt64(ad.count), nil,
                        nonce, k.baseAddress!.assumingMemoryBound(to: UInt8.self))
                }
            }
            var subkey = [UInt8](repeating: 0, count: 32)
            nonce.withUnsafeBytes { n in
                subkey.withUnsafeMutableBytes {
                    Sodium.AEAD.deriveSubkey(prefix: n.baseAddress!, key: key, into: $0.baseAddress!)
                }
            }
            var derived = [UInt8](repeating: 0, count: 24 + length + 16)
            derived.withUnsafeMutableBytes { out in
                plaintext.withUnsafeBytes { p in
                    ad.withUnsafeBytes { a in
                        subkey.withUnsafeBytes {
                            Sodium.AEAD.sealDerived(p, associatedData: a, subkey: $0.baseAddress!, nonce: nonce, into: out)
                        }
                    }
                }
            }
            #expect(derived == reference, "length \(length)")
            let opened = try Sodium.AEAD.open(derived, associatedData: ad, key: key)
            #expect(opened.withUnsafeBytes { Array($0) } == plaintext)
        }
    }

    /// The seal's one-pass ChaCha20-Poly1305 (`Sodium.AEAD.sealIETF`: one call of libsodium's Poly1305 over a private
    /// copy of its input) writes exactly what libsodium's `crypto_aead_chacha20poly1305_ietf_encrypt_detached`
    /// writes, for associated data and plaintexts of every length class, on both sides of `stackScratchLimit` (where
    /// the private copy moves from the stack to the heap), with the associated data whole or in two parts, and
    /// libsodium's decryption opens it.
    @Test func theOnePassSealEqualsLibsodiumsChaCha20Poly1305() {
        let adLengths = [0, 1, 15, 16, 17, 31, 32, 84, 135, 200, 1_000]
        let plainLengths = [0, 1, 15, 16, 17, 63, 64, 65, 200, 863, 864, 865, 990, 1_007, 1_008, 1_009, 4_096]
        var onTheStack = 0
        var onTheHeap = 0
        for adLength in adLengths {
            for length in plainLengths {
                let key = Sodium.randomBytes(count: 32)
                let nonce = Sodium.randomBytes(count: 12)
                let ad = Sodium.randomBytes(count: adLength)
                let plaintext = Sodium.randomBytes(count: length)
                var expected = [UInt8](repeating: 0, count: length + 16)
                expected.withUnsafeMutableBufferPointer { out in
                    _ = crypto_aead_chacha20poly1305_ietf_encrypt_detached(
                        out.baseAddress!, out.baseAddress! + length, nil, plaintext, UInt64(length), ad,
                        UInt64(adLength), nil, nonce, key)
                }
                // The output starts as garbage: every byte of it is written.
                var sealed = [UInt8](repeating: 0xEE, count: length + 16)
                sealed.withUnsafeMutableBufferPointer { out in
                    plaintext.withUnsafeBytes { p in
                        ad.withUnsafeBytes { a in
                            Sodium.AEAD.sealIETF(
                                p, associatedData: a, key: key, nonce: nonce, cipher: out.baseAddress!,
                                tag: out.baseAddress! + length)
                        }
                    }
                }
                #expect(sealed == expected, "associated data \(adLength) bytes, plaintext \(length) bytes")
                // The associated data given in two parts (a prefix and the rest), as the vault's sealer gives it.
                let split = adLength / 3
                var twoParts = [UInt8](repeating: 0xEE, count: length + 16)
                twoParts.withUnsafeMutableBufferPointer { out in
                    plaintext.withUnsafeBytes { p in
                        ad.withUnsafeBytes { a in
                            Sodium.AEAD.sealIETF(
                                p, associatedPrefix: UnsafeRawBufferPointer(rebasing: a[..<split]),
                                associatedData: UnsafeRawBufferPointer(rebasing: a[split...]), key: key, nonce: nonce,
                                cipher: out.baseAddress!, tag: out.baseAddress! + length)
                        }
                    }
                }
                #expect(twoParts == expected, "in two parts: \(split) + \(adLength - split) bytes, plaintext \(length)")
                var opened = [UInt8](repeating: 0, count: max(length, 1))
                let status = crypto_aead_chacha20poly1305_ietf_decrypt(
                    &opened, nil, nil, sealed, UInt64(sealed.count), ad, UInt64(adLength), nonce, key)
                #expect(status == 0 && Array(opened.prefix(length)) == plaintext)
                let macLength = (adLength + 15) / 16 * 16 + (length + 15) / 16 * 16 + 16
                if macLength <= Sodium.AEAD.stackScratchLimit { onTheStack += 1 } else { onTheHeap += 1 }
            }
        }
        // Both paths were compared.
        #expect(onTheStack > 50 && onTheHeap > 20)
    }

    /// A sealer's values carry this process's prefix and a counter that only grows; they open through the
    /// generic and the buffer `open`, and values sealed under other prefixes (another process's) open through the
    /// other slot, derived again when the prefix changes.
    @Test func sealsShareThePrefixCountUpAndOpenUnderAnyPrefix() throws {
        let sealer = makeSealer()
        let ad: [UInt8] = Array("store-uuid|tag".utf8)
        var nonces: [[UInt8]] = []
        for i in 0..<5 {
            let plaintext = Array("value \(i)".utf8)
            let sealed = seal(plaintext, ad, with: sealer)
            nonces.append(Array(sealed[0..<24]))
            #expect(try openGeneric(sealed, ad, with: sealer) == plaintext)
            #expect(try openInto(sealed, ad, with: sealer) == plaintext)
        }
        #expect(Set(nonces.map { Array($0[0..<16]) }).count == 1, "one prefix per process")
        let counters = nonces.map { $0[16..<24].reversed().reduce(UInt64(0)) { $0 << 8 | UInt64($1) } }
        #expect(counters == counters.sorted() && Set(counters).count == counters.count, "\(counters)")

        // Two other prefixes, alternating: each open derives the right subkey (a stale one would fail to open).
        let first = seal(Array("a".utf8), ad, with: sealer, prefix: Array(repeating: 0xA1, count: 16))
        let second = seal(Array("b".utf8), ad, with: sealer, prefix: Array(repeating: 0xB2, count: 16))
        for _ in 0..<3 {
            #expect(try openInto(first, ad, with: sealer) == Array("a".utf8))
            #expect(try openInto(second, ad, with: sealer) == Array("b".utf8))
            #expect(try openInto(seal(Array("c".utf8), ad, with: sealer), ad, with: sealer) == Array("c".utf8))
        }
        // Another key's sealer refuses them; so does this one when a bit of the prefix, the counter or the
        // associated data changed.
        #expect(throws: (any Error).self) { try openInto(first, ad, with: makeSealer()) }
        let mine = seal(Array("d".utf8), ad, with: sealer)
        for position in [0, 15, 16, 23, mine.count - 1] {
            var altered = mine
            altered[position] ^= 0x80
            #expect(throws: (any Error).self) { try openInto(altered, ad, with: sealer) }
        }
        #expect(throws: (any Error).self) { try openInto(mine, ad + [0], with: sealer) }
    }

    /// The seal subkey is published per nonce prefix and read without the lock: when the prefix changes (as in a
    /// child after `fork()`, which draws its own) a seal publishes the new prefix's subkey before using it, and a
    /// change back publishes again. Every value opens (a seal under the previous prefix's subkey would not), also
    /// from threads sealing at once under alternating prefixes.
    @Test func aChangedNoncePrefixPublishesItsOwnSealSubkey() async throws {
        let sealer = makeSealer()
        let ad: [UInt8] = Array("store-uuid|tag".utf8)
        func sealed(_ plaintext: [UInt8], prefix: UInt8, counter: UInt64) -> [UInt8] {
            var nonce = [UInt8](repeating: prefix, count: 16)
            withUnsafeBytes(of: counter.littleEndian) { nonce += $0 }
            var out = [UInt8](repeating: 0, count: plaintext.count + Sodium.AEAD.overhead)
            out.withUnsafeMutableBytes { o in
                plaintext.withUnsafeBytes { p in
                    ad.withUnsafeBytes { a in
                        nonce.withUnsafeBufferPointer {
                            sealer.seal(p, associatedData: a, nonce: $0.baseAddress!, into: o)
                        }
                    }
                }
            }
            return out
        }
        for (i, prefix) in [UInt8(0xA1), 0xB2, 0xB2, 0xA1, 0xC3].enumerated() {
            let plaintext = Array("value \(i)".utf8)
            let value = sealed(plaintext, prefix: prefix, counter: UInt64(i))
            #expect(value[0..<16] == ArraySlice(repeating: prefix, count: 16))
            #expect(try openInto(value, ad, with: sealer) == plaintext, "prefix \(prefix)")
        }
        // Threads sealing under two prefixes at once: each seal uses its own nonce's subkey.
        let values = await withTaskGroup(of: [([UInt8], [UInt8])].self) { group in
            for t in 0..<4 {
                group.addTask {
                    (0..<200).map { i in
                        let plaintext = [UInt8(t), UInt8(i & 0xFF)]
                        return (plaintext, sealed(plaintext, prefix: t % 2 == 0 ? 0xD4 : 0xE5, counter: UInt64(i)))
                    }
                }
            }
            return await group.reduce(into: []) { $0 += $1 }
        }
        #expect(values.count == 800)
        for (plaintext, value) in values {
            #expect(try openInto(value, ad, with: sealer) == plaintext)
        }
        // And the process's own prefix again.
        #expect(try openInto(seal(Array("own".utf8), ad, with: sealer), ad, with: sealer) == Array("own".utf8))
    }

    /// Nonces never repeat: four threads sealing through two sealers (one process-wide counter).
    @Test func noNonceRepeatsAcrossThreadsAndSealers() async {
        let sealers = [makeSealer(), makeSealer()]
        let perThread = 5_000
        let nonces = await withTaskGroup(of: [[UInt8]].self) { group in
            for t in 0..<4 {
                group.addTask {
                    (0..<perThread).map { i in Array(seal([UInt8(i & 0xFF)], [], with: sealers[t % 2])[0..<24]) }
                }
            }
            var all: [[UInt8]] = []
            for await part in group { all += part }
            return all
        }
        #expect(nonces.count == 4 * perThread)
        #expect(Set(nonces).count == nonces.count)
    }

    // MARK: Helpers

    /// `Sodium.AEAD.openDerived` of `sealed` under `subkey`, with a private copy of its nonce.
    func openDerived(_ sealed: [UInt8], _ ad: [UInt8], subkey: [UInt8]) throws(Sodium.AEAD.OpenFailure) -> [UInt8] {
        var opened = [UInt8](repeating: 0, count: sealed.count - Sodium.AEAD.overhead)
        let nonce = Array(sealed[0..<24])
        var failure: Sodium.AEAD.OpenFailure?
        sealed.withUnsafeBytes { s in
            ad.withUnsafeBytes { a in
                subkey.withUnsafeBytes { k in
                    opened.withUnsafeMutableBytes { out in
                        do throws(Sodium.AEAD.OpenFailure) {
                            try Sodium.AEAD.openDerived(s, associatedData: a, subkey: k.baseAddress!, nonce: nonce, into: out)
                        } catch {
                            failure = error
                        }
                    }
                }
            }
        }
        if let failure { throw failure }
        return opened
    }

    func makeSealer() -> VaultSealer {
        VaultSealer(
            masterKey: SecretBytes.random(count: 32),
            identity: KeyIdentity(kind: .inMemory, vaultID: Sodium.randomBytes(count: 16), keyID: Sodium.randomBytes(count: 8)),
            service: "nonce-test")
    }

    /// Seals through the sealer (its nonce source), or, with `prefix`, as another process with that nonce prefix
    /// would: XChaCha20-Poly1305 under the sealer's data key, through its own seal with the nonce replaced first.
    func seal(_ plaintext: [UInt8], _ ad: [UInt8], with sealer: VaultSealer, prefix: [UInt8]? = nil) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: plaintext.count + Sodium.AEAD.overhead)
        plaintext.withUnsafeBytes { p in
            ad.withUnsafeBytes { a in
                out.withUnsafeMutableBytes { o in
                    if let prefix {
                        sealer.sealForTesting(p, associatedData: a, noncePrefix: prefix, into: o)
                    } else {
                        try! sealer.seal(p, associatedData: a, into: o)
                    }
                }
            }
        }
        return out
    }

    func openGeneric(_ sealed: [UInt8], _ ad: [UInt8], with sealer: VaultSealer) throws -> [UInt8] {
        try sealed.withUnsafeBytes { s in
            try ad.withUnsafeBytes { a in try sealer.open(s, associatedData: a) { Array($0) } }
        }
    }

    func openInto(_ sealed: [UInt8], _ ad: [UInt8], with sealer: VaultSealer) throws -> [UInt8] {
        var out = [UInt8](repeating: 0, count: sealed.count - Sodium.AEAD.overhead)
        try sealed.withUnsafeBytes { s in
            try ad.withUnsafeBytes { a in
                try out.withUnsafeMutableBytes { try sealer.open(s, associatedData: a, into: $0) }
            }
        }
        return out
    }
}
