#ifndef FORK_PROBE_H
#define FORK_PROBE_H

#include <stdint.h>

/// For the tests of prefs_nonce_next across fork() (Swift cannot call fork): takes a nonce in this process, forks,
/// takes one in the child (which sends it back through a pipe and exits), then one more here. Returns 0, or -1
/// when a nonce could not be made or the fork or pipe failed.
int fork_probe_nonces(uint8_t before[24], uint8_t child[24], uint8_t after[24]);

#endif

#ifndef FORK_PROBE_GUARD_H
#define FORK_PROBE_GUARD_H

/// The SIGBUS guard's handling of signals that are not its own (prefs_guard.h), each scenario in a child of its own
/// (the guard is installed once per process, over the disposition the child sets first). Returns the last stage
/// the child reached times 1000, plus its exit status, or 128 + the signal that ended it; -1 when the fork or the
/// pipe failed.
///
/// Scenario 1: SIGBUS ignored before the guard; `kill -BUS` itself (stage 2 once it returned), then a real fault
/// outside any guarded mapping (which ends the process, as the kernel does for an ignored SIGBUS it raises).
/// Scenario 2: a one-shot (SA_RESETHAND) handler before the guard; `kill -BUS` itself (stage 1 once that handler
/// ran, once), then a fault in a guarded mapping (stage 2 once it was answered with a zero page and counted), then
/// `kill -BUS` once more (the default action now: the one-shot handler was used up).
int fork_probe_guard(int scenario);

#endif
