// fork_faults: what a page the parent writes after a fork costs, the case a forked snapshot
// (ForkedSnapshot) puts the serving node in. One configuration per run:
//
//   cc -O2 -o fork_faults bench/fork_faults.c && ./fork_faults MIB HUGE TOUCH_FIRST KEEP
//
// maps MIB MiB (on huge pages when HUGE is 1), fills it, and forks. With TOUCH_FIRST (1) the
// parent first writes one byte of every 2 MiB while the child still maps everything, as a node
// writing its index at random does in the first milliseconds; the kernel then splits each huge
// page. Then the child lets go of the whole mapping (MADV_DONTNEED), unless KEEP is 1, and the
// parent writes one byte of every 4 KiB page. Prints the time and minor faults of that last pass
// and its microseconds a page: a copy when the child keeps the page, a fault that takes the page
// back when it let go (one a 2 MiB page if it is still whole).
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <signal.h>
#include <string.h>

static double seconds(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return now.tv_sec + now.tv_nsec * 1e-9;
}

static long minor_faults(void) {
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    return usage.ru_minflt;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: fork_faults MIB HUGE TOUCH_FIRST KEEP\n");
        return 2;
    }
    size_t bytes = (size_t)atoi(argv[1]) << 20, huge_page = 2 << 20;
    int huge = atoi(argv[2]), touch_first = atoi(argv[3]), keep = atoi(argv[4]);
    char *mapped = mmap(NULL, bytes + huge_page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mapped == MAP_FAILED) { perror("mmap"); return 1; }
    char *memory = (char *)(((unsigned long)mapped + huge_page - 1) & ~(huge_page - 1));
    madvise(memory, bytes, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    memset(memory, 1, bytes);
    int go[2], done[2];
    if (pipe(go) || pipe(done)) { perror("pipe"); return 1; }
    char token = 0;
    pid_t child = fork();
    if (child == 0) {
        if (read(go[0], &token, 1) != 1) _exit(1);
        if (!keep) madvise(memory, bytes, MADV_DONTNEED);
        if (write(done[1], "x", 1) != 1) _exit(1);
        pause();
        _exit(0);
    }
    if (touch_first)
        for (size_t offset = 0; offset < bytes; offset += huge_page) memory[offset] = 2;
    if (write(go[1], "x", 1) != 1 || read(done[0], &token, 1) != 1) { perror("pipe"); return 1; }
    double started = seconds();
    long faults = minor_faults();
    for (size_t offset = 0; offset < bytes; offset += 4096) memory[offset] = 3;
    double took = seconds() - started;
    faults = minor_faults() - faults;
    printf("huge=%d touch_first=%d keep=%d: %.1f ms, %ld minor faults, %.2f us a 4 KiB page\n", huge, touch_first, keep,
           took * 1e3, faults, took * 1e6 / (double)(bytes / 4096));
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    return 0;
}
