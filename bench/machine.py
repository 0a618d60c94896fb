"""Measures what this machine charges for the two things every request pays for: an fdatasync
after an append (each group commit does one) and a wake-up of a sleeping process (a request
crosses threads several times). Prints one results.tsv line:

    machine <fsync p50 µs> <fsync p99 µs> <fsync CPU µs per call> <wake-up µs>

Usage: machine.py DIRECTORY (the data disk)."""
import os
import sys
import time

directory = sys.argv[1]


def fsync_costs(count=2000, size=20_000):
    path = os.path.join(directory, "machine-probe.bin")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    payload = b"r" * size
    latencies = []
    cpu_start = time.process_time()
    try:
        for _ in range(count):
            start = time.perf_counter()
            os.write(fd, payload)
            os.fdatasync(fd)
            latencies.append(time.perf_counter() - start)
    finally:
        os.close(fd)
        os.unlink(path)
    cpu = (time.process_time() - cpu_start) / count
    latencies.sort()
    return latencies[count // 2], latencies[count * 99 // 100], cpu


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


p50, p99, cpu = fsync_costs()
print(f"machine\t{p50 * 1e6:.0f}\t{p99 * 1e6:.0f}\t{cpu * 1e6:.0f}\t{wake_up() * 1e6:.1f}")
