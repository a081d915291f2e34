#ifndef PREFS_GUARD_H
#define PREFS_GUARD_H

#include <stddef.h>
#include <stdint.h>

// The guard of PrefsKV's shared mappings. A file mapped MAP_SHARED that shrinks underneath its mapping (a
// `truncate`, a `cp` or `>` over it, a sync tool rewriting it in place) raises SIGBUS at the next access past its
// new end. The guard installs, once per process, a SIGBUS handler that looks the faulting address up among the
// registered mappings: inside one, it maps a private zero page over the faulting page, so that the access
// completes (reading zeros, or writing to memory no file holds), and counts a fault for that mapping, which the
// engine checks before it trusts what it read or acknowledges what it wrote. A SIGBUS anywhere else gets what it
// would have got without the guard: the handler installed before it (a one-shot, SA_RESETHAND, handler once: then
// it is used up, and the guard stays installed), or, when SIGBUS was ignored, nothing for a SIGBUS sent by kill(2)
// (a real fault ends the process, as the kernel ends it), or the default action (the process ends).
//
// A fault resolves only against a registration it can see whole (each slot has a generation), and an
// unregistration waits for a handler answering a fault in its range, so a zero page is never mapped over a range
// that was unmapped after its fault and may belong to someone else by then.

/// How many mappings can be guarded at once; a mapping registered beyond that is unguarded.
#define PREFS_GUARD_SLOTS 1024

/// Installs the handler (once per process; later calls return the first call's result). 0 on success, -1 (errno
/// set) when sigaction failed: mappings are then unguarded.
int prefs_guard_install(void);

/// Registers the mapping [base, base + length) and returns its slot (0 or more), or -1 when every slot is
/// taken. Its fault count starts at zero.
int prefs_guard_register(const void *base, size_t length);

/// Unregisters a slot, before its mapping is unmapped. Returns once no handler is answering a fault in it.
void prefs_guard_unregister(int slot);

/// The slot's fault count: faults the handler answered inside its mapping since it was registered. Read it with
/// an atomic load (acquire); the handler increments it after mapping the zero page.
uint32_t *prefs_guard_fault_count(int slot);

/// A fault count that stays zero: for mappings the guard does not cover (no slot left, or no handler).
uint32_t *prefs_guard_no_faults(void);

/// AArch64 `dmb ishld`: orders the loads before it before the loads after it (x86-64 never reorders loads with
/// other loads, and does not call it). A read of a mapped record checks its CRC word after using its value bytes; a
/// compaction writing a newer image into the file zeros that word first.
static inline void prefs_load_fence(void) {
#if defined(__aarch64__)
    __asm__ __volatile__("dmb ishld" ::: "memory");
#endif
}

#endif
