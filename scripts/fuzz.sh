#!/usr/bin/env bash
# Builds the libFuzzer targets (Swift's --sanitize=fuzzer, with AddressSanitizer) and runs each
# from the seeds that Fuzz/FuzzSeeds writes.
#
#   scripts/fuzz.sh short   a few seconds per target (part of `make test`): fails on any crash
#   scripts/fuzz.sh full    FUZZ_RUNS (default 10000000) executions per target, then writes the
#                           figures to docs/fuzzing.md (`make fuzz`)
#
# A crash leaves its input in .build-fuzz/crashes/<target>/ and fails the run; replay it with
# `.build-fuzz/release/<target> <file>`.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-short}
case "$mode" in
  short) runs=${FUZZ_RUNS:-30000} ;;
  full) runs=${FUZZ_RUNS:-10000000} ;;
  *) echo "usage: scripts/fuzz.sh short|full" >&2; exit 64 ;;
esac
SWIFT=${SWIFT:-swift}
targets=(FuzzFrameDecoder FuzzClientFrames FuzzPeerFrames FuzzSnapshot)
scratch=.build-fuzz

echo "== building the fuzz targets (release, --sanitize=fuzzer --sanitize=address)"
for target in "${targets[@]}"; do
  $SWIFT build -c release --scratch-path "$scratch" --sanitize=fuzzer --sanitize=address --product "$target" 2>&1 \
    | grep -v "Cannot export local symbol '__asan_extra_spill_area'" | grep -E "error|warning: |Compiling|complete" | tail -2
done
$SWIFT build --product FuzzSeeds >/dev/null
seeds=$(mktemp -d)
trap 'rm -rf "$seeds"' EXIT
"$($SWIFT build --show-bin-path)/FuzzSeeds" "$seeds" >/dev/null

rows=()
failed=0
for target in "${targets[@]}"; do
  name=${target#Fuzz}
  corpus="$scratch/corpus/$name"
  crashes="$scratch/crashes/$target"
  # Crashes of this run only; inputs that once crashed are kept in Fuzz/Regressions and replayed
  # by the test suite.
  rm -rf "$crashes" && mkdir -p "$corpus" "$crashes"
  cp -n "$seeds/$name"/* "$corpus"/ 2>/dev/null || true
  log="$scratch/$target.log"
  start=$(date +%s)
  status=0
  "$scratch/release/$target" -runs="$runs" -max_len=65536 -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
    -artifact_prefix="$crashes/" "$corpus" >"$log" 2>&1 || status=$?
  seconds=$(( $(date +%s) - start ))
  executions=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
  found=$(find "$crashes" -type f | wc -l)
  files=$(find "$corpus" -type f | wc -l)
  printf '%-18s %12s executions in %5s s, corpus %5s inputs, %s crashes (exit %s)\n' "$target" "$executions" "$seconds" "$files" "$found" "$status"
  rows+=("| \`$target\` | $executions | $seconds | $files | $found |")
  if [ "$status" -ne 0 ] || [ "$found" -ne 0 ]; then failed=1; tail -30 "$log" >&2; fi
done

if [ "$mode" = full ]; then
  {
    echo "# Fuzzing"
    echo
    echo "libFuzzer targets built with Swift's \`--sanitize=fuzzer --sanitize=address\` (\`Fuzz/\`; what"
    echo "each does is \`Sources/RegistryFuzzing/FuzzBodies.swift\`). Written by \`make fuzz\`"
    echo "(\`scripts/fuzz.sh full\`, FUZZ_RUNS=$runs) on $(date -u +%Y-%m-%d), revision $(git rev-parse --short HEAD),"
    echo "on this 2-core VM. Seeds: \`Fuzz/FuzzSeeds\` (one of every message, and a real snapshot); the corpus"
    echo "grows in \`.build-fuzz/corpus\` across runs. \`make test\` runs each target briefly."
    echo
    echo "| target | executions | seconds | corpus inputs | crashes |"
    echo "| --- | ---: | ---: | ---: | ---: |"
    printf '%s\n' "${rows[@]}"
    echo
    echo "Inputs that crashed earlier runs are kept in \`Fuzz/Regressions/<target>/\` ($(find Fuzz/Regressions -type f | wc -l) now)"
    echo "and replayed by \`FuzzRegressionTests\` in \`make test\`. Found so far, both in the client-frame codec and"
    echo "both fixed: an identifier that is not UUID text and holds a NUL byte was cut short by the encoder instead of"
    echo "refused, so a node would have received another identifier than the caller gave; and a Stats answer's zero"
    echo "error counts did not survive a round trip (duplicate counts could also have overflowed)."
  } > docs/fuzzing.md
  echo "wrote docs/fuzzing.md"
fi
exit $failed
