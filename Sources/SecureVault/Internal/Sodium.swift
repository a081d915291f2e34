// The only caller of libsodium in the package. Everything above this file sees Swift types:
// `SecretBytes` for key material and byte arrays for ciphertext.

internal import CSodium

/// Typed wrappers over the libsodium primitives the vault uses.
///
/// Every entry point runs `sodium_init()` once (behind a lazily initialised global) before calling libsodium.
package enum Sodium {
    /// `sodium_init()` returns 0 the first time, 1 when already initialised, -1 when the library cannot work
    /// (no usable entropy source): nothing safe can be done without it, so that traps.
    private static let initialized: Bool = {
        let status = sodium_init()
        precondition(status >= 0, "sodium_init() failed: libsodium has no usable random source")
        return true
    }()

    @inline(__always)
    static func ensureInitialized() {
        _ = initialized
    }

    /// The linked libsodium's version, e.g. "1.0.18".
    package static var versionString: String {
        ensureInitialized()
        return String(cString: sodium_version_string())
    }

    // MARK: Random bytes

    /// Fills `buffer` from the kernel's CSPRNG (getrandom).
    static func fillRandom(_ buffer: UnsafeMutableRawBufferPointer) {
        ensureInitialized()
        guard let base = buffer.baseAddress, buffer.count > 0 else { return }
        randombytes_buf(base, buffer.count)
    }

    static func randomBytes(count: Int) -> [UInt8] {
        precondition(count >= 0)
        return [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            fillRandom(UnsafeMutableRawBufferPointer(buffer))
            initialized = count
        }
    }

    // MARK: Guarded memory

    /// Allocates `count` bytes of guarded memory (guard pages, canary, mlock'd, excluded from core dumps) in pages
    /// of their own: for secrets too large for a slot of `GuardedArena`, which makes the small ones.
    ///
    /// Failure means the process cannot map a few pages: like `malloc` failing, that traps.
    static func guardedAllocate(count: Int) -> UnsafeMutableRawPointer {
        ensureInitialized()
        precondition(count >= 0)
        // sodium_malloc(0) is allowed but returns a pointer we must not touch; keep one byte so the region is real.
        guard let pointer = sodium_malloc(max(count, 1)) else {
            preconditionFailure("sodium_malloc(\(count)) failed: out of memory or address space")
        }
        return pointer
    }

    /// Makes a guarded region read-only; any later write faults instead of silently changing key material.
    static func guardedSealReadOnly(_ pointer: UnsafeMutableRawPointer) {
        // See: doc.libsodium.org/memory_management (sodium_mprotect_readonly). Only fails on a bad pointer.
        let status = sodium_mprotect_readonly(pointer)
        precondition(status == 0, "sodium_mprotect_readonly failed on a guarded allocation")
    }

    /// Zeroes and unmaps a guarded region (sodium_free checks the canary and zeroes before unmapping).
    static func guardedFree(_ pointer: UnsafeMutableRawPointer) {
        sodium_free(pointer)
    }

    /// Overwrites `buffer` with zeros in a way the optimiser cannot remove.
    static func zero(_ buffer: UnsafeMutableRawBufferPointer) {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return }
        sodium_memzero(base, buffer.count)
    }

    /// Compares two buffers in time that depends only on their length.
    static func constantTimeEqual(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
        guard a.count == b.count else { return false }
        guard a.count > 0, let pa = a.baseAddress, let pb = b.baseAddress else { return true }
        return sodium_memcmp(pa, pb, a.count) == 0
    }

    // MARK: XChaCha20-Poly1305-IETF

    /// Authenticated encryption with associated data, with a random 192-bit nonce per message.
    ///
    /// Sealed layout: `nonce (24) | ciphertext | tag (16)`.
    ///
    /// Only libsodium's primitives, and only on private memory: a seal makes its ciphertext and tag in memory of its
    /// own and copies them to `output` last, and an open copies `sealed` into memory of its own and decrypts only that
    /// copy. `output` and `sealed` may be a shared file mapping that another process writes: libsodium's encryption
    /// reads the ciphertext back from its output to authenticate it, and its decryption reads the ciphertext twice
    /// (to verify the tag, then to decrypt), so either could otherwise authenticate or decrypt bytes it was not given.
    /// Every seal goes through `sealIETF` and every open through `openDerived`.
    enum AEAD {
        static let keyBytes = Int(crypto_aead_xchacha20poly1305_ietf_KEYBYTES)
        static let nonceBytes = Int(crypto_aead_xchacha20poly1305_ietf_NPUBBYTES)
        static let tagBytes = Int(crypto_aead_xchacha20poly1305_ietf_ABYTES)
        /// Bytes a sealed message adds to its plaintext.
        static let overhead = nonceBytes + tagBytes

        /// Seals `plaintext` into `output`, which must be exactly `plaintext.count + overhead` bytes long.
        static func seal(
            _ plaintext: UnsafeRawBufferPointer,
            associatedData: UnsafeRawBufferPointer,
            key: SecretBytes,
            into output: UnsafeMutableRawBufferPointer
        ) {
            precondition(key.count == keyBytes, "an XChaCha20-Poly1305 key is \(keyBytes) bytes, not \(key.count)")
            precondition(
                output.count == plaintext.count + overhead, "seal output must be plaintext + \(overhead) bytes")
            ensureInitialized()
            withNonceBuffer { nonce in
                randombytes_buf(nonce, nonceBytes)
                seal(plaintext, associatedData: associatedData, key: key, nonce: nonce, into: output)
            }
        }

        /// A 24-byte nonce buffer of the caller's own (stack) memory. A nonce is made and used there, then
        /// copied out: `output` may be a shared file mapping that another process can write, and a nonce read
        /// back from it could be one an older value already used.
        @inline(__always)
        static func withNonceBuffer<R, E: Error>(_ body: (UnsafeMutablePointer<UInt8>) throws(E) -> R) throws(E) -> R {
            var nonce: (UInt64, UInt64, UInt64) = (0, 0, 0)
            return try withUnsafeMutableBytes(of: &nonce) { (bytes) throws(E) -> R in
                try body(bytes.baseAddress!.assumingMemoryBound(to: UInt8.self))
            }
        }

        /// Seals `plaintext` under the 24-byte `nonce` (private memory) into `output` (exactly
        /// `plaintext.count + overhead` bytes): `nonce | ciphertext | tag`. XChaCha20-Poly1305, computed as
        /// libsodium computes it: the subkey `HChaCha20(key, nonce[0..<16])`, in private memory wiped after, then
        /// `sealDerived`.
        static func seal(
            _ plaintext: UnsafeRawBufferPointer, associatedData: UnsafeRawBufferPointer, key: SecretBytes,
            nonce: UnsafePointer<UInt8>, into output: UnsafeMutableRawBufferPointer
        ) {
            precondition(key.count == keyBytes, "an XChaCha20-Poly1305 key is \(keyBytes) bytes, not \(key.count)")
            precondition(
                output.count == plaintext.count + overhead, "seal output must be plaintext + \(overhead) bytes")
            ensureInitialized()
            withDerivedSubkey(prefix: nonce, key: key) { subkey in
                sealDerived(plaintext, associatedData: associatedData, subkey: subkey, nonce: nonce, into: output)
            }
        }

        // MARK: XChaCha20-Poly1305 with its subkey computed once per nonce prefix

        /// XChaCha20-Poly1305 is ChaCha20-Poly1305 (IETF) under the subkey `HChaCha20(key, nonce[0..<16])` with
        /// the nonce `0 0 0 0 | nonce[16..<24]` (draft-irtf-cfrg-xchacha, section 2.3; libsodium computes it so).
        /// Nonces that share their first 16 bytes share that subkey: `VaultSealer` derives it once per prefix
        /// (the process's nonce prefix, `prefs_nonce_next`) instead of once per message. The bytes are exactly
        /// those of libsodium's XChaCha20-Poly1305 (SealerNonceTests checks them against it).
        static let subkeyBytes = Int(crypto_core_hchacha20_OUTPUTBYTES)
        static let prefixBytes = Int(crypto_core_hchacha20_INPUTBYTES)

        /// Writes `HChaCha20(key, prefix)` into `subkey` (32 bytes).
        static func deriveSubkey(
            prefix: UnsafeRawPointer, key: SecretBytes, into subkey: UnsafeMutableRawPointer
        ) {
            precondition(key.count == keyBytes, "an XChaCha20-Poly1305 key is \(keyBytes) bytes, not \(key.count)")
            ensureInitialized()
            key.withUnsafeBytes { k in
                _ = crypto_core_hchacha20(
                    subkey.assumingMemoryBound(to: UInt8.self), prefix.assumingMemoryBound(to: UInt8.self),
                    k.baseAddress!.assumingMemoryBound(to: UInt8.self), nil)
            }
        }

        /// Passes `body` the subkey of `prefix` (the first 16 bytes of a nonce, private memory) under `key`, on the
        /// stack and wiped after `body`.
        @inline(__always)
        private static func withDerivedSubkey<R, E: Error>(
            prefix: UnsafePointer<UInt8>, key: SecretBytes, _ body: (UnsafeRawPointer) throws(E) -> R
        ) throws(E) -> R {
            var subkey: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
            return try withUnsafeMutableBytes(of: &subkey) { (bytes) throws(E) -> R in
                defer { Sodium.zero(bytes) }
                deriveSubkey(prefix: prefix, key: key, into: bytes.baseAddress!)
                return try body(UnsafeRawPointer(bytes.baseAddress!))
            }
        }

        /// Seals `plaintext` under the 24-byte `nonce` (private memory) into `output` (`plaintext.count +
        /// overhead` bytes: `nonce | ciphertext | tag`), with `subkey`, the subkey of the nonce's first 16 bytes. The
        /// associated data is `associatedPrefix` followed by `associatedData` (given apart, so that a caller whose
        /// associated data has a fixed prefix does not join them first).
        static func sealDerived(
            _ plaintext: UnsafeRawBufferPointer, associatedPrefix: UnsafeRawBufferPointer = UnsafeRawBufferPointer(
                start: nil, count: 0),
            associatedData: UnsafeRawBufferPointer, subkey: UnsafeRawPointer, nonce: UnsafePointer<UInt8>,
            into output: UnsafeMutableRawBufferPointer
        ) {
            precondition(
                output.count == plaintext.count + overhead, "seal output must be plaintext + \(overhead) bytes")
            output.baseAddress!.copyMemory(from: nonce, byteCount: nonceBytes)
            let out = output.baseAddress!.assumingMemoryBound(to: UInt8.self)
            withInnerNonce(nonce) { inner in
                sealIETF(
                    plaintext, associatedPrefix: associatedPrefix, associatedData: associatedData,
                    key: subkey.assumingMemoryBound(to: UInt8.self), nonce: inner, cipher: out + nonceBytes,
                    tag: out + nonceBytes + plaintext.count)
            }
        }

        /// The largest private working copy a seal or an open keeps on the stack (the authenticator's input of a
        /// seal, the ciphertext and tag of an open); a larger one is on the heap, wiped before it is freed.
        static let stackScratchLimit = 1_024

        /// Passes `body` `byteCount` bytes of private memory: on the stack up to `stackScratchLimit` bytes, else on
        /// the heap, wiped and freed after `body`.
        @inline(__always)
        private static func withScratch<R, E: Error>(
            byteCount: Int, _ body: (UnsafeMutableRawBufferPointer) throws(E) -> R
        ) throws(E) -> R {
            guard byteCount > stackScratchLimit else {
                return try withUnsafeTemporaryAllocation(byteCount: max(byteCount, 1), alignment: 16) {
                    (buffer) throws(E) -> R in
                    try body(UnsafeMutableRawBufferPointer(rebasing: buffer[0..<byteCount]))
                }
            }
            let heap = UnsafeMutableRawBufferPointer.allocate(byteCount: byteCount, alignment: 16)
            defer {
                Sodium.zero(heap)
                heap.deallocate()
            }
            return try body(heap)
        }

        /// ChaCha20-Poly1305 (IETF, RFC 8439 section 2.8) encryption of `plaintext` into `cipher` and its tag
        /// (16 bytes) into `tag`, with the associated data `associatedPrefix | associatedData`: byte for byte what
        /// libsodium's `crypto_aead_chacha20poly1305_ietf_encrypt_detached` writes (SealerNonceTests compares the two
        /// across lengths). The authenticator's whole input, `associated data | zeros to 16 | ciphertext | zeros to
        /// 16 | len(ad) u64 LE | len(ct) u64 LE`, is assembled once in private memory (`withScratch`), the ciphertext
        /// made there by libsodium's ChaCha20, and authenticated by one call of libsodium's Poly1305
        /// (`crypto_onetimeauth_poly1305`) under the one-time key, keystream block 0, which is wiped after. The
        /// ciphertext and tag are copied to `cipher` and `tag` last: what is authenticated is what was encrypted,
        /// whatever another process writes there meanwhile. One Poly1305 call, not the six updates of libsodium's
        /// AEAD, each of which sets its SSE2 state up again (Documentation/Performance.md has the figures).
        static func sealIETF(
            _ plaintext: UnsafeRawBufferPointer,
            associatedPrefix prefix: UnsafeRawBufferPointer = UnsafeRawBufferPointer(start: nil, count: 0),
            associatedData ad: UnsafeRawBufferPointer, key: UnsafePointer<UInt8>, nonce: UnsafePointer<UInt8>,
            cipher: UnsafeMutablePointer<UInt8>, tag: UnsafeMutablePointer<UInt8>
        ) {
            let adLength = prefix.count + ad.count
            let cipherStart = padded16(adLength)
            let lengths = cipherStart + padded16(plaintext.count)
            withScratch(byteCount: lengths + 16) { mac in
                // What the MAC covers: nothing in it is secret.
                let base = mac.baseAddress!
                if !prefix.isEmpty { base.copyMemory(from: prefix.baseAddress!, byteCount: prefix.count) }
                if !ad.isEmpty { (base + prefix.count).copyMemory(from: ad.baseAddress!, byteCount: ad.count) }
                (base + adLength).initializeMemory(as: UInt8.self, repeating: 0, count: cipherStart - adLength)
                let ciphertext = (base + cipherStart).assumingMemoryBound(to: UInt8.self)
                if !plaintext.isEmpty {
                    _ = crypto_stream_chacha20_ietf_xor_ic(
                        ciphertext, plaintext.baseAddress!.assumingMemoryBound(to: UInt8.self),
                        UInt64(plaintext.count), nonce, 1, key)
                }
                (base + cipherStart + plaintext.count).initializeMemory(
                    as: UInt8.self, repeating: 0, count: lengths - cipherStart - plaintext.count)
                mac.storeBytes(of: UInt64(adLength).littleEndian, toByteOffset: lengths, as: UInt64.self)
                mac.storeBytes(of: UInt64(plaintext.count).littleEndian, toByteOffset: lengths + 8, as: UInt64.self)
                // Keystream block 0, whose first 32 bytes are the one-time key, then the tag, on the stack; wiped. (The
                // whole block, as libsodium's AEAD makes it: ChaCha20 makes a partial block byte by byte.)
                var block: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) =
                    (0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
                withUnsafeMutableBytes(of: &block) { bytes in
                    defer { Sodium.zero(bytes) }
                    let oneTimeKey = bytes.baseAddress!.assumingMemoryBound(to: UInt8.self)
                    _ = crypto_stream_chacha20_ietf(oneTimeKey, 64, nonce, key)
                    _ = crypto_onetimeauth_poly1305(
                        oneTimeKey + 64, base.assumingMemoryBound(to: UInt8.self), UInt64(mac.count), oneTimeKey)
                    if !plaintext.isEmpty { cipher.update(from: ciphertext, count: plaintext.count) }
                    tag.update(from: oneTimeKey + 64, count: tagBytes)
                }
            }
        }

        @inline(__always)
        private static func padded16(_ count: Int) -> Int { (count + 15) & ~15 }

        /// Opens `sealed` (`nonce | ciphertext | tag`) into `output` under `subkey`, the subkey of the first 16
        /// bytes of `nonce`, the caller's private copy of `sealed`'s first 24 bytes; or fails without writing any
        /// plaintext. The ciphertext and tag are copied into private memory (`withScratch`) first and only that copy
        /// is verified and decrypted, by libsodium's ChaCha20-Poly1305.
        static func openDerived(
            _ sealed: UnsafeRawBufferPointer, associatedData: UnsafeRawBufferPointer,
            subkey: UnsafeRawPointer, nonce: UnsafePointer<UInt8>, into output: UnsafeMutableRawBufferPointer
        ) throws(OpenFailure) {
            guard sealed.count >= overhead else { throw OpenFailure() }
            precondition(output.count == sealed.count - overhead, "open output must be sealed - \(overhead) bytes")
            let status = withScratch(byteCount: sealed.count - nonceBytes) { copy in
                copy.copyMemory(from: UnsafeRawBufferPointer(rebasing: sealed[nonceBytes...]))
                var plainLength: UInt64 = 0
                // libsodium wants a non-null output pointer even for an empty plaintext.
                var scratch: UInt8 = 0
                let status = withInnerNonce(nonce) { inner in
                    withUnsafeMutablePointer(to: &scratch) { scratchPointer in
                        crypto_aead_chacha20poly1305_ietf_decrypt(
                            output.baseAddress?.assumingMemoryBound(to: UInt8.self) ?? scratchPointer, &plainLength,
                            nil, copy.baseAddress!.assumingMemoryBound(to: UInt8.self), UInt64(copy.count),
                            associatedData.baseAddress?.assumingMemoryBound(to: UInt8.self),
                            UInt64(associatedData.count), inner, subkey.assumingMemoryBound(to: UInt8.self))
                    }
                }
                precondition(status != 0 || Int(plainLength) == output.count)
                return status
            }
            guard status == 0 else { throw OpenFailure() }
        }

        /// ChaCha20-Poly1305's 12-byte nonce for an XChaCha20 nonce: four zero bytes, then its last 8 bytes.
        @inline(__always)
        private static func withInnerNonce<R>(_ nonce: UnsafePointer<UInt8>, _ body: (UnsafePointer<UInt8>) -> R) -> R {
            var inner: (UInt32, UInt64) = (0, 0)
            return withUnsafeMutableBytes(of: &inner) { bytes in
                bytes.storeBytes(of: 0, as: UInt32.self)
                UnsafeMutableRawBufferPointer(rebasing: bytes[4..<12]).copyMemory(
                    from: UnsafeRawBufferPointer(start: nonce + prefixBytes, count: 8))
                return body(bytes.baseAddress!.assumingMemoryBound(to: UInt8.self))
            }
        }

        /// Seals `plaintext`, returning `nonce | ciphertext | tag`.
        static func seal(_ plaintext: [UInt8], associatedData: [UInt8], key: SecretBytes) -> [UInt8] {
            [UInt8](unsafeUninitializedCapacity: plaintext.count + overhead) { buffer, initialized in
                plaintext.withUnsafeBytes { p in
                    associatedData.withUnsafeBytes { ad in
                        seal(p, associatedData: ad, key: key, into: UnsafeMutableRawBufferPointer(buffer))
                    }
                }
                initialized = plaintext.count + overhead
            }
        }

        /// The one way opening fails: the message is not what was sealed under this key and associated data
        /// (tampered, truncated, moved under another name, or the wrong key). libsodium does not say which.
        struct OpenFailure: Error {}

        /// Opens a sealed message into `output` (exactly `sealed.count - overhead` bytes), or fails without
        /// writing any plaintext. XChaCha20-Poly1305, computed as libsodium computes it: the nonce copied into
        /// private memory, the subkey of its first 16 bytes derived there (wiped after), then `openDerived`.
        static func open(
            _ sealed: UnsafeRawBufferPointer,
            associatedData: UnsafeRawBufferPointer,
            key: SecretBytes,
            into output: UnsafeMutableRawBufferPointer
        ) throws(OpenFailure) {
            precondition(key.count == keyBytes, "an XChaCha20-Poly1305 key is \(keyBytes) bytes, not \(key.count)")
            guard sealed.count >= overhead else { throw OpenFailure() }
            precondition(output.count == sealed.count - overhead, "open output must be sealed - \(overhead) bytes")
            ensureInitialized()
            try withNonceBuffer { (nonce) throws(OpenFailure) in
                nonce.update(from: sealed.baseAddress!.assumingMemoryBound(to: UInt8.self), count: nonceBytes)
                try withDerivedSubkey(prefix: nonce, key: key) { (subkey) throws(OpenFailure) in
                    try openDerived(sealed, associatedData: associatedData, subkey: subkey, nonce: nonce, into: output)
                }
            }
        }

        /// Opens a sealed message into guarded memory.
        static func open(
            _ sealed: [UInt8], associatedData: [UInt8], key: SecretBytes
        ) throws(OpenFailure)
            -> SecretBytes
        {
            guard sealed.count >= overhead else { throw OpenFailure() }
            do {
                return try SecretBytes(count: sealed.count - overhead) { output in
                    try sealed.withUnsafeBytes { s in
                        try associatedData.withUnsafeBytes { ad in
                            try open(s, associatedData: ad, key: key, into: output)
                        }
                    }
                }
            } catch let failure as OpenFailure {
                throw failure
            } catch {
                preconditionFailure("unexpected error \(error)")
            }
        }
    }

    // MARK: Key derivation and keyed hashing (BLAKE2b)

    /// Derives the subkey number `id` of `length` bytes (16...64) for an 8-character `context` from a 32-byte key.
    static func deriveSubkey(
        from key: SecretBytes, id: UInt64, context: StaticString, length: Int = 32
    )
        -> SecretBytes
    {
        precondition(key.count == Int(crypto_kdf_KEYBYTES), "crypto_kdf needs a \(crypto_kdf_KEYBYTES)-byte key")
        precondition(context.utf8CodeUnitCount == Int(crypto_kdf_CONTEXTBYTES), "a kdf context is 8 bytes")
        precondition((Int(crypto_kdf_BYTES_MIN)...Int(crypto_kdf_BYTES_MAX)).contains(length))
        return SecretBytes(count: length) { deriveSubkey(from: key, id: id, context: context, into: $0) }
    }

    /// ``deriveSubkey(from:id:context:length:)`` into `output` (guarded memory the caller fills; its length is the
    /// subkey's, 16...64).
    static func deriveSubkey(
        from key: SecretBytes, id: UInt64, context: StaticString, into output: UnsafeMutableRawBufferPointer
    ) {
        precondition(key.count == Int(crypto_kdf_KEYBYTES), "crypto_kdf needs a \(crypto_kdf_KEYBYTES)-byte key")
        precondition(context.utf8CodeUnitCount == Int(crypto_kdf_CONTEXTBYTES), "a kdf context is 8 bytes")
        precondition((Int(crypto_kdf_BYTES_MIN)...Int(crypto_kdf_BYTES_MAX)).contains(output.count))
        ensureInitialized()
        let status = key.withUnsafeBytes { k in
            context.withUTF8Buffer { ctx in
                ctx.withMemoryRebound(to: CChar.self) { c in
                    crypto_kdf_derive_from_key(
                        output.baseAddress!.assumingMemoryBound(to: UInt8.self), output.count, id, c.baseAddress!,
                        k.baseAddress!.assumingMemoryBound(to: UInt8.self))
                }
            }
        }
        precondition(status == 0, "crypto_kdf_derive_from_key failed for in-range arguments")
    }

    /// Keyed BLAKE2b of `message`, `length` bytes long (16...64).
    static func keyedHash(_ message: UnsafeRawBufferPointer, key: SecretBytes, length: Int = 32) -> [UInt8] {
        key.withUnsafeBytes { keyedHash(message, keyBytes: $0, length: length) }
    }

    /// ``keyedHash(_:key:length:)`` under the key in `key` (memory the caller owns and wipes: a subkey used once).
    static func keyedHash(_ message: UnsafeRawBufferPointer, keyBytes k: UnsafeRawBufferPointer, length: Int = 32)
        -> [UInt8]
    {
        precondition((Int(crypto_generichash_BYTES_MIN)...Int(crypto_generichash_BYTES_MAX)).contains(length))
        precondition(
            (Int(crypto_generichash_KEYBYTES_MIN)...Int(crypto_generichash_KEYBYTES_MAX)).contains(k.count),
            "a BLAKE2b key is \(crypto_generichash_KEYBYTES_MIN)...\(crypto_generichash_KEYBYTES_MAX) bytes")
        ensureInitialized()
        return [UInt8](unsafeUninitializedCapacity: length) { out, initialized in
            let status = crypto_generichash(
                out.baseAddress!, length,
                message.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(message.count),
                k.baseAddress!.assumingMemoryBound(to: UInt8.self), k.count)
            precondition(status == 0, "crypto_generichash failed for in-range arguments")
            initialized = length
        }
    }

    static func keyedHash(_ message: [UInt8], key: SecretBytes, length: Int = 32) -> [UInt8] {
        message.withUnsafeBytes { keyedHash($0, key: key, length: length) }
    }

    /// Keyed BLAKE2b of `first` followed by `second`, written into `output` (16...64 bytes: the hash length),
    /// without joining the two. The hash state lives on the stack and is wiped.
    static func keyedHash(
        _ first: UnsafeRawBufferPointer, _ second: UnsafeRawBufferPointer, key: SecretBytes,
        into output: UnsafeMutableRawBufferPointer
    ) {
        precondition((Int(crypto_generichash_BYTES_MIN)...Int(crypto_generichash_BYTES_MAX)).contains(output.count))
        ensureInitialized()
        // libsodium asks for a 64-byte aligned state (384 bytes in 1.0.18). It is carved out of a stack buffer
        // of a literal size and ordinary alignment: with its size from libsodium at run time, or an alignment of
        // 64, Swift put it on the heap (posix_memalign, about 1,000 instructions: a seventh of a sealed write
        // and of a sealed store's open, which authenticates every record).
        precondition(crypto_generichash_statebytes() <= 512, "libsodium's BLAKE2b state outgrew 512 bytes")
        withUnsafeTemporaryAllocation(byteCount: 512 + 64, alignment: 16) { buffer in
            let start = UInt(bitPattern: buffer.baseAddress!)
            let raw = UnsafeMutableRawBufferPointer(
                rebasing: buffer[Int((64 - start % 64) % 64)...].prefix(crypto_generichash_statebytes()))
            defer { sodium_memzero(raw.baseAddress, raw.count) }
            let state = OpaquePointer(raw.baseAddress!)
            var status = key.withUnsafeBytes { k in
                crypto_generichash_init(
                    state, k.baseAddress!.assumingMemoryBound(to: UInt8.self), k.count, output.count)
            }
            // Two calls, not a loop over an array of the parts: that array was a heap allocation per record.
            if !first.isEmpty {
                status |= crypto_generichash_update(
                    state, first.baseAddress!.assumingMemoryBound(to: UInt8.self), UInt64(first.count))
            }
            if !second.isEmpty {
                status |= crypto_generichash_update(
                    state, second.baseAddress!.assumingMemoryBound(to: UInt8.self), UInt64(second.count))
            }
            status |= crypto_generichash_final(
                state, output.baseAddress!.assumingMemoryBound(to: UInt8.self), output.count)
            precondition(status == 0, "crypto_generichash failed for in-range arguments")
        }
    }

    // MARK: Short-input PRF (SipHash)

    /// SipHash-2-4 with a 128-bit output (libsodium's `crypto_shorthash_siphashx24`) of `message` under a
    /// 16-byte `key`, written into `output` (16 bytes). A pseudo-random function built for short inputs: a
    /// 10-byte name costs about 150 instructions, against about 1,900 for keyed BLAKE2b, whose key block alone is
    /// one compression.
    static func shortHash128(
        _ message: UnsafeRawBufferPointer, key: SecretBytes, into output: UnsafeMutableRawBufferPointer
    ) {
        precondition(output.count == Int(crypto_shorthash_siphashx24_BYTES), "SipHash-2-4-128 writes 16 bytes")
        precondition(key.count == Int(crypto_shorthash_siphashx24_KEYBYTES), "a SipHash key is 16 bytes")
        key.withUnsafeBytes { k in
            // No sodium_init needed: SipHash uses no CPU dispatch and no randomness. Returns 0 always.
            _ = crypto_shorthash_siphashx24(
                output.baseAddress!.assumingMemoryBound(to: UInt8.self),
                message.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(message.count),
                k.baseAddress!.assumingMemoryBound(to: UInt8.self))
        }
    }

    // MARK: Argon2id

    /// Cost of one Argon2id derivation.
    struct PasswordHashCost: Equatable, Sendable {
        var operations: UInt64
        var memoryBytes: Int

        /// libsodium's INTERACTIVE level: 2 passes over 64 MiB (about 0.14 s here).
        static let interactive = PasswordHashCost(
            operations: UInt64(crypto_pwhash_argon2id_OPSLIMIT_INTERACTIVE),
            memoryBytes: Int(crypto_pwhash_argon2id_MEMLIMIT_INTERACTIVE))
        /// libsodium's MODERATE level: 3 passes over 256 MiB (about 1.3 s here).
        static let moderate = PasswordHashCost(
            operations: UInt64(crypto_pwhash_argon2id_OPSLIMIT_MODERATE),
            memoryBytes: Int(crypto_pwhash_argon2id_MEMLIMIT_MODERATE))
        /// The smallest cost libsodium accepts; for tests only.
        static let minimum = PasswordHashCost(
            operations: UInt64(crypto_pwhash_argon2id_OPSLIMIT_MIN),
            memoryBytes: Int(crypto_pwhash_argon2id_MEMLIMIT_MIN))
    }

    static let passwordSaltBytes = Int(crypto_pwhash_SALTBYTES)

    /// Why an Argon2id derivation failed: the memory it asks for could not be allocated, or the cost is out
    /// of libsodium's range.
    struct PasswordHashFailure: Error {}

    /// Derives `length` bytes from `password` and a 16-byte `salt` with Argon2id v1.3.
    static func argon2id(
        password: SecretBytes, salt: [UInt8], cost: PasswordHashCost, length: Int = 32
    ) throws(PasswordHashFailure) -> SecretBytes {
        precondition(salt.count == passwordSaltBytes, "an Argon2id salt is \(passwordSaltBytes) bytes")
        ensureInitialized()
        var status: Int32 = 0
        let derived = SecretBytes(count: length) { output in
            status = password.withUnsafeBytes { p in
                salt.withUnsafeBufferPointer { s in
                    crypto_pwhash(
                        output.baseAddress!.assumingMemoryBound(to: UInt8.self), UInt64(length),
                        p.baseAddress!.assumingMemoryBound(to: CChar.self), UInt64(p.count),
                        s.baseAddress!, cost.operations, cost.memoryBytes, crypto_pwhash_ALG_ARGON2ID13)
                }
            }
        }
        guard status == 0 else { throw PasswordHashFailure() }
        return derived
    }
}
