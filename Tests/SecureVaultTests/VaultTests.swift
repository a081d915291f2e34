import Foundation
import Glibc
import Logging
import Synchronization
import Testing
import TestSupport

@testable import PrefsKV
@_spi(Testing) @testable import SecureVault

/// A vault directory under /dev/shm (fsync is free there), removed afterwards.
final class VaultDirectory {
    let path: String
    let keys = InMemoryKeys()

    init() throws {
        let base = FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm" : NSTemporaryDirectory()
        path = base + "/vault-test-" + UUID().uuidString + "/vaults"
    }

    deinit { try? FileManager.default.removeItem(atPath: (path as NSString).deletingLastPathComponent) }

    func configuration(logger: Logger? = nil) -> Vault.Configuration {
        var configuration = Vault.Configuration(directory: path)
        configuration.keyStore = .inMemory(keys)
        if let logger { configuration.logger = logger }
        return configuration
    }

    /// A fresh handle, as a new process would have: no key cached.
    func vault(_ service: String = "app", logger: Logger? = nil) throws -> Vault {
        let vault = try Vault(service: service, configuration: configuration(logger: logger))
        vault.forgetKey()
        return vault
    }

    func fileBytes(_ service: String = "app") throws -> [UInt8] {
        [UInt8](try Data(contentsOf: URL(fileURLWithPath: path + "/" + service + ".prefs")))
    }

    func writeFile(_ bytes: [UInt8], _ service: String = "app") throws {
        try Data(bytes).write(to: URL(fileURLWithPath: path + "/" + service + ".prefs"))
    }
}

@Suite struct VaultItemTests {
    @Test func valuesOfEveryKindRoundTripAcrossHandles() throws {
        let dir = try VaultDirectory()
        let vault = try dir.vault()
        try vault.set("pässwörd ✓", for: "text")
        try vault.set(Data([0, 255, 0, 1]), for: "bytes")
        try vault.set(SecretBytes([9, 8, 7]), for: "key.material")
        try vault.set("", for: "empty", allowEmpty: true)

        let reopened = try dir.vault()
        #expect(try reopened.string(for: "text") == "pässwörd ✓")
        #expect(try reopened.data(for: "bytes") == Data([0, 255, 0, 1]))
        #expect(try reopened.secret(for: "key.material") == SecretBytes([9, 8, 7]))
        #expect(try reopened.string(for: "empty") == "")
        #expect(try reopened.string(for: "absent") == nil)
        #expect(try reopened.allKeys() == ["bytes", "empty", "key.material", "text"])
        #expect(try reopened.contains("text"))
        #expect(try !reopened.contains("absent"))
    }

    @Test func aVaultWithoutFileAnswersAbsentAndCreatesNothing() throws {
        let dir = try VaultDirectory()
        let vault = try dir.vault()
        #expect(try vault.string(for: "token") == nil)
        #expect(try vault.allKeys() == [])
        try vault.remove("token")
        #expect(vault.sessionToken() == .absent)
        #expect(!FileManager.default.fileExists(atPath: dir.path))
        #expect(dir.keys.count == 0)
    }

    @Test func overwriteRemoveAndRemoveAll() throws {
        let dir = try VaultDirectory()
        let vault = try dir.vault()
        try vault.set("one", for: "a")
        try vault.set("two", for: "a")
        try vault.set("x", for: "b")
        #expect(try vault.string(for: "a") == "two")
        try vault.remove("a")
        try vault.remove("a")  // idempotent
        #expect(try vault.string(for: "a") == nil)
        try vault.removeAll()
        #expect(try vault.allKeys() == [])
        #expect(try dir.vault().allKeys() == [])
    }

    @Test(arguments: ["", "has space", "slash/name", "ümlaut", String(repeating: "k", count: 129), "..", "."])
    func invalidKeyNamesAreRefused(_ name: String) throws {
        let dir = try VaultDirectory()
        let vault = try dir.vault()
        expectVaultError(.invalidKey) { try vault.set("v", for: name) }
        expectVaultError(.invalidKey) { try vault.string(for: name) }
        expectVaultError(.invalidKey) { try vault.remove(name) }
    }

    @Test func invalidServiceNameIsRefused() throws {
        expectVaultError(.invalidKey) { try Vault(service: "../etc") }
    }

    /// A service name is the vault's store id, so it follows the file-name rule: no ".." inside (PrefsKV
    /// refused such a store id anyway). A key name lives inside the file and may contain "..".
    @Test func aDoubleDotIsRefusedInAServiceNameAndAllowedInAKeyName() throws {
        expectVaultError(.invalidKey) { try Vault(service: "a..b") }
        let dir = try VaultDirectory()
        let vault = try dir.vault()
        try vault.set("v", for: "a..b")
        #expect(try vault.string(for: "a..b") == "v")
    }

    @Test func valuesUpTo64KiBAreAcceptedAndLargerOnesRefused() throws {
        let dir = try VaultDirectory()
        let vault = try dir.vault()
        let limit = Data(repeating: 0xA5, count: 64 * 1024)
        try vault.set(limit, for: "big")
        #expect(try vault.data(for: "big") == limit)
        expectVaultError(.valueTooLarge) { try vault.set(limit + [0], for: "big") }
        #expect(try vault.data(for: "big") == limit)
        #expect(try vault.allKeys() == ["big"])
        let names = String(repeating: "n", count: 128)
        try vault.set("ok", for: names)
        #expect(try vault.string(for: names) == "ok")
    }

    @Test func namesAndValuesAreNotReadableOnDisk() throws {
        let dir = try VaultDirectory()
        let vault = try dir.vault()
        try vault.set("valueMarkerQwerty", for: "nameMarkerAsdfgh")
        try vault.setSessionToken("tokenMarkerZxcvb", expiresAt: nil)
        let bytes = try dir.fileBytes()
        for marker in ["valueMarkerQwerty", "nameMarkerAsdfgh", "tokenMarkerZxcvb", "session"] {
            #expect(!contains(bytes, Array(marker.utf8)), "\(marker) is readable in the vault file")
        }
    }

    /// In a child process whose umask is 0 (set here, the whole process's umask would reach every test running
    /// beside this one).
    @Test func filesAreCreatedPrivateWhateverTheUmask() throws {
        let dir = try VaultDirectory()
        let result = try ChildProcess.run(
            "/bin/sh", ["-c", "umask 0 && exec \"$@\"", "sh", KeyringSession.helper, "vault-set", "app", "k"],
            environment: ["VAULT_TEST_DIR": dir.path, "VAULT_TEST_KEY_STORE": "passphrase:umask-test"],
            input: Data("v\n".utf8))
        #expect(result.status == 0 && result.standardOutput == "ok\n", "\(result)")
        #expect(try mode(dir.path) == 0o700)
        #expect(try mode(dir.path + "/app.prefs") == 0o600)
    }

    @Test func asyncTwinsDoTheSameWork() async throws {
        let dir = try VaultDirectory()
        let vault = try dir.vault()
        try await vault.set("async", for: "k")
        #expect(try await vault.string(for: "k") == "async")
        #expect(try await vault.allKeys() == ["k"])
        try await vault.setSessionToken("t", expiresAt: Date(timeIntervalSinceNow: 60))
        if case .valid(let token, _) = await vault.sessionToken() {
            #expect(token == "t")
        } else {
            Issue.record("expected a valid token")
        }
        try await vault.remove("k")
        #expect(try await vault.contains("k") == false)
    }

    @Test func twoHandlesOnOneVaultSeeEachOthersWrites() throws {
        let dir = try VaultDirectory()
        let first = try dir.vault()
        let second = try dir.vault()
        try first.set("from first", for: "a")
        #expect(try second.string(for: "a") == "from first")
        try second.set("from second", for: "a")
        #expect(try first.string(for: "a") == "from second")
    }
}

@Suite struct VaultSessionTokenTests {
    @Test func validExpiredAndAbsentAreTold() throws {
        let dir = try VaultDirectory()
        let vault = try dir.vault()
        #expect(vault.sessionToken() == .absent)
        let expiry = Date(timeIntervalSince1970: (Date().timeIntervalSince1970 + 3600).rounded(.down))
        try vault.setSessionToken("abc", expiresAt: expiry)
        #expect(try dir.vault().sessionToken() == .valid(token: "abc", expiresAt: expiry))

        let past = Date(timeIntervalSince1970: (Date().timeIntervalSince1970 - 5).rounded(.down))
        try vault.setSessionToken("old", expiresAt: past)
        #expect(try dir.vault().sessionToken() == .expired(expiredAt: past))

        try vault.setSessionToken("forever", expiresAt: nil)
        #expect(vault.sessionToken() == .valid(token: "forever", expiresAt: nil))
        try vault.remove(Vault.defaultSessionTokenKey)
        #expect(vault.sessionToken() == .absent)
    }

    @Test func missingKeyIsKeyMissingNeverAbsentAndTheFileIsUntouched() throws {
        let dir = try VaultDirectory()
        try dir.vault().setSessionToken("abc", expiresAt: nil)
        let before = try dir.fileBytes()
        dir.keys.removeAll()
        let vault = try dir.vault()
        #expect(vault.sessionToken() == .unavailable(.keyMissing))
        expectVaultError(.keyMissing) { try vault.string(for: "other") }
        // A write must not mint a new key over the existing data either.
        expectVaultError(.keyMissing) { try vault.set("new", for: "other") }
        #expect(try dir.fileBytes() == before)
        #expect(dir.keys.count == 0)
    }

    @Test func exactlyOneErrorIsLoggedPerFailedRead() throws {
        let dir = try VaultDirectory()
        try dir.vault().setSessionToken("abc", expiresAt: nil)
        dir.keys.removeAll()
        let log = LogCapture()
        let vault = try dir.vault(logger: log.logger)
        _ = vault.sessionToken()
        #expect(log.errors.count == 1, "\(log.errors)")
        #expect(log.errors.first?.contains("keyMissing") == true)
        #expect(log.errors.first?.contains("abc") == false)
    }
}

@Suite struct VaultKeyStoreTests {
    @Test func passphraseVaultOpensWithItsPassphraseOnlyAndWrongOneLeavesTheFileIntact() throws {
        let dir = try VaultDirectory()
        var configuration = Vault.Configuration(directory: dir.path)
        configuration.keyStore = .passphrase(SecretBytes(utf8: "correct horse"), cost: .insecureForTesting)
        try Vault(service: "srv", configuration: configuration).set("secret", for: "k")

        let right = try Vault(service: "srv", configuration: configuration)
        right.forgetKey()
        #expect(try right.string(for: "k") == "secret")

        let before = try dir.fileBytes("srv")
        configuration.keyStore = .passphrase(SecretBytes(utf8: "wrong horse"), cost: .insecureForTesting)
        let wrong = try Vault(service: "srv", configuration: configuration)
        wrong.forgetKey()
        expectVaultError(.wrongKey) { try wrong.string(for: "k") }
        #expect(wrong.sessionToken() == .unavailable(.wrongKey))
        #expect(try dir.fileBytes("srv") == before)
    }

    @Test func aVaultIsNeverOpenedWithAnotherKindOfKeyStore() throws {
        let dir = try VaultDirectory()
        try dir.vault().set("secret", for: "k")
        var configuration = Vault.Configuration(directory: dir.path)
        configuration.keyStore = .passphrase(SecretBytes(utf8: "pw"), cost: .insecureForTesting)
        let other = try Vault(service: "app", configuration: configuration)
        other.forgetKey()
        expectVaultError(.wrongKey) { try other.string(for: "k") }
        #expect(other.status().keyStore == "passphrase")
    }

    @Test func rotationKeepsEveryItemAndDeletesTheOldKey() throws {
        let dir = try VaultDirectory()
        let vault = try dir.vault()
        try vault.set("one", for: "a")
        try vault.setSessionToken("tok", expiresAt: nil)
        let oldIdentity = try #require(try vault.existingIdentity())
        try vault.rotateKey()
        let newIdentity = try #require(try vault.existingIdentity())
        #expect(newIdentity.vaultID == oldIdentity.vaultID)
        #expect(newIdentity.keyID != oldIdentity.keyID)
        #expect(dir.keys.count == 1)
        let reopened = try dir.vault()
        #expect(try reopened.string(for: "a") == "one")
        #expect(reopened.sessionToken() == .valid(token: "tok", expiresAt: nil))
        // The handle that rotated keeps working.
        try vault.set("two", for: "b")
        #expect(try dir.vault().string(for: "b") == "two")
    }
}

@Suite struct VaultPermissionTests {
    @Test(arguments: [0o750, 0o705, 0o777])
    func aDirectoryOthersCanReadIsRefused(_ mode: Int) throws {
        let dir = try VaultDirectory()
        try dir.vault().set("v", for: "k")
        chmod(dir.path, mode_t(mode))
        let vault = try dir.vault()
        expectVaultError(.permissionDenied) { try vault.string(for: "k") }
        #expect(vault.sessionToken() == .unavailable(.permissionDenied))
    }

    @Test(arguments: [0o640, 0o604, 0o644])
    func aFileOthersCanReadIsRefused(_ mode: Int) throws {
        let dir = try VaultDirectory()
        try dir.vault().set("v", for: "k")
        chmod(dir.path + "/app.prefs", mode_t(mode))
        expectVaultError(.permissionDenied) { try dir.vault().string(for: "k") }
    }

    @Test func aFileOfAnotherOwnerIsRefused() throws {
        let dir = try VaultDirectory()
        try dir.vault().set("v", for: "k")
        try #require(getuid() == 0, "only root can give a file away (make test runs as root)")
        chown(dir.path + "/app.prefs", 65534, 65534)
        expectVaultError(.permissionDenied) { try dir.vault().string(for: "k") }
    }

    /// Issue 14, point 5: a planted vault file is refused before its header is parsed (a header that is not a
    /// store's would otherwise answer `corrupted`).
    @Test func aVaultFileOfAnotherOwnerIsRefusedBeforeItsHeaderIsParsed() throws {
        try #require(getuid() == 0, "only root can give a file away (make test runs as root)")
        let dir = try VaultDirectory()
        try dir.vault().set("v", for: "k")
        try dir.writeFile([UInt8](repeating: 0x41, count: 8192))
        chown(dir.path + "/app.prefs", 65534, 65534)
        expectVaultError(.permissionDenied) { try dir.vault().string(for: "k") }
    }

    /// A vault lock file planted by another user (mode 0666) is refused before it is locked, and left as it was
    /// (it used to be chmod-ed to 0600 and used).
    @Test func aLockFileOfAnotherOwnerIsRefusedAndLeftAsItWas() throws {
        try #require(getuid() == 0, "only root can give a file away (make test runs as root)")
        let dir = try VaultDirectory()
        try dir.vault("other").set("v", for: "k")  // makes the directory
        let lock = dir.path + "/app.vault.lock"
        #expect(FileManager.default.createFile(atPath: lock, contents: Data()))
        chown(lock, 65534, 65534)
        chmod(lock, 0o666)
        let keysBefore = dir.keys.count
        expectVaultError(.permissionDenied) { try dir.vault().set("secret", for: "k") }
        var st = stat()
        #expect(stat(lock, &st) == 0 && st.st_mode & 0o7777 == 0o666 && st.st_uid == 65534)
        #expect(!FileManager.default.fileExists(atPath: dir.path + "/app.prefs"))
        #expect(dir.keys.count == keysBefore)
    }

    @Test(arguments: [0o640, 0o606])
    func aLockFileOthersMayUseIsRefused(_ mode: Int) throws {
        let dir = try VaultDirectory()
        try dir.vault("other").set("v", for: "k")
        let lock = dir.path + "/app.vault.lock"
        #expect(FileManager.default.createFile(atPath: lock, contents: Data()))
        chmod(lock, mode_t(mode))
        expectVaultError(.permissionDenied) { try dir.vault().set("secret", for: "k") }
        #expect(!FileManager.default.fileExists(atPath: dir.path + "/app.prefs"))
    }

    /// An intent journal planted by another user naming the vault's key for a wipe is refused before a line
    /// of it is read: the key and the file survive.
    @Test func anIntentJournalOfAnotherOwnerIsRefusedAndDeletesNothing() throws {
        try #require(getuid() == 0, "only root can give a file away (make test runs as root)")
        let dir = try VaultDirectory()
        let vault = try dir.vault()
        try vault.set("v", for: "k")
        let identity = try #require(try vault.existingIdentity())
        let journal = dir.path + "/app.vault.intent"
        try Data("wipe \(identity.vaultIDHex) \(identity.keyIDHex)\n".utf8).write(to: URL(fileURLWithPath: journal))
        chown(journal, 65534, 65534)
        chmod(journal, 0o600)
        let keysBefore = dir.keys.count
        expectVaultError(.permissionDenied) { try dir.vault().string(for: "k") }
        #expect(dir.keys.count == keysBefore)
        #expect(FileManager.default.fileExists(atPath: dir.path + "/app.prefs"))
        #expect(FileManager.default.fileExists(atPath: journal))
    }
}

@Suite struct VaultWipeTests {
    @Test func wipeRemovesFileAndKeyAndTheVaultStartsAfresh() throws {
        let dir = try VaultDirectory()
        let vault = try dir.vault()
        try vault.set("v", for: "k")
        try vault.wipe()
        #expect(!FileManager.default.fileExists(atPath: dir.path + "/app.prefs"))
        #expect(dir.keys.count == 0)
        #expect(try vault.string(for: "k") == nil)
        try vault.set("again", for: "k")
        #expect(try dir.vault().string(for: "k") == "again")
        #expect(dir.keys.count == 1)
    }

    @Test func wipeWorksWhenTheKeyIsAlreadyGone() throws {
        let dir = try VaultDirectory()
        try dir.vault().set("v", for: "k")
        dir.keys.removeAll()
        let vault = try dir.vault()
        #expect(vault.sessionToken() == .unavailable(.keyMissing))
        try vault.wipe()
        #expect(vault.sessionToken() == .absent)
    }
}


func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
    guard needle.count <= haystack.count else { return false }
    return (0...(haystack.count - needle.count)).contains { start in
        haystack[start..<start + needle.count].elementsEqual(needle)
    }
}

func mode(_ path: String) throws -> Int {
    var info = stat()
    guard stat(path, &info) == 0 else { throw CocoaError(.fileNoSuchFile) }
    return Int(info.st_mode & 0o777)
}

/// Expects `body` to throw a ``VaultError`` with `code`.
func expectVaultError<R>(
    _ code: VaultError.Code, sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> R
) {
    do {
        _ = try body()
        Issue.record("expected VaultError \(code), but the call succeeded", sourceLocation: sourceLocation)
    } catch let error as VaultError {
        #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
    } catch {
        Issue.record("expected VaultError \(code), got \(error)", sourceLocation: sourceLocation)
    }
}

@Suite struct VaultStaleHandleTests {
    @Test func aHandleOpenDuringAnotherHandlesWipeSeesAnEmptyVault() throws {
        let dir = try VaultDirectory()
        let app = try dir.vault()
        let tool = try dir.vault()
        try app.setSessionToken("tok", expiresAt: nil)
        #expect(app.sessionToken() == .valid(token: "tok", expiresAt: nil))
        try tool.wipe()
        #expect(app.sessionToken() == .absent)
        #expect(try app.string(for: "anything") == nil)
        try app.set("after", for: "k")
        #expect(try tool.string(for: "k") == "after")
    }

    @Test func aHandleOpenDuringAnotherHandlesRotationKeepsWorking() throws {
        let dir = try VaultDirectory()
        let app = try dir.vault()
        let tool = try dir.vault()
        try app.set("before", for: "k")
        #expect(try tool.string(for: "k") == "before")
        try tool.rotateKey()
        #expect(try app.string(for: "k") == "before")
        try app.set("after", for: "k")
        #expect(try tool.string(for: "k") == "after")
        #expect(dir.keys.count == 1)
    }
}

@Suite struct VaultConcurrencyTests {
    /// Threads writing and reading one vault while another rotates its key: no lost update, no torn read.
    @Test func threadsWritingWhileTheKeyRotatesLoseNothing() throws {
        let dir = try VaultDirectory()
        let vault = try dir.vault()
        try vault.set("seed", for: "seed")
        let writers = 4
        let writes = 40
        let failures = Mutex<[String]>([])
        DispatchQueue.concurrentPerform(iterations: writers + 1) { worker in
            do {
                if worker == writers {
                    for _ in 0..<8 { try vault.rotateKey() }
                    return
                }
                for i in 0..<writes {
                    try vault.set("w\(worker)-\(i)", for: "k\(worker)")
                    let read = try vault.string(for: "k\(worker)")
                    if read != "w\(worker)-\(i)" { failures.withLock { $0.append("k\(worker): read \(read ?? "nil")") } }
                }
            } catch {
                failures.withLock { $0.append("worker \(worker): \(error)") }
            }
        }
        #expect(failures.withLock { $0 } == [])
        let reopened = try dir.vault()
        for worker in 0..<writers {
            #expect(try reopened.string(for: "k\(worker)") == "w\(worker)-\(writes - 1)")
        }
        #expect(try reopened.string(for: "seed") == "seed")
        #expect(dir.keys.count == 1)
    }
}
