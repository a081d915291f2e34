#ifndef SECRET_MARKS_H
#define SECRET_MARKS_H

#include <stddef.h>

// The ctgrind technique for scripts/ct-check.sh (Documentation/SecureVault.md, "Constant time"): memory marked
// secret is "undefined" to valgrind's memcheck, which then reports every branch ("Conditional jump or move depends
// on uninitialised value(s)") and every memory address computed from it. Outside valgrind these are no-ops.

/// Marks `count` bytes at `pointer` secret (VALGRIND_MAKE_MEM_UNDEFINED).
void secret_marks_secret(const void *pointer, size_t count);

/// Marks `count` bytes at `pointer` public again (VALGRIND_MAKE_MEM_DEFINED), where a value is declassified:
/// a ciphertext once it is written, a plaintext once its tag verified.
void secret_marks_public(const void *pointer, size_t count);

/// 1 when the process runs under valgrind, 0 otherwise.
int secret_marks_under_valgrind(void);

/// 1 when memcheck holds every one of the `count` bytes at `pointer` for secret (a check that the marks work),
/// 0 when one is not, -1 outside memcheck.
int secret_marks_all_secret(const void *pointer, size_t count);

/// 1 when built with valgrind's headers (Debian's valgrind package), 0 when the marks are compiled out.
int secret_marks_available(void);

#endif
