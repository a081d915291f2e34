#ifndef FORK_PROBE_H
#define FORK_PROBE_H

#include <stdint.h>

/// For the tests of prefs_nonce_next across fork() (Swift cannot call fork): takes a nonce in this process, forks,
/// takes one in the child (which sends it back through a pipe and exits), then one more here. Returns 0, or -1
/// when a nonce could not be made or the fork or pipe failed.
int fork_probe_nonces(uint8_t before[24], uint8_t child[24], uint8_t after[24]);

#endif
