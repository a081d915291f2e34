// Whole-file helpers for a vault's small files: its lock file, its directory, its intent journal.
// (The store files themselves go through the engine's own calls in Sys.swift.)
import Glibc

extension Sys {
    /// Creates `path` (and missing parents) as directories with mode 0700; the umask cannot narrow it, as the
    /// mode is set explicitly after creation. An existing directory is left as it is. One removed between its
    /// creation and its mode's (another process's clean-up of an empty directory: a vault's failed first write) is
    /// made again, not reported as a failure of its own.
    // See: man 2 mkdir, man 2 chmod
    package static func makePrivateDirectory(_ path: String) -> Result<Void, Errno> {
        while true {
            switch mkdir(path, permissions: 0o700) {
            case .success:
                switch chmod(path, 0o700) {
                case .failure(let error) where error == .noEntry: continue  // removed meanwhile: make it again
                case let set: return set
                }
            case .failure(let error) where error == .noEntry:
                guard let slash = path.lastIndex(of: "/"), slash > path.startIndex else { return .failure(error) }
                if case .failure(let parentError) = makePrivateDirectory(String(path[..<slash])) {
                    return .failure(parentError)
                }
            case .failure(let error) where error == .exists:
                return .success(())
            case .failure(let error):
                return .failure(error)
            }
        }
    }

    /// Opens a lock file, creating it with mode 0600 when absent; an existing file is opened as it is (its mode
    /// untouched: the caller checks its owner and mode with `fstat` before it locks or uses it).
    // See: man 2 open
    package static func openLockFile(_ path: String) -> Result<Int32, Errno> {
        while true {
            switch open(path, .createNew) {
            case .success(let fd):
                _ = fchmod(fd, 0o600)
                return .success(fd)
            case .failure(let error) where error == .exists:
                switch open(path, .readWrite) {
                case .failure(let error) where error == .noEntry: continue  // removed meanwhile: create it
                case let opened: return opened
                }
            case .failure(let error):
                return .failure(error)
            }
        }
    }

    /// Removes `path`; a path that is already gone is a success.
    // See: man 2 unlink
    package static func removeIfPresent(_ path: String) -> Result<Void, Errno> {
        switch unlink(path) {
        case .failure(let error) where error != .noEntry: return .failure(error)
        default: return .success(())
        }
    }

    /// Removes the directory `path` when it is empty; anything else (not empty, gone, not ours) is left as it
    /// is and reported.
    // See: man 2 rmdir
    package static func removeDirectoryIfEmpty(_ path: String) -> Result<Void, Errno> {
        path.withCString { p in retrying { Glibc.rmdir(p) } }.map { _ in () }
    }

    /// Creates a new directory, mode 0700, named `<prefix>XXXXXX` (six random characters) in `$TMPDIR`, or `/tmp`
    /// when it is unset or empty; returns its path.
    // See: man 3 mkdtemp
    package static func makeTemporaryDirectory(prefix: String) -> Result<String, Errno> {
        var base = environment("TMPDIR") ?? ""
        if base.isEmpty { base = "/tmp" }
        if !base.hasSuffix("/") { base += "/" }
        var template = Array((base + prefix + "XXXXXX").utf8CString)
        let made = template.withUnsafeMutableBufferPointer { Glibc.mkdtemp($0.baseAddress!) }
        guard made != nil else { return .failure(Errno.current) }
        return .success(template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) })
    }

    /// `text` quoted for a POSIX shell when it needs to be: for commands printed in messages, which must run as
    /// printed.
    package static func shellQuoted(_ text: String) -> String {
        let plain =
            !text.isEmpty
            && text.utf8.allSatisfy { c in
                (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A)
                    || "-_./=:,+@%".utf8.contains(c)
            }
        return plain ? text : "'" + text.replacing("'", with: "'\\''") + "'"
    }

    /// Whether anything exists at `path` (a symbolic link counts).
    package static func exists(_ path: String) -> Bool {
        if case .success = lstat(path) { return true }
        return false
    }

    /// The contents of a small file, nil when it cannot be read (or is a symbolic link).
    package static func readSmallFile(_ path: String, limit: Int = 64 * 1024) -> [UInt8]? {
        guard case .success(let fd) = open(path, .readOnly) else { return nil }
        defer { close(fd) }
        return readSmallFile(fd, limit: limit)
    }

    /// The contents of the small file open as `fd` (read from its start), nil when it cannot be read.
    package static func readSmallFile(_ fd: Int32, limit: Int = 64 * 1024) -> [UInt8]? {
        var bytes = [UInt8](repeating: 0, count: limit)
        let read = bytes.withUnsafeMutableBytes { pread(fd, into: $0, at: 0) }
        guard case .success(let count) = read else { return nil }
        return Array(bytes[0..<count])
    }

    /// Replaces `path` with `bytes` durably: a temporary file written and flushed, renamed over `path`, and
    /// the directory flushed, so after a crash the path holds either the old or the new contents.
    // See: man 2 fsync, man 2 rename
    package static func writeFileDurably(_ path: String, _ bytes: [UInt8], directory: String) -> Result<Void, Errno> {
        let temporary = path + ".tmp"
        let fd: Int32
        // A new file of ours (O_EXCL): never one left, or planted, under the temporary name.
        if case .failure(let error) = removeIfPresent(temporary) { return .failure(error) }
        switch open(temporary, .createNew) {
        case .success(let opened): fd = opened
        case .failure(let error): return .failure(error)
        }
        let written = bytes.withUnsafeBytes { pwrite(fd, $0, at: 0) }.flatMap { quietSync(fd) }
        close(fd)
        if case .failure(let error) = written { return .failure(error) }
        if case .failure(let error) = rename(temporary, path) { return .failure(error) }
        syncDirectory(directory)
        return .success(())
    }

    /// Creates `path` holding `bytes` (mode 0600), durably and all at once, unless something already exists
    /// there: a uniquely named temporary file is written and flushed, then linked to `path` (link(2) never
    /// replaces), and the directory flushed. A crash leaves no partial file at `path`; of two processes
    /// publishing at once, one wins and the other gets `.exists` (and reads the winner's).
    // See: man 2 link
    package static func publishNew(_ path: String, _ bytes: UnsafeRawBufferPointer) -> Result<Void, Errno> {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        // Unique to this process and instant; O_EXCL refuses anything already there under the name.
        let temporary = path + ".new-\(getpid())-\(now.tv_sec)\(now.tv_nsec)"
        let fd: Int32
        switch open(temporary, .createNew) {
        case .success(let opened): fd = opened
        case .failure(let error): return .failure(error)
        }
        let written = fchmod(fd, 0o600).flatMap { pwrite(fd, bytes, at: 0) }.flatMap { quietSync(fd) }
        close(fd)
        defer { _ = removeIfPresent(temporary) }
        if case .failure(let error) = written { return .failure(error) }
        let linked = path.withCString { target in
            temporary.withCString { source in retrying { Glibc.link(source, target) } }
        }
        if case .failure(let error) = linked { return .failure(error) }
        syncDirectory(parentDirectory(of: path))
        return .success(())
    }

    /// Flushes a directory's entries (after a rename or unlink in it); a failure is ignored.
    package static func syncDirectory(_ directory: String) {
        guard case .success(let fd) = open(directory, .directory) else { return }
        _ = quietSync(fd)
        close(fd)
    }

    /// `fsync` without telling the ``FlushObserver``, which watches the store engine's barriers only.
    // See: man 2 fsync
    private static func quietSync(_ fd: Int32) -> Result<Void, Errno> {
        while Glibc.fsync(fd) != 0 {
            let error = Errno.current
            if error != .interrupted { return .failure(error) }
        }
        return .success(())
    }
}
