// The only caller of Glibc file-system calls in SecureVault: permission checks and the vault's own lock file.
// (The vault's data file belongs to PrefsKV, which has its own wrappers.)
import Glibc

enum VaultSys {
    /// Owner and mode of a path, without following a final symbolic link.
    struct FileInfo {
        var owner: uid_t
        var mode: mode_t
        var isDirectory: Bool
        var isRegular: Bool
        var isSymbolicLink: Bool
    }

    // See: man 2 lstat
    static func lstat(_ path: String) -> Result<FileInfo, Errno> {
        var info = stat()
        while Glibc.lstat(path, &info) != 0 {
            if errno == EINTR { continue }
            return .failure(Errno(errno))
        }
        let type = info.st_mode & S_IFMT
        return .success(
            FileInfo(
                owner: info.st_uid, mode: info.st_mode & 0o7777, isDirectory: type == S_IFDIR,
                isRegular: type == S_IFREG, isSymbolicLink: type == S_IFLNK))
    }

    static var userID: uid_t { getuid() }

    /// Creates `path` (and missing parents) as directories with mode 0700; the umask cannot widen it, as the
    /// mode is set explicitly after creation.
    // See: man 2 mkdir, man 2 chmod
    static func makePrivateDirectory(_ path: String) -> Result<Void, Errno> {
        if mkdir(path, 0o700) != 0 {
            let error = errno
            if error == ENOENT, let slash = path.lastIndex(of: "/"), slash > path.startIndex {
                if case .failure(let parentError) = makePrivateDirectory(String(path[..<slash])) {
                    return .failure(parentError)
                }
                return makePrivateDirectory(path)
            }
            if error != EEXIST { return .failure(Errno(error)) }
            return .success(())
        }
        if chmod(path, 0o700) != 0 { return .failure(Errno(errno)) }
        return .success(())
    }

    /// Opens (creating with mode 0600) a lock file and takes an exclusive `flock` on it; closing the
    /// descriptor releases the lock.
    // See: man 2 open, man 2 flock
    static func lockFile(_ path: String) -> Result<Int32, Errno> {
        var fd: Int32
        repeat {
            fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        } while fd < 0 && errno == EINTR
        guard fd >= 0 else { return .failure(Errno(errno)) }
        _ = fchmod(fd, 0o600)
        while flock(fd, LOCK_EX) != 0 {
            if errno == EINTR { continue }
            let error = errno
            close(fd)
            return .failure(Errno(error))
        }
        return .success(fd)
    }

    static func unlock(_ fd: Int32) {
        close(fd)
    }

    // See: man 2 unlink
    static func unlink(_ path: String) -> Result<Void, Errno> {
        Glibc.unlink(path) == 0 || errno == ENOENT ? .success(()) : .failure(Errno(errno))
    }

    /// Whether anything exists at `path` (a symbolic link counts).
    static func exists(_ path: String) -> Bool {
        var info = stat()
        return Glibc.lstat(path, &info) == 0
    }

    /// The contents of a small file, nil when it cannot be read.
    static func readSmallFile(_ path: String, limit: Int = 64 * 1024) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: limit)
        var total = 0
        while total < limit {
            let n = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress! + total, limit - total) }
            if n < 0 {
                if errno == EINTR { continue }
                return nil
            }
            if n == 0 { break }
            total += n
        }
        return Array(bytes[0..<total])
    }

    /// Replaces `path` with `bytes` durably: a temporary file written and flushed, renamed over `path`, and
    /// the directory flushed, so after a crash the path holds either the old or the new contents.
    // See: man 2 fsync, man 2 rename
    static func writeFileDurably(_ path: String, _ bytes: [UInt8], directory: String) -> Result<Void, Errno> {
        let temporary = path + ".tmp"
        var fd: Int32
        repeat {
            fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o600)
        } while fd < 0 && errno == EINTR
        guard fd >= 0 else { return .failure(Errno(errno)) }
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + offset, bytes.count - offset) }
            if n < 0 {
                if errno == EINTR { continue }
                let error = errno
                close(fd)
                return .failure(Errno(error))
            }
            offset += n
        }
        if fsync(fd) != 0 {
            let error = errno
            close(fd)
            return .failure(Errno(error))
        }
        close(fd)
        guard rename(temporary, path) == 0 else { return .failure(Errno(errno)) }
        syncDirectory(directory)
        return .success(())
    }

    /// Flushes a directory's entries (after a rename or unlink in it).
    static func syncDirectory(_ directory: String) {
        let fd = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return }
        _ = fsync(fd)
        close(fd)
    }

    /// Names of the entries of a directory (without "." and "..").
    static func listDirectory(_ path: String) -> [String] {
        guard let dir = opendir(path) else { return [] }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(cString: raw.bindMemory(to: CChar.self).baseAddress!)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }
}

/// An errno value from a failed call.
struct Errno: Error, Equatable {
    var rawValue: Int32
    init(_ rawValue: Int32) { self.rawValue = rawValue }

    var description: String { String(cString: strerror(rawValue)) }
    var isPermission: Bool { rawValue == EACCES || rawValue == EPERM }
    var isDiskFull: Bool { rawValue == ENOSPC || rawValue == EDQUOT }
    var isNotFound: Bool { rawValue == ENOENT }
}
