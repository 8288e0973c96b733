#!/bin/sh
# bench_schedule_netns.sh: the schedules over real shaped links (issue 10):
# a 4-stage gpt-small swarm, batch 8 x micro 4, every node in its own
# network namespace behind a tbf-shaped uplink (tests/netns), gpipe against
# async (delay budget 1, ramp let in over the first 30 updates).  Run by
# tests/bench/run.sh or alone from the top of the tree; writes
# RESULTS_DIR/62-schedule-netns.md.  Skipped (a line in the fragment) where
# network namespaces are not available.
#
#   UP=20 STEPS=60 sh tests/bench/bench_schedule_netns.sh
set -u
BUILD=${BUILD:-build}
RESULTS_DIR=${RESULTS_DIR:-tests/bench/results}
UP=${UP:-20}
STEPS=${STEPS:-60}
FORTUNES=/usr/share/games/fortunes
out=$RESULTS_DIR/62-schedule-netns.md
W=$(mktemp -d "${TMPDIR:-/tmp}/brigade-schednet.XXXXXX")
trap 'rm -rf "$W"' EXIT INT TERM
mkdir -p "$RESULTS_DIR"

# run NAME SCHEDULE-ARGS: one swarm; its last stage's metrics in $W/NAME/n3
run() {
    sh tests/netns/swarm --nodes 4 --up "$UP" --links "$W/$1.links.json" --max 900 -- \
        --brigade "$BUILD/brigade" --stages 4 --dir "$W/$1" --timeout 840 --quiet \
        --creator-args "--model gpt-small --data text:$FORTUNES --batch 8 --micro 4 --steps $STEPS --seed 1 $2" \
        --expect-exit 0 >"$W/$1.out" 2>&1
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
    fi
} >"$out"
echo "wrote $out"
