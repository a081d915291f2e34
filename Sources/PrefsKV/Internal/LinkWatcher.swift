// Noticing, without a system call per write, that a store file lost its name while open.
//
// A handle that kept writing into a file deleted (or renamed over, or moved away) by another program would
// acknowledge writes that no later open can see. Checking with `fstat` before every write transaction costs
// about 0.5 µs here, more than the rest of a write. Instead one inotify descriptor per process watches every
// open store file's inode for a change of link count or a move, and raises that file's flag; a writer pays the
// `fstat` only when the flag is up. A write racing with the deletion itself may still land in the deleted file,
// exactly as a write made just before it would: the guarantee is that nothing is written into a file known to
// have no name.
import Dispatch
import Synchronization

/// Raised by the watcher when the file it belongs to may have lost its name.
final class LinkFlag: Sendable {
    let raised = Atomic<Bool>(false)
}

/// The process-wide inotify watch on open store files.
///
/// `@unchecked Sendable`: `fd` and `source` are set in `init` and never change (`source` is only kept alive);
/// the watch table lives in a mutex.
final class LinkWatcher: @unchecked Sendable {
    static let shared = LinkWatcher()

    private struct State {
        var watches: [Int32: [ObjectIdentifier: LinkFlag]] = [:]
    }

    /// The inotify descriptor, or -1 when inotify is unavailable (then every write checks with `fstat`).
    private let fd: Int32
    private let state = SanitizedMutex(State())
    // Kept alive for the process's lifetime; read only to be retained.
    private let source: (any DispatchSourceRead)?

    private init() {
        guard case .success(let fd) = Sys.inotifyOpen() else {
            self.fd = -1
            self.source = nil
            return
        }
        self.fd = fd
        let source = DispatchSource.makeReadSource(
            fileDescriptor: fd, queue: DispatchQueue(label: "prefskv.links", qos: .userInitiated))
        self.source = source
        // The watcher lives as long as the process (`shared`): capturing it strongly costs nothing.
        source.setEventHandler { [self] in drain() }
        source.resume()
    }

    /// Reads the events the kernel queued and raises their files' flags. Runs on the watcher's queue when the
    /// descriptor becomes readable; tests call it to make delivery deterministic.
    func drain() {
        guard fd >= 0 else { return }
        let watches = Sys.inotifyDrainWatches(fd)
        guard !watches.isEmpty else { return }
        let flags = state.withLock { state in
            watches.flatMap { state.watches[$0].map { Array($0.values) } ?? [] }
        }
        for flag in flags { flag.raised.store(true, ordering: .releasing) }
    }

    /// Watches the file open as `fileDescriptor`. Returns nil when it cannot be watched: the caller then
    /// checks with `fstat` before every write.
    func watch(fileDescriptor: Int32) -> (flag: LinkFlag, watch: Int32)? {
        guard fd >= 0, case .success(let watch) = Sys.inotifyWatchLinks(fd, fileDescriptor: fileDescriptor) else {
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
