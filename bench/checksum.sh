#!/usr/bin/env bash
# make bench-checksum: what the journal's entry checksum costs, per entry, under ordo-one's
# package-benchmark (bench/Benchmarks/JournalChecksum): the striped checksum entries carry ("RRJ3"),
# the single chain they carried before ("RRJ2") and the floor (reading the same words), in one run,
# for an entry of 16 KiB (a commit of about 100 registrations) and of 1 MiB.
#
# Prints the section and puts it into BENCHMARKS.md (bench/section.py, "checksum").
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/opt/swift/usr/bin:$PATH"
out=$(mktemp -d /tmp/registry-checksum.XXXXXX)
trap 'rm -rf "$out"' EXIT
swift package --allow-writing-to-package-directory benchmark --target JournalChecksum --time-units nanoseconds --format markdown \
  --no-progress > "$out/checksum.md" 2>/dev/null
python3 - "$out/checksum.md" "$(git rev-parse --short=12 HEAD)" <<'PY'
import datetime, sys
sys.path.insert(0, "bench")
from package_benchmark import p50_nanoseconds, require
from section import put
path, revision = sys.argv[1:]
figures = p50_nanoseconds(path)
sizes = [("16 KiB", 16 << 10), ("1 MiB", 1 << 20)]
names = [f"{kind}, {label}" for label, _ in sizes for kind in ("striped", "single chain", "floor: reading the words")]
require(figures, names, path, "bench/checksum.sh")
lines = ["## The journal's checksum", "",
         f"`bench/checksum.sh` (`make bench-checksum`, ordo-one's package-benchmark, bench/Benchmarks/JournalChecksum) on "
         f"{datetime.date.today()} at `{revision}`: p50 of wall-clock time per entry, one run. The striped checksum is what a "
         "node seals every commit with and checks on every replay; the single chain is what entries carried before; the floor "
         "reads the same words and adds them up.", "",
         "| entry | striped | single chain | floor | single chain / striped | striped / floor |",
         "|---|---:|---:|---:|---:|---:|"]
for label, size in sizes:
    s, c, f = (figures[f"{kind}, {label}"] for kind in ("striped", "single chain", "floor: reading the words"))
    lines.append(f"| {label} | {s:,.0f} ns ({size / s:.2f} bytes/ns) | {c:,.0f} ns ({size / c:.2f} bytes/ns) | {f:,.0f} ns | "
                 f"{c / s:.2f} | {s / f:.2f} |")
print(put("checksum", "\n".join(lines)))
PY
