"""Measures what this machine charges for the two things every request pays for: an fdatasync
after an append (each group commit does one) and a wake-up of a sleeping process (a request
crosses threads several times). Prints one results.tsv line:

    machine <fsync p50 µs> <fsync p99 µs> <fsync CPU µs per call> <wake-up µs>

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


if len(sys.argv) == 4 and sys.argv[2] == "--probe":
    latencies, _ = timed_appends(seconds=float(sys.argv[3]), pause=0.001)
    print(f"probe\t{quantile(latencies, 0.5) * 1e6:.0f}\t{quantile(latencies, 0.99) * 1e6:.0f}\t"
          f"{latencies[-1] * 1e6:.0f}\t{len(latencies)}")
else:
    latencies, cpu = timed_appends(count=2000)
    print(f"machine\t{quantile(latencies, 0.5) * 1e6:.0f}\t{quantile(latencies, 0.99) * 1e6:.0f}\t{cpu * 1e6:.0f}\t"
          f"{wake_up() * 1e6:.1f}")
