// snapshot_floor: the least a snapshot of BYTES can take from a serving node on this machine, for
// bench/storage.sh to run beside a node under the same load as registryd's own snapshot. It does
// only the work no design avoids: the snapshot's bytes written to a new file in the node's data
// directory, as registryd writes them (ChunkedFileWriter): in chunks of 1 MiB past the page cache
// (O_DIRECT), the last partial chunk through it, synced at the end; from where the file system
// refuses O_DIRECT (at the open or at a write), through the cache, synced every 8 MiB. It runs at SCHED_IDLE, as registryd's snapshot
// child and writer do, and encodes nothing: its chunk is filled once. BUFFERED=1 in the
// environment writes every chunk through the cache instead (what registryd did before).
//
//   cc -O2 -o snapshot_floor bench/snapshot_floor.c && snapshot_floor BYTES FILE
//
// Prints `seconds=… cpu_s=… direct=0|1` (1: opened past the cache) and removes FILE.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

// Clears O_DIRECT on fd; exits when it cannot. Returns 0: no longer direct.
static int clear_direct(int fd) {
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_DIRECT) != 0) { perror("fcntl"); exit(1); }
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: snapshot_floor BYTES FILE\n"); return 2; }
    long long total = atoll(argv[1]);
    const char *path = argv[2];
    struct sched_param idle = {0};
    if (sched_setscheduler(0, SCHED_IDLE, &idle) != 0) { perror("sched_setscheduler"); return 1; }
    enum { chunk = 1 << 20, sync_every = 8 << 20 };
    unsigned char *buffer = aligned_alloc(4096, chunk);
    if (buffer == NULL) { perror("aligned_alloc"); return 1; }
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < chunk; i += 8) { x ^= x << 13; x ^= x >> 7; x ^= x << 17; memcpy(buffer + i, &x, 8); }
    int flags = O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC;
    int direct = getenv("BUFFERED") == NULL;
    int fd = direct ? open(path, flags | O_DIRECT, 0600) : -1;
    if (fd < 0 && (!direct || errno == EINVAL)) { direct = 0; fd = open(path, flags, 0600); }
    if (fd < 0) { perror(path); return 1; }
    const int opened_direct = direct;
    double started = now();
    long long written = 0, unsynced = 0;
    while (written < total) {
        size_t n = total - written < chunk ? (size_t)(total - written) : chunk;
        // The last, partial chunk, or a write the file system refuses past the cache: through it
        // from then on, synced every 8 MiB, as registryd does.
        if (direct && n < chunk) direct = clear_direct(fd);
        ssize_t w = pwrite(fd, buffer, n, written);
        if (w < 0 && errno == EINVAL && direct) { direct = clear_direct(fd); continue; }
        if (w <= 0) { perror("pwrite"); return 1; }
        written += w;
        if (!direct) unsynced += w;
        if (unsynced >= sync_every) {
            if (fdatasync(fd) != 0) { perror("fdatasync"); return 1; }
            unsynced = 0;
        }
    }
    if (fdatasync(fd) != 0) { perror("fdatasync"); return 1; }
    close(fd);
    unlink(path);
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    printf("seconds=%.2f cpu_s=%.2f direct=%d\n", now() - started,
           usage.ru_utime.tv_sec + usage.ru_stime.tv_sec + (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6, opened_direct);
    return 0;
}
