// Removing a store from the disk (vaultctl's `prefs wipe`), safely against handles that have it open.
//
// The data file is retired the way a compaction retires it: under the writer lock its superseded word is set
// before its name goes away, so every other handle notices on its next access, takes the writer lock, finds
// no file under the name and answers `notFound` instead of reading or writing an unlinked file.
import SystemLayer

enum Destroy {
    /// What `destroy` removed.
    struct Destroyed {
        var removed: [String]
        /// True when the lock file was left in place because other handles have the store open.
        var lockKept: Bool
    }

    /// Removes the data file, a stale temporary image, the base image (`<id>.prefs.prev`), the quarantine copies
    /// and, when no other handle has the store open, the lock file. A single-process handle holding the store makes
    /// it `busy`; so do other handles unless `evenIfOpen`.
    static func destroy(paths: StorePaths, evenIfOpen: Bool) throws(PrefsError) -> Destroyed {
        // The lock file (created if missing, so that an opener racing with us locks the same file), the presence
        // lock (exclusive when nobody else has the store open), the open lock, then the writer lock: no open,
        // write, compaction or recovery is under way while we retire the file. Releasing `lock` releases the
        // first three; the lock page's mutex is released explicitly.
        let lock = try StoreLock.acquire(paths: paths, for: .destroy)
        let alone = lock.holdsPresenceExclusively
        if !alone && !evenIfOpen {
            throw PrefsError(
                .busy, "cannot remove the store: other handles have it open (evenIfOpen removes it under them)",
                path: paths.data)
        }
        try lock.lockPageForWipe()
        defer { lock.unlockPageForWipe() }

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

        // Under the writer lock a temporary image is a leftover of a killed compaction; a base image is the store's
        // state as of its last sync() (FileProtocols.md, "Compaction"), values the data file may no longer hold.
        for (path, what) in [(paths.temporary, "a temporary image"), (paths.previous, "the store's base image")] {
            switch Sys.unlink(path) {
            case .success: removed.append(path)
            case .failure(let e) where e == .noEntry: break
            case .failure(let e): throw PrefsError.system(e, "unlink", "cannot remove \(what)", path: path)
            }
        }

        for name in try Recovery.quarantineCopies(of: paths) {
            let path = Sys.joinPath(paths.directory, name)
            switch Sys.unlink(path) {
            case .success: removed.append(path)
            case .failure(let e) where e == .noEntry: break
            case .failure(let e): throw PrefsError.system(e, "unlink", "cannot remove a quarantine copy", path: path)
            }
        }

        if alone {
            try lock.removeFile()
            if !lock.createdFile { removed.append(paths.lock) }
        }
        syncDirectory(paths)
        return Destroyed(removed: removed, lockKept: !alone)
    }
}
