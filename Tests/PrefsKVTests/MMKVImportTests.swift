// Issue 37, MMKV: real MMKV 2.4.2 files (Tests/Fixtures/mmkv, as MMKV wrote them) imported through
// `PrefsStore.importMMKV`: the log replayed, types from the caller, expiry, encryption, and every refusal naming
// the file and offset with nothing written.
import Foundation
import Glibc
import TestSupport
import Testing

@testable import PrefsKV
@testable import PrefsKVMMKV

@Suite struct MMKVImportTests {
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Fixtures/mmkv").path

    /// The types the app that wrote `plain/ui` and `encrypted/secure` used (the fixtures' README).
    static let types: [String: MMKVType] = [
        "sidebar.expanded": .bool, "sidebar.*": .int32, "launches": .int64, "scale": .double, "theme": .string,
        "locale": .string, "blob": .bytes, "tags": .strings, "café": .string, "counter": .int32,
    ]

    /// A copy of a fixture folder in a fresh directory (the tests damage copies, never the fixtures).
    static func copy(_ folder: String, into dir: TempDir) throws -> String {
        for name in try FileManager.default.contentsOfDirectory(atPath: fixtures + "/" + folder) {
            try writeBytes(try readBytes(fixtures + "/" + folder + "/" + name), to: dir.file(name))
        }
        return dir.path
    }

    /// Every value `plain/ui` holds, read back typed.
    static func expectUIValues(_ store: PrefsStore, sourceLocation: SourceLocation = #_sourceLocation) throws {
        #expect(try store.bool(forKey: "sidebar.expanded") == true, sourceLocation: sourceLocation)
        #expect(try store.int(forKey: "sidebar.width") == 280, sourceLocation: sourceLocation)
        #expect(try store.int64(forKey: "launches") == 1_234_567_890_123, sourceLocation: sourceLocation)
        #expect(try store.double(forKey: "scale") == 1.25, sourceLocation: sourceLocation)
        #expect(try store.string(forKey: "theme") == "dark", sourceLocation: sourceLocation)
        #expect(try store.string(forKey: "locale") == "ar", sourceLocation: sourceLocation)
        #expect(try store.data(forKey: "blob") == Data((0...255).map { UInt8($0) }), sourceLocation: sourceLocation)
        #expect(try store.strings(forKey: "tags") == ["alpha", "beta", "gamma"], sourceLocation: sourceLocation)
        #expect(try store.string(forKey: "café") == "au lait", sourceLocation: sourceLocation)
        #expect(try store.int(forKey: "counter") == 3, "the last of three writes wins", sourceLocation: sourceLocation)
        #expect(try !store.contains("removed"), "a record with an empty value deletes", sourceLocation: sourceLocation)
        #expect(try store.count == 10, sourceLocation: sourceLocation)
    }

    @Test func aPlainStoreIsReplayedTypedAndAgainChangesNothing() throws {
        let dir = try TempDir("mmkv-plain", memory: true)
        let source = try Self.copy("plain", into: dir)
        let before = try readBytes(source + "/ui") + readBytes(source + "/ui.crc")
        let store = try openStore(dir, id: "prefs")
        let report = try store.importMMKV(at: source + "/ui", types: Self.types)
        #expect(report.imported.count == 10 && report.untyped.isEmpty && report.expired.isEmpty, "\(report)")
        #expect(report.types["sidebar.width"] == "int" && report.types["tags"] == "strings", "\(report)")
        try Self.expectUIValues(store)
        let again = try store.importMMKV(at: source + "/ui", types: Self.types)
        #expect(again.imported.isEmpty && again.unchanged.count == 10, "\(again)")
        #expect(try readBytes(source + "/ui") + readBytes(source + "/ui.crc") == before, "the MMKV files only read")
    }

    @Test func anEncryptedStoreNeedsItsKeyAndReadsAsThePlainOne() throws {
        let dir = try TempDir("mmkv-secure", memory: true)
        let source = try Self.copy("encrypted", into: dir) + "/secure"
        let store = try openStore(dir, id: "prefs")
        Self.expectCode(.encrypted) { _ = try store.importMMKV(at: source, types: Self.types) }
        #expect {
            try store.importMMKV(at: source, cryptKey: .aes128(Array("fixture-key-0124".utf8)), types: Self.types)
        } throws: { error in
            let error = error as? PrefsError
            return error?.code == .wrongKey && error?.message.contains("offset") == true && error?.path == source
        }
        #expect(try store.count == 0, "nothing written by a refusal")
        try store.importMMKV(at: source, cryptKey: .aes128(Array("fixture-key-0123".utf8)), types: Self.types)
        try Self.expectUIValues(store)
        Self.expectCode(.notEncrypted) {
            _ = try store.importMMKV(
                at: Self.fixtures + "/plain/ui", cryptKey: .aes128(Array("fixture-key-0123".utf8)), types: Self.types)
        }
    }

    @Test func anExpiredKeyIsDroppedAndTheOthersKeepTheirExpiry() throws {
        let dir = try TempDir("mmkv-expiring", memory: true)
        let store = try openStore(dir, id: "prefs")
        let path = Self.fixtures + "/expiring/expiring"
        let types: [String: MMKVType] = ["no.expiry": .string, "remember.me": .bool, "session.token": .string]
        // As of 2026-11-25 (after session.token's expiry, before remember.me's), whatever today is.
        let prepared = try MMKVImport.read(
            path: path, cryptKey: nil, types: types, salvage: false, now: 1_795_600_000_000)
        let report = try store.importMMKV(prepared, replacing: false, dryRun: false) { _, _ in }
        #expect(report.expired == ["session.token"] && report.imported == ["no.expiry", "remember.me"], "\(report)")
        #expect(try store.string(forKey: "no.expiry") == "kept" && store.bool(forKey: "remember.me") == true)
        let entries = try store.entries()
        #expect(entries.first { $0.key == "no.expiry" }?.expiresAt == nil)
        #expect(entries.first { $0.key == "remember.me" }?.expiresAt == 2_110_872_698_000)
        // As of 2026-11-23, nothing had expired: session.token comes in with its expiry.
        let earlier = try MMKVImport.read(
            path: path, cryptKey: nil, types: types, salvage: false, now: 1_795_400_000_000)
        #expect(earlier.expired.isEmpty && earlier.values.map(\.key) == ["no.expiry", "remember.me", "session.token"])
        #expect(earlier.values.last?.expiresAt == 1_795_512_699_000)
    }

    @Test func aKeyWithoutATypeComesInAsMMKVsBytesAndIsListed() throws {
        let dir = try TempDir("mmkv-untyped", memory: true)
        let store = try openStore(dir, id: "prefs")
        var types = Self.types
        types["theme"] = nil
        types["sidebar.*"] = nil
        let report = try store.importMMKV(at: Self.fixtures + "/plain/ui", types: types)
        #expect(report.untyped == ["sidebar.width", "theme"], "\(report)")
        #expect(try store.data(forKey: "theme") == Data([4]) + Data("dark".utf8), "MMKV's encoding as it is")
        #expect(try store.data(forKey: "sidebar.width") == Data([0x98, 0x02]))
    }

    @Test func aValueThatIsNotItsTypeIsRefusedNamingKeyAndOffset() throws {
        let dir = try TempDir("mmkv-mistyped", memory: true)
        let store = try openStore(dir, id: "prefs")
        var types = Self.types
        types["blob"] = .double
        #expect {
            try store.importMMKV(at: Self.fixtures + "/plain/ui", types: types)
        } throws: { error in
            let error = error as? PrefsError
            return error?.code == .invalidInput && error?.message.contains("\"blob\"") == true
                && error?.message.contains("offset") == true
        }
        #expect(try store.count == 0)
    }

    @Test func aDamagedOrMismatchedFileIsRefusedUnlessSalvaging() throws {
        let dir = try TempDir("mmkv-damaged", memory: true)
        let source = try Self.copy("plain", into: dir) + "/ui"
        var bytes = try readBytes(source)
        // Inside `locale`'s value ("ar" at its record's end): the checksum no longer matches, the records parse.
        let locale = try #require(bytes.firstRange(of: Array("locale".utf8))).upperBound
        bytes[locale + 3] ^= 0x01  // "ar" -> "as"
        try writeBytes(bytes, to: source)
        let store = try openStore(dir, id: "prefs")
        #expect {
            try store.importMMKV(at: source, types: Self.types)
        } throws: { error in
            let error = error as? PrefsError
            return error?.code == .corrupted && error?.message.contains("CRC-32") == true && error?.path == source
        }
        #expect(try store.count == 0)
        let salvaged = try store.importMMKV(at: source, types: Self.types, salvage: true)
        #expect(salvaged.unreadableFrom == 4 + 451, "every record parsed; the checksum did not: \(salvaged)")
        #expect(try store.string(forKey: "locale") == "as" && store.string(forKey: "theme") == "dark")

        // A meta file of another store.
        try writeBytes(try readBytes(Self.fixtures + "/expiring/expiring.crc"), to: source + ".crc")
        Self.expectCode(.corrupted) { _ = try store.importMMKV(at: source, types: Self.types) }

        // Truncated: the meta file says 451 bytes, the file holds 200.
        try writeBytes(try readBytes(Self.fixtures + "/plain/ui.crc"), to: source + ".crc")
        try writeBytes(Array(try readBytes(Self.fixtures + "/plain/ui")[0..<200]), to: source)
        #expect {
            try store.importMMKV(at: source, types: Self.types)
        } throws: { error in
            (error as? PrefsError)?.message.contains("truncated") == true
        }
        let cut = try store.importMMKV(at: source, types: Self.types, salvage: true, dryRun: true)
        #expect(cut.unreadableFrom != nil && cut.dryRun, "\(cut)")

        // No data file; no meta file.
        Self.expectCode(.notFound) {
            _ = try store.importMMKV(at: Self.fixtures + "/plain/nothing", types: Self.types)
        }
        let before = try readBytes(dir.file("prefs.prefs"))
        try writeBytes(try readBytes(Self.fixtures + "/plain/ui"), to: source)
        #expect(unlink(source + ".crc") == 0)
        #expect {
            try store.importMMKV(at: source, types: Self.types)
        } throws: { error in
            let error = error as? PrefsError
            return error?.code == .notFound && error?.path == source + ".crc"
                && error?.message.contains(source + ".crc") == true
        }
        #expect(try readBytes(dir.file("prefs.prefs")) == before, "a refused import wrote")
    }

    /// Writes `writer`'s store as `<dir>/m` and `m.crc`, returning the data file's path.
    static func write(_ writer: MMKVWriter, in dir: TempDir) throws -> String {
        let (data, meta) = writer.files
        try writeBytes(data, to: dir.file("m"))
        try writeBytes(meta, to: dir.file("m.crc"))
        return dir.file("m")
    }

    /// AES-CFB-128 encryption of `plaintext` with OpenSSL, as MMKV encrypts its log: the library the importer
    /// loads, through its encrypting functions (the importer calls only the decrypting ones).
    static func encrypt(_ plaintext: [UInt8], key: [UInt8], iv: [UInt8], bits: Int) -> [UInt8] {
        let crypto = try! LibCrypto.loaded(for: "the test's MMKV store")
        let encryptInit = try! crypto.library.function("EVP_EncryptInit_ex", as: LibCrypto.CipherInit.self).get()
        let encryptUpdate = try! crypto.library.function("EVP_EncryptUpdate", as: LibCrypto.CipherUpdate.self).get()
        let context = crypto.newContext()
        defer { crypto.freeContext(context) }
        var out = [UInt8](repeating: 0, count: plaintext.count)
        var written: Int32 = 0
        _ = encryptInit(context, bits == 256 ? crypto.aes256CFB() : crypto.aes128CFB(), nil, key, iv)
        _ = encryptUpdate(context, &out, &written, plaintext, Int32(plaintext.count))
        return out
    }

    /// A wrong key is `wrongKey` even when salvaging: a matching checksum proves the bytes are MMKV's.
    @Test func aWrongKeyIsRefusedEvenWhenSalvaging() throws {
        let dir = try TempDir("mmkv-wrong-salvage", memory: true)
        let store = try openStore(dir, id: "prefs")
        for key in ["fixture-key-0124", "x", "wrong"] {
            Self.expectCode(.wrongKey) {
                _ = try store.importMMKV(
                    at: Self.fixtures + "/encrypted/secure", cryptKey: .aes128(Array(key.utf8)), types: Self.types,
                    salvage: true)
            }
        }
        #expect(try store.count == 0)
    }

    /// MMKV never clears an IV: a store decrypted since (`reKey("")`) keeps one, and reads as the plain store it is.
    @Test func aPlainStoreWithAStaleIVReadsWithoutAKey() throws {
        let dir = try TempDir("mmkv-stale-iv", memory: true)
        let source = try Self.copy("plain", into: dir) + "/ui"
        var meta = try readBytes(source + ".crc")
        meta.replaceSubrange(12..<28, with: (1...16).map { UInt8($0) })
        try writeBytes(meta, to: source + ".crc")
        let store = try openStore(dir, id: "prefs")
        Self.expectCode(.notEncrypted) {
            _ = try store.importMMKV(at: source, cryptKey: .aes128(Array("k".utf8)), types: Self.types)
        }
        try store.importMMKV(at: source, types: Self.types)
        try Self.expectUIValues(store)
    }

    @Test func aes256AndAnOldMetaVersionAreRead() throws {
        let dir = try TempDir("mmkv-aes256", memory: true)
        let key = Array("a 32-byte key for AES-256-CFB!!!".utf8)
        let iv = (0..<16).map { UInt8($0 * 7 + 1) }
        var writer = MMKVWriter()
        writer.records = [(Array("theme".utf8), MMKVWriter.string("dark")), (Array("n".utf8), MMKVWriter.varint(7))]
        writer.iv = iv
        writer.encrypt = { Self.encrypt($0, key: key, iv: iv, bits: 256) }
        let path = try Self.write(writer, in: dir)
        let store = try openStore(dir, id: "prefs")
        Self.expectCode(.wrongKey) { _ = try store.importMMKV(at: path, cryptKey: .aes128(key), types: ["n": .int32]) }
        try store.importMMKV(at: path, cryptKey: .aes256(key), types: ["theme": .string, "n": .int32])
        #expect(try store.string(forKey: "theme") == "dark" && store.int(forKey: "n") == 7)

        // Meta version 2: the length is the data file's first word.
        var old = MMKVWriter()
        old.version = 2
        old.records = [(Array("old".utf8), MMKVWriter.string("v2"))]
        let oldPath = try Self.write(old, in: dir)
        try store.importMMKV(at: oldPath, types: ["old": .string])
        #expect(try store.string(forKey: "old") == "v2")
    }

    /// A record that does not parse under a matching checksum is `corrupted` naming its offset; `salvage` keeps the
    /// records before it. A key that is not UTF-8 is such a record.
    @Test func aRecordThatDoesNotParseIsRefusedNamingItsOffset() throws {
        let dir = try TempDir("mmkv-unparsable", memory: true)
        var writer = MMKVWriter()
        writer.records = [(Array("a".utf8), MMKVWriter.string("1")), ([0xFF, 0xFE], MMKVWriter.string("2"))]
        let path = try Self.write(writer, in: dir)
        let store = try openStore(dir, id: "prefs")
        #expect {
            try store.importMMKV(at: path, types: ["*": .string])
        } throws: { error in
            let error = error as? PrefsError
            return error?.code == .corrupted && error?.message.contains("offset 10 (a key that is not UTF-8") == true
        }
        let report = try store.importMMKV(at: path, types: ["*": .string], salvage: true)
        #expect(report.imported == ["a"] && report.unreadableFrom == 10, "\(report)")

        // A length past the log's end.
        var cut = MMKVWriter()
        cut.records = [(Array("a".utf8), MMKVWriter.string("1"))]
        cut.encrypt = { $0 + [0x05, 0x61] }  // a key of 5 bytes, 1 left in the log
        let cutPath = try Self.write(cut, in: dir)
        Self.expectCode(.corrupted) { _ = try store.importMMKV(at: cutPath, types: ["*": .string]) }
    }

    /// Keys are compared byte for byte, as MMKV does: "café" in NFC and in NFD are two keys; Android's modified
    /// UTF-8 (an emoji as two surrogates) is read as the emoji.
    @Test func keysAreComparedByteForByteAndAndroidsModifiedUTF8IsRead() throws {
        let dir = try TempDir("mmkv-keys", memory: true)
        var writer = MMKVWriter()
        let nfc: [UInt8] = [0x63, 0x61, 0x66, 0xC3, 0xA9]
        let nfd: [UInt8] = [0x63, 0x61, 0x66, 0x65, 0xCC, 0x81]
        let emoji: [UInt8] = [0x65, 0xED, 0xA0, 0xBD, 0xED, 0xB8, 0x80]  // "e😀" in modified UTF-8
        writer.records = [
            (nfc, MMKVWriter.string("a")), (nfd, MMKVWriter.string("b")), (emoji, [0x06] + emoji.dropFirst()),
        ]
        let path = try Self.write(writer, in: dir)
        let prepared = try MMKVImport.read(path: path, cryptKey: nil, types: ["*": .string], salvage: false)
        #expect(prepared.values.count == 3, "\(prepared.values.map(\.key))")
        #expect(prepared.values.contains { $0.key == "e\u{1F600}" && $0.value == .string("\u{1F600}") })
    }

    /// An auto-expiring store's value shorter than its expiry is damage; a log longer than an importer reads is refused
    /// before anything is allocated for it.
    @Test func hostileLengthsAreRefused() throws {
        let dir = try TempDir("mmkv-hostile", memory: true)
        let store = try openStore(dir, id: "prefs")
        var writer = MMKVWriter()
        writer.flags = 1
        writer.records = [(Array("t".utf8), [0x01, 0x02])]
        let path = try Self.write(writer, in: dir)
        #expect {
            try store.importMMKV(at: path, types: ["*": .bool])
        } throws: { error in
            (error as? PrefsError)?.message.contains("too short for the expiry") == true
        }
        var meta = try readBytes(dir.file("m.crc"))
        meta.replaceSubrange(28..<32, with: [0xFF, 0xFF, 0xFF, 0x7F])
        try writeBytes(meta, to: dir.file("m.crc"))
        #expect {
            try store.importMMKV(at: path, types: ["*": .bool])
        } throws: { error in
            let error = error as? PrefsError
            return error?.code == .corrupted && error?.message.contains("more than the 1073741824") == true
        }
    }

    /// Every numeric type as MMKV encodes it, negative values sign-extended to ten bytes.
    @Test func everyNumericTypeDecodes() {
        let minus3 = MMKVWriter.varint(UInt64(bitPattern: -3))
        #expect(minus3.count == 10)
        #expect(MMKVType.int32.decode(minus3) == .int(-3))
        #expect(MMKVType.int64.decode(minus3) == .int(-3))
        #expect(MMKVType.int32.decode(MMKVWriter.varint(1 << 40)) == nil, "not an int32")
        #expect(MMKVType.uint32.decode(MMKVWriter.varint(4_000_000_000)) == .int(4_000_000_000))
        #expect(MMKVType.uint64.decode(MMKVWriter.varint(UInt64(Int64.max))) == .int(Int64.max))
        #expect(MMKVType.uint64.decode(MMKVWriter.varint(UInt64(Int64.max) + 1)) == nil, "does not fit")
        let quarter = withUnsafeBytes(of: Float(0.25).bitPattern.littleEndian) { Array($0) }
        #expect(MMKVType.float.decode(quarter) == .double(0.25))
        #expect(MMKVType.bool.decode([2]) == nil && MMKVType.bool.decode([1]) == .bool(true))
        #expect(MMKVType.string.decode([0x03, 0x61]) == nil, "a length that does not add up")
        #expect(MMKVType.strings.decode([0x04, 0x01, 0x61, 0x01, 0x62]) == .strings(["a", "b"]))
    }

    /// The importer's CRC-32 is zlib's: the standard check value, and the test writer's bit-by-bit one (which
    /// the real MMKV files of `aPlainStoreIsReplayedTypedAndAgainChangesNothing` also agree with) at every length
    /// up to 300 and from every start.
    @Test func theChecksumIsZlibsCRC32() {
        func crc(_ bytes: [UInt8], from start: Int = 0) -> UInt32 {
            bytes.withUnsafeBytes { MMKVLog.crc32($0[start...]) }
        }
        #expect(crc(Array("123456789".utf8)) == 0xCBF4_3926)
        #expect(crc([]) == 0)
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<300).map { _ in UInt8.random(in: 0...255, using: &generator) }
        for length in 0...bytes.count {
            #expect(crc(Array(bytes.prefix(length))) == crc32IEEE(Array(bytes.prefix(length))), "length \(length)")
        }
        for start in 0..<bytes.count {
            #expect(crc(bytes, from: start) == crc32IEEE(Array(bytes[start...])), "from \(start)")
        }
    }

    /// Where libcrypto cannot be loaded, an encrypted import fails with `io` naming the store, each library name
    /// tried and what to install (the process's own libcrypto loads, so the load is given names that do not).
    @Test func aLibcryptoThatCannotBeLoadedIsNamed() {
        let absent = LibCrypto.load(["libprefskv-absent-crypto.so.9", "libprefskv-absent-crypto.so"])
        let error = #expect(throws: PrefsError.self) { _ = try absent.get(for: "/data/mmkv/secure") }
        let message = error?.message ?? ""
        #expect(error?.code == .io && message.contains("/data/mmkv/secure"), "\(message)")
        #expect(message.contains("libprefskv-absent-crypto.so.9"), "\(message)")
        #expect(message.contains("libprefskv-absent-crypto.so:"), "\(message)")
        #expect(message.contains("libssl3"), "\(message)")
        // A library that loads but lacks a function is named with the function.
        let wrong = LibCrypto.load(["libc.so.6"])
        #expect(throws: PrefsError.self) { _ = try wrong.get(for: "s") }
        if case .failure(let failure) = wrong {
            #expect(failure.message == "libc.so.6 has no function EVP_CIPHER_CTX_new", "\(failure.message)")
        }
        #expect(throws: Never.self) { _ = try LibCrypto.loaded(for: "s") }
    }

    /// An import run again after the app changed a key keeps the app's value, unless replacing.
    @Test func aKeyTheAppChangedIsKeptUnlessReplacing() throws {
        let dir = try TempDir("mmkv-kept", memory: true)
        let store = try openStore(dir, id: "prefs")
        try store.importMMKV(at: Self.fixtures + "/plain/ui", types: Self.types)
        try store.set("light", forKey: "theme")
        let again = try store.importMMKV(at: Self.fixtures + "/plain/ui", types: Self.types)
        #expect(again.kept == ["theme"] && again.unchanged.count == 9, "\(again)")
        #expect(try store.string(forKey: "theme") == "light")
        try store.importMMKV(at: Self.fixtures + "/plain/ui", types: Self.types, replacing: true)
        #expect(try store.string(forKey: "theme") == "dark")
    }

    /// Records an issue unless `body` throws a ``PrefsError`` with `code`.
    static func expectCode(
        _ code: PrefsError.Code, sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> Void
    ) {
        #expect(sourceLocation: sourceLocation) {
            try body()
        } throws: { error in
            (error as? PrefsError)?.code == code
        }
    }

    @Test func patternsMatchTheLongestFirstInLinearTime() {
        let types: [String: MMKVType] = ["a.*": .string, "a.b.*": .int32, "a.b.c": .bool, "*": .bytes]
        #expect(PrefsStore.type(of: "a.b.c", in: types) == .bool)
        #expect(PrefsStore.type(of: "a.b.d", in: types) == .int32)
        #expect(PrefsStore.type(of: "a.x", in: types) == .string)
        #expect(PrefsStore.type(of: "z", in: types) == .bytes)
        #expect(PrefsStore.type(of: "z", in: ["a*": .bool]) == nil)
        #expect(PrefsStore.type(of: "abXcd", in: ["ab*cd": .bool]) == .bool)
        #expect(PrefsStore.type(of: "abXce", in: ["ab*cd": .bool]) == nil)
        // A pattern that backtracks exponentially in a naive matcher, against a long key: answered at once.
        let key = String(repeating: "a", count: 4000)
        #expect(PrefsStore.type(of: key, in: ["*a*a*a*a*a*a*a*a*b": .bool]) == nil)
    }
}
