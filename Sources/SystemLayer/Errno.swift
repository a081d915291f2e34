// The package's one errno type: every wrapper in `Sys` fails with it, and each module's error factory
// (`PrefsError+Syscall.swift`, `VaultError+Syscall.swift`) maps it to that module's public error.
import Glibc

/// An `errno` value returned by a failed system call.
///
/// ```swift
/// if case .failure(let e) = Sys.unlink(path), e != .noEntry { print(e.text) }
/// ```
///
/// Public for the `@inlinable` calls that return it (the lock page's mutex); its constants are `package`.
public struct Errno: Error, Equatable, Sendable {
    public var rawValue: Int32

    @inlinable
    public init(rawValue: Int32) { self.rawValue = rawValue }

    package static let noEntry = Errno(rawValue: ENOENT)
    package static let exists = Errno(rawValue: EEXIST)
    package static let wouldBlock = Errno(rawValue: EWOULDBLOCK)
    package static let noSpace = Errno(rawValue: ENOSPC)
    package static let timedOut = Errno(rawValue: ETIMEDOUT)
    package static let messageTooLong = Errno(rawValue: EMSGSIZE)
    /// The user's disk quota is used up.
    package static let quotaExceeded = Errno(rawValue: EDQUOT)
    /// Past RLIMIT_FSIZE or the file system's largest file.
    package static let fileTooLarge = Errno(rawValue: EFBIG)
    package static let readOnlyFileSystem = Errno(rawValue: EROFS)
    package static let accessDenied = Errno(rawValue: EACCES)
    package static let notPermitted = Errno(rawValue: EPERM)
    package static let interrupted = Errno(rawValue: EINTR)
    package static let isDirectory = Errno(rawValue: EISDIR)
    package static let notADirectory = Errno(rawValue: ENOTDIR)
    /// Not a system error: why a handle opened with `Configuration.readOnly` cannot write (no call returns it).
    package static let readOnlyByChoice = Errno(rawValue: -1)
    package static let noMemory = Errno(rawValue: ENOMEM)
    /// O_NOFOLLOW met a symbolic link.
    package static let symbolicLink = Errno(rawValue: ELOOP)
    // The kernel key retention service's.
    package static let noKey = Errno(rawValue: ENOKEY)
    package static let keyRevoked = Errno(rawValue: EKEYREVOKED)
    package static let keyExpired = Errno(rawValue: EKEYEXPIRED)
    package static let notSupported = Errno(rawValue: EOPNOTSUPP)
    package static let noSystemCall = Errno(rawValue: ENOSYS)
    package static let invalidArgument = Errno(rawValue: EINVAL)

    /// The C library's description, e.g. "No space left on device".
    package var text: String { String(cString: strerror(rawValue)) }

    /// The calling thread's `errno`, after a call that reported failure.
    static var current: Errno {
        let e = Errno(rawValue: errno)
        // EBADF/EFAULT mean a file descriptor or pointer of ours is wrong: a bug, not the environment.
        precondition(e.rawValue != EBADF && e.rawValue != EFAULT, "passed a bad descriptor or pointer to the system")
        return e
    }
}
