#!/usr/bin/env bash
# Render a ccp-exp HTML report in headless Chromium and check that its plots are there.
#
#   scripts/report_screenshot.sh RESULTS_DIR_OR_REPORT_HTML [OUT.png]
#
# Installs Debian's `chromium` if it is missing (apt-get, as root or with sudo). Writes a
# 1280x2000 screenshot (default: report.png beside the report), dumps the DOM after rendering
# and checks that it holds as many <svg> elements as the report's plots/ directory has files
# (at least one), and that the PNG is not trivially small. Exits non-zero otherwise.
# Not part of `make test` (it needs a browser); run it by hand or in a job that has one.
set -euo pipefail

arg=${1:?usage: $0 RESULTS_DIR_OR_REPORT_HTML [OUT.png]}
if [ -d "$arg" ]; then report="$arg/report.html"; else report="$arg"; fi
[ -f "$report" ] || { echo "no report at $report" >&2; exit 1; }
report=$(cd "$(dirname "$report")" && pwd)/$(basename "$report")
dir=$(dirname "$report")
out=${2:-$dir/report.png}

browser=""
for b in chromium chromium-browser google-chrome; do
  command -v "$b" >/dev/null && { browser=$b; break; }
done
if [ -z "$browser" ]; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  echo "installing chromium (Debian package)"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium >/dev/null
  browser=chromium
fi

profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
flags=(--headless --no-sandbox --disable-gpu --disable-background-networking
       --disable-component-update --disable-sync --no-first-run
       --user-data-dir="$profile")

"$browser" "${flags[@]}" --screenshot="$out" --window-size=1280,2000 "file://$report" 2>/dev/null
dom=$("$browser" "${flags[@]}" --dump-dom "file://$report" 2>/dev/null)

svgs=$(grep -o '<svg' <<<"$dom" | wc -l)
expected=$(find "$dir/plots" -name '*.svg' 2>/dev/null | wc -l)
size=$(stat -c %s "$out" 2>/dev/null || echo 0)
echo "report:     $report"
echo "screenshot: $out ($size bytes)"
echo "plots:      $svgs <svg> elements in the rendered DOM, $expected files in plots/"
fail=0
if [ "$svgs" -lt 1 ] || [ "$svgs" -lt "$expected" ]; then
  echo "FAIL: the rendered report lacks plots" >&2; fail=1
fi
if [ "$size" -lt 20000 ]; then
  echo "FAIL: the screenshot is suspiciously small" >&2; fail=1
fi
grep -q '<table' <<<"$dom" || { echo "FAIL: no summary table" >&2; fail=1; }
[ "$fail" -eq 0 ] && echo "ok"
exit "$fail"
