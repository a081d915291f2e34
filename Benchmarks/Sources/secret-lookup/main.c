// A fresh process doing one bare libsecret lookup, the floor a vault's cold token read is compared with.
//
//   secret-lookup ATTRIBUTE VALUE    looks up the binary secret with that attribute in the schema
//                                    "dev.securevault.Bench"; prints its length, exits 0 (1 when absent, 2 on error)
//   secret-lookup --store ATTRIBUTE VALUE   stores 32 random bytes there first (set-up, not measured)
//   secret-lookup --noop             exits at once: the cost of starting this process
//   secret-lookup --portal           inside a Flatpak sandbox: one bare Secret portal RetrieveSecret (Response
//                                    subscribed first, the pipe read after Response 0); prints "<nanoseconds from
//                                    connecting to the bus to the secret read> <its length>"
#include <gio/gunixfdlist.h>
#include <libsecret/secret.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static guint64 now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (guint64)t.tv_sec * 1000000000u + (guint64)t.tv_nsec;
}

static void on_response(GDBusConnection *c, const gchar *s, const gchar *p, const gchar *i, const gchar *n,
                        GVariant *parameters, gpointer data) {
    (void)c; (void)s; (void)p; (void)i; (void)n;
    g_variant_get_child(parameters, 0, "u", (guint32 *)data);
}

static int portal(void) {
    guint64 start = now_ns();
    GError *error = NULL;
    GDBusConnection *bus = g_bus_get_sync(G_BUS_TYPE_SESSION, NULL, &error);
    if (bus == NULL) { fprintf(stderr, "secret-lookup: %s\n", error->message); return 2; }
    gchar *sender = g_strdup(g_dbus_connection_get_unique_name(bus) + 1);
    for (gchar *c = sender; *c; c++) if (*c == '.') *c = '_';
    gchar *path = g_strdup_printf("/org/freedesktop/portal/desktop/request/%s/bench", sender);
    guint32 response = G_MAXUINT32;
    guint id = g_dbus_connection_signal_subscribe(bus, "org.freedesktop.portal.Desktop",
        "org.freedesktop.portal.Request", "Response", path, NULL, G_DBUS_SIGNAL_FLAGS_NONE, on_response, &response, NULL);
    int fds[2];
    if (pipe(fds) != 0) return 2;
    GUnixFDList *list = g_unix_fd_list_new();
    int index = g_unix_fd_list_append(list, fds[1], &error);
    close(fds[1]);
    GVariantBuilder options;
    g_variant_builder_init(&options, G_VARIANT_TYPE_VARDICT);
    g_variant_builder_add(&options, "{sv}", "handle_token", g_variant_new_string("bench"));
    GVariant *reply = g_dbus_connection_call_with_unix_fd_list_sync(bus, "org.freedesktop.portal.Desktop",
        "/org/freedesktop/portal/desktop", "org.freedesktop.portal.Secret", "RetrieveSecret",
        g_variant_new("(h@a{sv})", index, g_variant_builder_end(&options)), G_VARIANT_TYPE("(o)"),
        G_DBUS_CALL_FLAGS_NONE, 30000, list, NULL, NULL, &error);
    g_object_unref(list);
    if (reply == NULL) { fprintf(stderr, "secret-lookup: %s\n", error->message); return 2; }
    g_variant_unref(reply);
    while (response == G_MAXUINT32) g_main_context_iteration(NULL, TRUE);
    if (response != 0) { fprintf(stderr, "secret-lookup: portal response %u\n", response); return 2; }
    unsigned char secret[4096];
    size_t length = 0;
    ssize_t n;
    while ((n = read(fds[0], secret + length, sizeof secret - length)) > 0) length += (size_t)n;
    guint64 elapsed = now_ns() - start;
    memset(secret, 0, sizeof secret);
    g_dbus_connection_signal_unsubscribe(bus, id);
    printf("%llu %zu\n", (unsigned long long)elapsed, length);
    return length > 0 ? 0 : 2;
}

static const SecretSchema bench_schema = {
    "dev.securevault.Bench", SECRET_SCHEMA_NONE, {{"id", SECRET_SCHEMA_ATTRIBUTE_STRING}, {NULL, 0}}};

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "--noop") == 0) return 0;
    if (argc == 2 && strcmp(argv[1], "--portal") == 0) return portal();
    int store = argc == 4 && strcmp(argv[1], "--store") == 0;
    if (argc != 3 && !store) {
        fprintf(stderr, "usage: secret-lookup [--store] ATTRIBUTE VALUE | --noop\n");
        return 64;
    }
    const char *attribute = argv[store ? 2 : 1];
    const char *value = argv[store ? 3 : 2];
    GHashTable *attributes = g_hash_table_new(g_str_hash, g_str_equal);
    g_hash_table_insert(attributes, (gpointer)attribute, (gpointer)value);
    GError *error = NULL;
    if (store) {
        guchar key[32];
        for (size_t i = 0; i < sizeof key; i++) key[i] = (guchar)g_random_int();
        SecretValue *secret = secret_value_new((const gchar *)key, sizeof key, "application/octet-stream");
        gboolean ok = secret_password_storev_binary_sync(
            &bench_schema, attributes, SECRET_COLLECTION_DEFAULT, "SecureVault benchmark key", secret, NULL, &error);
        secret_value_unref(secret);
        g_hash_table_unref(attributes);
        if (!ok) {
            fprintf(stderr, "secret-lookup: store failed: %s\n", error ? error->message : "?");
            return 2;
        }
        return 0;
    }
    SecretValue *secret = secret_password_lookupv_binary_sync(&bench_schema, attributes, NULL, &error);
    g_hash_table_unref(attributes);
    if (error != NULL) {
        fprintf(stderr, "secret-lookup: %s\n", error->message);
        g_error_free(error);
        return 2;
    }
    if (secret == NULL) return 1;
    gsize length = 0;
    secret_value_get(secret, &length);
    printf("%zu\n", (size_t)length);
    secret_value_unref(secret);
    return 0;
}
