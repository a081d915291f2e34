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
            switch Sys.openLockFile(lockPath) {
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
