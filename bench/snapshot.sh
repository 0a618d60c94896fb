#!/usr/bin/env bash
# make bench-snapshot BASE=REV: what one snapshot costs a node, this checkout's registryd against
# REV's on the same journal, in one run.
#
# One journal: this checkout's node takes SNAPSHOT_SECONDS of batched first installs (8 connections
# x 16 in flight, batches of 100) with snapshots off, and is killed with -9. Then each build starts
# on a fresh copy of that data directory, in turn, alternating which goes first, SNAPSHOT_ROUNDS
# times; once it serves and is idle, `registryctl snapshot` asks it for a snapshot of everything.
# A snapshot's figures: the node's CPU time from the request to the answer (from /proc, its own
# and that of the children it waited for, which is where a forked snapshot's work is counted: the
# snapshot's own work, as nothing else runs), its own "took a snapshot" line's milliseconds, how
# long the fork held the engine's lock (fork_micros, when the build forks), the node's peak
# resident memory (VmHWM), and the machine's memory in use (MemTotal - MemAvailable, sampled every
# 50 ms) above what it was just before the request: what the snapshot added, in any process.
# Reports medians, and every round.
#
# Prints the section and puts it into BENCHMARKS.md (bench/section.py, "snapshot").
# Environment: SNAPSHOT_SECONDS (default 8), SNAPSHOT_ROUNDS (default 3), SNAPSHOT_BASE_BIN (a
# folder holding a registryd built from REV, used instead of building it again).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh
export PATH="/opt/swift/usr/bin:$PATH"
base=${1:-HEAD~1}
seconds=${SNAPSHOT_SECONDS:-8}
rounds=${SNAPSHOT_ROUNDS:-3}
port=7466
out=$(mktemp -d /tmp/registry-snapshot.XXXXXX)
worktree="$out/base"
pid=""
trap journal_bench_cleanup EXIT

for product in registryd registryload registryctl; do swift build -c release --product "$product" >&2; done
head_bin=$(swift build -c release --show-bin-path)
choose_base_registryd "$base" "$worktree" "${SNAPSHOT_BASE_BIN:-}"
off="--snapshot-every-operations 0 --snapshot-every-seconds 0"

echo "== the journal: $seconds s of batched first installs, snapshots off, then kill -9" >&2
write_journal "$head_bin" "$out/journal" $port "$seconds" "$(this_machine_flags "$head_bin")"

# run NAME BINARY-DIR ROUND: one snapshot of the journal's state by that build.
run() {
  local name=$1 bin=$2 round=$3
  rm -rf "$out/data" && cp -r "$out/journal" "$out/data"
  # shellcheck disable=SC2086 # the flags are words
  "$bin/registryd" --data-dir "$out/data" --port $port $off $(this_machine_flags "$bin") > "$out/$name.log" 2>&1 &
  pid=$!
  wait_for_port $port 120 || { cat "$out/$name.log" >&2; exit 1; }
  sleep 1
  local before after idle_used
  idle_used=$(memory_in_use)
  : > "$out/used"
  ( while true; do memory_in_use >> "$out/used"; sleep 0.05; done ) &
  local sampler=$!
  before=$(awk '{print $14 + $15 + $16 + $17}' "/proc/$pid/stat")
  "$head_bin/registryctl" snapshot --endpoint 127.0.0.1:$port --timeout 300 > /dev/null
  after=$(awk '{print $14 + $15 + $16 + $17}' "/proc/$pid/stat")
  kill "$sampler"; wait "$sampler" 2>/dev/null || true
  local ticks millis peak devices fork added
  ticks=$(getconf CLK_TCK)
  millis=$(grep "took a snapshot" "$out/$name.log" | tail -1 | grep -o ' millis=[0-9]*' | cut -d= -f2)
  fork=$(grep "took a snapshot" "$out/$name.log" | tail -1 | grep -o 'fork_micros=[0-9]*' | cut -d= -f2 || true)
  peak=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status")
  added=$(( $(sort -n "$out/used" | tail -1) - idle_used ))
  devices=$(grep -o 'devices=[0-9]*' "$out/$name.log" | head -1 | cut -d= -f2)
  kill -9 "$pid"; wait "$pid" 2>/dev/null || true; pid=""
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$round" "$(( (after - before) * 1000 / ticks ))" "$millis" "$peak" "$devices" "${fork:-}" "$added" >> "$out/results.tsv"
  echo "$name round $round: $(( (after - before) * 1000 / ticks )) ms of CPU, $millis ms, fork ${fork:--} µs, peak ${peak} kB, added ${added} kB" >&2
}

# memory_in_use: the machine's memory in use, kB.
memory_in_use() {
  awk '/^MemTotal:/ {total = $2} /^MemAvailable:/ {available = $2} END {print total - available}' /proc/meminfo
}

for round in $(seq 1 "$rounds"); do
  if [ $((round % 2)) -eq 1 ]; then run base "$base_bin" "$round"; run head "$head_bin" "$round"
  else run head "$head_bin" "$round"; run base "$base_bin" "$round"; fi
done

python3 - "$out/results.tsv" "$base_name" "$(git rev-parse --short=12 HEAD)" "$seconds" "$rounds" > "$out/section.md" <<'PY'
import statistics, sys, datetime
path, base_name, head, seconds, rounds = sys.argv[1:]
rows = {"base": [], "head": []}
devices = 0
for line in open(path):
    name, _, cpu, millis, peak, found, fork, added = line.rstrip("\n").split("\t")
    rows[name].append((int(cpu), int(millis), int(peak), int(fork) if fork else None, int(added)))
    devices = max(devices, int(found or 0))
print("## One snapshot\n")
print(f"`bench/snapshot.sh` (`make bench-snapshot`) on {datetime.date.today()}: registryd at `{head}` against {base_name}, each")
print(f"starting on a copy of one journal ({seconds} s of batched first installs, snapshots off, the node killed with -9; the")
print(f"node recovered {devices:,} devices from it), {rounds} rounds, alternating which goes first. Once the node serves and is idle,")
print("`registryctl snapshot`: the node's CPU (with the children it waited for) from the request to the answer, the snapshot's")
print("own milliseconds, how long the fork held the engine's lock (builds that fork), the node's peak resident memory, and the")
print("machine's memory in use above what it was before the request (sampled every 50 ms). Medians, every round in brackets.\n")
print("| build | CPU a snapshot | its milliseconds | CPU a device | fork under the lock | peak resident memory | memory the snapshot added |")
print("|---|---:|---:|---:|---:|---:|---:|")
medians = {}
for name in ("base", "head"):
    cpu = [r[0] for r in rows[name]]
    ms = [r[1] for r in rows[name]]
    peak = [r[2] for r in rows[name]]
    forks = [r[3] for r in rows[name] if r[3] is not None]
    added = [r[4] for r in rows[name]]
    medians[name] = statistics.median(cpu)
    label = "base" if name == "base" else "this revision"
    per = statistics.median(cpu) * 1000 / devices if devices else 0
    fork = f"{statistics.median(forks) / 1000:.1f} ms ({', '.join(f'{f / 1000:.1f}' for f in forks)})" if forks else "none"
    print(f"| {label} | {statistics.median(cpu):,.0f} ms ({', '.join(f'{c:,}' for c in cpu)}) | {statistics.median(ms):,.0f} ms |"
          f" {per:.2f} µs | {fork} | {statistics.median(peak) / 1024:,.0f} MiB ({', '.join(f'{p / 1024:,.0f}' for p in peak)}) |"
          f" {statistics.median(added) / 1024:,.0f} MiB ({', '.join(f'{a / 1024:,.0f}' for a in added)}) |")
print(f"\nCPU a snapshot, this revision / base: **{medians['head'] / medians['base']:.3f}**.")
PY
cat "$out/section.md"
python3 bench/section.py snapshot "$out/section.md" > /dev/null
