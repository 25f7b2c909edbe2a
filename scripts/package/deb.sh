#!/usr/bin/env bash
# Debian packages of the agent and the server, from a build of this tree:
#   toolgate-agent_VERSION_ARCH.deb   /usr/bin/toolgate-agent, its systemd unit (made from
#                                     deploy/toolgate-agent.service), /etc/toolgate/agent.env
#                                     created on install (mode 0600: it holds the enrollment
#                                     token), state in /var/lib/toolgate-agent (0700)
#   toolgate_VERSION_ARCH.deb         /usr/bin/toolgate, deploy/toolgate.service, the settings
#                                     example; state in /var/lib/toolgate
#
#   scripts/package/deb.sh [--out DIR] [--agent-bin FILE] [--server-bin FILE] [--version V]
#                          [--only agent|server] [--compression xz|gzip|none]
#
# Without --agent-bin/--server-bin it builds both with `cargo build --profile dist`. The
# maintainer scripts enable the units; the agent starts once /etc/toolgate/agent.env names a
# server (write it before installing, or after and `systemctl start toolgate-agent`). An
# upgrade keeps the agent's state (its identity); `apt-get remove` stops it and keeps the
# state; `purge` deletes it and agent.env. Needs dpkg-deb and objcopy (binutils).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=target/debian; agent_bin=""; server_bin=""; version=""; only=""; compression=xz
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out="$2"; shift 2;;
    --agent-bin) agent_bin="$2"; shift 2;;
    --server-bin) server_bin="$2"; shift 2;;
    --version) version="$2"; shift 2;;
    --only) only="$2"; shift 2;;
    # The tests package debug builds twice per run: xz of those takes most of a minute.
    --compression) compression="$2"; shift 2;;
    *) echo "deb.sh: unknown argument $1 (--out DIR, --agent-bin FILE, --server-bin FILE, --version V, --only agent|server, --compression xz|gzip|none)" >&2; exit 2;;
  esac
done
case "$only" in ""|agent|server) ;; *) echo "deb.sh: --only agent or --only server" >&2; exit 2;; esac
case "$compression" in xz|gzip|none) ;; *) echo "deb.sh: --compression xz, gzip or none" >&2; exit 2;; esac
if { [ "$only" != server ] && [ -z "$agent_bin" ]; } || { [ "$only" != agent ] && [ -z "$server_bin" ]; }; then
  cargo build -q --locked --profile dist -p toolgate -p toolgate-agent --features toolgate-agent/cli --bin toolgate --bin toolgate-agent
  : "${agent_bin:=target/dist/toolgate-agent}" "${server_bin:=target/dist/toolgate}"
fi
# The crate's version unless told (the tests package one build as two versions to upgrade).
[ -n "$version" ] || version="$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)"
arch="$(dpkg --print-architecture)"
mkdir -p "$out"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT

# unit FILE BINARY COMMAND: the deploy/ unit with the packaged binary's command line, and a
# header that says where it came from instead of how to install it by hand.
unit() {
  echo "# Installed by the $(basename "$1" .service) package (from deploy/$(basename "$1") of toolgate $version)."
  # The leading comments say how to install it by hand; those inside stay (they say why).
  awk 'body || !/^#/ { body = 1; print }' "$1" | sed "s|^ExecStart=/usr/local/bin/toolgate $2|ExecStart=$3|"
}
for checked in "deploy/toolgate-agent.service:agent run" "deploy/toolgate.service:serve"; do
  grep -q "^ExecStart=/usr/local/bin/toolgate ${checked#*:}" "${checked%%:*}" ||
    { echo "deb.sh: ${checked%%:*} no longer starts /usr/local/bin/toolgate ${checked#*:}: update deb.sh" >&2; exit 1; }
done

# control DIR PACKAGE DESCRIPTION: the control file of a package whose tree is in DIR.
control() {
  local size; size="$(du -sk --exclude=DEBIAN "$1" | cut -f1)"
  cat >"$1/DEBIAN/control" <<CONTROL
Package: $2
Version: $version
Architecture: $arch
Maintainer: toolgate <toolgate@localhost>
Installed-Size: $size
Depends: libc6 (>= 2.36), ca-certificates
Section: admin
Priority: optional
Homepage: https://github.com/toolgate/toolgate
Description: $3
CONTROL
}

# --- toolgate-agent
if [ "$only" != server ]; then
a="$work/agent"
install -d "$a/DEBIAN" "$a/usr/bin" "$a/lib/systemd/system" "$a/usr/share/doc/toolgate-agent"
objcopy --strip-debug "$agent_bin" "$a/usr/bin/toolgate-agent"
chmod 0755 "$a/usr/bin/toolgate-agent"
unit deploy/toolgate-agent.service "agent run" /usr/bin/toolgate-agent >"$a/lib/systemd/system/toolgate-agent.service"
cat >"$a/usr/share/doc/toolgate-agent/agent.env.example" <<'ENV'
# /etc/toolgate/agent.env: the agent's settings (every flag of toolgate-agent is a TOOLGATE_*
# variable). The agent starts once TOOLGATE_SERVER is set.
TOOLGATE_SERVER=
# TOOLGATE_ENROLL_TOKEN=tge_...        first start only; remove it once enrolled
# TOOLGATE_CA=/etc/toolgate/ca.pem     trust only this CA for the server
ENV
control "$a" toolgate-agent "toolgate endpoint agent
 Enrolls with a toolgate server, keeps one outbound connection to it, reports
 this host (facts, inventory, services) and runs the instructions it is sent.
 It never listens and never runs a shell."
cat >"$a/DEBIAN/postinst" <<'SCRIPT'
#!/bin/sh
set -e
if [ "$1" = configure ]; then
  install -d -m 0755 /etc/toolgate
  if [ ! -e /etc/toolgate/agent.env ]; then
    install -m 0600 /usr/share/doc/toolgate-agent/agent.env.example /etc/toolgate/agent.env
  fi
  # It holds the enrollment token: root's alone, however it was written.
  chown root:root /etc/toolgate/agent.env
  chmod 0600 /etc/toolgate/agent.env
  install -d -m 0700 -o root -g root /var/lib/toolgate-agent
  if [ -d /run/systemd/system ]; then
    systemctl daemon-reload
    systemctl enable toolgate-agent.service >/dev/null 2>&1
    if grep -Eq '^TOOLGATE_SERVER=.+' /etc/toolgate/agent.env; then
      # On an upgrade this starts the new binary; the state directory (its identity) stays.
      systemctl restart toolgate-agent.service
    else
      echo "toolgate-agent: set TOOLGATE_SERVER in /etc/toolgate/agent.env, then: systemctl start toolgate-agent"
    fi
  fi
fi
SCRIPT
cat >"$a/DEBIAN/prerm" <<'SCRIPT'
#!/bin/sh
set -e
if [ "$1" = remove ] && [ -d /run/systemd/system ]; then
  systemctl disable --now toolgate-agent.service >/dev/null 2>&1 || true
fi
SCRIPT
cat >"$a/DEBIAN/postrm" <<'SCRIPT'
#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then systemctl daemon-reload || true; fi
if [ "$1" = purge ]; then
  rm -rf /var/lib/toolgate-agent
  rm -f /etc/toolgate/agent.env
  rmdir /etc/toolgate 2>/dev/null || true
fi
SCRIPT
chmod 0755 "$a/DEBIAN/postinst" "$a/DEBIAN/prerm" "$a/DEBIAN/postrm"
dpkg-deb --root-owner-group "-Z$compression" --build "$a" "$out/toolgate-agent_${version}_${arch}.deb" >/dev/null
echo "$out/toolgate-agent_${version}_${arch}.deb"
fi


# --- toolgate (the server)
[ "$only" != agent ] || exit 0
s="$work/server"
install -d "$s/DEBIAN" "$s/usr/bin" "$s/lib/systemd/system" "$s/usr/share/doc/toolgate"
objcopy --strip-debug "$server_bin" "$s/usr/bin/toolgate"
chmod 0755 "$s/usr/bin/toolgate"
unit deploy/toolgate.service serve "/usr/bin/toolgate serve" >"$s/lib/systemd/system/toolgate.service"
cp deploy/toolgate.env.example "$s/usr/share/doc/toolgate/toolgate.env.example"
control "$s" toolgate "toolgate MCP server for an endpoint fleet
 Serves a fleet's tools to AI assistants over the Model Context Protocol:
 every call passes its tier, RBAC, schema and, where policy says so, a
 human's approval, and is audited. Settings: /etc/toolgate/toolgate.env."
cat >"$s/DEBIAN/postinst" <<'SCRIPT'
#!/bin/sh
set -e
if [ "$1" = configure ] && [ -d /run/systemd/system ]; then
  systemctl daemon-reload
  systemctl enable toolgate.service >/dev/null 2>&1
  systemctl restart toolgate.service
fi
SCRIPT
cat >"$s/DEBIAN/prerm" <<'SCRIPT'
#!/bin/sh
set -e
if [ "$1" = remove ] && [ -d /run/systemd/system ]; then
  systemctl disable --now toolgate.service >/dev/null 2>&1 || true
fi
SCRIPT
cat >"$s/DEBIAN/postrm" <<'SCRIPT'
#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then systemctl daemon-reload || true; fi
if [ "$1" = purge ]; then rm -rf /var/lib/toolgate /var/lib/private/toolgate; fi
SCRIPT
chmod 0755 "$s/DEBIAN/postinst" "$s/DEBIAN/prerm" "$s/DEBIAN/postrm"
dpkg-deb --root-owner-group "-Z$compression" --build "$s" "$out/toolgate_${version}_${arch}.deb" >/dev/null
echo "$out/toolgate_${version}_${arch}.deb"
