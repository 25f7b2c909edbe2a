#!/usr/bin/env bash
# Runs a command with a throwaway PostgreSQL cluster: installs PostgreSQL from Debian's
# packages when missing (as root), creates a cluster in a temporary directory, starts it on a
# free local port, exports TOOLGATE_TEST_POSTGRES (a connection URL for a database the command
# may fill and empty), runs the command, and stops and deletes the cluster however it ends.
#
#   bash scripts/with_postgres.sh cargo test -p toolgate-store
#
# PostgreSQL refuses to run as root: as root the cluster belongs to the `postgres` user
# (created by the Debian package) and its programs run under `runuser`.
set -euo pipefail

pg_bin() {
  # Debian keeps the server programs under /usr/lib/postgresql/<major>/bin, off the PATH.
  local found
  found="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)"
  if [ -n "$found" ] && [ -x "$found/initdb" ]; then echo "$found"; return; fi
  if command -v initdb >/dev/null; then dirname "$(command -v initdb)"; return; fi
  return 1
}

if ! bin="$(pg_bin)"; then
  if [ "$(id -u)" != 0 ]; then
    echo "with_postgres: PostgreSQL is not installed; install the Debian package postgresql (or run as root)" >&2
    exit 1
  fi
  echo "with_postgres: installing PostgreSQL (Debian package postgresql)"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
  bin="$(pg_bin)"
fi

as_owner() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

cluster="$(mktemp -d /tmp/toolgate-pg.XXXXXX)"
[ "$(id -u)" = 0 ] && chown postgres: "$cluster"
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
log="$cluster/server.log"

stop() {
  as_owner "$bin/pg_ctl" -D "$cluster/data" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$cluster"
}
trap stop EXIT

as_owner "$bin/initdb" -D "$cluster/data" -U toolgate --auth=trust -E UTF8 --locale=C.UTF-8 >/dev/null
# Enough connections for two replicas and every test's pool at once; the socket stays in the
# cluster's directory, so nothing is written to /run.
as_owner "$bin/pg_ctl" -D "$cluster/data" -l "$log" -w -o \
  "-p $port -c listen_addresses=127.0.0.1 -c unix_socket_directories=$cluster -c max_connections=400 -c fsync=on" \
  start >/dev/null || { cat "$log" >&2; exit 1; }
as_owner "$bin/createdb" -h 127.0.0.1 -p "$port" -U toolgate toolgate

export TOOLGATE_TEST_POSTGRES="postgres://toolgate@127.0.0.1:$port/toolgate"
echo "with_postgres: PostgreSQL $("$bin/postgres" --version | awk '{print $3}') at $TOOLGATE_TEST_POSTGRES"
"$@"
