#!/usr/bin/env bash
# Redis baseline: a throwaway redis-server on 127.0.0.1 with appendonly yes (and the default
# appendfsync everysec, or "always" when FSYNC=always), the resolve-or-create script from
# register.lua, driven by redis-benchmark with random keychain UUID and IDFV claim keys.
# Usage: redis/run.sh REQUESTS CLIENTS PIPELINE RESULT_FILE [always|everysec]
# Appends "redis<TAB>name<TAB>registrations/s<TAB>p50 µs<TAB>p99 µs<TAB>command" to RESULT_FILE.
set -euo pipefail
requests=$1 clients=$2 pipeline=$3 result=$4 fsync=${5:-everysec}
here=$(cd "$(dirname "$0")" && pwd)
port=63790
work=$(mktemp -d /tmp/bench-redis.XXXXXX)
cleanup() {
  redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

redis-server --port "$port" --bind 127.0.0.1 --dir "$work" --appendonly yes --appendfsync "$fsync" \
  --save '' --daemonize yes --logfile "$work/redis.log"
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
sha=$(redis-cli -p "$port" script load "$(cat "$here/register.lua")")

# __rand_int__ is replaced by an independent random number below 2e9 at each place, per request
# (-r is read as a 32-bit int): a new keychain claim and a new IDFV claim each time (a first install).
args=(EVALSHA "$sha" 2 "claim:com.load1:k:__rand_int__" "claim:com.load1:i:__rand_int__"
  com.load1.app0 1700000000000)
cmd="redis-benchmark -n $requests -c $clients -P $pipeline -r 2000000000 --csv EVALSHA <register.lua> 2 claim:…:k:__rand_int__ claim:…:i:__rand_int__ …"
echo "redis ($fsync): $cmd" >&2
redis-benchmark -p "$port" -n "$requests" -c "$clients" -P "$pipeline" -r 2000000000 --csv "${args[@]}" > "$work/out.csv"
# CSV: "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
read -r rps p50 p99 < <(tail -1 "$work/out.csv" | tr -d '"' | awk -F, '{ printf "%s %.0f %.0f\n", $2, $5 * 1000, $7 * 1000 }')
devices=$(redis-cli -p "$port" get device:next)
printf 'redis\tRedis 7 Lua resolve-or-create, appendonly yes, appendfsync %s, %s clients × pipeline %s\t%s\t%s\t%s\t%s\n' \
  "$fsync" "$clients" "$pipeline" "$rps" "$p50" "$p99" "$cmd" >> "$result"
echo "redis ($fsync): $rps requests/s, $devices devices, p50 ${p50}us p99 ${p99}us" >&2
