#!/bin/sh
# bench_simreal.sh: `brigade sim --compute real` against a real swarm (issue 12),
# run by tests/bench/run.sh or alone from the top of the tree:
#
#   sh tests/bench/bench_simreal.sh          BUILD=build RESULTS_DIR=tests/bench/results
#
# The demo's configuration (examples/demo.sh: gpt-tiny on the fortunes text,
# 4 stages, lr 2e-3, int8 activations and gradients) for SIMREAL_STEPS updates
# (default 400), seed 1, validation every 50 updates: twice as a real swarm of
# 4 processes on 127.0.0.1 (tests/harness, --threads 1 each: two runs give the
# run-to-run noise of the asynchronous schedule), once in the simulator with
# real compute (4 nodes, links of 0.1..0.5 ms, unlimited bandwidth).  Writes
# RESULTS_DIR/80-simreal.md and, with gnuplot, tests/bench/simreal.png.
set -u
BUILD=${BUILD:-build}
HERE=tests/bench
RESULTS_DIR=${RESULTS_DIR:-$HERE/results}
BRIGADE=$BUILD/brigade
FORTUNES=/usr/share/games/fortunes
STEPS=${SIMREAL_STEPS:-400}
mkdir -p "$RESULTS_DIR"
[ -x "$BRIGADE" ] || { echo "bench_simreal: $BRIGADE is missing: run make" >&2; exit 1; }
[ -d "$FORTUNES" ] || { echo "bench_simreal: $FORTUNES missing (Debian package fortunes)" >&2; exit 1; }
WORK=$(mktemp -d "${TMPDIR:-/tmp}/brigade-simreal.XXXXXX")
trap 'rm -rf "$WORK"' EXIT INT TERM
cp "$BRIGADE" "$WORK/brigade" && BRIGADE=$WORK/brigade
t_start=$(date +%s)
RUN="--model gpt-tiny --data text:$FORTUNES --stages 4 --steps $STEPS --lr 2e-3 --codec int8 --grad-codec int8 --eval-every 50 --seed 1"

# evals FILE... -> "version val_loss" lines of the last stage's eval events (sorted by version)
evals() {
    python3 - "$@" <<'PY'
import json, sys
pts = {}
for f in sys.argv[1:]:
    try:
        for line in open(f):
            e = json.loads(line)
            if e.get("event") == "eval" and e.get("val_loss") is not None:
                pts[e["version"]] = e["val_loss"]
    except OSError:
        pass
for v in sorted(pts):
    print(v, pts[v])
PY
}

for r in 1 2; do
    nice -n 5 python3 tests/harness --brigade "$BRIGADE" --stages 4 --timeout 900 --quiet --dir "$WORK/real$r" \
        --creator-args "$RUN" --expect-exit 0 > "$WORK/real$r.json" 2>&1
    echo "real$r exit $?" >> "$WORK/status"
    evals "$WORK/real$r"/n*/metrics.jsonl > "$WORK/real$r.dat"
done
nice -n 5 "$BRIGADE" sim --nodes 4 --compute real $RUN --latency-ms 0.1:0.5 --bandwidth-mbit 0:0 \
    --metrics "$WORK/sim.jsonl" > "$WORK/sim.out" 2>&1
echo "sim exit $?" >> "$WORK/status"
evals "$WORK/sim.jsonl" > "$WORK/sim.dat"

python3 - "$WORK" "$STEPS" > "$WORK/frag.md" <<'PY'
import sys, os
w, steps = sys.argv[1], sys.argv[2]
def load(n):
    d = {}
    for line in open(os.path.join(w, n + ".dat")):
        v, l = line.split()
        d[int(v)] = float(l)
    return d
r1, r2, sm = load("real1"), load("real2"), load("sim")
status = open(os.path.join(w, "status")).read().split("\n")
print("## `brigade sim --compute real` against a real swarm (issue 12)")
print()
print("`tests/bench/bench_simreal.sh`: the demo's configuration (gpt-tiny on the fortunes text, 4 stages, lr 2e-3, int8")
print("activations and gradients, batch 8), %s updates, seed 1, validation loss (32 held-out batches, the same for every run)" % steps)
print("every 50 updates at the last stage. *real*: 4 node processes on 127.0.0.1 (tests/harness, `--threads 1` each), twice:")
print("the asynchronous schedule depends on timing, so two runs of the same seed differ, and their difference is the noise.")
print("*sim*: `brigade sim --nodes 4 --compute real` with the same options (links 0.1..0.5 ms, unlimited bandwidth).")
print("Exit statuses: %s." % ", ".join(s for s in status if s))
print()
print("| version | real run 1 | real run 2 | sim | sim - mean(real) | real 1 - real 2 (abs) |")
print("|---:|---:|---:|---:|---:|---:|")
devs, noise = [], []
for v in sorted(set(r1) | set(r2) | set(sm)):
    a, b, s = r1.get(v), r2.get(v), sm.get(v)
    f = lambda x: "%.4f" % x if x is not None else "-"
    d = s - (a + b) / 2 if None not in (a, b, s) else None
    n = abs(a - b) if None not in (a, b) else None
    if d is not None: devs.append(abs(d))
    if n is not None: noise.append(n)
    print("| %d | %s | %s | %s | %s | %s |" % (v, f(a), f(b), f(s), "%+.4f" % d if d is not None else "-", f(n)))
print()
if devs and noise:
    md, mn = sum(devs) / len(devs), sum(noise) / len(noise)
    verdict = "within the noise" if md <= max(mn, 1e-9) * 1.5 else "outside the noise"
    print("Mean |sim - mean(real)| = %.4f against a mean run-to-run difference of the real swarm of %.4f "
          "(max %.4f): the simulated curve is %s (judged within when the first is at most 1.5 x the second)." % (
          md, mn, max(noise), verdict))
else:
    print("Not enough evaluations to compare (see the exit statuses).")
print()
PY
if command -v gnuplot >/dev/null 2>&1; then
    gnuplot -e "dir='$WORK'; out='$HERE/simreal.png'" "$HERE/simreal.gp" \
        && echo "![validation loss: real swarm twice and brigade sim](simreal.png)" >> "$WORK/frag.md"
fi
echo >> "$WORK/frag.md"
echo "bench_simreal: $(( $(date +%s) - t_start )) s, load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)." >> "$WORK/frag.md"
mv "$WORK/frag.md" "$RESULTS_DIR/80-simreal.md"
echo "wrote $RESULTS_DIR/80-simreal.md"
