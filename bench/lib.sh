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
