#ifndef PREFS_TSAN_H
#define PREFS_TSAN_H

// ThreadSanitizer's happens-before annotations. SwiftPM builds prefs_kv.c with the sanitizer flags of the
// build, so the hooks exist only in a ThreadSanitizer build; elsewhere `prefs_tsan_active` is 0 and they do
// nothing.

/// 1 in a build with ThreadSanitizer, 0 otherwise.
extern const int prefs_tsan_active;

/// `__tsan_acquire(address)` in a ThreadSanitizer build.
void prefs_tsan_acquire(const void *address);

/// `__tsan_release(address)` in a ThreadSanitizer build.
void prefs_tsan_release(const void *address);

#endif
