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
