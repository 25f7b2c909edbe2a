#!/usr/bin/env bash
# The test bed's image: a Debian 12 root filesystem made with debootstrap, holding systemd,
# dbus, apt and a few real services, cached outside the clone in a directory keyed by what
# it holds (suite, packages, this script), so that a machine builds it once. Prints its path.
#
#   bash scripts/testbed/image.sh            # builds it if missing (as root), prints the path
#
# TOOLGATE_TESTBED_CACHE picks the cache (default /var/cache/toolgate-testbed). Installs
# debootstrap and systemd-container (Debian packages) when missing.
set -euo pipefail
cd "$(dirname "$0")/../.."
SUITE=bookworm
MIRROR="${TOOLGATE_TESTBED_MIRROR:-http://deb.debian.org/debian}"
# What an endpoint runs: systemd as PID 1 with dbus (systemctl, journald), apt and dpkg for
# packages, cron as a real service to ask about, CA certificates for the agent's TLS.
PACKAGES=systemd,systemd-sysv,dbus,apt,cron,ca-certificates,procps,iproute2
CACHE="${TOOLGATE_TESTBED_CACHE:-/var/cache/toolgate-testbed}"
key="$(cat "$0" | sha256sum | cut -c1-12)"
image="$CACHE/$SUITE-$key"
if [ -f "$image/.complete" ]; then echo "$image"; exit 0; fi

[ "$(id -u)" = 0 ] || { echo "testbed/image.sh: building the image needs root (debootstrap)" >&2; exit 1; }
if ! command -v debootstrap >/dev/null || ! command -v systemd-nspawn >/dev/null; then
  echo "testbed: installing debootstrap and systemd-container (Debian packages)" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap systemd-container >/dev/null
fi
mkdir -p "$CACHE"
# One build at a time (tests may ask for the image at once); the others then find it made.
exec 9>"$CACHE/.lock"
flock 9
if [ -f "$image/.complete" ]; then echo "$image"; exit 0; fi
work="$image.partial"
rm -rf "$work"
started=$(date +%s)
echo "testbed: building the $SUITE image in $image (once per machine)" >&2
debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$work" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1 \
  || { tail -20 "$CACHE/debootstrap.log" >&2; echo "testbed: debootstrap failed (log: $CACHE/debootstrap.log)" >&2; exit 1; }
# Each endpoint gets its own machine id and hostname when it boots (testbed/endpoint.sh).
: >"$work/etc/machine-id"
rm -f "$work/var/lib/dbus/machine-id"
echo localhost >"$work/etc/hostname"
# No consoles to log in on, nothing to wait for from a network manager: the endpoint's network
# is the host's loopback (or a veth a test gives it).
for unit in console-getty.service getty@.service systemd-networkd-wait-online.service; do
  ln -sf /dev/null "$work/etc/systemd/system/$unit"
done
# The image's apt lists are left empty: a test publishes its own repository and says so.
rm -rf "$work"/var/lib/apt/lists/* "$work"/var/cache/apt/archives/*.deb
touch "$work/.complete"
mv "$work" "$image"
echo "testbed: image built in $(( $(date +%s) - started )) s, $(du -sh "$image" | cut -f1)" >&2
echo "$image"
