#!/usr/bin/env bash
# Lints the systemd units under deploy/ with `systemd-analyze verify` (Debian package systemd,
# installed here as root when missing). The units name /usr/local/bin/toolgate; the check runs
# on a copy naming the binary just built, so that it also checks the command line exists.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v systemd-analyze >/dev/null; then
  if [ "$(id -u)" = 0 ]; then
    echo "installing systemd (Debian package) for systemd-analyze"
    apt-get update -qq && apt-get install -y -qq systemd >/dev/null
  else
    echo "lint_deploy.sh: systemd-analyze is missing; install the systemd package" >&2; exit 1
  fi
fi
bash scripts/suite_build.sh
binary="$(pwd)/target/debug/toolgate"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
for unit in deploy/*.service; do
  sed "s|/usr/local/bin/toolgate|$binary|g" "$unit" >"$work/$(basename "$unit")"
done
# verify prints problems and exits non-zero on errors; warnings count too.
out="$(cd "$work" && SYSTEMD_LOG_LEVEL=warning systemd-analyze verify ./*.service 2>&1 || echo "exit status $?")"
if [ -n "$out" ]; then echo "$out" >&2; echo "deploy/: systemd-analyze verify found problems" >&2; exit 1; fi
# The commands the units run parse (the env files they read are the operator's).
TOOLGATE_SERVER=https://toolgate.example.com "$binary" agent run --help >/dev/null
"$binary" serve --help >/dev/null
echo "deploy/: $(ls deploy/*.service | wc -l) systemd units verified"
