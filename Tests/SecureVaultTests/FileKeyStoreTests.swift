import Foundation
import Testing
import TestSupport

@_spi(Testing) @testable import SecureVault

/// The key file and systemd credential key stores beyond the common contract (VaultContractTests): what is
/// refused and why, that the root secret is only ever read, and a service reading its credential from
/// `$CREDENTIALS_DIRECTORY`. Real files, the real `systemd-creds` with the host key.
@Suite struct FileKeyStoreTests {
    /// A private scratch directory: `vaults/` for the vaults, the rest for key files.
    final class Scratch {
        let root: String
        var vaults: String { root + "/vaults" }

        init() throws {
            root = "/dev/shm/file-keys-" + UUID().uuidString
            try FileManager.default.createDirectory(
                atPath: vaults, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            chmod(root, 0o700)
        }

        deinit { try? FileManager.default.removeItem(atPath: root) }

        func vault(_ keyStore: KeyStore) throws -> Vault { try vault("app", keyStore) }

        func vault(_ service: String, _ keyStore: KeyStore) throws -> Vault {
            var configuration = Vault.Configuration(directory: vaults)
            configuration.keyStore = keyStore
            configuration.deadline = KeyringSession.deadline  // systemd-creds beside a loaded test run: no measure
            let vault = try Vault(service: service, configuration: configuration)
            vault.forgetKey()
            return vault
        }

        func write(_ bytes: [UInt8], to name: String, mode: Int = 0o600) throws -> String {
            let path = root + "/" + name
            try Data(bytes).write(to: URL(fileURLWithPath: path))
            chmod(path, mode_t(mode))
            return path
        }

        func bytes(_ path: String) throws -> [UInt8] { [UInt8](try Data(contentsOf: URL(fileURLWithPath: path))) }

        /// Runs `script` with bash, `$H` being the test helper and the vault directory this one's.
        func run(_ script: String) throws -> ChildResult {
            try ChildProcess.run(
                "/bin/bash", ["-c", script],
                environment: ["H": KeyringSession.helper, "VAULT_TEST_DIR": vaults, "S": root, "CREDENTIALS_DIRECTORY": nil])
        }
    }

    static func failure(_ body: () throws -> Void) -> VaultError? {
        do {
            try body()
            return nil
        } catch {
            return error as? VaultError
        }
    }

    // MARK: Key files

    @Test func aKeyFileIsNeverCreatedSilently() throws {
        let scratch = try Scratch()
        let path = scratch.root + "/vault.key"
        let error = Self.failure { try scratch.vault(.keyFile(path)).set("tok", for: "token") }
        #expect(error?.code == .keyMissing)
        #expect(
            error?.message.contains(
                "`vaultctl --dir \(scratch.vaults) vault init --key-store key-file:\(path) --service app`") == true,
            "\(String(describing: error))")
        #expect(!FileManager.default.fileExists(atPath: path))
        #expect(!FileManager.default.fileExists(atPath: scratch.vaults + "/app.prefs"), "no vault without its key")
        #expect(try KeyStore.createKeyFile(at: path))
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        #expect(attributes[.posixPermissions] as? Int == 0o600 && attributes[.size] as? Int == 32)
        let created = try scratch.bytes(path)
        #expect(try !KeyStore.createKeyFile(at: path), "an existing key file is left as it is")
        #expect(try scratch.bytes(path) == created)
        try scratch.vault(.keyFile(path)).set("tok", for: "token")
        #expect(try scratch.vault(.keyFile(path)).string(for: "token") == "tok")
    }

    @Test func aKeyFileOthersMayReadOrThatIsNotOursIsRefused() throws {
        let scratch = try Scratch()
        let path = scratch.root + "/vault.key"
        try KeyStore.createKeyFile(at: path)
        try scratch.vault(.keyFile(path)).set("tok", for: "token")
        let before = try scratch.bytes(scratch.vaults + "/app.prefs")
        for mode in [0o640, 0o604, 0o660] {
            chmod(path, mode_t(mode))
            let error = Self.failure { _ = try scratch.vault(.keyFile(path)).string(for: "token") }
            #expect(error?.code == .permissionDenied, "mode \(String(mode, radix: 8))")
            #expect(error?.message.contains("has mode 0\(String(mode, radix: 8))") == true)
        }
        chmod(path, 0o400)
        #expect(try scratch.vault(.keyFile(path)).string(for: "token") == "tok", "0400 is fine")
        chown(path, 65534, 65534)
        let error = Self.failure { _ = try scratch.vault(.keyFile(path)).string(for: "token") }
        #expect(error?.code == .permissionDenied)
        #expect(error?.message.contains("belongs to uid 65534") == true)
        #expect(try scratch.bytes(scratch.vaults + "/app.prefs") == before)
    }

    @Test(arguments: [0, 16, 31, 33, 64])
    func aKeyFileOfAnotherLengthIsWrongKey(length: Int) throws {
        let scratch = try Scratch()
        let path = try scratch.write([UInt8](repeating: 7, count: length), to: "vault.key")
        let error = Self.failure { try scratch.vault(.keyFile(path)).set("tok", for: "token") }
        #expect(error?.code == .wrongKey)
        #expect(error?.message.contains("holds \(length) bytes, not a 32-byte key") == true)
        #expect(!FileManager.default.fileExists(atPath: scratch.vaults + "/app.prefs"))
    }

    /// Kubernetes mounts a secret as `key -> ..data/key`, `..data -> ..2026_11_25_...`.
    @Test func aKeyFileMountedThroughSymbolicLinksIsFollowed() throws {
        let scratch = try Scratch()
        try FileManager.default.createDirectory(atPath: scratch.root + "/..2026_11_25", withIntermediateDirectories: true)
        try KeyStore.createKeyFile(at: scratch.root + "/..2026_11_25/key")
        try FileManager.default.createSymbolicLink(atPath: scratch.root + "/..data", withDestinationPath: "..2026_11_25")
        try FileManager.default.createSymbolicLink(atPath: scratch.root + "/key", withDestinationPath: "..data/key")
        try scratch.vault(.keyFile(scratch.root + "/key")).set("tok", for: "token")
        #expect(try scratch.vault(.keyFile(scratch.root + "/key")).string(for: "token") == "tok")
    }

    /// The root secret is only read: a read-only key file stays byte for byte through rotations and wipes, and
    /// vaults sharing it stay independent.
    @Test func theKeyFileIsNeverWrittenAndVaultsSharingItAreIndependent() throws {
        let scratch = try Scratch()
        let path = scratch.root + "/vault.key"
        try KeyStore.createKeyFile(at: path)
        chmod(path, 0o400)
        let key = try scratch.bytes(path)
        try scratch.vault("a", .keyFile(path)).set("tok-a", for: "token")
        try scratch.vault("b", .keyFile(path)).set("tok-b", for: "token")
        try scratch.vault("a", .keyFile(path)).rotateKey()
        let report = try scratch.vault("a", .keyFile(path)).wipe()
        #expect(report.removedKey && report.keptKeyReason == nil)
        #expect(try scratch.bytes(path) == key)
        #expect(try scratch.vault("b", .keyFile(path)).string(for: "token") == "tok-b")
        #expect(try scratch.vault("a", .keyFile(path)).string(for: "token") == nil)
        let left = try FileManager.default.contentsOfDirectory(atPath: scratch.vaults).filter { $0.hasSuffix(".vaultkey") }
        #expect(left.count == 1 && left[0].hasPrefix("b."), "\(left)")
    }

    @Test func aWrappedKeyAlteredOrTakenFromAnotherVaultDoesNotOpen() throws {
        let scratch = try Scratch()
        let path = scratch.root + "/vault.key"
        try KeyStore.createKeyFile(at: path)
        try scratch.vault("a", .keyFile(path)).set("tok-a", for: "token")
        try scratch.vault("b", .keyFile(path)).set("tok-b", for: "token")
        let a = try #require(try scratch.vault("a", .keyFile(path)).existingIdentity())
        let b = try #require(try scratch.vault("b", .keyFile(path)).existingIdentity())
        let aPath = scratch.vaults + "/a.\(a.keyIDHex).vaultkey"
        let original = try scratch.bytes(aPath)
        let before = try scratch.bytes(scratch.vaults + "/a.prefs")
        for offset in [0, 1, 30, 72] {
            var altered = original
            altered[offset] ^= 0x01
            try Data(altered).write(to: URL(fileURLWithPath: aPath))
            let error = Self.failure { _ = try scratch.vault("a", .keyFile(path)).string(for: "token") }
            #expect(error?.code == (offset == 0 ? .corrupted : .wrongKey), "byte \(offset): \(String(describing: error))")
        }
        // b's wrapped key under a's name: bound to b's service and key id, it does not open as a's.
        try FileManager.default.removeItem(atPath: aPath)
        try FileManager.default.copyItem(atPath: scratch.vaults + "/b.\(b.keyIDHex).vaultkey", toPath: aPath)
        #expect(Self.failure { _ = try scratch.vault("a", .keyFile(path)).string(for: "token") }?.code == .wrongKey)
        #expect(try scratch.bytes(scratch.vaults + "/a.prefs") == before)
        try FileManager.default.removeItem(atPath: aPath)
        try Data(original).write(to: URL(fileURLWithPath: aPath))
        chmod(aPath, 0o600)
        #expect(try scratch.vault("a", .keyFile(path)).string(for: "token") == "tok-a")
    }

    // MARK: systemd credentials

    @Test func aNewVaultSealsItsCredentialAndAnotherNameOrAnOpenModeIsRefused() throws {
        let scratch = try Scratch()
        let name = "sv-" + UUID().uuidString.prefix(8).lowercased()
        try scratch.vault(.systemdCredential(name: name)).set("tok", for: "token")
        let credential = scratch.vaults + "/\(name).cred"
        let attributes = try FileManager.default.attributesOfItem(atPath: credential)
        #expect(attributes[.posixPermissions] as? Int == 0o600)
        let sealed = try scratch.bytes(credential)
        #expect(try scratch.vault(.systemdCredential(name: name)).string(for: "token") == "tok")
        try scratch.vault(.systemdCredential(name: name)).rotateKey()
        #expect(try scratch.bytes(credential) == sealed, "the credential is never rewritten")
        // The name is sealed into the credential: under another name systemd-creds refuses it.
        let other = Self.failure {
            _ = try scratch.vault(.systemdCredential(name: "other", file: credential)).string(for: "token")
        }
        #expect(other?.code == .wrongKey)
        #expect(other?.message.contains("does not match") == true, "\(String(describing: other))")
        chmod(credential, 0o644)
        #expect(Self.failure { _ = try scratch.vault(.systemdCredential(name: name)).string(for: "token") }?.code
            == .permissionDenied)
    }

    /// A service with `LoadCredentialEncrypted=` finds the credential decrypted in `$CREDENTIALS_DIRECTORY`:
    /// it needs neither the sealed file nor the host key, so it may run as any user. Without the host key, and
    /// without that directory, the key store is unavailable, with the reason.
    @Test func aServiceReadsItsCredentialFromItsCredentialsDirectoryAsAnyUser() throws {
        let scratch = try Scratch()
        let name = "sv-" + UUID().uuidString.prefix(8).lowercased()
        let result = try scratch.run(
            """
            export VAULT_TEST_KEY_STORE=systemd-creds:\(name)
            NOBODY() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
            chmod 0755 $S; mkdir -m 0700 $S/nobody; chown 65534:65534 $S/nobody
            VAULT_TEST_DIR=$S/nobody NOBODY $H vault-set app token <<< tok-nobody
            $H vault-set app token <<< tok-root
            chown -R 65534:65534 $VAULT_TEST_DIR
            NOBODY $H vault-token app | cut -d' ' -f1,2
            mkdir -m 0755 $S/credentials
            systemd-creds decrypt --name=\(name) $VAULT_TEST_DIR/\(name).cred $S/credentials/\(name)
            chown 65534 $S/credentials/\(name); chmod 0400 $S/credentials/\(name)
            mv $VAULT_TEST_DIR/\(name).cred $S/sealed-away
            NOBODY env CREDENTIALS_DIRECTORY=$S/credentials $H vault-get app token
            NOBODY $H vault-get app token 2>/dev/null | cut -d' ' -f1,2
            """)
        #expect(result.lines.count == 5, "\(result)")
        #expect(result.lines.first?.hasPrefix("error unavailable") == true, "\(result)")
        #expect(result.standardError.contains("host key is root's"), "\(result)")
        #expect(result.lines.dropFirst().first == "ok")
        // The launch's answer names the key store, not a Secret Service this vault never used.
        #expect(result.lines.dropFirst(2).first == "unavailable keyStoreUnavailable", "\(result)")
        #expect(result.lines.dropFirst(3).first == "value tok-root", "nobody read it from the directory: \(result)")
        #expect(result.lines.last == "error keyMissing", "without the directory or the sealed file: \(result)")
    }

    // MARK: Review findings

    /// Vaults sharing one credential, created at the same instant by two processes: one seals it, the other
    /// uses the one that won (before: both sealed, the last rename won, and the other vault lost its key).
    @Test func vaultsSharingACredentialCreatedAtOnceBothKeepTheirKey() throws {
        let scratch = try Scratch()
        let result = try scratch.run(
            """
            export VAULT_TEST_KEY_STORE=systemd-creds:shared
            for r in $(seq 1 12); do
              export VAULT_TEST_DIR=$S/r$r; mkdir -m 0700 $VAULT_TEST_DIR
              $H vault-set a token <<< tok-a > /dev/null & $H vault-set b token <<< tok-b > /dev/null & wait
              echo "$($H vault-get a token 2>/dev/null | cut -d' ' -f1,2) $($H vault-get b token 2>/dev/null | cut -d' ' -f1,2)"
            done
            """)
        #expect(result.lines.count == 12, "\(result)")
        #expect(result.lines.allSatisfy { $0 == "value tok-a value tok-b" }, "\(result)")
    }

    /// A FIFO planted where a wrapped key or a key file is expected is refused at once, never waited on.
    @Test func aFifoPlantedAsAKeyIsRefusedAtOnce() throws {
        let scratch = try Scratch()
        let result = try scratch.run(
            """
            head -c 32 /dev/urandom > $S/key; chmod 600 $S/key
            export VAULT_TEST_KEY_STORE=key-file:$S/key
            $H vault-set app token <<< tok > /dev/null
            set -- $($H vault-identity app)
            mv $VAULT_TEST_DIR/app.$2.vaultkey $S/saved; mkfifo -m 0600 $VAULT_TEST_DIR/app.$2.vaultkey
            timeout 20 $H vault-get app token | cut -d' ' -f1,2
            rm $VAULT_TEST_DIR/app.$2.vaultkey; mv $S/saved $VAULT_TEST_DIR/app.$2.vaultkey
            mv $S/key $S/key.saved; mkfifo -m 0600 $S/key
            timeout 20 $H vault-get app token | cut -d' ' -f1,2
            """)
        #expect(result.lines == ["error permissionDenied", "error permissionDenied"], "\(result)")
    }

    /// A migration whose target cannot make a key leaves the vault as it was, with no journal; and a journal
    /// naming the live key is never acted on while the file's header cannot be read (before: a failed
    /// migration left `drop <live key>` behind, and an unreadable header read as "no file", so the next open
    /// deleted the key the file needs).
    @Test func aFailedMigrationAndAnUnreadableHeaderDeleteNoKey() throws {
        let scratch = try Scratch()
        let path = scratch.root + "/vault.key"
        try KeyStore.createKeyFile(at: path)
        try scratch.vault(.keyFile(path)).set("tok", for: "token")
        let identity = try #require(try scratch.vault(.keyFile(path)).existingIdentity())
        let wrapped = scratch.vaults + "/app.\(identity.keyIDHex).vaultkey"
        let failed = Self.failure { try scratch.vault(.keyFile(path)).migrateKey(to: .keyFile(scratch.root + "/missing")) }
        #expect(failed?.code == .keyMissing)
        #expect(!FileManager.default.fileExists(atPath: scratch.vaults + "/app.vault.intent"))
        #expect(try scratch.vault(.keyFile(path)).string(for: "token") == "tok")

        // A journal that names the live key (as a rotation's does until it ends), and a header nobody can read.
        // The line says identity format 2 while the vault's is 3: a key is named by its ids, whatever the format
        // (a key file's name carries none), so the line still names the live key.
        let file = scratch.vaults + "/app.prefs"
        let bytes = try scratch.bytes(file)
        try Data("drop \(identity.vaultIDHex) \(identity.keyIDHex) 2\n".utf8).write(
            to: URL(fileURLWithPath: scratch.vaults + "/app.vault.intent"))
        chmod(scratch.vaults + "/app.vault.intent", 0o600)
        try Data(bytes.prefix(100)).write(to: URL(fileURLWithPath: file))
        let damaged = Self.failure { _ = try scratch.vault(.keyFile(path)).string(for: "token") }
        #expect(damaged?.code == .corrupted, "\(String(describing: damaged))")
        #expect(FileManager.default.fileExists(atPath: wrapped), "the key the file needs is still there")
        try Data(bytes).write(to: URL(fileURLWithPath: file))
        #expect(try scratch.vault(.keyFile(path)).string(for: "token") == "tok")
    }

    /// A wipe of a systemd credential vault needs no access to the credential: it deletes the wrapped key, which
    /// is the vault's by its name (before: it loaded the root secret first, and failed without root).
    @Test func aWipeNeedsNoAccessToTheCredential() throws {
        let scratch = try Scratch()
        let result = try scratch.run(
            """
            export VAULT_TEST_KEY_STORE=systemd-creds:wipe-test
            $H vault-set app token <<< tok
            chmod 0755 $S; chown -R 65534:65534 $VAULT_TEST_DIR
            setpriv --reuid=65534 --regid=65534 --clear-groups $H vault-get app token | cut -d' ' -f1,2
            setpriv --reuid=65534 --regid=65534 --clear-groups $H vault-wipe-report app
            ls $VAULT_TEST_DIR
            """)
        #expect(result.lines.count == 4, "\(result)")
        #expect(result.lines[1] == "error unavailable", "\(result)")
        #expect(result.lines[2].hasPrefix("wiped removed"), "\(result)")
        #expect(Array(result.lines.dropFirst(3)) == ["wipe-test.cred"], "\(result)")
    }
}

// MARK: Issue 34, point 5 (b, d): planted files

extension FileKeyStoreTests {
    /// A wrapped key replaced by a symbolic link (to a copy of itself, so that only the link is wrong) is a
    /// planted file: `permissionDenied` naming the path, as for one of another owner (before: `io`, the ELOOP of
    /// its O_NOFOLLOW open passed through as an I/O error).
    @Test func aWrappedKeyReplacedByASymbolicLinkIsPermissionDenied() throws {
        let scratch = try Scratch()
        let path = scratch.root + "/vault.key"
        try KeyStore.createKeyFile(at: path)
        try scratch.vault(.keyFile(path)).set("tok", for: "token")
        let identity = try #require(try scratch.vault(.keyFile(path)).existingIdentity())
        let wrapped = scratch.vaults + "/app.\(identity.keyIDHex).vaultkey"
        try FileManager.default.moveItem(atPath: wrapped, toPath: scratch.root + "/moved.vaultkey")
        try FileManager.default.createSymbolicLink(atPath: wrapped, withDestinationPath: scratch.root + "/moved.vaultkey")
        let error = Self.failure { _ = try scratch.vault(.keyFile(path)).string(for: "token") }
        #expect(error?.code == .permissionDenied, "\(String(describing: error))")
        #expect(error?.message.contains(wrapped) == true, "\(String(describing: error))")
        #expect(error?.message.contains("symbolic link") == true, "\(String(describing: error))")
        #expect(error?.path == wrapped)
    }

    /// `$CREDENTIALS_DIRECTORY/<name>` is trusted as systemd makes it: a regular file (a symbolic link is refused,
    /// never followed), of this user or root, that group and others cannot write (0400 and 0440 are systemd's).
    /// Anything else is `permissionDenied` naming the file (before: read whatever it was).
    @Test func aCredentialInTheCredentialsDirectoryMustBeAsSystemdMakesIt() throws {
        let scratch = try Scratch()
        let name = "sv-" + UUID().uuidString.prefix(8).lowercased()
        let result = try scratch.run(
            """
            export VAULT_TEST_KEY_STORE=systemd-creds:\(name)
            $H vault-set app token <<< tok > /dev/null
            mkdir -m 0700 $S/credentials $S/elsewhere
            systemd-creds decrypt --name=\(name) $VAULT_TEST_DIR/\(name).cred $S/elsewhere/real
            chmod 0400 $S/elsewhere/real
            mv $VAULT_TEST_DIR/\(name).cred $S/sealed-away
            C=$S/credentials/\(name)
            GET() { env CREDENTIALS_DIRECTORY=$S/credentials $H vault-get app token 2>>$S/errors | cut -d' ' -f1,2; }
            cp $S/elsewhere/real $C; chmod 0400 $C; GET
            chmod 0440 $C; GET
            chmod 0460 $C; GET
            chmod 0406 $C; GET
            chmod 0400 $C; chown 65534 $C; GET
            rm $C; ln -s $S/elsewhere/real $C; GET
            rm $C; mkdir -m 0700 $C; GET
            cat $S/errors
            """)
        #expect(Array(result.lines.prefix(7)) == [
            "value tok", "value tok", "error permissionDenied", "error permissionDenied", "error permissionDenied",
            "error permissionDenied", "error permissionDenied",
        ], "\(result)")
        let credential = scratch.root + "/credentials/" + name
        let messages = result.lines.dropFirst(7).filter { $0.hasPrefix("message ") }
        #expect(messages.count == 5 && messages.allSatisfy { $0.contains(credential) }, "\(result)")
        #expect(messages.contains { $0.contains("group or others may write it") }, "\(result)")
        #expect(messages.contains { $0.contains("belongs to uid 65534") }, "\(result)")
        #expect(messages.contains { $0.contains("symbolic link") }, "\(result)")
    }
}
