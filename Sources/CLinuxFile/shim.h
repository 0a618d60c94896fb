// Linux calls that glibc declares only under _GNU_SOURCE, which Swift's Glibc module does not
// define, or in headers it does not include. Header only: nothing to link.
#ifndef REGISTRY_CLINUXFILE_SHIM_H
#define REGISTRY_CLINUXFILE_SHIM_H

#ifdef __linux__
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

/// Moves the calling thread to SCHED_IDLE: it runs only when no other thread wants the CPU, and
/// a thread that wakes takes the CPU from it at once. 0, or -1 and errno.
static inline int registry_run_when_idle(void) {
    struct sched_param parameters = { 0 };
    return sched_setscheduler(0, SCHED_IDLE, &parameters);
}

/// A pipe whose ends close on exec, its buffer raised to `bytes` where the kernel allows (fewer
/// wake-ups of a reader of a long stream). 0, or -1 and errno.
static inline int registry_pipe(int ends[2], int bytes) {
    if (pipe2(ends, O_CLOEXEC) != 0) return -1;
    (void)fcntl(ends[1], F_SETPIPE_SZ, bytes);
    return 0;
}

/// Closes every descriptor from 3 up except `keep`: for a forked child, which must hold nothing
/// of its parent's (sockets, listening ports, lock files) once the parent is gone. close_range(2)
/// where the kernel has it (5.9 and later), else one close a possible descriptor. 0, or -1 and
/// errno.
static inline int registry_close_descriptors_except(int keep) {
    if (keep > 3 && close_range(3, (unsigned int)keep - 1, 0) != 0 && errno != ENOSYS) return -1;
    unsigned int above = keep < 3 ? 3 : (unsigned int)keep + 1;
    if (close_range(above, ~0U, 0) == 0) return 0;
    if (errno != ENOSYS) return -1;
    long limit = sysconf(_SC_OPEN_MAX);
    for (long descriptor = 3; descriptor < limit; descriptor++) {
        if (descriptor != keep) (void)close((int)descriptor);
    }
    return 0;
}

/// open(2) with O_DIRECT: the file's reads and writes go between the caller's memory and the
/// disk, past the page cache, where the file system allows it (then each must be aligned to the
/// device's logical block). The descriptor, or -1 and errno (EINVAL where it does not).
static inline int registry_open_direct(const char *path, int flags, unsigned int mode) {
    return open(path, flags | O_DIRECT, mode);
}

/// The O_DIRECT flag's value, which differs between architectures.
static inline int registry_o_direct(void) { return O_DIRECT; }

/// getrandom(2) as glibc (2.25 and later) provides it. Declared here rather than by including
/// sys/random.h, whose types, with _GNU_SOURCE defined, clash with Swift's Glibc module in a clean
/// build (fd_set). On LP64 Linux these are glibc's types (ssize_t and size_t).
extern long getrandom(void *buffer, unsigned long length, unsigned int flags);

/// Fills up to `length` bytes at `buffer` from the kernel's random source (the urandom device's)
/// in one system call. The count filled, which a signal may make fewer than asked, or -1 and errno.
static inline long registry_random_bytes(void *buffer, unsigned long length) {
    return getrandom(buffer, length, 0);
}
#endif

/// Stores `value` at `word` with release ordering: what the caller wrote before is seen by a
/// thread or process that then reads `value` with ``registry_load_acquire``.
static inline void registry_store_release(unsigned int *word, unsigned int value) {
    __atomic_store_n(word, value, __ATOMIC_RELEASE);
}

/// Reads `word` with acquire ordering (see ``registry_store_release``).
static inline unsigned int registry_load_acquire(const unsigned int *word) {
    return __atomic_load_n(word, __ATOMIC_ACQUIRE);
}

/// Asks the CPU to bring the cache line at `address` in, to be written: a hint, which reads
/// nothing the program sees and cannot fault, so any address will do.
static inline void registry_prefetch_for_writing(const void *address) {
    __builtin_prefetch(address, 1, 3);
}

#endif
