// The plumbing under every LibSecret call (LibSecret.swift): the bounded call, the service and collection
// lookups, searches, property reads, GVariant decoding and GError classification.
#if SecretService
internal import CSecret
import SystemLayer

extension LibSecret {
    /// Runs `body` with a cancellable that is cancelled at `deadline`, classifying a cancellation as a timeout.
    /// A daemon that died under libsecret's cached connection is retried once on a fresh connection.
    static func call<Result>(
        deadline: Duration,
        _ body: (UnsafeMutablePointer<GCancellable>) throws(SecretServiceFailure) -> Result
    ) throws(SecretServiceFailure) -> Result {
        try loadLibrary()
        let timer = DeadlineTimer(after: deadline)
        defer { timer.disarm() }
        do {
            return try body(timer.cancellable)
        } catch let failure
            where (failure.kind == .other && failure.isDeadProvider)
            || (failure.kind == .noSecretService && FlatpakSandbox.current != nil)
        {
            // libsecret stays bound to the unique name of a daemon that is gone; reconnect once. Inside a sandbox
            // the bus proxy answers a call to a vanished unique name with the same bare ServiceUnknown as a hidden
            // name, so that is retried once too.
            secret_service_disconnect()
            do {
                return try body(timer.cancellable)
            } catch {
                throw timer.classify(error)
            }
        } catch {
            throw timer.classify(error)
        }
    }

    /// The process's shared service proxy (a new reference: release it with `g_object_unref`).
    static func sharedService(
        _ cancellable: UnsafeMutablePointer<GCancellable>
    )
        throws(SecretServiceFailure) -> UnsafeMutablePointer<SecretService>
    {
        var error: UnsafeMutablePointer<GError>?
        guard let service = secret_service_get_sync(SECRET_SERVICE_NONE, cancellable, &error) else {
            throw failure(taking: error, fallback: "connecting to the Secret Service failed")
        }
        return service
    }

    /// The path of the collection `alias` names, after checking with a property read (never a prompt) that it
    /// is unlocked; a locked one is unlocked through its prompt when `prompting` allows it.
    static func unlockedCollection(
        _ alias: String, service: UnsafeMutablePointer<SecretService>, prompting: Prompting,
        _ cancellable: UnsafeMutablePointer<GCancellable>
    ) throws(SecretServiceFailure) -> String {
        guard let path = try aliasPath(alias, service: service, cancellable) else {
            throw SecretServiceFailure(.noDefaultCollection, message: "the Secret Service has no '\(alias)' collection")
        }
        guard
            try lockedProperty(
                of: path, interface: "org.freedesktop.Secret.Collection", service: service, cancellable)
        else { return path }
        guard prompting == .allowed else {
            throw SecretServiceFailure(.locked, message: "the '\(alias)' collection is locked")
        }
        guard try unlock([path], service: service, cancellable).contains(path) else {
            throw SecretServiceFailure(
                .locked, message: "the '\(alias)' collection is locked: its unlock prompt was dismissed")
        }
        return path
    }

    /// Items locked in an unlocked collection: the provider approves access per item and per client. Asks for
    /// the approval when `prompting` allows it, else answers `notApproved`.
    static func approve(
        _ paths: [String], service: UnsafeMutablePointer<SecretService>, prompting: Prompting,
        _ cancellable: UnsafeMutablePointer<GCancellable>
    ) throws(SecretServiceFailure) {
        var failure: SecretServiceFailure
        if prompting == .allowed {
            let unlocked = try unlock(paths, service: service, cancellable)
            guard !paths.allSatisfy(unlocked.contains) else { return }
            failure = SecretServiceFailure(
                .notApproved, message: "access to the keyring item was not approved (the prompt was declined)")
        } else {
            failure = SecretServiceFailure(
                .notApproved, message: "access to the keyring item is not approved for this program")
        }
        failure.provider = provider(service: service, cancellable)
        throw failure
    }

    /// The specification's `Unlock` on exactly `paths`, performing the prompt it returns (bounded by the
    /// call's cancellable). Returns the paths that are unlocked now.
    static func unlock(
        _ paths: [String], service: UnsafeMutablePointer<SecretService>,
        _ cancellable: UnsafeMutablePointer<GCancellable>
    ) throws(SecretServiceFailure) -> [String] {
        let copies = paths.map { g_strdup($0) }
        defer { copies.forEach { g_free($0) } }
        var vector: [UnsafePointer<gchar>?] = copies.map { UnsafePointer($0) } + [nil]
        var error: UnsafeMutablePointer<GError>?
        var unlocked: UnsafeMutablePointer<UnsafeMutablePointer<gchar>?>?
        let count = vector.withUnsafeMutableBufferPointer { buffer in
            secret_service_unlock_dbus_paths_sync(service, buffer.baseAddress, cancellable, &unlocked, &error)
        }
        defer { g_strfreev(unlocked) }
        if count < 0 || error != nil { throw failure(taking: error, fallback: "unlocking failed") }
        return strings(unlocked)
    }

    /// The strings of a NULL-terminated vector (not freed).
    static func strings(_ vector: UnsafeMutablePointer<UnsafeMutablePointer<gchar>?>?) -> [String] {
        guard var p = vector else { return [] }
        var out: [String] = []
        while let s = p.pointee {
            out.append(String(cString: s))
            p += 1
        }
        return out
    }

    /// Searches every collection, locked or not, without unlocking and without a schema (with a schema,
    /// gnome-keyring cannot match items of a keyring not unlocked since it started). Items of other schemas
    /// that happen to share the attributes are dropped; with no `schema`, items of every schema are kept.
    static func search(
        service: UnsafeMutablePointer<SecretService>, schema: Schema?, attributes: [String: String],
        _ cancellable: UnsafeMutablePointer<GCancellable>
    ) throws(SecretServiceFailure) -> [UnsafeMutablePointer<SecretItem>] {
        let table = hashTable(attributes)
        defer { g_hash_table_unref(table) }
        var error: UnsafeMutablePointer<GError>?
        let list = secret_service_search_sync(service, nil, table, SECRET_SEARCH_ALL, cancellable, &error)
        if let error {
            g_list_free_full(list, g_object_unref)
            throw failure(taking: error, fallback: "searching the Secret Service failed")
        }
        defer { g_list_free(list) }
        var items: [UnsafeMutablePointer<SecretItem>] = []
        var node = list
        while let current = node {
            let item = current.pointee.data.assumingMemoryBound(to: SecretItem.self)
            let name = secret_item_get_schema_name(item)
            defer { g_free(name) }
            // Locked items may not expose their attributes' schema name; keep them (their attributes matched).
            if schema == nil || name == nil || String(cString: name!) == schema?.name {
                items.append(item)
            } else {
                g_object_unref(item)
            }
            node = current.pointee.next
        }
        return items
    }

    /// Searches every collection, locked or not, without unlocking and without a schema (see `search`), and
    /// returns the object paths of the matching unlocked and locked items.
    static func searchPaths(
        service: UnsafeMutablePointer<SecretService>, attributes: [String: String],
        _ cancellable: UnsafeMutablePointer<GCancellable>
    ) throws(SecretServiceFailure) -> (unlocked: [String], locked: [String]) {
        let table = hashTable(attributes)
        defer { g_hash_table_unref(table) }
        var error: UnsafeMutablePointer<GError>?
        var unlocked: UnsafeMutablePointer<UnsafeMutablePointer<gchar>?>?
        var locked: UnsafeMutablePointer<UnsafeMutablePointer<gchar>?>?
        let ok = secret_service_search_for_dbus_paths_sync(service, nil, table, cancellable, &unlocked, &locked, &error)
        defer {
            g_strfreev(unlocked)
            g_strfreev(locked)
        }
        guard ok != 0 else { throw failure(taking: error, fallback: "searching the Secret Service failed") }
        return (strings(unlocked), strings(locked))
    }

    /// Loads the secret of the unlocked item at `path` (opening the transfer session on first use).
    static func loadSecret(
        path: String, service: UnsafeMutablePointer<SecretService>, _ cancellable: UnsafeMutablePointer<GCancellable>
    )
        throws(SecretServiceFailure) -> Secret
    {
        var error: UnsafeMutablePointer<GError>?
        guard let value = secret_service_get_secret_for_dbus_path_sync(service, path, cancellable, &error) else {
            if error != nil { throw failure(taking: error, fallback: "loading the secret failed") }
            // The item locked itself (or vanished) between the search and the load.
            throw SecretServiceFailure(.locked, message: "the keyring item is locked")
        }
        return secret(from: value)
    }

    /// Copies a SecretValue into guarded memory and releases it.
    static func secret(from value: OpaquePointer) -> Secret {
        defer { secret_value_unref(UnsafeMutableRawPointer(value)) }
        var length = 0
        let bytes = secret_value_get(value, &length)
        let contentType = secret_value_get_content_type(value).map { String(cString: $0) } ?? binaryContentType
        let secret = SecretBytes(count: length) { output in
            if length > 0, let bytes { output.copyMemory(from: UnsafeRawBufferPointer(start: bytes, count: length)) }
        }
        return Secret(bytes: secret, contentType: contentType)
    }

    /// The object path of the collection an alias names (one ReadAlias call, no proxy), nil when it names none.
    static func aliasPath(
        _ alias: String, service: UnsafeMutablePointer<SecretService>,
        _ cancellable: UnsafeMutablePointer<GCancellable>
    ) throws(SecretServiceFailure) -> String? {
        var error: UnsafeMutablePointer<GError>?
        let path = secret_service_read_alias_dbus_path_sync(service, alias, cancellable, &error)
        defer { g_free(path) }
        if error != nil { throw failure(taking: error, fallback: "reading the '\(alias)' alias failed") }
        // The service answers "/" for an alias that names no collection.
        guard let path, String(cString: path) != "/" else { return nil }
        return String(cString: path)
    }

    /// The collection an alias names (a new reference: release it with `g_object_unref`), nil when it names
    /// none. Often the first real call to the service, so a missing service fails here, with its error.
    static func collection(
        alias: String, service: UnsafeMutablePointer<SecretService>, _ cancellable: UnsafeMutablePointer<GCancellable>
    ) throws(SecretServiceFailure) -> UnsafeMutablePointer<SecretCollection>? {
        var error: UnsafeMutablePointer<GError>?
        guard
            let collection = secret_collection_for_alias_sync(
                service, alias, SECRET_COLLECTION_NONE, cancellable, &error)
        else {
            if error != nil { throw failure(taking: error, fallback: "reading the '\(alias)' alias failed") }
            return nil
        }
        return collection
    }

    static func collectionState(
        service: UnsafeMutablePointer<SecretService>, alias: String, _ cancellable: UnsafeMutablePointer<GCancellable>
    ) throws(SecretServiceFailure) -> CollectionState {
        // ReadAlias and a property read: no proxy (whose cached Locked property only a main loop would
        // refresh), no prompt.
        guard let path = try aliasPath(alias, service: service, cancellable) else { return .missing }
        let locked = try lockedProperty(
            of: path, interface: "org.freedesktop.Secret.Collection", service: service, cancellable)
        return locked ? .locked : .unlocked
    }

    /// Reads the `Locked` property of an object with a fresh D-Bus call; anything unreadable counts as locked.
    static func lockedProperty(
        of path: String?, interface: String, service: UnsafeMutablePointer<SecretService>,
        _ cancellable: UnsafeMutablePointer<GCancellable>
    ) throws(SecretServiceFailure) -> Bool {
        guard let path else { return true }
        return try property(
            "Locked", of: path, interface: interface, service: service, cancellable,
            decode: Variant.bool) ?? true
    }

    /// Reads one D-Bus property with `org.freedesktop.DBus.Properties.Get` on the service's own connection
    /// (libsecret's proxies cache properties that only a main loop would refresh).
    ///
    /// - Returns: the decoded value, or `nil` when the reply does not have the expected type.
    static func property<Value>(
        _ name: String, of path: String, interface: String, service: UnsafeMutablePointer<SecretService>,
        _ cancellable: UnsafeMutablePointer<GCancellable>, decode: (OpaquePointer) -> Value?
    ) throws(SecretServiceFailure) -> Value? {
        let proxy = UnsafeMutableRawPointer(service).assumingMemoryBound(to: GDBusProxy.self)
        var error: UnsafeMutablePointer<GError>?
        // (interface, name), built without glib's variadic constructors.
        var arguments: [OpaquePointer?] = [g_variant_new_string(interface), g_variant_new_string(name)]
        let reply = g_dbus_connection_call_sync(
            g_dbus_proxy_get_connection(proxy), g_dbus_proxy_get_name(proxy), path,
            "org.freedesktop.DBus.Properties", "Get", g_variant_new_tuple(&arguments, 2),
            nil, G_DBUS_CALL_FLAGS_NO_AUTO_START, -1, cancellable, &error)
        guard let reply else {
            throw failure(taking: error, fallback: "reading \(name) of \(path) failed")
        }
        defer { g_variant_unref(reply) }
        // The reply is "(v)".
        guard Variant.type(reply) == "(v)", let boxed = g_variant_get_child_value(reply, 0) else { return nil }
        defer { g_variant_unref(boxed) }
        guard let inner = g_variant_get_variant(boxed) else { return nil }
        defer { g_variant_unref(inner) }
        return decode(inner)
    }

    /// Decoders for the GVariant shapes the Secret Service uses.
    enum Variant {
        static func type(_ value: OpaquePointer) -> String {
            String(cString: g_variant_get_type_string(value))
        }

        static func bool(_ value: OpaquePointer) -> Bool? {
            type(value) == "b" ? g_variant_get_boolean(value) != 0 : nil
        }

        static func string(_ value: OpaquePointer) -> String? {
            type(value) == "s" ? String(cString: g_variant_get_string(value, nil)) : nil
        }

        static func objectPaths(_ value: OpaquePointer) -> [String]? {
            guard type(value) == "ao" else { return nil }
            return (0..<g_variant_n_children(value)).compactMap { index in
                guard let child = g_variant_get_child_value(value, index) else { return nil }
                defer { g_variant_unref(child) }
                return String(cString: g_variant_get_string(child, nil))
            }
        }
    }

    static func objectPath<T>(_ proxy: UnsafeMutablePointer<T>) -> String? {
        let raw = UnsafeMutableRawPointer(proxy).assumingMemoryBound(to: GDBusProxy.self)
        return g_dbus_proxy_get_object_path(raw).map { String(cString: $0) }
    }

    static func hashTable(_ attributes: [String: String]) -> OpaquePointer {
        let table = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free)!
        for (key, value) in attributes {
            g_hash_table_insert(table, g_strdup(key), g_strdup(value))
        }
        return table
    }

    static func checkAttributes(_ attributes: [String: String], schema: Schema) {
        // A programmer error: the schema decides which attributes exist.
        for key in attributes.keys {
            precondition(schema.attributeNames.contains(key), "attribute '\(key)' is not in schema \(schema.name)")
        }
        precondition(!attributes.isEmpty, "an empty attribute set would match every item of every application")
    }

    /// Converts and frees a GError; `error` may be nil when libsecret failed without one.
    static func failure(taking error: UnsafeMutablePointer<GError>?, fallback: String) -> SecretServiceFailure {
        guard let error else { return SecretServiceFailure(.other, message: fallback) }
        defer { g_error_free(error) }
        let domain = String(cString: g_quark_to_string(error.pointee.domain))
        let code = error.pointee.code
        let message = error.pointee.message.map { String(cString: $0) } ?? fallback
        return SecretServiceFailure(
            classify(domain: error.pointee.domain, code: code, message: message),
            domain: domain, code: code, message: message)
    }

    static func classify(domain: GQuark, code: Int32, message: String) -> SecretServiceFailure.Kind {
        if domain == g_io_error_quark() {
            switch code {
            case Int32(G_IO_ERROR_CANCELLED.rawValue), Int32(G_IO_ERROR_TIMED_OUT.rawValue): return .timeout
            // Connecting to the bus failed: no address and no X11 to autolaunch, a dead socket, a refused
            // connection. Once connected, calls fail with D-Bus errors instead.
            default: return .noSessionBus
            }
        }
        if domain == g_spawn_exit_error_quark() {
            return .noSessionBus  // dbus-launch --autolaunch failed
        }
        if domain == g_dbus_error_quark() {
            switch code {
            case Int32(G_DBUS_ERROR_SERVICE_UNKNOWN.rawValue), Int32(G_DBUS_ERROR_NAME_HAS_NO_OWNER.rawValue):
                // "The name org.freedesktop.secrets was not provided by any .service files"; a unique name
                // such as ":1.4" instead means the daemon died under a cached connection (see isDeadProvider).
                // Inside a Flatpak sandbox the bus proxy answers a bare "ServiceUnknown" for every name its filter
                // hides: no Secret Service is reachable from there.
                if message.contains("org.freedesktop.secrets") { return .noSecretService }
                return FlatpakSandbox.current != nil && !message.contains("The name :") ? .noSecretService : .other
            case Int32(G_DBUS_ERROR_NO_REPLY.rawValue), Int32(G_DBUS_ERROR_TIMEOUT.rawValue),
                Int32(G_DBUS_ERROR_TIMED_OUT.rawValue):
                return .timeout
            case Int32(G_DBUS_ERROR_NO_SERVER.rawValue), Int32(G_DBUS_ERROR_DISCONNECTED.rawValue),
                Int32(G_DBUS_ERROR_FILE_NOT_FOUND.rawValue):
                return .noSessionBus
            default:
                return .other
            }
        }
        if domain == secret_error_get_quark(), code == Int32(SECRET_ERROR_IS_LOCKED.rawValue) {
            return .locked
        }
        return .other
    }
}

extension SecretServiceFailure {
    /// D-Bus reports a vanished daemon by its unique name (":1.12"), which is how we tell it from "no service".
    package var isDeadProvider: Bool {
        domain == "g-dbus-error-quark" && message.contains("The name :")
    }
}
#endif
