// A test seam: lets the power-loss simulation see every durability barrier PrefsKV issues.
import SystemLayer

/// Observes every successful `fdatasync` and `fsync` PrefsKV makes, with the descriptor it flushed, before the
/// engine goes on. `Tests/PrefsKVTests/PowerLossTests.swift` snapshots the file at each one to build the images
/// a power cut could leave. The flushes are made in the system layer, which calls the observer
/// (`FlushObserver`); costs one uncontended lock per flush when nothing is installed.
package enum PrefsSyncProbe {
    /// Installs `observer` (nil removes it). It runs on the flushing thread, under the store's lock: it must
    /// not call back into a store.
    package static func install(_ observer: (@Sendable (_ fd: Int32) -> Void)?) {
        FlushObserver.install(observer)
    }
}
