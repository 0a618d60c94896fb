#!/usr/bin/env bash
# bench/cpu-compare.sh BASE-BIN-DIR HEAD-BIN-DIR ROW PAIRS: the server CPU one registration costs,
# for two registryd builds, alternating which runs first. Each run starts a fresh node, drives it
# for 10 s with the same rows as bench/compare.sh (ROW: single or batch) and reads the node's user
# and system time from /proc around it. On a noisy machine a build's throughput spreads by tens of
# percent from run to run, while the CPU each registration costs spreads far less: this tells two
# builds apart where `make bench-compare` cannot. Prints one line a run and the medians.
# Build the two first, e.g. `swift build -c release --product registryd` in two checkouts.
# BASE-BIN-DIR may be the word `floor`: the base is then bench/registration_floor.c, the least a
# node can do for these registrations (issue 42's first target; its comment says what it does),
# built here with the system's C compiler and OpenSSL's libcrypto.
# REGISTRYLOAD_DIR names a folder holding a release registryload, to skip building this one.
# CPU_COMPARE_SETTLE_SECONDS (default 0) waits that long after a node opens its port before the
# load and the measurement start: with BENCH_NODE_FLAGS="--expected-devices N", a node whose tables
# are allocated and populated before its first registration (docs/performance.md, "Against the
# reference on a sized node").
set -euo pipefail
cd "$(dirname "$0")/.."
# The node's CPU counts a forked snapshot's child too: the children it waited for, and one still
# running when the load stops, at that moment. Each run also gives the user time alone: the kernel's
# share (mostly zeroing pages new to the process, which this VM makes dear) swings by a tenth from
# run to run with the machine's memory, and a change to user code shows through it more clearly.
# A run prints NAME, then the whole CPU and the user CPU in µs a registration (node_ticks,
# bench/lib.sh).
# shellcheck source=bench/lib.sh
source bench/lib.sh
base_bin=$1 head_bin=$2 row=$3 pairs=${4:-5}
arguments=$(compare_row_arguments "$row")
export PATH="/opt/swift/usr/bin:$PATH"
load_bin=${REGISTRYLOAD_DIR:-}
if [ -z "$load_bin" ]; then
  swift build -c release --product registryload >&2
  load_bin=$(swift build -c release --show-bin-path)
fi
out=$(mktemp -d /tmp/registry-cpu.XXXXXX)
node_pid=""
cleanup() { [ -n "$node_pid" ] && kill "$node_pid" 2>/dev/null || true; rm -rf "$out"; }
trap cleanup EXIT
if [ "$base_bin" = floor ]; then
  build_registration_floor "$out/registration_floor"
fi

# run NAME BINARY-DIR: prints NAME, the node's CPU µs a registration, and its user CPU µs.
run() {
  local name=$1 bin=$2
  rm -rf "$out/data" && mkdir -p "$out/data"
  if [ "$bin" = floor ]; then
    "$out/registration_floor" 7462 "$out/data/journal" > "$out/node.log" 2>&1 &
  else
    # shellcheck disable=SC2046 # the flags are words
    "$bin/registryd" --data-dir "$out/data" --port 7462 --log-level warning $(this_machine_flags "$bin") > "$out/node.log" 2>&1 &
  fi
  node_pid=$!
  wait_for_port 7462 || { cat "$out/node.log" >&2; exit 1; }
  local ticks_before ticks_after
  sleep "${CPU_COMPARE_SETTLE_SECONDS:-0}"
  ticks_before=$(node_ticks "$node_pid")
  # shellcheck disable=SC2086 # the arguments are words
  "$load_bin/registryload" --endpoints 127.0.0.1:7462 --duration 10s --warmup 0s $arguments --seed 1 \
    --json "$out/report.json" > /dev/null 2>&1
  ticks_after=$(node_ticks "$node_pid")
  kill -TERM "$node_pid"; wait "$node_pid" || true; node_pid=""
  # shellcheck disable=SC2086 # each tick count is two words
  python3 - "$out/report.json" "$name" $ticks_before $ticks_after "$(getconf CLK_TCK)" <<'PY'
import json, sys
report, name = json.load(open(sys.argv[1])), sys.argv[2]
total_before, user_before, total_after, user_after, hz = map(int, sys.argv[3:])
scale = 1e6 / hz / report["latency"]["count"]
print(f"{name}\t{(total_after - total_before) * scale:.2f}\t{(user_after - user_before) * scale:.2f}")
PY
}

for pair in $(seq "$pairs"); do
  if [ $((pair % 2)) = 1 ]; then run base "$base_bin"; run head "$head_bin"; else run head "$head_bin"; run base "$base_bin"; fi
done | tee "$out/runs.tsv"
python3 - "$out/runs.tsv" "$row" <<'PY'
import statistics, sys
runs, user = {}, {}
for line in open(sys.argv[1]):
    name, micros, user_micros = line.split("\t")
    runs.setdefault(name, []).append(float(micros))
    user.setdefault(name, []).append(float(user_micros))
base, head = statistics.median(runs["base"]), statistics.median(runs["head"])
user_base, user_head = statistics.median(user["base"]), statistics.median(user["head"])
print(f"{sys.argv[2]}: base {base:.2f} µs, head {head:.2f} µs a registration (medians of {len(runs['base'])}), ratio {head / base:.3f}; "
      f"user CPU alone: base {user_base:.2f} µs, head {user_head:.2f} µs, ratio {user_head / user_base:.3f}")
PY
