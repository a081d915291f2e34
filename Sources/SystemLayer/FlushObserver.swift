// A test seam: lets the power-loss simulation see every durability barrier the store engine issues, and the fault
// tests make one of them, or one of the store file's byte locks, fail as a file system can.

/// Observes every successful `Sys.fdatasync` and `Sys.fsync`, with the descriptor flushed, before the caller
/// goes on. PrefsKV's `PrefsSyncProbe` installs it; `Tests/PrefsKVTests/PowerLossTests.swift` snapshots the
/// file at each one to build the images a power cut could leave. A fault rule (`installFaults`), when one is
/// installed, is asked before each flush and each byte lock (`Sys.byteLock`) and may fail it with an error instead
/// (nothing flushed, nothing locked): `Tests/PrefsKVTests/FlushFailureTests.swift`. Costs two uncontended locks per
/// flush and one per byte lock when nothing is installed.
package enum FlushObserver {
    /// The observer, held by a class: a closure stored in the generic mutex and read back out of it at every
    /// flush was wrapped in one more reabstraction thunk each time, and the chain, as long as the flushes made,
    /// overflowed the stack when it was finally released (a long power-loss run, tens of thousands of flushes).
    private final class Observer: Sendable {
        let call: @Sendable (Int32) -> Void
        init(_ call: @escaping @Sendable (Int32) -> Void) { self.call = call }
    }

    /// What a fault rule is asked about.
    package enum Call: Sendable {
        /// `fdatasync` or `fsync` of the descriptor.
        case flush
        /// An open file description lock on one byte of the descriptor's file (`Sys.byteLock`).
        case byteLock
    }

    /// The fault rule, held by a class for the reason `Observer` is.
    private final class Faults: Sendable {
        let rule: @Sendable (Call, Int32) -> Errno?
        init(_ rule: @escaping @Sendable (Call, Int32) -> Errno?) { self.rule = rule }
    }

    private static let observer = SanitizedMutex<Observer?>(nil)
    private static let faults = SanitizedMutex<Faults?>(nil)

    /// Installs `observer` (nil removes it). It runs on the flushing thread, under the caller's locks: it must
    /// not call back into a store.
    package static func install(_ observer: (@Sendable (_ fd: Int32) -> Void)?) {
        let box = observer.map(Observer.init)
        self.observer.withLock { $0 = box }
    }

    /// Installs `rule` (nil removes it): a call it answers with an error fails with that error, untried. It runs on
    /// the calling thread, under the caller's locks: it must not call back into a store.
    package static func installFaults(_ rule: (@Sendable (_ call: Call, _ fd: Int32) -> Errno?)?) {
        let box = rule.map(Faults.init)
        faults.withLock { $0 = box }
    }

    static func flushed(_ fd: Int32) {
        if let observer = observer.withLock({ $0 }) { observer.call(fd) }
    }

    /// The error the installed rule gives `call` on `fd`, if any.
    static func injected(_ call: Call, _ fd: Int32) -> Errno? {
        guard let faults = faults.withLock({ $0 }) else { return nil }
        return faults.rule(call, fd)
    }
}
