// The one factory that maps a failed system call (an `Errno` from the system layer) to a PrefsError.
import SystemLayer

extension PrefsError {
    /// A `PrefsError` for the system call `call` that failed with `errno` while doing `what` on `path`.
    ///
    /// `what` reads as the start of a sentence: "cannot grow the store file".
    static func system(_ errno: Errno, _ call: String, _ what: String, path: String) -> PrefsError {
        let code: Code
        switch errno {
        // See: man 2 write, man 3 posix_fallocate: ENOSPC (device full), EDQUOT (quota), EFBIG (RLIMIT_FSIZE
        // or the file system's maximum size).
        case .noSpace, .quotaExceeded, .fileTooLarge: code = .diskFull
        // See: man 2 open: EROFS, a write access on a read-only file system. ETXTBSY cannot happen for us.
        case .readOnlyFileSystem, .readOnlyByChoice: code = .readOnly
        // See: man 2 open: EACCES (mode bits, a directory without search permission), EPERM (sealed or
        // immutable files, some file systems' ownership rules).
        case .accessDenied, .notPermitted: code = .permissionDenied
        // See: man 2 open: ENOENT, a component of the path does not exist.
        case .noEntry: code = .notFound
        // See: man 2 open: EISDIR, the store's path names a directory.
        case .isDirectory: code = .notAStore
        // See: man 2 flock, man 2 fcntl: the lock is held elsewhere.
        case .wouldBlock: code = .busy
        default: code = .io
        }
        var message = "\(what): \(call) failed: \(errno.text) (errno \(errno.rawValue))"
        if errno == .symbolicLink { message += "; symbolic links are refused" }
        return PrefsError(code, message, path: path, errno: errno.rawValue)
    }
}

extension Result where Failure == Errno {
    /// The success value, or a `PrefsError` built by ``PrefsError/system(_:_:_:path:)``.
    func orThrow(_ call: String, _ what: @autoclosure () -> String, path: String) throws(PrefsError) -> Success {
        switch self {
        case .success(let value): return value
        case .failure(let e): throw PrefsError.system(e, call, what(), path: path)
        }
    }
}
