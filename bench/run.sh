#!/usr/bin/env bash
# make bench: the registry against what a team would otherwise build, in one run on this machine.
#
#   1. PostgreSQL 15 (plpgsql register(), pgbench) and Redis 7 (Lua script, redis-benchmark with
#      appendonly yes) as baselines, each a real server on 127.0.0.1 started for the run;
#   2. one registryd node driven by registryload: closed loop with single requests (each in a
#      frame of its own, then coalesced by the client library), closed loop with batches, and
#      open loop at 70% of the batched maximum (BENCH_OPEN_REPEATS runs, and one more beside an
#      fdatasync probe that shows what the disk alone charges meanwhile);
#   3. the open loop at 70% again on a node started with --expected-devices, whose indexes never grow
#      during the runs (the first node's do, several times); then, on that node, latency-against-load
#      sweeps in open loop, with single requests and with batches of 20;
#   4. what this machine allows at the open loop's rate: bench/floor.c (no registry: a thread reads
#      frames of the same sizes and spins a set CPU time per registration, then each round is journaled
#      with one fdatasync and answered, on that thread or a committer thread) for several such times,
#      and registryd with its data directory in memory (no disk);
#   5. resident memory per device at 1M and 10M registered devices, and the restart time at each
#      (a clean stop snapshots; the restart loads that snapshot);
#   6. the change feed (bench/feed.sh): throughput with and without 10 watchers, their lag at half
#      the maximum, and the memory an idle watcher takes.
# First, bench/machine.py measures what this machine charges for an fdatasync (busy and rested), how often its disk stalls, a wake-up and new memory.
#
# The machine is a shared virtual machine: the CPU time its hypervisor takes (steal) is recorded
# for every registryload run (in its JSON report) and for the baseline phase, because it, not
# the server, sets most of the latency tail when it is high.
#
# Results go to BENCHMARKS.md (rendered by bench/render.py) with the commands that produced them.
# Environment: BENCH_SECONDS (measured seconds per throughput run, default 15),
# BENCH_MEMORY_DEVICES (default "1000000 10000000"), BENCH_BINDINGS (binding changes the memory a
# binding takes is measured at, beside 1M; default 10000000), BENCH_SWEEP_RATES (single requests, default
# "1000 5000 10000 20000"), BENCH_BATCH_SWEEP_RATES (batches of 20, default "10000 20000 40000 60000"),
# BENCH_OPEN_REPEATS (runs of the open loop at 70%, default 3; the target is judged on their median),
# BENCH_SIZED_DEVICES (--expected-devices of the node for step 3; by default 1.25 times what its runs register,
# warm-ups included, so that no index even starts preparing a bigger table during them),
# BENCH_SETTLE_SECONDS (pause between stopping the big node and starting that one, default 45),
# BENCH_FLOOR_WORK_NS (the floor's CPU nanoseconds per registration, default "0 1000 2000 3000": beyond that, one thread cannot keep up at the rates of this machine),
# BENCH_FLOOR_MODES (how the floor commits, default "inline pipelined"; see bench/floor.c),
# BENCH_FLOOR_BYTES (the floor's frame, answer and journal bytes per batch, default "10200 5600 14900"),
# BENCH_FLOOR_REPEATS (runs of the floor at each CPU time, default 3; the table shows the median p99's).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh
export PATH="/opt/swift/usr/bin:$PATH"
seconds=${BENCH_SECONDS:-15}
memory_points=${BENCH_MEMORY_DEVICES:-"1000000 10000000"}
binding_memory=${BENCH_BINDINGS:-10000000}
sweep_rates=${BENCH_SWEEP_RATES:-"1000 5000 10000 20000"}
batch_sweep_rates=${BENCH_BATCH_SWEEP_RATES:-"10000 20000 40000 60000"}
open_repeats=${BENCH_OPEN_REPEATS:-3}
settle_seconds=${BENCH_SETTLE_SECONDS:-45}
floor_work=${BENCH_FLOOR_WORK_NS:-"0 1000 2000 3000"}
floor_modes=${BENCH_FLOOR_MODES:-"inline pipelined"}
floor_bytes=${BENCH_FLOOR_BYTES:-"10200 5600 14900"}
floor_repeats=${BENCH_FLOOR_REPEATS:-3}
out=$(mktemp -d /tmp/registry-bench.XXXXXX)
results="$out/results.tsv"
: > "$results"
registryd_pid=""
memory_dir=""
floor_pid=""
cleanup() {
  [ -n "$registryd_pid" ] && kill "$registryd_pid" 2>/dev/null || true
  [ -n "$floor_pid" ] && kill "$floor_pid" 2>/dev/null || true
  rm -rf "$out/data"
  # The in-memory data directory of step 4 holds RAM until it is deleted.
  [ -n "$memory_dir" ] && rm -rf "$memory_dir"
  return 0
}
trap cleanup EXIT

command -v redis-server >/dev/null || scripts/apt-install.sh redis-server redis-tools
command -v pgbench >/dev/null || scripts/apt-install.sh postgresql postgresql-contrib
for product in registryd registryload registryctl BindingMemory VendorMove; do swift build -c release --product "$product"; done
bin=$(swift build -c release --show-bin-path)
export REGISTRYLOAD_GIT_REVISION=$(git rev-parse HEAD 2>/dev/null || echo unknown)

# The wall time and /proc/stat's "cpu" line, for steal_share.
cpu_sample() { echo "$(date +%s.%N) $(head -1 /proc/stat)"; }
# The share of the CPUs' time the hypervisor took between two cpu_samples: steal ticks over the
# ticks the CPUs had in the wall time between them (as registryload's report computes it).
steal_share() {
  awk -v a="$1" -v b="$2" -v cpus="$(nproc)" -v hz="$(getconf CLK_TCK)" 'BEGIN {
    split(a, x); split(b, y); capacity = (y[1] - x[1]) * cpus * hz
    printf "%.3f", (capacity > 0 ? (y[10] - x[10]) / capacity : 0) }'
}

# The share of the CPUs' time spent busy (not idle or waiting for I/O) between two cpu_samples.
busy_share() {
  awk -v a="$1" -v b="$2" 'BEGIN {
    split(a, x); split(b, y); total = 0
    for (i = 3; i <= 10; i++) total += y[i] - x[i]
    idle = (y[6] - x[6]) + (y[7] - x[7])
    printf "%.3f", (total > 0 ? 1 - idle / total : 0) }'
}

echo "== machine" >&2
python3 bench/machine.py "$out" | tee -a "$results" >&2

echo "== baselines" >&2
cpu_before=$(cpu_sample)
bash bench/postgres/run.sh "$seconds" 32 "$results"
bash bench/redis/run.sh $((seconds * 40000)) 16 16 "$results" everysec
bash bench/redis/run.sh $((seconds * 30000)) 16 16 "$results" always
printf 'steal\tbaselines\t%s\n' "$(steal_share "$cpu_before" "$(cpu_sample)")" >> "$results"


# Starts registryd on a fresh data directory, with any extra arguments, and waits for "listening on".
start_node() {
  rm -rf "$out/data" && mkdir -p "$out/data"
  start_node_in "$out/data" "$@"
}
# As start_node, in an existing empty directory.
start_node_in() {
  local directory=$1; shift
  # shellcheck disable=SC2046 # the flags are words
  "$bin/registryd" --data-dir "$directory" --port 7450 --log-level warning $(this_machine_flags "$bin") "$@" > "$out/registryd.log" 2>&1 &
  registryd_pid=$!
  wait_for_port 7450 && return 0
  echo "registryd did not start" >&2; cat "$out/registryd.log" >&2; exit 1
}
stop_node() {
  kill -TERM "$registryd_pid"; wait "$registryd_pid" || true; registryd_pid=""
}
rss_bytes() { awk '/VmRSS/ { printf "%.0f\n", $2 * 1024 }' "/proc/$registryd_pid/status"; }
# An index that grew gives its old table back a piece at a time (GradualRelease, 16 MiB a second):
# waits, up to 2 minutes, until the resident memory has not fallen for 3 seconds, and sets $settled
# to the seconds that took.
wait_for_release() {
  local previous steady=0 rss
  previous=$(rss_bytes); settled=0
  while [ "$steady" -lt 3 ] && [ "$settled" -lt 120 ]; do
    sleep 1; settled=$((settled + 1)); rss=$(rss_bytes)
    if [ "$rss" -lt $((previous - (1 << 20))) ]; then steady=0; else steady=$((steady + 1)); fi
    previous=$rss
  done
  settled=$((settled - steady))
}
# A sized node's indexes' pages are populated in the background at start-up: waits until the
# resident memory stops growing, so that the runs measure serving rather than that.
wait_for_population() {
  local previous=0 rss
  for _ in $(seq 120); do
    sleep 0.5; rss=$(rss_bytes)
    [ "$rss" -le "$previous" ] && break
    previous=$rss
  done
}

# Runs registryload with the given arguments and keeps its JSON report as $out/KEY.json.
run_load() {
  local key=$1; shift
  echo "registry: registryload --endpoints 127.0.0.1:7450 $*" >&2
  "$bin/registryload" --endpoints 127.0.0.1:7450 "$@" --json "$out/$key.json" > "$out/$key.txt" 2> /dev/null || true
  cat "$out/$key.txt" >&2
}

# registryd's CPU time so far (user + system, in clock ticks), one of its stats as registryctl
# status gives them in JSON (a key path such as log.operations), and its logged operations.
server_cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$registryd_pid/stat"; }
server_stat() {
  "$bin/registryctl" status --endpoint 127.0.0.1:7450 -o json | python3 -c "import json, sys
value = json.load(sys.stdin)
for key in sys.argv[1].split('.'): value = value[key]
print(value)" "$1"
}
server_operations() { server_stat log.operations; }

# As run_load, and records a row of the main table (the report's key is its last field), and
# the server's CPU time per operation it logged during the run (warm-up included).
load() {
  local name=$1 key=$2; shift 2
  local ticks_before operations_before
  ticks_before=$(server_cpu_ticks); operations_before=$(server_operations)
  run_load "$key" "$@"
  printf 'servercpu\t%s\t%s\t%s\n' "$key" "$(( $(server_cpu_ticks) - ticks_before ))" \
    "$(( $(server_operations) - operations_before ))" >> "$results"
  python3 - "$out/$key.json" "$name" "registryload --endpoints 127.0.0.1:7450 $*" "$key" >> "$results" <<'EOF'
import json, sys
report = json.load(open(sys.argv[1]))
t = report["throughput"]
l = report["latency"]
print(f"registry\t{sys.argv[2]}\t{t['achieved_per_second']:.0f}\t{l['p50_ns'] / 1000:.0f}\t{l['p99_ns'] / 1000:.0f}\t{sys.argv[3]}\t{sys.argv[4]}")
EOF
}

echo "== registry, one node" >&2
start_node
load "registryd, 1 node, single RegisterRequests, 4 connections × 64 in flight" single \
  --duration "${seconds}s" --warmup 2s --connections 4 --in-flight 64 --batch 1 --seed 1
load "registryd, 1 node, single registrations coalesced by the client library (up to 128 a frame), 4 connections × 64 in flight" coalesced \
  --duration "${seconds}s" --warmup 2s --connections 4 --in-flight 64 --batch 1 --coalesce 128 --seed 6
load "registryd, 1 node, batches of 100, 8 connections × 16 in flight" batch \
  --duration "${seconds}s" --warmup 2s --connections 8 --in-flight 16 --batch 100 --seed 2
max=$(python3 -c "import json; print(int(json.load(open('$out/batch.json'))['throughput']['achieved_per_second']))")
open_rate=$((max * 70 / 100))
load "registryd, 1 node, open loop at 70% of the batched maximum, same connections and batches" open \
  --duration "${seconds}s" --warmup 2s --connections 8 --in-flight 16 --batch 100 --rate "$open_rate" --slo p99=2ms --seed 3
# The same run again (new devices each time: the seed differs), since one run's tail is at the mercy of
# the hypervisor; then once more with the disk probe beside it, at real-time priority where allowed so
# that it measures the disk rather than waiting for a CPU. The probe run is not one of the repeats.
for repeat in $(seq 2 "$open_repeats"); do
  run_load "open-$repeat" --duration "${seconds}s" --warmup 2s --connections 8 --in-flight 16 --batch 100 \
    --rate "$open_rate" --slo p99=2ms --seed "$((3 + 1000 * repeat))"
done
realtime=""
chrt -f 20 true 2>/dev/null && realtime="chrt -f 20"
run_load open-probe --duration "${seconds}s" --warmup 2s --connections 8 --in-flight 16 --batch 100 \
  --rate "$open_rate" --slo p99=2ms --seed 3999 &
load_pid=$!
sleep 3
$realtime python3 bench/machine.py "$out" --probe "$((seconds > 3 ? seconds - 2 : 1))" | tee -a "$results" >&2
wait "$load_pid"
load "registryd, 1 node, open loop, batches of 100 at 5,000/s (one batch's own time, little queueing)" floor \
  --duration "${seconds}s" --warmup 2s --connections 8 --in-flight 16 --batch 100 --rate 5000 --seed 5
load "registryd, 1 node, mixed workload with --verify (closed loop, single requests)" verify \
  --duration "${seconds}s" --warmup 1s --connections 4 --in-flight 64 --batch 1 \
  --workload first-install=50,returning=20,sibling=10,reinstall=10,lost-keychain=5,concurrent-siblings=5 --verify --seed 4
load "registryd, 1 node, accounts: binds and moves (a move is an unbind and a bind; each request counts), 4 connections × 64 in flight" binds \
  --duration "${seconds}s" --warmup 1s --connections 4 --in-flight 64 --batch 1 --workload first-install=10,bind=45,move=45 --verify --seed 8
stop_node

echo "== open loop on a node sized for its devices" >&2
# The node just stopped held gigabytes. This VM reports freed memory to the hypervisor in the
# background (free page reporting is on), and a run started within seconds of such a stop stalled
# for hundreds of milliseconds: p99 259 ms, against 9.76 ms after 45 s, in the same sequence by
# hand (and the first sized run of the last three benches: 92, 107 and 322 ms). Let it settle.
sleep "$settle_seconds"
# An index prepares its next table (allocating and zeroing it, on a thread of its own) from 70%
# load of a table sized to be 75% full at the expected count: a node sized for exactly what the
# runs register did that during the last run (12M expected, 11.9M registered in the bench of
# 07730ff), and the zeroing took CPU the requests needed.
# The sweep below runs on this node too, after the open loops.
sweep_devices=0
for rate in $sweep_rates $batch_sweep_rates; do sweep_devices=$((sweep_devices + rate * (seconds + 2))); done
sized_devices=${BENCH_SIZED_DEVICES:-$(((open_rate * (seconds + 2) * open_repeats + sweep_devices) * 5 / 4))}
start_node --expected-devices "$sized_devices"
wait_for_population
for repeat in $(seq 1 "$open_repeats"); do
  run_load "sized-$repeat" --duration "${seconds}s" --warmup 2s --connections 8 --in-flight 16 --batch 100 \
    --rate "$open_rate" --slo p99=2ms --seed "$((7 + 1000 * repeat))"
done
printf 'sized\t%s\n' "$sized_devices" >> "$results"
printf 'settle\t%s\n' "$settle_seconds" >> "$results"
# Latency against load, on the same node: its indexes never grow meanwhile, and its journal holds
# the open loops' registrations.
echo "== latency against load" >&2
# One open-loop run at a rate: the report is sweep-BATCH-RATE.json, and a "sweep" line records it.
sweep_run() {
  local batch=$1 connections=$2 in_flight=$3 rate=$4
  local arguments="--duration ${seconds}s --warmup 2s --connections $connections --in-flight $in_flight --batch $batch --rate $rate --slo p99=2ms --seed $((100 + rate + batch))"
  # shellcheck disable=SC2086 # the arguments are words
  run_load "sweep-$batch-$rate" $arguments
  printf 'sweep\t%s\t%s\tregistryload --endpoints 127.0.0.1:7450 %s\n' "$batch" "$rate" "$arguments" >> "$results"
}
for rate in $sweep_rates; do sweep_run 1 4 64 "$rate"; done
for rate in $batch_sweep_rates; do sweep_run 20 8 16 "$rate"; done
stop_node

echo "== what this machine allows" >&2
# The same open loop with no registry: bench/floor.c, one thread that reads the frames and spins a set
# CPU time per registration, then journals each round with one pwrite and fdatasync and answers it,
# itself ("inline") or on a second thread while it reads the next round ("pipelined"); driven by its
# own C client at the same frames per second over 8 connections. Frame, answer and
# journal sizes are registryd's for a batch of 100 first installs (10.2 KB in, 5.6 KB out, 14.9 KB
# journaled; measured with ss and the journal file's size). It shows what p99 a server whose request
# path costs that much CPU per registration, and does nothing else, can reach here at that rate.
"$(command -v cc || command -v clang)" -O2 -Wall -pthread -o "$out/floor" bench/floor.c
frames=$((open_rate / 100))
for mode in $floor_modes; do
  for work in $floor_work; do
    for repeat in $(seq 1 "$floor_repeats"); do
      server_log="$out/floor-server-$mode-$work-$repeat.log"
      "$out/floor" server 7451 "$out/floor.journal" $((work * 100)) "$mode" 2> "$server_log" &
      floor_pid=$!
      wait_for_port 7451 || true   # if it did not start, the client fails and the run is skipped
      before=$(cpu_sample)
      status=0
      "$out/floor" client 7451 "$frames" "$seconds" 2 8 $floor_bytes > "$out/floor-$mode-$work-$repeat.txt" || status=$?
      after=$(cpu_sample)
      # An overloaded floor server exits by itself once its client gives up and resets the connection.
      kill "$floor_pid" 2>/dev/null || true; wait "$floor_pid" 2>/dev/null || true; floor_pid=""; rm -f "$out/floor.journal"
      if [ "$status" -ne 0 ]; then echo "floor client failed (exit $status); see $server_log" >&2; continue; fi
      cat "$out/floor-$mode-$work-$repeat.txt" "$server_log" >&2
      # The server's commit p99 (pwrite + fdatasync), which it printed when stopped.
      commit_p99=$(awk '/^floor: commits / { for (i = 4; i <= NF; i++) if ($i ~ /^p99_us=/) { sub("p99_us=", "", $i); print $i } }' "$server_log")
      printf 'floor\t%s\t%s\t%s\t%s\t%s\t%s\t%s\tfloor server 7451 JOURNAL %s %s; floor client 7451 %s %s 2 8 %s\n' "$mode" "$work" "$frames" \
        "$(awk '/^floor / { for (i = 2; i <= 6; i++) { split($i, pair, "="); printf "%s%s", pair[2], (i < 6 ? "\t" : "") } }' "$out/floor-$mode-$work-$repeat.txt")" \
        "$(busy_share "$before" "$after")" "$(steal_share "$before" "$after")" "${commit_p99:-}" "$((work * 100))" "$mode" "$frames" "$seconds" "$floor_bytes" >> "$results"
    done
  done
done
# And registryd with its data directory in memory (tmpfs), where fdatasync costs nothing: what the
# node's p99 is without its disk.
if [ -d /dev/shm ]; then
  memory_dir=$(mktemp -d /dev/shm/registry-bench.XXXXXX)
  start_node_in "$memory_dir" --expected-devices "$sized_devices"
  wait_for_population
  run_load memory-dir --duration "${seconds}s" --warmup 2s --connections 8 --in-flight 16 --batch 100 \
    --rate "$open_rate" --slo p99=2ms --seed 8
  stop_node
  rm -rf "$memory_dir"; memory_dir=""
fi

echo "== memory a binding takes" >&2
"$bin/BindingMemory" "$binding_memory" > "$out/binding-memory.json"
printf 'bindingmemory\t%s\n' "$(cat "$out/binding-memory.json")" >> "$results"
cat "$out/binding-memory.json" >&2

echo "== the pause of a vendor move" >&2
"$bin/VendorMove" 1000000 > "$out/vendor-move.json"
printf 'vendormove\t%s\n' "$(cat "$out/vendor-move.json")" >> "$results"
cat "$out/vendor-move.json" >&2

echo "== memory" >&2
# Stops the node (a clean stop snapshots what is new) and starts it again on the same data directory
# (with any extra arguments), timed from exec to accepting connections: loading the snapshot and
# replaying the journal past it (the node logs how long that took, which lands in $moved). Sets
# $restart in seconds.
timed_restart() {
  stop_node
  local started
  started=$(date +%s.%N)
  # shellcheck disable=SC2046 # the flags are words
  "$bin/registryd" --data-dir "$out/data" --port 7450 --log-level info $(this_machine_flags "$bin") "$@" > "$out/registryd.log" 2>&1 &
  registryd_pid=$!
  until (exec 3<>/dev/tcp/127.0.0.1/7450) 2>/dev/null; do sleep 0.05; done
  restart=$(python3 -c "print(f'{$(date +%s.%N) - $started:.1f}')")
  moved=$(sed -n 's/.* seconds=\([0-9.]*\) .*recovered the node.s state.*/\1/p' "$out/registryd.log" | tail -1)
}
# The memory points' node takes no snapshot by itself, so that each restart loads the one its clean
# stop took.
start_node --snapshot-every-operations 0
registered=0
for target in $memory_points; do
  "$bin/registryload" --endpoints 127.0.0.1:7450 --requests $((target - registered)) --warmup 0s --connections 8 \
    --in-flight 16 --batch 100 --seed "$target" > "$out/memory-$target.txt" 2>/dev/null
  registered=$target
  wait_for_release
  rss=$(rss_bytes)
  devices=$(server_stat devices)
  echo "memory: $devices devices, RSS $rss bytes (resident memory fell for ${settled}s after the load)" >&2
  printf 'memory\t%s\t%s\t%s\n' "$devices" "$rss" "$settled" >> "$results"
  timed_restart --snapshot-every-operations 0
  echo "restart with $devices devices: ${restart}s (loading the snapshot and replaying: ${moved:-?}s)" >&2
  printf 'restart\t%s\t%s\t%s\n' "$devices" "$restart" "${moved:-}" >> "$results"
done
stop_node

echo "== the change feed" >&2
FEED_OUT="$out/feed.md" BENCH_SECONDS="$seconds" bash bench/feed.sh > /dev/null
printf 'feed\t%s\n' "$out/feed.md" >> "$results"

# Rendered aside and then moved, so a failed render leaves the previous BENCHMARKS.md alone.
python3 bench/render.py "$results" "$out" > "$out/BENCHMARKS.md"
mv "$out/BENCHMARKS.md" BENCHMARKS.md
echo "wrote BENCHMARKS.md (raw reports in $out)" >&2
