// The lock owner of one store handle: the lock file and every lock taken on it.
//
// - The lock file `<id>.prefs.lock`: created 0600 once, never replaced (a read-only directory may have none).
// - The presence lock (an OFD lock on byte 0): shared by every handle that has the store open, exclusive for a
//   single-process handle and for a wipe that finds nobody else.
// - The open lock (`flock`): opens, wipes and lock-page set-ups take turns.
// - The writer lock: the lock page's robust mutex for multi-process handles (LockPage.swift), `flock` without
//   one.
// - Removing the lock file (a wipe that holds the presence lock exclusively).
//
// An open and a wipe take the lock file through the one sequence here (`acquire`). Not thread-safe: used under
// `PrefsStore.engine`'s Mutex (or by one wipe).
import SystemLayer

final class StoreLock {
    /// Who takes the lock file.
    enum Purpose {
        /// An open with this sharing mode: creates the directory when missing, opens read-only where it
        /// cannot write, takes the presence lock shared (exclusive for single-process). A `readOnly` open
        /// (``PrefsStore/Configuration/readOnly``) creates nothing, opens the lock file for reading (when there is
        /// one) and takes the presence lock shared: it is counted as a handle, never holds a lock page.
        case open(PrefsStore.Sharing, readOnly: Bool)
        /// A wipe: takes the presence lock exclusively when nobody else has the store open, shared otherwise.
        case destroy
    }

    let paths: StorePaths
    /// The store directory, open for `Sys.open(at:)`: the lock and data files are opened through it, so that
    /// the directory checked (`FileTrust.checkDirectory`) is the one they are in.
    let directoryFD: Int32
    /// The lock file, or -1 when a read-only directory has none.
    let fd: Int32
    /// The writer lock of a multi-process handle (a robust mutex in the lock file), nil when it uses `flock`:
    /// single-process handles, read-only ones, and handles that joined processes using `flock`.
    let lockPage: LockPage?
    let multiProcess: Bool
    /// Why the lock file could not be opened for writing (then the handle cannot write), nil when it could.
    let readOnlyCause: Errno?
    /// The lock file did not exist and this acquisition created it.
    let createdFile: Bool
    /// This handle holds the presence lock exclusively: no other handle has the store open.
    let holdsPresenceExclusively: Bool
    /// Set while this handle holds the writer lock (or the open lock that stands for it).
    @exclusivity(unchecked) var holdsWriterLock = false

    private init(
        paths: StorePaths, directoryFD: Int32, fd: Int32, lockPage: LockPage?, multiProcess: Bool, readOnlyCause: Errno?,
        createdFile: Bool, holdsPresenceExclusively: Bool
    ) {
        self.paths = paths
        self.directoryFD = directoryFD
        self.fd = fd
        self.lockPage = lockPage
        self.multiProcess = multiProcess
        self.readOnlyCause = readOnlyCause
        self.createdFile = createdFile
        self.holdsPresenceExclusively = holdsPresenceExclusively
    }

    /// Closing the lock file releases the presence lock and the open lock.
    deinit {
        if fd >= 0 { Sys.close(fd) }
        Sys.close(directoryFD)
    }

    // MARK: Acquiring

    /// Opens (creating when absent) the lock file and takes the presence lock and the open lock; an open of a
    /// multi-process handle that can write also sets up or joins the lock page. Returns holding the open lock:
    /// release it with `endOpenLock` (a wipe releases it by letting the lock go).
    static func acquire(paths: StorePaths, for purpose: Purpose) throws(PrefsError) -> StoreLock {
        var attempt = 0
        while true {
            if let lock = try acquireOnce(paths: paths, for: purpose) { return lock }
            // A wipe unlinked the lock file between our open(2) of it and our presence lock: start over with
            // the new one (the old descriptor is closed, releasing its locks).
            attempt += 1
            guard attempt <= 8 else {
                if case .destroy = purpose {
                    throw PrefsError(
                        .busy, "cannot remove the store: its lock file keeps being replaced", path: paths.lock)
                }
                throw PrefsError(.busy, "cannot open the store: its lock file keeps being replaced", path: paths.lock)
            }
        }
    }

    /// One try of `acquire`: nil when the lock file was replaced before it could be locked.
    private static func acquireOnce(paths: StorePaths, for purpose: Purpose) throws(PrefsError) -> StoreLock? {
        var isOpen = true
        var sharing = PrefsStore.Sharing.multiProcess
        var readOnly = false
        switch purpose {
        case .open(let mode, let asked):
            sharing = mode
            readOnly = asked
        case .destroy: isOpen = false
        }
        // The lock file: created 0600 once, never replaced; created when missing so that an opener racing with
        // a wipe locks the same file. When it exists (every open but the first) this is one open(2); the
        // directory is only looked at, and made (for an open), when the file is missing. Only an open may end
        // up without a writable lock file (a read-only directory).
        //
        // Everything is opened through the store directory's descriptor, checked first (`FileTrust`): nothing is
        // checked by path and then opened by path. (One open(2) and one fstat(2) more than by path.)
        let directoryFD = try openDirectory(paths, create: isOpen && !readOnly)
        var directoryOwned = false
        defer { if !directoryOwned { Sys.close(directoryFD) } }
        let name = paths.lockFileName
        var fd: Int32 = -1
        // A read-only open has a cause of its own (`Engine.readOnlyError` names it).
        var readOnlyCause: Errno? = readOnly ? .readOnlyByChoice : nil
        var created = false
        var opened = Sys.open(at: directoryFD, name, readOnly ? .readOnly : .readWrite)
        if readOnly {
            switch opened {
            case .success(let opened): fd = opened
            case .failure(let e) where e == .noEntry: break  // no lock file: no handle can be counted, none is
            case .failure(let e): throw PrefsError.system(e, "open", "cannot open the lock file", path: paths.lock)
            }
        } else if case .failure(let e) = opened, e == .noEntry {
            switch Sys.open(at: directoryFD, name, .createNew) {
            case .success(let fd):
                if case .failure(let e) = Sys.fchmod(fd, 0o600) {
                    Sys.close(fd)
                    throw PrefsError.system(e, "fchmod", "cannot set the lock file's mode", path: paths.lock)
                }
                created = true
                opened = .success(fd)
            case .failure(let e) where e == .exists:
                opened = Sys.open(at: directoryFD, name, .readWrite)  // another opener created it meanwhile
            case .failure(let e) where isOpen && isReadOnlyCause(e):
                readOnlyCause = e
            case .failure(let e):
                throw PrefsError.system(
                    e, "open", isOpen ? "cannot create the lock file" : "cannot open the lock file", path: paths.lock)
            }
        }
        if readOnlyCause == nil {
            switch opened {
            case .success(let opened): fd = opened
            case .failure(let e) where isOpen && isReadOnlyCause(e):
                readOnlyCause = e
                fd = (try? Sys.open(at: directoryFD, name, .readOnly).get()) ?? -1
            case .failure(let e): throw PrefsError.system(e, "open", "cannot open the lock file", path: paths.lock)
            }
        }
        // Until the lock owner is made, this function closes the lock file on failure.
        var owned = false
        defer { if !owned && fd >= 0 { Sys.close(fd) } }
        guard fd >= 0 else {
            owned = true
            directoryOwned = true
            return StoreLock(
                paths: paths, directoryFD: directoryFD, fd: -1, lockPage: nil, multiProcess: sharing == .multiProcess,
                readOnlyCause: readOnlyCause, createdFile: false, holdsPresenceExclusively: false)
        }

        // The presence lock: excludes a single-process handle from any other. An open asks for what its sharing
        // mode needs; a wipe for exclusive (nobody else: the lock file may then go too), else shared.
        var exclusive = isOpen ? sharing == .singleProcess && readOnlyCause == nil : true
        switch Sys.presenceLock(fd, exclusive: exclusive) {
        case .success: break
        case .failure(let e) where e == .wouldBlock && !isOpen:
            exclusive = false
            switch Sys.presenceLock(fd, exclusive: false) {
            case .success: break
            case .failure(let e) where e == .wouldBlock:
                throw PrefsError(
                    .busy, "cannot remove the store: a single-process handle holds it exclusively", path: paths.data)
            case .failure(let e):
                throw PrefsError.system(e, "fcntl(F_OFD_SETLK)", "cannot lock the store", path: paths.lock)
            }
        case .failure(let e) where e == .wouldBlock:
            throw PrefsError(
                .busy,
                exclusive
                    ? "cannot open the store for single-process use: another handle has it open"
                    : "cannot open the store: a single-process handle holds it exclusively",
                path: paths.data)
        case .failure(let e):
            throw PrefsError.system(e, "fcntl(F_OFD_SETLK)", "cannot lock the store", path: paths.lock)
        }
        // The open lock. A wipe unlinks the lock file while it holds the presence lock exclusively; a lock taken
        // after that on the unlinked file would exclude nobody. Holding the presence lock now, check that the
        // path still names our file (nil: start over). Its size, read under the open lock, tells whether a lock
        // page was set up.
        try Sys.lockExclusive(fd).orThrow("flock", "cannot take the writer lock", path: paths.lock)
        guard let status = currentLockFileStatus(fd, paths: paths) else { return nil }
        // The lock file's owner and mode, from the fstat just made: a lock file planted by another user is
        // refused before anything is written to it (the lock page's set-up below writes).
        // (A read-only open by choice is held to the rules of a handle that can write: its directory may be one
        // others can plant names in.)
        try FileTrust.checkFile(status, path: paths.lock, isData: false, writable: readOnlyCause == nil || readOnly)
        let size = status.size

        // The writer lock of a multi-process handle: the lock page's mutex, set up afresh when no other handle
        // has the store open and the page is not ready for use (checked under the open lock, so no handle can
        // appear before it is ready). A wipe joins a page that is ready and never sets one up.
        var lockPage: LockPage?
        if !isOpen {
            lockPage = try LockPage.open(fd: fd, path: paths.lock, fileSize: size, alone: false)
        } else if readOnlyCause == nil && sharing == .multiProcess {
            do throws(PrefsError) {
                let alone = try Sys.presenceAlone(fd).orThrow(
                    "fcntl(F_OFD_GETLK)", "cannot inspect the store's lock", path: paths.lock)
                lockPage = try LockPage.open(fd: fd, path: paths.lock, fileSize: size, alone: alone)
            } catch {
                Sys.unlock(fd)
                throw error
            }
        }
        owned = true
        directoryOwned = true
        return StoreLock(
            paths: paths, directoryFD: directoryFD, fd: fd, lockPage: lockPage, multiProcess: sharing == .multiProcess,
            readOnlyCause: readOnlyCause, createdFile: created, holdsPresenceExclusively: exclusive)
    }

    static func isReadOnlyCause(_ e: Errno) -> Bool {
        e == .readOnlyFileSystem || e == .accessDenied || e == .notPermitted
    }

    /// The status of the lock file `fd` when it is the file `paths.lock` names now, nil otherwise.
    private static func currentLockFileStatus(_ fd: Int32, paths: StorePaths) -> FileStatus? {
        guard case .success(let held) = Sys.fstat(fd), case .success(let named) = Sys.lstat(paths.lock),
            held.isSameFile(as: named)
        else { return nil }
        return held
    }

    /// Whether this handle's lock file is the file the lock path names now (not one a wipe unlinked, or a
    /// deleted directory took with it). True without a lock file.
    var isCurrent: Bool {
        fd < 0 || StoreLock.currentLockFileStatus(fd, paths: paths) != nil
    }

    /// Opens the store directory (creating it for an open when missing) and checks it (`FileTrust`).
    private static func openDirectory(_ paths: StorePaths, create: Bool) throws(PrefsError) -> Int32 {
        var opened = Sys.open(paths.directory, .directoryForLookups)
        if case .failure(let e) = opened, e == .noEntry, create {
            try StorePaths.ensureDirectory(paths.directory)
            opened = Sys.open(paths.directory, .directoryForLookups)
        }
        let fd: Int32
        switch opened {
        case .success(let f): fd = f
        case .failure(let e) where e == .noEntry && !create:
            throw PrefsError.system(e, "open", "cannot open the lock file", path: paths.lock)
        case .failure(let e):
            throw PrefsError.system(e, "open", "cannot open the store directory", path: paths.directory)
        }
        switch Sys.fstat(fd) {
        case .success(let status):
            do throws(PrefsError) {
                try FileTrust.checkDirectory(status, path: paths.directory)
            } catch {
                Sys.close(fd)
                throw error
            }
        case .failure(let e):
            Sys.close(fd)
            throw PrefsError.system(e, "fstat", "cannot inspect the store directory", path: paths.directory)
        }
        return fd
    }

    // MARK: The open lock

    /// Takes the lock page's mutex for an open that must change the data file; false without a lock page.
    func lockPageForOpen() throws(PrefsError) -> Bool {
        guard let lockPage else { return false }
        _ = try lockPage.lock(path: paths.lock)
        return true
    }

    /// Releases the locks taken for the open: the open lock, and the lock page's mutex when the open took it.
    func endOpenLock(pageLocked: Bool) {
        holdsWriterLock = false
        if pageLocked { lockPage?.unlock() }
        if fd >= 0 { Sys.unlock(fd) }
    }

    // MARK: The writer lock

    /// Whether `lockWriter` takes anything: a multi-process handle with a lock file.
    @inline(__always) var hasWriterLock: Bool { fd >= 0 && multiProcess }

    /// Takes the writer lock: the lock page's mutex, or `flock` without one. Returns true when the previous
    /// owner of the mutex had died holding it (its unfinished write is dropped by the file protocol).
    func lockWriter() throws(PrefsError) -> Bool {
        if lockPage != nil {
            // Unretained: this lock holds its page (a retain and a release were a sixth of taking it).
            let page = Unmanaged.passUnretained(lockPage.unsafelyUnwrapped)
            let locked = page._withUnsafeGuaranteedRef { page in Result { () throws(PrefsError) in try page.lock(path: paths.lock) } }
            return try locked.get()
        }
        try Sys.lockExclusive(fd).orThrow("flock", "cannot take the writer lock", path: paths.lock)
        return false
    }

    func unlockWriter() {
        if let lockPage { lockPage.unlock() } else { Sys.unlock(fd) }
    }

    /// Runs `body` under the writer lock, taking it unless this handle already holds it (or has none).
    /// `ownerDied` runs first when the previous owner had died holding it.
    func withWriterLock(
        ownerDied: () -> Void, _ body: () throws(PrefsError) -> Void
    ) throws(PrefsError) {
        if holdsWriterLock || !hasWriterLock {
            try body()
            return
        }
        if try lockWriter() { ownerDied() }
        holdsWriterLock = true
        defer {
            holdsWriterLock = false
            unlockWriter()
        }
        try body()
    }

    // MARK: A wipe

    /// A wipe's writer lock: the lock page's mutex when the page is set up (the open lock, held since
    /// `acquire`, excludes `flock` users).
    func lockPageForWipe() throws(PrefsError) {
        _ = try lockPage?.lock(path: paths.lock)
    }

    func unlockPageForWipe() {
        lockPage?.unlock()
    }

    /// Removes the lock file. Only while holding the presence lock exclusively: no handle is using it, and an
    /// opener that locks it after this sees that the path no longer names it (`isCurrent`).
    func removeFile() throws(PrefsError) {
        precondition(holdsPresenceExclusively, "the lock file is removed only by its only user")
        try Sys.unlink(paths.lock).orThrow("unlink", "cannot remove the lock file", path: paths.lock)
    }
}
