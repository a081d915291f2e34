#if SecretService
internal import CSecret
import SystemLayer

extension SecretPortal {
    /// The app's portal secret. Throws `unavailable` on the host (never calling the portal), without a session
    /// bus, portal or Secret backend; `locked` when the portal refuses (a locked keyring); `timeout` past
    /// `deadline`.
    static func retrieveSecret(operation: String, deadline: Duration) throws(VaultError) -> Secret {
        guard let sandbox = FlatpakSandbox.current else {
            throw VaultError(
                code: .unavailable,
                message: "\(operation): the Secret portal key store works only inside a Flatpak sandbox (there is no "
                    + "\(FlatpakSandbox.infoPath)); on the host the portal hands every program one shared secret. "
                    + "Use secret-service (the keyring) or a key file on the host")
        }
        do throws(SecretServiceFailure) {
            try LibSecret.loadLibrary()
        } catch {
            throw VaultError(error, operation: operation)
        }
        let end = ContinuousClock.now + deadline
        do throws(PortalFailure) {
            return try retrieve(appID: sandbox.appID, end: end)
        } catch {
            var failure = error
            // Past the deadline, whatever ended the request is the deadline's (a call cut short as its connection
            // closed at the socket's timeout, say).
            if error.kind == .timeout || ContinuousClock.now >= end {
                failure.code = .timeout
                failure.message =
                    "the Secret portal did not answer within \(deadline) (\(error.message)); a stopped "
                    + "keyring daemon never answers: start it (log in again) and retry"
            }
            throw VaultError(failure, operation: operation)
        }
    }

    /// The portal's secret: the start of a guarded buffer (read there, not copied to one of its own length: a
    /// guarded allocation costs more than the key derivation that reads it).
    struct Secret {
        private let buffer: SecretBytes
        /// Its length in bytes (at least 1).
        let count: Int

        fileprivate init(buffer: SecretBytes, count: Int) {
            precondition(count > 0 && count <= buffer.count)
            self.buffer = buffer
            self.count = count
        }

        func withUnsafeBytes<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
            try buffer.withUnsafeBytes { try body(UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
        }
    }

    private static let busName = "org.freedesktop.portal.Desktop"
    private static let objectPath = "/org/freedesktop/portal/desktop"

    private static func retrieve(appID: String, end: ContinuousClock.Instant) throws(PortalFailure) -> Secret {
        // The process's connection of its own, got before this call's context is pushed (`Bus`: connecting is
        // bounded by its socket's timeout).
        let connection = try Bus.connection(until: end)
        // A main context of this call's own: the Response signal is dispatched in it, and nowhere else. What the
        // request holds is released by the process's next request (`Bus.park`), off this one's path.
        let context = g_main_context_new()!
        g_main_context_push_thread_default(context)
        let hold = RequestHold(connection: connection, context: context)
        defer {
            g_main_context_pop_thread_default(context)
            Bus.park(hold)
        }
        guard let unique = g_dbus_connection_get_unique_name(connection) else {
            throw PortalFailure(code: .unavailable, message: "the session bus gave this connection no name")
        }
        // The Request's path is fixed by the sender's name and the token: subscribe before calling, so that a
        // Response sent before the call returns is not missed.
        let token = requestToken()
        let requestPath = "/org/freedesktop/portal/desktop/request/\(requestSender(unique))/\(token)"
        let response = ResponseBox()
        hold.subscriptions.append(subscribe(connection, path: requestPath, response: response))

        // The pipe the backend writes the secret into; the portal gets the write end, this process keeps none.
        let (readEnd, writeEnd): (Int32, Int32)
        switch Sys.pipe() {
        case .success(let ends): (readEnd, writeEnd) = ends
        case .failure(let errno):
            throw PortalFailure(code: .io, message: "cannot make a pipe: \(errno.text)", errno: errno)
        }
        defer { Sys.close(readEnd) }
        // The list holds a copy of the write end until it is freed: freed right after the call, so that the
        // pipe ends (EOF) once the backend has written and closed its copy.
        var error: UnsafeMutablePointer<GError>?
        let fdList = g_unix_fd_list_new()!
        let index = g_unix_fd_list_append(fdList, writeEnd, &error)
        Sys.close(writeEnd)
        guard index >= 0 else {
            g_object_unref(fdList)
            throw failure(taking: error, doing: "passing the pipe")
        }
        // Past the deadline (a connection waited for), no call: its timeout would cut it short and drop a
        // connection that may be sound.
        guard ContinuousClock.now < end else {
            g_object_unref(fdList)
            throw PortalFailure(kind: .timeout, code: .timeout, message: "no time left to call RetrieveSecret")
        }
        let reply = g_dbus_connection_call_with_unix_fd_list_sync(
            connection, busName, objectPath, "org.freedesktop.portal.Secret", "RetrieveSecret",
            parameters(fdIndex: index, token: token), nil, G_DBUS_CALL_FLAGS_NONE,
            remainingMilliseconds(until: end), fdList, nil, nil, &error)
        g_object_unref(fdList)
        guard let reply else {
            // An error the portal or the bus sent back is an answer; anything else (a timeout, the connection
            // closing) is none.
            if let error, g_dbus_error_is_remote_error(error) == 0 { Bus.discard(connection) }
            throw failure(taking: error, doing: "calling RetrieveSecret")
        }
        // The portal says which Request answers: trust it (a portal older than handle_token makes up its own).
        guard String(cString: g_variant_get_type_string(reply)) == "(o)" else {
            g_variant_unref(reply)
            throw PortalFailure(
                code: .io, message: "the Secret portal's reply to RetrieveSecret is not a request handle")
        }
        let handleValue = g_variant_get_child_value(reply, 0)
        let handle = String(cString: g_variant_get_string(handleValue, nil))
        g_variant_unref(handleValue)
        g_variant_unref(reply)
        if handle != requestPath { hold.subscriptions.append(subscribe(connection, path: handle, response: response)) }

        // Waits for Response, or for the deadline: a timeout source in the call's context ends the wait. The
        // request is never closed: see the type's comment.
        let timeout = g_timeout_source_new(UInt32(clamping: remainingMilliseconds(until: end)))!
        g_source_set_callback(
            timeout,
            { box in
                Unmanaged<ResponseBox>.fromOpaque(box!).takeUnretainedValue().expired = true
                return 0  // G_SOURCE_REMOVE
            }, Unmanaged.passRetained(response).toOpaque(),
            { box in Unmanaged<ResponseBox>.fromOpaque(box!).release() })
        g_source_attach(timeout, context)
        hold.timeout = timeout
        while response.code == nil, !response.expired {
            g_main_context_iteration(context, 1)
        }
        switch response.code {
        case nil:
            throw PortalFailure(kind: .timeout, code: .timeout, message: "no Response to the request \(handle)")
        case 0?:
            break
        case 1?:
            throw PortalFailure(
                code: .locked,
                message: "the Secret portal's request was cancelled (the user dismissed the keyring's prompt); "
                    + "unlock the keyring and retry")
        case let other?:
            // gnome-keyring answers 2, without detail, when the login keyring is locked.
            throw PortalFailure(
                code: .locked,
                message: "the Secret portal refused the request for app \(appID) (response \(other), no detail): "
                    + "most often the keyring is locked (log in, or unlock it in the keyring app); else the portal "
                    + "backend is broken (restart the keyring daemon: `gnome-keyring-daemon --replace --unlock`) "
                    + "or there is none for this desktop (xdg-desktop-portal's portals.conf)")
        }
        return try readSecret(from: readEnd, appID: appID, end: end)
    }

    /// The secret the portal's backend writes into the pipe `fd`, read until the backend closes it. Read into one
    /// guarded page first (gnome-keyring's secret is 64 bytes): a secret that fills it goes on into a buffer of
    /// `maximumLength`. A fresh process asks once, and a guarded buffer's cost grows with its pages.
    static func readSecret(
        from fd: Int32, appID: String, end: ContinuousClock.Instant
    ) throws(PortalFailure) -> Secret {
        var readFailure: Errno?
        var count = 0
        let page = SecretBytes(count: firstReadLength) { buffer in
            switch Sys.read(fd, into: buffer, untilClosedBefore: end) {
            case .success(let read): count = read
            case .failure(let errno): readFailure = errno
            }
        }
        var buffer = page
        if readFailure == nil, count == firstReadLength {
            buffer = SecretBytes(count: maximumLength) { buffer in
                page.withUnsafeBytes { buffer.copyMemory(from: $0) }
                switch Sys.readToEnd(fd, into: buffer, after: count, deadline: end) {
                case .success(let read): count = read
                case .failure(let errno): readFailure = errno
                }
            }
        }
        if let readFailure {
            if readFailure == .timedOut {
                throw PortalFailure(
                    kind: .timeout, code: .timeout, message: "the secret never arrived through the pipe")
            }
            throw PortalFailure(
                code: .io, message: "reading the portal's secret from its pipe failed: \(readFailure.text)",
                errno: readFailure)
        }
        guard count > 0 else {
            throw PortalFailure(code: .io, message: "the Secret portal answered with an empty secret for app \(appID)")
        }
        return Secret(buffer: buffer, count: count)
    }

    /// A fresh `handle_token`: "securevault_" and 16 random hex digits (the portal accepts letters, digits and
    /// underscores).
    private static func requestToken() -> String {
        "securevault_" + hex(Sodium.randomBytes(count: 8))
    }

    /// The sender's part of a Request path: the connection's unique name without its ':' and with '_' for each
    /// '.' (":1.42" is "1_42").
    private static func requestSender(_ unique: UnsafePointer<CChar>) -> String {
        let name = String(cString: unique).utf8.dropFirst()
        return String(decoding: name.map { $0 == UInt8(ascii: ".") ? UInt8(ascii: "_") : $0 }, as: UTF8.self)
    }

    /// `(h fd, a{sv} {"handle_token": <token>})`, built without the variadic `g_variant_new`.
    private static func parameters(fdIndex: Int32, token: String) -> OpaquePointer {
        let entryType = g_variant_type_new("{sv}")
        defer { g_variant_type_free(entryType) }
        var entry: [OpaquePointer?] = [
            g_variant_new_dict_entry(
                g_variant_new_string("handle_token"), g_variant_new_variant(g_variant_new_string(token)))
        ]
        let options = g_variant_new_array(entryType, &entry, 1)
        var fields: [OpaquePointer?] = [g_variant_new_handle(fdIndex), options]
        return g_variant_new_tuple(&fields, 2)
    }

    /// Subscribes `response` to the Response signal of the Request at `path`; the callback runs in this thread's
    /// default main context (the call's own) only. Each subscription holds a reference of its own, released by
    /// GLib's destroy notification, which the unsubscription queues in that context (run until idle before it is
    /// dropped).
    private static func subscribe(
        _ connection: OpaquePointer, path: String, response: ResponseBox
    ) -> UInt32 {
        g_dbus_connection_signal_subscribe(
            connection, busName, "org.freedesktop.portal.Request", "Response", path, nil,
            G_DBUS_SIGNAL_FLAGS_NONE,
            { _, _, _, _, _, parameters, userData in
                guard let parameters, let userData,
                    String(cString: g_variant_get_type_string(parameters)) == "(ua{sv})"
                else { return }
                let response = Unmanaged<ResponseBox>.fromOpaque(userData).takeUnretainedValue()
                let code = g_variant_get_child_value(parameters, 0)
                response.code = g_variant_get_uint32(code)
                g_variant_unref(code)
            }, Unmanaged.passRetained(response).toOpaque(),
            { userData in if let userData { Unmanaged<ResponseBox>.fromOpaque(userData).release() } })
    }

    /// The Response code, once it came. Touched only on the calling thread (the callbacks run in its context); the
    /// clean-up unsubscribes before it runs that context again, and GDBus drops what it queued for a removed
    /// subscription.
    private final class ResponseBox {
        var code: UInt32?
        /// The deadline passed (the call's timeout source fired).
        var expired = false
    }

    /// What a request holds until it is over: a reference to the connection, the call's main context, the Response
    /// subscriptions and the timeout source of the wait. Released by the process's next request (`Bus`), off this
    /// one's path: the unsubscriptions (each a message to the bus) and the context's last run (the subscriptions'
    /// destroy notifications, queued there, release their references) are about a tenth of a millisecond of a
    /// fresh process's only request (PerformanceIssues36-39.md, issue 36).
    ///
    /// `@unchecked Sendable`: filled by the calling thread, then parked under `Bus`'s lock (which orders the two)
    /// and never touched again by the caller; released once, by the thread that takes it from there.
    final class RequestHold: @unchecked Sendable {
        let connection: OpaquePointer
        let context: OpaquePointer
        var subscriptions: [UInt32] = []
        var timeout: UnsafeMutablePointer<GSource>?
        /// The hold parked before this one (`Bus`).
        var next: RequestHold?

        init(connection: OpaquePointer, context: OpaquePointer) {
            self.connection = connection
            self.context = context
        }

        /// Runs on the thread of a later request, the call's context popped by its caller (a context is run by one
        /// thread at a time: the caller's last iteration is over).
        func release() {
            if let timeout {
                g_source_destroy(timeout)
                g_source_unref(timeout)
            }
            for id in subscriptions { g_dbus_connection_signal_unsubscribe(connection, id) }
            while g_main_context_iteration(context, 0) != 0 {}
            g_main_context_unref(context)
            g_object_unref(UnsafeMutableRawPointer(connection))
        }
    }

    private static func remainingMilliseconds(until end: ContinuousClock.Instant) -> Int32 {
        let left = ContinuousClock.now.duration(to: end)
        return max(
            1, Int32(clamping: left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000))
    }

    static func failure(
        taking error: UnsafeMutablePointer<GError>?, doing what: String, connecting: Bool = false
    ) -> PortalFailure {
        guard let error else { return PortalFailure(code: .io, message: "\(what) failed") }
        defer { g_error_free(error) }
        let domain = error.pointee.domain
        let code = error.pointee.code
        let message = error.pointee.message.map { String(cString: $0) } ?? "\(what) failed"
        let cause = (domain: String(cString: g_quark_to_string(domain)), code: code, message: message)
        if domain == g_io_error_quark(),
            code == Int32(G_IO_ERROR_CANCELLED.rawValue) || code == Int32(G_IO_ERROR_TIMED_OUT.rawValue)
        {
            return PortalFailure(kind: .timeout, code: .timeout, message: "\(what): \(message)", gError: cause)
        }
        if connecting, domain == g_io_error_quark() || domain == g_spawn_exit_error_quark() {
            return PortalFailure(
                code: .unavailable, message: "\(what): no D-Bus session bus is reachable (\(message))", gError: cause)
        }
        if domain == g_dbus_error_quark() {
            switch code {
            case Int32(G_DBUS_ERROR_SERVICE_UNKNOWN.rawValue), Int32(G_DBUS_ERROR_NAME_HAS_NO_OWNER.rawValue):
                return PortalFailure(
                    code: .unavailable,
                    message: "\(what): no desktop portal (xdg-desktop-portal) is on the session bus", gError: cause)
            case Int32(G_DBUS_ERROR_UNKNOWN_METHOD.rawValue), Int32(G_DBUS_ERROR_UNKNOWN_INTERFACE.rawValue),
                Int32(G_DBUS_ERROR_UNKNOWN_OBJECT.rawValue):
                return PortalFailure(
                    code: .unavailable,
                    message: "\(what): the desktop portal offers no Secret portal (it needs a backend: gnome-keyring "
                        + "or KWallet for this desktop)", gError: cause)
            case Int32(G_DBUS_ERROR_NO_REPLY.rawValue), Int32(G_DBUS_ERROR_TIMEOUT.rawValue),
                Int32(G_DBUS_ERROR_TIMED_OUT.rawValue):
                return PortalFailure(kind: .timeout, code: .timeout, message: "\(what): \(message)", gError: cause)
            default:
                break
            }
        }
        if connecting {
            return PortalFailure(code: .io, message: "\(what): \(message)", gError: cause)
        }
        return PortalFailure(code: .io, message: "\(what): the desktop portal failed: \(message)", gError: cause)
    }
}
#endif
