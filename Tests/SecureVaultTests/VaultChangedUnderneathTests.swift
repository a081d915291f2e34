import Foundation
import Glibc
import Testing

@testable import PrefsKV
@_spi(Testing) @testable import SecureVault

/// Issue 20: a vault's file changed underneath an open handle by something other than PrefsKV (an older copy
/// written over it in place, a truncation, another vault's file) never crashes the process and never answers a
/// value that was not written under the name asked for: the handle follows the file (an older copy's values are
/// values it had) or answers a typed error.
@Suite struct VaultChangedUnderneathTests {
    @Test func aVaultFileChangedUnderneathNeverCrashesNorAnswersAnotherItemsValue() throws {
        let dir = try VaultDirectory()
        let vault = try dir.vault()
        try vault.set("one", for: "a")
        try vault.set("two", for: "b")
        let older = try dir.fileBytes()
        try vault.set("three", for: "a")
        #expect(try vault.string(for: "a") == "three")
        let other = try dir.vault("other")
        try other.set("b of another vault", for: "b")

        // An older copy written over the file in place: the handle follows it.
        try dir.writeFile(older)
        #expect(try vault.string(for: "a") == "one")
        #expect(try vault.string(for: "b") == "two")

        // Truncated inside its log, then to its header page: no SIGBUS; a value it had, or a typed error.
        let path = dir.path + "/app.prefs"
        for length in [4096 + 256, 4096] {
            #expect(truncate(path, off_t(length)) == 0)
            do {
                let b = try vault.string(for: "b")
                #expect(b == nil || b == "two", "truncated to \(length): \(String(describing: b))")
            } catch let error as VaultError {
                #expect([.corrupted, .tampered].contains(error.code), "truncated to \(length): \(error)")
            }
        }

        // Another vault's file written over it: never that vault's value under this vault's name.
        try dir.writeFile(try dir.fileBytes("other"))
        do {
            let b = try vault.string(for: "b")
            #expect(b != "b of another vault")
        } catch let error as VaultError {
            #expect([.corrupted, .tampered, .wrongKey, .keyMissing].contains(error.code), "\(error)")
        }
    }
}
