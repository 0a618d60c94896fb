#!/usr/bin/env bash
# make bench-allocations: heap allocations a registration costs registryd, counted, not timed, so
# that a new allocation on the request path shows in any run (issue 42's guard against the slow
# drift). registryd runs under bench/malloc_count.c (an LD_PRELOAD counter); for each row of
# bench/compare.sh (batches of 100 on 8 connections x 16 in flight; single requests on 4 x 64), a
# fresh node, snapshots off, takes ALLOCATIONS_WARMUP registrations, then ALLOCATIONS_REQUESTS more
# between two readings of the counters; the same for bench/registration_floor.c, the least a node
# can do (issue 42, target 1), beside it. And per operation a peer sends (issue 42, target 3): node-1
# of a two-node cluster takes ALLOCATIONS_REQUESTS registrations in batches with node-2 down; node-2
# starts empty under the counter, is read, and is read again once it has caught up from node-1's
# journal. Writes the "allocations" section of BENCHMARKS.md.
# Environment: ALLOCATIONS_REQUESTS (default 1000000), ALLOCATIONS_WARMUP (default 200000).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh
export PATH="/opt/swift/usr/bin:$PATH"
requests=${ALLOCATIONS_REQUESTS:-1000000}
warmup=${ALLOCATIONS_WARMUP:-200000}
for product in registryd registryload registryctl; do swift build -c release --product "$product" >&2; done
bin=$(swift build -c release --show-bin-path)
out=$(mktemp -d /tmp/registry-allocations.XXXXXX)
node_pid=""
peer_pid=""
cleanup() {
  for pid in $node_pid $peer_pid; do kill "$pid" 2>/dev/null || true; done
  rm -rf "$out"
}
trap cleanup EXIT
compiler=$(command -v cc || command -v clang)
"$compiler" -O2 -Wall -shared -fPIC -o "$out/malloc_count.so" bench/malloc_count.c
build_registration_floor "$out/registration_floor"

# reading: asks the node for its counters and waits for the line.
reading() {
  local lines; lines=$(wc -l < "$out/counts")
  kill -USR2 "$node_pid"
  for _ in $(seq 100); do [ "$(wc -l < "$out/counts")" -gt "$lines" ] && return 0; sleep 0.02; done
  echo "the node wrote no counters" >&2; return 1
}

# per_registration SERVER ROW: prints SERVER, ROW, and how much each counter grew between the two
# readings, per registration.
per_registration() {
  python3 - "$out/counts" "$requests" "$1" "$2" <<'PY'
import sys
path, requests, server, row = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
before, after = ([int(x) for x in line.split()] for line in open(path).read().split("\n")[:2])
print(server, row, *(f"{(b - a) / requests:.2f}" for a, b in zip(before, after)), sep="\t")
PY
}

# run SERVER ROW: prints SERVER ROW allocations frees, per registration.
run() {
  local server=$1 row=$2
  rm -rf "$out/data" && mkdir -p "$out/data" && : > "$out/counts"
  if [ "$server" = floor ]; then
    LD_PRELOAD="$out/malloc_count.so" MALLOC_COUNT_OUT="$out/counts" "$out/registration_floor" 7464 "$out/data/journal" > "$out/node.log" 2>&1 &
  else
    LD_PRELOAD="$out/malloc_count.so" MALLOC_COUNT_OUT="$out/counts" "$bin/registryd" --data-dir "$out/data" --port 7464 \
      --log-level warning --snapshot-every-operations 0 --snapshot-every-seconds 0 > "$out/node.log" 2>&1 &
  fi
  node_pid=$!
  wait_for_port 7464 60 || { cat "$out/node.log" >&2; exit 1; }
  # shellcheck disable=SC2046 # the arguments are words
  "$bin/registryload" --endpoints 127.0.0.1:7464 $(compare_row_arguments "$row") --warmup 0s --requests "$warmup" --seed 8 > /dev/null 2> "$out/load.err"
  reading
  # shellcheck disable=SC2046
  "$bin/registryload" --endpoints 127.0.0.1:7464 $(compare_row_arguments "$row") --warmup 0s --requests "$requests" --seed 9 > /dev/null 2> "$out/load.err"
  reading
  kill "$node_pid"; wait "$node_pid" 2>/dev/null || true; node_pid=""
  per_registration "$server" "$row"
}

# replicated: prints "registryd replicated allocations frees", per operation node-2 took from node-1.
replicated() {
  local peers="127.0.0.1:7465,127.0.0.1:7466"
  local cluster="--cluster-id allocations --cluster-secret allocations-secret --peers $peers --metrics-port 0 --log-level warning"
  cluster+=" --snapshot-every-operations 0 --snapshot-every-seconds 0"
  rm -rf "$out/node-1" "$out/node-2" && mkdir -p "$out/node-1" "$out/node-2" && : > "$out/counts"
  # shellcheck disable=SC2086 # the flags are words
  "$bin/registryd" --data-dir "$out/node-1" --node-id node-1 --port 7465 $cluster > "$out/node-1.log" 2>&1 &
  peer_pid=$!
  wait_for_port 7465 60 || { cat "$out/node-1.log" >&2; exit 1; }
  # shellcheck disable=SC2046
  "$bin/registryload" --endpoints 127.0.0.1:7465 $(compare_row_arguments batch) --warmup 0s --requests "$requests" --seed 9 > /dev/null 2> "$out/load.err"
  kill "$peer_pid"; wait "$peer_pid" 2>/dev/null || true; peer_pid=""
  # shellcheck disable=SC2086
  LD_PRELOAD="$out/malloc_count.so" MALLOC_COUNT_OUT="$out/counts" "$bin/registryd" --data-dir "$out/node-2" --node-id node-2 --port 7466 \
    $cluster > "$out/node-2.log" 2>&1 &
  node_pid=$!
  wait_for_port 7466 60 || { cat "$out/node-2.log" >&2; exit 1; }
  reading
  # shellcheck disable=SC2086
  "$bin/registryd" --data-dir "$out/node-1" --node-id node-1 --port 7465 $cluster >> "$out/node-1.log" 2>&1 &
  peer_pid=$!
  wait_for_port 7465 60 || { cat "$out/node-1.log" >&2; exit 1; }
  converge "$bin/registryctl" 127.0.0.1:7465 127.0.0.1:7466 > /dev/null || { echo "node-2 did not catch up" >&2; exit 1; }
  reading
  kill "$node_pid" "$peer_pid"; wait "$node_pid" "$peer_pid" 2>/dev/null || true; node_pid="" peer_pid=""
  per_registration registryd replicated
}

for row in batch single; do run registryd "$row" | tee -a "$out/results.tsv"; run floor "$row" | tee -a "$out/results.tsv"; done
replicated | tee -a "$out/results.tsv"

python3 - "$out/results.tsv" "$(git rev-parse --short=12 HEAD)" "$requests" "$warmup" > "$out/section.md" <<'PY'
import datetime, sys
path, revision, requests, warmup = sys.argv[1:]
rows = {}
for line in open(path):
    server, row, allocations, frees = line.split("\t")
    rows[(server, row)] = (float(allocations), float(frees))
print("## Allocations a registration\n")
print(f"`bench/allocations.sh` (`make bench-allocations`) on {datetime.date.today()} at `{revision}`: heap allocations (malloc, calloc, "
      "realloc, aligned) and frees a registration, counted by `bench/malloc_count.c` in the server's process, over "
      f"{int(requests):,} registrations after {int(warmup):,} (a fresh server, snapshots off). Counts, not times: the same in "
      "every run of one build, give or take the work batched per commit.\n")
print("| row | registryd allocations | registryd frees | floor allocations | floor frees |")
print("|---|---:|---:|---:|---:|")
for row, label in (("batch", "batches of 100, 8 connections x 16 in flight"), ("single", "single requests, 4 connections x 64 in flight")):
    r, f = rows[("registryd", row)], rows[("floor", row)]
    print(f"| {label} | {r[0]:.2f} | {r[1]:.2f} | {f[0]:.2f} | {f[1]:.2f} |")
r = rows[("registryd", "replicated")]
print(f"| an operation from a peer, applied by a node catching up from its journal (the batch row's registrations) | {r[0]:.2f} | {r[1]:.2f} | | |")
PY
cat "$out/section.md"
python3 bench/section.py allocations "$out/section.md"
