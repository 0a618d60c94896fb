"""Reads whitespace-separated rows on stdin and prints the p50 and p99 of column N (1-based)."""
import sys

column = int(sys.argv[1]) - 1
values = sorted(float(line.split()[column]) for line in sys.stdin if line.strip())
if not values:
    sys.exit("no values")


def percentile(p):
    return values[min(len(values) - 1, int(len(values) * p / 100))]


print(f"{percentile(50):.0f} {percentile(99):.0f}")
