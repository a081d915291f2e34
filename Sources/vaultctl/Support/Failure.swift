import ArgumentParser
import PrefsKV
import SecureVault

/// A failure of vaultctl itself (bad input, a refused destructive command), with its contract code.
struct CLIFailure: Error {
    var code: String
    var message: String
    var exitCode: Int32

    /// Bad usage or input: exit 64.
    static func usage(_ message: String) -> CLIFailure {
        CLIFailure(code: "usage", message: message, exitCode: ExitStatus.usage)
    }

    /// No such store, vault, key or file: exit 66.
    static func notFound(_ message: String) -> CLIFailure {
        CLIFailure(code: "notFound", message: message, exitCode: ExitStatus.notFound)
    }

    /// A `wipe` without `--yes` (exit 64): `what` (`store "ui"`) and what a wipe would delete.
    static func wipeNeedsYes(_ what: String, deleting: String) -> CLIFailure {
        .usage("refusing to wipe \(what) without --yes: it deletes \(deleting); nothing was changed")
    }
}

extension CLIFailure {
    /// `error` restated: its code, `message` (naming what it was about) or its own, and the exit code of the
    /// table unless `exitCode` overrides it.
    init(_ error: PrefsError, message: String? = nil, exitCode: Int32? = nil) {
        self.init(
            code: error.code.description, message: message ?? error.message,
            exitCode: exitCode ?? ReportedFailure.exitCode(for: error.code))
    }
}

/// The exit codes of DESIGN.md section 5 (sysexits.h values).
enum ExitStatus {
    static let success: Int32 = 0
    static let usage: Int32 = 64
    static let dataError: Int32 = 65
    static let notFound: Int32 = 66
    static let unavailable: Int32 = 69
    static let ioError: Int32 = 74
    static let tryAgain: Int32 = 75
    static let permission: Int32 = 77
    static let keyProblem: Int32 = 78

    /// The table printed by `--help`.
    static let table = """
        Exit codes:
          0   success
          64  bad usage or invalid input (invalidKey, invalidValue, valueTooLarge, usage)
          65  data damaged, or verify found damage; or written by a newer release (corrupted, tampered,
              unsupportedVersion)
          66  no such store or key (notFound)
          69  key store unavailable: no Secret Service, no usable kernel keyring (unavailable)
          74  I/O failure: disk full, read-only (io, diskFull)
          75  keyring locked or access not approved, timed out, store busy or changed underneath: try again
              (locked, accessNotApproved, timeout, busy, changedUnderneath)
          77  permission denied or insecure permissions (permissionDenied)
          78  master key missing or wrong for existing data (keyMissing, wrongKey)
        """
}

/// An error as the contract reports it: `{"error": {"code": ..., "message": ...}}` and an exit code.
struct ReportedFailure {
    var code: String
    var message: String
    var exitCode: Int32

    init(_ error: any Error) {
        switch error {
        case let failure as CLIFailure:
            self.init(code: failure.code, message: failure.message, exitCode: failure.exitCode)
        case let error as VaultError:
            self.init(code: error.code.description, message: error.message, exitCode: Self.exitCode(for: error.code))
        case let error as PrefsError:
            self.init(code: error.code.description, message: error.message, exitCode: Self.exitCode(for: error.code))
        default:
            self.init(code: "internal", message: String(describing: error), exitCode: 70)
        }
    }

    init(code: String, message: String, exitCode: Int32) {
        self.code = code
        self.message = message
        self.exitCode = exitCode
    }

    static func exitCode(for code: VaultError.Code) -> Int32 {
        switch code {
        case .invalidKey, .invalidValue, .valueTooLarge, .unsupported: return ExitStatus.usage
        case .corrupted, .tampered, .unsupportedVersion: return ExitStatus.dataError
        case .notFound: return ExitStatus.notFound
        case .unavailable: return ExitStatus.unavailable
        case .io, .diskFull: return ExitStatus.ioError
        case .locked, .accessNotApproved, .timeout: return ExitStatus.tryAgain
        case .permissionDenied: return ExitStatus.permission
        case .keyMissing, .wrongKey: return ExitStatus.keyProblem
        default: return ExitStatus.ioError
        }
    }

    static func exitCode(for code: PrefsError.Code) -> Int32 {
        switch code {
        case .invalidKey, .valueTooLarge, .invalidInput, .typeMismatch, .notEncrypted: return ExitStatus.usage
        case .corrupted, .tampered, .notAStore, .unsupportedVersion: return ExitStatus.dataError
        case .notFound: return ExitStatus.notFound
        case .io, .diskFull, .readOnly: return ExitStatus.ioError
        case .busy, .changedUnderneath: return ExitStatus.tryAgain
        case .permissionDenied: return ExitStatus.permission
        case .wrongKey, .encrypted: return ExitStatus.keyProblem
        default: return ExitStatus.ioError
        }
    }

    /// `{"error": {"code": "notFound", "message": "..."}}`.
    var report: ErrorReport {
        ErrorReport(error: ErrorReport.Body(code: code, message: message))
    }
}

/// The JSON document of a failure.
struct ErrorReport: Encodable {
    struct Body: Encodable {
        var code: String
        var message: String
    }

    var error: Body
}
