// The only caller of libsecret and glib in the package.
//
// Three rules shape every function here (measured facts: shared/notes/secret-service-and-sodium.md):
// 1. Never prompt unless the app asked (`Prompting.allowed`). libsecret's plain lookup on a locked collection
//    starts a GUI unlock prompt (blocking forever where a display exists) and then returns NULL as if the item
//    were absent; cancelling that prompt makes gnome-keyring 42 abort; KeePassXC answers a search with every
//    database locked by showing an unlock dialog inside the call. So every call first reads the lock state of
//    the collection it needs (a property read, which no provider turns into a prompt) and answers `locked` at
//    once when it is locked; only then does it search (without the unlock flag and with no schema), and it
//    loads a secret only from an unlocked item. An item locked in an unlocked collection is a provider that
//    approves access per item and per client (KeePassXC's "Confirm when passwords are retrieved by clients"):
//    `notApproved`, its own answer. With `.allowed`, the exact collection or item is unlocked through the
//    specification's `Unlock` and its prompt, bounded by the call's deadline.
//    The prompts performed without `.allowed` are those KeePassXC returns for every `CreateItem` (into a
//    collection checked unlocked: no dialog) and every `Delete`, the latter only for a delete the app asked
//    for (a wipe, a rotation; an open dismisses it unperformed): KeePassXC creates and deletes nothing without
//    them, and shows a dialog from a delete's only when its user asked to confirm deletes.
// Deletion tells the truth: the secret is overwritten with random bytes first, the delete's prompt is bounded
// by the deadline (libsecret dismisses it when the call is cancelled; KeePassXC may leave its dialog open, and
// a later confirmation there still deletes), and a fresh search then says whether the item is really gone.
// 2. Every call is bounded: it runs with a GCancellable that a timer cancels at the deadline, because a hung
//    daemon otherwise blocks for D-Bus's 25 s default (50 s for some paths).
// 3. Every GError becomes a `SecretServiceFailure` that keeps its domain, code and message, classified as
//    locked / not approved / no session bus / no Secret Service / no default collection / timeout / other.

#if SecretService
internal import CSecret
import SystemLayer

extension SecretServiceFailure {
    /// libsecret could not be loaded in this process (Sources/CSecret): nothing was asked.
    static func notLoaded(_ reason: String) -> SecretServiceFailure {
        SecretServiceFailure(
            .notLoaded,
            message: "libsecret could not be loaded (\(reason)); install it (libsecret-1-0 on Debian and Ubuntu), "
                + "or use a key file, a systemd credential or the kernel keyring")
    }
}

extension LibSecret {
    /// Loads libsecret (with GIO, GObject and GLib) at the process's first use of it; every path into them starts
    /// here (`call`, the Secret portal's request). Afterwards one atomic check.
    static func loadLibrary() throws(SecretServiceFailure) {
        if let reason = csecret_secret_load() { throw .notLoaded(String(cString: reason)) }
    }

    /// The libsecret this process uses, as vaultctl's doctor reports it: the file the dynamic linker loaded, or why
    /// none could be (loading it if no call has yet).
    package static var library: String {
        if let reason = csecret_secret_load() { return "not loaded: \(String(cString: reason))" }
        return csecret_secret_path().map { String(cString: $0) } ?? "loaded"
    }

    // MARK: Operations

    /// Stores `secret` in the collection named by `alias` (normally "default"), replacing an item with the
    /// same attributes. Refuses, without prompting, when the collection is locked (unless `prompting` allows
    /// its unlock).
    package static func store(
        schema: Schema, attributes: [String: String], label: String, secret: SecretBytes,
        contentType: String = binaryContentType, collection alias: String = "default",
        prompting: Prompting = .never, deadline: Duration
    ) throws(SecretServiceFailure) {
        checkAttributes(attributes, schema: schema)
        try call(deadline: deadline) { cancellable throws(SecretServiceFailure) in
            let service = try sharedService(cancellable)
            defer { g_object_unref(service) }
            let collection = try unlockedCollection(alias, service: service, prompting: prompting, cancellable)
            let value = secret.withUnsafeBytes { bytes in
                // secret_value_new copies the bytes (into non-pageable memory when the service offers it).
                // A SecretBytes always has a base address, even when empty.
                secret_value_new(bytes.baseAddress!.assumingMemoryBound(to: CChar.self), bytes.count, contentType)
            }
            defer { secret_value_unref(UnsafeMutableRawPointer(value)) }
            let table = hashTable(attributes)
            defer { g_hash_table_unref(table) }
            var error: UnsafeMutablePointer<GError>?
            // The service's own call, as lookup's search is: libsecret's password API (secret_password_*) switches
            // to a file keyring of its own inside a Flatpak sandbox, so a key stored through it is one no search
            // finds (issue 36). The collection is the path checked unlocked above.
            let stored = secret_service_store_sync(
                service, schema.pointer, table, collection, label, value, cancellable, &error)
            if stored == 0 {
                throw failure(taking: error, fallback: "storing the secret failed")
            }
        }
    }

    /// Looks a secret up by its attributes without ever prompting, and answers with a secret only when exactly
    /// one item matches, in the collection the secret is kept in (`alias`, normally "default").
    ///
    /// - Returns: `.found` with the secret; `.absent` when no item matches and the collection that would hold
    ///   it is unlocked; `.several` or `.elsewhere` when what matches cannot be trusted (nothing is loaded).
    /// - Throws: `.locked` when the collection is locked (its items may be invisible, so "absent" cannot be
    ///   known; nothing is searched), `.notApproved` when the item is locked in an unlocked collection, unless
    ///   `prompting` allows the unlock and it is granted; `.noDefaultCollection` when the alias names none; the
    ///   bus/service/timeout kinds otherwise.
    package static func lookup(
        schema: Schema, attributes: [String: String], collection alias: String = "default",
        prompting: Prompting = .never, deadline: Duration
    )
        throws(SecretServiceFailure) -> LookupResult
    {
        checkAttributes(attributes, schema: schema)
        return try call(deadline: deadline) { cancellable throws(SecretServiceFailure) -> LookupResult in
            let service = try sharedService(cancellable)
            defer { g_object_unref(service) }
            // The transfer session is opened meanwhile, on a helper thread (LibSecret+Session.swift).
            let session = SessionOpener(service: service, deadline: cancellable)
            defer { session?.abandon() }
            // The lock state first: a search with nothing unlocked is what KeePassXC turns into a dialog.
            let expected = try unlockedCollection(alias, service: service, prompting: prompting, cancellable)
            // Object paths, not item proxies: a proxy costs seven bus round trips (match rules, name owner,
            // its properties, and removing the rules again), more than the lookup itself. A read is then
            // ReadAlias, the Locked property, SearchItems and GetSecret, with OpenSession (once per process) sent
            // meanwhile by the helper thread. The search names the schema (`xdg:schema`, which libsecret stores
            // with every item), so whatever it finds claims to be ours.
            var searched = attributes
            searched["xdg:schema"] = schema.name
            let (unlocked, locked) = try searchPaths(service: service, attributes: searched, cancellable)
            let matches = unlocked + locked
            if matches.count > 1 { return .several(paths: matches) }
            if let path = matches.first {
                // The Secret Service names an item `<collection path>/<item id>`.
                guard path.hasPrefix(expected + "/") else { return .elsewhere(path: path, expected: expected) }
                if !locked.isEmpty {
                    // Its collection is unlocked (checked above): the provider approves access per item.
                    try approve([path], service: service, prompting: prompting, cancellable)
                }
                session?.finish()
                return .found(try loadSecret(path: path, service: service, cancellable))
            }
            // Nothing visible, and the collection that would hold it is unlocked: absent.
            return .absent
        }
    }

    /// The lock state of the collection an alias points to, read without prompting.
    package static func collectionState(
        alias: String = "default", deadline: Duration
    )
        throws(SecretServiceFailure) -> CollectionState
    {
        try call(deadline: deadline) { cancellable throws(SecretServiceFailure) in
            let service = try sharedService(cancellable)
            defer { g_object_unref(service) }
            return try collectionState(service: service, alias: alias, cancellable)
        }
    }

    /// Unlocks the collection an alias points to through the specification's `Unlock` and its prompt (the
    /// only call here that exists to prompt: `vaultctl vault unlock`). An unlocked collection is left as is.
    ///
    /// - Throws: `.locked` when the prompt was dismissed or declined, `.noDefaultCollection` when the alias
    ///   names none, `.timeout` when nobody answered within `deadline`.
    package static func unlock(alias: String = "default", deadline: Duration) throws(SecretServiceFailure) {
        try call(deadline: deadline) { cancellable throws(SecretServiceFailure) in
            let service = try sharedService(cancellable)
            defer { g_object_unref(service) }
            _ = try unlockedCollection(alias, service: service, prompting: .allowed, cancellable)
        }
    }

    /// Locks the collection an alias points to (locking never prompts), and returns once the collection reads
    /// locked: a service may answer `Lock` before it has locked, or lock nothing (KeePassXC answers at once and the
    /// collection reads unlocked for a moment, for seconds on a loaded machine), so the answer is the collection's
    /// `Locked` property, read again every 20 ms until `deadline`.
    ///
    /// - Returns: `false` when there is no such collection.
    /// - Throws: `.timeout` when the collection still reads unlocked at the deadline.
    @discardableResult
    package static func lock(alias: String = "default", deadline: Duration) throws(SecretServiceFailure) -> Bool {
        try call(deadline: deadline) { cancellable throws(SecretServiceFailure) -> Bool in
            let service = try sharedService(cancellable)
            defer { g_object_unref(service) }
            guard let collection = try collection(alias: alias, service: service, cancellable) else { return false }
            defer { g_object_unref(collection) }
            var error: UnsafeMutablePointer<GError>?
            let objects = g_list_append(nil, UnsafeMutableRawPointer(collection))
            defer { g_list_free(objects) }
            let count = secret_service_lock_sync(service, objects, cancellable, nil, &error)
            if count < 0 || error != nil {
                throw failure(taking: error, fallback: "locking the '\(alias)' collection failed")
            }
            let path = objectPath(collection)
            let interface = "org.freedesktop.Secret.Collection"
            while try !lockedProperty(of: path, interface: interface, service: service, cancellable) {
                guard g_cancellable_is_cancelled(cancellable) == 0 else {
                    throw SecretServiceFailure(
                        .timeout, message: "the '\(alias)' collection still reads unlocked after the service answered Lock")
                }
                Sys.sleep(milliseconds: 20)
            }
            return true
        }
    }

    /// Reads what the service has (collections, their lock states, the default alias) without prompting.
    package static func probe(deadline: Duration) throws(SecretServiceFailure) -> ServiceProbe {
        let address = Sys.environment("DBUS_SESSION_BUS_ADDRESS")
        return try call(deadline: deadline) { cancellable throws(SecretServiceFailure) -> ServiceProbe in
            let service = try sharedService(cancellable)
            defer { g_object_unref(service) }
            // ReadAlias is the first real call to the service: a missing service fails here, with its error.
            var defaultPath: String?
            if let collection = try collection(alias: "default", service: service, cancellable) {
                defaultPath = objectPath(collection)
                g_object_unref(collection)
            }
            // Collections, labels and lock states straight from the service's properties: fresh, prompt-free.
            var collections: [CollectionInfo] = []
            let paths =
                try property(
                    "Collections", of: "/org/freedesktop/secrets", interface: "org.freedesktop.Secret.Service",
                    service: service, cancellable, decode: Variant.objectPaths) ?? []
            for path in paths {
                let collection = "org.freedesktop.Secret.Collection"
                collections.append(
                    CollectionInfo(
                        path: path,
                        label: try property(
                            "Label", of: path, interface: collection, service: service, cancellable,
                            decode: Variant.string) ?? "",
                        locked: try property(
                            "Locked", of: path, interface: collection, service: service, cancellable,
                            decode: Variant.bool) ?? true))
            }
            return ServiceProbe(
                busAddress: address, collections: collections, defaultCollectionPath: defaultPath,
                provider: provider(service: service, cancellable))
        }
    }

    /// The program that owns `org.freedesktop.secrets` (gnome-keyring, KeePassXC, KWallet...), nil when the
    /// service cannot be reached or its process cannot be told.
    package static func provider(deadline: Duration) -> SecretServiceProvider? {
        try? call(deadline: deadline) { cancellable throws(SecretServiceFailure) -> SecretServiceProvider? in
            let service = try sharedService(cancellable)
            defer { g_object_unref(service) }
            return provider(service: service, cancellable)
        }
    }

    /// Asks the bus for the process behind `org.freedesktop.secrets` and reads its name from /proc.
    static func provider(
        service: UnsafeMutablePointer<SecretService>, _ cancellable: UnsafeMutablePointer<GCancellable>
    ) -> SecretServiceProvider? {
        let proxy = UnsafeMutableRawPointer(service).assumingMemoryBound(to: GDBusProxy.self)
        var arguments: [OpaquePointer?] = [g_variant_new_string("org.freedesktop.secrets")]
        var error: UnsafeMutablePointer<GError>?
        guard
            let reply = g_dbus_connection_call_sync(
                g_dbus_proxy_get_connection(proxy), "org.freedesktop.DBus", "/org/freedesktop/DBus",
                "org.freedesktop.DBus", "GetConnectionUnixProcessID", g_variant_new_tuple(&arguments, 1), nil,
                G_DBUS_CALL_FLAGS_NO_AUTO_START, -1, cancellable, &error)
        else {
            if let error { g_error_free(error) }
            return nil
        }
        defer { g_variant_unref(reply) }
        guard Variant.type(reply) == "(u)", let child = g_variant_get_child_value(reply, 0) else { return nil }
        defer { g_variant_unref(child) }
        return SecretServiceProvider(pid: g_variant_get_uint32(child))
    }
}
#endif
