#ifndef PREFS_SYS_H
#define PREFS_SYS_H

#include <fcntl.h>
#include <stddef.h>
#include <sys/prctl.h>

// System calls PrefsKV makes on the way to its first read, called directly: Swift's Glibc module wraps the
// variadic open(2) and fcntl(2) in functions of its own library, which a fresh process binds (a symbol lookup
// through every loaded library) and pages in at first use. Errors are reported as the C calls report them.
// (Inline, so that they compile into PrefsKV itself.)

#ifndef O_NOATIME
#define O_NOATIME 01000000
#endif

/// O_NOATIME (Linux; hidden from Swift's Glibc module): do not update the file's access time.
static const int prefs_o_noatime = O_NOATIME;

/// open(2): `mode` is used when `flags` has O_CREAT. Made as openat(AT_FDCWD, ...), the same call, so that a
/// fresh process binds one symbol for both (each lazily bound symbol costs a first open a lookup).
static inline int prefs_open(const char *path, int flags, unsigned int mode) {
    return openat(AT_FDCWD, path, flags, (mode_t)mode);
}

/// openat(2): `name` relative to the directory `dirfd` (AT_FDCWD: the working directory).
static inline int prefs_openat(int dirfd, const char *name, int flags, unsigned int mode) {
    return openat(dirfd, name, flags, (mode_t)mode);
}

/// fcntl(2) with a lock description: F_OFD_SETLK and F_OFD_GETLK.
static inline int prefs_fcntl_lock(int fd, int command, struct flock *lock) { return fcntl(fd, command, lock); }

// Not on the read path: vaultctl, for a process that holds secrets (Sys.disableCoreDumps).

int pipe2(int pipefd[2], int flags);  // <unistd.h> declares it only under _GNU_SOURCE

/// pipe2(2) with O_CLOEXEC: a pipe no child spawned meanwhile by another thread inherits (Sys.runChild).
static inline int prefs_pipe_cloexec(int fds[2]) { return pipe2(fds, O_CLOEXEC); }

/// Adds to the posix_spawn_file_actions_t at `actions` a file action closing every descriptor from `from` up
/// (close_range(2) in the child, after the dup2 actions before it), so a helper program inherits none of the host
/// app's descriptors (Sys.spawn). glibc's posix_spawn_file_actions_addclosefrom_np (2.34 and later), which Swift's
/// Glibc module does not show; in prefs_kv.c, so that this header needs no <spawn.h>. 0, or an error number.
int prefs_spawn_close_from(void *actions, int from);

/// prctl(2) PR_SET_DUMPABLE 0 (variadic, so not callable from Swift): the process is not dumpable.
static inline int prefs_set_not_dumpable(void) { return prctl(PR_SET_DUMPABLE, 0L, 0L, 0L, 0L); }

// Compaction of a buffered store (FileProtocols.md, "Compaction"): two names swapped in one step.

int renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, unsigned int flags);
// <stdio.h> declares it only under _GNU_SOURCE (glibc 2.28 and later).

#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

/// renameat2(2) with RENAME_EXCHANGE: `a` and `b` (both must exist) trade names atomically. Fails with EINVAL on
/// a file system that cannot (the caller then renames as before).
static inline int prefs_rename_exchange(const char *a, const char *b) {
    return renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE);
}

// Growable buffers of pages (Sys.resizeBuffer): an index's arrays grown without a copy.

void *mremap(void *old_address, size_t old_size, size_t new_size, int flags, ...);
// <sys/mman.h> declares it only under _GNU_SOURCE.

#ifndef MREMAP_MAYMOVE
#define MREMAP_MAYMOVE 1
#endif

/// mremap(2) with MREMAP_MAYMOVE (variadic, so not callable from Swift): the private anonymous mapping of
/// `old_size` bytes at `old_address` resized to `new_size`, its pages moved, not copied. MAP_FAILED on failure.
static inline void *prefs_remap_pages(void *old_address, size_t old_size, size_t new_size) {
    return mremap(old_address, old_size, new_size, MREMAP_MAYMOVE);
}

/// 1 when the `length` bytes at `a` and `b` are equal, else 0, in a time that depends on `length` only: every byte
/// is read (through volatile pointers) and the answer is made without a branch on the bytes. For authenticators and
/// key checks of sealed stores (PrefsKV links no libsodium; SecureVault uses `sodium_memcmp`). In prefs_kv.c.
int prefs_equal_constant_time(const void *a, const void *b, size_t length);

#endif
