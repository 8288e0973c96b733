#!/bin/sh
# bench_microbatch.sh: smaller microbatches on slow links (issue 10).  The
# same sequences per update cut into smaller microbatches (--batch B / p,
# --micro M x p) train the same model; a stage forwards a microbatch only
# once it has all of it, so each hop's serialization time shrinks with the
# microbatch.  Measures, for batch x micro = 8 x 4, 4 x 8, 2 x 16, 1 x 32:
#   1. real nodes (tests/harness on 127.0.0.1, --emu-latency-ms 50
#      --emu-bandwidth-mbit 20), gpt-tiny, 4 stages: tokens/s of gpipe and
#      async, and the last training loss;
#   2. brigade sim --compute real, the same links, 400 updates: validation
#      loss on the same 256 held-out sequences and simulated seconds;
#   3. the compute cost per token (bench_train, gpt-small, one thread,
#      forward + backward + optimizer step of one batch).
# Run by tests/bench/run.sh or alone from the top of the tree; writes
# RESULTS_DIR/63-microbatch.md.
#
#   STEPS=120 SIM_STEPS=400 sh tests/bench/bench_microbatch.sh
set -u
BUILD=${BUILD:-build}
RESULTS_DIR=${RESULTS_DIR:-tests/bench/results}
STEPS=${STEPS:-120}
SIM_STEPS=${SIM_STEPS:-400}
FORTUNES=/usr/share/games/fortunes
CONFIGS="8:4 4:8 2:16 1:32"
out=$RESULTS_DIR/63-microbatch.md
[ -x "$BUILD/brigade" ] || { echo "bench_microbatch: $BUILD/brigade is missing: run make" >&2; exit 1; }
if [ -d "$FORTUNES" ]; then DATA=text:$FORTUNES; else DATA=synthetic; fi
W=$(mktemp -d "${TMPDIR:-/tmp}/brigade-micro.XXXXXX")
trap 'rm -rf "$W"' EXIT INT TERM
mkdir -p "$RESULTS_DIR"
t_start=$(date +%s)

# swarm NAME SCHEDULE BATCH MICRO: real nodes; the last stage's metrics in $W/NAME/n3
swarm() {
    python3 tests/harness --stages 4 --brigade "$BUILD/brigade" --dir "$W/$1" --quiet --timeout 900 \
        --node-args "--threads 1" --emu "latency=50 bandwidth=20" \
        --creator-args "--model gpt-tiny --data $DATA --batch $3 --micro $4 --steps $STEPS --schedule $2 --seed 1" \
        --expect-exit 0 > "$W/$1.out" 2>&1 || echo "bench_microbatch: swarm $1 failed (see $W/$1.out)" >&2
}

# sim NAME SCHEDULE BATCH MICRO: validation on 256 sequences every 25 updates
sim() {
    "$BUILD/brigade" sim --nodes 4 --stages 4 --model gpt-tiny --data "$DATA" --compute real --threads 1 \
        --steps "$SIM_STEPS" --batch "$3" --micro "$4" --schedule "$2" --seed 1 --eval-every 25 \
        --eval-batches $((256 / $3)) --latency-ms 50:50 --bandwidth-mbit 20:20 --sim-seconds 100000 \
        --wall-seconds 3000 --metrics "$W/$1.jsonl" > "$W/$1.log" 2>&1 ||
        echo "bench_microbatch: sim $1 failed: $(tail -n 1 "$W/$1.log")" >&2
}

# rows KIND: the table rows, gpipe and async side by side, ratios against 8 x 4
rows() {
    python3 - "$W" "$1" $CONFIGS <<'PY'
import json, os, re, sys
w, kind, configs = sys.argv[1], sys.argv[2], sys.argv[3:]
def events(path):
    return [e for e in map(json.loads, open(path))] if os.path.exists(path) else []
def swarm(name):
    up = [e for e in events(os.path.join(w, name, "n3", "metrics.jsonl")) if e["event"] == "update"]
    if len(up) < 3: return None
    return (up[-1]["tokens"] - up[0]["tokens"]) / (up[-1]["t"] - up[0]["t"]), up[-1]["loss"]
def sim(name):
    ev = [e for e in events(os.path.join(w, name + ".jsonl")) if e["event"] == "eval"]
    log = open(os.path.join(w, name + ".log")).read() if os.path.exists(os.path.join(w, name + ".log")) else ""
    m = re.search(r"sim ([0-9.]+) s in", log)
    if not ev or not m: return None
    return float(m.group(1)), ev[-1]["val_loss"], ev[-1]["version"]
base = {}
for cfg in configs:
    b, m = cfg.split(":")
    cells = []
    for sched in ("gpipe", "async"):
        name = "%s_%s_%s_%s" % (kind, sched, b, m)
        if kind == "swarm":
            r = swarm(name)
            if r is None: cells.append("failed | "); continue
            base.setdefault(sched, r[0])
            cells.append("%.0f (%.2f x) | %.4f" % (r[0], r[0] / base[sched], r[1]))
        else:
            r = sim(name)
            if r is None: cells.append("failed | "); continue
            base.setdefault(sched, r[0])
            cells.append("%.1f (%.2f x) | %.4f" % (r[0], base[sched] / r[0], r[1]))
    print("| %s x %s | %s |" % (b, m, " | ".join(cells)))
PY
}

for cfg in $CONFIGS; do
    b=${cfg%:*} m=${cfg#*:}
    for sched in gpipe async; do
        swarm "swarm_${sched}_${b}_${m}" "$sched" "$b" "$m"
        sim "sim_${sched}_${b}_${m}" "$sched" "$b" "$m"
    done
done
cost=""
if [ -x "$BUILD/bench/bench_train" ]; then
    for b in 8 4 2 1; do
        ms=$("$BUILD/bench/bench_train" --models gpt-small --threads 1 --steps 12 --warmup 2 --rss-model none \
             --batch "$b" 2>/dev/null | sed -n 's/^kv what=train .* best_ms=\([0-9.]*\) .*/\1/p')
        cost="$cost $b:${ms:-0}"
    done
fi

{
    echo "## Smaller microbatches on slow links (issue 10)"
    echo
    echo "The same 32 sequences per update cut into smaller microbatches: every operation of the model is per"
    echo "sequence and the loss is a mean over the update's tokens, so the updates are the same (up to the order"
    echo "of float sums); a stage forwards a microbatch once it has all of it, so each hop's serialization time"
    echo "shrinks with it.  gpt-tiny on the fortunes text, 4 stages, int8 activations and gradients, seed 1, every"
    echo "link 50 ms one way and every uplink 20 Mbit/s."
    echo
    echo "Real nodes (tests/harness on 127.0.0.1, \`--emu-latency-ms 50 --emu-bandwidth-mbit 20\`), $STEPS updates:"
    echo "tokens/s of the last stage from its first update to its last (ratio against 8 x 4 of the same schedule)"
    echo "and its last training loss."
    echo
    echo "| batch x micro | gpipe tokens/s | gpipe loss | async tokens/s | async loss |"
    echo "|---|---:|---:|---:|---:|"
    rows swarm
    echo
    echo "\`brigade sim --compute real\` (compute modelled from FLOPs), $SIM_STEPS updates: simulated seconds (speed"
    echo "against 8 x 4 of the same schedule) and the validation loss at the last evaluation, on the same 256"
    echo "held-out sequences in every row."
    echo
    echo "| batch x micro | gpipe sim s | gpipe val loss | async sim s | async val loss |"
    echo "|---|---:|---:|---:|---:|"
    rows sim
    echo
    echo "Compute per token (bench_train, gpt-small, one thread, best of 12 steps of one batch: forward,"
    echo "backward, clipping, AdamW), against a batch of 8:"
    echo
    echo "| batch | best step ms | compute per token vs batch 8 |"
    echo "|---:|---:|---:|"
    echo "$cost" | tr ' ' '\n' | awk -F: 'NF == 2 { if ($1 == 8) base = $2 / 8
        if (base > 0 && $2 > 0) printf "| %s | %.1f | %.2f x |\n", $1, $2, ($2 / $1) / base }'
    echo
    echo "bench_microbatch: $(( $(date +%s) - t_start )) s, load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
} > "$out"
echo "wrote $out"
