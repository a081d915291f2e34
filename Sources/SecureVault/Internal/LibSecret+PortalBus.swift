#if SecretService
internal import CSecret
import SystemLayer

extension SecretPortal {
    /// The process's connection to the session bus for the Secret portal's requests, a connection of its own (not
    /// GLib's shared one), made by the first request and used again while it is open.
    ///
    /// Why its own: the request must be bounded without a thread of the vault's own to cancel it. Connecting goes
    /// through a socket whose timeout is the request's deadline (rounded up to a whole second, GSocket's unit), so
    /// that a bus that accepts and never answers ends the authentication with `G_IO_ERROR_TIMED_OUT`; the
    /// socket's timeout bounds each read, so a bus answering each line of the authentication just before it could
    /// stretch connecting to a few times the deadline, never without bound. The call has a timeout of its own,
    /// and the Response is awaited in the call's own main context, where a timeout source ends the wait. GLib's
    /// `g_bus_get_sync` takes a cancellable only, which something must cancel at the deadline: a thread
    /// (`DeadlineTimer`), whose wake-ups cost a fresh process's only request about a third of a millisecond on two
    /// busy cores (PerformanceIssues36-39.md, issue 36, stop 52); and its Hello after the authentication waited up to GLib's own 25 s, which the
    /// socket's timeout bounds here too. (GDBus's own worker thread runs either way.)
    ///
    /// A request's clean-up (the Response subscriptions, its main context) is left to the next request of the
    /// process, which releases the holds of the requests before it first, before its own connecting: not on the
    /// path of a process's first request. The connection is made with a main context of `Bus`'s own as the
    /// thread's default, where GDBus queues its `closed` signal (with a reference to the connection); each request
    /// runs it first, so that a connection that closed is freed, whether or not the app runs a main loop.
    enum Bus {
        /// The connection, and the holds of the requests that finished since the last request began (a chain,
        /// newest first: a list would make a fresh process build an array type's metadata on its first request).
        private struct State: ~Copyable {
            var connection: Connection?
            var spent: RequestHold?
        }

        private static let state = SanitizedMutex(State())
        /// `Bus`'s main context, used by one thread at a time: the one that holds this lock (pushing a context
        /// acquires it, which fails while another thread has it).
        private static let context = SanitizedMutex(MainContext())

        /// A reference to the process's connection (the caller unrefs it), made within `end` when there is none
        /// or it closed. The holds of the requests before are released first. Requests that find no connection
        /// connect one at a time, and the later ones use the connection the first made.
        static func connection(until end: ContinuousClock.Instant) throws(PortalFailure) -> OpaquePointer {
            var spent = state.withLock { state -> RequestHold? in
                defer { state.spent = nil }
                return state.spent
            }
            while let hold = spent {
                spent = hold.next
                hold.release()
            }
            return try context.withLock { (context: inout MainContext) throws(PortalFailure) -> OpaquePointer in
                while g_main_context_iteration(context.pointer, 0) != 0 {}
                let open = state.withLock { state -> Connection? in
                    if let connection = state.connection, g_dbus_connection_is_closed(connection.pointer) != 0 {
                        state.connection = nil
                    }
                    return state.connection
                }
                if let open {
                    g_object_ref(UnsafeMutableRawPointer(open.pointer))
                    return open.pointer
                }
                guard ContinuousClock.now < end else {
                    throw PortalFailure(
                        kind: .timeout, code: .timeout,
                        message: "connecting to the session bus: the deadline passed while another request of this "
                            + "process was connecting")
                }
                g_main_context_push_thread_default(context.pointer)
                defer { g_main_context_pop_thread_default(context.pointer) }
                let made = try connect(until: end)
                g_object_ref(UnsafeMutableRawPointer(made))
                let kept = Connection(made)
                state.withLock { state in state.connection = kept }
                return made
            }
        }

        /// Keeps a finished request's hold until the next request releases it (the caller has popped its context).
        static func park(_ hold: RequestHold) {
            state.withLock { state in
                hold.next = state.spent
                state.spent = hold
            }
        }

        /// The next request makes a new connection: `connection`'s call got no answer, and the read GDBus began
        /// while it was connecting may still have the socket's timeout, which would close it under a later request.
        /// (Requests running at once with the first may use it before any call answered; one of them cut short by
        /// such a close past its deadline is a timeout, `retrieveSecret`.) Freed when the last request that holds
        /// it is released.
        static func discard(_ connection: OpaquePointer) {
            state.withLock { state in
                if state.connection?.pointer == connection { state.connection = nil }
            }
        }

        /// A Unix socket a D-Bus address names.
        struct UnixSocket: Equatable {
            var path: String
            var abstract: Bool
        }

        /// The Unix sockets `address` (`DBUS_SESSION_BUS_ADDRESS`) names, in its order: its `unix:path=` and
        /// `unix:abstract=` entries, values unescaped; entries of other transports (a sandbox's bus is a Unix
        /// socket: flatpak's proxy) and malformed entries are skipped. Without an address, `$XDG_RUNTIME_DIR/bus`,
        /// where GLib and libdbus look next (no autolaunch: there is no X11 session to start a bus for in a
        /// sandbox).
        static func unixSockets(address: String?, runtimeDirectory: String?) -> [UnixSocket] {
            guard let address, !address.isEmpty else {
                guard let runtimeDirectory, !runtimeDirectory.isEmpty else { return [] }
                return [UnixSocket(path: Sys.joinPath(runtimeDirectory, "bus"), abstract: false)]
            }
            var sockets: [UnixSocket] = []
            for entry in address.utf8.split(separator: UInt8(ascii: ";"), omittingEmptySubsequences: true) {
                guard let colon = entry.firstIndex(of: UInt8(ascii: ":")),
                    entry[..<colon].elementsEqual("unix".utf8)
                else { continue }
                for pair in entry[entry.index(after: colon)...].split(separator: UInt8(ascii: ",")) {
                    guard let equals = pair.firstIndex(of: UInt8(ascii: "=")) else { continue }
                    let key = pair[..<equals]
                    let abstract = key.elementsEqual("abstract".utf8)
                    guard abstract || key.elementsEqual("path".utf8),
                        let path = unescaped(pair[pair.index(after: equals)...]), !path.isEmpty
                    else { continue }
                    sockets.append(UnixSocket(path: path, abstract: abstract))
                    break
                }
            }
            return sockets
        }

        /// A D-Bus address value with its `%XX` escapes decoded; nil when an escape is malformed, or the value holds
        /// a NUL, is not UTF-8 or is longer than a socket address holds (107 bytes; GLib would cut it short).
        private static func unescaped(_ value: Substring.UTF8View.SubSequence) -> String? {
            var bytes: [UInt8] = []
            bytes.reserveCapacity(value.count)
            var index = value.startIndex
            while index < value.endIndex {
                var byte = value[index]
                if byte == UInt8(ascii: "%") {
                    let high = value.index(after: index)
                    guard high < value.endIndex, value.index(after: high) < value.endIndex,
                        let h = hexDigit(value[high]), let l = hexDigit(value[value.index(after: high)])
                    else { return nil }
                    byte = h << 4 | l
                    index = value.index(after: high)
                }
                guard byte != 0 else { return nil }
                bytes.append(byte)
                index = value.index(after: index)
            }
            guard bytes.count <= 107 else { return nil }
            return String(validating: bytes, as: UTF8.self)
        }

        private static func hexDigit(_ byte: UInt8) -> UInt8? {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
            default: nil
            }
        }

        /// A new connection to the session bus, authenticated and named (Hello), tried on each socket the address
        /// names until one answers.
        private static func connect(until end: ContinuousClock.Instant) throws(PortalFailure) -> OpaquePointer {
            let address = Sys.environment("DBUS_SESSION_BUS_ADDRESS")
            let sockets = unixSockets(address: address, runtimeDirectory: Sys.environment("XDG_RUNTIME_DIR"))
            var last = PortalFailure(
                code: .unavailable,
                message: "connecting to the session bus: no D-Bus session bus is reachable ("
                    + (address.map { "DBUS_SESSION_BUS_ADDRESS \($0) names no Unix socket" }
                        ?? "DBUS_SESSION_BUS_ADDRESS and XDG_RUNTIME_DIR are not set") + ")")
            for socket in sockets where ContinuousClock.now < end {
                do {
                    return try connect(to: socket, until: end)
                } catch {
                    last = error
                    if error.kind == .timeout { break }
                }
            }
            throw last
        }

        private static func connect(
            to target: UnixSocket, until end: ContinuousClock.Instant
        ) throws(PortalFailure) -> OpaquePointer {
            let doing = "connecting to the session bus at \(target.path)"
            var error: UnsafeMutablePointer<GError>?
            guard let socket = g_socket_new(G_SOCKET_FAMILY_UNIX, G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_DEFAULT, &error)
            else { throw failure(taking: error, doing: "making a socket") }
            defer { g_object_unref(socket) }
            let left = ContinuousClock.now.duration(to: end)
            let seconds = left.components.seconds + (left.components.attoseconds > 0 ? 1 : 0)
            g_socket_set_timeout(socket, UInt32(clamping: max(1, seconds)))
            let address = g_unix_socket_address_new_with_type(
                target.path, -1, target.abstract ? G_UNIX_SOCKET_ADDRESS_ABSTRACT : G_UNIX_SOCKET_ADDRESS_PATH)!
            defer { g_object_unref(address) }
            guard g_socket_connect(socket, address, nil, &error) != 0 else {
                throw failure(taking: error, doing: doing, connecting: true)
            }
            // A GUnixConnection: the authentication offers file descriptor passing, which RetrieveSecret needs.
            let stream = g_socket_connection_factory_create_connection(socket)!
            defer { g_object_unref(stream) }
            guard let connection = dbusConnection(on: stream, error: &error) else {
                // A bus silent after the authentication (its Hello unanswered) ends as a read that timed out, which
                // GDBus reports as the connection closing: past the deadline, that is the timeout.
                let closed = error.map {
                    $0.pointee.domain == g_io_error_quark() && $0.pointee.code == Int32(G_IO_ERROR_CLOSED.rawValue)
                }
                var failed = failure(taking: error, doing: doing, connecting: true)
                if closed == true, ContinuousClock.now >= end {
                    failed.kind = .timeout
                    failed.code = .timeout
                    failed.message = "\(doing): the bus did not answer its Hello (\(failed.gError?.message ?? ""))"
                }
                throw failed
            }
            // Connected: the socket's reads from now on are GDBus's, which must not end at a timeout. A read GDBus's
            // worker began before this line keeps it: it ends with the next message, the call's reply; a call that
            // fails discards the connection (`discard`). (GDBus's worker reads the timeout as its reads begin: one
            // word, written once more here.)
            g_socket_set_timeout(socket, 0)
            return connection
        }

        /// A message bus connection on `stream`, authenticated and named, with the flags `g_bus_get` gives its own:
        /// CROSS_NAMESPACE among them from GLib 2.74 (the EXTERNAL authentication names no uid, which a sandbox's
        /// user namespace may map differently from the bus's). Made as `g_bus_get` makes it, from its properties:
        /// `g_dbus_connection_new_sync` of GLib 2.74 refuses that flag.
        private static func dbusConnection(
            on stream: UnsafeMutablePointer<GSocketConnection>, error: inout UnsafeMutablePointer<GError>?
        ) -> OpaquePointer? {
            var flags = G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT.rawValue
                | G_DBUS_CONNECTION_FLAGS_MESSAGE_BUS_CONNECTION.rawValue
            if glib_check_version(2, 74, 0) == nil { flags |= 1 << 6 }  // G_DBUS_CONNECTION_FLAGS_CROSS_NAMESPACE
            // Two GValues and two names in tuples, not arrays: a fresh process would build the arrays' metadata.
            var values = (GValue(), GValue())
            let object = withUnsafeMutableBytes(of: &values) { raw in
                let values = raw.bindMemory(to: GValue.self)
                g_value_init(&values[0], g_io_stream_get_type())
                g_value_set_object(&values[0], UnsafeMutableRawPointer(stream))
                g_value_init(&values[1], g_dbus_connection_flags_get_type())
                g_value_set_flags(&values[1], flags)
                defer {
                    g_value_unset(&values[0])
                    g_value_unset(&values[1])
                }
                return "stream".withCString { stream in
                    "flags".withCString { flags in
                        var names = (Optional(stream), Optional(flags))
                        return withUnsafeMutableBytes(of: &names) { names in
                            g_object_new_with_properties(
                                g_dbus_connection_get_type(), 2,
                                names.baseAddress!.assumingMemoryBound(to: UnsafePointer<CChar>?.self),
                                values.baseAddress!)!
                        }
                    }
                }
            }
            let initable = OpaquePointer(object)
            guard g_initable_init(initable, nil, &error) != 0 else {
                g_object_unref(object)
                return nil
            }
            return OpaquePointer(object)
        }

        /// A GMainContext (`@unchecked Sendable`: kept under `context`'s lock).
        private struct MainContext: @unchecked Sendable {
            let pointer = g_main_context_new()!
        }

        /// A strong reference to a GDBusConnection (`@unchecked Sendable`: GDBus connections are thread-safe).
        private final class Connection: @unchecked Sendable {
            let pointer: OpaquePointer
            init(_ pointer: OpaquePointer) { self.pointer = pointer }
            deinit { g_object_unref(UnsafeMutableRawPointer(pointer)) }
        }
    }
}
#endif
