// Noticing, without a system call per write, that a store file lost its name while open.
//
// A handle that kept writing into a file deleted (or renamed over, or moved away) by another program would
// acknowledge writes that no later open can see. Checking with `fstat` before every write transaction costs
// a system call, more than the rest of a write. Instead one inotify descriptor per process watches every
// open store file's inode for a change of link count or a move, and raises that file's flag; a writer pays the
// `fstat` only when the flag is up. A write racing with the deletion itself may still land in the deleted file,
// exactly as a write made just before it would: the guarantee is that nothing is written into a file known to
// have no name.
import Synchronization
import SystemLayer

/// Raised by the watcher when the file it belongs to may have lost its name.
final class LinkFlag: Sendable {
    let raised = Atomic<Bool>(false)
}

/// The process-wide inotify watch on open store files.
///
/// One thread of its own sleeps in `poll` on the inotify descriptor (a plain thread, not a Dispatch source:
/// Dispatch's pool would allocate and wake at times of its own, which the allocation tests would count).
final class LinkWatcher: Sendable {
    static let shared = LinkWatcher()

    private struct State {
        var watches: [Int32: [ObjectIdentifier: LinkFlag]] = [:]
    }

    /// The inotify descriptor, or -1 when inotify is unavailable (then every write checks with `fstat`).
    private let fd: Int32
    private let state = SanitizedMutex(State())
    /// Where events are read: allocated once, so that an event (a harmless metadata change raises one too)
    /// costs no heap allocation. `nonisolated(unsafe)`: only used under `state`'s lock.
    private nonisolated(unsafe) let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 4096, alignment: 8)
    /// False when the watcher thread could not be started: then nothing would raise a flag.
    private let delivering = Atomic<Bool>(true)

    private init() {
        guard case .success(let fd) = Sys.inotifyOpen() else {
            self.fd = -1
            return
        }
        self.fd = fd
        // The watcher lives as long as the process (`shared`): its thread holds it for good.
        let running = Atomic<Bool>(false)
        let started = Sys.detachThread { [self] in
            running.store(true, ordering: .releasing)
            while Sys.waitReadable(fd) { drain() }
        }
        warmUpEventPath()
        if started {
            // Wait until the thread runs, so its start-up (and its allocations) happens here, once, and not at
            // some later moment of the process's life.
            while !running.load(ordering: .acquiring) { Sys.yieldThread() }
        } else {
            delivering.store(false, ordering: .releasing)
        }
    }

    /// Reads the events the kernel queued and raises their files' flags. Runs on the watcher's thread when the
    /// descriptor becomes readable; tests call it to make delivery deterministic.
    func drain() {
        guard fd >= 0 else { return }
        // Reading and raising under one lock: a caller's drain that finds the queue empty because the watcher
        // thread just read it waits here until that thread has raised the flags.
        state.withLock { state in
            Sys.inotifyRead(fd, into: buffer) { watch, _ in Self.raise(watch, in: state) }
        }
    }

    /// Raises the flags of every file under `watch`. Allocates nothing.
    private static func raise(_ watch: Int32, in state: State) {
        guard let flags = state.watches[watch] else { return }
        for flag in flags.values { flag.raised.store(true, ordering: .releasing) }
    }

    /// Runs the event path once on a made-up event (a watch descriptor no watch has), so that the Swift runtime
    /// builds what that path needs now and not at the first real event: events also come for harmless metadata
    /// changes, at moments of their own, and reads must stay free of allocations around them.
    private func warmUpEventPath() {
        buffer.initializeMemory(as: UInt8.self, repeating: 0)
        buffer.storeBytes(of: Int32(-1), as: Int32.self)
        state.withLock { state in
            Sys.inotifyDecode(UnsafeRawBufferPointer(buffer), count: Sys.inotifyEventHeaderSize) { watch, _ in
                Self.raise(watch, in: state)
            }
        }
    }

    /// Watches the file open as `fileDescriptor`. Returns nil when it cannot be watched: the caller then
    /// checks with `fstat` before every write.
    func watch(fileDescriptor: Int32) -> (flag: LinkFlag, watch: Int32)? {
        guard fd >= 0, delivering.load(ordering: .acquiring),
            case .success(let watch) = Sys.inotifyWatchLinks(fd, fileDescriptor: fileDescriptor)
        else {
            return nil
        }
        let flag = LinkFlag()
        state.withLock { $0.watches[watch, default: [:]][ObjectIdentifier(flag)] = flag }
        return (flag, watch)
    }

    /// Stops delivering to `flag`; removes the inotify watch when no other open file shares its inode.
    func unwatch(_ flag: LinkFlag, watch: Int32) {
        let last = state.withLock { state -> Bool in
            state.watches[watch]?.removeValue(forKey: ObjectIdentifier(flag))
            guard state.watches[watch]?.isEmpty ?? true else { return false }
            state.watches[watch] = nil
            return true
        }
        if last { Sys.inotifyRemoveWatch(fd, watch) }
    }
}
