#ifndef VAULT_KEYRING_H
#define VAULT_KEYRING_H
// The Linux kernel key retention service (keyrings(7)) through its two system calls, add_key(2) and
// keyctl(2), without libkeyutils: the only file of the package that speaks to it. Every function returns
// what the kernel returned, or -errno: the Swift side turns that into a typed error.

#include <stddef.h>
#include <stdint.h>

/// The caller's thread keyring (KEY_SPEC_THREAD_KEYRING).
#define VAULT_KEYRING_THREAD (-1)
/// The caller's process keyring (KEY_SPEC_PROCESS_KEYRING).
#define VAULT_KEYRING_PROCESS (-2)
/// The caller's session keyring (KEY_SPEC_SESSION_KEYRING).
#define VAULT_KEYRING_SESSION (-3)
/// The caller's user keyring (KEY_SPEC_USER_KEYRING).
#define VAULT_KEYRING_USER (-4)
/// The caller's user-session keyring (KEY_SPEC_USER_SESSION_KEYRING): what the kernel substitutes for the
/// session keyring of a process that has none.
#define VAULT_KEYRING_USER_SESSION (-5)

/// The serial of a special keyring (`special`: one of the above), created when `create` and absent.
int32_t vault_keyring_id(int32_t special, int create);
/// The serial of the user's persistent keyring (keyctl KEYCTL_GET_PERSISTENT), linked into the process keyring.
int32_t vault_keyring_persistent(void);
/// Links `keyring` into the process keyring, so that this process possesses its keys.
int vault_keyring_possess(int32_t keyring);
/// Adds a "user" key that expires `seconds` from now to `keyring`, never present there without its timeout.
int32_t vault_keyring_add_expiring(
    const char *description, const void *payload, size_t length, int32_t keyring, uint32_t seconds);
/// Adds (or replaces) a "user" key named `description` holding `length` bytes to `keyring`; its serial.
int32_t vault_keyring_add(const char *description, const void *payload, size_t length, int32_t keyring);
/// Searches `keyring` (recursively) for a "user" key named `description`; its serial.
int32_t vault_keyring_search(int32_t keyring, const char *description);
/// Reads at most `capacity` bytes of key `key` into `buffer` (a keyring reads as the serials it links, 4 bytes
/// each); the full length.
int64_t vault_keyring_read(int32_t key, void *buffer, size_t capacity);
/// Describes key `key` as "type;uid;gid;perm;description" (keyctl KEYCTL_DESCRIBE), NUL-terminated, into at most
/// `capacity` bytes of `buffer`; the full length with its NUL.
int64_t vault_keyring_describe(int32_t key, char *buffer, size_t capacity);
/// Invalidates key `key`: it is gone at once for every process (keyctl KEYCTL_INVALIDATE).
int vault_keyring_invalidate(int32_t key);
/// Revokes key `key` (keyctl KEYCTL_REVOKE): it stays, but every read fails with EKEYREVOKED.
int vault_keyring_revoke(int32_t key);
/// Sets key `key` to expire `seconds` from now (keyctl KEYCTL_SET_TIMEOUT; 0: never).
int vault_keyring_set_timeout(int32_t key, uint32_t seconds);
/// Gives the calling process a new anonymous session keyring (keyctl KEYCTL_JOIN_SESSION_KEYRING), which its
/// children inherit: what a login does. For tests.
int32_t vault_keyring_join_new_session(void);

#endif
