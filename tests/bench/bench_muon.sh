#!/bin/sh
# bench_muon.sh: AdamW against Muon (--optim) under weight delay (issue 10).
# gpt-tiny on the fortunes text, 4 stages, batch 8, lr 1e-3, seed 1, validation
# on the same 32 held-out batches in every run.  Measures:
#   1. brigade solo --delay: the validation loss of each optimizer without
#      delay, with the delays of a 4-stage pipeline and no correction, with
#      `predict` alone and with the default `predict+ramp` (micro 4, 400
#      updates, delays 1,1,1,0; micro 1, 300 updates, delays 3,2,1,0);
#   2. brigade sim --compute real, every link 50 ms one way and every uplink
#      20 Mbit/s, micro 4, 400 updates (and gpipe and the fastest async mode
#      over 460, a schedule both may choose to reach a loss sooner):
#      simulated seconds, speed against gpipe with the same optimizer, the
#      val loss after the last update, and when the run first reached the
#      last val loss of gpipe's 400 updates (evaluations every 25);
#   3. real nodes (tests/harness on 127.0.0.1, --emu-latency-ms 50
#      --emu-bandwidth-mbit 20), the same model, REAL_STEPS updates: tokens/s
#      of gpipe and async (each optimizer's default budget) side by side;
#   4. the compute of a gpt-small update (solo, one thread, micro 4), Muon
#      against AdamW, from the same run's update times.
# Run by tests/bench/run.sh or alone from the top of the tree; writes
# RESULTS_DIR/64-muon.md.
set -u
BUILD=${BUILD:-build}
RESULTS_DIR=${RESULTS_DIR:-tests/bench/results}
FORTUNES=/usr/share/games/fortunes
REAL_STEPS=${REAL_STEPS:-120}
out=$RESULTS_DIR/64-muon.md
[ -x "$BUILD/brigade" ] || { echo "bench_muon: $BUILD/brigade is missing: run make" >&2; exit 1; }
[ -d "$FORTUNES" ] || { echo "bench_muon: $FORTUNES missing (Debian package fortunes)" >&2; exit 1; }
W=$(mktemp -d "${TMPDIR:-/tmp}/brigade-muon.XXXXXX")
trap 'rm -rf "$W"' EXIT INT TERM
mkdir -p "$RESULTS_DIR"
t_start=$(date +%s)
C="--model gpt-tiny --data text:$FORTUNES --stages 4 --batch 8 --lr 1e-3 --threads 1 --seed 1"

# solo NAME OPTIM STEPS MICRO DELAYS STALENESS
solo() {
    "$BUILD/brigade" solo $C --optim "$2" --steps "$3" --micro "$4" --delay "$5" --staleness "$6" \
        --metrics "$W/$1.jsonl" > "$W/$1.log" 2>&1 || echo "bench_muon: solo $1 failed: $(tail -n 1 "$W/$1.log")" >&2
}

# sim NAME OPTIM SCHEDULE STALENESS MAX_DELAY UPDATES
sim() {
    "$BUILD/brigade" sim --nodes 4 $C --optim "$2" --compute real --steps "$6" --micro 4 --schedule "$3" \
        --staleness "$4" --max-delay "$5" --eval-every 25 --latency-ms 50:50 --bandwidth-mbit 20:20 \
        --sim-seconds 100000 --wall-seconds 3000 --metrics "$W/$1.jsonl" > "$W/$1.log" 2>&1 ||
        echo "bench_muon: sim $1 failed: $(tail -n 1 "$W/$1.log")" >&2
}

SOLO="m4_base:400:4:0,0,0,0:none m4_none:400:4:1,1,1,0:none m4_predict:400:4:1,1,1,0:predict
      m4_default:400:4:1,1,1,0:predict+ramp m1_base:300:1:0,0,0,0:none m1_none:300:1:3,2,1,0:none
      m1_default:300:1:3,2,1,0:predict+ramp"
SIMS="gpipe:gpipe:none:2:400 default:async:predict+ramp:2:400 ramp3:async:predict+ramp:3:400 predict1:async:predict:1:400
      gpipe460:gpipe:none:2:460 predict1_460:async:predict:1:460"
for r in $SOLO; do
    IFS=: read -r name steps micro delays stale <<EOF
$r
EOF
    solo "solo_adamw_$name" adamw "$steps" "$micro" "$delays" "$stale" &
    solo "solo_muon_$name" muon "$steps" "$micro" "$delays" "$stale"
    wait
done
for r in $SIMS; do
    IFS=: read -r name sched stale d steps <<EOF
$r
EOF
    sim "sim_adamw_$name" adamw "$sched" "$stale" "$d" "$steps" &
    sim "sim_muon_$name" muon "$sched" "$stale" "$d" "$steps"
    wait
done
for opt in adamw muon; do
    for sched in gpipe async; do
        python3 tests/harness --stages 4 --brigade "$BUILD/brigade" --dir "$W/real_${opt}_$sched" --quiet \
            --timeout 900 --node-args "--threads 1" --emu "latency=50 bandwidth=20" \
            --creator-args "--model gpt-tiny --data text:$FORTUNES --batch 8 --micro 4 --steps $REAL_STEPS --schedule $sched --seed 1 --optim $opt" \
            --expect-exit 0 > "$W/real_${opt}_$sched.out" 2>&1 || echo "bench_muon: real $opt $sched failed" >&2
    done
done
for opt in adamw muon; do
    "$BUILD/brigade" solo --model gpt-small --data "text:$FORTUNES" --stages 4 --batch 8 --micro 4 --steps 12 \
        --threads 1 --optim "$opt" --metrics "$W/cost_$opt.jsonl" > "$W/cost_$opt.log" 2>&1 ||
        echo "bench_muon: gpt-small $opt failed" >&2
done

REAL_STEPS=$REAL_STEPS python3 - "$W" "$SOLO" "$SIMS" > "$W/tables.md" <<'PY'
import json, os, re, sys
w, solo, sims = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
def events(name, kind):
    p = os.path.join(w, name + ".jsonl")
    return [e for e in map(json.loads, open(p)) if e.get("event") == kind] if os.path.exists(p) else []
def val(name):
    ev = events(name, "eval")
    return ev[-1]["val_loss"] if ev else None
label = {"base": "no delay", "none": "`none`", "predict": "`predict` (the whole delay from the first update)",
         "default": "`predict+ramp` (the default)"}
print("| run | AdamW | Muon |")
print("|---|---:|---:|")
for r in solo:
    name, steps, micro, delays, stale = r.split(":")
    kind = name.split("_")[1]
    cells = []
    for opt in ("adamw", "muon"):
        v, base = val("solo_%s_%s" % (opt, name)), val("solo_%s_%s_base" % (opt, name.split("_")[0]))
        if v is None or base is None: cells.append("failed"); continue
        cells.append("%.4f" % v if kind == "base" else "%.4f (%+.1f%%)" % (v, 100 * (v / base - 1)))
    what = "micro %s, %s updates, %s" % (micro, steps, label[kind]) if kind == "base" else \
           "delays %s, %s" % (delays, label[kind])
    print("| %s | %s |" % (what, " | ".join(cells)))
print()
print("| optimizer | run | updates | sim s | speed vs gpipe | val loss | vs gpipe | reaches gpipe's last val loss |")
print("|---|---|---:|---:|---:|---:|---:|---:|")
for opt in ("adamw", "muon"):
    g = None
    for r in sims:
        name, sched, stale, d, steps = r.split(":")
        n = "sim_%s_%s" % (opt, name)
        ev = events(n, "eval")
        log = open(os.path.join(w, n + ".log")).read() if os.path.exists(os.path.join(w, n + ".log")) else ""
        m = re.search(r"sim ([0-9.]+) s in", log)
        if not ev or not m:
            print("| %s | %s | %s | failed | | | | |" % (opt, name, steps)); continue
        secs, last = float(m.group(1)), ev[-1]["val_loss"]
        if g is None: g = (secs / int(steps), last, secs)
        reach = next((e for e in ev if e["val_loss"] <= g[1]), None)
        default = stale == "predict+ramp" and d == ("3" if opt == "muon" else "2")
        what = "gpipe" if sched == "gpipe" else "async `%s`, --max-delay %s%s" % (stale, d, " (the default)" if default else "")
        print("| %s | %s | %s | %.1f | %.2f x | %.4f | %+.2f%% | %s |" % (
            opt, what, steps, secs, g[0] * int(steps) / secs, last, 100 * (last / g[1] - 1),
            "update %d, %.0f%% of gpipe's time" % (reach["version"], 100 * reach["t"] / g[2]) if reach else "no"))
print()
print("Real nodes, %s updates: tokens/s of the last stage from its first update to its last." % os.environ["REAL_STEPS"])
print()
print("| optimizer | gpipe tokens/s | async tokens/s | async / gpipe |")
print("|---|---:|---:|---:|")
for opt in ("adamw", "muon"):
    rate = {}
    for sched in ("gpipe", "async"):
        p = os.path.join(w, "real_%s_%s" % (opt, sched), "n3", "metrics.jsonl")
        up = [e for e in map(json.loads, open(p)) if e.get("event") == "update"] if os.path.exists(p) else []
        if len(up) >= 3: rate[sched] = (up[-1]["tokens"] - up[0]["tokens"]) / (up[-1]["t"] - up[0]["t"])
    if len(rate) == 2:
        print("| %s | %.0f | %.0f | %.2f x |" % (opt, rate["gpipe"], rate["async"], rate["async"] / rate["gpipe"]))
    else:
        print("| %s | failed | | |" % opt)
print()
cost = {}
for opt in ("adamw", "muon"):
    up = events("cost_" + opt, "update")
    if len(up) >= 6: cost[opt] = (up[-1]["t"] - up[1]["t"]) / (len(up) - 2)
if len(cost) == 2:
    print("gpt-small, batch 8 x micro 4, one thread: %.2f s per update with AdamW, %.2f s with Muon (%.2f x)."
          % (cost["adamw"], cost["muon"], cost["muon"] / cost["adamw"]))
PY

{
    echo "## Muon under weight delay (issue 10)"
    echo
    echo "gpt-tiny on the fortunes text, 4 stages, batch 8, lr 1e-3, seed 1; validation loss on the same 32 held-out"
    echo "batches.  \`brigade solo --delay\` first: each stage computes its gradients at its weights of D updates"
    echo "earlier, as an asynchronous stage with that delay (percentages against no delay with the same optimizer)."
    echo "Then \`brigade sim --compute real\` with every link 50 ms one way and every uplink 20 Mbit/s, micro 4,"
    echo "400 updates, evaluations every 25 updates and after the last (percentages and speed per update against"
    echo "gpipe's 400 updates with the same optimizer).  The 460-update runs are the same settings with a longer"
    echo "learning-rate schedule, for gpipe and for the fastest async mode alike: time to a loss is the measure there."
    echo
    cat "$W/tables.md"
    echo
    echo "bench_muon: $(( $(date +%s) - t_start )) s, load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
} > "$out"
echo "wrote $out"
