#!/bin/sh
# bench_portable.sh: the default build (baseline x86-64, fast kernels picked
# at run time) against `make OPT=-march=native` (built in $BUILD-native by
# `make bench`), on the engine (bench_train: one step of gpt-tiny and
# gpt-small, one thread, CPU time of the thread) and the codecs (bench_codec,
# one core), side by side: ROUNDS rounds (default 3), each running the two
# builds one after the other, the median of the rounds per figure.  Also the
# default build with BRIGADE_CPU=generic (every fast path off).  Run by
# tests/bench/run.sh; writes $RESULTS_DIR/15-portable.md.
set -u
BUILD=${BUILD:-build}
NATIVE=${NATIVE_BUILD:-$BUILD-native}
RESULTS_DIR=${RESULTS_DIR:-tests/bench/results}
ROUNDS=${ROUNDS:-3}
OUT=$RESULTS_DIR/15-portable.md
mkdir -p "$RESULTS_DIR"
for b in "$BUILD" "$NATIVE"; do
    for t in bench_train bench_codec; do
        if [ ! -x "$b/bench/$t" ]; then
            echo "bench_portable.sh: $b/bench/$t missing (make bench builds both)" >&2
            exit 1
        fi
    done
done
W=$(mktemp -d "${TMPDIR:-/tmp}/brigade-portable.XXXXXX")
trap 'rm -rf "$W"' EXIT INT TERM
load0=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)
# one round: every variant once, in turn
variant() {   # variant NAME: runs the benchmarks of that variant into $W/*.NAME.$r
    case $1 in
        portable) dir=$BUILD; pre="env -u BRIGADE_CPU" ;;
        native) dir=$NATIVE; pre="env -u BRIGADE_CPU" ;;
        generic) dir=$BUILD; pre="env BRIGADE_CPU=generic" ;;
    esac
    $pre "$dir/bench/bench_train" --models gpt-tiny,gpt-small --threads 1 --steps 15 --warmup 2 \
        --rss-model none > "$W/train.$1.$r" 2>&1
    $pre "$dir/bench/bench_codec" -n 1048576 > "$W/codec.$1.$r" 2>&1
}
for r in $(seq "$ROUNDS"); do
    echo "== portable vs native, round $r of $ROUNDS"
    for v in portable native generic; do variant $v; done
done
load1=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)
level=$("$BUILD/brigade" solo --steps 1 --model gpt-tiny --metrics "$W/m.jsonl" >/dev/null 2>&1;
        sed -n 's/.*"cpu":"\([a-z0-9.]*\)".*/\1/p' "$W/m.jsonl" | head -n 1)
python3 - "$W" "$ROUNDS" "$level" "$load0" "$load1" > "$OUT" <<'PY'
import os, re, statistics, sys
w, rounds, level, load0, load1 = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
V = ["portable", "native", "generic"]
def train(v, r):
    out = {}
    for line in open(os.path.join(w, "train.%s.%d" % (v, r))):
        if line.startswith("kv what=train "):
            kv = dict(x.split("=", 1) for x in line.split()[1:])
            out[kv["model"]] = float(kv["median_ms"])
    return out
def codec(v, r):
    out = {}
    for line in open(os.path.join(w, "codec.%s.%d" % (v, r))):
        c = [x.strip() for x in line.strip().strip("|").split("|")]
        if len(c) == 6 and re.match(r"^[0-9.]+$", c[3] or "x"):
            out[c[0]] = (float(c[3]), float(c[4]))
        if line.startswith("## payload"): break
    return out
med = lambda xs: statistics.median(xs) if xs else float("nan")
print("## Portable binary against -march=native\n")
print("`make` builds for baseline x86-64 and picks the fast kernels at run time")
print("(compress/cpu.h: SSE4.1 quantizers, F16C fp16 encoding, AVX2/AVX-512 copies")
print("of gelu and the AdamW loops, the AVX-512 attention kernels and matrix")
print("product); `make OPT=-march=native`")
print("compiles everything for this CPU.  Both measured here side by side, %d rounds," % rounds)
print("each running the builds in turn; the median of the rounds.  This CPU runs level")
print("`%s`.  The machine is shared and was busy (load average %s before, %s after):" % (level, load0, load1))
print("differences of a few percent are within its noise; the generic column")
print("(BRIGADE_CPU=generic, every fast path off) shows what the run-time choice gains.")
print("A step time ratio above 1, or a speed ratio below 1, means the portable build is slower.\n")
print("| engine: median step, 1 thread | portable ms | native ms | portable / native | generic ms | generic / portable |")
print("|---|---:|---:|---:|---:|---:|")
for m in ["gpt-tiny", "gpt-small"]:
    t = {v: med([train(v, r).get(m) for r in range(1, rounds + 1) if train(v, r).get(m)]) for v in V}
    print("| %s | %.1f | %.1f | %.3f | %.1f | %.2f |" % (m, t["portable"], t["native"], t["portable"] / t["native"],
                                                       t["generic"], t["generic"] / t["portable"]))
print("\n| codec (1M values, one core) | portable enc / dec GB/s | native enc / dec GB/s | portable / native enc, dec | generic enc / dec GB/s |")
print("|---|---:|---:|---:|---:|")
names = list(codec("portable", 1).keys())
for n in names:
    e = {v: med([codec(v, r)[n][0] for r in range(1, rounds + 1) if n in codec(v, r)]) for v in V}
    d = {v: med([codec(v, r)[n][1] for r in range(1, rounds + 1) if n in codec(v, r)]) for v in V}
    print("| %s | %.2f / %.2f | %.2f / %.2f | %.2f, %.2f | %.2f / %.2f |" % (n, e["portable"], d["portable"], e["native"], d["native"],
          e["portable"] / e["native"], d["portable"] / d["native"], e["generic"], d["generic"]))
PY
echo "wrote $OUT"
