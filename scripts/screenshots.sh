#!/usr/bin/env bash
# The screenshots of the documentation site in docs/assets/screenshots/: the site built strictly
# into a scratch folder, served on loopback, and its start page and one command page (bench)
# taken in headless Chromium (Debian's `chromium` package) at 1280x757, the site's light theme;
# then the report's pictures, taken by the suite's own browser test (tests/test_report_browser.py)
# of a real run's report.html at 1280x900.
#
#   bash scripts/screenshots.sh        # after `make install`; needs `chromium` and `chromedriver`
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
command -v chromium >/dev/null && command -v chromedriver >/dev/null ||
  { echo "screenshots: no chromium or chromedriver here (bash scripts/install-chromium.sh)" >&2
    exit 1; }
work=$(mktemp -d)
trap 'kill "${server:-0}" 2>/dev/null || true; rm -rf "$work"' EXIT
NO_MKDOCS_2_WARNING=1 "$VENV/bin/mkdocs" build --strict --quiet --site-dir "$work/site"
port=$("$VENV/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# served, not opened as file://: Material drops its search box from a page it cannot serve search
# to, and the picture should be the site `make docs` shows
"$VENV/bin/python" -m http.server "$port" --bind 127.0.0.1 --directory "$work/site" \
  >"$work/server.log" 2>&1 &
server=$!
for _ in $(seq 50); do
  "$VENV/bin/python" -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$port/')" \
    2>/dev/null && break
  sleep 0.1
done
shoot() {  # URL path, file name
  local partial="docs/assets/screenshots/.$2.partial.png"
  # a page the site lacks is an error, not a screenshot of a 404
  "$VENV/bin/python" -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$port/$1')" ||
    { echo "screenshots: the site has no page /$1" >&2; exit 1; }
  chromium --headless=new --no-sandbox --disable-gpu --hide-scrollbars --window-size=1280,757 \
    --user-data-dir="$work/profile" --screenshot="$partial" \
    "http://127.0.0.1:$port/$1" >"$work/chromium.log" 2>&1 ||
    { cat "$work/chromium.log" >&2; rm -f "$partial"; exit 1; }
  mv "$partial" "docs/assets/screenshots/$2.png"  # whole or not at all
  echo "screenshots: docs/assets/screenshots/$2.png from /$1"
}
shoot "" start
shoot "commands/bench.html" command
# the test writes each picture under a temporary name and renames it: whole or not at all
EDGEKIT_SCREENSHOT_DIR="$PWD/docs/assets/screenshots" "$VENV/bin/pytest" -p no:xdist -q \
  tests/test_report_browser.py
echo "screenshots: docs/assets/screenshots/report.png and report-gallery.png from the browser test"
