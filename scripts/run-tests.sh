#!/usr/bin/env bash
# Usage: [SWIFT=swift] [TEST_TIME_LIMIT=seconds] scripts/run-tests.sh [swift test options...]
#
# Runs the Swift Testing tests of the package (already built; every test unless the options
# say otherwise), printing each event as it happens, and bounds the run: a test that hangs does
# not hold the CI until its own limit, but fails the run once TEST_TIME_LIMIT seconds (default
# 1800; a whole run takes about 4 minutes) have passed, after printing what is needed to find it:
#   - every process of the run, with its state;
#   - every thread's stack of the test process (gdb);
#   - last, the tests that started and never finished (the tail a CI keeps).
# Swift Testing's own `.timeLimit` cannot end a test blocked in a system call.
set -uo pipefail
swift="${SWIFT:-swift}"
limit="${TEST_TIME_LIMIT:-1800}"
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# Line-buffered: a pipe would otherwise hold the last few KiB of events in the test process's
# buffer, and a run ended by the limit would lose them.
setsid -w stdbuf -oL -eL "$swift" test --skip-build --disable-xctest "$@" > >(tee "$log") 2>&1 &
runner=$!

# Tests that printed "started" and no result, by name (a name may start more than once).
unfinished() {
    awk '
        /^◇ Test case passing/ || $3 == "run" { next }
        /^◇ Test .* started\.$/ { name = $3; started[name]++; next }
        /^(✔|✘) Test .* (passed|failed) after / { name = $3; finished[name]++ }
        END { for (name in started) if (started[name] > finished[name]) print "  " name }
    ' "$log" | sort
}

waited=0
while kill -0 "$runner" 2>/dev/null && [ "$waited" -lt "$limit" ]; do
    sleep 5
    waited=$((waited + 5))
done

if kill -0 "$runner" 2>/dev/null; then
    echo
    echo "== the tests ran past ${limit} s (a whole run takes about 4 minutes): something hangs"
    echo "-- the processes of the run"
    ps -o pid,ppid,stat,etime,time,args -s "$runner" | cut -c1-200
    for pid in $(pgrep -s "$runner" -f '\.xctest'); do
        echo "-- the threads of test process $pid"
        timeout 120 gdb -p "$pid" -batch -nx -ex 'set pagination off' -ex 'thread apply all bt 30' 2>/dev/null \
            | grep -E '^(Thread|#)' | cut -c1-220
    done
    # The whole session: each node a test started is a process group of its own.
    pkill -TERM -s "$runner"
    sleep 5
    pkill -KILL -s "$runner"
    wait "$runner" 2>/dev/null
    echo "-- the tests that started and did not finish"
    unfinished
    exit 124
fi

wait "$runner"
status=$?
if [ "$status" -ne 0 ]; then
    bash "$(dirname "$0")/test-failure-summary.sh" "$log"
fi
exit "$status"
