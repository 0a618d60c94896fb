// journal_fill: what the journal's zeros ahead of its records (CommitJournal.fillStep) cost and
// buy on this machine's disk, for bench/journal-fill.sh. One configuration per run:
//
//   journal_fill DIR STEP COMMITS [SYNC]
//
// writes COMMITS commits of 16 KiB (about a batch of 100 registrations) into one new file in DIR
// with pwrite, appending when STEP is 0, else first writing zeros STEP bytes at a time ahead of
// the records, as CommitJournal does; with SYNC (1) each commit is followed by fdatasync, as a
// commit is. Prints `commits_per_s=… cpu_us_per_commit=…`, the CPU being the process's user and
// system time, which is where the kernel's page cache and file system work lands.
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
        fprintf(stderr, "usage: journal_fill DIR STEP COMMITS [SYNC]\n");
        return 64;
    }
    long step = atol(argv[2]);
    int commits = atoi(argv[3]);
    int sync = argc > 4 && atoi(argv[4]) != 0;
    static char record[16384];
    memset(record, 0x5a, sizeof record);
    char *zeros = calloc(1, step > 0 ? (size_t)step : 1);
    char path[4096];
    snprintf(path, sizeof path, "%s/journal-fill.tmp", argv[1]);
    int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
    if (fd < 0 || zeros == NULL) {
        perror(path);
        return 1;
    }
    long offset = 0, filled = 0;
    double started = now();
    for (int i = 0; i < commits; i++) {
        while (step > 0 && offset + (long)sizeof record > filled) {
            if (pwrite(fd, zeros, step, filled) != step) { perror("pwrite"); return 1; }
            filled += step;
        }
        if (pwrite(fd, record, sizeof record, offset) != (ssize_t)sizeof record) { perror("pwrite"); return 1; }
        offset += sizeof record;
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
