#!/usr/bin/env bash
# make bench-journal-fill: what the journal's zeros ahead of its records cost and buy on this
# machine's disk, for a few steps (CommitJournal.fillStep) against appending, in the same run:
# commits of 16 KiB each followed by fdatasync (commits/s, CPU a commit). bench/journal_fill.c
# does the writing; 3 rounds,
# each running the steps in another order, medians. Writes the "journal-fill" section of
# BENCHMARKS.md. JOURNAL_FILL_DIR: where to write (default: a new folder in /tmp).
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d /tmp/registry-journal-fill.XXXXXX)
trap 'rm -rf "$out"' EXIT
dir=${JOURNAL_FILL_DIR:-$out}
cc -O2 -o "$out/journal_fill" bench/journal_fill.c
steps=(0 65536 262144 1048576)
synced=3000
for round in 1 2 3; do
  for index in "${!steps[@]}"; do
    step=${steps[$(( (index + round) % ${#steps[@]} ))]}
    echo "$step synced $("$out/journal_fill" "$dir" "$step" "$synced" 1)" >> "$out/results"
  done
done
python3 - "$out/results" "$synced" > "$out/section.md" <<'PY'
import statistics, sys, datetime
rows = {}
for line in open(sys.argv[1]):
    step, kind, *fields = line.split()
    values = dict(field.split("=") for field in fields)
    rows.setdefault((int(step), kind), []).append((float(values["commits_per_s"]), float(values["cpu_us_per_commit"])))
def name(step):
    return "appending" if step == 0 else f"zeros {step // 1024} KiB ahead"
print("## Journal fill steps\n")
print(f"`bench/journal-fill.sh` (`make bench-journal-fill`) on {datetime.date.today()}: `bench/journal_fill.c` writes commits of 16 KiB")
print(f"(about a batch of 100 registrations) into a new file, {sys.argv[2]} of them, each followed by `fdatasync`, appending or with")
print("zeros written a step ahead of the records as `CommitJournal` does (`CommitJournal.fillStep` is 1024 KiB). 3 rounds,")
print("each in another order; medians, every round in brackets. CPU is the process's user and system time.\n")
print("| Writes | commits/s | CPU a commit |")
print("|---|---:|---:|")
for step in sorted({s for s, _ in rows}):
    synced = rows[(step, "synced")]
    rate = statistics.median(r for r, _ in synced)
    cpu = statistics.median(c for _, c in synced)
    print(f"| {name(step)} | {rate:,.0f} ({', '.join(f'{r:,.0f}' for r, _ in synced)}) | {cpu:.1f} µs ({', '.join(f'{c:.1f}' for _, c in synced)}) |")
PY
cat "$out/section.md"
python3 bench/section.py journal-fill "$out/section.md" > /dev/null
