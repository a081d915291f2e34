#ifndef CSECRET_FUNCTIONS_H
#define CSECRET_FUNCTIONS_H
// Every libsecret, GIO, GObject and GLib function SecureVault calls, with the signature its library's header gives
// it (libsecret 0.20, GLib 2.74; each stable since long before): X(return type, name, (parameters), (arguments)),
// XV for those that return nothing. CSecret.h expands it into the table the loader fills and a wrapper per function;
// SecretServiceTests' CSecretDeclarationTests expands it against the libraries' own headers and fails on any
// signature that differs. Types only: no library header is included here, and nothing links the libraries.
#define CSECRET_FUNCTIONS(X, XV) \
    XV(g_cancellable_cancel, (GCancellable* cancellable), (cancellable)) \
    X(gulong, g_cancellable_connect, (GCancellable* cancellable, GCallback callback, gpointer data, \
        GDestroyNotify data_destroy_func), (cancellable, callback, data, data_destroy_func)) \
    XV(g_cancellable_disconnect, (GCancellable* cancellable, gulong handler_id), (cancellable, handler_id)) \
    X(gboolean, g_cancellable_is_cancelled, (GCancellable* cancellable), (cancellable)) \
    X(GCancellable*, g_cancellable_new, (void), ()) \
    X(GVariant*, g_dbus_connection_call_sync, (GDBusConnection* connection, const gchar* bus_name, \
        const gchar* object_path, const gchar* interface_name, const gchar* method_name, GVariant* parameters, \
        const GVariantType* reply_type, GDBusCallFlags flags, gint timeout_msec, GCancellable* cancellable, \
        GError** error), (connection, bus_name, object_path, interface_name, method_name, parameters, reply_type, \
        flags, timeout_msec, cancellable, error)) \
    X(GVariant*, g_dbus_connection_call_with_unix_fd_list_sync, (GDBusConnection* connection, const gchar* bus_name, \
        const gchar* object_path, const gchar* interface_name, const gchar* method_name, GVariant* parameters, \
        const GVariantType* reply_type, GDBusCallFlags flags, gint timeout_msec, GUnixFDList* fd_list, \
        GUnixFDList** out_fd_list, GCancellable* cancellable, GError** error), (connection, bus_name, object_path, \
        interface_name, method_name, parameters, reply_type, flags, timeout_msec, fd_list, out_fd_list, cancellable, \
        error)) \
    X(GType, g_dbus_connection_flags_get_type, (void), ()) \
    X(GType, g_dbus_connection_get_type, (void), ()) \
    X(const gchar*, g_dbus_connection_get_unique_name, (GDBusConnection* connection), (connection)) \
    X(gboolean, g_dbus_connection_is_closed, (GDBusConnection* connection), (connection)) \
    X(guint, g_dbus_connection_signal_subscribe, (GDBusConnection* connection, const gchar* sender, \
        const gchar* interface_name, const gchar* member, const gchar* object_path, const gchar* arg0, \
        GDBusSignalFlags flags, GDBusSignalCallback callback, gpointer user_data, \
        GDestroyNotify user_data_free_func), (connection, sender, interface_name, member, object_path, arg0, flags, \
        callback, user_data, user_data_free_func)) \
    XV(g_dbus_connection_signal_unsubscribe, (GDBusConnection* connection, guint subscription_id), (connection, \
        subscription_id)) \
    X(gboolean, g_dbus_error_is_remote_error, (const GError* error), (error)) \
    X(GQuark, g_dbus_error_quark, (void), ()) \
    X(GDBusConnection*, g_dbus_proxy_get_connection, (GDBusProxy* proxy), (proxy)) \
    X(const gchar*, g_dbus_proxy_get_name, (GDBusProxy* proxy), (proxy)) \
    X(const gchar*, g_dbus_proxy_get_object_path, (GDBusProxy* proxy), (proxy)) \
    XV(g_error_free, (GError* error), (error)) \
    XV(g_free, (gpointer mem), (mem)) \
    X(GList*, g_hash_table_get_keys, (GHashTable* hash_table), (hash_table)) \
    X(gboolean, g_hash_table_insert, (GHashTable* hash_table, gpointer key, gpointer value), (hash_table, key, value)) \
    X(gpointer, g_hash_table_lookup, (GHashTable* hash_table, gconstpointer key), (hash_table, key)) \
    X(GHashTable*, g_hash_table_new_full, (GHashFunc hash_func, GEqualFunc key_equal_func, \
        GDestroyNotify key_destroy_func, GDestroyNotify value_destroy_func), (hash_func, key_equal_func, \
        key_destroy_func, value_destroy_func)) \
    XV(g_hash_table_unref, (GHashTable* hash_table), (hash_table)) \
    X(gboolean, g_initable_init, (GInitable* initable, GCancellable* cancellable, GError** error), (initable, \
        cancellable, error)) \
    X(GQuark, g_io_error_quark, (void), ()) \
    X(GType, g_io_stream_get_type, (void), ()) \
    X(GList*, g_list_append, (GList* list, gpointer data), (list, data)) \
    XV(g_list_free, (GList* list), (list)) \
    XV(g_list_free_full, (GList* list, GDestroyNotify free_func), (list, free_func)) \
    X(gboolean, g_main_context_iteration, (GMainContext* context, gboolean may_block), (context, may_block)) \
    X(GMainContext*, g_main_context_new, (void), ()) \
    XV(g_main_context_pop_thread_default, (GMainContext* context), (context)) \
    XV(g_main_context_push_thread_default, (GMainContext* context), (context)) \
    XV(g_main_context_unref, (GMainContext* context), (context)) \
    X(GObject*, g_object_new_with_properties, (GType object_type, guint n_properties, const char* names[], \
        const GValue values[]), (object_type, n_properties, names, values)) \
    X(gpointer, g_object_ref, (gpointer object), (object)) \
    XV(g_object_unref, (gpointer object), (object)) \
    X(const gchar*, g_quark_to_string, (GQuark quark), (quark)) \
    X(gboolean, g_socket_connect, (GSocket* socket, GSocketAddress* address, GCancellable* cancellable, \
        GError** error), (socket, address, cancellable, error)) \
    X(GSocketConnection*, g_socket_connection_factory_create_connection, (GSocket* socket), (socket)) \
    X(GSocket*, g_socket_new, (GSocketFamily family, GSocketType type, GSocketProtocol protocol, GError** error), \
        (family, type, protocol, error)) \
    XV(g_socket_set_timeout, (GSocket* socket, guint timeout), (socket, timeout)) \
    X(guint, g_source_attach, (GSource* source, GMainContext* context), (source, context)) \
    XV(g_source_destroy, (GSource* source), (source)) \
    XV(g_source_set_callback, (GSource* source, GSourceFunc func, gpointer data, GDestroyNotify notify), (source, \
        func, data, notify)) \
    XV(g_source_unref, (GSource* source), (source)) \
    X(GQuark, g_spawn_exit_error_quark, (void), ()) \
    X(gboolean, g_str_equal, (gconstpointer v1, gconstpointer v2), (v1, v2)) \
    X(guint, g_str_hash, (gconstpointer v), (v)) \
    X(gchar*, g_strdup, (const gchar* str), (str)) \
    XV(g_strfreev, (gchar** str_array), (str_array)) \
    X(GSource*, g_timeout_source_new, (guint interval), (interval)) \
    X(gint, g_unix_fd_list_append, (GUnixFDList* list, gint fd, GError** error), (list, fd, error)) \
    X(GUnixFDList*, g_unix_fd_list_new, (void), ()) \
    X(GSocketAddress*, g_unix_socket_address_new_with_type, (const gchar* path, gint path_len, \
        GUnixSocketAddressType type), (path, path_len, type)) \
    X(GValue*, g_value_init, (GValue* value, GType g_type), (value, g_type)) \
    XV(g_value_set_flags, (GValue* value, guint v_flags), (value, v_flags)) \
    XV(g_value_set_object, (GValue* value, gpointer v_object), (value, v_object)) \
    XV(g_value_unset, (GValue* value), (value)) \
    X(gboolean, g_variant_get_boolean, (GVariant* value), (value)) \
    X(GVariant*, g_variant_get_child_value, (GVariant* value, gsize index_), (value, index_)) \
    X(const gchar*, g_variant_get_string, (GVariant* value, gsize* length), (value, length)) \
    X(const gchar*, g_variant_get_type_string, (GVariant* value), (value)) \
    X(guint32, g_variant_get_uint32, (GVariant* value), (value)) \
    X(GVariant*, g_variant_get_variant, (GVariant* value), (value)) \
    X(gsize, g_variant_n_children, (GVariant* value), (value)) \
    X(GVariant*, g_variant_new_array, (const GVariantType* child_type, GVariant* const* children, gsize n_children), \
        (child_type, children, n_children)) \
    X(GVariant*, g_variant_new_dict_entry, (GVariant* key, GVariant* value), (key, value)) \
    X(GVariant*, g_variant_new_handle, (gint32 value), (value)) \
    X(GVariant*, g_variant_new_string, (const gchar* string), (string)) \
    X(GVariant*, g_variant_new_tuple, (GVariant* const* children, gsize n_children), (children, n_children)) \
    X(GVariant*, g_variant_new_variant, (GVariant* value), (value)) \
    XV(g_variant_type_free, (GVariantType* type), (type)) \
    X(GVariantType*, g_variant_type_new, (const gchar* type_string), (type_string)) \
    XV(g_variant_unref, (GVariant* value), (value)) \
    X(SecretCollection*, secret_collection_for_alias_sync, (SecretService* service, const gchar* alias, \
        SecretCollectionFlags flags, GCancellable* cancellable, GError** error), (service, alias, flags, cancellable, \
        error)) \
    X(GQuark, secret_error_get_quark, (void), ()) \
    X(GHashTable*, secret_item_get_attributes, (SecretItem* self), (self)) \
    X(gchar*, secret_item_get_label, (SecretItem* self), (self)) \
    X(gboolean, secret_item_get_locked, (SecretItem* self), (self)) \
    X(gchar*, secret_item_get_schema_name, (SecretItem* self), (self)) \
    X(gboolean, secret_item_set_secret_sync, (SecretItem* self, SecretValue* value, GCancellable* cancellable, \
        GError** error), (self, value, cancellable, error)) \
    XV(secret_service_disconnect, (void), ()) \
    X(gboolean, secret_service_ensure_session_sync, (SecretService* self, GCancellable* cancellable, GError** error), \
        (self, cancellable, error)) \
    X(SecretValue*, secret_service_get_secret_for_dbus_path_sync, (SecretService* self, const gchar* item_path, \
        GCancellable* cancellable, GError** error), (self, item_path, cancellable, error)) \
    X(const gchar*, secret_service_get_session_dbus_path, (SecretService* self), (self)) \
    X(SecretService*, secret_service_get_sync, (SecretServiceFlags flags, GCancellable* cancellable, GError** error), \
        (flags, cancellable, error)) \
    X(gint, secret_service_lock_sync, (SecretService* service, GList* objects, GCancellable* cancellable, \
        GList** locked, GError** error), (service, objects, cancellable, locked, error)) \
    X(GVariant*, secret_service_prompt_at_dbus_path_sync, (SecretService* self, const gchar* prompt_path, \
        GCancellable* cancellable, const GVariantType* return_type, GError** error), (self, prompt_path, cancellable, \
        return_type, error)) \
    X(gchar*, secret_service_read_alias_dbus_path_sync, (SecretService* self, const gchar* alias, \
        GCancellable* cancellable, GError** error), (self, alias, cancellable, error)) \
    X(gboolean, secret_service_search_for_dbus_paths_sync, (SecretService* self, const SecretSchema* schema, \
        GHashTable* attributes, GCancellable* cancellable, gchar*** unlocked, gchar*** locked, GError** error), \
        (self, schema, attributes, cancellable, unlocked, locked, error)) \
    X(GList*, secret_service_search_sync, (SecretService* service, const SecretSchema* schema, \
        GHashTable* attributes, SecretSearchFlags flags, GCancellable* cancellable, GError** error), (service, \
        schema, attributes, flags, cancellable, error)) \
    X(gboolean, secret_service_store_sync, (SecretService* service, const SecretSchema* schema, \
        GHashTable* attributes, const gchar* collection, const gchar* label, SecretValue* value, \
        GCancellable* cancellable, GError** error), (service, schema, attributes, collection, label, value, \
        cancellable, error)) \
    X(gint, secret_service_unlock_dbus_paths_sync, (SecretService* self, const gchar** paths, \
        GCancellable* cancellable, gchar*** unlocked, GError** error), (self, paths, cancellable, unlocked, error)) \
    X(const gchar*, secret_value_get, (SecretValue* value, gsize* length), (value, length)) \
    X(const gchar*, secret_value_get_content_type, (SecretValue* value), (value)) \
    X(SecretValue*, secret_value_new, (const gchar* secret, gssize length, const gchar* content_type), (secret, \
        length, content_type)) \
    XV(secret_value_unref, (gpointer value), (value)) \
    X(const gchar*, glib_check_version, (guint required_major, guint required_minor, guint required_micro), \
        (required_major, required_minor, required_micro))

#endif
