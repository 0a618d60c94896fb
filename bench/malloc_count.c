// malloc_count: an LD_PRELOAD library that counts a process's heap allocations, for
// bench/allocations.sh. Every call to malloc, calloc, realloc, posix_memalign and aligned_alloc
// (what Swift's runtime, NIO and the C libraries allocate through) and every free of a non-null
// pointer adds one to a counter; SIGUSR2 appends the counters as one line to the file named by
// MALLOC_COUNT_OUT. The calls go on to glibc's own functions, so nothing else changes; a relaxed
// atomic add is all it costs a call.
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

static _Atomic unsigned long allocations, frees;

static void count(_Atomic unsigned long *counter) { atomic_fetch_add_explicit(counter, 1, memory_order_relaxed); }

void *malloc(size_t bytes) { count(&allocations); return __libc_malloc(bytes); }
void *calloc(size_t items, size_t bytes) { count(&allocations); return __libc_calloc(items, bytes); }
void *realloc(void *old, size_t bytes) { count(&allocations); return __libc_realloc(old, bytes); }
void *aligned_alloc(size_t alignment, size_t bytes) { count(&allocations); return __libc_memalign(alignment, bytes); }
int posix_memalign(void **out, size_t alignment, size_t bytes) {
  count(&allocations);
  void *memory = __libc_memalign(alignment, bytes);
  if (!memory) return 12;  // ENOMEM
  *out = memory;
  return 0;
}
void free(void *memory) {
  if (memory) count(&frees);
  __libc_free(memory);
}

// Async-signal-safe: snprintf of integers into a stack buffer, then open, write, close.
static void report(int signal) {
  (void)signal;
  const char *path = getenv("MALLOC_COUNT_OUT");
  if (!path) return;
  int file = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (file < 0) return;
  char line[96];
  int length = snprintf(line, sizeof line, "%lu %lu\n", atomic_load(&allocations), atomic_load(&frees));
  if (write(file, line, (size_t)length) < 0) { /* nothing to do from a signal handler */ }
  close(file);
}

__attribute__((constructor)) static void install(void) { signal(SIGUSR2, report); }
