#!/usr/bin/env bash
# make bench-flamegraphs: where a registration's CPU goes, as flame graphs (issue 42, target 1), in
# docs/flamegraphs/: registryd under bench/compare.sh's two rows (single.svg: single requests, 4
# connections x 64 in flight; batch.svg: batches of 100, 8 connections x 16 in flight), and one node
# of a 3-node cluster under bench/cluster.sh's load (cluster-node.svg: its client registrations and
# its peers' operations side by side; target 3).
#
# Each: fresh release nodes (with this machine's flags, bench/lib.sh), registryload for
# FLAME_SECONDS (default 14) and, from its 3rd second, `perf record -g` of the node for 8 s. The
# node's CPU over the whole load (/proc), over the registrations acknowledged, is what the graph
# stands for, in µs a registration; each frame's tooltip gives its share of that
# (bench/flamegraph.py, which also prints the heaviest frames; bench/perf_classes.py prints the
# rows' samples by class). Needs perf (Debian's linux-perf).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh
export PATH="/opt/swift/usr/bin:$PATH"
seconds=${FLAME_SECONDS:-14}
command -v perf > /dev/null || scripts/apt-install.sh linux-perf
for product in registryd registryload registryctl; do swift build -c release --product "$product" >&2; done
bin=$(swift build -c release --show-bin-path)
revision=$(git rev-parse --short HEAD)
out=$(mktemp -d /tmp/registry-flame.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2> /dev/null || true; done
  rm -rf "$out"
}
trap cleanup EXIT
mkdir -p docs/flamegraphs
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# profile NAME TITLE PID ENDPOINTS LOAD-ARGUMENTS...: runs the load, records PID, draws NAME.svg.
profile() {
  local name=$1 title=$2 pid=$3 endpoints=$4; shift 4
  local before after
  before=$(ticks "$pid")
  "$bin/registryload" --endpoints "$endpoints" --duration "${seconds}s" --warmup 0s "$@" --seed 1 \
    --json "$out/$name.json" > /dev/null 2>&1 &
  local load=$!
  sleep 3
  perf record -F 1999 -g -p "$pid" -o "$out/$name.data" -- sleep 8 > /dev/null 2>&1
  wait "$load"
  after=$(ticks "$pid")
  local micros
  micros=$(python3 -c "import json,sys; n=json.load(open(sys.argv[1]))['throughput']['acknowledged']; print(($after - $before) / $(getconf CLK_TCK) * 1e6 / n)" "$out/$name.json")
  perf script -i "$out/$name.data" -F comm,tid,ip,sym,dso 2> /dev/null > "$out/$name.txt"
  echo "== $name: $title (${micros} µs of the node's CPU a registration)"
  python3 bench/flamegraph.py --title "$title, registryd at $revision, $(date -u +%F)" --microseconds "$micros" \
    "$out/$name.txt" "docs/flamegraphs/$name.svg"
  # The same samples in docs/performance.md's classes ("Where a batched registration's CPU goes").
  if [ "$name" != cluster-node ]; then python3 bench/perf_classes.py registration "$out/$name.txt"; fi
}

# start NAME PORT [FLAGS...]: a release node with its data in $out/data-NAME; its pid in $node.
start() {
  local name=$1 port=$2; shift 2
  mkdir -p "$out/data-$name"
  # shellcheck disable=SC2046 # the flags are words
  "$bin/registryd" --data-dir "$out/data-$name" --port "$port" --log-level warning $(this_machine_flags "$bin") "$@" \
    > "$out/$name.log" 2>&1 &
  node=$!
  pids+=("$node")
  wait_for_port "$port" || { cat "$out/$name.log" >&2; exit 1; }
}
stop_all() { for p in "${pids[@]}"; do kill -TERM "$p" 2> /dev/null || true; done; for p in "${pids[@]}"; do while kill -0 "$p" 2> /dev/null; do sleep 0.2; done; done; pids=(); }

for row in single batch; do
  start "$row" 7462
  # shellcheck disable=SC2046 # the arguments are words
  profile "$row" "registryd, $row row of bench/compare.sh ($(compare_row_arguments "$row"))" "$node" 127.0.0.1:7462 $(compare_row_arguments "$row")
  stop_all
done

peers="127.0.0.1:7491,127.0.0.1:7492,127.0.0.1:7493"
for i in 1 2 3; do
  start "node-$i" "749$i" --node-id "node-$i" --cluster-id flame --cluster-secret flame-secret --peers "$peers" \
    --snapshot-every-operations 0 --snapshot-every-seconds 0
  if [ "$i" = 1 ]; then first=$node; fi
done
sleep 1
profile cluster-node "node-1 of 3, bench/cluster.sh's load spread over the nodes (µs a registration of the cluster)" "$first" "$peers" \
  --connections 6 --in-flight 16 --batch 100 --workload first-install
stop_all
