import Dispatch
import SystemLayer

/// Keeps an observer registered; cancelling it (or releasing it) stops the callbacks.
///
/// ```swift
/// let observation = store.observe { change in print(change.keys) }
/// // ...
/// observation.cancel()
/// ```
public final class PrefsObservation: Sendable {
    private let cancelAction: @Sendable () -> Void

    init(cancel: @escaping @Sendable () -> Void) {
        cancelAction = cancel
    }

    /// Stops the callbacks. Calling it again does nothing.
    ///
    /// ```swift
    /// observation.cancel()
    /// ```
    public func cancel() { cancelAction() }

    deinit { cancelAction() }
}

/// Observers of one handle and the inotify watch that reports other processes' writes.
struct ObserverRegistry: ~Copyable {
    var nextID = 0
    var callbacks: [Int: @Sendable (PrefsChange) -> Void] = [:]
    var watcher: FileWatcher?

    mutating func stopWatching() {
        watcher?.stop()
        watcher = nil
    }
}

extension PrefsStore {
    /// Calls `callback` after every change to the store, made through this handle or any other (another
    /// handle or process: noticed through inotify, in ``Sharing/multiProcess`` mode). Callbacks run after
    /// the store's locks are released, on the writing thread or on a background queue; they may use the
    /// store. Keep the returned observation: releasing it stops the callbacks.
    ///
    /// ```swift
    /// let observation = store.observe { change in
    ///     if change.keys.contains("theme") { reloadTheme() }
    /// }
    /// ```
    public func observe(_ callback: @escaping @Sendable (PrefsChange) -> Void) -> PrefsObservation {
        let (id, first) = observers.withLock { registry in
            let id = registry.nextID
            registry.nextID += 1
            registry.callbacks[id] = callback
            return (id, registry.callbacks.count == 1)
        }
        if first { startObserving() }
        return PrefsObservation { [weak self] in self?.removeObserver(id) }
    }

    /// An asynchronous sequence of changes, as ``observe(_:)`` reports them. It ends when the consuming
    /// task is cancelled.
    ///
    /// ```swift
    /// for await change in store.changes() {
    ///     print("changed:", change.keys)
    /// }
    /// ```
    public func changes() -> AsyncStream<PrefsChange> {
        let (stream, continuation) = AsyncStream<PrefsChange>.makeStream(bufferingPolicy: .unbounded)
        let observation = observe { change in continuation.yield(change) }
        continuation.onTermination = { _ in observation.cancel() }
        return stream
    }

    private func removeObserver(_ id: Int) {
        let last = observers.withLock { registry -> Bool in
            guard registry.callbacks.removeValue(forKey: id) != nil else { return false }
            if registry.callbacks.isEmpty {
                registry.stopWatching()
                return true
            }
            return false
        }
        if last { engine.withLock { $0.wantsChanges = false } }
    }

    /// Marks the store watched (so writers in other processes raise inotify events) and starts the watch.
    private func startObserving() {
        let multiProcess = configuration.sharing == .multiProcess
        do {
            try engine.withLock { e throws(PrefsError) in try e.startReportingChanges() }
        } catch {
            configuration.logger.warning(
                "cannot mark \(path) as observed; other processes' writes may be noticed late: \(error)")
        }
        guard multiProcess else { return }
        let fileName = id + ".prefs"
        let watcher = FileWatcher(directory: directory, fileName: fileName) { [weak self] in
            self?.checkForExternalChanges()
        }
        do {
            try watcher.start()
            observers.withLock { $0.watcher = watcher }
        } catch {
            configuration.logger.warning("cannot watch \(directory) for other processes' writes: \(error)")
        }
    }

    /// Called by the watch: catches up and delivers what changed.
    func checkForExternalChanges() {
        do {
            _ = try read { e throws(PrefsError) in
                try e.keepWatched()
                return 0
            }
        } catch {
            configuration.logger.error("cannot read other processes' changes to \(path): \(error)")
        }
    }
}

/// An inotify watch on the store's directory, read on a Dispatch queue.
final class FileWatcher: @unchecked Sendable {
    // @unchecked: `source` is set once in `start()` before any event can arrive and read afterwards only by
    // `stop()`, which runs under the registry's Mutex.
    private let directory: String
    private let fileName: String
    private let onChange: @Sendable () -> Void
    private var source: (any DispatchSourceRead)?

    init(directory: String, fileName: String, onChange: @escaping @Sendable () -> Void) {
        self.directory = directory
        self.fileName = fileName
        self.onChange = onChange
    }

    func start() throws(PrefsError) {
        let fd = try Sys.inotifyOpen().orThrow("inotify_init1", "cannot watch the store directory", path: directory)
        if case .failure(let e) = Sys.inotifyWatch(fd, directory: directory) {
            Sys.close(fd)
            throw PrefsError.system(e, "inotify_add_watch", "cannot watch the store directory", path: directory)
        }
        let source = DispatchSource.makeReadSource(fileDescriptor: fd, queue: DispatchQueue(label: "prefskv.watch"))
        let fileName = self.fileName
        let onChange = self.onChange
        source.setEventHandler {
            if Sys.inotifyDrain(fd).contains(where: { $0.name == fileName }) { onChange() }
        }
        source.setCancelHandler { Sys.close(fd) }
        self.source = source
        source.resume()
    }

    func stop() {
        source?.cancel()
        source = nil
    }
}
