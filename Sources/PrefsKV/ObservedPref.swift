public import Observation
import SystemLayer

/// A key's value as an `Observable` model, kept in sync with the store: writes through this handle or any
/// other, another process's included, update ``value`` and notify whatever tracks it (Swift's Observation:
/// `withObservationTracking`, and UI frameworks built on it).
///
/// ```swift
/// let theme = store.observable(PrefsKeys.theme)
/// withObservationTracking { render(theme.value) } onChange: { scheduleRender() }
/// try theme.set(.dark)
/// ```
///
/// Thread-safe: ``value`` may be read from any thread. It follows the store while the model is alive.
public final class ObservedPref<Value: Sendable>: Observable, Sendable {
    private let registrar = ObservationRegistrar()
    private let current: SanitizedMutex<Value>
    private let key: PrefsKey<Value>
    private let store: PrefsStore
    private let observation = SanitizedMutex<PrefsObservation?>(nil)

    init(store: PrefsStore, key: PrefsKey<Value>) {
        self.store = store
        self.key = key
        current = SanitizedMutex(key.defaultValue)
        // Subscribed before the first read: a write in between is seen.
        let observation = store.observe(key) { [weak self] _ in self?.refresh() }
        self.observation.withLock { $0 = observation }
        refresh()
    }

    /// The key's value (tracked by Observation). A key with a lifetime is read from the store each time, so
    /// an expired value is never returned (expiry itself raises no change).
    public var value: Value {
        registrar.access(self, keyPath: \.value)
        if key.expiresAfter != nil { return store[key] }
        return current.withLock { $0 }
    }

    /// Writes `newValue` to the store; ``value`` and its observers follow before this returns.
    ///
    /// ```swift
    /// try theme.set(.dark)
    /// ```
    public func set(_ newValue: Value) throws {
        try store.set(newValue, for: key)
    }

    /// Changes the key's value atomically (``PrefsStore/update(_:_:)``) and returns it: `transform` runs once, on
    /// the value stored now, under the store's writer lock, so no update made at the same time by another thread
    /// or process is lost. ``value`` and its observers follow before this returns; if `transform` throws,
    /// nothing is written.
    ///
    /// ```swift
    /// try fontSize.update { $0 += 1 }
    /// ```
    @discardableResult
    public func update(_ transform: (inout Value) throws -> Void) throws -> Value {
        try store.update(key, transform)
    }

    /// Takes the store's value now, under the model's lock: callbacks on the writing thread and the watcher's
    /// queue may interleave, and the later one must never leave an older value.
    private func refresh() {
        registrar.withMutation(of: self, keyPath: \.value) {
            current.withLock { $0 = store[key] }
        }
    }
}

extension PrefsStore {
    /// An `Observable` model of `key`'s value that follows the store (see ``ObservedPref``).
    ///
    /// ```swift
    /// let fontSize = store.observable(PrefsKeys.fontSize)
    /// ```
    public func observable<Value>(_ key: PrefsKey<Value>) -> ObservedPref<Value> {
        ObservedPref(store: self, key: key)
    }
}
