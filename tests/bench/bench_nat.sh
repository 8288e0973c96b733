#!/bin/sh
# bench_nat.sh: nodes behind NAT over a real network (issue 13), run by
# tests/bench/run.sh or alone from the top of the tree, as root:
#
#   sh tests/bench/bench_nat.sh            BUILD=build RESULTS_DIR=tests/bench/results
#
# Writes RESULTS_DIR/70-nat.md.  Every swarm is a 4-stage tests/netns/swarm
# (one network namespace per node, every node's uplink shaped by tbf to
# MBIT, default 20 Mbit/s, the nodes' own --emu-latency-ms for delay) and
# the figure is the data stage's steady-state tokens/s (tests/netns/figures.py:
# start-up and the drain at the end left out).  Side by side, interleaved,
# REPS times each (median):
#   public    all four nodes public
#   nat       stages 1 and 3 behind NAT routers (reverse links), nothing but --join
#   relayed   stages 1 and 2 behind NAT: every message between them through a relay
#   emu       no namespaces: 127.0.0.1 with --emu-bandwidth-mbit MBIT on every node
#             instead of tbf (the in-process emulation against the real shaper)
# Without network namespaces (not root) the fragment says so and nothing runs.
set -u
BUILD=${BUILD:-build}
HERE=tests/bench
RESULTS_DIR=${RESULTS_DIR:-$HERE/results}
BRIGADE=$BUILD/brigade
REPS=${REPS:-2}
MBIT=${MBIT:-20}
LAT=${LAT:-10}
# MODEL:CODEC:STEPS, one table each: gpt-small with int8 is what a run looks
# like (here its compute is the bottleneck); gpt-tiny with fp32 puts about
# 20 Mbit/s on the busiest uplinks, so the links are
CONFIGS=${NAT_CONFIGS:-gpt-small:int8:60 gpt-tiny:fp32:150}
OUT=$RESULTS_DIR/70-nat.md
. tests/bench/netns_bench.sh
netns_bench_start bench_nat "Behind NAT: reverse links and relays (issue 13)" "$OUT"

# run NAME KIND REP CONFIG: one swarm; its figures in $WORK/NAME.REP.json
run() {
    name=$1 kind=$2 rep=$3 d=$WORK/$1.$3
    m=${4%%:*}; c=${4#*:}; st=${c#*:}; c=${c%%:*}
    CREATOR="--model $m --data $DATA --steps $st --seed 1 --batch 8 --micro 1 --codec $c --grad-codec $c"
    case "$kind" in
        public) homes= ;;
        nat) homes="--home 1 --home 3" ;;
        relayed) homes="--home 1 --home 2" ;;
    esac
    if [ "$kind" = emu ]; then
        python3 tests/harness --quiet --brigade "$BRIGADE" --stages 4 --dir "$d" --timeout 400 --summary "$d.summary" \
            --creator-args "$CREATOR" --node-args "--threads 1 --emu-latency-ms $LAT --emu-bandwidth-mbit $MBIT" \
            --expect-exit 0 >"$d.out" 2>&1
    else
        # shellcheck disable=SC2086
        sh tests/netns/swarm --nodes 4 --up "$MBIT" $homes --max 450 --sample "$d.samples" -- \
            --brigade "$BRIGADE" --stages 4 --dir "$d" --timeout 400 --summary "$d.summary" --quiet \
            --creator-args "$CREATOR" --node-args "--threads 1 --emu-latency-ms $LAT" \
            --expect-exit 0 >"$d.out" 2>&1
    fi
    rc=$?
    samples=; [ -s "$d.samples" ] && samples="--samples $d.samples --rate $MBIT"
    # shellcheck disable=SC2086
    python3 tests/netns/figures.py --summary "$d.summary" $samples > "$WORK/$name.$rep.json" 2>/dev/null || echo '{}' > "$WORK/$name.$rep.json"
    relay=$(sed -n 's/.*"event":"end".*"relay_bytes":\([0-9]*\).*/\1/p' "$d"/n*/metrics.jsonl 2>/dev/null | awk '{ s += $1 } END { print s + 0 }')
    echo "$rc $relay" > "$WORK/$name.$rep.rc"
    echo "bench_nat: $name rep $rep: exit $rc, $(python3 -c "import json,sys; print(json.load(open(sys.argv[1])).get('tokens_per_s'))" "$WORK/$name.$rep.json") tokens/s, relayed $relay B"
}

rep=1
while [ $rep -le "$REPS" ]; do
    for cf in $CONFIGS; do
        for k in public nat relayed emu; do run "$(echo "$cf" | tr ':' '-')-$k" "$k" $rep "$cf"; done
    done
    rep=$((rep + 1))
done

{
echo "## Behind NAT: reverse links and relays (issue 13)"
echo
echo "A 4-stage swarm (\`--batch 8 --micro 1\`, one process per node, \`--threads 1\`)"
echo "over tests/netns: every node in its own network namespace, its uplink shaped by tbf to $MBIT Mbit/s,"
echo "$LAT ms of delay from the nodes' own \`--emu-latency-ms\`. The figure is the data stage's tokens/s in"
echo "the steady state (tests/netns/figures.py), median of $REPS runs per row, all rows interleaved;"
echo "\`vs public\` is the ratio to the all-public row of the same codec, \`busiest uplink\` the largest"
echo "share of $MBIT Mbit/s that one node's tbf carried over the window (how much the links limit)."
echo "Measured in $(($(date +%s) - t_start)) s on $(nproc) cores shared with other work, so single runs vary."
echo
echo "How to read it: a node behind NAT uses one TCP connection per peer for both directions (the one it"
echo "opened), where two public nodes use two (each opens its own); with reverse links the"
echo "acknowledgements ride on data going the other way, so a link-bound swarm with half its nodes"
echo "behind NAT is not slower. A relayed pair's messages cross the relay's downlink and uplink once"
echo "more: the relay (the relaying peer with the lowest id, a public node of stage 0 or 3 here) carries"
echo "its own stage's traffic and the pair's, so when links are the bottleneck the relay's uplink is it."
for cf in $CONFIGS; do
    python3 - "$WORK" "$REPS" "$MBIT" "$(echo "$cf" | tr ':' '-')" "$cf" <<'PY'
import json, statistics, sys
work, reps, mbit, codec, cf = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
def fig(name):
    vals, relay, util, bad = [], [], [], 0
    for r in range(1, reps + 1):
        try:
            j = json.load(open("%s/%s-%s.%d.json" % (work, codec, name, r)))
            rc, rb = open("%s/%s-%s.%d.rc" % (work, codec, name, r)).read().split()
        except (OSError, ValueError):
            bad += 1; continue
        if rc != "0" or not j.get("tokens_per_s"):
            bad += 1; continue
        vals.append(j["tokens_per_s"]); relay.append(int(rb))
        u = [v for k, v in (j.get("util") or {}).items() if ">" not in k]
        if u: util.append(max(u))
    return (statistics.median(vals) if vals else None), vals, relay, util, bad
rows = {k: fig(k) for k in ("public", "nat", "relayed", "emu")}
pub = rows["public"][0]
def ratio(x):
    return "%.2f" % (x / pub) if x and pub else "n/a"
print()
m, c, st = cf.split(":")
print("### %s, %s activations and gradients, %s steps" % (m, c, st))
print()
print("| swarm | tokens/s | vs public | runs | busiest uplink | relayed bytes (per run) |")
print("|---|---:|---:|---|---:|---:|")
desc = {"public": "all public", "nat": "stages 1 and 3 behind NAT (reverse links)",
        "relayed": "stages 1 and 2 behind NAT (relayed between them)",
        "emu": "no namespaces: `--emu-bandwidth-mbit %s` in process instead of tbf" % mbit}
for k in ("public", "nat", "relayed", "emu"):
    med, vals, relay, util, bad = rows[k]
    runs = ", ".join("%.0f" % v for v in vals) + (" (%d failed)" % bad if bad else "")
    up = "%.0f%%" % (100 * statistics.median(util)) if util else "-"
    print("| %s | %s | %s | %s | %s | %s |" % (desc[k], "%.0f" % med if med else "n/a", ratio(med) if k != "public" else "1.00",
                                               runs, up, ", ".join(str(r) for r in relay) if k == "relayed" else "0"))
print()
e, p = rows["emu"][0], pub
if e and p:
    dev = (e - p) / p * 100
    print("The in-process emulation against the real shaper: %.0f tokens/s with `--emu-bandwidth-mbit %s`," % (e, mbit))
    print("%.0f over tbf at %s Mbit/s: %+.1f%% (%s the 10%% the emulation is meant to hold)." % (p, mbit, dev, "within" if abs(dev) <= 10 else "outside"))
PY
done
} > "$OUT"
echo "bench_nat: wrote $OUT"
