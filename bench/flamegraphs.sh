#!/usr/bin/env bash
# make bench-flamegraphs: where a registration's CPU goes, as flame graphs (issue 42, target 1), in
# docs/flamegraphs/: registryd under bench/compare.sh's two rows (single.svg: single requests, 4
# connections x 64 in flight; batch.svg: batches of 100, 8 connections x 16 in flight), and one node
# of a 3-node cluster under bench/cluster.sh's load (cluster-node.svg: its client registrations and
# its peers' operations side by side; target 3).
#
# Each: fresh release nodes (with this machine's flags, bench/lib.sh), registryload for
# FLAME_SECONDS (default 14, at least 8) and `perf record -g` of the node (and the snapshot children
# it forks) for all but the first 3 and last 2 of them. The node's CPU over the whole load, its
# children's included (node_ticks, bench/lib.sh), over the registrations acknowledged, is what the
# graph stands for, in µs a registration; each frame's tooltip gives its share of that
# (bench/flamegraph.py, which also prints the threads and the heaviest frames; bench/perf_classes.py
# prints the rows' samples by class). The cluster node's µs are over the cluster's registrations.
# Needs perf (Debian's linux-perf, installed when missing). The perf data, reports and logs stay in
# the folder printed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh
export PATH="/opt/swift/usr/bin:$PATH"
seconds=${FLAME_SECONDS:-14}
[ "$seconds" -ge 8 ] || { echo "FLAME_SECONDS must be at least 8" >&2; exit 2; }
command -v perf > /dev/null || scripts/apt-install.sh linux-perf
for product in registryd registryload; do swift build -c release --product "$product" >&2; done
bin=$(swift build -c release --show-bin-path)
revision=$(git describe --always --dirty)
out=$(mktemp -d /tmp/registry-flame.XXXXXX)
pids=()
load=""
# Ends whatever still runs (the nodes, the load) and waits for it, so that no node still writes
# into a data directory being removed; keeps the reports in $out, and names it after a failure.
cleanup() {
  local status=$?
  [ "$status" = 0 ] || echo "failed; perf data, reports and logs: $out" >&2
  [ -n "$load" ] && kill -9 "$load" 2> /dev/null || true
  for p in "${pids[@]}"; do kill -9 "$p" 2> /dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2> /dev/null || true; done
  rm -rf "$out"/data-*
}
trap cleanup EXIT
mkdir -p docs/flamegraphs

# profile NAME TITLE PID ENDPOINTS LOAD-ARGUMENTS...: runs the load, records PID, draws NAME.svg.
profile() {
  local name=$1 title=$2 pid=$3 endpoints=$4; shift 4
  local before after micros
  read -r before _ <<< "$(node_ticks "$pid")"
  "$bin/registryload" --endpoints "$endpoints" --duration "${seconds}s" --warmup 0s "$@" --seed 1 \
    --json "$out/$name.json" > "$out/$name.load.log" 2>&1 &
  load=$!
  sleep 3
  perf record -F 1999 -g -p "$pid" -o "$out/$name.data" -- sleep $((seconds - 5)) > "$out/$name.perf.log" 2>&1 ||
    { cat "$out/$name.perf.log" >&2; exit 1; }
  wait "$load" || { echo "registryload failed:" >&2; cat "$out/$name.load.log" >&2; exit 1; }
  load=""
  read -r after _ <<< "$(node_ticks "$pid")"
  micros=$(python3 - "$out/$name.json" "$before" "$after" "$(getconf CLK_TCK)" <<'PY'
import json, sys
acknowledged = json.load(open(sys.argv[1]))["throughput"]["acknowledged"]
before, after, hz = map(int, sys.argv[2:])
if acknowledged == 0:
    sys.exit("no registration was acknowledged")
print(f"{(after - before) / hz * 1e6 / acknowledged:.3f}")
PY
  )
  perf script -i "$out/$name.data" -F comm,pid,tid,ip,sym,dso 2> "$out/$name.script.log" > "$out/$name.txt" ||
    { cat "$out/$name.script.log" >&2; exit 1; }
  echo "== $name: $title ($micros µs of the node's CPU a registration)"
  python3 bench/flamegraph.py --title "$title, registryd at $revision, $(date -u +%F)" --pid "$pid" --microseconds "$micros" \
    "$out/$name.txt" "docs/flamegraphs/$name.svg"
  # The same samples in docs/performance.md's classes ("Where a batched registration's CPU goes").
  if [ "$name" != cluster-node ]; then python3 bench/perf_classes.py registration "$out/$name.txt"; fi
}

# start NAME PORT [FLAGS...]: a release node with its data in $out/data-NAME; its pid in $node.
# Refuses a port something already listens on: the load would go there, not to this node.
start() {
  local name=$1 port=$2; shift 2
  if (exec 3<> "/dev/tcp/127.0.0.1/$port") 2> /dev/null; then echo "port $port is in use" >&2; exit 1; fi
  mkdir -p "$out/data-$name"
  # shellcheck disable=SC2046 # the flags are words
  "$bin/registryd" --data-dir "$out/data-$name" --port "$port" --log-level warning $(this_machine_flags "$bin") "$@" \
    > "$out/$name.log" 2>&1 &
  node=$!
  pids+=("$node")
  wait_for_port "$port" || { cat "$out/$name.log" >&2; exit 1; }
}
# Stops every node (a clean stop takes a snapshot) and waits for it; a node still running 60 s
# after the request is killed, and said to be.
stop_all() {
  local p deadline=$((SECONDS + 60))
  for p in "${pids[@]}"; do kill -TERM "$p" 2> /dev/null || true; done
  for p in "${pids[@]}"; do
    while kill -0 "$p" 2> /dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.1; done
    if kill -0 "$p" 2> /dev/null; then
      echo "node $p did not stop within 60 s; killed" >&2
      kill -9 "$p"
    fi
    wait "$p" 2> /dev/null || true
  done
  pids=()
}

# Ports no other bench script uses.
for row in single batch; do
  start "$row" 7473
  # shellcheck disable=SC2046 # the arguments are words
  profile "$row" "registryd, $row row of bench/compare.sh ($(compare_row_arguments "$row"))" "$node" 127.0.0.1:7473 $(compare_row_arguments "$row")
  stop_all
done

peers="127.0.0.1:7476,127.0.0.1:7477,127.0.0.1:7478"
for i in 1 2 3; do
  start "node-$i" "747$((i + 5))" --node-id "node-$i" --cluster-id flame --cluster-secret flame-secret --peers "$peers" \
    --snapshot-every-operations 0 --snapshot-every-seconds 0
  if [ "$i" = 1 ]; then first=$node; fi
done
sleep 1
profile cluster-node "node-1 of 3 under bench/cluster.sh's load, spread over the nodes (µs a registration of the cluster)" \
  "$first" "$peers" --connections 6 --in-flight 16 --batch 100 --workload first-install
stop_all
echo "perf data, reports and logs: $out"
