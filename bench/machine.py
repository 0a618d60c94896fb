"""Measures what this machine charges for an fdatasync after an append (each group commit does
one), a wake-up of a sleeping process (a request crosses threads several times) and new memory
(each next table of a growing index), and how its disk behaves once rested and on its own.
Prints one results.tsv line:

    machine <fsync p50 µs> <fsync p99 µs> <fsync CPU µs per call> <wake-up µs>

one line on what the disk charges for a commit once it has rested (see rested_overwrites):

    rested <back-to-back p50 µs> <back-to-back p99 µs> <rested p50 µs> <rested p99 µs> <rest ms>

one line on how often the disk stalls on its own (see disk_stalls):

    stalls <seconds> <calls over 4 ms> <ms in them> <longest ms>

one line on what memory costs to fault in (see fault_in_seconds):

    fault-in <CPU s per GiB of pages new to the process> <CPU s per GiB of pages it just freed>

and one line on how often the machine takes a CPU away from a process that never sleeps (one such
process pinned to each core for GAP_SECONDS, reading the clock in a loop: a jump of over 1 ms is
time it did not run, taken by the kernel's own threads or by the hypervisor):

    gaps <cores> <seconds> <gaps over 1 ms, per core per second> <ms lost per core per second> <longest gap ms> <damon>

where <damon> is how often the kernel's DAMON monitor (kdamond) samples memory, in ms, when one
runs (0 when none does): on a VM that reclaims memory for its host, it is one of the things that
take a CPU.

With --probe SECONDS it instead repeats the append and fdatasync once a millisecond for that long,
while something else uses the disk, and prints

    probe <fsync p50 µs> <fsync p99 µs> <fsync max µs> <calls>

Usage: machine.py DIRECTORY (the data disk) [--probe SECONDS]."""
import os
import sys
import time

directory = sys.argv[1]


def timed_appends(size=20_000, count=None, seconds=None, pause=0.0):
    """Appends `size` bytes and fdatasyncs, `count` times or for `seconds`, sleeping `pause`
    between calls. Returns the sorted latencies and the CPU time per call."""
    path = os.path.join(directory, "machine-probe.bin")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    payload = b"r" * size
    latencies = []
    cpu_start = time.process_time()
    deadline = time.monotonic() + seconds if seconds is not None else None
    try:
        while (count is None or len(latencies) < count) and (deadline is None or time.monotonic() < deadline):
            start = time.perf_counter()
            os.write(fd, payload)
            os.fdatasync(fd)
            latencies.append(time.perf_counter() - start)
            if pause:
                time.sleep(pause)
    finally:
        os.close(fd)
        os.unlink(path)
    cpu = (time.process_time() - cpu_start) / max(1, len(latencies))
    return sorted(latencies), cpu


def overwrites(name, size, span):
    """Yields, call after call, how long writing `size` bytes over blocks a file already has and
    then fdatasync took, as a group commit into a spare journal file does: the file (`name` in the
    data directory) is `span` bytes of synced zeros, written over in turn. Closing the generator
    removes the file."""
    path = os.path.join(directory, name)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    payload = b"r" * size
    try:
        os.write(fd, bytes(span))
        os.fdatasync(fd)
        offset = 0
        while True:
            start = time.perf_counter()
            os.pwrite(fd, payload, offset)
            os.fdatasync(fd)
            yield time.perf_counter() - start
            offset = (offset + size) % (span - size)
    finally:
        os.close(fd)
        os.unlink(path)


REST_SECONDS = 0.002


def rested_overwrites(count=1000, size=15_000, span=4 << 20):
    """Times `count` overwrites (see overwrites) back to back, then `count` more each after a rest
    of REST_SECONDS. Returns the sorted latencies of both. On this project's VM the disk answers an
    fdatasync in about 0.1 ms while it is kept busy and in 0.7-0.9 ms after 2 ms without one
    (after 0.1 ms of rest the p90 already rises), so a node at a low rate, whose commits find the
    disk rested, pays several times what a busy node pays for each."""
    calls = overwrites("machine-rest.bin", size, span)
    runs = []
    try:
        for pause in (0.0, REST_SECONDS):
            latencies = []
            for _ in range(count):
                latencies.append(next(calls))
                if pause:
                    time.sleep(pause)
            runs.append(sorted(latencies))
    finally:
        calls.close()
    return runs


STALL_SECONDS = 30


def disk_stalls(seconds=STALL_SECONDS, size=15_000, span=16 << 20, pause=0.0003, threshold=0.004):
    """Times overwrites (see overwrites), with `pause` between calls, for `seconds` on an otherwise
    idle machine. Returns (calls over `threshold`, seconds in them, longest). Such a stall holds
    every group commit behind it; on this project's VM two writers syncing separate files stalled
    at the same instants (by hand: 5 stalls of 4.9-35.7 ms in 40 s), so it is the disk's, and a
    second commit stream would not get around it."""
    calls = overwrites("machine-stalls.bin", size, span)
    slow = []
    try:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            elapsed = next(calls)
            if elapsed > threshold:
                slow.append(elapsed)
            time.sleep(pause)
    finally:
        calls.close()
    return len(slow), sum(slow), max(slow, default=0.0)


def quantile(values, share):
    return values[min(len(values) - 1, int(len(values) * share))]


def wake_up(round_trips=20_000):
    """Two processes hand one byte back and forth over pipes; each hand-over wakes the other."""
    ping_read, ping_write = os.pipe()
    pong_read, pong_write = os.pipe()
    child = os.fork()
    if child == 0:
        for _ in range(round_trips):
            os.read(ping_read, 1)
            os.write(pong_write, b"x")
        os._exit(0)
    start = time.perf_counter()
    for _ in range(round_trips):
        os.write(ping_write, b"x")
        os.read(pong_read, 1)
    elapsed = time.perf_counter() - start
    os.waitpid(child, 0)
    return elapsed / round_trips / 2


GAP_SECONDS = 10


def cpu_gaps(seconds=GAP_SECONDS, threshold_ns=1_000_000):
    """One spinning process per core; returns (cores, gaps per core per second, lost ms per core
    per second, longest gap ms)."""
    cores = sorted(os.sched_getaffinity(0))
    children = []
    for core in cores:
        read_end, write_end = os.pipe()
        child = os.fork()
        if child == 0:
            os.close(read_end)
            os.sched_setaffinity(0, {core})
            gaps, lost, longest = 0, 0, 0
            previous = time.monotonic_ns()
            deadline = previous + int(seconds * 1e9)
            while previous < deadline:
                now = time.monotonic_ns()
                if now - previous > threshold_ns:
                    gaps += 1
                    lost += now - previous
                    longest = max(longest, now - previous)
                previous = now
            os.write(write_end, f"{gaps} {lost} {longest}".encode())
            os._exit(0)
        os.close(write_end)
        children.append((child, read_end))
    results = []
    for child, read_end in children:
        results.append(tuple(map(int, os.read(read_end, 200).split())))
        os.close(read_end)
        os.waitpid(child, 0)
    per = len(cores) * seconds
    return (len(cores), sum(r[0] for r in results) / per, sum(r[1] for r in results) / per / 1e6,
            max(r[2] for r in results) / 1e6)


FAULT_IN_BYTES = 512 << 20
MADV_POPULATE_WRITE = 23  # Linux 5.14; Python's mmap module does not name it


def fault_in_seconds(size=FAULT_IN_BYTES):
    """CPU seconds per GiB to have the kernel provide anonymous memory, on huge pages as the
    registry's index tables are: first for memory this process has never had, then again right
    after unmapping it, when the kernel hands back the pages it just freed. On a VM that reports
    freed memory to its host (free page reporting), the first is memory the hypervisor must provide
    again, and it costs far more. Pages are faulted in with MADV_POPULATE_WRITE, or by writing a
    byte to each 4 KiB page where the kernel lacks it."""
    import ctypes
    import mmap
    libc = ctypes.CDLL(None, use_errno=True)
    libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    costs = []
    for _ in range(2):
        block = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        block.madvise(mmap.MADV_HUGEPAGE)
        address = ctypes.addressof(ctypes.c_char.from_buffer(block))
        start = time.process_time()
        if libc.madvise(address, size, MADV_POPULATE_WRITE) != 0:
            for offset in range(0, size, 4096):
                block[offset] = 1
        costs.append((time.process_time() - start) * (1 << 30) / size)
        block.close()
    return costs


def read_text(path):
    with open(path) as file:
        return file.read().strip()


def damon_sample_ms():
    """The shortest sampling interval of a running kdamond, in ms, or 0."""
    root = "/sys/kernel/mm/damon/admin/kdamonds"
    intervals = []
    try:
        for kdamond in os.listdir(root):
            base = os.path.join(root, kdamond)
            if not kdamond.isdigit() or read_text(os.path.join(base, "state")) != "on":
                continue
            contexts = os.path.join(base, "contexts")
            for context in os.listdir(contexts):
                if context.isdigit():
                    path = os.path.join(contexts, context, "monitoring_attrs", "intervals", "sample_us")
                    intervals.append(int(read_text(path)) / 1000)
    except OSError:
        pass
    return min(intervals, default=0)


if len(sys.argv) == 4 and sys.argv[2] == "--probe":
    latencies, _ = timed_appends(seconds=float(sys.argv[3]), pause=0.001)
    print(f"probe\t{quantile(latencies, 0.5) * 1e6:.0f}\t{quantile(latencies, 0.99) * 1e6:.0f}\t"
          f"{latencies[-1] * 1e6:.0f}\t{len(latencies)}")
else:
    latencies, cpu = timed_appends(count=2000)
    print(f"machine\t{quantile(latencies, 0.5) * 1e6:.0f}\t{quantile(latencies, 0.99) * 1e6:.0f}\t{cpu * 1e6:.0f}\t"
          f"{wake_up() * 1e6:.1f}")
    hot, rested = rested_overwrites()
    print(f"rested\t{quantile(hot, 0.5) * 1e6:.0f}\t{quantile(hot, 0.99) * 1e6:.0f}\t{quantile(rested, 0.5) * 1e6:.0f}\t"
          f"{quantile(rested, 0.99) * 1e6:.0f}\t{REST_SECONDS * 1000:g}")
    stalls, stalled, longest_stall = disk_stalls()
    print(f"stalls\t{STALL_SECONDS}\t{stalls}\t{stalled * 1000:.1f}\t{longest_stall * 1000:.1f}")
    cores, gaps, lost, longest = cpu_gaps()
    fresh, reused = fault_in_seconds()
    print(f"fault-in\t{fresh:.3f}\t{reused:.3f}")
    print(f"gaps\t{cores}\t{GAP_SECONDS}\t{gaps:.2f}\t{lost:.2f}\t{longest:.2f}\t{damon_sample_ms():g}")
