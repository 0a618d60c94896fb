#!/usr/bin/env bash
# Builds the container image localhost/device-registry:latest from deploy/container/Containerfile
# with podman (`make image`), then, with `--smoke`, runs it: a node with a volume, its health
# check, a registration through registryctl, and a restart that keeps the device.
#
# Base images: BUILDER_IMAGE and RUNTIME_IMAGE, when set, are used as they are (the official
# swift:6.3-bookworm and debian:bookworm-slim, say). Otherwise, since no image registry is
# reachable here, local stand-ins are made from Debian's packages with debootstrap and
# `podman import`: a runtime base with libprotobuf-c1, and a builder base with the Swift
# toolchain's system libraries, to which the build mounts this machine's /opt/swift and
# /opt/swift-packages read-only.
#
# The image is built in Docker format: OCI images cannot carry a HEALTHCHECK.
#
# Where the host's cgroups are hybrid (this VM's are), crun refuses them, so podman runs with runc
# and the host's limits. The smoke test's container uses the host's network, which needs no
# iptables (this VM has none).
set -euo pipefail
cd "$(dirname "$0")/.."
APT=scripts/apt-install.sh
# shellcheck source=scripts/podman-env.sh
source scripts/podman-env.sh
command -v debootstrap >/dev/null || $APT debootstrap
image=localhost/device-registry:latest
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
cache=${IMAGE_CACHE:-/var/tmp/registry-image}

# A base image from debootstrap: $1 name, $2 comma-separated packages, $3 extra setup script.
base_image() {
  local name=$1 packages=$2 setup=${3:-}
  if podman image exists "$name"; then return; fi
  local root="$cache/${name//[:\/]/-}"
  rm -rf "$root" && mkdir -p "$root"
  echo "== debootstrap $name (bookworm, minbase + $packages)"
  debootstrap --variant=minbase --include="$packages" bookworm "$root" "$mirror" >"$root.log" 2>&1 || { tail -20 "$root.log"; exit 1; }
  if [ -n "$setup" ]; then chroot "$root" /bin/sh -c "$setup"; fi
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/archives/*.deb
  tar -C "$root" -c . | podman import --change 'CMD ["/bin/bash"]' - "$name" >/dev/null
  rm -rf "$root"
}

volumes=()
if [ -z "${BUILDER_IMAGE:-}" ]; then
  BUILDER_IMAGE=localhost/registry-builder-base:bookworm
  base_image "$BUILDER_IMAGE" \
    binutils,git,libc6-dev,libcurl4-openssl-dev,libedit2,libgcc-12-dev,libpython3-dev,libsqlite3-0,libstdc++-12-dev,libxml2-dev,libz3-dev,pkg-config,tzdata,zlib1g-dev,libprotobuf-c-dev,libncurses6,ca-certificates \
    "git config --system url./opt/swift-packages/.insteadOf https://github.com/"
  volumes=(--volume /opt/swift:/opt/swift:ro --volume /opt/swift-packages:/opt/swift-packages:ro)
fi
if [ -z "${RUNTIME_IMAGE:-}" ]; then
  RUNTIME_IMAGE=localhost/registry-runtime-base:bookworm
  base_image "$RUNTIME_IMAGE" libprotobuf-c1,ca-certificates
fi

echo "== podman build $image (builder $BUILDER_IMAGE, runtime $RUNTIME_IMAGE); the release build takes several minutes"
podman build --format docker --network host "${volumes[@]}" --build-arg BUILDER_IMAGE="$BUILDER_IMAGE" --build-arg RUNTIME_IMAGE="$RUNTIME_IMAGE" \
  -f deploy/container/Containerfile -t "$image" .
podman image inspect "$image" --format 'built {{.Id}}: {{.Size}} bytes, user {{.Config.User}}, volumes {{.Config.Volumes}}'

[ "${1:-}" = --smoke ] || exit 0
echo "== smoke test: run the image, check its health, register, restart, find the device again"
name=registry-smoke-$$
volume=registry-smoke-$$
port=${SMOKE_PORT:-17400}
metrics=$((port + 1))
cleanup() { podman rm -f "$name" >/dev/null 2>&1 || true; podman volume rm -f "$volume" >/dev/null 2>&1 || true; rm -f "${podman_conf:-}"; }
trap cleanup EXIT
run() {
  podman run -d --name "$name" --network host -v "$volume:/data" -e REGISTRY_PORT="$port" -e REGISTRY_METRICS_PORT="$metrics" \
    -e REGISTRY_INSECURE=true -e REGISTRY_NODE_ID=smoke "$image" >/dev/null
  for _ in $(seq 1 60); do
    if podman healthcheck run "$name" >/dev/null 2>&1; then echo "healthy: $(podman inspect "$name" --format '{{.State.Health.Status}}')"; return; fi
    sleep 0.5
  done
  podman logs "$name" | tail -20; echo "the container never became healthy" >&2; exit 1
}
run
ctl=$(swift build -c release --show-bin-path 2>/dev/null)/registryctl
[ -x "$ctl" ] || ctl=$(swift build --show-bin-path)/registryctl
device=$("$ctl" register --endpoint 127.0.0.1:$port --bundle com.smoke.app --idfv 11111111-1111-4111-8111-111111111111 -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["deviceId"])')
echo "registered $device"
podman stop -t 30 "$name" >/dev/null && podman rm "$name" >/dev/null
run
"$ctl" device get "$device" --endpoint 127.0.0.1:$port -o json >/dev/null && echo "after a restart on the same volume, $device resolves"
podman exec "$name" id | grep -q 'uid=10001(registry)' && echo "runs as uid 10001 (registry)"
echo "smoke test passed"
