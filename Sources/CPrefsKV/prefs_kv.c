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

// MARK: Mapping guard (prefs_guard.h)

#include "prefs_guard.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

// Each slot: the mapping's start (0: free), its length, its fault count, whether it is taken, its generation (odd
// while a registration is written or removed, so the handler never pairs one registration's start with another's
// length) and the handlers answering a fault in it right now (an unregistration waits for them, so a zero page is
// never mapped over a range that was unmapped meanwhile and may be someone else's). Plain words accessed with
// atomic builtins: the handler reads them on whatever thread faulted.
static uintptr_t prefs_guard_start[PREFS_GUARD_SLOTS];
static size_t prefs_guard_length[PREFS_GUARD_SLOTS];
static uint32_t prefs_guard_faults[PREFS_GUARD_SLOTS];
static int prefs_guard_taken[PREFS_GUARD_SLOTS];
static uint32_t prefs_guard_generation[PREFS_GUARD_SLOTS];
static uint32_t prefs_guard_in_handler[PREFS_GUARD_SLOTS];
static uint32_t prefs_guard_zero;

static struct sigaction prefs_guard_previous;
// 1 once a one-shot (SA_RESETHAND) previous handler has run: it is used up, as it would have been without the guard.
static int prefs_guard_previous_used;
static long prefs_guard_page;
// 0: not installed yet, 1: installing, 2: installed, 3: sigaction failed (errno in prefs_guard_errno).
static int prefs_guard_state;
static int prefs_guard_errno;

static void prefs_guard_handler(int signal_number, siginfo_t *info, void *context) {
    uintptr_t address = (uintptr_t)info->si_addr;
    // Only a fault on a nonexistent part of a mapped object (an access past the end of a shrunk file) is the
    // guard's; a SIGBUS sent by kill(2) or raise(3) has no faulting address.
    int fault = info->si_code == BUS_ADRERR;
    for (int i = 0; fault && i < PREFS_GUARD_SLOTS; i++) {
        uint32_t generation = __atomic_load_n(&prefs_guard_generation[i], __ATOMIC_SEQ_CST);
        if (generation & 1) continue;  // being registered or unregistered: not a mapping one can fault in yet
        uintptr_t start = __atomic_load_n(&prefs_guard_start[i], __ATOMIC_SEQ_CST);
        if (start == 0 || address < start) continue;
        size_t length = __atomic_load_n(&prefs_guard_length[i], __ATOMIC_SEQ_CST);
        if (address - start >= length) continue;
        // Announced before the registration is checked once more, so that an unregistration either is seen here
        // (the slot's generation moved: not ours) or sees this handler and waits for it (prefs_guard_unregister).
        __atomic_fetch_add(&prefs_guard_in_handler[i], 1, __ATOMIC_SEQ_CST);
        if (__atomic_load_n(&prefs_guard_generation[i], __ATOMIC_SEQ_CST) != generation) {
            __atomic_fetch_sub(&prefs_guard_in_handler[i], 1, __ATOMIC_SEQ_CST);
            continue;
        }
        // One of PrefsKV's mappings: a private zero page over the faulting page lets the access complete.
        int saved = errno;
        uintptr_t page = address & ~(uintptr_t)(prefs_guard_page - 1);
        void *zero = mmap(
            (void *)page, (size_t)prefs_guard_page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
            -1, 0);
        errno = saved;
        if (zero != MAP_FAILED) __atomic_fetch_add(&prefs_guard_faults[i], 1, __ATOMIC_RELEASE);
        __atomic_fetch_sub(&prefs_guard_in_handler[i], 1, __ATOMIC_SEQ_CST);
        if (zero == MAP_FAILED) break;
        return;
    }
    // Not a fault of ours: what would have happened without the guard. The previous handler runs with its own
    // mask. A one-shot one (SA_RESETHAND) runs once and is then used up, as it would have been; the guard stays
    // installed (resetting the process's disposition would leave PrefsKV's mappings unguarded).
    int ignored = !(prefs_guard_previous.sa_flags & SA_SIGINFO) && prefs_guard_previous.sa_handler == SIG_IGN;
    int has_handler = (prefs_guard_previous.sa_flags & SA_SIGINFO)
        ? prefs_guard_previous.sa_sigaction != NULL
        : (prefs_guard_previous.sa_handler != SIG_DFL && prefs_guard_previous.sa_handler != SIG_IGN);
    if (has_handler && (prefs_guard_previous.sa_flags & SA_RESETHAND)) {
        has_handler = __atomic_exchange_n(&prefs_guard_previous_used, 1, __ATOMIC_ACQ_REL) == 0;
    }
    if (has_handler) {
        sigset_t saved;
        pthread_sigmask(SIG_BLOCK, &prefs_guard_previous.sa_mask, &saved);
        if (prefs_guard_previous.sa_flags & SA_SIGINFO) {
            prefs_guard_previous.sa_sigaction(signal_number, info, context);
        } else {
            prefs_guard_previous.sa_handler(signal_number);
        }
        pthread_sigmask(SIG_SETMASK, &saved, NULL);
        return;
    }
    // A SIGBUS sent to a process that ignored SIGBUS stays ignored. (A real fault is not: the kernel ends a process
    // whose own access faults whatever its disposition, so it goes on below.)
    if (ignored && !fault) return;
    // The default action: restored; a faulting access runs again and the signal ends the process, and a signal that
    // was sent is sent again (it stays pending until this handler returns).
    struct sigaction fallback;
    memset(&fallback, 0, sizeof fallback);
    fallback.sa_handler = SIG_DFL;
    sigemptyset(&fallback.sa_mask);
    sigaction(SIGBUS, &fallback, NULL);
    if (!fault) raise(SIGBUS);
}

int prefs_guard_install(void) {
    int expected = 0;
    if (__atomic_compare_exchange_n(&prefs_guard_state, &expected, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        prefs_guard_page = sysconf(_SC_PAGESIZE);
        struct sigaction action;
        memset(&action, 0, sizeof action);
        action.sa_sigaction = prefs_guard_handler;
        action.sa_flags = SA_SIGINFO | SA_ONSTACK;
        sigemptyset(&action.sa_mask);
        int failed = sigaction(SIGBUS, &action, &prefs_guard_previous) != 0;
        if (failed) prefs_guard_errno = errno;
        __atomic_store_n(&prefs_guard_state, failed ? 3 : 2, __ATOMIC_RELEASE);
    }
    int state;
    while ((state = __atomic_load_n(&prefs_guard_state, __ATOMIC_ACQUIRE)) == 1) {
        // Another thread is installing it: a single sigaction call.
    }
    if (state == 3) {
        errno = prefs_guard_errno;
        return -1;
    }
    return 0;
}

int prefs_guard_register(const void *base, size_t length) {
    for (int i = 0; i < PREFS_GUARD_SLOTS; i++) {
        int free = 0;
        if (__atomic_compare_exchange_n(&prefs_guard_taken[i], &free, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
            __atomic_fetch_add(&prefs_guard_generation[i], 1, __ATOMIC_SEQ_CST);  // odd: being written
            __atomic_store_n(&prefs_guard_faults[i], 0, __ATOMIC_RELAXED);
            __atomic_store_n(&prefs_guard_length[i], length, __ATOMIC_SEQ_CST);
            __atomic_store_n(&prefs_guard_start[i], (uintptr_t)base, __ATOMIC_SEQ_CST);
            __atomic_fetch_add(&prefs_guard_generation[i], 1, __ATOMIC_SEQ_CST);  // even: this registration's
            return i;
        }
    }
    return -1;
}

void prefs_guard_unregister(int slot) {
    if (slot < 0 || slot >= PREFS_GUARD_SLOTS) return;
    __atomic_fetch_add(&prefs_guard_generation[slot], 1, __ATOMIC_SEQ_CST);  // odd: no new fault resolves here
    // A handler that matched this registration before the generation moved is answering its fault: wait for it
    // (one mmap), so that the caller's munmap never races a zero page mapped over the range.
    while (__atomic_load_n(&prefs_guard_in_handler[slot], __ATOMIC_SEQ_CST) != 0) {
    }
    __atomic_store_n(&prefs_guard_start[slot], 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&prefs_guard_length[slot], 0, __ATOMIC_SEQ_CST);
    __atomic_fetch_add(&prefs_guard_generation[slot], 1, __ATOMIC_SEQ_CST);
    __atomic_store_n(&prefs_guard_taken[slot], 0, __ATOMIC_RELEASE);
}

uint32_t *prefs_guard_fault_count(int slot) {
    return slot >= 0 && slot < PREFS_GUARD_SLOTS ? &prefs_guard_faults[slot] : &prefs_guard_zero;
}

uint32_t *prefs_guard_no_faults(void) { return &prefs_guard_zero; }

// MARK: Constant-time comparison (prefs_sys.h)

int prefs_equal_constant_time(const void *a, const void *b, size_t length) {
    const volatile unsigned char *x = a;
    const volatile unsigned char *y = b;
    unsigned char difference = 0;
    for (size_t i = 0; i < length; i++) difference |= (unsigned char)(x[i] ^ y[i]);
    // 0 - 1 wraps to all ones (bit 31 set) only when no byte differed.
    return (int)(((uint32_t)difference - 1u) >> 31);
}

// MARK: Spawning (prefs_sys.h)

#include "prefs_sys.h"

#include <spawn.h>

int posix_spawn_file_actions_addclosefrom_np(posix_spawn_file_actions_t *actions, int from);
// <spawn.h> declares it only under _GNU_SOURCE or _DEFAULT_SOURCE with glibc 2.34 and later.

int prefs_spawn_close_from(void *actions, int from) {
    return posix_spawn_file_actions_addclosefrom_np((posix_spawn_file_actions_t *)actions, from);
}

// MARK: Nonces (prefs_nonce.h)

#include "prefs_nonce.h"

#include <sys/random.h>

struct prefs_nonce_state {
    uint64_t ready;  // 1 once `prefix` is drawn in this process (0 again in a child: the page is wiped on fork)
    uint64_t counter;
    uint8_t prefix[16];
};

static struct prefs_nonce_state *prefs_nonce_page;  // the mapping survives fork; its contents do not
static int prefs_nonce_unavailable;
static pthread_mutex_t prefs_nonce_lock = PTHREAD_MUTEX_INITIALIZER;

int prefs_nonce_next(uint8_t nonce[24]) {
again:;
    struct prefs_nonce_state *state = __atomic_load_n(&prefs_nonce_page, __ATOMIC_ACQUIRE);
    if (state == NULL || __atomic_load_n(&state->ready, __ATOMIC_ACQUIRE) == 0) {
        pthread_mutex_lock(&prefs_nonce_lock);
        if (prefs_nonce_page == NULL && !prefs_nonce_unavailable) {
            void *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (page == MAP_FAILED) {
                prefs_nonce_unavailable = 1;
            } else if (madvise(page, 4096, MADV_WIPEONFORK) != 0) {
                munmap(page, 4096);
                prefs_nonce_unavailable = 1;
            } else {
                __atomic_store_n(&prefs_nonce_page, (struct prefs_nonce_state *)page, __ATOMIC_RELEASE);
            }
        }
        state = prefs_nonce_page;
        if (state != NULL && state->ready == 0) {
            uint8_t prefix[16];
            size_t got = 0;
            while (got < sizeof prefix) {
                ssize_t n = getrandom(prefix + got, sizeof prefix - got, 0);
                if (n < 0 && errno == EINTR) continue;
                if (n <= 0) break;
                got += (size_t)n;
            }
            if (got == sizeof prefix) {
                memcpy(state->prefix, prefix, sizeof prefix);
                state->counter = 0;
                __atomic_store_n(&state->ready, 1, __ATOMIC_RELEASE);
            }
        }
        int ready = state != NULL && state->ready != 0;
        pthread_mutex_unlock(&prefs_nonce_lock);
        if (!ready) return -1;
    }
    uint64_t counter = __atomic_fetch_add(&state->counter, 1, __ATOMIC_RELAXED);
    memcpy(nonce, state->prefix, 16);
    // A fork (from a signal handler that interrupted this function) between the check above and the copy leaves
    // the child a wiped page: a zero prefix. It then finds `ready` 0 and draws its own.
    if (__atomic_load_n(&state->ready, __ATOMIC_ACQUIRE) == 0) goto again;
    for (int i = 0; i < 8; i++) nonce[16 + i] = (uint8_t)(counter >> (8 * i));
    return 0;
}
