#include "secret_marks.h"

#if __has_include(<valgrind/memcheck.h>)
#include <stdlib.h>
#include <valgrind/memcheck.h>
#include <valgrind/valgrind.h>
#define SECRET_MARKS 1
#else
#define SECRET_MARKS 0
#endif

void secret_marks_secret(const void *pointer, size_t count) {
#if SECRET_MARKS
    (void)VALGRIND_MAKE_MEM_UNDEFINED(pointer, count);
#else
    (void)pointer;
    (void)count;
#endif
}

void secret_marks_public(const void *pointer, size_t count) {
#if SECRET_MARKS
    (void)VALGRIND_MAKE_MEM_DEFINED(pointer, count);
#else
    (void)pointer;
    (void)count;
#endif
}

int secret_marks_under_valgrind(void) {
#if SECRET_MARKS
    return RUNNING_ON_VALGRIND ? 1 : 0;
#else
    return 0;
#endif
}

int secret_marks_all_secret(const void *pointer, size_t count) {
#if SECRET_MARKS
    if (!RUNNING_ON_VALGRIND) return -1;
    unsigned char *bits = malloc(count > 0 ? count : 1);
    if (bits == NULL) return 0;
    // 1: fetched (memcheck runs), 0: not memcheck (no V bits), 3: unaddressable.
    int status = VALGRIND_GET_VBITS(pointer, bits, count);
    int all = status == 1;
    for (size_t i = 0; all && i < count; i++) all = bits[i] == 0xFF;
    free(bits);
    return status == 1 ? all : -1;
#else
    (void)pointer;
    (void)count;
    return -1;
#endif
}

int secret_marks_available(void) { return SECRET_MARKS; }

#if SECRET_MARKS
// The one declassification inside libsodium: whether a tag verified is public (an open fails or succeeds for all
// to see), but libsodium branches on it inside its decryption, right after crypto_verify_16 compared the tags in
// constant time. Valgrind calls this wrapper in place of libsodium's crypto_verify_16 (function wrapping, valgrind
// manual 3.2), wherever it is called from; it marks the result public and nothing else. The comparison itself
// still runs on secret bytes under memcheck's eye.
int I_WRAP_SONAME_FNNAME_ZU(libsodiumZdsoZa, crypto_verify_16)(const unsigned char *x, const unsigned char *y);
int I_WRAP_SONAME_FNNAME_ZU(libsodiumZdsoZa, crypto_verify_16)(const unsigned char *x, const unsigned char *y) {
    int result;
    OrigFn original;
    VALGRIND_GET_ORIG_FN(original);
    CALL_FN_W_WW(result, original, x, y);
    (void)VALGRIND_MAKE_MEM_DEFINED(&result, sizeof result);
    return result;
}

// The same for sodium_memcmp, the constant-time comparison of key checks and secrets: its answer is public.
int I_WRAP_SONAME_FNNAME_ZU(libsodiumZdsoZa, sodium_memcmp)(const void *a, const void *b, size_t length);
int I_WRAP_SONAME_FNNAME_ZU(libsodiumZdsoZa, sodium_memcmp)(const void *a, const void *b, size_t length) {
    int result;
    OrigFn original;
    VALGRIND_GET_ORIG_FN(original);
    CALL_FN_W_WWW(result, original, a, b, length);
    (void)VALGRIND_MAKE_MEM_DEFINED(&result, sizeof result);
    return result;
}
#endif

#if SECRET_MARKS
// PrefsKV's own constant-time comparison of record authenticators and key checks (prefs_equal_constant_time, linked
// into the executable, whose soname valgrind calls NONE): its answer is public too; the comparison runs on the
// secret bytes under memcheck's eye.
int I_WRAP_SONAME_FNNAME_ZU(NONE, prefs_equal_constant_time)(const void *a, const void *b, size_t length);
int I_WRAP_SONAME_FNNAME_ZU(NONE, prefs_equal_constant_time)(const void *a, const void *b, size_t length) {
    int result;
    OrigFn original;
    VALGRIND_GET_ORIG_FN(original);
    CALL_FN_W_WWW(result, original, a, b, length);
    (void)VALGRIND_MAKE_MEM_DEFINED(&result, sizeof result);
    return result;
}
#endif
