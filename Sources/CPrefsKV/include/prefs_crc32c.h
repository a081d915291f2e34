#ifndef PREFS_CRC32C_H
#define PREFS_CRC32C_H

#include <stddef.h>
#include <stdint.h>

// CRC32C with the processor's crc32 instruction (x86-64 SSE4.2), for PrefsKV's checksums. PrefsKV keeps its
// portable slicing-by-8 implementation in Swift and uses this one only when the processor has the instruction.

/// 1 when `prefs_crc32c_update` may be called on this processor, 0 otherwise.
int prefs_crc32c_hardware_available(void);

/// Feeds `length` bytes at `bytes` to a running CRC32C state (the inverted register, as CRC32C.update keeps it)
/// and returns the new state. Only when `prefs_crc32c_hardware_available()` returned 1.
uint32_t prefs_crc32c_update(uint32_t state, const void *bytes, size_t length);

#endif
