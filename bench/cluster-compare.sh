#!/usr/bin/env bash
# make bench-cluster-compare BASE=REV: what replication costs a 3-node cluster (issue 42, target 3),
# this checkout's registryd against REV's, in one run. bench/cluster.sh measures one build's cluster
# against a single node; this one tells two builds' clusters apart.
#
# CLUSTER_COMPARE_ROUNDS times, alternating which build goes first: a fresh 3-node cluster of the
# build (peers on 127.0.0.1:7491-7493, snapshots off, tables growing), CLUSTER_COMPARE_REQUESTS
# first installs in batches of 100 spread over the 3 nodes (6 connections x 16 in flight, the same
# registryload for both builds), until every node holds every write. Reports, medians and every
# round: registrations acknowledged a second, registrations a second until every node holds every
# one (the cluster's sustained rate), the 3 nodes' CPU per registration and its user part (each
# registration is applied on its node and on both peers, and sent to both), and the operations the links sent per
# registration (`registryctl cluster status`: 2 when each crosses each link once, from its origin).
#
# Prints the section and puts it into BENCHMARKS.md (bench/section.py, "cluster-compare").
# Environment: CLUSTER_COMPARE_ROUNDS (default 4), CLUSTER_COMPARE_REQUESTS (default 1000000),
# CLUSTER_COMPARE_BASE_BIN (a folder holding a registryd built from REV, used instead of building it).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh
export PATH="/opt/swift/usr/bin:$PATH"
base=${1:-HEAD~1}
rounds=${CLUSTER_COMPARE_ROUNDS:-4}
requests=${CLUSTER_COMPARE_REQUESTS:-1000000}
out=$(mktemp -d /tmp/registry-cluster-compare.XXXXXX)
worktree="$out/base"
peers="127.0.0.1:7491,127.0.0.1:7492,127.0.0.1:7493"
declare -A pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  git worktree remove --force "$worktree" 2>/dev/null || true
  rm -rf "$out"/data-*
}
trap cleanup EXIT

for product in registryd registryload registryctl; do swift build -c release --product "$product" >&2; done
head_bin=$(swift build -c release --show-bin-path)
choose_base_registryd "$base" "$worktree" "${CLUSTER_COMPARE_BASE_BIN:-}"

# cluster_cpu: the 3 nodes' user and system CPU seconds so far, summed, as "USER SYSTEM".
cluster_cpu() {
  for i in 1 2 3; do cpu_seconds "${pids[$i]}"; done | awk '{ u += $1; s += $2 } END { printf "%.3f %.3f\n", u, s }'
}

# round NAME BINARY-DIR ROUND: one cluster run; appends "NAME ROUND acknowledged acked/s seconds user-seconds
# system-seconds sends".
round() {
  local name=$1 bin=$2 round=$3
  rm -rf "$out"/data-*
  for i in 1 2 3; do
    mkdir -p "$out/data-$i"
    # shellcheck disable=SC2046 # the flags are words
    "$bin/registryd" --data-dir "$out/data-$i" --node-id "node-$i" --cluster-id bench --cluster-secret bench-secret \
      --port "749$i" --metrics-port 0 --snapshot-every-operations 0 --snapshot-every-seconds 0 --peers "$peers" \
      $(this_machine_flags "$bin") >> "$out/$name-node-$i.log" 2>&1 &
    pids[$i]=$!
  done
  for i in 1 2 3; do wait_for_port "749$i" 300 || { echo "node-$i did not start" >&2; tail "$out/$name-node-$i.log" >&2; exit 1; }; done
  sleep 1
  local user_before system_before user_after system_after
  read -r user_before system_before < <(cluster_cpu)
  local started; started=$(date +%s.%N)
  "$head_bin/registryload" --endpoints 127.0.0.1:7491,127.0.0.1:7492,127.0.0.1:7493 --connections 6 --in-flight 16 --batch 100 \
    --warmup 0s --workload first-install --requests "$requests" --seed 52 --json "$out/load.json" > "$out/load.txt" 2>&1
  converge "$head_bin/registryctl" 127.0.0.1:7491 127.0.0.1:7492 127.0.0.1:7493 > /dev/null
  local took; took=$(python3 -c "print($(date +%s.%N) - $started)")
  read -r user_after system_after < <(cluster_cpu)
  # Operations every link sent, per operation the cluster holds.
  local sends; sends=$("$head_bin/registryctl" cluster status --endpoint 127.0.0.1:7491 -o json | python3 -c "
import json, sys
nodes = json.load(sys.stdin)['nodes']
print(sum(peer['sentOperations'] for node in nodes for peer in node['peers']) / nodes[0]['logOperations'])")
  for i in 1 2 3; do kill -TERM "${pids[$i]}"; wait "${pids[$i]}" || true; unset "pids[$i]"; done
  local acked; acked=$(python3 -c "import json; t = json.load(open('$out/load.json'))['throughput']; print(t['acknowledged'], t['achieved_per_second'])")
  echo "$name $round $acked $took $(python3 -c "print($user_after - $user_before)") $(python3 -c "print($system_after - $system_before)") $sends" \
    | tee -a "$out/results" >&2
}
for r in $(seq "$rounds"); do
  if [ $((r % 2)) = 1 ]; then round base "$base_bin" "$r"; round head "$head_bin" "$r"
  else round head "$head_bin" "$r"; round base "$base_bin" "$r"; fi
done

python3 - "$out/results" "$base_name" "$(git rev-parse --short=12 HEAD)" "$rounds" "$requests" "$(date -u +%Y-%m-%d)" > "$out/section.md" <<'PY'
import statistics, sys
path, base_name, head, rounds, requests, day = sys.argv[1:]
runs = {"base": [], "head": []}
for line in open(path):
    name, _, acknowledged, acked_rate, took, user, system, sends = line.split()
    runs[name].append((int(acknowledged), float(acked_rate), float(took), float(user) + float(system), float(sends), float(user)))
def column(name, value, form):
    values = [value(r) for r in runs[name]]
    return f"{form(statistics.median(values))} ({', '.join(form(v) for v in values)})"
whole = lambda x: f"{x:,.0f}"
micros = lambda x: f"{x:.2f} µs"
acked = lambda r: r[1]
replicated = lambda r: r[0] / r[2]
cost = lambda r: r[3] / r[0] * 1e6
user_cost = lambda r: r[5] / r[0] * 1e6
sends = lambda r: r[4]
share = lambda x: f"{x:.2f}"
print("## A 3-node cluster, against the previous revision")
print()
print(f"`bench/cluster-compare.sh` (`make bench-cluster-compare`) on {day}: registryd at `{head}` against {base_name}. {rounds} times")
print(f"for each build, alternating which goes first, a fresh 3-node cluster on this machine took {int(requests):,} first installs in")
print("batches of 100 spread over its nodes (6 connections × 16 in flight), until every node held every one. CPU is the 3 nodes'")
print("together, per registration: each is applied on its node and on both peers, and sent to both. Sends are the operations")
print("every link sent, per operation the cluster holds (`registryctl cluster status`): 2 when each crosses each link once, from")
print("its origin. The user part of the CPU is the program's own; the system part is mostly the kernel zeroing memory new to")
print("the processes, which this VM charges for by its history (docs/performance.md), and spreads the rounds most. Medians,")
print("every round in brackets.")
print()
print("| build | acknowledged a second | until every node holds every one, a second | the cluster's CPU a registration | of it user time | sends a registration |")
print("|---|---:|---:|---:|---:|---:|")
for label, name in (("base", "base"), ("this revision", "head")):
    print(f"| {label} | {column(name, acked, whole)} | {column(name, replicated, whole)} | {column(name, cost, micros)} "
          f"| {column(name, user_cost, micros)} | {column(name, sends, share)} |")
print()
def ratio(value): return statistics.median(value(r) for r in runs["head"]) / statistics.median(value(r) for r in runs["base"])
print(f"This revision / base: **{ratio(cost):.3f}** of the CPU a registration (**{ratio(user_cost):.3f}** of its user time), "
      f"**{ratio(replicated):.3f}** of the rate until every node holds every write.")
PY
cat "$out/section.md"
python3 bench/section.py cluster-compare "$out/section.md" > /dev/null
