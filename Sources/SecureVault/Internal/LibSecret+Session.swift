// The transfer session a lookup's secret travels in, opened on a thread of its own while the lookup reads the
// collection's lock state and searches (LibSecret.swift).
#if SecretService
internal import CSecret
import Synchronization
import SystemLayer

/// Opens the process's Secret Service transfer session on a helper thread.
///
/// A secret leaves the service encrypted under a session key the two sides agree with a Diffie-Hellman exchange
/// (`OpenSession`, algorithm `dh-ietf1024-sha256-aes128-cbc-pkcs7`): libsecret makes its key pair before the call
/// and derives the shared key after it, about 1.8 ms of computation each here, and the service computes its side in
/// between (gnome-keyring about 2.6 ms). libsecret opens the session lazily, at the first secret a process loads,
/// after the lookup's three round trips, so a cold token read paid all of it one step after another. Started here
/// at the lookup's beginning, the key pair is made while the lock state is read and the item searched; the session
/// is the same one libsecret would have opened (libsecret keeps the first session a service gets). The one call it
/// adds is a process's first lookup that loads nothing (absent, locked) sending `OpenSession`, which it did not
/// before: no search, no unlock and no prompt for any provider.
///
/// Bounded like the lookup: the helper's call is cancelled when the lookup's deadline passes, or at once when the
/// lookup ends without loading a secret (absent, locked, several), which then waits at most for the key pair
/// being made; after that, the process's lookups open the session as libsecret does, at their first load. A
/// helper's failure is dropped: the load then opens the session itself, and reports what fails.
///
/// Used by the lookup's thread only; the helper thread is given the service and the helper's cancellable, GObjects
/// documented as safe to use from several threads (libsecret guards its session with the service's mutex).
final class SessionOpener {
    private let service: UnsafeMutablePointer<SecretService>
    private let cancellable: UnsafeMutablePointer<GCancellable>
    private let deadline: UnsafeMutablePointer<GCancellable>
    private let handler: gulong
    private var thread: Sys.JoinableThread?

    /// Starts opening `service`'s session, bounded by `deadline` (the lookup's cancellable); nil when the service
    /// has a session already or no thread can be started (the load then opens it, as libsecret does).
    init?(service: UnsafeMutablePointer<SecretService>, deadline: UnsafeMutablePointer<GCancellable>) {
        guard secret_service_get_session_dbus_path(service) == nil, !Self.stopped.load(ordering: .relaxed) else {
            return nil
        }
        self.service = service
        self.deadline = deadline
        cancellable = g_cancellable_new()!
        // Cancels this helper's cancellable when the lookup's is cancelled (at once if it already is).
        let forward: @convention(c) (UnsafeMutablePointer<GCancellable>?, gpointer?) -> Void = { _, own in
            g_cancellable_cancel(own?.assumingMemoryBound(to: GCancellable.self))
        }
        handler = g_cancellable_connect(deadline, unsafeBitCast(forward, to: GCallback.self), cancellable, nil)
        g_object_ref(service)
        let call = Call(service: service, cancellable: cancellable)
        let started = Sys.startThread {
            var error: UnsafeMutablePointer<GError>?
            _ = secret_service_ensure_session_sync(call.service, call.cancellable, &error)
            if let error { g_error_free(error) }
        }
        guard let started else {
            release()
            return nil
        }
        thread = started
    }

    /// Waits for the session: the lookup is about to load a secret.
    func finish() {
        guard let thread else { return }
        self.thread = nil
        Sys.join(thread)
        release()
    }

    /// Stops the helper and waits for it: the lookup loads nothing. No later lookup of the process starts one (the
    /// first load opens the session itself, as libsecret does): a process whose lookups keep finding nothing (a
    /// keyring locked, a token not yet set) would otherwise make a key pair, and leave the service a session it
    /// never uses, at every lookup.
    func abandon() {
        guard thread != nil else { return }
        Self.stopped.store(true, ordering: .relaxed)
        g_cancellable_cancel(cancellable)
        finish()
    }

    /// Set once a helper was stopped (`abandon`).
    private static let stopped = Atomic<Bool>(false)

    deinit { abandon() }

    /// What the helper thread is given (the opener keeps both alive until it has joined the thread).
    private struct Call: @unchecked Sendable {
        let service: UnsafeMutablePointer<SecretService>
        let cancellable: UnsafeMutablePointer<GCancellable>
    }

    private func release() {
        g_cancellable_disconnect(deadline, handler)
        g_object_unref(cancellable)
        g_object_unref(service)
    }
}
#endif
