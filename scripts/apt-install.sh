#!/usr/bin/env bash
# Installs Debian packages, running `apt-get update` once per machine first.
set -euo pipefail
sudo=""
[ "$(id -u)" = 0 ] || sudo=sudo
stamp=/tmp/.registry-apt-updated
if [ ! -f "$stamp" ]; then
  $sudo apt-get update -qq
  touch "$stamp"
fi
echo "installing $*"
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
