#!/usr/bin/env bash
# Installs Debian's headless-capable Chromium and its chromedriver, which the browser tests
# (tests/test_report_browser.py, through Selenium) open report.html in. Both come from the
# machine's own Debian sources: nothing is downloaded at test time.
# Idempotent; needs root (CI and the development machines run as root). Skips quietly elsewhere.
set -euo pipefail
if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then
  exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  if [ "${CI:-}" = true ]; then  # CI must open the report: a skipped browser test hides a regression
    echo "install-chromium: not root or no apt-get, and CI=true needs chromium" >&2
    exit 1
  fi
  echo "install-chromium: not root or no apt-get; the browser tests will be skipped" >&2
  exit 0
fi
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
  chromium chromium-driver >/dev/null
