// PrefsKV's C side, in one file on purpose: valgrind 3.19 (Debian 12's, which the allocation tests run) fails
// to read an executable's debug information when it holds two DWARF 5 C compile units.
#include "prefs_crc32c.h"
#include "prefs_tsan.h"

#include <string.h>

// MARK: CRC32C

#if defined(__x86_64__)

int prefs_crc32c_hardware_available(void) { return __builtin_cpu_supports("sse4.2") ? 1 : 0; }

__attribute__((target("sse4.2"))) uint32_t prefs_crc32c_update(uint32_t state, const void *bytes, size_t length) {
    const unsigned char *p = bytes;
    uint64_t crc = state;
    while (length >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        crc = __builtin_ia32_crc32di(crc, word);
        p += 8;
        length -= 8;
    }
    uint32_t c = (uint32_t)crc;
    while (length > 0) {
        c = __builtin_ia32_crc32qi(c, *p);
        p++;
        length--;
    }
    return c;
}

#else

int prefs_crc32c_hardware_available(void) { return 0; }

uint32_t prefs_crc32c_update(uint32_t state, const void *bytes, size_t length) {
    (void)bytes;
    (void)length;
    return state;
}

#endif

// MARK: ThreadSanitizer annotations

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define PREFS_TSAN 1
#endif
#endif
#if !defined(PREFS_TSAN) && defined(__SANITIZE_THREAD__)
#define PREFS_TSAN 1
#endif

#ifdef PREFS_TSAN
void __tsan_acquire(void *address);
void __tsan_release(void *address);

const int prefs_tsan_active = 1;
void prefs_tsan_acquire(const void *address) { __tsan_acquire((void *)address); }
void prefs_tsan_release(const void *address) { __tsan_release((void *)address); }
#else
const int prefs_tsan_active = 0;
void prefs_tsan_acquire(const void *address) { (void)address; }
void prefs_tsan_release(const void *address) { (void)address; }
#endif
