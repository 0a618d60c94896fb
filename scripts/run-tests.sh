#!/usr/bin/env bash
# Usage: [SWIFT=swift] [TEST_TIME_LIMIT=seconds] scripts/run-tests.sh [swift test options...]
#
# Runs the Swift Testing tests of the package (already built; every test unless the options
# say otherwise), printing each event as it happens, and bounds the run: a test that hangs does
# not hold the CI until its own limit, but fails the run once TEST_TIME_LIMIT seconds (default
# 1800; a whole run takes about 6 minutes) have passed, after printing what is needed to find it:
#   - every process of the run, with its state;
#   - every thread's stack of the test process (gdb);
#   - last, the tests that started and never finished (the tail a CI keeps).
# Swift Testing's own `.timeLimit` cannot end a test blocked in a system call.
set -uo pipefail
swift="${SWIFT:-swift}"
limit="${TEST_TIME_LIMIT:-1800}"
case "$limit" in
    '' | *[!0-9]*) echo "TEST_TIME_LIMIT must be a whole number of seconds, not '$limit'" >&2; exit 64 ;;
esac
log=$(mktemp)
follower=""
# The cluster tests keep their nodes' logs here (ClusterTests.Cluster.stop); a failed run's
# summary shows those of the tests that failed.
export REGISTRY_TEST_LOGS
REGISTRY_TEST_LOGS=$(mktemp -d)

# The run is a session of its own, so that every process it starts (each node a test starts is
# a process group of its own) can be found and ended. A command started with & ignores SIGINT
# and SIGQUIT, and so would everything the run starts: env gives them back their defaults (a
# test stops a node with SIGINT). stdbuf: events reach the log line by line.
setsid -w env --default-signal=INT,QUIT stdbuf -oL "$swift" test --skip-build --disable-xctest "$@" > "$log" 2>&1 &
runner=$!

# Ends the whole run: each process of the session, then the session's leader should pkill miss.
end_run() {
    pkill -TERM -s "$runner"
    sleep 5
    pkill -KILL -s "$runner"
    kill -KILL "$runner" 2>/dev/null
}
# Interrupted (Ctrl-C, a CI's cancel): the run, out of the terminal's process group, ends too.
trap 'end_run; [ -n "$follower" ] && kill "$follower" 2>/dev/null; rm -rf "$log" "$REGISTRY_TEST_LOGS"; exit 130' INT TERM HUP
trap 'rm -rf "$log" "$REGISTRY_TEST_LOGS"' EXIT

# The log as it is written, until the run ends.
tail -n +1 -f --pid="$runner" "$log" &
follower=$!

# Tests that printed "started" and no result, by name (a name may start more than once).
unfinished() {
    awk '
        $2 != "Test" || $3 == "run" || $3 == "case" { next }
        $4 == "started." { started[$3]++; next }
        $4 == "passed" || $4 == "failed" || ($4 == "with" && / (passed|failed) after /) { finished[$3]++ }
        END { for (name in started) if (started[name] > finished[name]) print "  " name }
    ' "$log" | sort
}

waited=0
while kill -0 "$runner" 2>/dev/null && [ "$waited" -lt "$limit" ]; do
    sleep 5
    waited=$((waited + 5))
done

if kill -0 "$runner" 2>/dev/null; then
    # Stop following first: what follows is this script's own report.
    kill "$follower" 2>/dev/null
    wait "$follower" 2>/dev/null
    echo
    echo "== the tests ran past ${limit} s (a whole run takes about 6 minutes): something hangs"
    echo "-- the processes of the run"
    ps -o pid,ppid,stat,etime,time,args -s "$runner" | cut -c1-200
    # The test process: an .xctest whose parent is not one (its forked children are).
    for pid in $(pgrep -s "$runner" -f '\.xctest'); do
        parent=$(ps -o ppid= -p "$pid" | tr -d ' ')
        if ps -o args= -p "$parent" | grep -q '\.xctest'; then continue; fi
        echo "-- the threads of test process $pid"
        timeout 120 gdb -p "$pid" -batch -nx -ex 'set pagination off' -ex 'thread apply all bt 30' 2>&1 \
            | grep -E '^(Thread|#)|ptrace|[Pp]ermission|[Cc]ould not attach' | cut -c1-220
    done
    end_run
    wait "$runner" 2>/dev/null
    echo "-- the tests that started and did not finish"
    unfinished
    exit 124
fi

wait "$runner"
status=$?
wait "$follower"
if [ "$status" -ne 0 ]; then
    bash "$(dirname "$0")/test-failure-summary.sh" "$log" "$REGISTRY_TEST_LOGS"
fi
exit "$status"
