#include "vault_keyring.h"

#include <errno.h>
#include <sys/syscall.h>
#include <unistd.h>

// keyctl(2) operations (linux/keyctl.h), spelled out so that no kernel header is needed.
enum {
    op_get_keyring_id = 0,
    op_join_session_keyring = 1,
    op_revoke = 3,
    op_describe = 6,
    op_link = 8,
    op_unlink = 9,
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
    // uid -1: the caller's own; linked into the process keyring (created for this process when absent), so that
    // its keys are possessed and found by a search from there. Not the session keyring: linking into a session
    // keyring the process does not have would give the thread a new anonymous one.
    return (int32_t)result(syscall(SYS_keyctl, op_get_persistent, -1, VAULT_KEYRING_PROCESS));
}

int vault_keyring_possess(int32_t keyring) {
    // Linking a keyring into the process keyring makes this process possess it, and so its keys: a key's
    // default permissions give the user only "view" and the possessor the rest (read, set its timeout, ...).
    return (int)result(syscall(SYS_keyctl, op_link, keyring, VAULT_KEYRING_PROCESS));
}

int32_t vault_keyring_add_expiring(
    const char *description, const void *payload, size_t length, int32_t keyring, uint32_t seconds) {
    // Made in the thread keyring, given its timeout there, then linked into `keyring` (displacing a key of the
    // same name, expired or not): at no instant does `keyring` hold the key without its timeout, and a stale
    // expired key is replaced rather than updated (an update would clear its expiry).
    long key = syscall(SYS_add_key, "user", description, payload, length, VAULT_KEYRING_THREAD);
    if (key < 0) return -errno;
    if (syscall(SYS_keyctl, op_set_timeout, key, seconds) < 0 ||
        syscall(SYS_keyctl, op_link, key, keyring) < 0) {
        int error = errno;
        syscall(SYS_keyctl, op_invalidate, key);
        return -error;
    }
    syscall(SYS_keyctl, op_unlink, key, VAULT_KEYRING_THREAD);
    return (int32_t)key;
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

int64_t vault_keyring_describe(int32_t key, char *buffer, size_t capacity) {
    return (int64_t)result(syscall(SYS_keyctl, op_describe, key, buffer, capacity));
}

int vault_keyring_invalidate(int32_t key) { return (int)result(syscall(SYS_keyctl, op_invalidate, key)); }

int vault_keyring_revoke(int32_t key) { return (int)result(syscall(SYS_keyctl, op_revoke, key)); }

int vault_keyring_set_timeout(int32_t key, uint32_t seconds) {
    return (int)result(syscall(SYS_keyctl, op_set_timeout, key, seconds));
}

int32_t vault_keyring_join_new_session(void) {
    return (int32_t)result(syscall(SYS_keyctl, op_join_session_keyring, (const char *)0));
}
