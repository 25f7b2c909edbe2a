#!/usr/bin/env bash
# One endpoint of the test bed: the image (testbed/image.sh) booted with systemd-nspawn, systemd
# as its PID 1, with its own hostname, machine id and writable layer (an overlay in DIR: what
# it changes survives its own reboots and never reaches the image or another endpoint).
#
#   endpoint.sh run DIR NAME     boots it and stays in the foreground, booting it again after
#                                a `systemctl reboot` inside (systemd-nspawn exits 133); ends
#                                when the endpoint powers off, or on SIGTERM (powers it off)
#   endpoint.sh exec DIR CMD...  runs CMD inside the running endpoint (its namespaces, a clean
#                                environment), with its exit status
#   endpoint.sh wait DIR         waits until systemd inside says the boot finished
#
# The build host has no systemd of its own, so the container is neither registered with
# machined nor given a scope (--register=no --keep-unit). The endpoint shares the host's
# network: it reaches a server on 127.0.0.1.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cmd="${1:?usage: endpoint.sh run|exec|wait DIR ...}"; dir="${2:?usage: endpoint.sh $cmd DIR ...}"; shift 2

leader() { # the endpoint's PID 1, seen from the host
  local spawn; spawn="$(cat "$dir/nspawn.pid" 2>/dev/null)" || return 1
  pgrep -P "$spawn" | head -1
}

case "$cmd" in
run)
  name="${1:?usage: endpoint.sh run DIR NAME}"
  image="$(bash "$here/image.sh")"
  mkdir -p "$dir/upper" "$dir/work" "$dir/root"
  mountpoint -q "$dir/root" ||
    mount -t overlay overlay -o "lowerdir=$image,upperdir=$dir/upper,workdir=$dir/work" "$dir/root"
  echo "$name" >"$dir/root/etc/hostname"
  # Made once: the endpoint keeps its machine id across reboots, like a host.
  [ -s "$dir/root/etc/machine-id" ] || tr -d - </proc/sys/kernel/random/uuid >"$dir/root/etc/machine-id"
  spawn=""
  stop() {
    # Power off: SIGRTMIN+4 to the endpoint's systemd; nspawn exits when it has.
    local pid; pid="$(leader || true)"
    [ -n "$pid" ] && kill -s SIGRTMIN+4 "$pid" 2>/dev/null || true
    [ -n "$spawn" ] && wait "$spawn" 2>/dev/null || true
    umount "$dir/root" 2>/dev/null || true
    rm -f "$dir/nspawn.pid"
    forget_cgroups
    exit 0
  }
  forget_cgroups() {
    for c in "${cgroups[@]}"; do find "$c" -depth -type d -exec rmdir {} \; 2>/dev/null || true; done
  }
  trap stop TERM INT
  # A cgroup of its own in every hierarchy that counts CPU and memory, so that what the agent
  # inside measures (docs/experience.md) is this endpoint's, not the machine's or another's:
  # nspawn makes its payload and supervisor below the cgroup it starts in, and without a host
  # systemd every endpoint would start in the same one.
  own="toolgate-testbed-$(printf '%s' "$(realpath "$dir")" | sha256sum | cut -c1-12)"
  cgroups=()
  for hierarchy in /sys/fs/cgroup /sys/fs/cgroup/unified /sys/fs/cgroup/systemd /sys/fs/cgroup/cpuacct /sys/fs/cgroup/cpu,cpuacct /sys/fs/cgroup/memory; do
    [ -f "$hierarchy/cgroup.procs" ] && [ -w "$hierarchy" ] || continue
    mkdir -p "$hierarchy/$own" 2>/dev/null && cgroups+=("$hierarchy/$own")
  done
  # An endpoint's CPU weight is that of eight ordinary processes: on a build machine busy with
  # other tests (two cores in CI) a program it runs flat out still gets a CPU of its own, as on
  # a real host, instead of a share as thin as one process among the machine's.
  for c in "${cgroups[@]}"; do
    [ -f "$c/cpu.shares" ] && echo 8192 >"$c/cpu.shares" 2>/dev/null || true
    [ -f "$c/cpu.weight" ] && echo 800 >"$c/cpu.weight" 2>/dev/null || true
  done
  # CAP_SYS_PACCT: the agent counts process exits and crashes with the container's own process
  # accounting, as an administrator would let it (docs/experience.md, "Process exits").
  while true; do
    # Only nspawn goes in (not this shell): a cgroup v2 parent must hold no process of its own.
    DIR="$dir" NAME="$name" sh -c 'for c in "$@"; do echo $$ >"$c/cgroup.procs" 2>/dev/null || true; done; exec "$0" --quiet \
      --directory="$DIR/root" --machine="$NAME" --boot --register=no --keep-unit --console=read-only \
      --capability=CAP_SYS_PACCT' \
      "$(command -v systemd-nspawn)" "${cgroups[@]}" >>"$dir/console.log" 2>&1 &
    spawn=$!
    echo "$spawn" >"$dir/nspawn.pid"
    status=0; wait "$spawn" || status=$?
    [ "$status" = 133 ] || break # 133: rebooted from inside
    echo "endpoint $name: rebooting" >>"$dir/console.log"
  done
  umount "$dir/root" 2>/dev/null || true
  rm -f "$dir/nspawn.pid"
  forget_cgroups
  exit "$status"
  ;;
exec)
  pid="$(leader)" || { echo "endpoint.sh: $dir is not running" >&2; exit 1; }
  exec nsenter --target "$pid" --all -- env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 "$@"
  ;;
wait)
  for _ in $(seq 600); do
    if pid="$(leader)" && [ -n "$pid" ]; then
      state="$(nsenter --target "$pid" --all -- systemctl is-system-running 2>/dev/null || true)"
      case "$state" in running|degraded) echo "$state"; exit 0;; esac
    fi
    sleep 0.1
  done
  echo "endpoint.sh: $dir did not finish booting in 60 s (console: $dir/console.log)" >&2; exit 1
  ;;
*) echo "endpoint.sh: unknown command $cmd" >&2; exit 2 ;;
esac
