#!/bin/sh
# bench_scale.sh: the swarm at scale in `brigade sim` (issue 12), run by
# tests/bench/run.sh or alone from the top of the tree:
#
#   sh tests/bench/bench_scale.sh                 BUILD=build RESULTS_DIR=tests/bench/results
#   SCALE_LONG=1 sh tests/bench/bench_scale.sh    also 1000 nodes for a whole simulated hour (long:
#                                                 a paragraph with its numbers goes to
#                                                 RESULTS_DIR/scale-1000x1h.txt, quoted by every later run)
#
# Writes RESULTS_DIR/75-scale.md and, when gnuplot is installed,
# tests/bench/scale.png.  gpt-small cut into 8 stages (the default options
# a user runs, --micro included: 4 x stages), modelled compute
# (50 GFLOP/s per node), int8 codecs, 20..50 ms links, 100 Mbit/s uplinks,
# seed 1; N = 10, 100, 1000 nodes, churn 10% and 1% of the nodes per
# simulated hour (--churn 0.1 and 0.01: leaves, half crashes and half
# goodbyes, each replaced by a new joiner).  N = 10 and 100 run a simulated
# hour; N = 1000 runs SCALE_1000_S simulated seconds (default 300) to keep
# `make bench` bounded.  Speeds are simulated seconds per CPU second of the
# simulator (the machine is shared: CPU time is the fair measure).
set -u
BUILD=${BUILD:-build}
HERE=tests/bench
RESULTS_DIR=${RESULTS_DIR:-$HERE/results}
BRIGADE=$BUILD/brigade
H1000=${SCALE_1000_S:-300}
mkdir -p "$RESULTS_DIR"
[ -x "$BRIGADE" ] || { echo "bench_scale: $BRIGADE is missing: run make" >&2; exit 1; }
WORK=$(mktemp -d "${TMPDIR:-/tmp}/brigade-scale.XXXXXX")
trap 'rm -rf "$WORK"' EXIT INT TERM
cp "$BRIGADE" "$WORK/brigade" && BRIGADE=$WORK/brigade
t_start=$(date +%s)
C="--stages 8 --model gpt-small --compute model --seed 1 --wall-seconds 7200"

# fields OUT: one line "learn_s ctl_B gossip_B hb_B mb_s bound_pct lost dup sim_per_cpu sim_s wall_s cpu_s steady_mb_s steady_pct"
fields() {
    python3 - "$1" <<'PY'
import re, sys
t = open(sys.argv[1]).read()
def num(pat, d="nan"):
    m = re.search(pat, t)
    return m.group(1) if m else d
gossip = float(num(r"per node-second: gossip ([0-9.]+) B"))
hb = float(num(r"heartbeats ([0-9.]+) B \("))
print(num(r"learned_s=([0-9.]+)", num(r"every stage ([0-9.]+) s after")),
      "%.0f" % (gossip + hb), "%.0f" % gossip, "%.0f" % hb,
      num(r"last stage, ([0-9.]+) per simulated s"), num(r"([0-9.]+)% of the compute bound"),
      num(r" lost (\d+),"), num(r"duplicated (\d+),"), num(r"speed ([0-9.]+) simulated s per CPU s"),
      num(r"sim ([0-9.]+) s in"), num(r"in ([0-9.]+) s wall"), num(r"\(([0-9.]+) CPU s\)"),
      num(r"steady state [^:]*: \d+ microbatches at the last stage, ([0-9.]+) per"),
      num(r"steady state .*?([0-9.]+)% of the compute bound"))
PY
}

# run N CHURN SECONDS: one simulation; appends a row to $WORK/rows
run() {
    out=$WORK/n$1-c$2.out
    nice -n 10 "$BRIGADE" sim --nodes "$1" $C --churn "$2" --sim-seconds "$3" >"$out" 2>&1
    echo "$1 $2 $3 $? $(fields "$out")" >> "$WORK/rows"
    cp "$WORK/rows" "$RESULTS_DIR/scale-rows.txt"
    echo "bench_scale: $1 nodes, churn $2/h, $3 s: $(tail -n 1 "$out")"
}

for c in 0.1 0.01; do
    run 10 $c 3600
    run 100 $c 3600
    run 1000 $c "$H1000"
done
if [ -n "${SCALE_LONG:-}" ]; then
    nice -n 10 "$BRIGADE" sim --nodes 1000 $C --sim-seconds 3600 >"$WORK/long.out" 2>&1
    echo "1000 nodes for a whole simulated hour (no churn; \`SCALE_LONG=1\`, $(date -u '+%Y-%m-%d %H:%M UTC'), exit $?):" \
        "$(grep -E '^sim: ([0-9]+ micro|[0-9]+ nodes)' "$WORK/long.out" | sed 's/^sim: //' | tr '\n' ' ')" > "$RESULTS_DIR/scale-1000x1h.txt"
fi

python3 - "$WORK/rows" "$WORK" "$RESULTS_DIR/scale-1000x1h.txt" > "$WORK/frag.md" <<'PY'
import sys, os, re
rows = [l.split() for l in open(sys.argv[1])]
work, longf = sys.argv[2], sys.argv[3]
print("## Scale: `brigade sim` with 10 to 1000 nodes (issue 12)")
print()
print("`tests/bench/bench_scale.sh`: gpt-small cut into 8 stages, modelled compute (a step takes its FLOPs at 50 GFLOP/s),")
print("int8 activations and gradients, links of 20..50 ms one way, 100 Mbit/s uplinks, seed 1. Churn: that share of the nodes")
print("leaves per simulated hour (half crash, half say goodbye), each replaced by a new node that joins through a random live")
print("one. N = 10 and 100 run one simulated hour, N = 1000 runs %s simulated seconds (the join of 1000 nodes included)." % rows[2][2])
print()
print("- *learn every stage*: mean time from a node's start (initial nodes and joiners) until its peer table holds a live peer of")
print("  every stage.")
print("- *gossip + heartbeats*: bytes of PEERS, PING and PONG messages put on the network per node per second alive")
print("  (headers included; JOIN/WELCOME/BYE/DONE are apart).")
print("- *throughput*: microbatches applied at the last stage per simulated second; *of the bound*: against the compute bound,")
print("  what the nodes' summed compute could do (every node busy all the time it was alive, the work perfectly balanced).")
print("- *steady*: the same within the steady state (from when every initial node serves its stage to the end of the run),")
print("  as `brigade sim` prints it: the join of the nodes left out.")
print("- *lost / dup*: microbatches given up (counted) / applied twice by a node; every run also checks the other invariants.")
print("- *speed*: simulated seconds per CPU second of the simulator process.")
print()
print("At N = 1000 the %s s are mostly the join and the ramp (1000 nodes join in about 60 s, through a bootstrap that" % rows[2][2])
print("answers 20 JOINs a second, then the windows grow as round trips are measured), so its whole-run throughput is not a")
print("steady state: the steady columns leave the join out; a Poisson churn at N = 10 may see no leave at all in the hour (seed 1 sees none).")
print()
print("| nodes | churn /h | sim s | learn every stage | gossip + heartbeats B/node/s | (gossip, heartbeats) | throughput mb/s | of the bound | steady mb/s | steady of the bound | lost | dup | speed sim s / CPU s | CPU s | exit |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for r in rows:
    n, c, secs, rc = r[0], r[1], r[2], r[3]
    learn, ctl, g, hb, mbs, pct, lost, dup, spd, sims, wall, cpu, smbs, spct = r[4:18]
    print("| %s | %s%% | %s | %s s | %s | (%s, %s) | %s | %s%% | %s | %s%% | %s | %s | %s | %s | %s |" % (
        n, "%g" % (100 * float(c)), sims, learn, ctl, g, hb, mbs, pct, smbs, spct, lost, dup, spd, cpu, rc))
print()
by = {(r[0], r[1]): r for r in rows}
for c in ("0.1", "0.01"):
    a, b = by.get(("100", c)), by.get(("1000", c))
    if a and b:
        print("Gossip + heartbeat bytes per node at N = 1000 against N = 100 (churn %g%%/h): x%.2f (target: within x3)." % (
            100 * float(c), float(b[5]) / float(a[5])))
print()
if os.path.exists(longf):
    print(open(longf).read().strip())
else:
    print("1000 nodes for a whole simulated hour: not measured yet (`SCALE_LONG=1 sh tests/bench/bench_scale.sh`).")
print()
# plot data: N, ctl bytes, bound pct for each churn
for c in ("0.1", "0.01"):
    with open(os.path.join(work, "c%s.dat" % c), "w") as fo:
        for r in rows:
            if r[1] == c: fo.write("%s %s %s %s\n" % (r[0], r[5], r[9], r[12]))
PY
if command -v gnuplot >/dev/null 2>&1; then
    gnuplot -e "dir='$WORK'; out='$HERE/scale.png'" "$HERE/scale.gp" \
        && echo "![gossip and heartbeat bytes per node, throughput against the compute bound, vs nodes](scale.png)" >> "$WORK/frag.md"
fi
echo >> "$WORK/frag.md"
echo "bench_scale: $(( $(date +%s) - t_start )) s, load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)." >> "$WORK/frag.md"
mv "$WORK/frag.md" "$RESULTS_DIR/75-scale.md"
echo "wrote $RESULTS_DIR/75-scale.md"
