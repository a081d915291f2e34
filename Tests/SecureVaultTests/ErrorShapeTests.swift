import Glibc
import Testing

@testable import PrefsKV
@testable import SecureVault

/// `PrefsError` and `VaultError` have one shape (code, message, path, cause) and one description format.
@Suite struct ErrorShapeTests {
    struct SealerRefused: Error, CustomStringConvertible {
        var description: String { "sealer refused" }
    }

    @Test func bothErrorsDescribeThemselvesInOneFormatNamingTheCauseOnce() {
        // The system-call factory writes the errno into the message: the description does not repeat it.
        let disk = PrefsError(.diskFull, "cannot grow the store file: write failed (errno 28)", path: "/d", errno: 28)
        #expect("\(disk)" == "PrefsError.diskFull: cannot grow the store file: write failed (errno 28)")
        let sealed = PrefsError(.tampered, "a record does not open", path: "/d/ui.prefs", underlying: SealerRefused())
        #expect("\(sealed)" == "PrefsError.tampered: a record does not open (sealer refused)")
        let vault = VaultError(
            code: .permissionDenied, message: "vault 'app': cannot open", path: "/v", cause: .errno(13))
        #expect("\(vault)" == "VaultError.permissionDenied: vault 'app': cannot open (errno 13)")
        #expect("\(VaultError(code: .locked, message: "locked"))" == "VaultError.locked: locked")
    }

    @Test func aStorageErrorKeepsItsPathAndCauseInTheVaultError() {
        let disk = PrefsError(.diskFull, "cannot grow the store file", path: "/d/app.prefs", errno: ENOSPC)
        let wrapped = VaultError(disk, vault: "app")
        #expect(wrapped.code == .diskFull)
        #expect(wrapped.path == "/d/app.prefs")
        guard case .errno(let value)? = wrapped.cause else {
            Issue.record("no errno: \(wrapped)")
            return
        }
        #expect(value == ENOSPC)
        let sealed = VaultError(
            PrefsError(.tampered, "moved", path: "/d/app.prefs", underlying: SealerRefused()), vault: "app")
        guard case .error(let underlying)? = sealed.cause else {
            Issue.record("no underlying error: \(sealed)")
            return
        }
        #expect(underlying is SealerRefused)
    }
}
