#!/usr/bin/env bash
# What security costs (make bench-security, also part of make bench): one registryd build,
# started plain, with tokens (--token-secret; registryload presents a token for all 100 of its
# vendors), and with TLS (--tls-cert, certificates from openssl), measured in the same run,
# rotating which goes first, each run on a fresh data directory. Rows as in bench/compare.sh:
# single RegisterRequests (4 connections x 64 in flight) and batches of 100 (8 x 16).
# Then the keyed hashing of identifiers per registration, against SipHash in the same process
# (bench/Benchmarks/KeyedHashing, under package-benchmark). Writes the "security" section of BENCHMARKS.md with the command.
# Environment: SECURITY_ROUNDS (default 3), SECURITY_SECONDS (default 10).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh
export PATH="/opt/swift/usr/bin:$PATH"
rounds=${SECURITY_ROUNDS:-3}
seconds=${SECURITY_SECONDS:-10}
out=$(mktemp -d /tmp/registry-security.XXXXXX)
registryd_pid=""
cleanup() { [ -n "$registryd_pid" ] && kill "$registryd_pid" 2>/dev/null || true; rm -rf "$out"; }
trap cleanup EXIT

for product in registryd registryload registryctl; do swift build -c release --product "$product" >&2; done
bin=$(swift build -c release --show-bin-path)
secret="bench-token-secret-0123456789abcdef"  # no spaces: it goes through word splitting
vendors=$(for v in $(seq 0 99); do printf -- '--vendor com.load%s ' "$v"; done)
# shellcheck disable=SC2086 # the vendor flags are words
REGISTRY_TOKEN_SECRET=$secret "$bin/registryctl" token issue $vendors --role register --role read --expires-in 1d > "$out/token"
(cd "$out" && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key -out ca.pem -days 1 -subj /CN=bench-ca \
  && openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout node.key -out node.csr -subj /CN=bench \
  && printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n' > node.ext \
  && openssl x509 -req -in node.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out node.pem -days 1 -extfile node.ext) >/dev/null 2>&1

# run CONFIG ROW ROUND
run() {
  local config=$1 row=$2 round=$3 server="" client=""
  case $config in
    plain) ;;
    tokens) server="--token-secret $secret"; client="--token-file $out/token" ;;
    tls) server="--tls-cert $out/node.pem --tls-key $out/node.key --tls-ca $out/ca.pem"; client="--tls-ca $out/ca.pem" ;;
  esac
  rm -rf "$out/data" && mkdir -p "$out/data"
  # shellcheck disable=SC2086 # the flags are words
  "$bin/registryd" --data-dir "$out/data" --port 7470 --log-level warning $server $(this_machine_flags "$bin") > "$out/registryd.log" 2>&1 &
  registryd_pid=$!
  wait_for_port 7470 || { cat "$out/registryd.log" >&2; exit 1; }
  local arguments
  case $row in
    single) arguments="--connections 4 --in-flight 64 --batch 1" ;;
    batch) arguments="--connections 8 --in-flight 16 --batch 100" ;;
  esac
  # shellcheck disable=SC2086 # the arguments are words
  "$bin/registryload" --endpoints 127.0.0.1:7470 --duration "${seconds}s" --warmup 2s $arguments $client --seed "$round" \
    --json "$out/$config-$row-$round.json" > "$out/load.log" 2>&1 || { tail -5 "$out/load.log" >&2; }
  kill -TERM "$registryd_pid"; wait "$registryd_pid" || true; registryd_pid=""
  record_run "$out/$config-$row-$round.json" "$config" "$row" "$round" >> "$out/results.tsv"
  echo "$config $row round $round: $(tail -1 "$out/results.tsv" | cut -f4) registrations/s" >&2
}

: > "$out/results.tsv"
configs=(plain tokens tls)
for round in $(seq "$rounds"); do
  for row in single batch; do
    # Rotate the order so that each configuration goes first once every three rounds.
    for offset in 0 1 2; do run "${configs[$(( (round + offset) % 3 ))]}" "$row" "$round"; done
  done
done
# The keyed hashing, under package-benchmark (bench/Benchmarks/KeyedHashing), as markdown tables.
swift package --allow-writing-to-package-directory benchmark --target KeyedHashing --format markdown --no-progress > "$out/hash.md" 2>/dev/null

python3 - "$out/results.tsv" "$out/hash.md" "$rounds" "$seconds" "$(git rev-parse --short=12 HEAD)" <<'PY'
import json, statistics, sys, datetime
path, hash_path, rounds, seconds, revision = sys.argv[1:]
rows = {}
for line in open(path):
    config, row, round_, rate, p99 = line.split("\t")
    rows.setdefault((row, config), []).append((int(rate), int(p99)))
sys.path.insert(0, "bench")
from package_benchmark import p50_nanoseconds, require
hashing = p50_nanoseconds(hash_path)
require(hashing, ("IdentifierKey.seal", "HMAC<SHA256> through swift-crypto", "floor: two SHA-256 blocks", "SipHash-2-4-128"),
        hash_path, "bench/security.sh")
labels = {"single": "single RegisterRequests, 4 connections x 64 in flight", "batch": "batches of 100, 8 connections x 16 in flight"}
lines = ["## What security costs", "",
         f"`bench/security.sh` (`make bench-security`) on {datetime.date.today()} at `{revision}`: one release registryd started plain, "
         "with tokens (`--token-secret`; registryload presents a token scoped to its 100 vendors) and with TLS (`--tls-cert`, an "
         f"openssl P-256 certificate; TLS 1.3), {rounds} rounds of {seconds} s each, rotating which goes first, a fresh node per run. "
         "Medians of the rounds; every round in brackets. Ratios are against plain in the same run.", "",
         "| Row | plain registrations/s | tokens | TLS | tokens / plain | TLS / plain | p99 plain | p99 tokens | p99 TLS |",
         "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
for row in ("single", "batch"):
    runs = {c: rows.get((row, c), []) for c in ("plain", "tokens", "tls")}
    if not all(runs.values()):
        continue
    rate = {c: statistics.median(r for r, _ in v) for c, v in runs.items()}
    p99 = {c: statistics.median(p for _, p in v) for c, v in runs.items()}
    each = lambda v: ", ".join(f"{r:,}" for r, _ in v)
    lines.append(f"| {labels[row]} | {rate['plain']:,.0f} ({each(runs['plain'])}) | {rate['tokens']:,.0f} ({each(runs['tokens'])}) | "
                 f"{rate['tls']:,.0f} ({each(runs['tls'])}) | {rate['tokens'] / rate['plain']:.3f} | {rate['tls'] / rate['plain']:.3f} | "
                 f"{p99['plain'] / 1000:.2f} ms | {p99['tokens'] / 1000:.2f} ms | {p99['tls'] / 1000:.2f} ms |")
p50 = lambda name: hashing[name]
h, c = p50("IdentifierKey.seal"), p50("HMAC<SHA256> through swift-crypto")
f, s = p50("floor: two SHA-256 blocks"), p50("SipHash-2-4-128")
lines += ["", "Keyed hashing of identifiers at rest (`swift package benchmark --target KeyedHashing`, ordo-one's package-benchmark, "
          "bench/Benchmarks/KeyedHashing; p50 of wall-clock time per identifier): the node's `IdentifierKey.seal`, HMAC-SHA256 with "
          f"both pads' states kept, **{h:.0f} ns** and no allocation (issue 42's target: at most 100), against, in the same run, "
          f"the floor (SHA-256's block function on two blocks, nothing else) {f:.0f} ns, the same HMAC through swift-crypto's "
          f"`HMAC<SHA256>` {c:.0f} ns (two allocations), and SipHash-2-4-128 of the same 17 bytes {s:.0f} ns. A registration "
          f"presents up to two identifiers: **{2 * h:.0f} ns** of hashing, done on the connection's event loop before the engine's lock."]
from section import put
print(put("security", "\n".join(lines)))
PY
