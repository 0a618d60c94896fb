#!/usr/bin/env bash
# make bench-cluster (make bench runs it too): a 3-node cluster on this one machine against a
# single node, in the same run. Every write is replicated to both peers; first installs in batches
# of 100 are spread over the 3 nodes (the single node takes the same load alone).
#
# - throughput: registrations acknowledged per second, and per second until every node holds
#   every one (the cluster's sustained rate);
# - server CPU per operation: a client registration's (the single node's CPU over its
#   registrations), and a replicated operation's (the cluster's CPU beyond its client
#   registrations, over the two remote applications of each);
# - replication lag, from an acknowledgement until the registration resolves on a peer
#   (bench/lag_probe.py), while an open loop runs at half the cluster's maximum;
# - the floor of applying a replicated operation: a node killed and started again replays its
#   journal (decode and apply, one thread, no network and no journal write), CPU per operation;
# - catch-up: a node stopped, its data deleted, and started again, until it holds what the others
#   hold, with the cluster at CLUSTER_CATCHUP_DEVICES devices: first from the peers' journals, then,
#   once every node has snapshotted twice and trimmed its journal, from a peer's snapshot.
#
# Writes the section between the "cluster" markers of BENCHMARKS.md, with the commands.
# Environment: CLUSTER_REQUESTS (default 2000000), CLUSTER_CATCHUP_DEVICES (default 10000000),
# CLUSTER_SECONDS (open loop, default 20), CLUSTER_LAG_SAMPLES (default 300).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh
export PATH="/opt/swift/usr/bin:$PATH"
requests=${CLUSTER_REQUESTS:-2000000}
catchup=${CLUSTER_CATCHUP_DEVICES:-10000000}
seconds=${CLUSTER_SECONDS:-20}
samples=${CLUSTER_LAG_SAMPLES:-300}
out=$(mktemp -d /tmp/registry-cluster.XXXXXX)
declare -A pids=()
# Kills the nodes and waits for them, so that none still writes into a data directory being removed.
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$out"/data-* || true
}
trap cleanup EXIT
for product in registryd registryload registryctl; do swift build -c release --product "$product" >&2; done
bin=$(swift build -c release --show-bin-path)
peers="127.0.0.1:7491,127.0.0.1:7492,127.0.0.1:7493"

# start NAME PORT [FLAGS...]: a release node with its data in $out/data-NAME, its tables growing as
# they fill (the default: presized tables are populated by a background thread whose CPU would
# count against whichever run sized them).
start() {
  local name=$1 port=$2; shift 2
  mkdir -p "$out/data-$name"
  "$bin/registryd" --data-dir "$out/data-$name" --node-id "$name" --cluster-id bench --cluster-secret bench-secret --port "$port" \
    --snapshot-every-operations 0 --snapshot-every-seconds 0 $(this_machine_flags "$bin") "$@" >> "$out/$name.log" 2>&1 &
  pids[$name]=$!
  wait_for_port "$port" || { echo "$name did not start" >&2; cat "$out/$name.log" >&2; return 1; }
}
stop() { kill -TERM "${pids[$1]}"; wait "${pids[$1]}" || true; unset "pids[$1]"; }
# CPU seconds a process has used (user + system).
cpu() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%.3f\n", ($14 + $15) / hz }' "/proc/$1/stat"; }
rate() { python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['throughput']; print(int(r['achieved_per_second']), r['acknowledged'], r['measured_seconds'])" "$1"; }
load=(--connections 6 --in-flight 16 --batch 100 --warmup 0s --workload first-install)

echo "== single node: $requests first installs" >&2
start solo 7490
before=$(cpu "${pids[solo]}")
"$bin/registryload" --endpoints 127.0.0.1:7490 "${load[@]}" --requests "$requests" --seed 51 --json "$out/single.json" > "$out/single.txt" 2>&1
solo_cpu=$(python3 -c "print($(cpu "${pids[solo]}") - $before)")
stop solo

echo "== 3-node cluster: $requests first installs spread over the nodes" >&2
for i in 1 2 3; do start "node-$i" "749$i" --peers "$peers"; done
sleep 1
declare -A before=()
for i in 1 2 3; do before[$i]=$(cpu "${pids[node-$i]}"); done
started=$(date +%s.%N)
"$bin/registryload" --endpoints 127.0.0.1:7491,127.0.0.1:7492,127.0.0.1:7493 "${load[@]}" --requests "$requests" --seed 52 \
  --json "$out/cluster.json" > "$out/cluster.txt" 2>&1
converge "$bin/registryctl" 127.0.0.1:7491 127.0.0.1:7492 127.0.0.1:7493 > /dev/null
replicated_seconds=$(python3 -c "print($(date +%s.%N) - $started)")
cluster_cpu=0
for i in 1 2 3; do cluster_cpu=$(python3 -c "print($cluster_cpu + $(cpu "${pids[node-$i]}") - ${before[$i]})"); done

echo "== the floor of applying an operation: node-3 killed and started again replays its journal" >&2
kill -KILL "${pids[node-3]}"; wait "${pids[node-3]}" || true; unset "pids[node-3]"
lines=$(wc -l < "$out/node-3.log")
"$bin/registryd" --data-dir "$out/data-node-3" --node-id node-3 --cluster-id bench --cluster-secret bench-secret --port 7493 \
  --snapshot-every-operations 0 --snapshot-every-seconds 0 --peers "$peers" $(this_machine_flags "$bin") >> "$out/node-3.log" 2>&1 &
pids[node-3]=$!
wait_for_port 7493 120 || { echo "node-3 did not replay its journal within 120 s" >&2; exit 1; }
replay_cpu=$(cpu "${pids[node-3]}")
replayed=$(tail -n +"$((lines + 1))" "$out/node-3.log" | grep -o 'replayed=[0-9]*' | head -1 | cut -d= -f2)
converge "$bin/registryctl" 127.0.0.1:7491 127.0.0.1:7492 127.0.0.1:7493 > /dev/null

# The cluster's maximum is what it replicates, not what it acknowledges ahead of replication.
half=$(python3 -c "import json; n=json.load(open('$out/cluster.json'))['throughput']['acknowledged']; print(int(n / $replicated_seconds / 2))")
echo "== replication lag at half the cluster's maximum ($half/s)" >&2
"$bin/registryload" --endpoints 127.0.0.1:7491,127.0.0.1:7492,127.0.0.1:7493 --connections 6 --in-flight 16 --batch 100 \
  --rate "$half" --duration "${seconds}s" --warmup 2s --workload first-install --seed 53 --json "$out/open.json" > "$out/open.txt" 2>&1 &
openload=$!
sleep 3
python3 bench/lag_probe.py "$samples" 127.0.0.1:7491 127.0.0.1:7492 127.0.0.1:7493 > "$out/lag.json"
wait "$openload" || true
python3 bench/lag_probe.py 60 127.0.0.1:7491 127.0.0.1:7492 127.0.0.1:7493 > "$out/lag-idle.json"

echo "== catch-up: load to $catchup devices, then wipe node-3 and start it again" >&2
have=$(python3 -c "import json; print(json.loads(open('/dev/stdin').read())['devices'])" < <("$bin/registryctl" status --endpoint 127.0.0.1:7491 -o json))
more=$((catchup - have))
if [ "$more" -gt 0 ]; then
  "$bin/registryload" --endpoints 127.0.0.1:7491,127.0.0.1:7492 --connections 6 --in-flight 16 --batch 100 --warmup 0s \
    --workload first-install --requests "$more" --seed 54 > "$out/fill.txt" 2>&1
fi
converge "$bin/registryctl" 127.0.0.1:7491 127.0.0.1:7492 127.0.0.1:7493 > /dev/null
devices=$(python3 -c "import json; print(json.loads(open('/dev/stdin').read())['devices'])" < <("$bin/registryctl" status --endpoint 127.0.0.1:7491 -o json))
stop node-3
rm -rf "$out/data-node-3"
started=$(date +%s.%N)
start node-3 7493 --peers "$peers"
catchup_seconds=$(converge "$bin/registryctl" 127.0.0.1:7491 127.0.0.1:7492 127.0.0.1:7493)

echo "== catch-up from a snapshot: every node snapshots twice, trimming its journal; node-3 is wiped again" >&2
sleep 2  # every node learns that its peers hold everything (the retention floor), within a second
for _ in 1 2; do
  for port in 7491 7492 7493; do "$bin/registryctl" snapshot --timeout 600 --endpoint "127.0.0.1:$port" > /dev/null; done
done
first_file=$(find "$out/data-node-1" -name 'journal-*.log' | sort | head -1)
stop node-3
rm -rf "$out/data-node-3"
lines=$(wc -l < "$out/node-3.log")
started=$(date +%s.%N)
start node-3 7493 --peers "$peers"
snapshot_seconds=$(converge "$bin/registryctl" 127.0.0.1:7491 127.0.0.1:7492 127.0.0.1:7493)
installed=$(tail -n +"$((lines + 1))" "$out/node-3.log" | grep -c "installed a snapshot from a peer" || true)
echo "raw: solo_cpu=$solo_cpu cluster_cpu=$cluster_cpu replicated=${replicated_seconds}s replay_cpu=$replay_cpu replayed=$replayed devices=$devices catchup=${catchup_seconds}s snapshot_catchup=${snapshot_seconds}s installed=$installed node-1's oldest journal file: $first_file (reports in $out)" >&2
[ "$installed" -ge 1 ] || { echo "node-3 did not install a snapshot" >&2; exit 1; }

python3 - "$out" "$requests" "$solo_cpu" "$cluster_cpu" "$replicated_seconds" "$devices" "$catchup_seconds" "$half" "$seconds" \
  "$replay_cpu" "$replayed" "$snapshot_seconds" <<'PY'
import datetime, json, re, subprocess, sys
out, requests, solo_cpu, cluster_cpu, replicated_s, devices, catchup_s, half, seconds, replay_cpu, replayed, snapshot_s = sys.argv[1:]
replay_us = float(replay_cpu) / int(replayed) * 1e6
single, cluster, opened = (json.load(open(f"{out}/{n}.json")) for n in ("single", "cluster", "open"))
lag, idle = json.load(open(f"{out}/lag.json")), json.load(open(f"{out}/lag-idle.json"))
n = cluster["throughput"]["acknowledged"]
solo_rate, cluster_rate = single["throughput"]["achieved_per_second"], cluster["throughput"]["achieved_per_second"]
sustained = n / float(replicated_s)
client_us = float(solo_cpu) / single["throughput"]["acknowledged"] * 1e6
remote_us = max(0.0, float(cluster_cpu) - client_us / 1e6 * n) / (2 * n) * 1e6
revision = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True).stdout.strip()
lines = ["<!-- cluster:begin -->", "## Cluster: 3 nodes on this machine (issue 30)", "",
  f"`bench/cluster.sh` (`make bench-cluster`, also run by `make bench`) on {datetime.date.today()} at `{revision}`: "
  f"{int(requests):,} first installs in batches of 100 (closed loop, 6 connections × 16 in flight), first to one release node alone, "
  "then spread over 3 release nodes that each replicate every write to both others, all on this 2-core machine.", "",
  "| Measure | Value | Target |", "|---|---:|---:|",
  f"| single node, registrations/s | {solo_rate:,.0f} | |",
  f"| 3-node cluster, registrations/s acknowledged | {cluster_rate:,.0f} ({cluster_rate / solo_rate:.2f} of the single node) | at least 1/3, aim 1/2 |",
  f"| 3-node cluster, registrations/s until every node holds every one | {sustained:,.0f} ({sustained / solo_rate:.2f} of the single node) | |",
  f"| server CPU per client registration (single node) | {client_us:.2f} µs | |",
  f"| server CPU per replicated operation (each applied on 2 peers) | {remote_us:.2f} µs ({remote_us / client_us:.2f} of a client registration) | at most 1/4 for 1/2 |",
  f"| floor: decoding and applying one operation, as start-up replays {int(replayed):,} from the journal (one thread; no network, no journal write) | {replay_us:.2f} µs ({replay_us / client_us:.2f} of a client registration) | |",
  f"| replication lag, acknowledgement to resolving on a peer, open loop at {int(half):,}/s (half the replicated maximum) | p50 {lag['p50_ms']:.1f} ms, p99 {lag['p99_ms']:.1f} ms, max {lag['max_ms']:.1f} ms ({lag['samples']} samples) | p99 at most 100 ms |",
  f"| the same with no other load | p50 {idle['p50_ms']:.1f} ms, p99 {idle['p99_ms']:.1f} ms ({idle['samples']} samples) | |",
  f"| catch-up: a node wiped and started again, until it holds the other nodes' {int(devices):,} devices, from their journals | {float(catchup_s):.1f} s | |",
  f"| the same once every journal is trimmed: from a peer's snapshot in chunks, then the tail | {float(snapshot_s):.1f} s | |",
  "", "The open loop's own latency at half the maximum: "
  f"p50 {opened['latency']['p50_ns'] / 1e6:.2f} ms, p99 {opened['latency']['p99_ns'] / 1e6:.2f} ms over {seconds} s.", "",
  "```", "make bench-cluster   # bench/cluster.sh; CLUSTER_REQUESTS, CLUSTER_CATCHUP_DEVICES, CLUSTER_SECONDS, CLUSTER_LAG_SAMPLES", "```", "",
  "<!-- cluster:end -->"]
section = "\n".join(lines) + "\n"
text = open("BENCHMARKS.md").read()
# The Targets table's row for the cluster (bench/render.py writes it as not run).
met = sustained / solo_rate >= 1 / 3 and lag["p99_ms"] <= 100
target = (f"| 3-node cluster ≥ 1/3 of one node (aim 1/2), replication lag p99 ≤ 100 ms | "
  f"{cluster_rate / solo_rate:.2f} of one node acknowledged, {sustained / solo_rate:.2f} until every node holds every write; "
  f"lag p99 {lag['p99_ms']:.1f} ms (Cluster, below) | {'yes' if met else '**no**'} |")
text = re.sub(r"^\| 3-node cluster ≥ [^\n]*$", lambda _: target, text, flags=re.M)
if "<!-- cluster:begin -->" in text:
    text = re.sub(r"<!-- cluster:begin -->.*?<!-- cluster:end -->\n", lambda _: section, text, flags=re.S)
else:
    text = text.replace("<!-- storage:begin -->", section + "\n<!-- storage:begin -->", 1) if "<!-- storage:begin -->" in text else text + "\n" + section
open("BENCHMARKS.md", "w").write(text)
print(section)
PY
