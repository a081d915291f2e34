import Testing

@testable import SecureVault

@Suite struct SodiumAEADTests {
    /// draft-irtf-cfrg-xchacha-03, appendix A.3.1: a known answer, so the wrapper is checked against the
    /// construction itself and not only against itself.
    @Test func opensTheDraftsKnownAnswerVector() throws {
        let key = SecretBytes(hex("808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f"))
        let nonce = hex("404142434445464748494a4b4c4d4e4f5051525354555657")
        let ad = hex("50515253c0c1c2c3c4c5c6c7")
        let ciphertext = hex(
            "bd6d179d3e83d43b9576579493c0e939572a1700252bfaccbed2902c21396cbb731c7f1b0b4aa6440bf3a82f4eda7e39"
                + "ae64c6708c54c216cb96b72e1213b4522f8c9ba40db5d945b11b69b982c1bb9e3f3fac2bc369488f76b2383565d3fff9"
                + "21f9664c97637da9768812f615c68b13b52e")
        let tag = hex("c0875924c1c7987947deafd8780acf49")
        let opened = try Sodium.AEAD.open(nonce + ciphertext + tag, associatedData: ad, key: key)
        let expected = "Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, "
            + "sunscreen would be it."
        #expect(opened.withUnsafeBytes { String(decoding: $0, as: UTF8.self) } == expected)
    }

    @Test func sealThenOpenRoundTripsEveryLength() throws {
        let key = SecretBytes.random(count: 32)
        for length in [0, 1, 15, 16, 17, 200, 4096] {
            let plaintext = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 31) }
            let sealed = Sodium.AEAD.seal(plaintext, associatedData: [1, 2, 3], key: key)
            #expect(sealed.count == length + Sodium.AEAD.overhead)
            let opened = try Sodium.AEAD.open(sealed, associatedData: [1, 2, 3], key: key)
            #expect(opened.withUnsafeBytes { Array($0) } == plaintext)
        }
    }

    @Test func everyFlippedBitIsDetected() throws {
        let key = SecretBytes.random(count: 32)
        let sealed = Sodium.AEAD.seal(Array("session-token".utf8), associatedData: Array("vault|item".utf8), key: key)
        for index in sealed.indices {
            for bit in 0..<8 {
                var damaged = sealed
                damaged[index] ^= UInt8(1 << bit)
                #expect(throws: Sodium.AEAD.OpenFailure.self) {
                    try Sodium.AEAD.open(damaged, associatedData: Array("vault|item".utf8), key: key)
                }
            }
        }
    }

    @Test func otherAssociatedDataOrKeyOrTruncationFailsToOpen() throws {
        let key = SecretBytes.random(count: 32)
        let sealed = Sodium.AEAD.seal(Array("secret".utf8), associatedData: Array("item-a".utf8), key: key)
        #expect(throws: Sodium.AEAD.OpenFailure.self) {
            try Sodium.AEAD.open(sealed, associatedData: Array("item-b".utf8), key: key)
        }
        #expect(throws: Sodium.AEAD.OpenFailure.self) {
            try Sodium.AEAD.open(sealed, associatedData: Array("item-a".utf8), key: SecretBytes.random(count: 32))
        }
        for length in 0..<sealed.count {
            #expect(throws: Sodium.AEAD.OpenFailure.self) {
                try Sodium.AEAD.open(Array(sealed[0..<length]), associatedData: Array("item-a".utf8), key: key)
            }
        }
    }

    @Test func sealingTheSameMessageTwiceUsesFreshNonces() {
        let key = SecretBytes.random(count: 32)
        let nonces = Set((0..<1000).map { _ in
            Array(Sodium.AEAD.seal([7], associatedData: [], key: key).prefix(Sodium.AEAD.nonceBytes))
        })
        #expect(nonces.count == 1000)
    }
}

@Suite struct SodiumKeyTests {
    @Test func subkeysAreDeterministicAndDistinctPerIdAndContext() {
        let master = SecretBytes(hex(String(repeating: "11", count: 32)))
        let a1 = Sodium.deriveSubkey(from: master, id: 1, context: "SVLTdata")
        let a1again = Sodium.deriveSubkey(from: master, id: 1, context: "SVLTdata")
        let a2 = Sodium.deriveSubkey(from: master, id: 2, context: "SVLTdata")
        let b1 = Sodium.deriveSubkey(from: master, id: 1, context: "SVLTname")
        #expect(a1 == a1again)
        #expect(a1 != a2)
        #expect(a1 != b1)
        #expect(a1 != master)
        #expect(a1.count == 32)
    }

    @Test func keyedHashDependsOnKeyAndMessage() {
        let k1 = SecretBytes(hex(String(repeating: "01", count: 32)))
        let k2 = SecretBytes(hex(String(repeating: "02", count: 32)))
        let h = Sodium.keyedHash(Array("theme".utf8), key: k1, length: 16)
        #expect(h.count == 16)
        #expect(h == Sodium.keyedHash(Array("theme".utf8), key: k1, length: 16))
        #expect(h != Sodium.keyedHash(Array("theme".utf8), key: k2, length: 16))
        #expect(h != Sodium.keyedHash(Array("themf".utf8), key: k1, length: 16))
    }

    @Test func argon2idIsDeterministicForPasswordSaltAndCost() throws {
        let salt = [UInt8](repeating: 7, count: Sodium.passwordSaltBytes)
        let a = try Sodium.argon2id(password: SecretBytes(utf8: "correct horse"), salt: salt, cost: .minimum)
        let b = try Sodium.argon2id(password: SecretBytes(utf8: "correct horse"), salt: salt, cost: .minimum)
        let c = try Sodium.argon2id(password: SecretBytes(utf8: "correct horsf"), salt: salt, cost: .minimum)
        var otherSalt = salt
        otherSalt[0] = 8
        let d = try Sodium.argon2id(password: SecretBytes(utf8: "correct horse"), salt: otherSalt, cost: .minimum)
        #expect(a == b)
        #expect(a != c)
        #expect(a != d)
        #expect(a.count == 32)
    }
}

@Suite struct SecretBytesTests {
    @Test func descriptionsNeverShowTheBytes() {
        let secret = SecretBytes(utf8: "hunter2")
        #expect(secret.description == "SecretBytes(7 bytes)")
        #expect(String(reflecting: secret) == "SecretBytes(7 bytes)")
        var dumped = ""
        dump(secret, to: &dumped)
        #expect(!dumped.contains("hunter2"))
        #expect(!"\(secret)".contains("hunter2"))
    }

    @Test func holdsExactlyItsBytesAndComparesByContent() {
        let bytes: [UInt8] = [0, 255, 1, 0]
        let secret = SecretBytes(bytes)
        #expect(secret.count == 4)
        #expect(secret.withUnsafeBytes { Array($0) } == bytes)
        #expect(secret == SecretBytes(bytes))
        #expect(secret != SecretBytes([0, 255, 1, 1]))
        #expect(secret != SecretBytes([0, 255, 1]))
        #expect(SecretBytes([]).count == 0)
        #expect(SecretBytes([]) == SecretBytes([]))
    }

    @Test func randomSecretsDiffer() {
        #expect(SecretBytes.random(count: 32) != SecretBytes.random(count: 32))
        #expect(SecretBytes.random(count: 32).count == 32)
    }

    /// Secrets made in one region are each exactly their own bytes, and one kept alone keeps the region alive.
    @Test func secretsAllocatedTogetherAreEachTheirOwnBytes() {
        let pattern = { (index: Int, count: Int) in (0..<count).map { UInt8(truncatingIfNeeded: index * 100 + $0) } }
        let last: SecretBytes = {
            let (first, second, third) = SecretBytes.allocatedTogether(32, 16, 32) { a, b, c in
                for (index, buffer) in [a, b, c].enumerated() {
                    for offset in buffer.indices { buffer[offset] = UInt8(truncatingIfNeeded: index * 100 + offset) }
                }
            }
            #expect([first.count, second.count, third.count] == [32, 16, 32])
            #expect(first.withUnsafeBytes { Array($0) } == pattern(0, 32))
            #expect(second == SecretBytes(pattern(1, 16)))
            #expect(first != third)  // equal lengths, other bytes
            return third
        }()
        // The first two are released: the region stays while the third is kept.
        #expect(last.withUnsafeBytes { Array($0) } == pattern(2, 32))
    }
}

func hex(_ text: String) -> [UInt8] {
    var bytes: [UInt8] = []
    var iterator = text.utf8.makeIterator()
    while let high = iterator.next(), let low = iterator.next() {
        bytes.append(UInt8(String(decoding: [high, low], as: UTF8.self), radix: 16)!)
    }
    return bytes
}

@Suite struct SodiumHKDFTests {
    /// RFC 5869, appendix A.1 and A.3 (HKDF-SHA256): the first 32 bytes of each OKM, so the construction over
    /// libsodium's HMAC is checked against the RFC and not only against itself.
    @Test func derivesTheRFCsKnownAnswers() {
        let ikm = SecretBytes([UInt8](repeating: 0x0b, count: 22))
        let withSaltAndInfo = Sodium.hkdfSHA256(
            ikm, salt: hex("000102030405060708090a0b0c"), info: hex("f0f1f2f3f4f5f6f7f8f9"))
        #expect(
            withSaltAndInfo.withUnsafeBytes { Array($0) }
                == hex("3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf"))
        // A.3: no salt (HMAC's key is then HashLen zeros, which an empty key equals) and no info.
        let expected = hex("8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d")
        let zeros = Sodium.hkdfSHA256(ikm, salt: [UInt8](repeating: 0, count: 32), info: [])
        #expect(zeros.withUnsafeBytes { Array($0) } == expected)
        let empty = Sodium.hkdfSHA256(ikm, salt: [], info: [])
        #expect(empty.withUnsafeBytes { Array($0) } == expected)
    }

    /// The portal's secret has a length the vault does not choose: any length derives, and every bit counts.
    @Test func anyLengthOfSecretDerivesAndEveryByteMatters() {
        var seen: Set<[UInt8]> = []
        for length in [1, 32, 64, 65, 200, 4096] {
            let secret = [UInt8](repeating: 7, count: length)
            let key = Sodium.hkdfSHA256(SecretBytes(secret), salt: [1], info: Array("app".utf8))
            #expect(key.count == 32)
            seen.insert(key.withUnsafeBytes { Array($0) })
            var changed = secret
            changed[length - 1] ^= 1
            seen.insert(Sodium.hkdfSHA256(SecretBytes(changed), salt: [1], info: Array("app".utf8)).withUnsafeBytes { Array($0) })
        }
        #expect(seen.count == 12)
        let otherApp = Sodium.hkdfSHA256(SecretBytes([7]), salt: [1], info: Array("app2".utf8))
        #expect(!seen.contains(otherApp.withUnsafeBytes { Array($0) }))
    }
}
