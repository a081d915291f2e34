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

internal import CSecret
import Dispatch
import SystemLayer

/// A failure of a Secret Service call, classified. `VaultError(_:operation:)` turns it into the public error.
package struct SecretServiceFailure: Error, Sendable, Equatable {
    package enum Kind: Sendable, Equatable {
        case locked
        case noSessionBus
        case noSecretService
        case noDefaultCollection
        case timeout
        /// The item's collection is unlocked but the item is not: the provider approves access per item and
        /// per client (KeePassXC), and this client has not been approved.
        case notApproved
        /// Anything else the service reported (the GError says what).
        case other
    }

    package var kind: Kind
    /// The GError as libsecret reported it, when there was one.
    package var domain: String?
    package var code: Int32?
    package var message: String
    /// The program behind the service, looked up within the failing call when its words matter to the answer
    /// (`notApproved`: how to approve depends on the provider).
    package var provider: SecretServiceProvider?

    package init(_ kind: Kind, domain: String? = nil, code: Int32? = nil, message: String) {
        self.kind = kind
        self.domain = domain
        self.code = code
        self.message = message
    }
}

/// Typed, bounded, prompt-free access to the freedesktop Secret Service through libsecret.
package enum LibSecret {
    /// "0.20.5" for the libsecret the package was compiled against.
    package static let versionString = "\(SECRET_MAJOR_VERSION).\(SECRET_MINOR_VERSION).\(SECRET_MICRO_VERSION)"

    package static let textContentType = "text/plain"
    package static let binaryContentType = "application/octet-stream"

    /// A schema: a name plus string attributes. Attributes are not secret (they are readable over D-Bus while
    /// locked and stored as unsalted hashes on disk), so ours carry only random ids and a format version.
    ///
    /// `@unchecked Sendable`: the C struct and its strings are written once in `init` and only read afterwards.
    package final class Schema: @unchecked Sendable {
        package let name: String
        package let attributeNames: [String]
        fileprivate let pointer: UnsafeMutablePointer<SecretSchema>

        package init(name: String, attributes: [String]) {
            precondition(attributes.count < 32, "a SecretSchema holds at most 31 attributes")
            self.name = name
            self.attributeNames = attributes
            pointer = .allocate(capacity: 1)
            pointer.initialize(to: SecretSchema())
            pointer.pointee.name = UnsafePointer(g_strdup(name))
            pointer.pointee.flags = SECRET_SCHEMA_NONE
            withUnsafeMutableBytes(of: &pointer.pointee.attributes) { raw in
                let slots = raw.bindMemory(to: SecretSchemaAttribute.self)
                for (index, attribute) in attributes.enumerated() {
                    slots[index].name = UnsafePointer(g_strdup(attribute))
                    slots[index].type = SECRET_SCHEMA_ATTRIBUTE_STRING
                }
            }
        }

        deinit {
            g_free(UnsafeMutableRawPointer(mutating: pointer.pointee.name))
            withUnsafeMutableBytes(of: &pointer.pointee.attributes) { raw in
                for slot in raw.bindMemory(to: SecretSchemaAttribute.self) {
                    if let name = slot.name { g_free(UnsafeMutableRawPointer(mutating: name)) }
                }
            }
            pointer.deinitialize(count: 1)
            pointer.deallocate()
        }

        /// The schema of a vault's master key: `vault` (random id of the vault), `key` (random id of the key),
        /// `format` (the vault's identity format: "1" legacy, "2"), and for format 2 `service` (the vault's name,
        /// so that a file copied under another name finds no key, and no wipe of it deletes one).
        package static let vaultMasterKey = Schema(
            name: "dev.securevault.MasterKey", attributes: ["vault", "key", "format", "service"])
    }

    /// A secret read from the service, copied straight into guarded memory.
    package struct Secret: Sendable, Equatable {
        package var bytes: SecretBytes
        package var contentType: String
    }

    /// What ``lookup(schema:attributes:collection:prompting:deadline:)`` found. Only `found` hands out a secret: when the
    /// items that match cannot be trusted as the one answer, the lookup says so instead of picking one.
    package enum LookupResult: Sendable, Equatable {
        /// No item matches, and the collection that would hold it is unlocked.
        case absent
        /// Exactly one item matches, in the expected collection, and it is unlocked: its secret.
        case found(Secret)
        /// More than one item matches (their object paths). Any app of the user can store an item with the
        /// same attributes, in any collection: which one is the real secret cannot be told.
        case several(paths: [String])
        /// The one item that matches is not in the expected collection (`expected` is that collection's path,
        /// nil when the alias names none).
        case elsewhere(path: String, expected: String?)

        /// The secret when one was found, else nil.
        package var secret: Secret? {
            if case .found(let secret) = self { return secret }
            return nil
        }
    }

    /// Lock state of a collection, read without prompting.
    package enum CollectionState: Sendable, Equatable {
        case unlocked
        case locked
        /// The alias names no collection (no keyring was ever created or unlocked in this daemon).
        case missing
    }

    /// One collection as the service reports it.
    package struct CollectionInfo: Sendable, Equatable {
        package var path: String
        package var label: String
        package var locked: Bool
    }

    /// What `probe` found: enough for `vaultctl doctor` and `Vault.status()`.
    package struct ServiceProbe: Sendable {
        package var busAddress: String?
        package var collections: [CollectionInfo]
        package var defaultCollectionPath: String?
        /// The program that owns `org.freedesktop.secrets`, when it can be told.
        package var provider: SecretServiceProvider?
    }

    /// Whether a call may show the provider's prompts (an unlock dialog, an access approval, a delete
    /// confirmation). Never, unless the app opted in.
    package enum Prompting: Sendable, Equatable {
        /// Answer `locked` / `notApproved` at once; never call `Unlock`.
        case never
        /// Call `Unlock` on exactly the collection or item needed and wait for its prompt, within the deadline.
        case allowed
    }

    /// Whether a delete may perform the prompt the provider returns for it. KeePassXC returns one for every
    /// delete, and shows a dialog from it only when its user asked to confirm deletes (Recycle Bin off).
    package enum DeletePrompt: Sendable, Equatable {
        /// Dismiss it unperformed: the delete does not happen (an open: it never shows anything).
        case skip
        /// Perform it, within the call's deadline (a wipe or a rotation the app or the user asked for; with
        /// `Prompting.allowed`, the user may answer a confirmation).
        case perform
    }

    /// What ``clear(schema:attributes:label:prompting:deletePrompt:deadline:)`` did.
    package struct ClearOutcome: Sendable, Equatable {
        /// Items deleted: a fresh search no longer finds them.
        package var deleted: Int
        /// Why a matching item is still there although its secret was already overwritten with random bytes
        /// (a delete prompt skipped or not answered within the deadline, a delete that failed, a provider that
        /// still lists the item); nil when every matching item is gone.
        package var unfinished: String?
        /// The program behind the service (what it may keep of a deleted item depends on it).
        package var provider: SecretServiceProvider?

        package init(deleted: Int, unfinished: String? = nil, provider: SecretServiceProvider? = nil) {
            self.deleted = deleted
            self.unfinished = unfinished
            self.provider = provider
        }
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
            _ = try unlockedCollection(alias, service: service, prompting: prompting, cancellable)
            let value = secret.withUnsafeBytes { bytes in
                // secret_value_new copies the bytes (into non-pageable memory when the service offers it).
                // A SecretBytes always has a base address, even when empty.
                secret_value_new(bytes.baseAddress!.assumingMemoryBound(to: CChar.self), bytes.count, contentType)
            }
            defer { secret_value_unref(UnsafeMutableRawPointer(value)) }
            let table = hashTable(attributes)
            defer { g_hash_table_unref(table) }
            var error: UnsafeMutablePointer<GError>?
            let stored = secret_password_storev_binary_sync(
                schema.pointer, table, alias, label, value, cancellable, &error)
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
            // The lock state first: a search with nothing unlocked is what KeePassXC turns into a dialog.
            let expected = try unlockedCollection(alias, service: service, prompting: prompting, cancellable)
            // Object paths, not item proxies: a proxy costs seven bus round trips (match rules, name owner,
            // its properties, and removing the rules again), more than the lookup itself. A read is then
            // SearchItems, ReadAlias, OpenSession (once per process) and GetSecret. The search names the schema
            // (`xdg:schema`, which libsecret stores with every item), so whatever it finds claims to be ours.
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
                return .found(try loadSecret(path: path, service: service, cancellable))
            }
            // Nothing visible, and the collection that would hold it is unlocked: absent.
            return .absent
        }
    }

    /// Deletes every item of the default collection matching `attributes` (and, when `label` is given,
    /// labelled exactly `label`: items with another label are left), telling the truth about it: each item's
    /// secret is first overwritten with random bytes (`SetSecret`), then the item is deleted (`Delete`, whose
    /// prompt is performed or dismissed as `deletePrompt` says), then a fresh search says whether it is gone.
    ///
    /// Nothing is thrown once a secret was overwritten: from then on the outcome says what was left and why
    /// (``ClearOutcome/unfinished``), because the caller's data may already depend on it (a wipe goes on).
    ///
    /// - Throws: before anything changed: `.locked` (nothing searched) when the default collection is locked;
    ///   `.notApproved` when a matching item is locked in it, unless `prompting` allows the approval and it is
    ///   granted; the bus/service/timeout kinds.
    @discardableResult
    package static func clear(
        schema: Schema, attributes: [String: String], label: String? = nil, prompting: Prompting = .never,
        deletePrompt: DeletePrompt = .perform, deadline: Duration
    )
        throws(SecretServiceFailure) -> ClearOutcome
    {
        checkAttributes(attributes, schema: schema)
        return try call(deadline: deadline) { cancellable throws(SecretServiceFailure) -> ClearOutcome in
            let service = try sharedService(cancellable)
            defer { g_object_unref(service) }
            // A locked collection may hide the item we were asked to delete, and searching it may prompt.
            let collection: String
            do throws(SecretServiceFailure) {
                collection = try unlockedCollection("default", service: service, prompting: prompting, cancellable)
            } catch where error.kind == .noDefaultCollection {
                return ClearOutcome(deleted: 0)  // no keyring: nothing of ours can be in it
            }
            let items = try search(service: service, schema: schema, attributes: attributes, cancellable)
            defer { items.forEach { g_object_unref($0) } }
            // Keys are kept in the default collection only; a matching item elsewhere is not ours to delete.
            let chosen = items.filter { item in
                guard objectPath(item)?.hasPrefix(collection + "/") == true else { return false }
                guard let label else { return true }
                let found = secret_item_get_label(item)
                defer { g_free(found) }
                return found.map { String(cString: $0) } == label
            }
            guard !chosen.isEmpty else { return ClearOutcome(deleted: 0) }
            let lockedPaths = chosen.filter { secret_item_get_locked($0) != 0 }.compactMap { objectPath($0) }
            if !lockedPaths.isEmpty {
                try approve(lockedPaths, service: service, prompting: prompting, cancellable)
            }
            let provider = provider(service: service, cancellable)
            var unfinished: [String] = []
            var attempted: [String] = []
            for item in chosen {
                guard let path = objectPath(item) else { continue }
                // Overwrite first, so that an item the provider keeps (a delete not completed) holds random bytes.
                let noise = SecretBytes.random(count: 32)
                let value = noise.withUnsafeBytes { bytes in
                    secret_value_new(
                        bytes.baseAddress!.assumingMemoryBound(to: CChar.self), bytes.count, binaryContentType)
                }
                defer { secret_value_unref(UnsafeMutableRawPointer(value)) }
                var error: UnsafeMutablePointer<GError>?
                if secret_item_set_secret_sync(item, value, cancellable, &error) == 0 {
                    let failed = failure(taking: error, fallback: "overwriting the keyring item failed")
                    // Nothing changed yet for this item; one overwritten before it may have: say so, do not throw.
                    guard attempted.isEmpty else {
                        unfinished.append("\(path) could not be overwritten: \(failed.message)")
                        continue
                    }
                    throw failed
                }
                attempted.append(path)
                if let reason = delete(path, service: service, deletePrompt: deletePrompt, cancellable) {
                    unfinished.append(reason)
                }
            }
            // The deadline passed inside a delete: nothing more can be asked in this call.
            if g_cancellable_is_cancelled(cancellable) != 0 {
                if unfinished.isEmpty { unfinished.append("the deadline passed before the delete could be checked") }
                return ClearOutcome(deleted: 0, unfinished: unfinished.joined(separator: "; "), provider: provider)
            }
            // A fresh search: a prompt that was dismissed, or a provider that ignores the delete, leaves the item.
            var searched = attributes
            searched["xdg:schema"] = schema.name
            let remaining: [String]
            do throws(SecretServiceFailure) {
                let (unlocked, locked) = try searchPaths(service: service, attributes: searched, cancellable)
                remaining = attempted.filter { (unlocked + locked).contains($0) }
            } catch {
                let why = "whether the item is gone could not be checked (\(error.message))"
                return ClearOutcome(
                    deleted: 0, unfinished: (unfinished + [why]).joined(separator: "; "), provider: provider)
            }
            if unfinished.isEmpty, !remaining.isEmpty {
                unfinished.append("the Secret Service still lists \(remaining.joined(separator: ", ")) after deleting it")
            }
            return ClearOutcome(
                deleted: attempted.count - remaining.count,
                unfinished: unfinished.isEmpty ? nil : unfinished.joined(separator: "; "), provider: provider)
        }
    }

    /// Calls `Item.Delete` on `path` (no proxy, no automatic prompt) and handles the prompt it may return:
    /// performed within the call's deadline, or dismissed unperformed. Returns nil when the delete went through
    /// (a fresh search still checks), else why not.
    private static func delete(
        _ path: String, service: UnsafeMutablePointer<SecretService>, deletePrompt: DeletePrompt,
        _ cancellable: UnsafeMutablePointer<GCancellable>
    ) -> String? {
        let proxy = UnsafeMutableRawPointer(service).assumingMemoryBound(to: GDBusProxy.self)
        let connection = g_dbus_proxy_get_connection(proxy)
        var error: UnsafeMutablePointer<GError>?
        guard
            let reply = g_dbus_connection_call_sync(
                connection, g_dbus_proxy_get_name(proxy), path, "org.freedesktop.Secret.Item", "Delete", nil,
                nil, G_DBUS_CALL_FLAGS_NO_AUTO_START, -1, cancellable, &error)
        else {
            return "deleting \(path) failed: \(failure(taking: error, fallback: "no reply").message)"
        }
        defer { g_variant_unref(reply) }
        guard Variant.type(reply) == "(o)", let child = g_variant_get_child_value(reply, 0) else {
            return "deleting \(path) failed: an unexpected reply"
        }
        let prompt = String(cString: g_variant_get_string(child, nil))
        g_variant_unref(child)
        guard prompt != "/" else { return nil }  // deleted, no prompt (gnome-keyring)
        switch deletePrompt {
        case .skip:
            dismiss(prompt, connection: connection, name: g_dbus_proxy_get_name(proxy))
            return "the Secret Service deletes \(path) only through a prompt, which is left for a wipe or a rotation"
        case .perform:
            let result = secret_service_prompt_at_dbus_path_sync(service, prompt, cancellable, nil, &error)
            if let result { g_variant_unref(result) }
            let failed = result == nil ? failure(taking: error, fallback: "the delete prompt failed") : nil
            if let error { g_error_free(error) }
            // A prompt cut by the deadline (libsecret dismisses it; KeePassXC may leave its dialog open) can also
            // come back as a completed, dismissed prompt.
            if g_cancellable_is_cancelled(cancellable) != 0 || failed?.kind == .timeout {
                return "the Secret Service asked to confirm deleting \(path) and it was not confirmed in time"
            }
            if let failed { return "deleting \(path) failed: \(failed.message)" }
            return nil  // completed (a prompt the user dismissed leaves the item: the fresh search finds it)
        }
    }

    /// `Prompt.Dismiss`, best effort (a prompt that is gone or already completed needs nothing).
    private static func dismiss(
        _ prompt: String, connection: OpaquePointer?, name: UnsafePointer<gchar>?
    ) {
        var error: UnsafeMutablePointer<GError>?
        let reply = g_dbus_connection_call_sync(
            connection, name, prompt, "org.freedesktop.Secret.Prompt", "Dismiss", nil, nil,
            G_DBUS_CALL_FLAGS_NO_AUTO_START, -1, nil, &error)
        if let reply { g_variant_unref(reply) }
        if let error { g_error_free(error) }
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
                usleep(20_000)
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
    private static func provider(
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

    // MARK: Plumbing

    /// Runs `body` with a cancellable that is cancelled at `deadline`, classifying a cancellation as a timeout.
    /// A daemon that died under libsecret's cached connection is retried once on a fresh connection.
    private static func call<Result>(
        deadline: Duration,
        _ body: (UnsafeMutablePointer<GCancellable>) throws(SecretServiceFailure) -> Result
    ) throws(SecretServiceFailure) -> Result {
        let timer = DeadlineTimer(after: deadline)
        defer { timer.disarm() }
        do {
            return try body(timer.cancellable)
        } catch let failure where failure.kind == .other && failure.isDeadProvider {
            // libsecret stays bound to the unique name of a daemon that is gone; reconnect once.
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
    private static func sharedService(
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
    private static func unlockedCollection(
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
    private static func approve(
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
    private static func unlock(
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
    private static func strings(_ vector: UnsafeMutablePointer<UnsafeMutablePointer<gchar>?>?) -> [String] {
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
    /// that happen to share the attributes are dropped.
    private static func search(
        service: UnsafeMutablePointer<SecretService>, schema: Schema, attributes: [String: String],
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
            if name == nil || String(cString: name!) == schema.name {
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
    private static func searchPaths(
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
    private static func loadSecret(
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
    private static func secret(from value: OpaquePointer) -> Secret {
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
    private static func aliasPath(
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
    private static func collection(
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

    private static func collectionState(
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
    private static func lockedProperty(
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
    private static func property<Value>(
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
    private enum Variant {
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

    private static func objectPath<T>(_ proxy: UnsafeMutablePointer<T>) -> String? {
        let raw = UnsafeMutableRawPointer(proxy).assumingMemoryBound(to: GDBusProxy.self)
        return g_dbus_proxy_get_object_path(raw).map { String(cString: $0) }
    }

    private static func hashTable(_ attributes: [String: String]) -> OpaquePointer {
        let table = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free)!
        for (key, value) in attributes {
            g_hash_table_insert(table, g_strdup(key), g_strdup(value))
        }
        return table
    }

    private static func checkAttributes(_ attributes: [String: String], schema: Schema) {
        // A programmer error: the schema decides which attributes exist.
        for key in attributes.keys {
            precondition(schema.attributeNames.contains(key), "attribute '\(key)' is not in schema \(schema.name)")
        }
        precondition(!attributes.isEmpty, "an empty attribute set would match every item of every application")
    }

    /// Converts and frees a GError; `error` may be nil when libsecret failed without one.
    private static func failure(taking error: UnsafeMutablePointer<GError>?, fallback: String) -> SecretServiceFailure {
        guard let error else { return SecretServiceFailure(.other, message: fallback) }
        defer { g_error_free(error) }
        let domain = String(cString: g_quark_to_string(error.pointee.domain))
        let code = error.pointee.code
        let message = error.pointee.message.map { String(cString: $0) } ?? fallback
        return SecretServiceFailure(
            classify(domain: error.pointee.domain, code: code, message: message),
            domain: domain, code: code, message: message)
    }

    private static func classify(domain: GQuark, code: Int32, message: String) -> SecretServiceFailure.Kind {
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
                return message.contains("org.freedesktop.secrets") ? .noSecretService : .other
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

/// A GCancellable cancelled by a timer at a deadline.
///
/// `@unchecked Sendable`: the state is immutable after `init`; the GCancellable it shares with the timer's
/// closure is documented as safe to cancel and query from any thread.
private final class DeadlineTimer: @unchecked Sendable {
    let cancellable: UnsafeMutablePointer<GCancellable>
    private let timer: DispatchWorkItem
    private let deadline: Duration

    init(after deadline: Duration) {
        self.deadline = deadline
        let cancellable = g_cancellable_new()!
        self.cancellable = cancellable
        let box = CancellableBox(cancellable)
        timer = DispatchWorkItem { box.cancel() }
        let nanoseconds = deadline.components.seconds * 1_000_000_000 + deadline.components.attoseconds / 1_000_000_000
        DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(Int(nanoseconds)), execute: timer)
    }

    func disarm() {
        timer.cancel()
    }

    /// A cancellation we caused is the deadline passing.
    func classify(_ failure: SecretServiceFailure) -> SecretServiceFailure {
        let cancelledByTimer = g_cancellable_is_cancelled(cancellable) != 0
        if cancelledByTimer || failure.kind == .timeout {
            var timedOut = failure
            timedOut.kind = .timeout
            timedOut.message = "no answer from the Secret Service within \(deadline) (\(failure.message))"
            return timedOut
        }
        return failure
    }

    deinit {
        g_object_unref(cancellable)
    }
}

/// Keeps the cancellable alive for as long as the timer's closure can still run.
///
/// `@unchecked Sendable`: `g_cancellable_cancel` may be called from any thread.
private final class CancellableBox: @unchecked Sendable {
    private let cancellable: UnsafeMutablePointer<GCancellable>

    init(_ cancellable: UnsafeMutablePointer<GCancellable>) {
        self.cancellable = cancellable
        g_object_ref(cancellable)
    }

    func cancel() {
        g_cancellable_cancel(cancellable)
    }

    deinit {
        g_object_unref(cancellable)
    }
}
