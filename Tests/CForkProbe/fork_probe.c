#include "fork_probe.h"

#include "prefs_nonce.h"

#include <errno.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int fork_probe_nonces(uint8_t before[24], uint8_t child[24], uint8_t after[24]) {
    if (prefs_nonce_next(before) != 0) return -1;
    int fds[2];
    if (pipe(fds) != 0) return -1;
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        uint8_t nonce[24];
        memset(nonce, 0, sizeof nonce);
        int ok = prefs_nonce_next(nonce) == 0;
        ssize_t written = write(fds[1], nonce, sizeof nonce);
        _exit(ok && written == (ssize_t)sizeof nonce ? 0 : 1);
    }
    close(fds[1]);
    size_t got = 0;
    while (got < 24) {
        ssize_t n = read(fds[0], child + got, 24 - got);
        if (n <= 0) break;
        got += (size_t)n;
    }
    close(fds[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) return -1;
    }
    if (got != 24 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return -1;
    return prefs_nonce_next(after);
}

// MARK: The SIGBUS guard

#include "prefs_guard.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>

static volatile sig_atomic_t fork_probe_one_shot_calls;

static void fork_probe_one_shot(int signal_number) {
    (void)signal_number;
    fork_probe_one_shot_calls++;
}

static void fork_probe_stage(int fd, char stage) { (void)!write(fd, &stage, 1); }

/// Two pages of a file mapped shared, the file then truncated to nothing: an access to the mapping faults.
static volatile unsigned char *fork_probe_shrunk_mapping(void) {
    char name[] = "/tmp/fork-probe-guard-XXXXXX";
    int fd = mkstemp(name);
    if (fd < 0) return NULL;
    unlink(name);
    long page = sysconf(_SC_PAGESIZE);
    if (ftruncate(fd, 2 * page) != 0) return NULL;
    void *map = mmap(NULL, (size_t)(2 * page), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED || ftruncate(fd, 0) != 0) return NULL;
    return map;
}

static void fork_probe_guard_child(int scenario, int out) {
    volatile unsigned char *shrunk = fork_probe_shrunk_mapping();
    if (shrunk == NULL) _exit(90);
    long page = sysconf(_SC_PAGESIZE);
    if (scenario == 1) {
        signal(SIGBUS, SIG_IGN);
        if (prefs_guard_install() != 0) _exit(91);
        fork_probe_stage(out, 1);
        kill(getpid(), SIGBUS);
        fork_probe_stage(out, 2);
        (void)shrunk[page];  // not registered: ends the process
        fork_probe_stage(out, 3);
        _exit(0);
    }
    struct sigaction one_shot;
    memset(&one_shot, 0, sizeof one_shot);
    one_shot.sa_handler = fork_probe_one_shot;
    one_shot.sa_flags = SA_RESETHAND;
    sigemptyset(&one_shot.sa_mask);
    if (sigaction(SIGBUS, &one_shot, NULL) != 0) _exit(92);
    if (prefs_guard_install() != 0) _exit(91);
    kill(getpid(), SIGBUS);
    if (fork_probe_one_shot_calls != 1) _exit(93);
    fork_probe_stage(out, 1);
    int slot = prefs_guard_register((const void *)shrunk, (size_t)(2 * page));
    if (slot < 0) _exit(94);
    unsigned char seen = shrunk[page];
    if (seen != 0 || __atomic_load_n(prefs_guard_fault_count(slot), __ATOMIC_ACQUIRE) == 0) _exit(95);
    prefs_guard_unregister(slot);
    fork_probe_stage(out, 2);
    kill(getpid(), SIGBUS);
    fork_probe_stage(out, fork_probe_one_shot_calls == 1 ? 3 : 4);
    _exit(0);
}

int fork_probe_guard(int scenario) {
    int fds[2];
    if (pipe(fds) != 0) return -1;
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        close(fds[0]);
        fork_probe_guard_child(scenario, fds[1]);
        _exit(99);
    }
    close(fds[1]);
    char stage = 0, byte;
    while (read(fds[0], &byte, 1) == 1) stage = byte;
    close(fds[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) return -1;
    }
    int ended = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return stage * 1000 + ended;
}
