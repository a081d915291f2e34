// A fresh process doing one bare libsecret lookup, the floor a vault's cold token read is compared with.
//
//   secret-lookup ATTRIBUTE VALUE    looks up the binary secret with that attribute in the schema
//                                    "dev.securevault.Bench"; prints its length, exits 0 (1 when absent, 2 on error)
//   secret-lookup --store ATTRIBUTE VALUE   stores 32 random bytes there first (set-up, not measured)
//   secret-lookup --noop             exits at once: the cost of starting this process
#include <libsecret/secret.h>
#include <stdio.h>
#include <string.h>

static const SecretSchema bench_schema = {
    "dev.securevault.Bench", SECRET_SCHEMA_NONE, {{"id", SECRET_SCHEMA_ATTRIBUTE_STRING}, {NULL, 0}}};

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "--noop") == 0) return 0;
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
