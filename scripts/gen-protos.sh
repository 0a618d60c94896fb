#!/usr/bin/env bash
# Regenerates the committed protobuf-c code from Protos/ into DEST
# (default Sources/CRegistryProto): sources in DEST, headers in DEST/include.
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")/.."
dest=${1:-Sources/CRegistryProto}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd Protos && protoc-c --c_out="$tmp" registry/v1/*.proto)
rm -rf "$dest/registry" "$dest/include/registry"
mkdir -p "$dest/registry/v1" "$dest/include/registry/v1"
mv "$tmp"/registry/v1/*.pb-c.c "$dest/registry/v1/"
mv "$tmp"/registry/v1/*.pb-c.h "$dest/include/registry/v1/"
# SwiftPM builds the module from the include/ directory itself (umbrella directory).
