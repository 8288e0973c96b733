#!/bin/sh
# bench_slowlinks.sh: the default options over real slow uplinks (issue 51's
# speed target): a 4-stage gpt-small swarm, batch 8 x micro 4, every node in
# its own network namespace (tests/netns), every uplink shaped by tbf to
# each rate of RATES (0: unshaped), nothing else set (`--codec auto` and the
# adaptive window are the defaults).  The figure is the data stage's
# steady-state tokens/s (tests/netns/figures.py), median of REPS runs per
# row, rows interleaved; the ratio is to the unshaped row.  Beside it, from
# the metrics: the data stage's mean window, its mean round trip to stage 1
# and its estimate of microbatches queued, the busiest uplink's share of its
# rate, the codec changes and the I/O threads' CPU time.  Run by
# tests/bench/run.sh or alone from the top of the tree, as root; writes
# RESULTS_DIR/38-slowlinks.md.  Skipped (a line in the
# fragment) where network namespaces are not available.
#
#   RATES="0 20 5" REPS=2 STEPS=80 sh tests/bench/bench_slowlinks.sh
#   KEEP=1 ...: keep the runs' directories (the path is printed)
set -u
BUILD=${BUILD:-build}
RESULTS_DIR=${RESULTS_DIR:-tests/bench/results}
RATES=${RATES:-0 20 5}
REPS=${REPS:-2}
STEPS=${STEPS:-80}
EXTRA=${EXTRA:-}
OUT=$RESULTS_DIR/38-slowlinks.md
BRIGADE=$BUILD/brigade
. tests/bench/netns_bench.sh
netns_bench_start bench_slowlinks "Slow uplinks with the defaults (issue 51)" "$OUT"
load_start=$(cut -d' ' -f1-3 /proc/loadavg)

# run RATE REP: one swarm in $WORK/rRATE.REP; its figures in $WORK/rRATE.REP.json
run() {
    d=$WORK/r$1.$2
    up=; [ "$1" != 0 ] && up="--up $1"
    # shellcheck disable=SC2086
    sh tests/netns/swarm --nodes 4 $up --max 600 --sample "$d.samples" -- \
        --brigade "$BRIGADE" --stages 4 --dir "$d" --timeout 550 --summary "$d.summary" --quiet \
        --creator-args "--model gpt-small --data $DATA --batch 8 --micro 4 --steps $STEPS --seed 1 $EXTRA" \
        --expect-exit 0 >"$d.out" 2>&1
    echo $? > "$d.rc"
    rate=; [ "$1" != 0 ] && rate="--rate $1"
    # shellcheck disable=SC2086
    python3 tests/netns/figures.py --summary "$d.summary" --samples "$d.samples" $rate > "$d.json" 2>/dev/null \
        || echo '{}' > "$d.json"
    echo "bench_slowlinks: ${1} Mbit/s rep $2: exit $(cat "$d.rc"), $(python3 -c \
        "import json,sys; print(json.load(open(sys.argv[1])).get('tokens_per_s'))" "$d.json") tokens/s"
}

rep=1
while [ $rep -le "$REPS" ]; do
    for r in $RATES; do run "$r" $rep; done
    rep=$((rep + 1))
done

{
echo "## Slow uplinks with the defaults (issue 51)"
echo
echo "\`sh tests/bench/bench_slowlinks.sh\` (RATES=\"$RATES\" REPS=$REPS STEPS=$STEPS${EXTRA:+ EXTRA=\"$EXTRA\"}): a 4-stage"
echo "tests/netns/swarm, one node per network namespace, every uplink shaped by tbf to the rate (none"
echo "unshaped), \`--model gpt-small --batch 8 --micro 4 --steps $STEPS --seed 1\` and the defaults otherwise"
echo "(\`--codec auto\`, the adaptive window, \`--max-delay 2\` with predict+ramp).  tokens/s: the data"
echo "stage's steady state (tests/netns/figures.py), median of $REPS runs per row, rows interleaved."
echo "Beside it, over the same window: the data stage's mean window and its mean heartbeat round trip,"
echo "its estimate of microbatches queued, the busiest uplink's share of its rate, the codec changes"
echo "(\`codec\` events, all nodes, per run) and the CPU seconds of the nodes' I/O threads, where the"
echo "encoders run (per run, all nodes).  Measured in $(($(date +%s) - t_start)) s on $(nproc) cores shared with"
echo "other work (load average $load_start at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end)."
python3 - "$WORK" "$REPS" "$RATES" <<'PY'
import json, os, statistics, sys
w, reps, rates = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
def events(d, n):
    p = os.path.join(d, "n%d" % n, "metrics.jsonl")
    out = []
    if os.path.exists(p):
        for line in open(p):
            try: out.append(json.loads(line))
            except ValueError: pass
    return out
def one(r, k):
    d = "%s/r%s.%d" % (w, r, k)
    try:
        j = json.load(open(d + ".json")); rc = open(d + ".rc").read().strip()
    except (OSError, ValueError):
        return None
    if rc != "0" or not j.get("tokens_per_s"):
        return None
    u0 = [e for e in events(d, 0) if e.get("event") == "update"]
    mid = u0[len(u0) // 4: len(u0) - len(u0) // 5] or u0
    mean = lambda xs: sum(xs) / len(xs) if xs else float("nan")
    win = mean([e["window"] for e in mid if e.get("window") is not None])
    rtt = mean([e["rtt_ms"] for e in mid if e.get("rtt_ms") is not None])
    qd = mean([e["queued"] for e in mid if isinstance(e.get("queued"), (int, float))])
    sw = []
    for n in range(4):
        for e in events(d, n):
            if e.get("event") == "codec":
                sw.append((n, e.get("peer"), e.get("dir"), e.get("codec")))
    util = [v for key, v in (j.get("util") or {}).items() if ">" not in key]
    io = sum(e.get("cpu_io_s", 0) for n in range(4) for e in events(d, n) if e.get("event") == "end")
    return j["tokens_per_s"], win, rtt, qd, max(util) if util else None, len(sw), io
rows = {r: [x for x in (one(r, k) for k in range(1, reps + 1)) if x] for r in rates}
base = statistics.median([x[0] for x in rows.get("0", [])]) if rows.get("0") else None
print()
print("| uplinks | tokens/s | of unshaped | runs | window | RTT stage 0 (ms) | queued (microbatches) | busiest uplink | codec changes | I/O threads' CPU s |")
print("|---|---:|---:|---|---:|---:|---:|---:|---:|---:|")
for r in rates:
    xs = rows[r]
    if not xs:
        print("| %s | failed | | | | | | | | |" % ("unshaped" if r == "0" else r + " Mbit/s")); continue
    med = statistics.median([x[0] for x in xs])
    m = lambda i: statistics.mean([x[i] for x in xs])
    util = [x[4] for x in xs if x[4] is not None]
    print("| %s | %.0f | %s | %s | %.1f | %.0f | %.1f | %s | %s | %s |" % (
        "unshaped" if r == "0" else r + " Mbit/s", med, "%.2f" % (med / base) if base else "n/a",
        ", ".join("%.0f" % x[0] for x in xs) + ("" if len(xs) == reps else " (%d failed)" % (reps - len(xs))),
        m(1), m(2), m(3), "%.0f%%" % (100 * statistics.mean(util)) if util else "-",
        ", ".join(str(x[5]) for x in xs), ", ".join("%.0f" % x[6] for x in xs)))
print()
print("Targets (issue 51): at least 0.80 of unshaped at 5 Mbit/s, 0.95 at 20 Mbit/s.")
PY
} > "$OUT"
echo "bench_slowlinks: wrote $OUT"
