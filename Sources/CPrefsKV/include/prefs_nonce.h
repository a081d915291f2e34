#ifndef PREFS_NONCE_H
#define PREFS_NONCE_H

#include <stdint.h>

// Nonces for XChaCha20-Poly1305 without a system call each: a 16-byte prefix drawn from the kernel's CSPRNG
// (getrandom) once per process, followed by a 64-bit counter. The prefix and counter live in one page advised
// MADV_WIPEONFORK, so a child created by fork() finds it zeroed and draws a prefix of its own: parent and child
// never continue the same sequence. Where the kernel lacks MADV_WIPEONFORK (before Linux 4.14) it fails, and the
// caller draws every nonce at random, as before.

/// Writes the next nonce into `nonce` (24 bytes): the process's prefix, then the counter (little-endian).
/// Thread-safe. Returns 0, or -1 when no nonce could be made this way (no MADV_WIPEONFORK, no memory, getrandom
/// failed); then `nonce` is untouched.
int prefs_nonce_next(uint8_t nonce[24]);

#endif
