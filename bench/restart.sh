#!/usr/bin/env bash
# make bench-restart BASE=REV: how long a node takes to start from a snapshot of RESTART_DEVICES
# devices, this checkout's registryd against REV's, in one run.
#
# Each build's node, sized for them (--expected-devices 1.1 x RESTART_DEVICES), takes the same
# RESTART_DEVICES first installs in batches of 100 with snapshots off and stops cleanly, which
# writes a snapshot of everything in that build's own record order. Then each build, in turn,
# RESTART_ROUNDS times alternating which goes first, starts with the same flags on a fresh copy of
# its directory; the time is from the start of the process to its port accepting connections (the
# snapshot loaded, the indexes built).
#
# Prints the section and puts it into BENCHMARKS.md (bench/section.py, "restart").
# Environment: RESTART_DEVICES (default 10000000), RESTART_ROUNDS (default 3), RESTART_BASE_BIN (a
# folder holding a registryd built from REV, used instead of building it again).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh
export PATH="/opt/swift/usr/bin:$PATH"
base=${1:-HEAD~1}
devices=${RESTART_DEVICES:-10000000}
rounds=${RESTART_ROUNDS:-3}
port=7468
out=$(mktemp -d /tmp/registry-restart.XXXXXX)
worktree="$out/base"
pid=""
trap journal_bench_cleanup EXIT

build_head
choose_base_registryd "$base" "$worktree" "${RESTART_BASE_BIN:-}"
flags="--port $port --expected-devices $((devices * 11 / 10)) --snapshot-every-operations 0 --snapshot-every-seconds 0"

# fill NAME BINARY-DIR: that build's node takes the first installs (the same ones for each build,
# from this checkout's registryload) and stops cleanly, which writes its snapshot: each build
# restarts from a snapshot it wrote, since the order of the records is the writer's choice.
fill() {
  local name=$1 bin=$2
  echo "== $name: $devices first installs, then a clean stop (a snapshot)" >&2
  mkdir -p "$out/journal-$name"
  # shellcheck disable=SC2086,SC2046 # the flags are words
  "$bin/registryd" --data-dir "$out/journal-$name" $flags $(this_machine_flags "$bin") > "$out/load-$name.log" 2>&1 &
  pid=$!
  wait_for_port $port 120 || { cat "$out/load-$name.log" >&2; exit 1; }
  "$head_bin/registryload" --endpoints 127.0.0.1:$port --connections 8 --in-flight 16 --batch 100 --requests "$devices" \
    --warmup 0s --seed 41 > /dev/null 2>&1
  kill -TERM "$pid"; wait "$pid" || true; pid=""
}
fill base "$base_bin"
fill head "$head_bin"
for name in base head; do
  find "$out/journal-$name" -name 'snapshot-*.snap' | grep -q . || { echo "the $name build's clean stop wrote no snapshot" >&2; exit 1; }
done
snapshot_bytes=$(find "$out/journal-head" -name 'snapshot-*.snap' -printf '%s\n' | sort -n | tail -1)

# run NAME BINARY-DIR ROUND: one start of that build on a copy of the directory.
run() {
  local name=$1 bin=$2 round=$3 started ended
  rm -rf "$out/data" && cp -r "$out/journal-$name" "$out/data" && sync
  started=$(date +%s.%N)
  # shellcheck disable=SC2086,SC2046 # the flags are words
  "$bin/registryd" --data-dir "$out/data" $flags $(this_machine_flags "$bin") > "$out/$name.log" 2>&1 &
  pid=$!
  wait_for_port $port 120 || { cat "$out/$name.log" >&2; exit 1; }
  ended=$(date +%s.%N)
  kill -9 "$pid"; wait "$pid" 2>/dev/null || true; pid=""
  printf '%s\t%s\t%s\n' "$name" "$round" "$(python3 -c "print(f'{$ended - $started:.2f}')")" >> "$out/results.tsv"
  echo "$name round $round: $(tail -1 "$out/results.tsv" | cut -f3) s" >&2
}

for round in $(seq 1 "$rounds"); do
  if [ $((round % 2)) -eq 1 ]; then run base "$base_bin" "$round"; run head "$head_bin" "$round"
  else run head "$head_bin" "$round"; run base "$base_bin" "$round"; fi
done

python3 - "$out/results.tsv" "$base_name" "$(git rev-parse --short=12 HEAD)" "$devices" "$rounds" "$snapshot_bytes" > "$out/section.md" <<'PY'
import statistics, sys, datetime
path, base_name, head, devices, rounds, snapshot_bytes = sys.argv[1:]
rows = {"base": [], "head": []}
for line in open(path):
    name, _, seconds = line.rstrip("\n").split("\t")
    rows[name].append(float(seconds))
print("## Restart from a snapshot\n")
print(f"`bench/restart.sh` (`make bench-restart`) on {datetime.date.today()}: registryd at `{head}` against {base_name}, each")
print(f"starting on a copy of a data directory it wrote itself: the same {int(devices):,} first installs and a clean stop, so one")
print(f"snapshot (this revision's: {int(snapshot_bytes) / 2**20:,.0f} MiB) and nothing to replay. From the process's start to its port accepting; {rounds} rounds,")
print("alternating which goes first; medians, every round in brackets.\n")
print("| build | restart |")
print("|---|---:|")
for name, label in (("base", "base"), ("head", "this revision")):
    print(f"| {label} | {statistics.median(rows[name]):.2f} s ({', '.join(f'{s:.2f}' for s in rows[name])}) |")
print(f"\nThis revision / base: **{statistics.median(rows['head']) / statistics.median(rows['base']):.3f}**.")
PY
cat "$out/section.md"
python3 bench/section.py restart "$out/section.md" > /dev/null
