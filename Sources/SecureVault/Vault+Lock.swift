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

    /// ``withVaultLock(_:)``, or `body` alone when `skipping` (a dry run, which must create nothing).
    func withVaultLock<R>(unless skipping: Bool, _ body: () throws(VaultError) -> R) throws(VaultError) -> R {
        skipping ? try body() : try withVaultLock(body)
    }

    /// ``withVaultLock(_:)``, telling `body` whether this call created the vault's directory (on its way to the
    /// lock: a first write that failed in another process may have removed it meanwhile).
    func withVaultLockNotingDirectory<R>(
        _ body: (_ createdDirectory: Bool) throws(VaultError) -> R
    )
        throws(VaultError) -> R
    {
        let thread = Sys.threadID()
        if Self.lockHolders.withLock({ $0.contains(LockHolder(path: lockPath, thread: thread)) }) {
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
        let holder = LockHolder(path: lockPath, thread: thread)
        Self.lockHolders.withLock { $0.append(holder) }
        defer {
            Self.lockHolders.withLock { holders in
                if let index = holders.firstIndex(of: holder) { holders.remove(at: index) }
            }
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

    /// Which thread of this process holds each vault lock file. A list, not a dictionary: a process holds a
    /// few at most, and the first insert into a dictionary keyed by `String` costs a fresh process a search of
    /// the runtime's conformance records (about a fifth of its first vault access; Performance.md, issue 39).
    static let lockHolders = SanitizedMutex<[LockHolder]>([])
}

/// A vault lock file held by a thread of this process.
struct LockHolder: Equatable {
    let path: String
    let thread: UInt
}
