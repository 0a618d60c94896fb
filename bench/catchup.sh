#!/usr/bin/env bash
# make bench-catchup BASE=REV: what another node's operation costs the node that applies it (issue
# 42, target 3: at most half a client registration), this checkout's registryd against REV's on the
# same operations, in one run.
#
# One data directory: node-1 of a two-node cluster takes CATCHUP_SECONDS of batched first installs
# (8 connections x 16 in flight, batches of 100) while node-2 is down, then stops. Its CPU over the
# load, per registration, is what a client registration costs (this checkout's build).
# Then, CATCHUP_ROUNDS times, alternating which build goes first, both nodes of one build start:
# node-1 on a fresh copy of that directory, node-2 on an empty one, which takes every operation from
# node-1's journal, until the two version vectors are the same. Node-2's CPU per operation is what a
# replicated operation costs; operations over seconds (from node-2's start) is the catch-up's rate.
# Reports medians, and every round, and each median's user and system parts: the system part is
# mostly this VM's price for memory new to the process, the user part the program's own.
#
# The floor, in the same run: bench/registration_floor.c takes the same load, and then, once a round,
# its replica mode takes every record of that journal from its send mode. Its CPU per record over its
# CPU per client registration says whether this machine lets a node reach the target's ratio at all.
#
# Prints the section and puts it into BENCHMARKS.md (bench/section.py, "catchup").
# Environment: CATCHUP_SECONDS (default 8), CATCHUP_ROUNDS (default 3), CATCHUP_BASE_BIN (a folder
# holding a registryd built from REV, used instead of building it again).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh
export PATH="/opt/swift/usr/bin:$PATH"
base=${1:-HEAD~1}
seconds=${CATCHUP_SECONDS:-8}
rounds=${CATCHUP_ROUNDS:-3}
out=$(mktemp -d /tmp/registry-catchup.XXXXXX)
worktree="$out/base"
peers="127.0.0.1:7481,127.0.0.1:7482"
declare -A pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  git worktree remove --force "$worktree" 2>/dev/null || true
  rm -rf "$out"/data-* "$out/loaded" "$out"/floor-*journal
}
trap cleanup EXIT

for product in registryd registryload registryctl; do swift build -c release --product "$product" >&2; done
head_bin=$(swift build -c release --show-bin-path)
choose_base_registryd "$base" "$worktree" "${CATCHUP_BASE_BIN:-}"
flags=$(this_machine_flags "$head_bin")

# start NAME BINARY-DIR DATA-DIR: node NAME (node-1 on port 7481, node-2 on 7482) of the two-node cluster.
start() {
  local name=$1 bin=$2 data=$3 port=748${1#node-}
  mkdir -p "$data"
  # shellcheck disable=SC2086 # the flags are words
  "$bin/registryd" --data-dir "$data" --node-id "$name" --cluster-id bench --cluster-secret bench-secret --port "$port" \
    --metrics-port 0 --snapshot-every-operations 0 --snapshot-every-seconds 0 --peers "$peers" $flags >> "$out/$name.log" 2>&1 &
  pids[$name]=$!
  wait_for_port "$port" 300 || { echo "$name did not start" >&2; tail "$out/$name.log" >&2; exit 1; }
}
stop() { kill -TERM "${pids[$1]}"; wait "${pids[$1]}" || true; unset "pids[$1]"; }
# cpu PID: the process's user and system CPU seconds so far, as "USER,SYSTEM" (cpu_seconds, bench/lib.sh).
cpu() { cpu_seconds "$1" | tr ' ' ','; }
# spent BEFORE AFTER: the user and system CPU seconds between two readings of cpu, as "USER,SYSTEM".
spent() { python3 -c "b, a = ($1), ($2); print('%.3f,%.3f' % (a[0] - b[0], a[1] - b[1]))"; }
# vector PORT: the node's version vector, as one line of JSON.
vector() {
  "$head_bin/registryctl" status --endpoint "127.0.0.1:$1" -o json 2>/dev/null \
    | python3 -c "import json, sys; print(json.dumps(json.load(sys.stdin)['versionVector'], sort_keys=True))" 2>/dev/null || echo none
}

echo "== the operations: $seconds s of batched first installs on node-1, node-2 down" >&2
start node-1 "$head_bin" "$out/loaded"
before=$(cpu "${pids[node-1]}")
"$head_bin/registryload" --endpoints 127.0.0.1:7481 --connections 8 --in-flight 16 --batch 100 --warmup 0s \
  --duration "${seconds}s" --seed 1 --json "$out/load.json" > "$out/load.txt" 2>&1 || true
client_cpu=$(spent "$before" "$(cpu "${pids[node-1]}")")
stop node-1
registered=$(python3 -c "import json; print(json.load(open('$out/load.json'))['throughput']['acknowledged'])")

echo "== the floor: the same load on bench/registration_floor.c, then its replica catching up" >&2
build_registration_floor "$out/registration_floor"
"$out/registration_floor" 7483 "$out/floor-journal" > "$out/floor.log" 2>&1 &
pids[floor]=$!
wait_for_port 7483 || { echo "the floor did not start" >&2; cat "$out/floor.log" >&2; exit 1; }
before=$(cpu "${pids[floor]}")
"$head_bin/registryload" --endpoints 127.0.0.1:7483 --connections 8 --in-flight 16 --batch 100 --warmup 0s \
  --duration "${seconds}s" --seed 1 --json "$out/floor-load.json" > "$out/floor-load.txt" 2>&1 || true
floor_client_cpu=$(spent "$before" "$(cpu "${pids[floor]}")")
stop floor
floor_registered=$(python3 -c "import json; print(json.load(open('$out/floor-load.json'))['throughput']['acknowledged'])")
# floor_round ROUND: the floor's replica takes every record of the floor's journal from its sender;
# appends "floor ROUND operations seconds user-seconds,system-seconds" to results.
floor_round() {
  rm -f "$out/floor-replica-journal"
  local started; started=$(date +%s.%N)
  "$out/registration_floor" replica 7484 "$out/floor-replica-journal" > "$out/floor-replica.txt" 2>> "$out/floor.log" &
  pids[floor-replica]=$!
  "$out/registration_floor" send "$out/floor-journal" 7484 2>> "$out/floor.log" \
    || { echo "the floor's sender failed" >&2; cat "$out/floor.log" >&2; exit 1; }
  wait "${pids[floor-replica]}" || { echo "the floor's replica failed" >&2; cat "$out/floor.log" "$out/floor-replica.txt" >&2; exit 1; }
  unset "pids[floor-replica]"
  local took; took=$(python3 -c "print($(date +%s.%N) - $started)")
  read -r _ operations _ _ _ user _ system < "$out/floor-replica.txt"
  echo "floor $1 $operations $took $user,$system" | tee -a "$out/results" >&2
}

# round NAME BINARY-DIR ROUND: one catch-up; appends "NAME ROUND operations seconds user-seconds,system-seconds"
# to results.
round() {
  local name=$1 bin=$2 round=$3
  rm -rf "$out/data-node-1" "$out/data-node-2" && cp -r "$out/loaded" "$out/data-node-1"
  sync
  start node-1 "$bin" "$out/data-node-1"
  local started; started=$(date +%s.%N)
  start node-2 "$bin" "$out/data-node-2"
  local deadline=$((SECONDS + 600))
  # Node-2 adds an operation of its own (joining), which node-1 takes too: caught up is the same
  # vector on both.
  until [ "$(vector 7482)" = "$(vector 7481)" ]; do
    [ $SECONDS -lt $deadline ] || { echo "node-2 did not catch up within 600 s" >&2; exit 1; }
    sleep 0.1
  done
  local took; took=$(python3 -c "print($(date +%s.%N) - $started)")
  local used; used=$(cpu "${pids[node-2]}")
  stop node-2; stop node-1
  echo "$name $round $registered $took $used" | tee -a "$out/results" >&2
}
for r in $(seq "$rounds"); do
  if [ $((r % 2)) = 1 ]; then round base "$base_bin" "$r"; round head "$head_bin" "$r"
  else round head "$head_bin" "$r"; round base "$base_bin" "$r"; fi
  floor_round "$r"
done

python3 - "$out/results" "$base_name" "$(git rev-parse --short=12 HEAD)" "$seconds" "$rounds" "$(date -u +%Y-%m-%d)" \
  "$client_cpu" "$registered" "$floor_client_cpu" "$floor_registered" > "$out/section.md" <<'PY'
import statistics, sys
path, base_name, head, seconds, rounds, day, client_cpu, registered, floor_cpu, floor_registered = sys.argv[1:]
def per_operation(cpu, operations):
    """(total, user, system) microseconds an operation, from "USER,SYSTEM" seconds."""
    user, system = (float(x) / int(operations) * 1e6 for x in cpu.split(","))
    return user + system, user, system
client = per_operation(client_cpu, registered)
floor_client = per_operation(floor_cpu, floor_registered)
runs = {"base": [], "head": [], "floor": []}
for line in open(path):
    name, _, operations, took, cpu = line.split()
    runs[name].append((int(operations), float(took), per_operation(cpu, operations)))
def rate(run): return run[0] / run[1]
def row(label, name, client=client):
    rates = [rate(r) for r in runs[name]]
    costs, users, systems = ([r[2][kind] for r in runs[name]] for kind in range(3))
    return (f"| {label} | {statistics.median(rates):,.0f} ({', '.join(f'{x:,.0f}' for x in rates)}) "
            f"| {statistics.median(costs):.2f} µs ({', '.join(f'{x:.2f}' for x in costs)}) "
            f"| {statistics.median(users):.2f} / {statistics.median(systems):.2f} µs "
            f"| {statistics.median(costs) / client[0]:.2f} | {statistics.median(users) / client[1]:.2f} |")
ratio = statistics.median(rate(r) for r in runs["head"]) / statistics.median(rate(r) for r in runs["base"])
print("## Catching up from a peer")
print()
print(f"`bench/catchup.sh` (`make bench-catchup`) on {day}: registryd at `{head}` against {base_name}. Node-1 of a")
print(f"two-node cluster took {int(registered):,} first installs ({seconds} s, batches of 100) with node-2 down; then, {rounds} times for")
print("each build, alternating which goes first, node-1 starts on a copy of that directory and node-2 on an empty one,")
print("until node-2 holds what node-1 holds. Node-2's process CPU per operation is what a replicated operation costs.")
print()
print("| build | operations/s, median (each round) | node-2's CPU per operation (each round) | user / system, medians | / a client registration | user time / a client registration's |")
print("|---|---:|---:|---:|---:|---:|")
print(row("base", "base"))
print(row("this revision", "head"))
print(row("floor (`bench/registration_floor.c`)", "floor", floor_client))
print()
print(f"A client registration cost node-1 {client[0]:.2f} µs of CPU during the load (this revision; user {client[1]:.2f}, system")
print(f"{client[2]:.2f}). Ratio of the catch-up rates, this revision / base: **{ratio:.3f}**. Target (issue 42): a replicated")
print("operation at most half a client registration.")
print()
print(f"The floor row is the least a node can spend, in the same run: `registration_floor` took {int(floor_registered):,} registrations")
print(f"of the same load at {floor_client[0]:.2f} µs of CPU each (user {floor_client[1]:.2f}, system {floor_client[2]:.2f}), and its `replica` mode")
print("took every record of that journal from its `send` mode, sized once for them (the comment at the top of the file says")
print("what each does); its ratios divide by the floor's own client registration. System time is mostly the kernel zeroing")
print("memory new to the process (index tables, page cache for the journal), which this VM charges far more for than an")
print("ordinary server does (docs/performance.md, \"The least a replicated operation can cost\"): the user column is the")
print("part that is the program's own.")
PY
cat "$out/section.md"
python3 bench/section.py catchup "$out/section.md" > /dev/null
