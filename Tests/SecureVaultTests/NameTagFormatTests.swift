import CSodium
import Foundation
import Testing

@testable import PrefsKV
@_spi(Testing) @testable import SecureVault

/// Identity format 3 tags names with SipHash-2-4-128 instead of keyed BLAKE2b (issue 18: the tag was a seventh of a
/// sealed write, and PrefsKV's map from names to tags another seventh). The tags on disk are checked against
/// libsodium called directly with the subkey derivation VaultSealer documents; a vault of format 2 keeps its
/// BLAKE2b tags, opens, and is re-tagged by a key rotation.
@Suite struct NameTagFormatTests {
    /// The master key of the vault's current identity, from its key store.
    private func masterKey(of vault: Vault) throws -> (KeyIdentity, SecretBytes) {
        let identity = try #require(try vault.existingIdentity())
        let key = try #require(try vault.keys.load(identity, file: vault.path))
        return (identity, key)
    }

    private func sipHashTag(_ name: String, masterKey: SecretBytes) -> [UInt8] {
        let key = Sodium.deriveSubkey(from: masterKey, id: 2, context: "SVLTntag", length: 16)
        var out = [UInt8](repeating: 0, count: 16)
        let input = Array(name.utf8)
        key.withUnsafeBytes { k in
            _ = crypto_shorthash_siphashx24(
                &out, input, UInt64(input.count), k.baseAddress!.assumingMemoryBound(to: UInt8.self))
        }
        return out
    }

    private func blake2bTag(_ name: String, masterKey: SecretBytes) -> [UInt8] {
        let key = Sodium.deriveSubkey(from: masterKey, id: 2, context: "SVLTname")
        var out = [UInt8](repeating: 0, count: 16)
        let input = Array(name.utf8)
        key.withUnsafeBytes { k in
            _ = crypto_generichash(
                &out, 16, input, UInt64(input.count), k.baseAddress!.assumingMemoryBound(to: UInt8.self), k.count)
        }
        return out
    }

    /// The tags of the live set records in the vault file.
    private func liveTags(_ dir: VaultDirectory) throws -> Set<[UInt8]> {
        let file = VaultFileRecords(try dir.fileBytes())
        return Set(file.records.filter { $0.offset < file.logEnd }.map(\.tag))
    }

    @Test func aNewVaultTagsNamesWithSipHashAndKeepsNoNameToTagMap() throws {
        let dir = try VaultDirectory()
        let vault = try dir.vault()
        try vault.set("t0k3n", for: "session.token")
        try vault.set("other", for: "refresh")
        let (identity, key) = try masterKey(of: vault)
        #expect(identity.format == 3)
        let expected = Set(["session.token", "refresh"].map { sipHashTag($0, masterKey: key) })
        #expect(try liveTags(dir).isSuperset(of: expected))
        #expect(
            try liveTags(dir).isDisjoint(with: ["session.token", "refresh"].map { blake2bTag($0, masterKey: key) }))
        #expect(vault.testSealer.tagsAreCheap)
        // The tag PrefsKV computes onto the stack is the array's.
        var written = [UInt8](repeating: 0, count: 16)
        written.withUnsafeMutableBytes { vault.testSealer.tag(forKey: "session.token", into: $0) }
        #expect(written == sipHashTag("session.token", masterKey: key))

        let reopened = try dir.vault()
        #expect(try reopened.string(for: "session.token") == "t0k3n")
        #expect(try reopened.allKeys() == ["refresh", "session.token"])
    }

    @Test func aFormat2VaultKeepsItsBlake2bTagsUntilARotationRetagsIt() throws {
        let dir = try VaultDirectory()
        let service = "app"
        // A vault as the release before format 3 made it: identity format 2, BLAKE2b tags.
        let maker = try dir.vault(service)
        var identity = KeyIdentity.random(kind: .inMemory)
        identity.format = 2
        let oldKey = try maker.keys.create(&identity)
        var configuration = PrefsStore.Configuration()
        configuration.sealer = VaultSealer(masterKey: oldKey, identity: identity, service: service)
        configuration.durability = .synchronous
        try maker.checkDirectory(create: true)
        _ = try PrefsStore(id: service, directory: dir.path, configuration: configuration)
        try maker.set("v2 value", for: "k")
        try maker.set("gone soon", for: "j")
        try maker.remove("j")

        let opened = try dir.vault(service)
        #expect(try opened.string(for: "k") == "v2 value")
        #expect(try opened.string(for: "j") == nil)
        #expect(try opened.existingIdentity()?.format == 2)
        #expect(!opened.testSealer.tagsAreCheap)
        var written = [UInt8](repeating: 0, count: 16)
        written.withUnsafeMutableBytes { opened.testSealer.tag(forKey: "k", into: $0) }
        #expect(written == blake2bTag("k", masterKey: oldKey))
        #expect(try liveTags(dir).contains(blake2bTag("k", masterKey: oldKey)))
        try opened.set("written by format 3 code", for: "new")
        #expect(try liveTags(dir).contains(blake2bTag("new", masterKey: oldKey)))

        try opened.rotateKey()
        let rotated = try dir.vault(service)
        let (newIdentity, newKey) = try masterKey(of: rotated)
        #expect(newIdentity.format == 3)
        #expect(try rotated.string(for: "k") == "v2 value")
        #expect(try rotated.string(for: "new") == "written by format 3 code")
        #expect(try rotated.allKeys() == ["k", "new"])
        let tags = try liveTags(dir)
        #expect(tags.isSuperset(of: [sipHashTag("k", masterKey: newKey), sipHashTag("new", masterKey: newKey)]))
        #expect(!tags.contains(blake2bTag("k", masterKey: oldKey)))
    }

    /// A vault whose identity format is newer than this library's is refused as `unsupportedVersion` (never
    /// `corrupted`, which an app may answer with a wipe) with a message that says so, and its file is left as it was.
    @Test func aVaultOfANewerIdentityFormatIsRefusedAndSaysSo() throws {
        let dir = try VaultDirectory()
        try dir.vault().set("v", for: "k")
        var bytes = try dir.fileBytes()
        #expect(bytes[Format.keyCheckOffset] == KeyIdentity.currentFormat)
        bytes[Format.keyCheckOffset] = KeyIdentity.currentFormat + 1
        let crc = CRC32C.checksum(Array(bytes[0..<Format.staticCRCOffset]))
        withUnsafeBytes(of: crc.littleEndian) {
            bytes.replaceSubrange(Format.staticCRCOffset..<Format.staticCRCOffset + 4, with: $0)
        }
        try dir.writeFile(bytes)
        do {
            _ = try dir.vault().string(for: "k")
            Issue.record("a vault of a newer identity format opened")
        } catch let error as VaultError {
            #expect(error.code == .unsupportedVersion)
            #expect(
                error.message.contains("format \(KeyIdentity.currentFormat + 1), written by a newer SecureVault"),
                "\(error)")
        }
        #expect(try dir.fileBytes() == bytes)
    }
}
