// The writer lock of multi-process stores: a robust, process-shared mutex in the first page of the lock file.
//
// Taking and releasing it costs no system call when nobody else is writing (two `flock` calls per write did:
// about a microsecond here). A writer killed while holding it does not block the others: the next locker is told
// (EOWNERDEAD), marks it consistent and goes on; the file protocol already makes a writer's death harmless, as it
// was with `flock`, which the kernel releases too. Documentation/FileProtocols.md, "Sharing between processes".
import SystemLayer

/// The lock page of one handle, mapped at its first lock. Not thread-safe by itself: used under the store's
/// locks.
final class LockPage {
    static let size = 4096
    /// "PKVLOCK" and a version byte, 1 (`50 4b 56 4c 4f 43 4b 01`).
    static let magic: UInt64 = 0x014B_434F_4C56_4B50
    /// Bytes 8..<16: the size of the C library's mutex, so a page written under another layout is redone.
    static let layoutOffset = 8
    static let mutexOffset = 64

    private let fd: Int32
    private let path: String
    /// The mapping, made by the first `lock` (or by `open` when it sets the page up): a handle that only reads
    /// never maps it. (A mapping and its first page fault are a visible share of a fresh process's first open.)
    private var base: UnsafeMutableRawPointer?

    /// `fd` stays open for the handle's lifetime (the engine owns it).
    private init(fd: Int32, path: String) {
        self.fd = fd
        self.path = path
    }

    deinit {
        if let base { Sys.unmap(base, length: LockPage.size) }
    }

    @inline(__always)
    private func mapped() throws(PrefsError) -> UnsafeMutableRawPointer {
        if let base { return base }
        return try map()
    }

    private func map() throws(PrefsError) -> UnsafeMutableRawPointer {
        let mapped = try Sys.map(fd, length: LockPage.size, writable: true).orThrow(
            "mmap", "cannot map the lock page", path: path)
        base = mapped
        return mapped
    }

    private static func mutex(in base: UnsafeMutableRawPointer) -> UnsafeMutablePointer<Sys.Mutex> {
        (base + mutexOffset).assumingMemoryBound(to: Sys.Mutex.self)
    }

    /// The lock page of the lock file `fd` (`fileSize` bytes long), which the caller holds the open lock
    /// (`flock`) on.
    ///
    /// - `alone`: no other handle has the store open (the presence byte is free), so nobody can be using the
    ///   mutex: a page that is not ready (never written, another layout, or its mutex left locked by a process
    ///   that died, before a reboot or not) is (re)written. A ready page is used as it is: rewriting it at every
    ///   open would write to the file (a journaled page fault on ext4).
    /// - Returns: nil when the page was never written and others have the store open (they use `flock`; this
    ///   handle then does too).
    static func open(fd: Int32, path: String, fileSize: Int, alone: Bool) throws(PrefsError) -> LockPage? {
        precondition(MemoryLayout<Sys.Mutex>.size <= size - mutexOffset)
        if fileSize < size {
            guard alone else { return nil }
            try Sys.truncate(fd, length: size).orThrow("ftruncate", "cannot size the lock page", path: path)
        }
        let layout = UInt64(MemoryLayout<Sys.Mutex>.size)
        // The page is checked with a read, not through a mapping: the mapping waits for the first write.
        let (written, unlocked) = try withUnsafeTemporaryAllocation(byteCount: mutexOffset + 8, alignment: 8) {
            head throws(PrefsError) -> (Bool, Bool) in
            let count = try Sys.pread(fd, into: head, at: 0).orThrow(
                "pread", "cannot read the lock page", path: path)
            guard count == head.count else { return (false, false) }
            let written = head.load(as: UInt64.self) == magic
                && head.load(fromByteOffset: layoutOffset, as: UInt64.self) == layout
            // glibc's mutex starts with its lock word: 0 when free; a holder's thread id otherwise, with the
            // owner-died bit when the holder died (robust mutexes).
            return (written, head.load(fromByteOffset: mutexOffset, as: Int32.self) == 0)
        }
        let page = LockPage(fd: fd, path: path)
        if alone && !(written && unlocked) {
            let base = try page.mapped()
            base.initializeMemory(as: UInt8.self, repeating: 0, count: size)
            try Sys.initializeRobustSharedMutex(mutex(in: base)).orThrow(
                "pthread_mutex_init", "cannot set up the writer lock", path: path)
            base.storeBytes(of: layout, toByteOffset: layoutOffset, as: UInt64.self)
            base.storeBytes(of: magic, toByteOffset: 0, as: UInt64.self)
            return page
        }
        return written ? page : nil
    }

    /// Takes the writer lock; true when its previous owner had died holding it.
    func lock(path: String) throws(PrefsError) -> Bool {
        try Sys.lockRobustMutex(LockPage.mutex(in: mapped())).orThrow(
            "pthread_mutex_lock", "cannot take the writer lock", path: path)
    }

    /// Releases the writer lock, which this handle holds (so the page is mapped).
    func unlock() {
        Sys.unlockMutex(LockPage.mutex(in: base.unsafelyUnwrapped))
    }
}
