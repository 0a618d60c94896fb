#!/usr/bin/env bash
# Installs Debian packages, running `apt-get update` once per machine first.
set -euo pipefail
sudo=""
[ "$(id -u)" = 0 ] || sudo=sudo
stamp=/tmp/.registry-apt-updated
if [ ! -f "$stamp" ]; then
  $sudo apt-get update -qq >/dev/null
  touch "$stamp"
fi
echo "installing $* (Debian packages)"
# apt's own chatter (debconf's notes among it) is shown only when the install fails.
log=$(mktemp)
if ! $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >"$log" 2>&1; then
  cat "$log" >&2
  rm -f "$log"
  exit 1
fi
rm -f "$log"
