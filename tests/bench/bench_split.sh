#!/bin/sh
# bench_split.sh: --split auto, the default of a swarm (issue 10): which split
# the data stage chooses on which links, and what the choice buys against
# gpipe and against the even split where the links bind.
# brigade sim --compute real, gpt-tiny on the fortunes text, 4 nodes, 4 stages,
# batch 8 x micro 4, lr 1e-3, evaluations every 25 updates and after the last,
# every link the latency one way and every uplink the rate below.  Measures:
#   1. at 50 ms / 20 Mbit/s, seeds 1 and 2: gpipe, the asynchronous default
#      (auto) and the asynchronous schedule with --split even, over 400
#      updates (val loss, simulated seconds, tokens/s against gpipe's), and
#      the default over 600 (when the run first evaluated at or below gpipe's
#      last val loss over 400 updates, as a share of that gpipe run's time);
#   2. on other links (seed 1, 400 updates): the split auto chose, what the
#      round trip asked for, and auto's time and loss against --split even.
# Run by tests/bench/run.sh or alone from the top of the tree; writes
# RESULTS_DIR/68-split-auto.md.
set -u
BUILD=${BUILD:-build}
RESULTS_DIR=${RESULTS_DIR:-tests/bench/results}
FORTUNES=/usr/share/games/fortunes
out=$RESULTS_DIR/68-split-auto.md
[ -x "$BUILD/brigade" ] || { echo "bench_split: $BUILD/brigade is missing: run make" >&2; exit 1; }
[ -d "$FORTUNES" ] || { echo "bench_split: $FORTUNES missing (Debian package fortunes)" >&2; exit 1; }
W=$(mktemp -d "${TMPDIR:-/tmp}/brigade-split.XXXXXX")
trap 'rm -rf "$W"' EXIT INT TERM
mkdir -p "$RESULTS_DIR"
t_start=$(date +%s)

# sim NAME SEED UPDATES LATENCY_MS MBIT ARGS...
sim() {
    n=$1 seed=$2 steps=$3 lat=$4 bw=$5
    shift 5
    "$BUILD/brigade" sim --nodes 4 --model gpt-tiny --data "text:$FORTUNES" --stages 4 --batch 8 --micro 4 --lr 1e-3 \
        --threads 1 --seed "$seed" --compute real --steps "$steps" --eval-every 25 --latency-ms "$lat:$lat" \
        --bandwidth-mbit "$bw:$bw" --sim-seconds 100000 --wall-seconds 3000 --metrics "$W/$n.jsonl" "$@" \
        > "$W/$n.log" 2>&1 || echo "bench_split: sim $n failed: $(tail -n 1 "$W/$n.log")" >&2
}

# two at a time (the machine's two cores), each a deterministic simulation; a name's first word says its schedule
RUNS="gpipe_s1:1:400:50:20 gpipe_s2:2:400:50:20 auto_s1:1:400:50:20 auto_s2:2:400:50:20 even_s1:1:400:50:20
      even_s2:2:400:50:20 auto600_s1:1:600:50:20 auto600_s2:2:600:50:20 l0_auto:1:400:0:1000 l0_even:1:400:0:1000
      l25_auto:1:400:25:50 l25_even:1:400:25:50 l100_auto:1:400:100:10 l100_even:1:400:100:10"
k=0
for r in $RUNS; do
    IFS=: read -r name seed steps lat bw <<EOF
$r
EOF
    case $name in
        gpipe*) set -- --schedule gpipe ;;
        *even*) set -- --split even ;;
        *) set -- ;;
    esac
    sim "$name" "$seed" "$steps" "$lat" "$bw" "$@" &
    k=$((k + 1))
    [ $((k % 2)) = 0 ] && wait
done
wait

python3 - "$W" > "$W/tables.md" <<'PY'
import json, os, re, sys
w = sys.argv[1]
def events(n, kind):
    p = os.path.join(w, n + ".jsonl")
    return [e for e in map(json.loads, open(p)) if e.get("event") == kind] if os.path.exists(p) else []
def run(n):
    log = open(os.path.join(w, n + ".log")).read() if os.path.exists(os.path.join(w, n + ".log")) else ""
    m = re.search(r"sim ([0-9.]+) s in", log)
    r = re.search(r"([0-9.]+) per simulated s", log)
    ev = events(n, "eval")
    plan = next((e for e in events(n, "plan") if e["how"].startswith("chosen")), None)
    asks = re.search(r"asks for ([0-9]+)", plan["how"]).group(1) if plan and "asks for" in plan["how"] else "-"
    return {"s": float(m.group(1)) if m else None, "rate": float(r.group(1)) if r else None,
            "val": ev[-1]["val_loss"] if ev else None, "evals": ev,
            "split": plan["split"] if plan else "-", "asks": asks}
def reach(n, target):
    return next((e["t"] for e in run(n)["evals"] if e["val_loss"] <= target), None)
print("| run (50 ms, 20 Mbit/s) | split | val loss at 400, seeds 1 / 2 (vs gpipe) | sim s, seed 1 | tokens/s x gpipe, seed 1 | 600 updates: reaches gpipe's last, seeds 1 / 2 |")
print("|---|---|---|---:|---:|---|")
g = [run("gpipe_s1"), run("gpipe_s2")]
for name, label in (("gpipe", "gpipe"), ("auto", "async, `--split auto` (the default)"), ("even", "async, `--split even`")):
    r = [run(name + "_s1"), run(name + "_s2")]
    if None in (r[0]["val"], r[1]["val"], g[0]["val"], g[1]["val"]):
        print("| %s | failed | | | | |" % label); continue
    vals = " / ".join("%.4f" % x["val"] for x in r)
    vs = " / ".join("%+.2f%%" % (100 * (x["val"] / y["val"] - 1)) for x, y in zip(r, g))
    speed = r[0]["rate"] / g[0]["rate"] if r[0]["rate"] and g[0]["rate"] else 0
    if name != "auto":
        reaches = "-"
    else:
        cells = []
        for i, s in enumerate(("s1", "s2")):
            t = reach(name + "600_" + s, g[i]["val"])
            cells.append("%.1f s (%.0f%%)" % (t, 100 * t / g[i]["s"]) if t is not None else "not reached")
        reaches = " / ".join(cells)
    split = "even" if name != "auto" else "%s (asks for %s)" % (r[0]["split"], r[0]["asks"])
    print("| %s | %s | %s (%s) | %.1f | %.2f | %s |" % (label, split, vals, vs, r[0]["s"], speed, reaches))
print()
print("| links | auto chose (the round trip asks for; the budget holds 12) | auto: sim s, val loss | `--split even`: sim s, val loss | auto / even, time |")
print("|---|---|---|---|---:|")
for lat, bw in (("0", "1000"), ("25", "50"), ("100", "10")):
    a, e = run("l%s_auto" % lat), run("l%s_even" % lat)
    if a["s"] is None or e["s"] is None or a["val"] is None or e["val"] is None:
        print("| %s ms, %s Mbit/s | failed | | | |" % (lat, bw)); continue
    print("| %s ms, %s Mbit/s | %s (%s) | %.1f, %.4f | %.1f, %.4f | %.3f |" % (lat, bw, a["split"], a["asks"], a["s"], a["val"],
                                                                          e["s"], e["val"], a["s"] / e["s"]))
PY

{
    echo "### \`--split auto\`: the split chosen from the links (issue 10; \`make bench\`, $(date -u +%Y-%m-%d))"
    echo
    echo "\`brigade sim --compute real\`, gpt-tiny, fortunes, 4 nodes, 4 stages, batch 8 x micro 4, lr 1e-3, the default"
    echo "\`predict+ramp\`, evaluations every 25 updates and after the last; every link the latency one way, every uplink"
    echo "the rate.  tokens/s from the last stage's microbatches per simulated second; \"reaches\": the simulated second"
    echo "at which the 600-update run first evaluated at or below gpipe's val loss after 400 updates (same seed), as a"
    echo "share of that gpipe run's simulated seconds.  The even split's asynchronous runs are the default before"
    echo "\`auto\`; with the late split chosen the data stage's delay budget is one update more (README, \"Where the"
    echo "blocks sit\")."
    echo
    cat "$W/tables.md"
    echo
    echo "(bench_split.sh: $(( $(date +%s) - t_start )) s on $(nproc) cores.)"
} > "$out.tmp" && mv "$out.tmp" "$out"
echo "wrote $out"
