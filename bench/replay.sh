#!/usr/bin/env bash
# make bench-replay BASE=REV: how fast a node replays its journal at start-up (issue 42: at least
# 1M operations/s), this checkout's registryd against REV's on the same journal, in one run.
#
# One journal: this checkout's node takes REPLAY_SECONDS of batched first installs (8 connections
# x 16 in flight, batches of 100) with snapshots off, and is killed with -9, so that a start-up
# replays every operation. Then each build starts on a fresh copy of that data directory, in turn,
# alternating which goes first, REPLAY_ROUNDS times; a start-up's figures are the node's own log
# line ("recovered the node's state": operations replayed and seconds) and its CPU time until it
# accepts connections. Reports medians, and every round.
#
# Prints the section and puts it into BENCHMARKS.md (bench/section.py, "replay").
# Environment: REPLAY_SECONDS (default 10), REPLAY_ROUNDS (default 3), REPLAY_BASE_BIN (a folder
# holding a registryd built from REV, used instead of building it again).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh
export PATH="/opt/swift/usr/bin:$PATH"
base=${1:-HEAD~1}
seconds=${REPLAY_SECONDS:-10}
rounds=${REPLAY_ROUNDS:-3}
port=7465
out=$(mktemp -d /tmp/registry-replay.XXXXXX)
worktree="$out/base"
pid=""
trap journal_bench_cleanup EXIT

build_head
choose_base_registryd "$base" "$worktree" "${REPLAY_BASE_BIN:-}"
flags=$(this_machine_flags "$head_bin")

echo "== the journal: $seconds s of batched first installs, snapshots off, then kill -9" >&2
write_journal "$head_bin" "$out/journal" "$port" "$seconds" "$flags"

# start NAME BINARY-DIR ROUND: one start-up on a fresh copy of the journal; appends
# "NAME ROUND operations seconds cpu-seconds" to results.
start() {
  local name=$1 bin=$2 round=$3
  rm -rf "$out/data" && cp -r "$out/journal" "$out/data"
  sync
  # shellcheck disable=SC2086
  "$bin/registryd" --data-dir "$out/data" --port "$port" --metrics-port 0 $flags > "$out/$name-$round.log" 2>&1 &
  pid=$!
  wait_for_port "$port" 300 || { cat "$out/$name-$round.log" >&2; exit 1; }
  local ticks; ticks=$(awk '{ print $14 + $15 }' "/proc/$pid/stat")
  kill -9 "$pid"; wait "$pid" 2>/dev/null || true; pid=""
  local line; line=$(grep "recovered the node's state" "$out/$name-$round.log")
  local replayed; replayed=$(grep -o 'replayed=[0-9]*' <<< "$line" | cut -d= -f2)
  local took; took=$(grep -o 'seconds=[0-9.]*' <<< "$line" | cut -d= -f2)
  echo "$name $round $replayed $took $(python3 -c "print($ticks / 100)")" | tee -a "$out/results" >&2
}
for round in $(seq "$rounds"); do
  if [ $((round % 2)) = 1 ]; then start base "$base_bin" "$round"; start head "$head_bin" "$round"
  else start head "$head_bin" "$round"; start base "$base_bin" "$round"; fi
done

# The floor, in the same run: bench/restart_floor.c reads the journal's files and writes as many
# devices as were replayed (each with two claims) into presized tables, three times.
cc -O2 -o "$out/restart_floor" bench/restart_floor.c
replayed=$(awk 'NR == 1 { print $3 }' "$out/results")
for _ in 1 2 3; do
  "$out/restart_floor" "$replayed" "$out"/journal/journal-*.log | tee -a "$out/floor" >&2
done

python3 - "$out/results" "$out/floor" "$base_name" "$(git rev-parse --short=12 HEAD)" "$seconds" "$rounds" "$(date -u +%Y-%m-%d)" > "$out/section.md" <<'PY'
import statistics, sys
path, floor_path, base_name, head, seconds, rounds, day = sys.argv[1:]
runs = {"base": [], "head": []}
for line in open(path):
    name, _, replayed, took, cpu = line.split()
    runs[name].append((int(replayed), float(took), float(cpu)))
def rate(run): return run[0] / run[1]
def row(label, name):
    rates = [rate(r) for r in runs[name]]
    cpu = [r[2] / r[0] * 1e6 for r in runs[name]]
    return (f"| {label} | {runs[name][0][0]:,} | {statistics.median(rates):,.0f} ({', '.join(f'{x:,.0f}' for x in rates)}) "
            f"| {statistics.median(cpu):.2f} µs |")
ratio = statistics.median(rate(r) for r in runs["head"]) / statistics.median(rate(r) for r in runs["base"])
print("## Replaying the journal")
print()
print(f"`bench/replay.sh` (`make bench-replay`) on {day}: registryd at `{head}` against {base_name}, each starting on a")
print(f"copy of one journal ({seconds} s of batched first installs, snapshots off, the node killed with -9), {rounds} rounds,")
print("alternating which goes first. Operations a second from the node's own log line; CPU until it accepts connections.")
print()
print("| build | operations replayed | operations/s, median (each round) | process CPU per operation |")
print("|---|---:|---:|---:|")
print(row("base", "base"))
print(row("this revision", "head"))
floors = [dict(field.split("=") for field in line.split()) for line in open(floor_path)]
read_s = statistics.median(float(f["read_s"]) for f in floors)
index_s = statistics.median(float(f["index_s"]) for f in floors)
replayed = runs["head"][0][0]
print()
print(f"Ratio, this revision / base: **{ratio:.3f}**. Target (issue 42): at least 1,000,000 operations/s.")
print()
print(f"The floor (`bench/restart_floor.c` over the journal's files, medians of 3): reading them {read_s:.2f} s, writing")
print(f"{replayed:,} devices and their two claims each into presized tables {index_s:.2f} s: "
      f"**{replayed / (read_s + index_s):,.0f} operations/s** on one thread, {replayed / max(read_s, index_s):,.0f} on two.")
PY
cat "$out/section.md"
python3 bench/section.py replay "$out/section.md" > /dev/null
