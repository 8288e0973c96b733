#!/bin/sh
# bench_schedule_netns.sh: the schedules over real shaped links (issue 10):
# a 4-stage gpt-small swarm, batch 8 x micro 4, every node in its own
# network namespace behind a tbf-shaped uplink (tests/netns), gpipe against
# async (the default delay budget, ramp and prediction); then the window on
# a link-bound path: 5 Mbit/s uplinks, fp32 tensors, full budget, the window
# fixed at 8 (2 x stages) against the adaptive one, with the heartbeat round
# trips each stage measured to the next.  Run by
# tests/bench/run.sh or alone from the top of the tree; writes
# RESULTS_DIR/62-schedule-netns.md.  Skipped (a line in the fragment) where
# network namespaces are not available.
#
#   UP=20 STEPS=60 SLOW_UP=5 SLOW_STEPS=16 sh tests/bench/bench_schedule_netns.sh
set -u
BUILD=${BUILD:-build}
RESULTS_DIR=${RESULTS_DIR:-tests/bench/results}
UP=${UP:-20}
STEPS=${STEPS:-60}
SLOW_UP=${SLOW_UP:-5}
SLOW_STEPS=${SLOW_STEPS:-16}
FORTUNES=/usr/share/games/fortunes
out=$RESULTS_DIR/62-schedule-netns.md
W=$(mktemp -d "${TMPDIR:-/tmp}/brigade-schednet.XXXXXX")
trap 'rm -rf "$W"' EXIT INT TERM
mkdir -p "$RESULTS_DIR"

# run NAME SCHEDULE-ARGS [UP STEPS]: one swarm; node I's metrics in $W/NAME/nI
run() {
    sh tests/netns/swarm --nodes 4 --up "${3:-$UP}" --links "$W/$1.links.json" --max 1500 -- \
        --brigade "$BUILD/brigade" --stages 4 --dir "$W/$1" --timeout 1400 --quiet \
        --creator-args "--model gpt-small --data text:$FORTUNES --batch 8 --micro 4 --steps ${4:-$STEPS} --seed 1 $2" \
        --expect-exit 0 >"$W/$1.out" 2>&1
}

# rtt_row NAME LABEL: tokens/s of the last stage, stage 0's mean window and each stage's mean heartbeat
# round trip to the next one (from the update events after the first third of the run)
rtt_row() {
    python3 - "$W/$1" "$2" "$SLOW_UP" <<'PY'
import json, sys, os
d, label = sys.argv[1], sys.argv[2]
def updates(n):
    p = os.path.join(d, n, "metrics.jsonl")
    return [e for e in map(json.loads, open(p)) if e["event"] == "update"] if os.path.exists(p) else []
up = updates("n3")
if len(up) < 3:
    print("| %s | run failed | | | | |" % label); sys.exit(0)
rate = (up[-1]["tokens"] - up[0]["tokens"]) / (up[-1]["t"] - up[0]["t"])
cells = []
for n in ("n0", "n1", "n2"):
    u = updates(n)
    r = [e["rtt_ms"] for e in u[len(u) // 3:] if e.get("rtt_ms") is not None]
    cells.append("%.2f" % (sum(r) / len(r) / 1e3) if r else "-")
u0 = updates("n0")
w = [e["window"] for e in u0[len(u0) // 3:]]
# one activation tensor as sent (stage 0 sends little else), serialized at the uplink's rate
per_mb = (u0[-1]["bytes_sent"] - u0[0]["bytes_sent"]) / (4.0 * (u0[-1]["version"] - u0[0]["version"])) if len(u0) > 1 else 0
bound = 2 * per_mb * 8 / (float(sys.argv[3]) * 1e6)
print("| %s | %.0f | %.1f | %s | %.2f |" % (label, rate, sum(w) / len(w) if w else 0, " | ".join(cells), bound))
PY
}

# row NAME LABEL: tokens/s of the last stage after its first update, the mean round trip stage 0 saw to
# stage 1 at the end and the largest weight delay of any update
row() {
    python3 - "$W/$1" "$2" <<'PY'
import json, sys, os
d, label = sys.argv[1], sys.argv[2]
def events(n):
    p = os.path.join(d, n, "metrics.jsonl")
    return [json.loads(l) for l in open(p)] if os.path.exists(p) else []
up = [e for e in events("n3") if e["event"] == "update"]
if len(up) < 3:
    print("| %s | run failed | | | |" % label); sys.exit(0)
a, b = up[0], up[-1]
rate = (b["tokens"] - a["tokens"]) / (b["t"] - a["t"])
u0 = [e for e in events("n0") if e["event"] == "update"]
dmax = max([e.get("delay_max", 0) for n in ("n0", "n1", "n2", "n3") for e in events(n) if e["event"] == "update"] or [0])
print("| %s | %.0f | %.1f | %d | %s |" % (label, rate, b["t"], dmax, u0[-1].get("window", "-") if u0 else "-"))
PY
}

{
    echo "## The schedules over real shaped links (issue 10)"
    echo
    if ! sh -c '. tests/netns/lib.sh; netns_check' >/dev/null 2>&1; then
        echo "Skipped: network namespaces are not available here."
    else
        run gpipe "--schedule gpipe"
        run async "--schedule async"
        run async-none "--schedule async --staleness none"
        echo "gpt-small, 4 stages, one node per network namespace, every uplink shaped by tbf to $UP Mbit/s, int8"
        echo "activations and gradients, batch 8 x micro 4, $STEPS updates; tokens/s of the last stage from its first"
        echo "update to its last (load average at the start: $(cut -d' ' -f1-3 /proc/loadavg))."
        echo
        echo "| schedule | tokens/s | seconds | largest weight delay | stage-0 window |"
        echo "|---|---:|---:|---:|---:|"
        row gpipe "gpipe"
        row async "async (default: --max-delay 2, predict+ramp)"
        row async-none "async, --max-delay 2, no ramp or prediction"
        fp="--codec fp32 --grad-codec fp32 --schedule async --staleness predict"
        run slow-fixed "$fp --max-inflight 8" "$SLOW_UP" "$SLOW_STEPS"
        run slow-auto "$fp" "$SLOW_UP" "$SLOW_STEPS"
        echo
        echo "The window on a link-bound path: the same swarm with $SLOW_UP Mbit/s uplinks, fp32 activations and gradients,"
        echo "the full delay budget from the start (--staleness predict), $SLOW_STEPS updates; the heartbeat round trip each"
        echo "stage measured to the next (mean over the update events after the first third), against a bound of"
        echo "2 x (unloaded round trip + one tensor's serialization at $SLOW_UP Mbit/s)."
        echo
        echo "| window | tokens/s | stage-0 window (mean) | RTT stage 0 (s) | stage 1 | stage 2 | bound (s) |"
        echo "|---|---:|---:|---:|---:|---:|---:|"
        rtt_row slow-fixed "fixed at 8 (--max-inflight 8)"
        rtt_row slow-auto "adaptive (default)"
    fi
} >"$out"
echo "wrote $out"
