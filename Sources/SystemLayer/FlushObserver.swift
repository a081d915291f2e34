// A test seam: lets the power-loss simulation see every durability barrier the store engine issues.

/// Observes every successful `Sys.fdatasync` and `Sys.fsync`, with the descriptor flushed, before the caller
/// goes on. PrefsKV's `PrefsSyncProbe` installs it; `Tests/PrefsKVTests/PowerLossTests.swift` snapshots the
/// file at each one to build the images a power cut could leave. Costs one uncontended lock per flush when
/// nothing is installed.
package enum FlushObserver {
    private static let observer = SanitizedMutex<(@Sendable (Int32) -> Void)?>(nil)

    /// Installs `observer` (nil removes it). It runs on the flushing thread, under the caller's locks: it must
    /// not call back into a store.
    package static func install(_ observer: (@Sendable (_ fd: Int32) -> Void)?) {
        self.observer.withLock { $0 = observer }
    }

    static func flushed(_ fd: Int32) {
        if let observer = observer.withLock({ $0 }) { observer(fd) }
    }
}
