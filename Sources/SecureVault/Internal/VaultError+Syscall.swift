// The one factory that maps a failed system call (an `Errno` from the system layer) to a VaultError.
import SystemLayer

extension Vault {
    /// A `VaultError` for a system call that failed with `error` while doing `what` on `path` (the vault's
    /// directory, file, lock file or intent journal).
    ///
    /// `what` reads as the start of a sentence: "cannot lock".
    func fileError(_ error: Errno, _ what: String, _ path: String) -> VaultError {
        let code: VaultError.Code
        switch error {
        // See: man 2 open: EACCES (mode bits, a directory without search permission), EPERM (ownership rules).
        case .accessDenied, .notPermitted: code = .permissionDenied
        // See: man 2 write: ENOSPC (device full), EDQUOT (quota).
        case .noSpace, .quotaExceeded: code = .diskFull
        default: code = .io
        }
        return VaultError(
            code: code, message: "vault '\(service)': \(what) \(path): \(error.text)", path: path,
            cause: .errno(error.rawValue))
    }
}
