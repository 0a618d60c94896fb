#!/usr/bin/env bash
# make compose-test: runs deploy/compose.yaml as an operator would, with the image `make image`
# builds (built first when missing): three nodes up, a device registered through node-a and
# resolved through node-b, node-c stopped while node-a takes another registration and brought
# back (it catches up, and the cluster verifies as converged), then the set taken down with its
# volumes. Every wait is bounded; the set is taken down on every exit.
#
# Not part of `make test`: building the image takes a release build inside a container and
# Debian packages from the network (scripts/image.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/podman-env.sh
source scripts/podman-env.sh
command -v podman-compose >/dev/null || PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet podman-compose
podman image exists localhost/device-registry:latest || bash scripts/image.sh

project=registry-compose-test
REGISTRY_CLUSTER_SECRET=$(openssl rand -hex 32)
REGISTRY_TOKEN_SECRET=$(openssl rand -hex 32)
export REGISTRY_CLUSTER_SECRET REGISTRY_TOKEN_SECRET
compose() { podman-compose --project-name "$project" --file deploy/compose.yaml "$@"; }
down() { compose down --volumes >/dev/null 2>&1 || true; }
trap 'down; rm -f "${podman_conf:-}"' EXIT
down

fail() {
  echo "compose test FAILED: $*" >&2
  # COMPOSE_KEEP=1 leaves the set up to look into, instead of taking it down.
  if [ -n "${COMPOSE_KEEP:-}" ]; then trap 'rm -f "${podman_conf:-}"' EXIT; fi
  for node in a b c; do echo "== node-$node" >&2; podman logs --tail 30 "${project}_node-${node}_1" 2>&1 | grep -v '"level":"info"' >&2 || true; done
  exit 1
}

# Waits (up to 60 s) until node N (1, 2, 3: node-a, -b, -c) answers /readyz on its published
# metrics port.
ready() {
  for _ in $(seq 1 120); do
    if curl -fsS "http://127.0.0.1:940$1/readyz" >/dev/null 2>&1; then return 0; fi
    sleep 0.5
  done
  fail "node $1 not ready within 60 s"
}

echo "== compose up (project $project)"
compose up -d --no-build >/dev/null
for n in 1 2 3; do ready "$n"; done
echo "three nodes ready"

# A token for this test, signed inside a container with the secret the nodes run with.
token=$(podman exec "${project}_node-a_1" registryctl token issue --all-vendors --role register --role read --role admin \
  --expires-in 1h --subject compose-test)
# registryctl inside node X's container, talking to that node.
ctl() {
  local node=$1
  shift
  podman exec -e REGISTRY_TOKEN="$token" "${project}_node-${node}_1" registryctl "$@" --endpoint 127.0.0.1:7400 -o json
}
field() { python3 -c "import json,sys; print(json.load(sys.stdin)$1)"; }

idfv=$(cat /proc/sys/kernel/random/uuid)
keychain=$(cat /proc/sys/kernel/random/uuid)
device=$(ctl a register --bundle com.compose.app1 --idfv "$idfv" --keychain "$keychain" | field "['deviceId']") \
  || fail "registration through node-a"
echo "registered through node-a: $device"

# node-b holds it once replicated: resolve it there (bounded retries).
resolved=""
for _ in $(seq 1 40); do
  resolved=$(ctl b device get "$device" | field "['deviceId']" 2>/dev/null) && break
  sleep 0.25
done
[ "$resolved" = "$device" ] || fail "node-b resolved '$resolved', not $device"
echo "resolved through node-b: $resolved"

echo "== stop node-c, register through node-a meanwhile, start node-c again"
compose stop node-c >/dev/null
sibling=$(ctl a register --bundle com.compose.app2 --idfv "$idfv" | field "['deviceId']") || fail "registration while node-c was down"
[ "$sibling" = "$device" ] || fail "the sibling app got $sibling, not $device"
compose start node-c >/dev/null
ready 3
started=$(date +%s)
verdict=$(ctl a cluster verify --wait 30) || fail "cluster verify after node-c came back exited $? after $(( $(date +%s) - started )) s: $verdict"
apps=$(ctl c device get "$device" | field "['apps'].__len__()")
[ "$apps" = 2 ] || fail "node-c holds $apps apps of $device after catching up, not 2"
echo "node-c caught up: the device and both its apps, and the cluster verifies as converged"

echo "== compose down"
down
echo "compose test passed"
