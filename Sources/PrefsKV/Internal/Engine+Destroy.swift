// Removing a store from the disk (vaultctl's `prefs wipe`), safely against handles that have it open.
//
// The data file is retired the way a compaction retires it: under the writer lock its superseded word is set
// before its name goes away, so every other handle notices on its next access, takes the writer lock, finds
// no file under the name and answers `notFound` instead of reading or writing an unlinked file.
import SystemLayer

extension Engine {
    /// What `destroy` removed.
    struct Destroyed {
        var removed: [String]
        /// True when the lock file was left in place because other handles have the store open.
        var lockKept: Bool
    }

    /// Removes the data file, a stale temporary image, the quarantine copies and, when no other handle has the
    /// store open, the lock file. A single-process handle holding the store makes it `busy`.
    static func destroy(paths: StorePaths, attempt: Int = 0) throws(PrefsError) -> Destroyed {
        // The lock file, created if missing so that an opener racing with us locks the same file.
        let lockFD: Int32
        var createdLock = false
        switch Sys.open(paths.lock, .createNew) {
        case .success(let fd):
            lockFD = fd
            createdLock = true
            if case .failure(let e) = Sys.fchmod(fd, 0o600) {
                Sys.close(fd)
                throw PrefsError.system(e, "fchmod", "cannot set the lock file's mode", path: paths.lock)
            }
        case .failure(let e) where e == .exists:
            lockFD = try Sys.open(paths.lock, .readWrite).orThrow("open", "cannot open the lock file", path: paths.lock)
        case .failure(let e):
            throw PrefsError.system(e, "open", "cannot open the lock file", path: paths.lock)
        }
        // Closing the descriptor releases both locks taken on it below.
        defer { Sys.close(lockFD) }

        // The presence lock: exclusive when nobody else has the store open (the lock file may then go too),
        // shared when multi-process handles do, refused when a single-process handle holds it.
        let alone: Bool
        switch Sys.presenceLock(lockFD, exclusive: true) {
        case .success:
            alone = true
        case .failure(let e) where e == .wouldBlock:
            switch Sys.presenceLock(lockFD, exclusive: false) {
            case .success:
                alone = false
            case .failure(let e) where e == .wouldBlock:
                throw PrefsError(
                    .busy, "cannot remove the store: a single-process handle holds it exclusively", path: paths.data)
            case .failure(let e):
                throw PrefsError.system(e, "fcntl(F_OFD_SETLK)", "cannot lock the store", path: paths.lock)
            }
        case .failure(let e):
            throw PrefsError.system(e, "fcntl(F_OFD_SETLK)", "cannot lock the store", path: paths.lock)
        }
        // The open lock, then the writer lock: no open, write, compaction or recovery is under way while we
        // retire the file. (Closing the descriptor releases the first; the mutex is released explicitly.)
        try Sys.lockExclusive(lockFD).orThrow("flock", "cannot take the writer lock", path: paths.lock)
        // Another wipe may have unlinked the file we opened before we locked it: use the current one. The
        // size, read under the open lock, tells whether a lock page was set up.
        guard let lockFileSize = currentLockFileSize(lockFD, paths: paths) else {
            guard attempt < 8 else {
                throw PrefsError(.busy, "cannot remove the store: its lock file keeps being replaced", path: paths.lock)
            }
            return try destroy(paths: paths, attempt: attempt + 1)
        }
        let lockPage = try LockPage.open(fd: lockFD, path: paths.lock, fileSize: lockFileSize, alone: false)
        _ = try lockPage?.lock(path: paths.lock)
        defer { lockPage?.unlock() }

        var removed: [String] = []
        switch Sys.open(paths.data, .readWrite) {
        case .success(let fd):
            let status = try Sys.fstat(fd).orThrow("fstat", "cannot inspect the store file", path: paths.data)
            if status.isRegular && status.size >= Format.headerSize {
                // As `install` does before a rename: every handle mapping this file reopens the path.
                let file = try MappedFile(fd: fd, path: paths.data, writable: true)
                file.setSuperseded(true)
            } else {
                // Too short to be mapped by any handle: nobody can be using it.
                Sys.close(fd)
            }
            try Sys.unlink(paths.data).orThrow("unlink", "cannot remove the store file", path: paths.data)
            removed.append(paths.data)
        case .failure(let e) where e == .noEntry:
            break
        case .failure(let e) where e == .symbolicLink:
            // A symbolic link in place of the data file: no handle opens it (O_NOFOLLOW); remove the link only.
            try Sys.unlink(paths.data).orThrow("unlink", "cannot remove the store file", path: paths.data)
            removed.append(paths.data)
        case .failure(let e):
            throw PrefsError.system(e, "open", "cannot open the store file", path: paths.data)
        }

        // Under the writer lock a temporary image is a leftover of a killed compaction.
        switch Sys.unlink(paths.temporary) {
        case .success: removed.append(paths.temporary)
        case .failure(let e) where e == .noEntry: break
        case .failure(let e):
            throw PrefsError.system(e, "unlink", "cannot remove a temporary image", path: paths.temporary)
        }

        let names = try Sys.directoryEntries(paths.directory).orThrow(
            "opendir", "cannot list the store directory", path: paths.directory)
        for name in names.sorted() where isQuarantineName(name, dataFileName: paths.dataFileName) {
            let path = paths.directory.hasSuffix("/") ? paths.directory + name : paths.directory + "/" + name
            switch Sys.unlink(path) {
            case .success: removed.append(path)
            case .failure(let e) where e == .noEntry: break
            case .failure(let e): throw PrefsError.system(e, "unlink", "cannot remove a quarantine copy", path: path)
            }
        }

        if alone {
            // Still holding the exclusive presence lock: no handle is using this lock file, and an opener that
            // locks it after this sees that the path no longer names it (`isCurrentLockFile`).
            try Sys.unlink(paths.lock).orThrow("unlink", "cannot remove the lock file", path: paths.lock)
            if !createdLock { removed.append(paths.lock) }
        }
        syncDirectory(paths)
        return Destroyed(removed: removed, lockKept: !alone)
    }

    /// Whether `name` is a quarantine copy of `dataFileName`: `<data>.corrupt-<yyyyMMdd'T'HHmmss'Z'>[-n]`.
    /// The exact shape matters: `ui.prefs.corrupt-x.prefs` is the data file of the store `ui.prefs.corrupt-x`.
    static func isQuarantineName(_ name: String, dataFileName: String) -> Bool {
        let prefix = dataFileName + ".corrupt-"
        guard name.hasPrefix(prefix) else { return false }
        let stamp = Array(name.utf8.dropFirst(prefix.utf8.count))
        func digits(_ range: Range<Int>) -> Bool { stamp[range].allSatisfy { $0 >= 0x30 && $0 <= 0x39 } }
        guard stamp.count >= 16, digits(0..<8), stamp[8] == UInt8(ascii: "T"), digits(9..<15),
            stamp[15] == UInt8(ascii: "Z")
        else { return false }
        if stamp.count == 16 { return true }
        return stamp.count > 17 && stamp[16] == UInt8(ascii: "-") && digits(17..<stamp.count)
    }
}
