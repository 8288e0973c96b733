#!/bin/sh
# bench_faults.sh: the resilience table of issue 5, run by tests/bench/run.sh or
# alone from the top of the tree:
#
#   sh tests/bench/bench_faults.sh            BUILD=build RESULTS_DIR=tests/bench/results
#
# Writes RESULTS_DIR/40-faults.md: fault | nodes | outcome | samples lost |
# throughput dip | time to recover, from tests/harness runs of gpt-tiny (int8)
# on 127.0.0.1, --threads 1 per node.  Throughput is the last stage's tokens/s
# computed from its update events; the fault instant comes from the harness's
# own log, stamped with the wall clock as it is printed.
set -u
BUILD=${BUILD:-build}
HERE=tests/bench
RESULTS_DIR=${RESULTS_DIR:-$HERE/results}
BRIGADE=$BUILD/brigade
FORTUNES=/usr/share/games/fortunes
mkdir -p "$RESULTS_DIR"
[ -x "$BRIGADE" ] || { echo "bench_faults: $BRIGADE is missing: run make" >&2; exit 1; }
if [ -d "$FORTUNES" ]; then DATA=text:$FORTUNES; else DATA=synthetic; fi
WORK=$(mktemp -d "${TMPDIR:-/tmp}/brigade-faults.XXXXXX")
[ -n "${KEEP:-}" ] && echo "bench_faults: keeping $WORK" || trap 'rm -rf "$WORK"' EXIT INT TERM
t_start=$(date +%s)
PY=python3; [ -x /usr/bin/python3 ] && PY=/usr/bin/python3     # no shim: it is called often
# A private copy of the binary: every run uses the same one even if the tree is rebuilt meanwhile.
cp "$BRIGADE" "$WORK/brigade" && BRIGADE=$WORK/brigade || { echo "$0: cannot copy $BRIGADE" >&2; exit 1; }

cat > "$WORK/stamp.py" <<'PY'
import sys, time
for line in sys.stdin:
    sys.stdout.write("%.3f %s" % (time.time(), line)); sys.stdout.flush()
PY

# f.py RUN_DIR: one table row's figures from a harness run (metrics, summary, stamped log).
cat > "$WORK/f.py" <<'PY'
import json, os, re, sys, glob
run, late = sys.argv[1], int(sys.argv[2])
summ = {}
try:
    txt = open(run + ".json").read()
    summ = json.loads(txt[txt.index("{"):txt.rindex("}") + 1])
except (OSError, ValueError):
    pass
checks = [l for l in open(run + ".json").read().splitlines() if l.startswith(("check ", "FAILED "))] \
    if os.path.exists(run + ".json") else []
launch, faults = {}, []
for line in open(run + ".log"):
    p = line.split(" ", 1)
    if len(p) < 2: continue
    ts, msg = float(p[0]), p[1]
    m = re.search(r"node (\d+) started", msg)
    if m: launch[int(m.group(1))] = ts
    if "fault: " in msg and "SIGCONT" not in msg: faults.append(ts)
    if m and int(m.group(1)) == late: faults.append(ts)
def events(i):
    out = []
    try:
        for line in open(os.path.join(run, "n%d" % i, "metrics.jsonl")):
            try: out.append(json.loads(line))
            except ValueError: pass
    except OSError: pass
    return out
ev = {i: events(i) for i in launch}
def stage(i):
    for e in ev[i]:
        if e.get("event") == "start": return e.get("stage")
    return None
K = summ.get("stages", 4)
last = [i for i in ev if stage(i) == K - 1]
pts = []    # (wall time, tokens delta) of every last-stage update
for i in last:
    prev = 0
    for e in ev[i]:
        if e.get("event") == "update":
            pts.append((launch[i] + e["t"], e["tokens"] - prev)); prev = e["tokens"]
pts.sort()
def rate(a, b):
    tok = sum(d for t, d in pts if a <= t < b)
    return tok / (b - a) if b > a else 0.0
out = {}
per = summ.get("per_node", [])
lost = summ.get("lost_microbatches")
out["lost"] = lost
out["retries"] = summ.get("retries")
out["drops"] = summ.get("drops")
alive = [p for p in per if not p.get("killed")]
ok = alive and all(p.get("exit") == 0 for p in alive) and not summ.get("timed_out")
out["outcome"] = "%s, loss %.2f -> %.2f" % ("completed" if ok else "did NOT complete",
                                            summ.get("loss_first5") or float("nan"),
                                            summ.get("loss_last5") or float("nan"))
# data-stage throughput: end tokens / wall_s, summed over stage-0 peers
tok = wall = 0.0
for i in ev:
    for e in ev[i]:
        if e.get("event") == "end" and stage(i) == 0:
            tok += e["tokens"]; wall = max(wall, e["wall_s"])
out["rate"] = tok / wall if wall else None
if pts:
    t_first, t_last = pts[0][0], pts[-1][0]
    out["steady"] = rate(t_first + 0.2 * (t_last - t_first), t_last)
if faults and pts:
    F = faults[0]
    W = 2.0
    before = rate(max(pts[0][0], F - 8), F)
    out["before"] = before
    wins, s = [], F
    while s + W <= pts[-1][0]:
        wins.append((s, rate(s, s + W))); s += 0.5
    if wins and before > 0:
        horizon = [w for w in wins if w[0] <= F + 15]
        lo = min(horizon, key=lambda w: w[1])
        out["dip"] = lo[1] / before
        if lo[1] >= 0.8 * before:
            out["recover"] = 0.0
        else:
            back = [w for w in wins if w[0] > lo[0] and w[1] >= 0.8 * before]
            out["recover"] = (back[0][0] + W - F) if back else None
        out["after"] = rate(F + 5, pts[-1][0] - 1) if pts[-1][0] > F + 7 else None
if pts and not faults:      # no fault: the lowest 2 s window of the middle of the run, for the noise
    a, b = pts[0][0] + 3, pts[-1][0] - 3
    ws = [rate(a + 0.5 * k, a + 0.5 * k + 2) for k in range(int((b - a - 2) / 0.5))]
    m = rate(a, b)
    if ws and m: out["noise"] = min(ws) / m
print(json.dumps(out))
PY
# fig RUN KEY: one figure of f.py's JSON.
fig() { $PY -c 'import json,sys; d=json.load(open(sys.argv[1])); v=d.get(sys.argv[2]); v=round(v, 3 if abs(v) < 10 else 1) if isinstance(v, float) else v; print("" if v is None else v)' "$WORK/$1.fig" "$2"; }

# run NAME NODES TIMEOUT CREATOR-ARGS [harness options...]
run() {
    name=$1 n=$2 tmo=$3 cargs=$4
    shift 4
    rm -rf "$WORK/$name"
    echo "== $name: $n nodes $*"
    { python3 tests/harness --stages 4 --nodes "$n" --brigade "$BRIGADE" --dir "$WORK/$name" --timeout "$tmo" \
        --node-args "--threads 1" --creator-args "$cargs" --expect-exit 0 "$@" 2>&1 > "$WORK/$name.json" \
        | python3 "$WORK/stamp.py" > "$WORK/$name.log"; } || true
    grep -E '^(check|FAILED)' "$WORK/$name.json"
    $PY "$WORK/f.py" "$WORK/$name" "${LATE:--1}" > "$WORK/$name.fig" || echo '{}' > "$WORK/$name.fig"
    cat "$WORK/$name.fig"
}

BASE="--model gpt-tiny --data $DATA --batch 8 --steps 400 --seed 1 --codec int8 --grad-codec int8"
# node 4 (--node 4 "--stage 1"): the second peer of stage 1, a middle stage.
run base1 5 180 "$BASE" --node 4 "--stage 1"
run strag1 5 180 "$BASE" --node 4 "--stage 1" --emu "4:slowdown=4"
run base2 5 180 "$BASE" --node 4 "--stage 1"
run strag2 5 180 "$BASE" --node 4 "--stage 1" --emu "4:slowdown=4"
run kill 5 180 "$BASE" --node 4 "--stage 1" --fault "kill9 4 at 8"
run stop 5 180 "$BASE" --node 4 "--stage 1" --fault "stop 4 at 8 for 5"
LATE=4 run late 5 180 "$BASE" --node 4 "--stage 1" --fault "start 4 at 8"
run loss 4 240 "$BASE" --emu "loss=0.01"

# The only peer of stage 2 dies after ~50 s (so that a backup snapshot has been
# pushed); a replacement joins 5 s later with --stage auto.  The run is sized
# from the base runs' speed to last ~50 s past the kill.
ups=$(python3 -c 'import json,sys
r=[json.load(open(f)).get("steady") for f in sys.argv[1:]]; r=[x for x in r if x]
print(int(sum(r)/len(r)/512*100) if r else 1600)' "$WORK/base1.fig" "$WORK/base2.fig")
ONLY="--model gpt-tiny --data $DATA --batch 8 --steps $ups --seed 1 --codec int8 --grad-codec int8"
LATE=4 run only 5 300 "$ONLY" --node 4 "--stage auto" --fault "kill9 2 at 50" --fault "start 4 at 55"
resumed=$(grep -h "resumed from a backup\|starts from its initial" "$WORK/only/n4/out.log" | head -n 1 | sed 's/^brigade node: //')

med2() { awk -v a="${1:-}" -v b="${2:-}" 'BEGIN { if (a == "" || b == "") print ""; else printf "%.1f\n", (a + b) / 2 }'; }
b_rate=$(med2 "$(fig base1 rate)" "$(fig base2 rate)")
s_rate=$(med2 "$(fig strag1 rate)" "$(fig strag2 rate)")
b_st=$(med2 "$(fig base1 steady)" "$(fig base2 steady)")
s_st=$(med2 "$(fig strag1 steady)" "$(fig strag2 steady)")
pct() { awk -v a="${1:-}" -v b="${2:-}" 'BEGIN { if (a == "" || b == "" || b + 0 == 0) print "n/a"; else printf "%.0f%%\n", 100 * a / b }'; }
dip() { v=$(fig "$1" dip); [ -n "$v" ] && awk -v v="$v" 'BEGIN { printf "%.0f%% of before (lowest 2 s window)\n", 100 * v }' || echo "n/a"; }
rec() {
    v=$(fig "$1" recover)
    if [ -z "$v" ]; then [ -n "$(fig "$1" dip)" ] && echo "not within the run" || echo n/a
    else awk -v v="$v" 'BEGIN { if (v == 0) print "no dip below 80%"; else printf "%.1f s\n", v }'; fi
}
lost() { echo "$(fig "$1" lost) ($(fig "$1" retries) retries, $(fig "$1" drops) drops)"; }
row() {  # name fault nodes
    echo "| $2 | $3 | $(fig "$1" outcome) | $(lost "$1") | $(dip "$1") | $(rec "$1") |"
}

{
    echo "## Resilience (issue 5)"
    echo
    echo "tests/harness fault plans on 127.0.0.1; gpt-tiny on $DATA, int8 activations and"
    echo "gradients, batch 8, 4 stages, \`--threads 1\` per node, 2 shared cores.  \"5 nodes\" ="
    echo "one node per stage plus node 4 as a second peer of stage 1 (a middle stage)."
    echo "Throughput = tokens/s of the last stage from its update events (wall clock);"
    echo "\"before\" = the 8 s before the fault; dip = the lowest 2 s window (0.5 s steps) in the"
    echo "15 s after the fault, as a fraction of before; time to recover = from the fault until"
    echo "the end of the first later 2 s window back at >= 80% of before (for the late joiner,"
    echo "the fault instant is its start).  Noise: in the base runs without a fault, the lowest"
    echo "2 s window is $(pct "$(fig base1 noise)" 1) and $(pct "$(fig base2 noise)" 1) of the run's mean.  Samples lost ="
    echo "\`lost_microbatches\` summed over the \`end\` events (microbatches re-issued after a"
    echo "timeout are not lost; they are counted as retries)."
    echo
    echo "| fault | nodes | outcome | samples lost | throughput dip | time to recover |"
    echo "|---|---|---|---|---|---|"
    row kill "kill -9 of one of 2 peers of stage 1 at 8 s" 5
    row stop "SIGSTOP of one of 2 peers of stage 1 at 8 s, SIGCONT 5 s later" 5
    echo "| straggler: one of 2 peers of stage 1 with \`--emu-slowdown 4\` | 5 | $(fig strag1 outcome) | $(lost strag1) | throughput $(pct "$s_rate" "$b_rate") of the same run without it (target >= 75%) | n/a |"
    row late "late joiner: second peer of stage 1 starts at 8 s (downloads state)" "4 + 1"
    row only "kill -9 of the only peer of stage 2 at 50 s; replacement \`--join --stage auto\` at 55 s" "4 + 1"
    echo "| \`--emu-loss 0.01\` on every node | 4 | $(fig loss outcome) | $(lost loss) | throughput $(pct "$(fig loss rate)" "$b_rate") of the 5-node base run | n/a |"
    echo
    echo "Straggler (issue 5 target: throughput with the straggler >= 75% of without), two"
    echo "interleaved pairs (base, straggler, base, straggler):"
    echo
    echo "| tokens/s | base | with straggler | ratio |"
    echo "|---|---:|---:|---:|"
    echo "| data stage \`end\` tokens / \`wall_s\` (mean of 2) | $b_rate | $s_rate | $(pct "$s_rate" "$b_rate") |"
    echo "| last stage, updates after the first 20% of the run (mean of 2) | $b_st | $s_st | $(pct "$s_st" "$b_st") |"
    echo "| runs | $(fig base1 rate), $(fig base2 rate) | $(fig strag1 rate), $(fig strag2 rate) | |"
    echo
    echo "Only peer of stage 2 killed: the run had $ups updates (sized from the base runs to"
    echo "last past the kill); the replacement node printed: \"${resumed:-nothing about its start state}\"."
    echo "Backups are pushed at most every 30 s and every 20 updates, so up to ~30 s of that"
    echo "stage's progress can be lost with its only peer."
    echo
    echo "| run | tokens/s before | lowest window / before | tokens/s from 5 s past the fault to the end |"
    echo "|---|---:|---:|---:|"
    for r in kill stop late only; do
        echo "| $r | $(fig $r before) | $(fig $r dip) | $(fig $r after) |"
    done
    echo
    echo "Harness checks of each run:"
    echo
    for r in base1 strag1 base2 strag2 kill stop late loss only; do
        echo "- $r: $(grep -E '^(check|FAILED)' "$WORK/$r.json" | tr '\n' ';' | sed 's/;$//; s/;/; /g')"
    done
    echo
    echo "bench_faults.sh: $(( $(date +%s) - t_start )) s."
} > "$RESULTS_DIR/40-faults.md"
echo "wrote $RESULTS_DIR/40-faults.md ($(( $(date +%s) - t_start )) s)"
