#!/usr/bin/env bash
# PostgreSQL baseline: a throwaway cluster on 127.0.0.1 with default durable settings
# (fsync on, synchronous_commit on), the register() function from schema.sql, driven by pgbench.
# Usage: postgres/run.sh SECONDS CLIENTS RESULT_FILE
# Appends "postgres<TAB>name<TAB>registrations/s<TAB>p50 µs<TAB>p99 µs<TAB>command" to RESULT_FILE.
set -euo pipefail
seconds=$1 clients=$2 result=$3
here=$(cd "$(dirname "$0")" && pwd)
bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
port=54329
work=$(mktemp -d /tmp/bench-pg.XXXXXX)
chown postgres "$work"
as_pg() { runuser -u postgres -- "$@"; }
cleanup() {
  as_pg "$bin/pg_ctl" -D "$work/data" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

as_pg "$bin/initdb" -D "$work/data" -A trust -U postgres >/dev/null
as_pg "$bin/pg_ctl" -D "$work/data" -l "$work/server.log" -w \
  -o "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$work -c max_connections=200" start >/dev/null
psql_cmd=(psql -X -q -h 127.0.0.1 -p "$port" -U postgres -v ON_ERROR_STOP=1)
"${psql_cmd[@]}" -c 'CREATE DATABASE bench' >/dev/null
"${psql_cmd[@]}" -d bench -f "$here/schema.sql" >/dev/null
cp "$here/first-install.pgbench" "$work/"
chown -R postgres "$work"

cmd="pgbench -n -M prepared -c $clients -j 2 -T $seconds -f first-install.pgbench -l bench"
echo "postgres: $cmd" >&2
(cd "$work" && as_pg "$bin/pgbench" -h 127.0.0.1 -p "$port" -U postgres -n -M prepared -c "$clients" -j 2 \
  -T "$seconds" -f "$work/first-install.pgbench" -l --log-prefix="$work/txn" bench) > "$work/pgbench.out" 2>&1 \
  || { tail -20 "$work/pgbench.out" >&2; exit 1; }
tps=$(awk '/^tps = / { print $3; exit }' "$work/pgbench.out")
devices=$("${psql_cmd[@]}" -d bench -At -c 'SELECT count(*) FROM devices')
# Per-transaction logs: the third column is the latency in microseconds.
read -r p50 p99 < <(cat "$work"/txn.* | python3 "$here/../percentiles.py" 3)
printf 'postgres\tPostgreSQL 15 plpgsql register(), pgbench %s clients\t%s\t%s\t%s\t%s\n' \
  "$clients" "$tps" "$p50" "$p99" "$cmd" >> "$result"
echo "postgres: $tps tps, $devices devices, p50 ${p50}us p99 ${p99}us" >&2
