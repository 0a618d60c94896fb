#!/usr/bin/env bash
# make bench-feed: the change feed under load, on one node (issue 41's figures), in one run:
#   1. batched throughput (8 connections x 16 in flight, batches of 100, closed loop) without
#      watchers, with 10 (registryload's, which decode every event as the client library does),
#      with 10 of the floor (bench/FeedFloor: they read the stream and decode nothing), with 10 of
#      the reading floor (FeedFloor --read: they also walk every field of every event, building
#      nothing, the least a watcher that reads its events does), and beside the transport floor
#      (FeedFloor --transport: 10 loopback connections that carry the feed's bytes at 0.9 of the
#      first round's rate, with no watcher work in the node), each round on a fresh node, twice
#      through the order 0, 10, floor, read, transport, transport, read, floor, 10, 0 so that drift
#      falls on all (ratios of the medians of 4);
#   2. the feed's lag (an event's operation clock to its delivery) with 10 watchers, open loop at
#      half the maximum measured in 1 (registryload --watchers);
#   3. resident memory per idle watcher: the node's RSS with 1,000 idle watchers against the same
#      trickle of load with none.
# Prints the section (a markdown table and the commands); bench/run.sh (make bench) runs it too and
# renders it. Environment: BENCH_SECONDS (measured seconds per throughput run, default 10), FEED_OUT
# (where the section goes, default stdout), FEED_BENCHMARKS=1 (make bench-feed: also put it into
# BENCHMARKS.md, bench/section.py).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh
export PATH="/opt/swift/usr/bin:$PATH"
seconds=${BENCH_SECONDS:-10}
port=7461
out=$(mktemp -d /tmp/registry-feed.XXXXXX)
pid=""
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
  rm -rf "$out/data"
}
trap cleanup EXIT
for product in registryd registryload FeedFloor; do swift build -c release --product "$product" >&2; done
bin=$(swift build -c release --show-bin-path)
flags=$(this_machine_flags "$bin")

start() {
  kill "$pid" 2>/dev/null || true
  [ -n "$pid" ] && wait "$pid" 2>/dev/null || true
  rm -rf "$out/data" && mkdir -p "$out/data"
  # shellcheck disable=SC2086 # the flags are words
  "$bin/registryd" --data-dir "$out/data" --port "$port" --metrics-port 0 $flags > "$out/registryd.log" 2>&1 &
  pid=$!
  wait_for_port "$port" 30
}
rss() { awk '/VmRSS/ { printf "%.0f\n", $2 * 1024 }' "/proc/$pid/status"; }
ticks() { awk '{ print $14 + $15 }' "/proc/$pid/stat"; }
load() {
  local key=$1; shift
  local before; before=$(ticks)
  echo "feed: registryload --endpoints 127.0.0.1:$port $*" >&2
  "$bin/registryload" --endpoints "127.0.0.1:$port" "$@" --json "$out/$key.json" > "$out/$key.txt" 2>/dev/null || true
  cat "$out/$key.txt" >&2
  echo $(( $(ticks) - before )) > "$out/$key.ticks"
}
field() { python3 -c "import json,sys; r=json.load(open('$out/$1.json')); print(eval(sys.argv[1], {'r': r}))" "$2"; }

batched="--connections 8 --in-flight 16 --batch 100 --warmup 2s --duration ${seconds}s"
# Every round on a fresh node, so that each measures the same growth of the state from empty (with
# one node through every round, which grew to 25M devices, rounds of one kind differed by a third),
# twice through the order.
round=0
for watchers in 0 10 floor read transport transport read floor 10 0 0 10 floor read transport transport read floor 10 0; do
  round=$((round + 1))
  start
  if [ "$watchers" = floor ] || [ "$watchers" = read ] || [ "$watchers" = transport ]; then
    if [ "$watchers" = floor ]; then
      "$bin/FeedFloor" 127.0.0.1 "$port" 10 > "$out/floor-$round.bytes" &
    elif [ "$watchers" = read ]; then
      "$bin/FeedFloor" --read 127.0.0.1 "$port" 10 > "$out/read-$round.bytes" &
    else
      # 0.9 of the first round's rate, without watchers: the target's rate with them.
      "$bin/FeedFloor" --transport "$(field throughput-0-1 "int(r['throughput']['achieved_per_second'] * 0.9)")" 10 &
    fi
    floor=$!
    sleep 1
    # shellcheck disable=SC2086
    load "throughput-$watchers-$round" $batched --watchers 0 --seed "$((10 + round))"
    kill "$floor" 2>/dev/null || true
    wait "$floor" 2>/dev/null || true
  else
    # shellcheck disable=SC2086
    load "throughput-$watchers-$round" $batched --watchers "$watchers" --seed "$((10 + round))"
  fi
done
# The median rate of one kind of round (0, 10, floor, read or transport), and the mean server CPU per
# registration of those rounds (whole process, warm-up included, from its clock ticks).
median() {
  python3 -c "import glob,json,statistics; print(statistics.median([json.load(open(f))['throughput']['achieved_per_second'] for f in glob.glob('$out/throughput-$1-*.json')]))"
}
cpu_us() {
  python3 - "$out" "$1" <<'PY'
import glob, json, statistics, sys
out, kind = sys.argv[1:]
def per_registration(path):
    ticks = int(open(path[:-len(".json")] + ".ticks").read())
    r = json.load(open(path))["throughput"]
    return ticks * 10000 / max(1, r["acknowledged"] * (r["measured_seconds"] + 2) / r["measured_seconds"])
print(statistics.mean(per_registration(f) for f in glob.glob(f"{out}/throughput-{kind}-*.json")))
PY
}
without=$(median 0)
with=$(median 10)
floor_with=$(median floor)
read_with=$(median read)
transport_with=$(median transport)
cpu_without=$(cpu_us 0)
cpu_with=$(cpu_us 10)
cpu_floor=$(cpu_us floor)
cpu_read=$(cpu_us read)
half=$(python3 -c "print(int($without / 2))")
start
# shellcheck disable=SC2086
load lag --connections 8 --in-flight 16 --batch 100 --warmup 2s --duration "${seconds}s" --rate "$half" --watchers 10 --seed 20

# Memory: a fresh node, a trickle of single registrations, with no watcher and with 1,000, the
# resident memory read once the node holds that many more connections. (Not in a subshell: the
# node it starts must be the one the next start stops.)
idle() {
  local watchers=$1
  start
  sleep 2
  local before fds
  before=$(rss)
  fds=$(ls "/proc/$pid/fd" | wc -l)
  "$bin/registryload" --endpoints "127.0.0.1:$port" --connections 1 --rate 10 --duration 30s --warmup 0s --watchers "$watchers" --seed 30 \
    > "$out/idle-$watchers.txt" 2>/dev/null &
  local loader=$!
  for _ in $(seq 300); do
    [ "$(ls "/proc/$pid/fd" | wc -l)" -ge $((fds + watchers + 1)) ] && break
    sleep 0.1
  done
  sleep 2
  grown=$(( $(rss) - before ))
  kill "$loader" 2>/dev/null || true
  wait "$loader" 2>/dev/null || true
}
idle 0
grown_without=$grown
idle 1000
grown_with=$grown
per_watcher=$(( (grown_with - grown_without) / 1000 ))
kill "$pid" 2>/dev/null || true
wait "$pid" 2>/dev/null || true
pid=""

# A watcher's decoding per event, against a walk over the same bytes that reads every field and
# builds nothing, under package-benchmark (bench/Benchmarks/WatchDecoding; frames of 100 events).
swift package --allow-writing-to-package-directory benchmark --target WatchDecoding --time-units nanoseconds --format markdown \
  --no-progress > "$out/decoding.md" 2>/dev/null
read -r decode_ns walk_ns < <(python3 - "$out/decoding.md" <<'PY'
import sys
sys.path.insert(0, "bench")
from package_benchmark import p50_nanoseconds, require
names = ("ServerFrame(decoding:), a frame of 100 events", "floor: every field of a frame of 100 events read, nothing built")
figures = p50_nanoseconds(sys.argv[1])
require(figures, names, sys.argv[1], "bench/feed.sh")
print(" ".join("%.0f" % (figures[name] / 100) for name in names))
PY
)

{
  echo "## The change feed"
  echo
  echo "Issue 41's figures (\`bench/feed.sh\`, also \`make bench-feed\`) at \`$(git rev-parse --short=12 HEAD)\`: one node, batched load,"
  echo "10 watchers of every vendor in registryload's own process (their decoding shares this machine's two cores with the node"
  echo "and the load), and 1,000 idle watchers for the memory."
  echo
  echo "| figure | value |"
  echo "|---|---:|"
  printf '| batched throughput without watchers (median of 4) | %.0f/s |\n' "$without"
  printf '| batched throughput with 10 watchers (median of 4) | %.0f/s |\n' "$with"
  printf '| ratio, with / without (target at least 0.90) | %.3f |\n' "$(python3 -c "print($with / $without)")"
  printf '| floor: batched throughput with 10 watchers that decode nothing (bench/FeedFloor) | %.0f/s |\n' "$floor_with"
  printf '| floor ratio, with those / without | %.3f |\n' "$(python3 -c "print($floor_with / $without)")"
  printf '| reading floor: batched throughput with 10 watchers that walk every field of every event and build nothing (FeedFloor --read) | %.0f/s |\n' "$read_with"
  printf '| reading floor ratio, with those / without (below 0.90: no watchers that read their events, on this machine beside the node, let it keep 0.90) | %.3f |\n' "$(python3 -c "print($read_with / $without)")"
  printf '| transport floor: batched throughput beside 10 connections carrying the feed'"'"'s bytes at 0.9 of the rate without watchers, no watcher in the node (FeedFloor --transport) | %.0f/s |\n' "$transport_with"
  printf '| transport floor ratio, beside those / without (below 0.90: no node keeps 0.90 on this machine) | %.3f |\n' "$(python3 -c "print($transport_with / $without)")"
  printf '| server CPU per registration, without / with 10 watchers / with the floor'"'"'s 10 / with the reading floor'"'"'s 10 | %.2f / %.2f / %.2f / %.2f µs |\n' "$cpu_without" "$cpu_with" "$cpu_floor" "$cpu_read"
  printf '| events delivered during the lag run (10 watchers) | %s |\n' "$(field lag "r['feed']['events']")"
  printf '| feed lag p50 / p99 / max at %s/s, half the maximum | %s / %s / %s ms |\n' "$half" \
    "$(field lag "round(r['feed']['lag']['p50_ns'] / 1e6, 1)")" "$(field lag "round(r['feed']['lag']['p99_ns'] / 1e6, 1)")" \
    "$(field lag "round(r['feed']['lag']['max_ns'] / 1e6, 1)")"
  printf '| registration latency p99 in that run | %s ms |\n' "$(field lag "round(r['latency']['p99_ns'] / 1e6, 2)")"
  printf '| resident memory per idle watcher (1,000 against none, same trickle of load) | %s B |\n' "$per_watcher"
  printf '| a watcher'"'"'s decoding per event (the client library) / floor (every field read, nothing built) | %s / %s ns |\n' "$decode_ns" "$walk_ns"
  echo
  echo "Commands: \`registryload --endpoints 127.0.0.1:$port $batched --watchers 0|10\`, and \`--watchers 0\` beside"
  echo "\`FeedFloor 127.0.0.1 $port 10\`, \`FeedFloor --read 127.0.0.1 $port 10\` or \`FeedFloor --transport <0.9 of round 1's rate> 10\` (fresh nodes, twice the rounds 0, 10, floor, read, transport, transport, read, floor, 10, 0),"
  echo "then \`--rate $half --watchers 10\`, then \`--connections 1 --rate 10 --duration 8s --watchers 0|1000\` on fresh nodes"
  echo "with the RSS read 6 s in; the decoding per event from \`swift package benchmark --target WatchDecoding\` (p50 of frames of"
  echo "100 created events) (\`make bench-feed\`, bench/feed.sh)."
} > "$out/section.md"
cat "$out/section.md" > "${FEED_OUT:-/dev/stdout}"
# make bench-feed puts the section into BENCHMARKS.md; make bench renders it with the rest.
if [ "${FEED_BENCHMARKS:-0}" = 1 ]; then python3 bench/section.py feed "$out/section.md"; fi
