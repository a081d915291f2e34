import SystemLayer

extension Vault {
    /// Runs `body` holding the vault's lock file (creation, rotation, wipe and encrypted-store set-up hold it).
    /// Re-entrant on one thread: `flock` on a second descriptor of the same file would wait on ourselves.
    ///
    /// A wipe removes the lock file (nothing of the vault remains); whoever was waiting on it then holds a lock
    /// on a file no longer there, so a lock is kept only when the path still names the locked file, and taken
    /// again on the new one otherwise.
    func withVaultLock<R>(_ body: () throws(VaultError) -> R) throws(VaultError) -> R {
        try withVaultLockNotingDirectory { (_: Bool) throws(VaultError) -> R in try body() }
    }

    /// ``withVaultLock(_:)`` for a call that may write the vault's first file (an adoption, encrypted preferences'
    /// key): when `body` fails and the vault still has no file, the directory and lock file this call's lock made
    /// are removed, still under the lock, as a failed first write's are.
    func withVaultLockLeavingNothingOnFailure<R>(_ body: () throws(VaultError) -> R) throws(VaultError) -> R {
        try withVaultLockNotingDirectory { (madeDirectory: Bool) throws(VaultError) -> R in
            do throws(VaultError) {
                return try body()
            } catch {
                if madeDirectory, !Sys.exists(path) { removeFirstWriteLeftovers() }
                throw error
            }
        }
    }

    /// ``withVaultLock(_:)``, telling `body` whether this call created the vault's directory (on its way to the
    /// lock: a first write that failed in another process may have removed it meanwhile).
    func withVaultLockNotingDirectory<R>(
        _ body: (_ createdDirectory: Bool) throws(VaultError) -> R
    )
        throws(VaultError) -> R
    {
        let thread = Sys.threadID()
        let lockPath = lockPath
        if Self.lockHolders.withLock({ $0?.contains(path: lockPath, thread: thread) ?? false }) {
            return try body(false)
        }
        var locked: Int32?
        var createdDirectory = false
        while locked == nil {
            // On every pass: a first write that failed removes the directory it made, with its lock file.
            if try checkDirectory(create: true) { createdDirectory = true }
            let fd: Int32
            switch openLockFileInDirectory() {
            case .success(let opened): fd = opened
            case .failure(let error) where error == .noEntry: continue  // the directory went meanwhile: again
            case .failure(let error): throw fileError(error, "cannot lock", lockPath)
            }
            // A lock file planted by another user, or one others may use, is refused before it is locked.
            do throws(VaultError) {
                let info: FileStatus
                switch Sys.fstat(fd) {
                case .success(let found): info = found
                case .failure(let error): throw fileError(error, "cannot inspect", lockPath)
                }
                try checkOwnership(info, lockPath, what: "vault lock file")
                if case .failure(let error) = Sys.lockExclusive(fd) { throw fileError(error, "cannot lock", lockPath) }
                if case .success(let now) = Sys.lstat(lockPath), now.device == info.device, now.inode == info.inode {
                    locked = fd
                } else {
                    Sys.close(fd)  // removed by a wipe while we waited: lock the file there now
                }
            } catch {
                Sys.close(fd)
                throw error
            }
        }
        let fd = locked!
        Self.lockHolders.withLock { holders in holders = LockHolder(path: lockPath, thread: thread, next: holders) }
        defer {
            Self.lockHolders.withLock { holders in holders = holders?.removing(path: lockPath, thread: thread) }
            Sys.close(fd)
        }
        return try body(createdDirectory)
    }

    /// Opens the vault's lock file, making it when absent, under a shared `flock` of the vault's directory: a first
    /// write that failed removes its lock file and then its directory under an exclusive one
    /// (`removeFirstWriteLeftovers`), so that no lock file is made between the two removals in a directory about to
    /// go. (One was, by a process waiting for the same first write: the directory stayed, with its lock file, and the
    /// waiter, which had not made it, left it behind when its own first write failed; seen once in a loaded run of
    /// NothingLeftBehindTests.) `.noEntry` when the directory is gone, or was replaced while this waited for its
    /// lock (a lock held on a removed directory keeps nobody out of the new one): the caller makes it again. A
    /// directory that cannot be opened for the lock (never ours: `checkDirectory` made or checked it) is passed
    /// over.
    private func openLockFileInDirectory() -> Result<Int32, Errno> {
        let directory: Int32
        switch Sys.open(storeDirectory, .directory) {
        case .success(let opened): directory = opened
        case .failure(let error) where error == .noEntry: return .failure(error)
        case .failure: return Sys.openLockFile(lockPath)
        }
        defer { Sys.close(directory) }  // releases the shared lock
        _ = Sys.lockShared(directory)
        guard case .success(let locked) = Sys.fstat(directory), case .success(let named) = Sys.lstat(storeDirectory),
            locked.device == named.device, locked.inode == named.inode
        else { return .failure(.noEntry) }
        return Sys.openLockFile(lockPath)
    }

    /// Removes the lock file and the directory a first write that failed made, while it holds the vault lock: under
    /// an exclusive `flock` of the directory (see `openLockFileInDirectory`). The directory goes only when empty.
    func removeFirstWriteLeftovers() {
        let directory = Sys.open(storeDirectory, .directory)
        if case .success(let fd) = directory { _ = Sys.lockExclusive(fd) }
        defer { if case .success(let fd) = directory { Sys.close(fd) } }
        _ = Sys.removeIfPresent(lockPath)
        _ = Sys.removeDirectoryIfEmpty(storeDirectory)
    }

    /// Which thread of this process holds each vault lock file: a chain, newest first. Not a dictionary nor an
    /// array: a process holds a few at most, and a fresh process's first dictionary of a new key type, or first
    /// array of a new element type, costs it the runtime's instantiation of that type from its mangled name (a
    /// fifth of its first vault access for the dictionary; PerformanceIssues36-39.md, issue 39).
    static let lockHolders = SanitizedMutex<LockHolder?>(nil)
}

/// A vault lock file held by a thread of this process, and the holders recorded before it (`Vault.lockHolders`).
/// A chain is never changed in place: a removal copies the nodes before the one it drops.
final class LockHolder: Sendable {
    let path: String
    let thread: UInt
    let next: LockHolder?

    init(path: String, thread: UInt, next: LockHolder?) {
        self.path = path
        self.thread = thread
        self.next = next
    }

    /// Whether this chain records `thread` holding the lock file `path`.
    func contains(path: String, thread: UInt) -> Bool {
        var node: LockHolder? = self
        while let holder = node {
            if holder.thread == thread && holder.path == path { return true }
            node = holder.next
        }
        return false
    }

    /// This chain without the node of `thread` holding `path` (there is one at most: a thread that holds a lock file
    /// takes it again without a node). By value, not by identity: the node recorded may since have been copied by
    /// the removal of a node recorded after it.
    func removing(path: String, thread: UInt) -> LockHolder? {
        if self.thread == thread && self.path == path { return next }
        guard let next else { return self }
        let rest = next.removing(path: path, thread: thread)
        return rest === next ? self : LockHolder(path: self.path, thread: self.thread, next: rest)
    }
}
