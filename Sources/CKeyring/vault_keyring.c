#include "vault_keyring.h"

#include <errno.h>
#include <sys/syscall.h>
#include <unistd.h>

// keyctl(2) operations (linux/keyctl.h), spelled out so that no kernel header is needed.
enum {
    op_get_keyring_id = 0,
    op_join_session_keyring = 1,
    op_revoke = 3,
    op_search = 10,
    op_read = 11,
    op_set_timeout = 15,
    op_invalidate = 21,
    op_get_persistent = 22,
};

static long result(long value) { return value < 0 ? -errno : value; }

int32_t vault_keyring_id(int32_t special, int create) {
    return (int32_t)result(syscall(SYS_keyctl, op_get_keyring_id, special, create));
}

int32_t vault_keyring_persistent(void) {
    // uid -1: the caller's own; linked into the session keyring so that it is found by a search from there.
    return (int32_t)result(syscall(SYS_keyctl, op_get_persistent, -1, VAULT_KEYRING_SESSION));
}

int32_t vault_keyring_add(const char *description, const void *payload, size_t length, int32_t keyring) {
    return (int32_t)result(syscall(SYS_add_key, "user", description, payload, length, keyring));
}

int32_t vault_keyring_search(int32_t keyring, const char *description) {
    return (int32_t)result(syscall(SYS_keyctl, op_search, keyring, "user", description, 0));
}

int64_t vault_keyring_read(int32_t key, void *buffer, size_t capacity) {
    return (int64_t)result(syscall(SYS_keyctl, op_read, key, buffer, capacity));
}

int vault_keyring_invalidate(int32_t key) { return (int)result(syscall(SYS_keyctl, op_invalidate, key)); }

int vault_keyring_revoke(int32_t key) { return (int)result(syscall(SYS_keyctl, op_revoke, key)); }

int vault_keyring_set_timeout(int32_t key, uint32_t seconds) {
    return (int)result(syscall(SYS_keyctl, op_set_timeout, key, seconds));
}

int32_t vault_keyring_join_new_session(void) {
    return (int32_t)result(syscall(SYS_keyctl, op_join_session_keyring, (const char *)0));
}
