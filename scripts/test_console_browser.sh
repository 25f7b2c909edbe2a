#!/usr/bin/env bash
# The console in a real browser: Debian's chromium and chromium-driver (installed here as root
# when missing), selenium and pyotp from PyPI in a venv of their own, the binary just built.
#   scripts/test_console_browser.sh [--screenshots docs/console]
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
  if [ "$(id -u)" = 0 ]; then
    echo "installing chromium and chromium-driver (Debian packages) for the console's browser test"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
  else
    echo "test_console_browser.sh: needs chromium and chromium-driver (apt-get install chromium chromium-driver)" >&2; exit 1
  fi
fi
VENV="${CONSOLE_TEST_VENV:-target/console-venv}"
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q "selenium==4.27.1" "pyotp==2.9.0"
fi
bash scripts/suite_build.sh
"$VENV/bin/python" scripts/console/browser_test.py target/debug/toolgate "$@"
