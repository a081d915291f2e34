// prefs-racer: a second writer of a store's file for the tests (issue 34). It maps FILE shared, as any process of
// the same user can, and writes the bytes at OFFSET again and again while the test's process reads and writes the
// store, until it receives SIGTERM:
//
//   prefs-racer FILE OFFSET flip HEX    XORs the bytes with HEX, back and forth: a reader of the file sees either
//                                       value, and may see one at its check and the other when it reads again. On
//                                       SIGTERM it leaves them as they were.
//   prefs-racer FILE OFFSET plant HEX   stores HEX over and over, so that it lands right after the store's own
//                                       write of those bytes. On SIGTERM it leaves HEX there.
//
// It prints "racing" as it starts writing (a racer stopped at once may not have written yet), and "stopped N" (N
// rounds) when it ends. In C, through volatile pointers: a loop of stores nobody in this process reads could
// otherwise be folded into one.
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

static volatile sig_atomic_t stopping;

static void on_term(int signal_number) {
    (void)signal_number;
    stopping = 1;
}

static int parse_hex(const char *text, unsigned char *out, size_t capacity, size_t *length) {
    size_t n = strlen(text);
    if (n == 0 || n % 2 != 0 || n / 2 > capacity) return -1;
    for (size_t i = 0; i < n / 2; i++) {
        char pair[3] = {text[2 * i], text[2 * i + 1], 0};
        char *end;
        out[i] = (unsigned char)strtoul(pair, &end, 16);
        if (*end != 0) return -1;
    }
    *length = n / 2;
    return 0;
}

int main(int argc, char **argv) {
    unsigned char bytes[4096];
    size_t length = 0;
    if (argc != 5 || (strcmp(argv[3], "flip") != 0 && strcmp(argv[3], "plant") != 0) ||
        parse_hex(argv[4], bytes, sizeof bytes, &length) != 0) {
        fprintf(stderr, "usage: prefs-racer FILE OFFSET flip|plant HEX\n");
        return 2;
    }
    int flip = strcmp(argv[3], "flip") == 0;
    long long offset = atoll(argv[2]);
    int fd = open(argv[1], O_RDWR);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || offset < 0 || (long long)(offset + length) > (long long)st.st_size) {
        perror("prefs-racer: open");
        return 1;
    }
    unsigned char *map = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
        perror("prefs-racer: mmap");
        return 1;
    }
    // The test threads that spawn it block most signals, and a spawned process inherits that mask: SIGTERM is
    // unblocked here, and the racer dies with the test process if that goes first.
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = on_term;
    sigaction(SIGTERM, &action, NULL);
    sigset_t term;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    sigprocmask(SIG_UNBLOCK, &term, NULL);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() == 1) return 1;

    volatile unsigned char *target = map + offset;
    unsigned long long rounds = 0;
    printf("racing\n");
    fflush(stdout);
    while (!stopping) {
        for (size_t i = 0; i < length; i++) {
            if (flip) target[i] ^= bytes[i];
            else target[i] = bytes[i];
        }
        rounds++;
    }
    if (flip && (rounds & 1)) {
        for (size_t i = 0; i < length; i++) target[i] ^= bytes[i];
    }
    printf("stopped %llu\n", rounds);
    fflush(stdout);
    munmap(map, (size_t)st.st_size);
    close(fd);
    return 0;
}
