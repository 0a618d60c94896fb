# Shell functions the bench scripts share (sourced, not run).

# wait_for_port PORT [SECONDS]: waits up to SECONDS (default 10) for something to accept
# connections on 127.0.0.1:PORT; fails if nothing does.
wait_for_port() {
  for _ in $(seq $((${2:-10} * 20))); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.05
  done
  return 1
}

# cpu_seconds PID: the process's user and system CPU seconds so far, as "USER SYSTEM"
# (bench/catchup.sh, bench/cluster-compare.sh).
cpu_seconds() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%.3f %.3f\n", $14 / hz, $15 / hz }' "/proc/$1/stat"; }

# node_ticks PID: the node's user and system ticks, with its children's (a forked snapshot's:
# those it waited for, and one still running, at that moment), then its user ticks alone, the same
# way (bench/cpu-compare.sh, bench/flamegraphs.sh).
node_ticks() {
  local total user child
  total=$(awk '{print $14 + $15 + $16 + $17}' "/proc/$1/stat")
  user=$(awk '{print $14 + $16}' "/proc/$1/stat")
  for child in $(cat "/proc/$1/task/"*/children 2>/dev/null); do
    total=$((total + $(awk '{print $14 + $15}' "/proc/$child/stat" 2>/dev/null || echo 0)))
    user=$((user + $(awk '{print $14}' "/proc/$child/stat" 2>/dev/null || echo 0)))
  done
  echo "$total $user"
}

# journal_bench_cleanup: on exit from bench/replay.sh, snapshot.sh, memory.sh and restart.sh, ends their node
# ($pid), removes the base's worktree ($worktree) and the journal and data copies under $out.
journal_bench_cleanup() {
  [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null || true
  git worktree remove --force "$worktree" 2>/dev/null || true
  rm -rf "$out/journal" "$out"/journal-* "$out/data"
}

# write_journal BINARY-DIR DIRECTORY PORT SECONDS [FLAGS]: a data directory whose journal holds
# SECONDS of batched first installs (8 connections x 16 in flight, batches of 100), written by
# that build's node with snapshots off and then killed with -9, so that a start-up replays every
# operation (bench/replay.sh, bench/snapshot.sh). Sets `pid` while the node runs, for the
# caller's cleanup; the node's log is DIRECTORY.log.
write_journal() {
  local bin=$1 directory=$2 port=$3 seconds=$4 flags=${5:-}
  mkdir -p "$directory"
  # shellcheck disable=SC2086 # the flags are words
  "$bin/registryd" --data-dir "$directory" --port "$port" --metrics-port 0 \
    --snapshot-every-operations 0 --snapshot-every-seconds 0 $flags > "$directory.log" 2>&1 &
  pid=$!
  wait_for_port "$port" 30 || { cat "$directory.log" >&2; return 1; }
  "$bin/registryload" --endpoints "127.0.0.1:$port" --connections 8 --in-flight 16 --batch 100 --warmup 0s \
    --duration "${seconds}s" --seed 1 > /dev/null 2>&1 || true
  kill -9 "$pid"; wait "$pid" 2>/dev/null || true; pid=""
  rm -f "$directory/LOCK"
}

# record_run REPORT.json NAME ROW ROUND >> results.tsv: one tab-separated line of a registryload
# report, NAME ROW ROUND registrations/s p99-microseconds (bench/compare.sh, bench/security.sh).
record_run() {
  python3 - "$@" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
print("\t".join([sys.argv[2], sys.argv[3], sys.argv[4], f"{report['throughput']['achieved_per_second']:.0f}",
                 f"{report['latency']['p99_ns'] / 1000:.0f}"]))
PY
}

# build_base_registryd REV WORKTREE: checks REV out into WORKTREE (a git worktree the caller
# removes) and builds its registryd there, in a scratch folder of its own (.build-compare, ignored
# by git, kept between runs); prints the folder that holds the binary (bench/compare.sh,
# bench/replay.sh).
build_base_registryd() {
  git worktree add --detach "$2" "$1" >/dev/null
  local root
  root=$(pwd)
  (cd "$2" && swift build -c release --product registryd --scratch-path "$root/.build-compare" >&2)
  (cd "$2" && swift build -c release --scratch-path "$root/.build-compare" --show-bin-path)
}

# build_registration_floor PATH: compiles bench/registration_floor.c (the least a node can do) to
# PATH, installing OpenSSL's headers first if they are missing.
build_registration_floor() {
  [ -f /usr/include/openssl/sha.h ] || scripts/apt-install.sh libssl-dev >&2
  "$(command -v cc || command -v clang)" -O2 -Wall -msse4.2 -o "$1" bench/registration_floor.c -lcrypto
}

# build_head: builds this checkout's registryd and registryload (release) and sets head_bin, the
# folder that holds them.
build_head() {
  local product
  for product in registryd registryload; do swift build -c release --product "$product" >&2; done
  head_bin=$(swift build -c release --show-bin-path)
}

# choose_base_registryd REV WORKTREE [PREBUILT-DIR]: sets base_bin, the folder of REV's registryd
# (PREBUILT-DIR when given, else built by build_base_registryd), and base_name, how the report names
# it (bench/replay.sh, bench/catchup.sh).
choose_base_registryd() {
  if [ -n "${3:-}" ]; then
    base_bin=$3
    base_name="\`$(git rev-parse --short=12 "$1")\`'s (built before, in $3)"
  else
    base_bin=$(build_base_registryd "$1" "$2")
    base_name="\`$(git rev-parse --short=12 "$1")\`"
  fi
}

# this_machine_flags BINARY-DIR: the registryd flags this machine needs, for a build that has
# them. It reports freed memory to its hypervisor (free page reporting; BENCHMARKS.md, "What this
# machine allows"), where a grown index's old table freed at once stalls a busy node, so the
# benchmarks run nodes as an operator of such a machine would: --release-tables-gradually
# (docs/operations.md). Set BENCH_NODE_FLAGS to choose otherwise.
this_machine_flags() {
  if [ -n "${BENCH_NODE_FLAGS+set}" ]; then echo "$BENCH_NODE_FLAGS"; return; fi
  if "$1/registryd" --help 2>/dev/null | grep -q -- --release-tables-gradually; then echo --release-tables-gradually; fi
}

# compare_row_arguments ROW: registryload's arguments for a row of bench/compare.sh and
# bench/cpu-compare.sh: single (4 connections x 64 in flight, one request a frame) or batch
# (batches of 100, 8 connections x 16 in flight). Fails for any other row.
compare_row_arguments() {
  case $1 in
    single) echo "--connections 4 --in-flight 64 --batch 1" ;;
    batch) echo "--connections 8 --in-flight 16 --batch 100" ;;
    *) echo "a row is single or batch, not $1" >&2; return 2 ;;
  esac
}

# converge REGISTRYCTL ENDPOINT...: waits until every listed node reports the same version vector
# (`registryctl status`, polled), at most 600 s; prints the seconds it took (600 and fails when
# they did not converge).
converge() {
  python3 - "$@" <<'PY'
import json, subprocess, sys, time
ctl, endpoints = sys.argv[1], sys.argv[2:]
started = time.monotonic()
while time.monotonic() - started < 600:
    vectors = []
    for endpoint in endpoints:
        out = subprocess.run([ctl, "status", "--endpoint", endpoint, "-o", "json"], capture_output=True, text=True).stdout
        try:
            vectors.append(json.dumps(json.loads(out)["versionVector"], sort_keys=True))
        except Exception:
            vectors.append(None)
    if None not in vectors and len(set(vectors)) == 1:
        print(f"{time.monotonic() - started:.2f}")
        sys.exit(0)
    time.sleep(0.2)
print("600"); sys.exit(1)
PY
}
