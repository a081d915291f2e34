import Foundation
import Testing
import TestSupport

@testable import PrefsKV
@_spi(Testing) @testable import SecureVault

/// Reasons a launch can act on (issue 40, point 4): a vault written by a newer release is `unsupportedVersion`,
/// never `corrupted` (an app that wipes a corrupted vault would destroy the newer release's data), and a key file
/// with unsafe permissions is `permissionDenied`, with the file and the fix in `SessionRouter.lastFailure`.
@Suite struct RouteReasonTests {
    /// The vault file with its header's format version raised by one and its checksum made valid again: what a
    /// newer release of the library writes, as far as this one can tell.
    static func makeNewer(_ dir: VaultDirectory, _ service: String = "app") throws -> [UInt8] {
        var bytes = try dir.fileBytes(service)
        bytes[Format.versionOffset] = UInt8(Format.version + 1)
        let crc = CRC32C.checksum(Array(bytes[0..<Format.staticCRCOffset]))
        withUnsafeBytes(of: crc.littleEndian) { for i in 0..<4 { bytes[Format.staticCRCOffset + i] = $0[i] } }
        try dir.writeFile(bytes, service)
        return bytes
    }

    @Test func aVaultOfANewerFormatIsUnsupportedVersionNeverCorrupted() throws {
        let dir = try VaultDirectory()
        try dir.vault().setSessionToken("tok", expiresAt: nil)
        let newer = try Self.makeNewer(dir)

        let error = #expect(throws: VaultError.self) { try dir.vault().string(for: Vault.defaultSessionTokenKey) }
        #expect(error?.code == .unsupportedVersion, "\(String(describing: error))")
        #expect(try dir.vault().sessionToken() == .unavailable(.unsupportedVersion))
        let router = SessionRouter(vault: try dir.vault())
        #expect(router.route() == .signIn(reason: .unsupportedVersion))
        #expect(router.lastFailure?.code == .unsupportedVersion)
        #expect(try dir.fileBytes() == newer, "left byte for byte")
    }

    @Test func anItemOfANewerFormatIsUnsupportedVersion() throws {
        let dir = try VaultDirectory()
        let vault = try dir.vault()
        try vault.set("v1", for: "item")
        // An item whose envelope says version 2: what a newer release would write.
        let store = try #require(try vault.openStore(create: false))
        var envelope = [UInt8](repeating: 0, count: 40)
        envelope[0] = ItemEnvelope.version + 1
        envelope[1] = 1
        try envelope.withUnsafeBytes { try store.setBytes($0, forKey: "item") }

        let error = #expect(throws: VaultError.self) { try dir.vault().string(for: "item") }
        #expect(error?.code == .unsupportedVersion, "\(String(describing: error))")
        #expect(error?.message.contains("newer SecureVault") == true)
    }

    @Test func aKeyFileOthersMayReadRoutesToPermissionDeniedNamingTheFile() throws {
        let dir = try VaultDirectory()
        try FileManager.default.createDirectory(
            atPath: dir.path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let keyPath = (dir.path as NSString).deletingLastPathComponent + "/vault.key"
        try KeyStore.createKeyFile(at: keyPath)
        var configuration = Vault.Configuration(directory: dir.path)
        configuration.keyStore = .keyFile(keyPath)
        try Vault(service: "app", configuration: configuration).setSessionToken("tok", expiresAt: nil)
        chmod(keyPath, 0o644)

        // A fresh process's view: no key cached.
        let vault = try Vault(service: "app", configuration: configuration)
        vault.forgetKey()
        let router = SessionRouter(vault: vault)
        #expect(router.route() == .signIn(reason: .permissionDenied))
        let failure = try #require(router.lastFailure)
        #expect(failure.code == .permissionDenied)
        #expect(failure.message.contains(keyPath) && failure.message.contains("0644"), "\(failure.message)")

        chmod(keyPath, 0o600)
        #expect(router.route() == .dashboard(Session(token: "tok", expiresAt: nil, isPersisted: true)))
        #expect(router.lastFailure == nil)
    }
}
