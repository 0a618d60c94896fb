#!/usr/bin/env bash
# The floor of issue 42's first target (make bench-registration-floor): the server CPU a
# registration costs in this revision's registryd against bench/registration_floor.c, the least a
# node can do for the same registrations (its comment lists what it does and what it leaves out),
# in the same run. Both rows of bench/compare.sh (batches of 100 on 8 connections x 16 in flight;
# single requests on 4 x 64), FLOOR_PAIRS pairs each (default 3), alternating which goes first,
# a fresh server every run, the CPU from /proc (bench/cpu-compare.sh). Writes the
# "registration-floor" section of BENCHMARKS.md with the command.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh
export PATH="/opt/swift/usr/bin:$PATH"
pairs=${FLOOR_PAIRS:-3}
for product in registryd registryload; do swift build -c release --product "$product" >&2; done
bin=$(swift build -c release --show-bin-path)
out=$(mktemp -d /tmp/registry-floor.XXXXXX)
trap 'rm -rf "$out"' EXIT
# Each row twice: registryd as bench/compare.sh runs it, then with snapshots off (the floor takes
# none), so that the table shows what snapshots add.
no_snapshots="--snapshot-every-operations 0 --snapshot-every-seconds 0"
for row in batch single; do
  REGISTRYLOAD_DIR=$bin bash bench/cpu-compare.sh floor "$bin" "$row" "$pairs" | tee "$out/$row.tsv"
  BENCH_NODE_FLAGS="$(this_machine_flags "$bin") $no_snapshots" REGISTRYLOAD_DIR=$bin \
    bash bench/cpu-compare.sh floor "$bin" "$row" "$pairs" | tee "$out/$row-no-snapshots.tsv"
done

python3 - "$out" "$pairs" "$(git rev-parse --short HEAD)" "$(date -u +%F)" > "$out/section.md" <<'PY'
import statistics, sys
out, pairs, revision, day = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
print("## The registration floor (issue 42, target 1)\n")
print(f"At {revision}, {day}: `make bench-registration-floor` (`FLOOR_PAIRS={pairs}`). Server CPU a registration "
      "from `/proc` over 10 s of registryload from a fresh server, the two alternating, medians. The floor is "
      "`bench/registration_floor.c`: one C thread that reads the frames, checks and keys the identifiers "
      "(HMAC-SHA256), mints IDs (SipHash), keeps the devices, their ID index and the claims in tables that "
      "double, journals each registration with one `fdatasync` a round and answers; no feed, metrics, "
      "replication state or snapshots.\n")
print("| row | registryd | floor µs | registryd µs | registryd / floor | floor user µs | registryd user µs |")
print("|---|---|---:|---:|---:|---:|---:|")
for row, label in (("batch", "batches of 100"), ("single", "single requests")):
    for suffix, configuration in (("", "as `make bench-compare` runs it"), ("-no-snapshots", "snapshots off")):
        runs = {}
        for line in open(f"{out}/{row}{suffix}.tsv"):
            fields = line.rstrip("\n").split("\t")
            if len(fields) == 3 and fields[0] in ("base", "head"):
                runs.setdefault(fields[0], []).append((float(fields[1]), float(fields[2])))
        floor, node = runs["base"], runs["head"]
        f, n = statistics.median(r[0] for r in floor), statistics.median(r[0] for r in node)
        fu, nu = statistics.median(r[1] for r in floor), statistics.median(r[1] for r in node)
        print(f"| {label} | {configuration} | {f:.2f} | {n:.2f} | {n / f:.2f} | {fu:.2f} | {nu:.2f} |")
PY
cat "$out/section.md"
python3 bench/section.py registration-floor "$out/section.md"
