#!/usr/bin/env bash
# make bench-memory BASE=REV: a node's resident memory per device, this checkout's registryd against
# REV's, in one run.
#
# Each build starts on an empty data directory, takes MEMORY_DEVICES first installs in batches of
# 100 (8 connections x 16 in flight, snapshots off), rests 5 s, and its resident memory (VmRSS) is
# read: once on a node sized for them (--expected-devices 1.1 x MEMORY_DEVICES, as `make
# bench-storage` sizes it), once on a node that grew from empty. MEMORY_ROUNDS rounds, alternating
# which build goes first. Also reports the node's CPU time for the load (from /proc), which is
# mostly the registrations' and the kernel's zeroing of the memory measured.
#
# Prints the section and puts it into BENCHMARKS.md (bench/section.py, "memory").
# Environment: MEMORY_DEVICES (default 10000000), MEMORY_ROUNDS (default 2), MEMORY_BASE_BIN (a
# folder holding a registryd built from REV, used instead of building it again).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh
export PATH="/opt/swift/usr/bin:$PATH"
base=${1:-HEAD~1}
devices=${MEMORY_DEVICES:-10000000}
rounds=${MEMORY_ROUNDS:-2}
port=7467
out=$(mktemp -d /tmp/registry-memory.XXXXXX)
worktree="$out/base"
pid=""
trap journal_bench_cleanup EXIT

build_head
choose_base_registryd "$base" "$worktree" "${MEMORY_BASE_BIN:-}"

# run NAME BINARY-DIR SIZING ROUND: one node of that build, sized (`sized`) or not (`grown`).
run() {
  local name=$1 bin=$2 sizing=$3 round=$4 expected=0
  [ "$sizing" = sized ] && expected=$((devices * 11 / 10))
  rm -rf "$out/data" && mkdir -p "$out/data"
  # shellcheck disable=SC2046 # the flags are words
  "$bin/registryd" --data-dir "$out/data" --port $port --expected-devices $expected \
    --snapshot-every-operations 0 --snapshot-every-seconds 0 $(this_machine_flags "$bin") > "$out/$name.log" 2>&1 &
  pid=$!
  wait_for_port $port 120 || { cat "$out/$name.log" >&2; exit 1; }
  "$head_bin/registryload" --endpoints 127.0.0.1:$port --connections 8 --in-flight 16 --batch 100 --requests "$devices" \
    --warmup 0s --seed 41 --json "$out/load.json" > /dev/null 2>&1
  sleep 5
  local rss cpu_ms
  rss=$(awk '/VmRSS/ {printf "%.0f\n", $2 * 1024}' "/proc/$pid/status")
  cpu_ms=$(awk -v tck="$(getconf CLK_TCK)" '{printf "%.0f\n", ($14 + $15) * 1000 / tck}' "/proc/$pid/stat")
  kill -9 "$pid"; wait "$pid" 2>/dev/null || true; pid=""
  printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$sizing" "$round" "$rss" "$cpu_ms" >> "$out/results.tsv"
  echo "$name $sizing round $round: $(( rss / devices )) B/device, ${cpu_ms} ms of CPU" >&2
}

for round in $(seq 1 "$rounds"); do
  for sizing in sized grown; do
    if [ $((round % 2)) -eq 1 ]; then run base "$base_bin" $sizing "$round"; run head "$head_bin" $sizing "$round"
    else run head "$head_bin" $sizing "$round"; run base "$base_bin" $sizing "$round"; fi
  done
done

python3 - "$out/results.tsv" "$base_name" "$(git rev-parse --short=12 HEAD)" "$devices" "$rounds" > "$out/section.md" <<'PY'
import statistics, sys, datetime
path, base_name, head, devices, rounds = sys.argv[1:]
devices = int(devices)
rows = {}
for line in open(path):
    name, sizing, _, rss, cpu = line.rstrip("\n").split("\t")
    rows.setdefault((name, sizing), []).append((int(rss), int(cpu)))
print("## Memory per device\n")
print(f"`bench/memory.sh` (`make bench-memory`) on {datetime.date.today()}: registryd at `{head}` against {base_name}.")
print(f"Each node takes {devices:,} first installs in batches of 100 from empty, snapshots off, and rests 5 s; then its")
print(f"resident memory. Sized: `--expected-devices` {devices * 11 // 10:,}; grown: from empty. {rounds} rounds, alternating")
print("which build goes first; medians, every round in brackets. The node's CPU is its whole run's.\n")
print("| node | base | this revision | ratio | base's CPU | this revision's CPU |")
print("|---|---:|---:|---:|---:|---:|")
for sizing in ("sized", "grown"):
    base, mine = rows[("base", sizing)], rows[("head", sizing)]
    b = statistics.median(r[0] for r in base) / devices
    m = statistics.median(r[0] for r in mine) / devices
    bc = statistics.median(r[1] for r in base) / 1000
    mc = statistics.median(r[1] for r in mine) / 1000
    print(f"| {sizing} | {b:.0f} B/device ({', '.join(f'{r[0] / devices:.0f}' for r in base)}) |"
          f" {m:.0f} B/device ({', '.join(f'{r[0] / devices:.0f}' for r in mine)}) | {m / b:.3f} |"
          f" {bc:.1f} s | {mc:.1f} s |")
PY
cat "$out/section.md"
python3 bench/section.py memory "$out/section.md" > /dev/null
