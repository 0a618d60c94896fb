// journal_fill: what the journal's zeros ahead of its records (CommitJournal.fillStep) cost and
// buy on this machine's disk, and what writing its commits past the page cache would buy, for
// bench/journal-fill.sh. One configuration per run:
//
//   journal_fill DIR STEP COMMITS [SYNC [BYTES [DIRECT]]]
//
// writes COMMITS commits of BYTES (default 16 KiB, about a batch of 100 registrations) into one
// new file in DIR with pwrite, appending when STEP is 0, else first writing zeros STEP bytes at a
// time ahead of the records, as CommitJournal does; with SYNC (1) each commit is followed by
// fdatasync, as a commit is. With DIRECT (1) the file is opened with O_DIRECT and every write is
// of whole 4 KiB blocks from aligned memory: a commit writes again the block its predecessor
// ended in (kept in memory), then its own bytes, padded with zeros to the block's end; the zeros
// ahead are written the same way (STEP must be a multiple of 4 KiB). That is the least a journal
// written past the cache would do. Prints `commits_per_s=… cpu_us_per_commit=…`, the CPU being
// the process's user and system time, which is where the kernel's page cache and file system
// work lands.
#define _GNU_SOURCE
#include <fcntl.h>
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
    if (argc < 4) {
        fprintf(stderr, "usage: journal_fill DIR STEP COMMITS [SYNC [BYTES [DIRECT]]]\n");
        return 64;
    }
    enum { block = 4096 };
    long step = atol(argv[2]);
    int commits = atoi(argv[3]);
    int sync = argc > 4 && atoi(argv[4]) != 0;
    long bytes = argc > 5 ? atol(argv[5]) : 16384;
    int direct = argc > 6 && atoi(argv[6]) != 0;
    if (bytes <= 0 || commits <= 0 || step < 0 || (direct && (step == 0 || step % block != 0))) {
        fprintf(stderr, "journal_fill: BYTES and COMMITS must be positive, and DIRECT needs a STEP of whole 4 KiB blocks\n");
        return 64;
    }
    // The commit's bytes, and for DIRECT the aligned buffer a write goes from: the block the last
    // commit ended in, the commit, and the zeros to its last block's end.
    char *record = malloc((size_t)bytes), *aligned = NULL, *zeros = NULL;
    if (record == NULL || posix_memalign((void **)&aligned, block, (size_t)bytes + 2 * block) != 0 ||
        posix_memalign((void **)&zeros, block, step > 0 ? (size_t)step : block) != 0) {
        perror("malloc");
        return 1;
    }
    memset(record, 0x5a, (size_t)bytes);
    memset(aligned, 0, (size_t)bytes + 2 * block);
    memset(zeros, 0, step > 0 ? (size_t)step : block);
    char path[4096];
    snprintf(path, sizeof path, "%s/journal-fill.tmp", argv[1]);
    int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY | (direct ? O_DIRECT : 0), 0600);
    if (fd < 0) {
        perror(path);
        return 1;
    }
    long offset = 0, filled = 0;
    double started = now();
    for (int i = 0; i < commits; i++) {
        while (step > 0 && offset + bytes > filled) {
            if (pwrite(fd, zeros, step, filled) != step) { perror("pwrite"); return 1; }
            filled += step;
        }
        if (direct) {
            long start = offset / block * block, head = offset - start;
            long length = (head + bytes + block - 1) / block * block;
            memcpy(aligned + head, record, (size_t)bytes);
            memset(aligned + head + bytes, 0, (size_t)(length - head - bytes));
            if (pwrite(fd, aligned, length, start) != length) { perror("pwrite"); return 1; }
            long next = (offset + bytes) / block * block;
            memmove(aligned, aligned + (next - start), (size_t)(offset + bytes - next));
        } else if (pwrite(fd, record, bytes, offset) != bytes) {
            perror("pwrite");
            return 1;
        }
        offset += bytes;
        if (sync && fdatasync(fd) != 0) { perror("fdatasync"); return 1; }
    }
    double seconds = now() - started;
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    double cpu = usage.ru_utime.tv_sec + usage.ru_utime.tv_usec / 1e6 + usage.ru_stime.tv_sec + usage.ru_stime.tv_usec / 1e6;
    printf("commits_per_s=%.0f cpu_us_per_commit=%.1f\n", commits / seconds, cpu / commits * 1e6);
    close(fd);
    unlink(path);
    return 0;
}
