// The writer lock of multi-process stores: a robust, process-shared mutex in the first page of the lock file.
//
// Taking and releasing it costs no system call when nobody else is writing (two `flock` calls per write did:
// about a microsecond here). A writer killed while holding it does not block the others: the next locker is told
// (EOWNERDEAD), marks it consistent and goes on; the file protocol already makes a writer's death harmless, as it
// was with `flock`, which the kernel releases too. Documentation/FileFormat.md, "Sharing between processes".

/// The mapped lock page of one handle. Not thread-safe by itself: used under the store's locks.
final class LockPage {
    static let size = 4096
    /// "PKVLOCK" and a version byte, 1 (`50 4b 56 4c 4f 43 4b 01`).
    static let magic: UInt64 = 0x014B_434F_4C56_4B50
    /// Bytes 8..<16: the size of the C library's mutex, so a page written under another layout is redone.
    static let layoutOffset = 8
    static let mutexOffset = 64

    private let base: UnsafeMutableRawPointer

    private init(base: UnsafeMutableRawPointer) {
        self.base = base
    }

    deinit {
        Sys.unmap(base, length: LockPage.size)
    }

    private var mutex: UnsafeMutablePointer<Sys.Mutex> {
        (base + LockPage.mutexOffset).assumingMemoryBound(to: Sys.Mutex.self)
    }

    /// Maps the lock page of the lock file `fd`, which the caller holds the open lock (`flock`) on.
    ///
    /// - `initialize`: no other handle has the store open (the presence byte is free), so nobody can be using
    ///   the mutex: the page is (re)written, which also clears a mutex left locked by a process that died before
    ///   a reboot. Otherwise an existing, valid page is used as it is.
    /// - Returns: nil when the page was never written (the handles that have the store open use `flock`; this
    ///   one then does too).
    static func open(fd: Int32, path: String, initialize: Bool) throws(PrefsError) -> LockPage? {
        precondition(MemoryLayout<Sys.Mutex>.size <= size - mutexOffset)
        let status = try Sys.fstat(fd).orThrow("fstat", "cannot inspect the lock file", path: path)
        if status.size < size {
            guard initialize else { return nil }
            try Sys.truncate(fd, length: size).orThrow("ftruncate", "cannot size the lock page", path: path)
        }
        let base = try Sys.map(fd, length: size, writable: true).orThrow(
            "mmap", "cannot map the lock page", path: path)
        let page = LockPage(base: base)
        let layout = UInt64(MemoryLayout<Sys.Mutex>.size)
        if initialize {
            base.initializeMemory(as: UInt8.self, repeating: 0, count: size)
            try Sys.initializeRobustSharedMutex(page.mutex).orThrow(
                "pthread_mutex_init", "cannot set up the writer lock", path: path)
            base.storeBytes(of: layout, toByteOffset: layoutOffset, as: UInt64.self)
            base.storeBytes(of: magic, toByteOffset: 0, as: UInt64.self)
            return page
        }
        guard base.load(as: UInt64.self) == magic, base.load(fromByteOffset: layoutOffset, as: UInt64.self) == layout
        else { return nil }
        return page
    }

    /// Takes the writer lock; true when its previous owner had died holding it.
    func lock(path: String) throws(PrefsError) -> Bool {
        try Sys.lockRobustMutex(mutex).orThrow("pthread_mutex_lock", "cannot take the writer lock", path: path)
    }

    func unlock() {
        Sys.unlockMutex(mutex)
    }
}
