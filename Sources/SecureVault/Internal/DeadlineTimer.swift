#if SecretService
internal import CSecret
import SystemLayer

/// A GCancellable cancelled at a deadline: what bounds every call into libsecret (the Secret Service), whose blocking
/// calls take a cancellable and no deadline of their own. (The Secret portal's requests are bounded without it:
/// `SecretPortal.Bus`.)
///
/// The deadlines are kept by one thread of the process, started at the first timer and never stopped: a GLib main
/// context of its own, where each timer is a timeout source that cancels its cancellable. One thread, made once,
/// instead of libdispatch's queues and their threads, whose start a fresh process paid on its first call
/// (PerformanceIssues36-39.md, issue 36). Arming and disarming from any thread is
/// GLib's documented use of a context (`g_source_attach` wakes it; `g_source_destroy` is thread-safe).
///
/// `@unchecked Sendable`: the state is immutable after `init`; the GCancellable, shared with the deadline thread, is
/// documented as safe to cancel and query from any thread, and the source is only destroyed.
final class DeadlineTimer: @unchecked Sendable {
    let cancellable: UnsafeMutablePointer<GCancellable>
    private let source: UnsafeMutablePointer<GSource>
    private let deadline: Duration

    /// Every libsecret call makes one after `LibSecret.loadLibrary()` succeeded; made before, it loads libsecret
    /// itself, and traps if it cannot (a programmer error: nothing here could be called).
    init(after deadline: Duration) {
        precondition(csecret_secret_load() == nil, "a DeadlineTimer needs libsecret: LibSecret.loadLibrary() first")
        self.deadline = deadline
        let cancellable = g_cancellable_new()!
        self.cancellable = cancellable
        let milliseconds = deadline.components.seconds * 1000
            + (deadline.components.attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
        source = g_timeout_source_new(UInt32(clamping: max(0, milliseconds)))
        // The source holds its own reference to the cancellable, released when the source is destroyed (disarmed,
        // or after it fired), so that a timer that fires as it is disarmed cancels a live object.
        g_object_ref(cancellable)
        g_source_set_callback(
            source,
            { cancellable in
                g_cancellable_cancel(cancellable?.assumingMemoryBound(to: GCancellable.self))
                return 0  // G_SOURCE_REMOVE: a deadline fires once
            }, cancellable, { cancellable in g_object_unref(cancellable) })
        g_source_attach(source, Self.deadlineThread.pointer)
    }

    /// Stops the timer; the cancellable is left as it is (cancelled if the deadline passed).
    func disarm() {
        g_source_destroy(source)
    }

    /// Whether the deadline passed (the timer cancelled its cancellable).
    var expired: Bool {
        g_cancellable_is_cancelled(cancellable) != 0
    }

    /// A cancellation we caused is the deadline passing.
    func classify(_ failure: SecretServiceFailure) -> SecretServiceFailure {
        if expired || failure.kind == .timeout {
            var timedOut = failure
            timedOut.kind = .timeout
            timedOut.message = "no answer from the Secret Service within \(deadline) (\(failure.message))"
            return timedOut
        }
        return failure
    }

    deinit {
        g_source_destroy(source)
        g_source_unref(source)
        g_object_unref(cancellable)
    }

    /// The deadline thread's main context, the thread started by the first use. A process that cannot start a
    /// thread traps here, as libdispatch does: no call could then be bounded, and none may run unbounded.
    private static let deadlineThread: SharedContext = {
        let context = SharedContext(pointer: g_main_context_new()!)
        let started = Sys.detachThread {
            while true { g_main_context_iteration(context.pointer, 1) }
        }
        precondition(started, "cannot start the vault's deadline thread: the process is out of threads")
        return context
    }()

    /// The deadline thread's main context, shared with every thread that arms a timer (`@unchecked Sendable`: GLib's
    /// contexts are thread-safe).
    private struct SharedContext: @unchecked Sendable {
        let pointer: OpaquePointer
    }
}
#endif
