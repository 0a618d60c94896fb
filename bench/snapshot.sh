#!/usr/bin/env bash
# make bench-snapshot BASE=REV: what one snapshot costs a node, this checkout's registryd against
# REV's on the same journal, in one run.
#
# One journal: this checkout's node takes SNAPSHOT_SECONDS of batched first installs (8 connections
# x 16 in flight, batches of 100) with snapshots off, and is killed with -9. Then each build starts
# on a fresh copy of that data directory, in turn, alternating which goes first, SNAPSHOT_ROUNDS
# times; once it serves and is idle, `registryctl snapshot` asks it for a snapshot of everything.
# A snapshot's figures: the node's CPU time from the request to the answer (from /proc: the
# snapshot's own work, as nothing else runs), its own "took a snapshot" line's milliseconds, and
# the node's peak resident memory (VmHWM), which holds the state it serves and the one the
# snapshot was built in. Reports medians, and every round.
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
cleanup() {
  [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null || true
  git worktree remove --force "$worktree" 2>/dev/null || true
  rm -rf "$out/journal" "$out/data"
}
trap cleanup EXIT

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
  local before after
  before=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  "$head_bin/registryctl" snapshot --endpoint 127.0.0.1:$port --timeout 300 > /dev/null
  after=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  local ticks millis peak devices
  ticks=$(getconf CLK_TCK)
  millis=$(grep "took a snapshot" "$out/$name.log" | tail -1 | grep -o 'millis=[0-9]*' | cut -d= -f2)
  peak=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status")
  devices=$(grep -o 'devices=[0-9]*' "$out/$name.log" | head -1 | cut -d= -f2)
  kill -9 "$pid"; wait "$pid" 2>/dev/null || true; pid=""
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$round" "$(( (after - before) * 1000 / ticks ))" "$millis" "$peak" "$devices" >> "$out/results.tsv"
  echo "$name round $round: $(( (after - before) * 1000 / ticks )) ms of CPU, $millis ms, peak ${peak} kB" >&2
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
    name, _, cpu, millis, peak, found = line.split("\t")
    rows[name].append((int(cpu), int(millis), int(peak)))
    devices = max(devices, int(found or 0))
print("## One snapshot\n")
print(f"`bench/snapshot.sh` (`make bench-snapshot`) on {datetime.date.today()}: registryd at `{head}` against {base_name}, each")
print(f"starting on a copy of one journal ({seconds} s of batched first installs, snapshots off, the node killed with -9; the")
print(f"node recovered {devices:,} devices from it), {rounds} rounds, alternating which goes first. Once the node serves and is idle,")
print("`registryctl snapshot`: the node's CPU from the request to the answer, the snapshot's own milliseconds, and the")
print("node's peak resident memory. Medians, every round in brackets.\n")
print("| build | CPU a snapshot | its milliseconds | CPU a device | peak resident memory |")
print("|---|---:|---:|---:|---:|")
medians = {}
for name in ("base", "head"):
    cpu = [c for c, _, _ in rows[name]]
    ms = [m for _, m, _ in rows[name]]
    peak = [p for _, _, p in rows[name]]
    medians[name] = statistics.median(cpu)
    label = "base" if name == "base" else "this revision"
    per = statistics.median(cpu) * 1000 / devices if devices else 0
    print(f"| {label} | {statistics.median(cpu):,.0f} ms ({', '.join(f'{c:,}' for c in cpu)}) | {statistics.median(ms):,.0f} ms |"
          f" {per:.2f} µs | {statistics.median(peak) / 1024:,.0f} MiB ({', '.join(f'{p / 1024:,.0f}' for p in peak)}) |")
print(f"\nCPU a snapshot, this revision / base: **{medians['head'] / medians['base']:.3f}**.")
PY
cat "$out/section.md"
python3 bench/section.py snapshot "$out/section.md" > /dev/null
