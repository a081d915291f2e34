// The package's system calls: files, locks, mappings, notifications, threads. PrefsKV, SecureVault and vaultctl
// reach Glibc only through this module (vaultctl's Support/Terminal.swift aside: a terminal's echo).
//
// Three layers, as in swift-system and NIOFS: the raw C call, a typed wrapper here that retries EINTR
// and returns `Result<_, Errno>`, and one factory per module (`PrefsError+Syscall.swift`,
// `VaultError+Syscall.swift`) that turns a failure into that module's error naming the file. EBADF and EFAULT
// are our bugs and trap; everything else is the world's.
import CPrefsKV
public import Glibc

/// What `fstat` or `lstat` tells about a file.
package struct FileStatus: Equatable {
    package var size: Int
    package var device: UInt64
    package var inode: UInt64
    /// The whole `st_mode`: file type and permission bits.
    package var mode: UInt32
    /// Names the file has: 0 once it was deleted, or renamed over, while open.
    package var links: UInt64 = 1
    /// The owner's user id.
    package var owner: UInt32 = 0
    /// The last change of the file's data or metadata (`st_ctim`, in nanoseconds): the kernel sets it, no call can
    /// set it back.
    package var changeTime: Int64 = 0

    /// Whether `other` is the same file (device and inode): two statuses of one file, or of one name at two times.
    package func isSameFile(as other: FileStatus) -> Bool { inode == other.inode && device == other.device }

    package init(size: Int, device: UInt64, inode: UInt64, mode: UInt32, links: UInt64 = 1, owner: UInt32 = 0) {
        self.size = size
        self.device = device
        self.inode = inode
        self.mode = mode
        self.links = links
        self.owner = owner
    }

    // S_IFMT, S_IFREG and S_IFDIR from <sys/stat.h>, as literals: Swift's Glibc module serves them
    // through functions of its own library, which a fresh process would bind and page in at its first open.
    package var isRegular: Bool { mode & 0o170000 == 0o100000 }
    package var isDirectory: Bool { mode & 0o170000 == 0o040000 }
    /// The permission bits (with set-id and sticky bits): `mode & 0o7777`.
    package var permissions: UInt32 { mode & 0o7777 }
}

/// Open flags used by the package. Every open adds O_CLOEXEC and O_NOFOLLOW.
package struct OpenMode {
    package var flags: Int32
    package static let readOnly = OpenMode(flags: O_RDONLY)
    /// Read-only without waiting: a FIFO or device planted where a small file is expected opens at once (and
    /// is then refused by its `fstat`), instead of blocking the open. Reads of a regular file ignore the flag.
    package static let readOnlyNonBlocking = OpenMode(flags: O_RDONLY | O_NONBLOCK)
    package static let readWrite = OpenMode(flags: O_RDWR)
    package static let createNew = OpenMode(flags: O_RDWR | O_CREAT | O_EXCL)
    package static let directory = OpenMode(flags: O_RDONLY | O_DIRECTORY)
    /// A directory to open files in (`Sys.open(at:)`) and `fstat`, nothing else: O_PATH | O_DIRECTORY, which
    /// needs no read permission on it (O_PATH as a literal: 010000000 on Linux).
    package static let directoryForLookups = OpenMode(flags: 0o10000000 | O_DIRECTORY)
}

/// The system calls the package makes, each retrying EINTR. Paths are passed with `withCString`, which hands a
/// native string's own bytes to the call (an implicit String-to-pointer conversion copies them into a new array).
///
/// Public only for the `@inlinable` members a hot path calls (see Sys+Process.swift); everything else is
/// `package`.
public enum Sys {
    /// Runs `call` until it does not fail with EINTR. `-1` means failure with `errno` set.
    ///
    /// `given`: the call is on a descriptor the process was handed (standard input, output, error), which its
    /// parent may have closed; EBADF is then the world's and is returned, not trapped as our bug.
    @inline(__always)
    static func retrying<T: FixedWidthInteger>(given: Bool = false, _ call: () -> T) -> Result<T, Errno> {
        while true {
            let r = call()
            if r != -1 { return .success(r) }
            let e = given ? Errno(rawValue: errno) : Errno.current
            if e != .interrupted { return .failure(e) }
        }
    }

    // See: man 2 open. O_NOFOLLOW: a symbolic link in the final component is refused (ELOOP).
    // Directories are opened without O_NOFOLLOW: a store directory may legitimately be reached through a link.
    // Files are opened with O_NOATIME: mapping a file otherwise updates its access time, a journaled inode
    // write on ext4 at nearly every open, for the data and the lock file alike; the flag is refused (EPERM) on
    // a file of another owner, which is then opened without it.
    package static func open(_ path: String, _ mode: OpenMode, permissions: UInt32 = 0o600) -> Result<Int32, Errno> {
        let isDirectory = mode.flags & O_DIRECTORY != 0
        let flags = mode.flags | O_CLOEXEC | (isDirectory ? 0 : O_NOFOLLOW)
        return path.withCString { cPath in
            if !isDirectory {
                switch retrying({ prefs_open(cPath, flags | prefs_o_noatime, permissions) }) {
                case .failure(let e) where e == .notPermitted: break  // not our file: without O_NOATIME
                case let r: return r
                }
            }
            return retrying { prefs_open(cPath, flags, permissions) }
        }
    }

    // See: man 2 openat. `open(_:_:permissions:)` for the file `name` in the directory `directory` (an open
    // descriptor, so that the directory checked through it is the one the file is opened in; `atWorkingDirectory`
    // resolves `name` as a path, as `open` does). O_CLOEXEC and O_NOFOLLOW (for files) as there.
    package static func open(
        at directory: Int32, _ name: String, _ mode: OpenMode, permissions: UInt32 = 0o600
    ) -> Result<Int32, Errno> {
        let isDirectory = mode.flags & O_DIRECTORY != 0
        let flags = mode.flags | O_CLOEXEC | (isDirectory ? 0 : O_NOFOLLOW)
        return name.withCString { cName in
            if !isDirectory {
                switch retrying({ prefs_openat(directory, cName, flags | prefs_o_noatime, permissions) }) {
                case .failure(let e) where e == .notPermitted: break  // not our file: without O_NOATIME
                case let r: return r
                }
            }
            return retrying { prefs_openat(directory, cName, flags, permissions) }
        }
    }

    /// `open(at:)`'s directory for a path resolved from the working directory (AT_FDCWD).
    package static var atWorkingDirectory: Int32 { -100 }

    // See: man 2 open. Read-only and following symbolic links, as any command-line tool opens a file its user
    // names (`vaultctl prefs import FILE`); the package's own files go through `open(_:_:permissions:)`.
    package static func openFollowingLinks(_ path: String, nonBlocking: Bool = false) -> Result<Int32, Errno> {
        let flags = O_RDONLY | O_CLOEXEC | (nonBlocking ? O_NONBLOCK : 0)
        return path.withCString { p in retrying { prefs_open(p, flags, 0) } }
    }

    // See: man 2 close. Never retried: on Linux the descriptor is released even when close fails.
    package static func close(_ fd: Int32) {
        _ = Glibc.close(fd)
    }

    // See: man 2 fstat
    package static func fstat(_ fd: Int32) -> Result<FileStatus, Errno> {
        status { Glibc.fstat(fd, $0) }
    }

    // See: man 2 lstat. Does not follow a final symbolic link.
    package static func lstat(_ path: String) -> Result<FileStatus, Errno> {
        path.withCString { p in status { Glibc.lstat(p, $0) } }
    }

    // See: man 2 stat, man 2 fstatat. Follows symbolic links: for a path a user named (vaultctl doctor's
    // directories). `fstatat` from the working directory without flags is `stat`, whose name Swift gives to
    // the structure.
    package static func stat(_ path: String) -> Result<FileStatus, Errno> {
        path.withCString { p in status { Glibc.fstatat(AT_FDCWD, p, $0, 0) } }
    }

    /// The `FileStatus` that `call` fills in, retried on EINTR.
    @inline(__always)
    private static func status(_ call: (UnsafeMutablePointer<Glibc.stat>) -> Int32) -> Result<FileStatus, Errno> {
        var st = Glibc.stat()
        return retrying { call(&st) }.map { _ in
            var status = FileStatus(
                size: Int(st.st_size), device: UInt64(st.st_dev), inode: UInt64(st.st_ino), mode: st.st_mode,
                links: UInt64(st.st_nlink), owner: st.st_uid)
            status.changeTime = Int64(st.st_ctim.tv_sec) &* 1_000_000_000 &+ Int64(st.st_ctim.tv_nsec)
            return status
        }
    }

    // See: man 2 fchmod. Applied after O_CREAT so the umask cannot widen or narrow the mode.
    package static func fchmod(_ fd: Int32, _ permissions: UInt32) -> Result<Void, Errno> {
        retrying { Glibc.fchmod(fd, mode_t(permissions)) }.map { _ in () }
    }

    // See: man 2 mkdir
    package static func mkdir(_ path: String, permissions: UInt32) -> Result<Void, Errno> {
        path.withCString { p in retrying { Glibc.mkdir(p, mode_t(permissions)) } }.map { _ in () }
    }

    // See: man 2 chmod
    package static func chmod(_ path: String, _ permissions: UInt32) -> Result<Void, Errno> {
        path.withCString { p in retrying { Glibc.chmod(p, mode_t(permissions)) } }.map { _ in () }
    }

    // See: man 2 ftruncate
    package static func ftruncate(_ fd: Int32, _ size: Int) -> Result<Void, Errno> {
        retrying { Glibc.ftruncate(fd, off_t(size)) }.map { _ in () }
    }

    // See: man 3 posix_fallocate. Returns the error number instead of setting errno; ENOSPC here is how a
    // full disk is noticed before any byte is written through the mapping (which would raise SIGBUS).
    package static func allocate(_ fd: Int32, offset: Int, length: Int) -> Result<Void, Errno> {
        while true {
            let r = Glibc.posix_fallocate(fd, off_t(offset), off_t(length))
            if r == 0 { return .success(()) }
            if r != EINTR {
                precondition(r != EBADF, "passed a bad descriptor to posix_fallocate")
                return .failure(Errno(rawValue: r))
            }
        }
    }

    // Writes zeros over `offset..<offset + length` with pwrite: for blocks `allocate` just gave, past every byte a
    // reader relies on (it overwrites whatever is there). posix_fallocate leaves its blocks unwritten (ext4, XFS: an
    // extent flag), so the first store into each block changes an extent, metadata that the next fdatasync must
    // commit through the file system's journal; a written block's fdatasync writes only the data. For files flushed
    // at every write (a `.synchronous` store); a store flushed rarely would pay the writes for nothing.
    package static func writeZeros(_ fd: Int32, offset: Int, length: Int) -> Result<Void, Errno> {
        guard length > 0 else { return .success(()) }
        let chunk = min(length, 64 * 1024)
        guard let zeros = Glibc.calloc(1, chunk) else { return .failure(Errno(rawValue: ENOMEM)) }
        defer { Glibc.free(zeros) }
        var done = 0
        while done < length {
            let count = min(chunk, length - done)
            if case .failure(let e) = pwrite(fd, UnsafeRawBufferPointer(start: zeros, count: count), at: offset + done) {
                return .failure(e)
            }
            done += count
        }
        return .success(())
    }

    // See: man 2 pread. Reads exactly `buffer.count` bytes unless the file ends first; returns the count.
    package static func pread(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: Int) -> Result<Int, Errno> {
        var done = 0
        while done < buffer.count {
            let r = retrying { Glibc.pread(fd, buffer.baseAddress! + done, buffer.count - done, off_t(offset + done)) }
            switch r {
            case .failure(let e): return .failure(e)
            case .success(0): return .success(done)
            case .success(let n): done += n
            }
        }
        return .success(done)
    }

    // See: man 2 pwrite. Writes all of `buffer` or fails (a short write is continued, ENOSPC is returned).
    package static func pwrite(_ fd: Int32, _ buffer: UnsafeRawBufferPointer, at offset: Int) -> Result<Void, Errno> {
        var done = 0
        while done < buffer.count {
            let r = retrying { Glibc.pwrite(fd, buffer.baseAddress! + done, buffer.count - done, off_t(offset + done)) }
            switch r {
            case .failure(let e): return .failure(e)
            case .success(let n): done += n
            }
        }
        return .success(())
    }

    // See: man 2 fdatasync. Flushes the file's data, including pages dirtied through a shared mapping.
    package static func fdatasync(_ fd: Int32) -> Result<Void, Errno> {
        if let injected = FlushObserver.injected(.flush, fd) { return .failure(injected) }
        return retrying { Glibc.fdatasync(fd) }.map { _ in FlushObserver.flushed(fd) }
    }

    // See: man 2 fsync. Used on directories, so that a rename or a new name reaches the disk.
    package static func fsync(_ fd: Int32) -> Result<Void, Errno> {
        if let injected = FlushObserver.injected(.flush, fd) { return .failure(injected) }
        return retrying { Glibc.fsync(fd) }.map { _ in FlushObserver.flushed(fd) }
    }

    // See: man 2 rename. Atomic replacement of `to` within one file system.
    package static func rename(_ from: String, _ to: String) -> Result<Void, Errno> {
        from.withCString { f in to.withCString { t in retrying { Glibc.rename(f, t) } } }.map { _ in () }
    }

    // See: man 2 renameat2 (RENAME_EXCHANGE). `a` and `b` trade names in one step; both must exist. EINVAL: the file
    // system cannot exchange names.
    package static func exchange(_ a: String, _ b: String) -> Result<Void, Errno> {
        a.withCString { x in b.withCString { y in retrying { prefs_rename_exchange(x, y) } } }.map { _ in () }
    }

    // See: man 2 link. A second name for an existing file (never following a symbolic link in `from`); fails with
    // EEXIST when `to` exists.
    package static func link(_ from: String, _ to: String) -> Result<Void, Errno> {
        from.withCString { f in to.withCString { t in retrying { Glibc.link(f, t) } } }.map { _ in () }
    }

    // See: man 2 unlink
    package static func unlink(_ path: String) -> Result<Void, Errno> {
        path.withCString { p in retrying { Glibc.unlink(p) } }.map { _ in () }
    }

    // See: man 3 opendir, man 3 readdir. The names in `path` (without "." and ".."), unsorted. readdir
    // reports an error by returning NULL with errno changed, so errno is cleared before each call.
    package static func directoryEntries(_ path: String) -> Result<[String], Errno> {
        guard let directory = Glibc.opendir(path) else { return .failure(Errno.current) }
        defer { _ = Glibc.closedir(directory) }
        var names: [String] = []
        while true {
            errno = 0
            guard let entry = Glibc.readdir(directory) else {
                return errno == 0 ? .success(names) : .failure(Errno.current)
            }
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
    }

    // See: man 2 flock. The writer lock: LOCK_EX around a write transaction, on the never-replaced lock file.
    package static func lockExclusive(_ fd: Int32) -> Result<Void, Errno> {
        retrying { flock(fd, LOCK_EX) }.map { _ in () }
    }

    // See: man 2 flock. A shared lock (a vault's directory while its lock file is opened or made).
    package static func lockShared(_ fd: Int32) -> Result<Void, Errno> {
        retrying { flock(fd, LOCK_SH) }.map { _ in () }
    }

    // See: man 2 flock
    package static func unlock(_ fd: Int32) {
        _ = retrying { flock(fd, LOCK_UN) }
    }

    /// F_OFD_SETLK from <fcntl.h> (Linux 3.15+), which Swift's Glibc module does not export.
    private static let fOFDSetLock: Int32 = 37

    // See: man 2 fcntl, "Open file description locks". The presence lock on byte 0 of the lock file: shared
    // for a multi-process handle, exclusive for a single-process one, held for the handle's lifetime and
    // independent of flock. Conflicts report EWOULDBLOCK (EAGAIN) or EACCES.
    package static func presenceLock(_ fd: Int32, exclusive: Bool) -> Result<Void, Errno> {
        var request = oneByte(exclusive ? F_WRLCK : F_RDLCK, at: 0)
        let r = retrying { prefs_fcntl_lock(fd, fOFDSetLock, &request) }
        switch r {
        case .success: return .success(())
        case .failure(let e) where e == .accessDenied || e.rawValue == EAGAIN: return .failure(.wouldBlock)
        case .failure(let e): return .failure(e)
        }
    }

    /// F_OFD_SETLKW from <fcntl.h>.
    private static let fOFDSetLockWait: Int32 = 38

    // See: man 2 fcntl, "Open file description locks". A lock on the byte at `offset` of a store's data file,
    // waited for: exclusive while a `.synchronous` writer's flush and publish are in flight, shared while an open
    // reads the words that tell whether one is (StoreLog.publish, StoreLog.scan).
    package static func byteLock(_ fd: Int32, at offset: Int, exclusive: Bool) -> Result<Void, Errno> {
        if let injected = FlushObserver.injected(.byteLock, fd) { return .failure(injected) }
        var request = oneByte(exclusive ? F_WRLCK : F_RDLCK, at: offset)
        return retrying { prefs_fcntl_lock(fd, fOFDSetLockWait, &request) }.map { _ in () }
    }

    /// Releases `byteLock`.
    package static func byteUnlock(_ fd: Int32, at offset: Int) {
        var request = oneByte(F_UNLCK, at: offset)
        _ = retrying { prefs_fcntl_lock(fd, fOFDSetLock, &request) }
    }

    /// An open file description lock request of `type` (F_RDLCK, F_WRLCK, F_UNLCK) on the one byte at `offset`.
    private static func oneByte(_ type: Int32, at offset: Int) -> flock {
        var request = flock()
        request.l_type = Int16(type)
        request.l_whence = Int16(SEEK_SET)
        request.l_start = off_t(offset)
        request.l_len = 1
        request.l_pid = 0
        return request
    }

    /// The C library's mutex, as laid out in a lock page (LockPage.swift).
    public typealias Mutex = pthread_mutex_t

    /// F_OFD_GETLK from <fcntl.h>.
    private static let fOFDGetLock: Int32 = 36

    // See: man 2 fcntl, F_OFD_GETLK. Whether an exclusive presence lock could be taken now, that is whether no
    // other open file description (any handle, in this process or another) holds the presence byte. Takes
    // nothing.
    package static func presenceAlone(_ fd: Int32) -> Result<Bool, Errno> {
        var request = oneByte(F_WRLCK, at: 0)
        return retrying { prefs_fcntl_lock(fd, fOFDGetLock, &request) }.map { _ in request.l_type == Int16(F_UNLCK) }
    }

    // See: man 2 ftruncate
    package static func truncate(_ fd: Int32, length: Int) -> Result<Void, Errno> {
        retrying { Glibc.ftruncate(fd, off_t(length)) }.map { _ in () }
    }

    // See: man 3 pthread_mutexattr_setrobust, pthread_mutexattr_setpshared. Initializes a mutex that other
    // processes mapping the same file can use, and that the next locker can recover when its owner dies.
    package static func initializeRobustSharedMutex(_ mutex: UnsafeMutablePointer<Mutex>) -> Result<Void, Errno> {
        var attributes = pthread_mutexattr_t()
        guard pthread_mutexattr_init(&attributes) == 0 else { return .failure(Errno(rawValue: ENOMEM)) }
        defer { pthread_mutexattr_destroy(&attributes) }
        var rc = pthread_mutexattr_setpshared(&attributes, Int32(PTHREAD_PROCESS_SHARED))
        if rc == 0 { rc = pthread_mutexattr_setrobust(&attributes, Int32(PTHREAD_MUTEX_ROBUST)) }
        if rc == 0 { rc = pthread_mutex_init(mutex, &attributes) }
        return rc == 0 ? .success(()) : .failure(Errno(rawValue: rc))
    }

    // See: man 3 pthread_mutex_lock, pthread_mutex_consistent. Returns true when the previous owner died holding
    // the mutex (EOWNERDEAD); the mutex is then marked consistent again and is held by the caller.
    // Inlinable: a multi-process handle's write takes it.
    @inlinable
    public static func lockRobustMutex(_ mutex: UnsafeMutablePointer<Mutex>) -> Result<Bool, Errno> {
        switch pthread_mutex_lock(mutex) {
        case 0: return .success(false)
        case EOWNERDEAD:
            let rc = pthread_mutex_consistent(mutex)
            return rc == 0 ? .success(true) : .failure(Errno(rawValue: rc))
        case let rc: return .failure(Errno(rawValue: rc))
        }
    }

    // See: man 3 pthread_mutex_unlock. EPERM (not the owner) is our bug.
    @inlinable
    public static func unlockMutex(_ mutex: UnsafeMutablePointer<Mutex>) {
        let rc = pthread_mutex_unlock(mutex)
        precondition(rc == 0, "pthread_mutex_unlock failed: \(rc)")
    }

    // See: man 2 mmap. MAP_SHARED: stores reach the file (and other processes' mappings).
    package static func map(_ fd: Int32, length: Int, writable: Bool) -> Result<UnsafeMutableRawPointer, Errno> {
        let protection = writable ? (PROT_READ | PROT_WRITE) : PROT_READ
        let p = Glibc.mmap(nil, length, protection, MAP_SHARED, fd, 0)
        // MAP_FAILED is (void *)-1 (a function of the Glibc module's library in Swift).
        if p == UnsafeMutableRawPointer(bitPattern: -1) || p == nil { return .failure(Errno.current) }
        return .success(p!)
    }

    // See: man 2 munmap
    package static func unmap(_ base: UnsafeMutableRawPointer, length: Int) {
        _ = Glibc.munmap(base, length)
    }

    // See: man 7 inotify. Non-blocking: the reader drains events when the descriptor is readable.
    package static func inotifyOpen() -> Result<Int32, Errno> {
        retrying { Glibc.inotify_init1(Int32(IN_CLOEXEC | IN_NONBLOCK)) }
    }

    /// Watches `directory` for a file modified (`pwrite`), closed after writing, or renamed into place.
    package static func inotifyWatch(_ fd: Int32, directory: String) -> Result<Void, Errno> {
        let mask = UInt32(IN_MODIFY | IN_MOVED_TO | IN_CLOSE_WRITE | IN_CREATE)
        return retrying { Glibc.inotify_add_watch(fd, directory, mask) }.map { _ in () }
    }

    /// Watches the very file open as `fileDescriptor` (through its /proc/self/fd link, so the inode we hold and
    /// not whatever the path names now) for a change of its link count (`IN_ATTRIB`: unlinked, or replaced by a
    /// rename over it), a move, or its deletion. Returns the watch descriptor.
    package static func inotifyWatchLinks(_ fd: Int32, fileDescriptor: Int32) -> Result<Int32, Errno> {
        let mask = UInt32(IN_ATTRIB | IN_MOVE_SELF | IN_DELETE_SELF)
        return retrying { Glibc.inotify_add_watch(fd, "/proc/self/fd/\(fileDescriptor)", mask) }
    }

    // See: man 2 inotify_rm_watch
    package static func inotifyRemoveWatch(_ fd: Int32, _ watch: Int32) {
        _ = Glibc.inotify_rm_watch(fd, watch)
    }

    /// Waits until `fd` is readable (or fails with something other than EINTR).
    // See: man 2 poll
    package static func waitReadable(_ fd: Int32) -> Bool {
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        while true {
            let n = Glibc.poll(&entry, 1, -1)
            if n > 0 { return true }
            if n < 0 && errno != EINTR { return false }
        }
    }

    /// Runs `body` on a new detached thread (no Dispatch: its worker pool allocates at times of its choosing).
    // See: man 3 pthread_detach
    package static func detachThread(_ body: @escaping @Sendable () -> Void) -> Bool {
        guard let started = startThread(body) else { return false }
        pthread_detach(started.thread)
        return true
    }

    /// A thread `startThread` started, to be waited for with `join` (exactly once).
    package struct JoinableThread: @unchecked Sendable {
        fileprivate let thread: pthread_t
    }

    /// Runs `body` on a new thread that `join` waits for; nil when no thread can be started.
    // See: man 3 pthread_create, man 3 pthread_join
    package static func startThread(_ body: @escaping @Sendable () -> Void) -> JoinableThread? {
        let context = Unmanaged.passRetained(ThreadBody(body)).toOpaque()
        var thread = pthread_t()
        let status = pthread_create(
            &thread, nil,
            { context in
                Unmanaged<ThreadBody>.fromOpaque(context!).takeRetainedValue().body()
                return nil
            }, context)
        guard status == 0 else {
            Unmanaged<ThreadBody>.fromOpaque(context).release()
            return nil
        }
        return JoinableThread(thread: thread)
    }

    /// Waits for a thread `startThread` started to return.
    package static func join(_ thread: JoinableThread) {
        let status = pthread_join(thread.thread, nil)
        precondition(status == 0, "joined a thread twice, or one startThread did not start")
    }

    /// One inotify event: the watch it came from and, for a directory watch, the file name it concerns.
    package struct InotifyEvent {
        package var watch: Int32
        package var name: String?
    }

    /// Reads every pending inotify event into `buffer` (at least 4 KiB) and passes each one's watch descriptor
    /// and raw name bytes to `body`. Allocates nothing; returns at once when nothing is pending (the descriptor
    /// is non-blocking).
    package static func inotifyRead(
        _ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, _ body: (Int32, UnsafeRawBufferPointer) -> Void
    ) {
        while true {
            let n = Glibc.read(fd, buffer.baseAddress!, buffer.count)
            if n <= 0 { break }
            inotifyDecode(UnsafeRawBufferPointer(buffer), count: n, body)
        }
    }

    /// Decodes `count` bytes of inotify events: each one's watch descriptor and name bytes (up to its NUL).
    package static func inotifyDecode(
        _ buffer: UnsafeRawBufferPointer, count: Int, _ body: (Int32, UnsafeRawBufferPointer) -> Void
    ) {
        let headerSize = MemoryLayout<inotify_event>.size
        var offset = 0
        while offset + headerSize <= count {
            let watch = buffer.load(fromByteOffset: offset, as: Int32.self)
            let nameLength = Int(buffer.load(fromByteOffset: offset + 12, as: UInt32.self))
            let start = buffer.baseAddress! + offset + headerSize
            var length = 0
            while length < nameLength && start.load(fromByteOffset: length, as: UInt8.self) != 0 { length += 1 }
            body(watch, UnsafeRawBufferPointer(start: start, count: length))
            offset += headerSize + nameLength
        }
    }

    /// The size of an inotify event without its name.
    package static let inotifyEventHeaderSize = MemoryLayout<inotify_event>.size

    /// Reads every pending inotify event (none when nothing is pending: the descriptor is non-blocking).
    package static func inotifyDrain(_ fd: Int32) -> [InotifyEvent] {
        var events: [InotifyEvent] = []
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 4096, alignment: 8)
        defer { buffer.deallocate() }
        inotifyRead(fd, into: buffer) { watch, name in
            events.append(InotifyEvent(watch: watch, name: name.isEmpty ? nil : String(decoding: name, as: UTF8.self)))
        }
        return events
    }
}

/// The closure a detached thread runs.
package final class ThreadBody: Sendable {
    package let body: @Sendable () -> Void
    package init(_ body: @escaping @Sendable () -> Void) { self.body = body }
}
