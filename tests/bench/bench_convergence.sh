#!/bin/sh
# bench_convergence.sh: convergence under weight delay (issue 10), run by
# tests/bench/run.sh or alone from the top of the tree:
#
#   sh tests/bench/bench_convergence.sh      BUILD=build RESULTS_DIR=tests/bench/results
#   QUICK=1 sh tests/bench/bench_convergence.sh   only the micro-1 row 3,2,1,0 (the acceptance configuration)
#   PART=solo|swarm sh tests/bench/bench_convergence.sh   one of the two tables (default both)
#
# Writes RESULTS_DIR/60-convergence.md (solo), 61-convergence-swarm.md and, when gnuplot is installed,
# tests/bench/convergence.png (val loss vs updates).  Every figure is a final
# validation loss of gpt-tiny on the fortunes text, 4 stages, batch 8, lr 1e-3,
# measured here, one run at a time under nice.
#
# Modes are "KIND:ARGS" rows (see modes()): solo:DELAYS:STALENESS runs
# `brigade solo --delay DELAYS --staleness STALENESS`.  The swarm table runs
# whole swarms of the real node code in `brigade sim --compute real` (the
# same validation batches as solo; its clock is simulated: compute time
# modelled from each step's FLOPs, links from --latency-ms/--bandwidth-mbit),
# per schedule, --staleness and link.
set -u
BUILD=${BUILD:-build}
HERE=tests/bench
RESULTS_DIR=${RESULTS_DIR:-$HERE/results}
BRIGADE=$BUILD/brigade
FORTUNES=/usr/share/games/fortunes
SEEDS=${SEEDS:-1 2}
mkdir -p "$RESULTS_DIR"
[ -x "$BRIGADE" ] || { echo "bench_convergence: $BRIGADE is missing: run make" >&2; exit 1; }
[ -d "$FORTUNES" ] || { echo "bench_convergence: $FORTUNES missing (Debian package fortunes)" >&2; exit 1; }
WORK=$(mktemp -d "${TMPDIR:-/tmp}/brigade-conv.XXXXXX")
trap 'rm -rf "$WORK"' EXIT INT TERM
cp "$BRIGADE" "$WORK/brigade" && BRIGADE=$WORK/brigade
t_start=$(date +%s)
C="--model gpt-tiny --data text:$FORTUNES --stages 4 --batch 8 --lr 1e-3 --threads 1"

# val FILE: the last val_loss of a metrics file
val() {
    python3 -c '
import json, sys
v = None
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e.get("event") == "eval": v = e["val_loss"]
print("%.4f" % v if v is not None else "")' "$1"
}

# s_solo NAME STEPS MICRO DELAYS STALENESS SEED [EVAL_EVERY]: one solo run, metrics in $WORK/NAME.jsonl
s_solo() {
    name=$1 steps=$2 micro=$3 delays=$4 stale=$5 seed=$6 every=${7:-0}
    nice -n 10 "$BRIGADE" solo $C --steps "$steps" --micro "$micro" --delay "$delays" --staleness "$stale" \
        --seed "$seed" --eval-every "$every" --metrics "$WORK/$name.jsonl" >"$WORK/$name.out" 2>&1 \
        || echo "bench_convergence: $name failed: $(tail -n 1 "$WORK/$name.out")" >&2
}

# s_swarm NAME STEPS MICRO MODE SEED LINK: one simulated swarm (4 nodes, 4 stages); MODE is
# SCHEDULE:STALENESS[:STASH][/DELAY][@STEPS][%SPLIT] (DELAY: --max-delay, else the node's default; SPLIT:
# --split, default even), LINK "LAT_MS BW_MBIT" (0 bandwidth: unlimited)
s_swarm() {
    name=$1 steps=$2 micro=$3 smode=$4 seed=$5 maxd= split=even
    case $smode in *%*) split=${smode#*%} smode=${smode%\%*} ;; esac
    case $smode in *@*) steps=${smode#*@} smode=${smode%@*} ;; esac
    case $smode in */*) maxd=${smode#*/} smode=${smode%/*} ;; esac
    set -- $6
    sched=${smode%%:*} rest=${smode#*:}
    stale=${rest%%:*} stash=full
    [ "$rest" != "$stale" ] && stash=${rest#*:}
    nice -n 10 "$BRIGADE" sim --nodes 4 $C --compute real --steps "$steps" --micro "$micro" --schedule "$sched" \
        --staleness "$stale" --stash "$stash" --split "$split" ${maxd:+--max-delay "$maxd"} --seed "$seed" --eval-every 50 --latency-ms "$1:$1" \
        --bandwidth-mbit "$2:$2" --sim-seconds 100000 --wall-seconds 3000 --metrics "$WORK/$name.jsonl" \
        >"$WORK/$name.out" 2>&1 || echo "bench_convergence: $name failed: $(tail -n 1 "$WORK/$name.out")" >&2
}

# swarm_row LABEL STEPS MICRO LINK MODE...: per MODE, over SEEDS: final val loss, simulated seconds, tokens/s
# of the last stage, and the simulated seconds at which the val loss first reached the first mode's final one
swarm_row() {
    label=$1 steps=$2 micro=$3 link=$4
    shift 4
    for mode in "$@"; do
        files=""
        for seed in $SEEDS; do
            name="s-$steps-$micro-$(echo "$mode $link" | tr ':,+ /%' '_.p_ds')-$seed"
            s_swarm "$name" "$steps" "$micro" "$mode" "$seed" "$link"
            files="$files $WORK/$name.jsonl"
        done
        echo "$mode$files"
    done | python3 -c '
import json, sys
rows = []
for line in sys.stdin:
    mode, *files = line.split()
    runs = []
    for f in files:
        ev = [json.loads(l) for l in open(f)]
        evals = [(e["t"], e["val_loss"]) for e in ev if e["event"] == "eval"]
        last = [e for e in ev if e["event"] == "update" and e["stage"] == 3]
        t = max(e["t"] for e in ev if e["event"] == "update")
        toks = last[-1]["tokens"] / t if last and t > 0 else 0
        runs.append((evals, t, toks))
    rows.append((mode, runs))
base = [r[0][-1][1] if r[0] else None for r in rows[0][1]]   # per seed: the first mode (gpipe) at its end
known = [b for b in base if b is not None]
target = sum(known) / len(known) if known else None
for mode, runs in rows:
    fin = [r[0][-1][1] for r in runs if r[0]]
    v = sum(fin) / len(fin) if fin else float("nan")
    t = sum(r[1] for r in runs) / len(runs)
    k = sum(r[2] for r in runs) / len(runs)
    reach = [next((tt for tt, vv in r[0] if b is not None and vv <= b), None) for r, b in zip(runs, base)]
    reach_s = "/".join("%.0f" % x if x is not None else "not reached" for x in reach)
    pct = "%+.1f%%" % (100 * (v / target - 1)) if target else "-"
    print("| %s | %s | %.4f (%s) [%s] | %.0f | %.0f | %s |" % (sys.argv[1], mode, v, pct, " ".join("%.4f" % x for x in fin), t, k, reach_s))
' "$label"
}

# row LABEL STEPS MICRO MODE...: one table row, the mean over SEEDS of each MODE's val loss and its
# ratio to the first mode's (the no-delay baseline)
row() {
    label=$1 steps=$2 micro=$3
    shift 3
    line="| $label |"
    base=""
    for mode in "$@"; do
        kind=${mode%%:*} rest=${mode#*:}
        vals=""
        for seed in $SEEDS; do
            name="c-$steps-$micro-$(echo "$rest" | tr ':,+' '_.p')-$seed"
            case $kind in
                solo) s_solo "$name" "$steps" "$micro" "${rest%%:*}" "${rest#*:}" "$seed"; v=$(val "$WORK/$name.jsonl") ;;
                swarm) s_swarm "$name" "$steps" "$micro" "${rest%%:*}" "${rest#*:}" "$seed"; v="" ;;
            esac
            vals="$vals $v"
        done
        m=$(echo "$vals" | awk '{ s = 0; n = 0; for (i = 1; i <= NF; i++) { s += $i; n++ } if (n) printf "%.4f", s / n }')
        [ -z "$base" ] && base=$m
        r=$(awk -v a="$m" -v b="$base" 'BEGIN { if (a == "" || b == "" || b == 0) print "-"; else printf "%+.1f%%", 100 * (a / b - 1) }')
        line="$line ${m:--} (${r})$(echo "$vals" | awk '{ if (NF > 1) { printf " ["; for (i = 1; i <= NF; i++) printf "%s%s", (i > 1 ? " " : ""), $i; printf "]" } }') |"
    done
    echo "$line"
}

HEAD="| delays (updates) | no delay | none | predict | lr | dc | ramp | predict+lr | predict+ramp (default) |"
SEP="|---|---|---|---|---|---|---|---|---|"
modes() {   # DELAYS: the solo modes of one row
    echo "solo:0,0,0,0:none solo:$1:none solo:$1:predict solo:$1:lr solo:$1:dc solo:$1:ramp solo:$1:predict+lr solo:$1:predict+ramp"
}
if [ "${PART:-solo}" = solo ]; then
{
    echo "## Convergence under weight delay (issue 10)"
    echo
    echo "Final validation loss (32 held-out batches) of gpt-tiny on the fortunes text, 4 stages, batch 8,"
    echo "lr 1e-3, warmup 10, mean over seeds $SEEDS [each seed]; the percentage is against the row's"
    echo "no-delay run.  \`brigade solo --delay D0,D1,D2,D3 --staleness MODE\`: stage k computes at its"
    echo "weights of Dk updates earlier, exactly what an asynchronous stage with that delay does at steady"
    echo "state.  The swarms' table (below) runs the real node code in brigade sim."
    echo
    echo "### micro 1, 300 updates (the acceptance configuration)"
    echo
    echo "$HEAD"; echo "$SEP"
    ROWS="1,1,1,0 3,2,1,0 6,4,2,0"; [ -n "${QUICK:-}" ] && ROWS="3,2,1,0"
    for d in $ROWS; do
        # shellcheck disable=SC2046
        row "$d" 300 1 $(modes $d)
    done
    if [ -z "${QUICK:-}" ]; then
        echo
        echo "### the issue's table: 400 updates, micro 2 (delays the swarm saw: --max-inflight 2 / 4 ~ 0.5 / 1.45,"
        echo "### default window ~3.2, 50 ms links ~9.3 updates at stage 0)"
        echo
        echo "$HEAD"; echo "$SEP"
        for d in 1,0,0,0 1,1,0,0 3,2,1,0 9,6,3,0; do
            # shellcheck disable=SC2046
            row "micro 2: $d" 400 2 $(modes $d)
        done
    fi
    echo
    echo "### micro 4, 400 updates, delays 1,1,1,0 (the 2BW condition: one update at stages 0-2)"
    echo
    echo "$HEAD"; echo "$SEP"
    # shellcheck disable=SC2046
    row "micro 4: 1,1,1,0" 400 4 $(modes 1,1,1,0)
    echo
    echo "bench_convergence: $(( $(date +%s) - t_start )) s, load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
} > "$WORK/frag.md"
fi

if [ "${PART:-swarm}" = swarm ]; then
{
    echo "### Swarms under weight delay: brigade sim --compute real, 4 nodes, micro 4, 400 updates"
    echo
    echo "Val loss at the last evaluation (every 50 updates and after the last: update 400, 600, 800),"
    echo "simulated seconds of the run (compute modelled from FLOPs, links emulated), tokens/s of the last"
    echo "stage; \"reaches\" is the simulated second at which the val loss first reached the last one of gpipe with the"
    echo "same seed (400 updates), per seed; /D: --max-delay D (default 2, 1 with 2bw); @N: a run of N updates (its learning-rate schedule spans N);"
    echo "%late: --split late (stage 0 the embedding alone)."
    echo
    echo "| links | schedule:staleness[:stash][/D] | val loss (vs gpipe) [seeds] | sim s | tokens/s | reaches gpipe's last |"
    echo "|---|---|---|---|---|---|"
    SW="gpipe:none async:predict+ramp async:none async:predict async:predict+ramp:2bw async:predict+ramp/1 async:predict+ramp/3 async:predict+ramp@600 gpipe:none@800 async:predict/1@800"
    SW="$SW gpipe:none%late async:predict+ramp%late async:predict+ramp/3%late async:predict+ramp@600%late async:predict+ramp/3@600%late"
    [ -n "${QUICK:-}" ] && SW="gpipe:none async:predict+ramp"
    # shellcheck disable=SC2086
    swarm_row "1 ms" 400 4 "1 0" $SW
    # shellcheck disable=SC2086
    swarm_row "50 ms, 20 Mbit/s" 400 4 "50 20" $SW
    echo
    echo "bench_convergence (swarms): $(( $(date +%s) - t_start )) s, load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
} > "$RESULTS_DIR/61-convergence-swarm.md"
echo "wrote $RESULTS_DIR/61-convergence-swarm.md"
fi
[ "${PART:-solo}" = solo ] || exit 0

# val loss vs updates for the plot: micro 1, 3,2,1,0, seed 1, every 10 updates
if command -v gnuplot >/dev/null 2>&1; then
    for m in none predict predict+ramp; do
        s_solo "p-$m" 300 1 3,2,1,0 "$m" 1 10
    done
    s_solo "p-base" 300 1 0,0,0,0 none 1 10
    for n in base none predict predict+ramp; do
        python3 -c '
import json, sys
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e.get("event") == "eval": print(e["version"], e["val_loss"])' "$WORK/p-$n.jsonl" > "$WORK/p-$n.dat"
    done
    gnuplot -e "dir='$WORK'; out='$HERE/convergence.png'" "$HERE/convergence.gp" \
        && echo "![val loss vs updates](convergence.png)" >> "$WORK/frag.md"
fi
mv "$WORK/frag.md" "$RESULTS_DIR/60-convergence.md"
echo "wrote $RESULTS_DIR/60-convergence.md"
