#include "prefs_crc32c.h"

#include <string.h>

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
