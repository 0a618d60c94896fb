# Sourced by scripts/image.sh and scripts/compose-test.sh: installs podman when missing, and
# where the host's cgroups are hybrid (this VM's are), which crun refuses, points podman at runc
# and at no default ulimits (runc may not raise them here), through a CONTAINERS_CONF file that
# is removed on exit.
command -v podman >/dev/null || scripts/apt-install.sh podman
if [ -d /sys/fs/cgroup/unified ] && [ "$(stat -fc %T /sys/fs/cgroup)" != cgroup2fs ]; then
  command -v runc >/dev/null || scripts/apt-install.sh runc
  podman_conf=$(mktemp)
  printf '[containers]\ndefault_ulimits = []\n[engine]\nruntime = "runc"\n' > "$podman_conf"
  export CONTAINERS_CONF="$podman_conf"
  trap 'rm -f "$podman_conf"' EXIT
fi
