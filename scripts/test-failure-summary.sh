#!/usr/bin/env bash
# Usage: scripts/test-failure-summary.sh LOG
#
# What a failed `swift test` run's log says about the failure, printed last so that the tail a CI
# keeps shows it: a crash's message and the first frames of the thread that crashed (otherwise the
# backtracer's register dump and image list fill that tail), and each failed expectation. Swift
# Testing starts most tests at once, so which tests had not finished when a crash came says
# little; the crashed thread's frames name the test.
set -uo pipefail
log="$1"
echo
echo "== why the test run failed (from $log)"
grep -E "Fatal error|Program crashed|Precondition failed|Assertion failed|Simultaneous accesses" "$log" | head -20
awk '/^Thread [0-9]+( "[^"]*")? crashed:/ { show = 40 } show > 0 { print; show-- }' "$log"
grep -E "^✘" "$log" | head -40
