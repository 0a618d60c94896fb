// snapshot_floor: the least a snapshot of BYTES can take from a serving node on this machine, for
// bench/storage.sh to run beside a node under the same load as registryd's own snapshot. It does
// only the work no design avoids: the snapshot's bytes written to a new file in the node's data
// directory, as registryd writes them (ChunkedFileWriter): in chunks of 1 MiB past the page cache
// (O_DIRECT), the last partial chunk through it, synced at the end; where the file system refuses
// O_DIRECT, through the cache, synced every 8 MiB. It runs at SCHED_IDLE, as registryd's snapshot
// child and writer do, and encodes nothing: its chunk is filled once. BUFFERED=1 in the
// environment writes every chunk through the cache instead (what registryd did before).
//
//   cc -O2 -o snapshot_floor bench/snapshot_floor.c && snapshot_floor BYTES FILE
//
// Prints `seconds=… cpu_s=… direct=0|1` and removes FILE.
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

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: snapshot_floor BYTES FILE\n"); return 2; }
    long long total = atoll(argv[1]);
    const char *path = argv[2];
    struct sched_param idle = {0};
    if (sched_setscheduler(0, SCHED_IDLE, &idle) != 0) { perror("sched_setscheduler"); return 1; }
    enum { chunk = 1 << 20, sync_every = 8 << 20 };
    unsigned char *buffer = aligned_alloc(4096, chunk);
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < chunk; i += 8) { x ^= x << 13; x ^= x >> 7; x ^= x << 17; memcpy(buffer + i, &x, 8); }
    int flags = O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC;
    int direct = getenv("BUFFERED") == NULL;
    int fd = direct ? open(path, flags | O_DIRECT, 0600) : -1;
    if (fd < 0 && (!direct || errno == EINVAL)) { direct = 0; fd = open(path, flags, 0600); }
    if (fd < 0) { perror(path); return 1; }
    double started = now();
    long long written = 0, unsynced = 0;
    while (written < total) {
        size_t n = total - written < chunk ? (size_t)(total - written) : chunk;
        if (direct && n < chunk) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_DIRECT);
        ssize_t w = pwrite(fd, buffer, n, written);
        if (w <= 0) { perror("pwrite"); return 1; }
        written += w;
        unsynced += w;
        if (!direct && unsynced >= sync_every) { fdatasync(fd); unsynced = 0; }
    }
    fdatasync(fd);
    close(fd);
    unlink(path);
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    printf("seconds=%.2f cpu_s=%.2f direct=%d\n", now() - started,
           usage.ru_utime.tv_sec + usage.ru_stime.tv_sec + (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6, direct);
    return 0;
}
