#!/bin/sh
# bench_recompute.sh: the memory and the time --recompute saves and costs.
# A swarm of 4 nodes on 127.0.0.1, one per stage, with a window of W
# microbatches held at once (--max-inflight W, --micro W: the delay budget
# holds it from the start); stage 0 runs under /usr/bin/time, which gives its
# peak RSS and CPU seconds.  Prints one line per run:
#   mode W peak_rss_mib s_per_update cpu_s
# (s_per_update: the mean interval of the last stage's updates after the
# first; cpu_s: stage 0's user + system CPU seconds, data stage re-issues
# included).
# Usage: bench_recompute.sh [MODEL_ARGS] ; env WINDOWS ("4 8 16"), STEPS (6),
# MODES ("off on").  Run from the checkout's root after make.
BRIGADE=${BRIGADE:-build/brigade}
MODEL_ARGS=${1:-"--model gpt-small"}
WINDOWS=${WINDOWS:-"4 8 16"}
STEPS=${STEPS:-6}
MODES=${MODES:-"off on"}
T=$(mktemp -d /tmp/brigade-recompute.XXXXXX)
trap 'rm -rf "$T"' EXIT
export OPENBLAS_NUM_THREADS=1

# join_addr of the start event in metrics file $1, once written (empty after 60 s)
s_addr() {
    for _ in $(seq 600); do
        a=$(sed -n 's/.*"join_addr":"\([^"]*\)".*/\1/p' "$1" 2>/dev/null | head -n 1)
        [ -n "$a" ] && { echo "$a"; return; }
        sleep 0.1
    done
}

# one run: mode $1, window $2
s_run() {
    d=$T/$1.$2; mkdir -p "$d"
    set -- "$1" "$2" $(python3 "$(dirname "$0")/../harness" --free-ports 4)
    port=$3
    common="$MODEL_ARGS --stages 4 --steps $STEPS --micro $2 --max-inflight $2 --staleness predict --recompute $1"
    /usr/bin/time -f "%M %U %S" -o "$d/rss0" "$BRIGADE" node $common --stage 0 --listen "127.0.0.1:$port" \
        --metrics "$d/m0.jsonl" >"$d/out0" 2>&1 &
    creator=$!
    addr=$(s_addr "$d/m0.jsonl")
    pids=""
    for k in 1 2 3; do
        eval "p=\${$((k + 3))}"
        "$BRIGADE" node --stage $k --listen "127.0.0.1:$p" --join "$addr" --metrics "$d/m$k.jsonl" \
            >"$d/out$k" 2>&1 &
        pids="$pids $!"
    done
    wait $creator
    for p in $pids; do wait "$p"; done
    python3 - "$1" "$2" "$d" <<'EOF'
import json, sys
mode, w, d = sys.argv[1:4]
kb, user, sys_s = open(d + "/rss0").read().split()[-3:]
ts = [json.loads(l)["t"] for l in open(d + "/m3.jsonl") if '"event":"update"' in l]
per = (ts[-1] - ts[0]) / (len(ts) - 1) if len(ts) > 1 else float("nan")
print("%s %s %.1f %.3f %.1f" % (mode, w, int(kb) / 1024.0, per, float(user) + float(sys_s)))
EOF
}

for w in $WINDOWS; do
    for m in $MODES; do s_run "$m" "$w"; done
done
