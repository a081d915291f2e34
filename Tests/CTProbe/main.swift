// The program scripts/ct-check.sh runs under valgrind's memcheck: the ctgrind technique. The master key, the other
// keys and every plaintext are marked secret (undefined to memcheck) before they are used, so memcheck reports any
// branch or memory address that depends on them ("Conditional jump or move depends on uninitialised value(s)",
// "Use of uninitialised value"). It calls the vault's real key check comparison, seal and open (VaultSealer, and
// Sodium.AEAD for wrapped keys), on both sides of every length limit, and marks data public only where it is
// declassified: a sealed value once written (it goes to disk), a plaintext once its tag verified. Whether a tag
// verified, or two key checks are equal, is public too: the valgrind wrappers of libsodium's crypto_verify_16 and
// sodium_memcmp in Tests/CSecretMarks mark their answers so, as of PrefsKV's own `prefs_equal_constant_time` (the
// comparison of record authenticators and key checks, also checked here).
//
// Outside valgrind the marks do nothing, and this is a plain round trip of every case.
import CSecretMarks
import Glibc
import SystemLayer

@testable import SecureVault

func fail(_ message: String) -> Never {
    var line = "ct-probe: \(message)\n"
    line.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
    exit(1)
}

func markSecret(_ bytes: UnsafeRawBufferPointer) { secret_marks_secret(bytes.baseAddress, bytes.count) }
func markPublic(_ bytes: UnsafeRawBufferPointer) { secret_marks_public(bytes.baseAddress, bytes.count) }

let underValgrind = secret_marks_under_valgrind() == 1
if CommandLine.arguments.contains("--require-valgrind") {
    guard secret_marks_available() == 1 else {
        fail("built without valgrind's headers (Debian's valgrind package): the secret marks are compiled out")
    }
    guard underValgrind else { fail("not running under valgrind (scripts/ct-check.sh runs it)") }
}

// The marks work: a marked buffer is secret to memcheck, byte for byte.
if underValgrind {
    var canary = [UInt8](repeating: 7, count: 32)
    canary.withUnsafeMutableBytes { markSecret(UnsafeRawBufferPointer($0)) }
    guard canary.withUnsafeBytes({ secret_marks_all_secret($0.baseAddress, $0.count) }) == 1 else {
        fail("memcheck does not hold marked bytes for secret: the check would see nothing")
    }
    canary.withUnsafeMutableBytes { markPublic(UnsafeRawBufferPointer($0)) }
}

/// A random key in guarded memory, marked secret before anything derives from it.
func secretKey() -> SecretBytes {
    SecretBytes(count: 32) { key in
        Sodium.fillRandom(key)
        markSecret(UnsafeRawBufferPointer(key))
    }
}

/// A copy of `plaintext` marked secret (the caller keeps the public original to compare with).
func secretCopy(_ plaintext: [UInt8]) -> [UInt8] {
    var copy = plaintext
    copy.withUnsafeMutableBytes { markSecret(UnsafeRawBufferPointer($0)) }
    return copy
}

func declassified(_ bytes: [UInt8]) -> [UInt8] {
    bytes.withUnsafeBytes { markPublic($0) }
    return bytes
}

func openInto(_ sealed: [UInt8], _ ad: [UInt8], _ sealer: VaultSealer) throws -> [UInt8] {
    var plain = [UInt8](repeating: 0, count: sealed.count - Sodium.AEAD.overhead)
    try sealed.withUnsafeBytes { s in
        try ad.withUnsafeBytes { a in
            try plain.withUnsafeMutableBytes { try sealer.open(s, associatedData: a, into: $0) }
        }
    }
    return declassified(plain)
}

func openGeneric(_ sealed: [UInt8], _ ad: [UInt8], _ sealer: VaultSealer) throws -> [UInt8] {
    let plain = try sealed.withUnsafeBytes { s in
        try ad.withUnsafeBytes { a in try sealer.open(s, associatedData: a) { Array($0) } }
    }
    return declassified(plain)
}

/// Opens `sealed` and every copy of it with one bit flipped (the nonce's counter, the ciphertext, the tag): the
/// first gives `expected`, the others fail.
func checkOpens(
    _ sealed: [UInt8], _ ad: [UInt8], _ expected: [UInt8], _ what: String,
    _ open: ([UInt8], [UInt8]) throws -> [UInt8]
) {
    guard (try? open(sealed, ad)) == expected else { fail("\(what): the sealed value does not open to its plaintext") }
    for position in Set([20, Sodium.AEAD.nonceBytes, sealed.count / 2, sealed.count - 1]) where position < sealed.count
    {
        var altered = sealed
        altered[position] ^= 0x10
        guard (try? open(altered, ad)) == nil else { fail("\(what): a flipped bit at \(position) still opens") }
    }
}

let sealer = VaultSealer(
    masterKey: secretKey(), identity: KeyIdentity.random(kind: .inMemory), service: "ct-check")

// The key check in a file's header (public: a copy of it, declassified) against the sealer's (a MAC under the
// master key): compared in constant time, only the answer is public.
let storedKeyCheck = sealer.keyCheck.withUnsafeBytes { bytes in
    [UInt8](unsafeUninitializedCapacity: bytes.count) { copy, initialized in
        UnsafeMutableRawBufferPointer(copy).copyMemory(from: bytes)
        initialized = bytes.count
    }
}
storedKeyCheck.withUnsafeBytes { markPublic($0) }
guard sealer.verifiesKeyCheck(storedKeyCheck) else { fail("the sealer's own key check does not verify") }
for position in [0, storedKeyCheck.count - 16, storedKeyCheck.count - 1] {
    var forged = storedKeyCheck
    forged[position] ^= 0x01
    guard !sealer.verifiesKeyCheck(forged) else { fail("a key check with byte \(position) changed verifies") }
}
// PrefsKV's comparison of a record's authenticator (computed under the key: secret) with the one stored in the file,
// and of key checks: `Sys.constantTimeEqual` (`prefs_equal_constant_time`), equal, and differing at either end.
for length in [16, 64] {
    let stored = Sodium.randomBytes(count: length)
    let computed = secretCopy(stored)
    let same = computed.withUnsafeBytes { c in stored.withUnsafeBytes { Sys.constantTimeEqual(c, $0) } }
    guard same else { fail("PrefsKV's comparison finds \(length) equal bytes different") }
    for position in [0, length - 1] {
        var other = stored
        other[position] ^= 0x01
        let equal = computed.withUnsafeBytes { c in other.withUnsafeBytes { Sys.constantTimeEqual(c, $0) } }
        guard !equal else { fail("PrefsKV's comparison misses a difference at byte \(position) of \(length)") }
    }
}

var cases = 0
// A sealed int, a session token, values on both sides of the 1 KiB limit, a large value; associated data as
// PrefsKV's (41 bytes), a bound record's (longer) and none.
for length in [0, 8, 200, 990, 1_100, 70_000] {
    for adLength in [0, 41, 300] {
        let plaintext = Sodium.randomBytes(count: length)
        let ad = Sodium.randomBytes(count: adLength)
        let what = "\(length)-byte value, \(adLength)-byte associated data"

        // VaultSealer's seal: this process's nonce prefix and counter, through the published subkey.
        var sealed = [UInt8](repeating: 0, count: length + Sodium.AEAD.overhead)
        let secret = secretCopy(plaintext)
        secret.withUnsafeBytes { p in
            ad.withUnsafeBytes { a in sealed.withUnsafeMutableBytes { try! sealer.seal(p, associatedData: a, into: $0) }
            }
        }
        sealed = declassified(sealed)
        checkOpens(sealed, ad, plaintext, what) { try openInto($0, $1, sealer) }
        checkOpens(sealed, ad, plaintext, what + " (generic open)") { try openGeneric($0, $1, sealer) }

        // A seal under another nonce prefix (another process's value, the random-nonce fallback's path): plain
        // XChaCha20-Poly1305 under the data key, opened through the sealer's second subkey slot.
        var foreign = [UInt8](repeating: 0, count: length + Sodium.AEAD.overhead)
        secret.withUnsafeBytes { p in
            ad.withUnsafeBytes { a in
                foreign.withUnsafeMutableBytes {
                    sealer.sealForTesting(p, associatedData: a, noncePrefix: Sodium.randomBytes(count: 16), into: $0)
                }
            }
        }
        foreign = declassified(foreign)
        checkOpens(foreign, ad, plaintext, what + " (another prefix)") { try openInto($0, $1, sealer) }

        // A wrapped key's seal and open (FileKeys): XChaCha20-Poly1305 under a root key.
        if length <= 200 {
            let rootKey = secretKey()
            let wrapped = declassified(Sodium.AEAD.seal(secretCopy(plaintext), associatedData: ad, key: rootKey))
            checkOpens(wrapped, ad, plaintext, what + " (wrapped key)") { sealed, ad in
                let opened = try Sodium.AEAD.open(sealed, associatedData: ad, key: rootKey)
                return declassified(opened.withUnsafeBytes { Array($0) })
            }
        }
        cases += 1
    }
}
print(
    "ct-probe: key checks compared; \(cases) cases sealed and opened (each also with flipped bits) under secret keys"
        + (underValgrind ? "" : " (not under valgrind: round trips only)"))
