// Synchronization.Mutex, made visible to ThreadSanitizer.
//
// On Linux, Mutex parks threads with futex calls inside the prebuilt Synchronization library, which ThreadSanitizer
// does not see: it then reports every access made under a Mutex as a data race (Reliability.md, "Concurrency", says how
// that was found). This wrapper tells ThreadSanitizer about the lock's happens-before edges with `__tsan_acquire` /
// `__tsan_release`, through CPrefsKV, which has them only in a ThreadSanitizer build: elsewhere the cost is one load of
// a constant and a branch per lock. (They were looked up with `dlsym` at first use; a failed lookup walks every loaded
// library, in the first read.)
//
// `withLock` is `@inlinable public`: every get and set of a store takes this lock, and it must compile into its
// caller, specialised for the guarded value, as it did when it lived in PrefsKV (an unspecialised call builds
// the type's metadata at run time, in the first open). Public, not package: Swift 6.3 does not inline an
// `@inlinable package` function into another module. SystemLayer is no product: nothing outside the package
// can import it.
public import CPrefsKV
public import Synchronization

/// A `Mutex` whose lock and unlock ThreadSanitizer understands. Use it exactly like `Mutex`.
public struct SanitizedMutex<Value: ~Copyable>: ~Copyable, @unchecked Sendable {
    // @unchecked Sendable: `Mutex` is Sendable for every Value; `token` is immutable and only its address is used.
    @usableFromInline let mutex: Mutex<Value>
    @usableFromInline let token: SanitizerToken

    @inlinable
    public init(_ value: consuming sending Value) {
        mutex = Mutex(value)
        token = SanitizerToken()
    }

    @inlinable @inline(__always)
    public borrowing func withLock<Result: ~Copyable, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        let address = UnsafeRawPointer(Unmanaged.passUnretained(token).toOpaque())
        return try mutex.withLock { (value: inout sending Value) throws(E) -> sending Result in
            if prefs_tsan_active != 0 { prefs_tsan_acquire(address) }
            defer { if prefs_tsan_active != 0 { prefs_tsan_release(address) } }
            return try body(&value)
        }
    }
}

/// The object whose address names one mutex to ThreadSanitizer.
@usableFromInline
final class SanitizerToken: Sendable {
    @usableFromInline init() {}
}
