// A test seam: lets the power-loss simulation see every durability barrier the store engine issues.

/// Observes every successful `Sys.fdatasync` and `Sys.fsync`, with the descriptor flushed, before the caller
/// goes on. PrefsKV's `PrefsSyncProbe` installs it; `Tests/PrefsKVTests/PowerLossTests.swift` snapshots the
/// file at each one to build the images a power cut could leave. Costs one uncontended lock per flush when
/// nothing is installed.
package enum FlushObserver {
    /// The observer, held by a class: a closure stored in the generic mutex and read back out of it at every
    /// flush was wrapped in one more reabstraction thunk each time, and the chain, as long as the flushes made,
    /// overflowed the stack when it was finally released (a long power-loss run, tens of thousands of flushes).
    private final class Observer: Sendable {
        let call: @Sendable (Int32) -> Void
        init(_ call: @escaping @Sendable (Int32) -> Void) { self.call = call }
    }

    private static let observer = SanitizedMutex<Observer?>(nil)

    /// Installs `observer` (nil removes it). It runs on the flushing thread, under the caller's locks: it must
    /// not call back into a store.
    package static func install(_ observer: (@Sendable (_ fd: Int32) -> Void)?) {
        let box = observer.map(Observer.init)
        self.observer.withLock { $0 = box }
    }

    static func flushed(_ fd: Int32) {
        if let observer = observer.withLock({ $0 }) { observer.call(fd) }
    }
}
