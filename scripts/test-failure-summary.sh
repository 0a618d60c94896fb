#!/usr/bin/env bash
# Usage: scripts/test-failure-summary.sh LOG [NODE-LOGS]
#
# What a failed `swift test` run's log says about the failure, printed last so that the tail a CI
# keeps shows it: a crash's message and the first frames of the thread that crashed (otherwise the
# backtracer's register dump and image list fill that tail), and each failed expectation. Swift
# Testing starts most tests at once, so which tests had not finished when a crash came says
# little; the crashed thread's frames name the test. With NODE-LOGS (the folder the cluster tests
# kept their nodes' logs in, one folder per cluster named after its test), the last lines of each
# node's log for every test that failed.
set -uo pipefail
log="$1"
node_logs="${2:-}"
if [ -n "$node_logs" ] && [ -d "$node_logs" ]; then
    for name in $(grep -oE "^✘ Test [A-Za-z0-9_]+" "$log" | awk '{ print $3 }' | sort -u); do
        for file in "$node_logs/$name".*/*.log; do
            [ -f "$file" ] || continue
            echo
            echo "== the last lines of ${file#"$node_logs"/}"
            tail -n 25 "$file" | cut -c1-300
        done
    done
fi
echo
echo "== why the test run failed (from $log)"
grep -E "Fatal error|Program crashed|Precondition failed|Assertion failed|Simultaneous accesses" "$log" | head -20
awk '/^Thread [0-9]+( "[^"]*")? crashed:/ { show = 40 } show > 0 { print; show-- }' "$log"
grep -E "^✘" "$log" | head -40
