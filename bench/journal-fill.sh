#!/usr/bin/env bash
# make bench-journal-fill: what the journal's zeros ahead of its records cost and buy on this
# machine's disk, for a few steps (CommitJournal.fillStep) against appending, and what writing the
# commits past the page cache (O_DIRECT) would buy against the cache, in the same run: commits each
# followed by fdatasync (commits/s, CPU a commit). bench/journal_fill.c does the writing (its
# comment says how); the steps with commits of 16 KiB (a single-request commit's size), the cache
# against O_DIRECT with 16 KiB and 256 KiB (a commit of the batched row) at the journal's step.
# 3 rounds, each running the configurations in another order, medians. Writes the "journal-fill"
# section of BENCHMARKS.md. JOURNAL_FILL_DIR: where to write (default: a new folder in /tmp; a
# file system that refuses O_DIRECT fails the run).
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d /tmp/registry-journal-fill.XXXXXX)
trap 'rm -rf "$out"' EXIT
dir=${JOURNAL_FILL_DIR:-$out}
cc -O2 -o "$out/journal_fill" bench/journal_fill.c
# step, commit bytes, commits, past the cache (1) or not
configurations=(
  "0 16384 3000 0" "65536 16384 3000 0" "262144 16384 3000 0" "1048576 16384 3000 0"
  "1048576 16384 3000 1" "1048576 262144 1000 0" "1048576 262144 1000 1"
)
for round in 1 2 3; do
  for index in "${!configurations[@]}"; do
    read -r step bytes commits direct <<< "${configurations[$(( (index + round) % ${#configurations[@]} ))]}"
    echo "$step $bytes $commits $direct $("$out/journal_fill" "$dir" "$step" "$commits" 1 "$bytes" "$direct")" >> "$out/results"
  done
done
python3 - "$out/results" > "$out/section.md" <<'PY'
import statistics, sys, datetime
rows = {}
for line in open(sys.argv[1]):
    step, size, commits, direct, *fields = line.split()
    values = dict(field.split("=") for field in fields)
    rows.setdefault((int(size), int(direct), int(step), int(commits)), []).append(
        (float(values["commits_per_s"]), float(values["cpu_us_per_commit"])))
def name(step, direct):
    if direct:
        return f"past the cache (O_DIRECT), zeros {step // 1024} KiB ahead"
    return "appending" if step == 0 else f"zeros {step // 1024} KiB ahead"
print("## Journal fill steps\n")
print(f"`bench/journal-fill.sh` (`make bench-journal-fill`) on {datetime.date.today()}: `bench/journal_fill.c` writes commits of 16 KiB")
print("(about a single-request commit) or 256 KiB (about a commit of batches) into a new file, each followed by `fdatasync`, appending or with")
print("zeros written a step ahead of the records as `CommitJournal` does (`CommitJournal.fillStep` is 1024 KiB), through the page cache as")
print("`CommitJournal` writes, or past it (`O_DIRECT`, whole 4 KiB blocks: each commit writes again the block its predecessor ended in;")
print("not how `CommitJournal` writes, the least a journal past the cache would do). 3 rounds, each in another order; medians, every round")
print("in brackets. CPU is the process's user and system time.\n")
print("| Writes | commit | commits | commits/s | CPU a commit |")
print("|---|---:|---:|---:|---:|")
for size, direct, step, commits in sorted(rows):
    runs = rows[(size, direct, step, commits)]
    rate = statistics.median(r for r, _ in runs)
    cpu = statistics.median(c for _, c in runs)
    print(f"| {name(step, direct)} | {size // 1024} KiB | {commits:,} | {rate:,.0f} ({', '.join(f'{r:,.0f}' for r, _ in runs)}) | "
          f"{cpu:.1f} µs ({', '.join(f'{c:.1f}' for _, c in runs)}) |")
PY
cat "$out/section.md"
python3 bench/section.py journal-fill "$out/section.md" > /dev/null
