#!/usr/bin/env bash
# make bench-storage: what the journal-and-snapshots storage costs and gives, at 10M devices, on
# one release node: resident memory per device, a snapshot taken while the node serves an open
# loop at half its batched maximum (the snapshot's time, the memory it adds, the fork's pause, and
# each second's p99 without a snapshot and during one), the clean stop (which snapshots what is
# new), and the restart: first with the journal kept for the older of the two snapshots (what the
# open loops logged), then from a snapshot and its tail alone, beside the floor for a restart
# measured in the same run (bench/restart_floor.c: reading the snapshot's bytes, and writing that
# many devices and claims into presized tables, the claims in their table's order as the snapshot
# lists them, nothing else). Last, a growing node (first
# installs at 70% of the maximum) without a snapshot, during one, and while the snapshot's floor
# (bench/snapshot_floor.c: writing as many bytes as registryd does, nothing else) runs (issue 42's
# target 4).
#
# Writes the section between the "storage" markers of BENCHMARKS.md, with the commands.
# Environment: STORAGE_DEVICES (default 10000000), STORAGE_SECONDS (open-loop seconds, default 15),
# STORAGE_BIN (below).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh
export PATH="/opt/swift/usr/bin:$PATH"
devices=${STORAGE_DEVICES:-10000000}
seconds=${STORAGE_SECONDS:-15}
out=$(mktemp -d /tmp/registry-storage.XXXXXX)
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$out/data"; return 0; }
trap cleanup EXIT
# STORAGE_BIN: a directory holding another build's registryd, registryload and registryctl, to
# measure it the same way (the section then names that directory instead of this revision).
if [ -n "${STORAGE_BIN:-}" ]; then
  bin=$STORAGE_BIN
else
  for product in registryd registryload registryctl; do swift build -c release --product "$product" >&2; done
  bin=$(swift build -c release --show-bin-path)
fi
mkdir -p "$out/data"
node_args="--data-dir $out/data --port 7480 --log-level info --expected-devices $((devices * 11 / 10)) --snapshot-every-operations 0"
start() { # shellcheck disable=SC2086
  "$bin/registryd" $node_args $(this_machine_flags "$bin") > "$out/registryd.log" 2>&1 & pid=$!
  for _ in $(seq 1200); do (exec 3<>/dev/tcp/127.0.0.1/7480) 2>/dev/null && return 0; sleep 0.1; done
  echo "registryd did not start" >&2; cat "$out/registryd.log" >&2; return 1; }
rss() { awk '/VmRSS/ { printf "%.0f\n", $2 * 1024 }' "/proc/$pid/status"; }
p99() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['latency']['p99_ns'] / 1e6)" "$1"; }
rate() { python3 -c "import json,sys; print(int(json.load(open(sys.argv[1]))['throughput']['achieved_per_second']))" "$1"; }

start
echo "== loading $devices devices" >&2
"$bin/registryload" --endpoints 127.0.0.1:7480 --connections 8 --in-flight 16 --batch 100 --requests "$devices" --warmup 0s \
  --seed 41 --json "$out/load.json" > /dev/null 2>&1
maximum=$(rate "$out/load.json"); half=$((maximum / 2))
sleep 5
memory=$(rss)
# snapshot_under_load NAME SECONDS OPEN-LOOP-ARGUMENTS: an open loop of SECONDS with those
# arguments, with `registryctl snapshot` from its 4th second; writes NAME.json (registryload's
# report), NAME.window (the snapshot's start and end, seconds from the load's start),
# NAME.snapshot.json, and NAME.used (the machine's memory in use, kB, every 50 ms while the
# snapshot runs, the first line just before it).
snapshot_under_load() {
  local name=$1 duration=$2; shift 2
  # shellcheck disable=SC2068 # the arguments are words
  "$bin/registryload" $@ --duration "${duration}s" --json "$out/$name.json" > /dev/null 2>&1 &
  local load=$! load_started
  load_started=$(date +%s.%N)
  sleep 4
  memory_in_use > "$out/$name.used"
  ( while true; do memory_in_use >> "$out/$name.used"; sleep 0.05; done ) &
  local sampler=$! started
  started=$(date +%s.%N)
  "${take:-take_snapshot}" "$out/$name.snapshot.json"
  echo "$(python3 -c "print($started - $load_started, $(date +%s.%N) - $load_started)")" > "$out/$name.window"
  kill "$sampler"; wait "$sampler" 2>/dev/null || true
  # A run below its rate exits non-zero; its report says so, and is what is measured.
  wait "$load" || true
}
# take_snapshot REPORT: registryctl snapshot, its JSON answer into REPORT.
take_snapshot() { "$bin/registryctl" snapshot --endpoint 127.0.0.1:7480 --timeout 900 -o json > "$1"; }
# take_floor REPORT: the snapshot's floor (bench/snapshot_floor.c) writing $floor_bytes into the
# node's data directory, as registryd writes a snapshot; its line into REPORT.
take_floor() { "$out/snapshot_floor" "$floor_bytes" "$out/data/floor-write.bin" > "$1"; }
# memory_in_use: the machine's memory in use (MemTotal - MemAvailable), kB.
memory_in_use() { awk '/^MemTotal:/ {t = $2} /^MemAvailable:/ {a = $2} END {print t - a}' /proc/meminfo; }

echo "== open loop at $half/s without a snapshot, then with one" >&2
# Returning devices (apps seen again), so that the node keeps its size while the snapshot runs.
open="--endpoints 127.0.0.1:7480 --connections 8 --in-flight 16 --batch 100 --rate $half --warmup 2s --workload returning"
# shellcheck disable=SC2086
"$bin/registryload" $open --duration "${seconds}s" --seed 42 --json "$out/quiet.json" > /dev/null 2>&1 || true
snapshot_under_load during $((seconds * 6)) $open --seed 43
snapshot_seconds=$(python3 -c "a, b = open('$out/during.window').read().split(); print(f'{float(b) - float(a):.1f}')")
snapshot_bytes=$(python3 -c "import json; print(json.load(open('$out/during.snapshot.json'))['bytes'])")
peak=$(awk '/VmHWM/ { printf "%.0f\n", $2 * 1024 }' "/proc/$pid/status")
echo "== stop and restart" >&2
started=$(date +%s.%N); kill -TERM "$pid"; wait "$pid" || true; pid=""
stop_seconds=$(python3 -c "print(f'{$(date +%s.%N) - $started:.1f}')")
# three_restarts: the seconds until the node accepts connections, over three restarts.
three_restarts() {
  local times="" started
  for _ in 1 2 3; do
    started=$(date +%s.%N); start
    times="$times $(python3 -c "print(f'{$(date +%s.%N) - $started:.1f}')")"
    kill -TERM "$pid"; wait "$pid" || true; pid=""
  done
  echo "$times"
}
restarts=$(three_restarts)
registered=$(grep -o 'devices=[0-9]*' "$out/registryd.log" | tail -1 | cut -d= -f2)
# Those restarts also read and check the journal kept for the older of the two snapshots (what the
# open loops logged). With both snapshots recent, only the snapshot and its tail remain: one more
# registration and snapshot, after which the journal before the clean stop's snapshot goes.
echo "== restart with only a short journal kept" >&2
start
"$bin/registryctl" register --endpoint 127.0.0.1:7480 --bundle com.storage.bench --idfv 5B1F6E2A-8C0D-4E7B-9A31-2F6C8D4E0B17 > /dev/null
"$bin/registryctl" snapshot --endpoint 127.0.0.1:7480 --timeout 900 > /dev/null
kill -TERM "$pid"; wait "$pid" || true; pid=""
kept_journal=$(find "$out/data" -name 'journal-*.log' -printf '%s\n' | awk '{ s += $1 } END { printf "%.0f\n", s }')
short_restarts=$(three_restarts)
echo "== the restart's floor" >&2
cc -O2 -o "$out/restart_floor" bench/restart_floor.c
newest=$(find "$out/data" -name 'snapshot-*.snap' | sort | tail -1)
floors=""
for _ in 1 2 3; do floors="$floors $("$out/restart_floor" --claims-in-table-order "$devices" "$newest" | awk '{ print $1 "," $2 }')"; done
# A growing node: first installs at 70% of the maximum, without a snapshot and then with one, on
# a node sized for all it will hold (so that no index grows into a new table meanwhile: that tail
# is another measure's), restarted from the short journal's directory.
echo "== growing: first installs at 70% of the maximum, without a snapshot, then with one" >&2
seventy=$((maximum * 7 / 10))
# Each run below with a snapshot or a floor: long enough for a snapshot half as long again as the
# one above, the node being bigger. The node is sized for the four runs and their 2 s warm-ups.
during_seconds=$(python3 -c "print(int(4 + float('$snapshot_seconds') * 1.5 + 4))")
node_args="--data-dir $out/data --port 7480 --log-level info --expected-devices $((devices + seventy * (seconds + 2 + 3 * (during_seconds + 2)) * 11 / 10)) --snapshot-every-operations 0"
start
grow="--endpoints 127.0.0.1:7480 --connections 8 --in-flight 16 --batch 100 --rate $seventy --warmup 2s"
# shellcheck disable=SC2086
"$bin/registryload" $grow --duration "${seconds}s" --seed 44 --json "$out/growing-quiet.json" > /dev/null 2>&1 || true
snapshot_under_load growing "$during_seconds" $grow --seed 45
# The floor for that snapshot, in the same run: the same load while bench/snapshot_floor.c writes
# as many bytes as the snapshot had, as registryd writes them, and does nothing else.
cc -O2 -o "$out/snapshot_floor" bench/snapshot_floor.c
floor_bytes=$(python3 -c "import json; print(json.load(open('$out/growing.snapshot.json'))['bytes'])")
take=take_floor snapshot_under_load growing-floor "$during_seconds" $grow --seed 46
# And the same bytes written through the page cache, synced every 8 MiB (how registryd wrote its
# snapshots before ChunkedFileWriter): what writing past the cache buys.
BUFFERED=1 take=take_floor snapshot_under_load growing-floor-cached "$during_seconds" $grow --seed 47
kill -TERM "$pid"; wait "$pid" || true; pid=""
forks=$(grep -o 'fork_micros=[0-9]*' "$out/registryd.log" | cut -d= -f2 | tr '\n' ' ')

echo "raw: maximum=$maximum half=$half memory=$memory peak=$peak snapshot=${snapshot_seconds}s/$snapshot_bytes B stop=${stop_seconds}s restarts=$restarts short_restarts=$short_restarts kept_journal=$kept_journal devices=$registered floors=$floors (reports in $out)" >&2

python3 - "$out" "$devices" "$maximum" "$half" "$memory" "$peak" "$snapshot_seconds" "$snapshot_bytes" "$stop_seconds" "$restarts" "$registered" "$seconds" "$floors" "$short_restarts" "$kept_journal" "$seventy" "$forks" <<'PY'
import datetime, json, os, re, statistics, subprocess, sys
out, devices, maximum, half, memory, peak, snap_s, snap_b, stop_s, restarts, registered, seconds, floors, short, kept, seventy, forks = sys.argv[1:]
floor_runs = [dict(pair.split("=") for pair in run.split(",")) for run in floors.split()]
floor_read = sorted(float(run["read_s"]) for run in floor_runs)[len(floor_runs) // 2]
floor_index = sorted(float(run["index_s"]) for run in floor_runs)[len(floor_runs) // 2]
def run(name):
    r = json.load(open(f"{out}/{name}.json"))
    return r["throughput"]["achieved_per_second"], r["latency"]["p99_ns"] / 1e6, r["latency"]["p50_ns"] / 1e6
quiet, during = run("quiet"), run("during")
def seconds_p99(name, window=None):
    """The per-second p99s (ms) of a run, only the seconds overlapping the window when given."""
    r = json.load(open(f"{out}/{name}.json"))
    got = []
    for second in (r.get("per_second") or {}).get("seconds", []):
        end = second["elapsed_s"]
        if window is None or (end > window[0] and end - 1 < window[1]):
            got.append(second["p99_ns"] / 1e6)
    return got
def window(name):
    return tuple(float(x) for x in open(f"{out}/{name}.window").read().split())
def added(name):
    used = [int(x) for x in open(f"{out}/{name}.used").read().split()]
    return (max(used) - used[0]) * 1024
def summary(values):
    return f"median {statistics.median(values):.2f} ms, worst {max(values):.2f} ms, over {len(values)} s" if values else "none"
fork_list = [int(x) / 1000 for x in forks.split()]
returning_quiet, returning_during = seconds_p99("quiet"), seconds_p99("during", window("during"))
growing_quiet, growing_during = seconds_p99("growing-quiet"), seconds_p99("growing", window("growing"))
grow_q, grow_d = run("growing-quiet"), run("growing")
grow_window = window("growing")
floor_during, floor_report = seconds_p99("growing-floor", window("growing-floor")), open(f"{out}/growing-floor.snapshot.json").read().split()
floor_window = window("growing-floor")
cached_during, cached_report = seconds_p99("growing-floor-cached", window("growing-floor-cached")), open(f"{out}/growing-floor-cached.snapshot.json").read().split()
cached_window = window("growing-floor-cached")
ratio = lambda during, quiet: max(during) / max(quiet) if during and quiet else float("nan")
revision = os.environ.get("STORAGE_BIN") or subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True).stdout.strip()
restart_list = [float(x) for x in restarts.split()]
lines = ["<!-- storage:begin -->", "## Storage: snapshots and restart (issue 29)", "",
  f"`bench/storage.sh` (`make bench-storage`) on {datetime.date.today()} at `{revision}`: one release node sized for "
  f"{int(devices) * 11 // 10:,} devices, {int(devices):,} first installs in batches of 100 (closed loop, {int(maximum):,}/s), then open loops of "
  f"batches of 100 at half that ({int(half):,}/s, returning devices, so the node keeps its size): {seconds} s without a snapshot, then {int(seconds) * 6} s with `registryctl snapshot` from its 4th second. "
  f"Then, restarted on a node sized for all it will hold, the same for first installs at 70% of the maximum: a node growing beyond 10M while the snapshot runs.", "",
  "| Measure | Value | Target |", "|---|---:|---:|",
  f"| resident memory at {int(registered or devices):,} devices | {int(memory) / int(devices):.0f} B/device | at most 200 |",
  f"| snapshot of {int(devices):,} devices while serving at {int(half):,}/s | {float(snap_s):.1f} s, {int(snap_b) / 2**30:.2f} GiB | |",
  f"| peak resident memory of the node (a forked child's pages are shared with it) | {int(peak) / 2**30:.2f} GiB | |",
  f"| the machine's memory the snapshot added (sampled every 50 ms) | {added('during') / 2**30:.2f} GiB | no second state |",
  f"| the engine's lock held for each fork (this run's snapshots, in order) | {', '.join(f'{x:.1f}' for x in fork_list)} ms | |",
  f"| open loop p99 without a snapshot | {quiet[1]:.2f} ms (p50 {quiet[2]:.2f} ms, {quiet[0]:,.0f}/s); each second's p99: {summary(returning_quiet)} | |",
  f"| the same load, the seconds while the snapshot ran | each second's p99: {summary(returning_during)} (whole run: p99 {during[1]:.2f} ms, {during[0]:,.0f}/s); worst second against worst second without: **{ratio(returning_during, returning_quiet):.2f}×** | at most 2× |",
  f"| growing (first installs at 70% of the maximum, {int(seventy):,}/s), no snapshot | p99 {grow_q[1]:.2f} ms ({grow_q[0]:,.0f}/s); each second's p99: {summary(growing_quiet)} | |",
  f"| growing, the seconds while a snapshot ran ({grow_window[1] - grow_window[0]:.1f} s, {added('growing') / 2**30:.2f} GiB added) | each second's p99: {summary(growing_during)} (whole run: p99 {grow_d[1]:.2f} ms, {grow_d[0]:,.0f}/s); worst second against worst second without: **{ratio(growing_during, growing_quiet):.2f}×** | at most 2× |",
  f"| the snapshot's floor, the same growing load: the seconds while `bench/snapshot_floor.c` wrote as many bytes, as registryd writes them, at `SCHED_IDLE`, and nothing else ({floor_window[1] - floor_window[0]:.1f} s; {' '.join(floor_report)}) | each second's p99: {summary(floor_during)}; worst second against worst second without: **{ratio(floor_during, growing_quiet):.2f}×** | |",
  f"| the same floor writing through the page cache, synced every 8 MiB (`BUFFERED=1`: how registryd wrote snapshots before `ChunkedFileWriter`; {cached_window[1] - cached_window[0]:.1f} s; {' '.join(cached_report)}) | each second's p99: {summary(cached_during)}; worst second against worst second without: **{ratio(cached_during, growing_quiet):.2f}×** | |",
  f"| clean stop (snapshots what the open loops added) | {float(stop_s):.1f} s | |",
  f"| restart, three times, keeping the journal the open loops logged for the older snapshot | {', '.join(f'{x:.1f}' for x in restart_list)} s | |",
  f"| restart, three times, from a snapshot and its tail ({int(kept) / 2**20:.0f} MiB of journal kept) | {', '.join(f'{float(x):.1f}' for x in short.split())} s | at most 5 s |",
  f"| the restart's floor (`bench/restart_floor.c`, median of 3): reading the snapshot's bytes / writing its devices and claims (in their table's order) into presized tables | {floor_read:.1f} s / {floor_index:.1f} s | |",
  "", "<!-- storage:end -->"]
section = "\n".join(lines) + "\n"
text = open("BENCHMARKS.md").read()
if "<!-- storage:begin -->" in text:
    text = re.sub(r"<!-- storage:begin -->.*?<!-- storage:end -->\n", lambda _: section, text, flags=re.S)
else:
    text = text.replace("<!-- compare:begin -->", section + "\n<!-- compare:begin -->", 1) if "<!-- compare:begin -->" in text else text + "\n" + section
open("BENCHMARKS.md", "w").write(text)
print(section)
PY
