// The one factory that maps a failed system call (an `Errno` from the system layer) to a VaultError, and the
// one check that a file the vault trusts is private to this user.
import SystemLayer

extension VaultError {
    /// A `VaultError` for a system call that failed with `error`; `message` reads as the start of a sentence
    /// ("vault 'app': cannot lock /path"), the error's text follows.
    static func syscall(_ error: Errno, _ message: String, path: String) -> VaultError {
        let code: VaultError.Code
        switch error {
        // See: man 2 open: EACCES (mode bits, a directory without search permission), EPERM (ownership rules).
        case .accessDenied, .notPermitted: code = .permissionDenied
        // See: man 2 open: ELOOP, with O_NOFOLLOW the last component is a symbolic link: a file planted in place of
        // one of ours, refused as a planted file of another owner is.
        case .symbolicLink: code = .permissionDenied
        // See: man 2 write: ENOSPC (device full), EDQUOT (quota).
        case .noSpace, .quotaExceeded: code = .diskFull
        default: code = .io
        }
        let refused = error == .symbolicLink ? "; \(path) is a symbolic link (or a loop of them), not a file: refusing it" : ""
        return VaultError(
            code: code, message: "\(message): \(error.text)\(refused)", path: path, cause: .errno(error.rawValue))
    }

    /// Throws `permissionDenied` unless `info` (the `fstat` or `lstat` of `path`) shows a file of this user
    /// that other users cannot read or write. `what` names the file ("vault file", "key file").
    static func requirePrivate(_ info: FileStatus, _ path: String, what: String) throws(VaultError) {
        try requireTrusted(
            info, path, what: what, rootMayOwn: false, forbiddenMode: 0o077, modeProblem: "other users may read it",
            fix: " (chmod go= \(path))")
    }

    /// Throws `permissionDenied` unless `info` shows a file of this user (or, with `rootMayOwn`, root) none of
    /// whose `forbiddenMode` bits are set; `modeProblem` says what a forbidden bit allows, `fix` how to mend it.
    static func requireTrusted(
        _ info: FileStatus, _ path: String, what: String, rootMayOwn: Bool, forbiddenMode: UInt32, modeProblem: String,
        fix: String = ""
    ) throws(VaultError) {
        guard info.owner == Sys.userID || (rootMayOwn && info.owner == 0) else {
            let expected =
                rootMayOwn ? "neither this user (uid \(Sys.userID)) nor root" : "not to this user (uid \(Sys.userID))"
            throw VaultError(
                code: .permissionDenied,
                message: "\(what) \(path) belongs to uid \(info.owner), \(expected); refusing to use it", path: path)
        }
        guard info.permissions & forbiddenMode == 0 else {
            throw VaultError(
                code: .permissionDenied,
                message: "\(what) \(path) has mode 0\(String(info.permissions, radix: 8)): \(modeProblem); "
                    + "refusing to use it\(fix)", path: path)
        }
    }
}

extension Vault {
    /// A `VaultError` for a system call that failed with `error` while doing `what` on `path` (the vault's
    /// directory, file, lock file or intent journal).
    ///
    /// `what` reads as the start of a sentence: "cannot lock".
    func fileError(_ error: Errno, _ what: String, _ path: String) -> VaultError {
        VaultError.syscall(error, "vault '\(service)': \(what) \(path)", path: path)
    }
}
