import CSodium

extension Sodium {
    /// HKDF-SHA256 (RFC 5869) of `secret`, of any length, into 32 bytes: extract with `salt`, expand with `info`.
    /// Built from libsodium's HMAC-SHA256 (libsodium 1.0.18, Debian 12's, has no HKDF of its own); the states are
    /// wiped. For a root secret whose length the vault does not choose (the Secret portal's).
    static func hkdfSHA256(_ secret: SecretBytes, salt: [UInt8], info: [UInt8]) -> SecretBytes {
        secret.withUnsafeBytes { hkdfSHA256($0, salt: salt, info: info) }
    }

    /// ``hkdfSHA256(_:salt:info:)`` of the secret in `secret` (guarded memory the caller owns).
    static func hkdfSHA256(_ secret: UnsafeRawBufferPointer, salt: [UInt8], info: [UInt8]) -> SecretBytes {
        ensureInitialized()
        let length = Int(crypto_auth_hmacsha256_BYTES)
        // Extract: PRK = HMAC(salt, secret), on the stack and wiped after use, as the HMAC states are (each state
        // holds as much as its key): a guarded allocation for a value that lives for two calls costs more than the
        // derivation (Performance.md, "Costs the code's comments rest on").
        var prk = (UInt64(0), UInt64(0), UInt64(0), UInt64(0))
        defer { withUnsafeMutableBytes(of: &prk) { zero($0) } }
        return withUnsafeMutableBytes(of: &prk) { prk in
            precondition(prk.count == length)
            salt.withUnsafeBytes { key in hmacSHA256(key: key, parts: [secret], into: prk) }
            // Expand, one block: OKM = HMAC(PRK, info || 0x01).
            return SecretBytes(count: length) { out in
                (info + [1]).withUnsafeBytes { message in
                    hmacSHA256(key: UnsafeRawBufferPointer(prk), parts: [message], into: out)
                }
            }
        }
    }

    private static func hmacSHA256(
        key: UnsafeRawBufferPointer, parts: [UnsafeRawBufferPointer], into out: UnsafeMutableRawBufferPointer
    ) {
        precondition(out.count == Int(crypto_auth_hmacsha256_BYTES))
        var state = crypto_auth_hmacsha256_state()
        defer { withUnsafeMutableBytes(of: &state) { sodium_memzero($0.baseAddress, $0.count) } }
        // An empty key (RFC 5869's default salt is HashLen zeros, which HMAC pads an empty key to) still needs a
        // pointer.
        var status: Int32
        if let base = key.baseAddress, key.count > 0 {
            status = crypto_auth_hmacsha256_init(&state, base.assumingMemoryBound(to: UInt8.self), key.count)
        } else {
            let none: UInt8 = 0
            status = withUnsafePointer(to: none) { crypto_auth_hmacsha256_init(&state, $0, 0) }
        }
        for part in parts where status == 0 {
            status = crypto_auth_hmacsha256_update(
                &state, part.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(part.count))
        }
        if status == 0 {
            status = crypto_auth_hmacsha256_final(&state, out.baseAddress!.assumingMemoryBound(to: UInt8.self))
        }
        precondition(status == 0, "HMAC-SHA256 failed for in-range arguments")
    }
}
