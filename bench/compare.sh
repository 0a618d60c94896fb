#!/usr/bin/env bash
# make bench-compare BASE=REV: this checkout's registryd against the registryd of revision REV
# (default: the revision before HEAD), measured in the same run on this machine, alternating
# which goes first in each round, so that the machine's noise falls on both alike.
#
# Rows: closed loop with single RegisterRequests (4 connections x 64 in flight, each request in
# a frame of its own) and with batches of 100 (8 connections x 16 in flight), the same rows as
# the main table of `make bench`. The same registryload (this checkout's) drives both servers.
# Each server starts on a fresh data directory for each row.
#
# Writes the section between the "compare" markers of BENCHMARKS.md, with the command.
# Environment: COMPARE_ROUNDS (default 3), COMPARE_SECONDS (measured seconds per run, default 15),
# COMPARE_HEAD_FLAGS and COMPARE_BASE_FLAGS (extra registryd flags for this checkout's node, or
# the base's, e.g. to switch a feature off and see what it costs; the section then names them),
# COMPARE_BASE_BIN (a folder holding a registryd built from REV, used instead of building it),
# COMPARE_HEAD_BIN and COMPARE_HEAD_REV (a folder holding a registryd built from another revision,
# and that revision, measured in place of this checkout's: two past revisions compared),
# COMPARE_SECTION and COMPARE_TITLE (the BENCHMARKS.md section to write and its heading, for such a
# comparison, which then leaves the standing sections alone).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh
export PATH="/opt/swift/usr/bin:$PATH"
base=${1:-HEAD~1}
rounds=${COMPARE_ROUNDS:-3}
seconds=${COMPARE_SECONDS:-15}
base_revision=$(git rev-parse --short=12 "$base")
head_revision=$(git rev-parse --short=12 "${COMPARE_HEAD_REV:-HEAD}")
out=$(mktemp -d /tmp/registry-compare.XXXXXX)
worktree="$out/base"
registryd_pid=""
cleanup() {
  [ -n "$registryd_pid" ] && kill "$registryd_pid" 2>/dev/null || true
  git worktree remove --force "$worktree" 2>/dev/null || true
  rm -rf "$out/data"
}
trap cleanup EXIT

echo "== building registryd at $base_revision (base) and at $head_revision" >&2
choose_base_registryd "$base" "$worktree" "${COMPARE_BASE_BIN:-}"
# registryload is always this checkout's: the same load generator drives both builds.
build_head
head_registryd=${COMPARE_HEAD_BIN:-$head_bin}


# run BUILD-NAME BINARY-DIR ROW ROUND: one row against a fresh node of that build.
run() {
  local name=$1 bin=$2 row=$3 round=$4
  rm -rf "$out/data" && mkdir -p "$out/data"
  local flags=""
  if [ "$name" = head ]; then flags=${COMPARE_HEAD_FLAGS:-$(this_machine_flags "$bin")}; else flags=${COMPARE_BASE_FLAGS:-$(this_machine_flags "$bin")}; fi
  # shellcheck disable=SC2086 # the flags are words
  "$bin/registryd" --data-dir "$out/data" --port 7460 --log-level warning $flags > "$out/registryd.log" 2>&1 &
  registryd_pid=$!
  wait_for_port 7460 || { cat "$out/registryd.log" >&2; exit 1; }
  local arguments
  arguments=$(compare_row_arguments "$row")
  # shellcheck disable=SC2086 # the arguments are words
  "$head_bin/registryload" --endpoints 127.0.0.1:7460 --duration "${seconds}s" --warmup 2s $arguments --seed "$round" \
    --json "$out/$name-$row-$round.json" > /dev/null 2>&1 || true
  kill -TERM "$registryd_pid"; wait "$registryd_pid" || true; registryd_pid=""
  record_run "$out/$name-$row-$round.json" "$name" "$row" "$round" >> "$out/results.tsv"
  echo "$name $row round $round: $(tail -1 "$out/results.tsv" | cut -f4) registrations/s" >&2
}

: > "$out/results.tsv"
for round in $(seq "$rounds"); do
  for row in single batch; do
    if [ $((round % 2)) = 1 ]; then order="base head"; else order="head base"; fi
    for name in $order; do
      if [ "$name" = base ]; then run base "$base_bin" "$row" "$round"; else run head "$head_registryd" "$row" "$round"; fi
    done
  done
done

# The COMPARE_* settings of this run, as they would be typed, for the section's command.
settings=$(for v in $(compgen -e | grep '^COMPARE_' | sort); do printf '%s="%s" ' "$v" "${!v}"; done)
python3 - "$out/results.tsv" "$base_revision" "$head_revision" "$rounds" "$seconds" "${COMPARE_HEAD_FLAGS:-}" "${COMPARE_BASE_FLAGS:-}" "${COMPARE_BASE_BIN:-}" \
  "${COMPARE_HEAD_BIN:-}" "${COMPARE_SECTION:-}" "${COMPARE_TITLE:-}" "$settings" <<'PY'
import statistics, sys, datetime
path, base, head, rounds, seconds, head_flags, base_flags, base_bin, head_bin, section, title, settings = sys.argv[1:]
rows = {}
for line in open(path):
    name, row, round_, rate, p99 = line.split("\t")
    rows.setdefault((row, name), []).append((int(rate), int(p99)))
labels = {"single": "single RegisterRequests, 4 connections x 64 in flight",
          "batch": "batches of 100, 8 connections x 16 in flight"}
# The reference revision (issue 42) has a standing section of its own; any other base is "the
# previous revision", the one the change being measured started from.
reference = base.startswith("67fecdd")
if not title:
    title = "Against the reference revision (67fecdd)" if reference else "Against the previous revision"
lines = [f"## {title}", "",
         (f"`{settings}bash bench/compare.sh {base}`" if settings else f"`bench/compare.sh {base}` (`make bench-compare BASE={base}`)")
         + f" on {datetime.date.today()}: registryd at `{base}`"
         + (f" (built before, in {base_bin})" if base_bin else "")
         + (f" (started with `{base_flags}`)" if base_flags else "") + " "
         f"against `{head}`" + (f" (built before, in {head_bin})" if head_bin else "")
         + (f" (started with `{head_flags}`)" if head_flags else "") +
         f", {rounds} rounds of {seconds} s each, alternating which goes first, one fresh node per run, "
         "the same registryload driving both. Medians of the rounds; every round in brackets.", "",
         "| Row | base registrations/s | this revision | ratio | base p99 | this revision's p99 |", "|---|---:|---:|---:|---:|---:|"]
for row in ("single", "batch"):
    b, h = rows.get((row, "base"), []), rows.get((row, "head"), [])
    if not b or not h:
        continue
    bm, hm = statistics.median(r for r, _ in b), statistics.median(r for r, _ in h)
    bp, hp = statistics.median(p for _, p in b), statistics.median(p for _, p in h)
    each = lambda runs: ", ".join(f"{r:,}" for r, _ in runs)
    lines.append(f"| {labels[row]} | {bm:,.0f} ({each(b)}) | {hm:,.0f} ({each(h)}) | {hm / bm:.3f} | {bp / 1000:.2f} ms | {hp / 1000:.2f} ms |")
sys.path.insert(0, "bench")
from section import put
print(put(section or ("reference" if reference else "compare"), "\n".join(lines)))
PY
