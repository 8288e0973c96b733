#!/bin/sh
# bench_statuspage.sh (run by tests/bench/run.sh): a screenshot of a live
# node's --http status page with headless Chromium, when Chromium is
# installed (Debian package chromium), into tests/bench/status_page.png and a
# results fragment that shows it.  Without Chromium it says so and skips.
BUILD=${BUILD:-build}
RESULTS_DIR=${RESULTS_DIR:-tests/bench/results}
OUT=tests/bench/status_page.png
CHROME=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$CHROME" ]; then
    echo "bench_statuspage: chromium not installed (apt-get install chromium); no screenshot"
    exit 0
fi
W=$(mktemp -d /tmp/brigade-page.XXXXXX)
PID=""
trap '[ -n "$PID" ] && kill -9 $PID 2>/dev/null; rm -rf "$W"' EXIT
set -- $(python3 tests/harness --free-ports 2); P=$1 H=$2
"$BUILD/brigade" node --listen 127.0.0.1:$P --http $H --model gpt-tiny --data synthetic --stages 1 \
    --steps 100000 --threads 1 --metrics "$W/m.jsonl" 2>"$W/n.err" &
PID=$!
sleep 8   # long enough for a loss curve
timeout 60 "$CHROME" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$W/profile" --window-size=1000,900 --screenshot="$OUT" "http://127.0.0.1:$H/" \
    >"$W/chrome.log" 2>&1
kill $PID 2>/dev/null; wait $PID 2>/dev/null; PID=""
if [ ! -s "$OUT" ]; then
    echo "bench_statuspage: no screenshot: $(tail -n 2 "$W/chrome.log")"
    exit 1
fi
{
    echo "## Status page"
    echo
    echo "A single-stage node (gpt-tiny, synthetic) after ~8 s of training, its \`--http\` page"
    echo "rendered by headless Chromium ($("$CHROME" --version 2>/dev/null | head -n 1))."
    echo
    echo "![status page](status_page.png)"
} > "$RESULTS_DIR/50-statuspage.md"
echo "bench_statuspage: wrote $OUT"
