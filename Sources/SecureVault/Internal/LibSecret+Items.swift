// Deleting keyring items, truthfully (LibSecret.swift, rule 1).
#if SecretService
internal import CSecret
import SystemLayer

extension LibSecret {
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
            } catch  where error.kind == .noDefaultCollection {
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
                unfinished.append(
                    "the Secret Service still lists \(remaining.joined(separator: ", ")) after deleting it")
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
            // `failure(taking:)` frees the error; one set beside a result is freed here (never both: a double free).
            let failed: SecretServiceFailure?
            if result == nil {
                failed = failure(taking: error, fallback: "the delete prompt failed")
            } else {
                failed = nil
                if let error { g_error_free(error) }
            }
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

    /// Every item of `schema` in the default collection, with its label and the schema's attributes; no secret is
    /// read and nothing prompts. Items of the schema kept in another collection are not listed: keys are kept in
    /// the default collection only, so one elsewhere is not ours (another app can store items of any schema).
    ///
    /// - Throws: `.locked` when the default collection is locked (its items may be hidden, and searching it may
    ///   prompt; nothing is searched); the bus/service/timeout kinds. No default collection lists nothing.
    package static func items(schema: Schema, deadline: Duration) throws(SecretServiceFailure) -> [ItemInfo] {
        try call(deadline: deadline) { cancellable throws(SecretServiceFailure) -> [ItemInfo] in
            let service = try sharedService(cancellable)
            defer { g_object_unref(service) }
            let collection: String
            do throws(SecretServiceFailure) {
                collection = try unlockedCollection("default", service: service, prompting: .never, cancellable)
            } catch  where error.kind == .noDefaultCollection {
                return []
            }
            let found = try search(
                service: service, schema: schema, attributes: ["xdg:schema": schema.name], cancellable)
            defer { found.forEach { g_object_unref($0) } }
            return found.compactMap { item -> ItemInfo? in
                guard let path = objectPath(item), path.hasPrefix(collection + "/") else { return nil }
                let label = secret_item_get_label(item)
                defer { g_free(label) }
                guard let table = secret_item_get_attributes(item) else { return nil }
                defer { g_hash_table_unref(table) }
                var attributes: [String: String] = [:]
                for name in schema.attributeNames {
                    let value = name.withCString { g_hash_table_lookup(table, $0) }
                    if let value { attributes[name] = String(cString: value.assumingMemoryBound(to: CChar.self)) }
                }
                return ItemInfo(path: path, label: label.map { String(cString: $0) } ?? "", attributes: attributes)
            }
        }
    }

    // MARK: Adopting another program's items

    /// Every item of the Secret Service, of any schema, whose attributes include `attributes` (keytar's
    /// `service`/`account`, python keyring's `service`/`username`, `secret-tool`'s own), with its label and all its
    /// attributes; no secret is read and nothing prompts.
    ///
    /// - Throws: `.locked` when the default collection is locked (an item may be hidden there, and searching it may
    ///   prompt; nothing is searched); the bus/service/timeout kinds.
    package static func matchingItems(
        _ attributes: [String: String], deadline: Duration
    ) throws(SecretServiceFailure)
        -> [ItemInfo]
    {
        precondition(!attributes.isEmpty, "an empty attribute set would match every item of every application")
        return try call(deadline: deadline) { cancellable throws(SecretServiceFailure) -> [ItemInfo] in
            let service = try sharedService(cancellable)
            defer { g_object_unref(service) }
            _ = try unlockedCollection("default", service: service, prompting: .never, cancellable)
            let items = try search(service: service, schema: nil, attributes: attributes, cancellable)
            defer { items.forEach { g_object_unref($0) } }
            return items.compactMap { item -> ItemInfo? in
                guard let path = objectPath(item) else { return nil }
                let label = secret_item_get_label(item)
                defer { g_free(label) }
                return ItemInfo(
                    path: path, label: label.map { String(cString: $0) } ?? "", attributes: allAttributes(of: item))
            }.sorted { $0.path < $1.path }
        }
    }

    /// The secret of the item at `path` (an item `matchingItems` found). An item locked in an unlocked collection
    /// is approved through its prompt when `prompting` allows it, else `.notApproved`; one in a locked collection
    /// is `.locked` unless `prompting` allows its unlock.
    package static func secret(
        ofItem path: String, prompting: Prompting = .never, deadline: Duration
    )
        throws(SecretServiceFailure) -> Secret
    {
        try call(deadline: deadline) { cancellable throws(SecretServiceFailure) -> Secret in
            let service = try sharedService(cancellable)
            defer { g_object_unref(service) }
            if try lockedProperty(of: path, interface: "org.freedesktop.Secret.Item", service: service, cancellable) {
                try approve([path], service: service, prompting: prompting, cancellable)
            }
            return try loadSecret(path: path, service: service, cancellable)
        }
    }

    /// Deletes the item at `path` (no overwrite first: it is another program's, kept whole until it is gone) and
    /// checks with a fresh search for `attributes` that it is gone. Returns nil when it is, else why not.
    package static func deleteItem(
        _ path: String, attributes: [String: String], deletePrompt: DeletePrompt = .perform, deadline: Duration
    ) throws(SecretServiceFailure) -> String? {
        try call(deadline: deadline) { cancellable throws(SecretServiceFailure) -> String? in
            let service = try sharedService(cancellable)
            defer { g_object_unref(service) }
            if let reason = delete(path, service: service, deletePrompt: deletePrompt, cancellable) { return reason }
            let (unlocked, locked) = try searchPaths(service: service, attributes: attributes, cancellable)
            return (unlocked + locked).contains(path) ? "the Secret Service still lists \(path) after deleting it" : nil
        }
    }

    /// Every attribute of `item`, as its proxy holds them.
    private static func allAttributes(of item: UnsafeMutablePointer<SecretItem>) -> [String: String] {
        guard let table = secret_item_get_attributes(item) else { return [:] }
        defer { g_hash_table_unref(table) }
        var attributes: [String: String] = [:]
        let keys = g_hash_table_get_keys(table)
        defer { g_list_free(keys) }
        var node = keys
        while let current = node {
            if let key = current.pointee.data, let value = g_hash_table_lookup(table, key) {
                attributes[String(cString: key.assumingMemoryBound(to: CChar.self))] =
                    String(cString: value.assumingMemoryBound(to: CChar.self))
            }
            node = current.pointee.next
        }
        return attributes
    }
}
#endif
