#!/bin/sh
# bench_ttl.sh: time-to-loss of the default options against alternatives at
# several swarm sizes (issue 48: "the scale/efficiency trade-off the user faces
# is explicit"), in simulated time, with `brigade sim --compute real`: the real
# engine on the simulated network and clock, so every figure is deterministic
# (simulated time comes from the sim's compute model; wall time is the real
# compute, about the same for every swarm size at equal microbatches).
#
# NOT part of `make bench` by default: the table (6 runs of 512 microbatches
# of gpt-small real compute, 2 at a time) took about 90 minutes of wall time on
# 2 cores shared with other jobs (about 0.65 CPU s per microbatch; 8 runs in
# the VARIANTS table).  tests/bench/run.sh runs this script; without
# TTL_BENCH it only says so and keeps the fragment.  By hand, from the top of
# the tree:
#
#   TTL_BENCH=1 sh tests/bench/bench_ttl.sh        the table (every VARIANTS line)
#   TTL_BENCH=1 TTL_MB=64 TTL_NODES="4 16" TTL_OUT=/tmp/ttl.md sh tests/bench/bench_ttl.sh
#                                                  a short version (4 runs, a few minutes on idle cores)
#
# Parameters (environment): TTL_MB microbatches per run (default 512, every run
# the same tokens); TTL_NODES the swarm sizes (default "4 16 64"); TTL_VARIANTS
# the runs (default the table VARIANTS below); TTL_JOBS runs at a time (default
# 2); TTL_DIR a work directory kept between calls (a run whose output is there
# already is not run again; default a temporary one); TTL_TARGET one target
# validation loss for every size (default: per size, the highest final loss of
# its runs, rounded up to 0.01, so every run reaches it); TTL_OUT the fragment
# (default RESULTS_DIR/83-time-to-loss.md).
#
# Every run: gpt-small on the fortunes text (the demo's and the learning
# guard's data), 4 stages, batch 8, lr 1e-3, seed 1, 25 ms links, 100 Mbit/s
# uplinks, validation (8 held-out batches) every 32 microbatches of a data
# node.  The variants per swarm size are the table VARIANTS below.
set -u
BUILD=${BUILD:-build}
HERE=tests/bench
RESULTS_DIR=${RESULTS_DIR:-$HERE/results}
OUT=${TTL_OUT:-$RESULTS_DIR/83-time-to-loss.md}
if [ -z "${TTL_BENCH:-}" ]; then
    echo "bench_ttl: skipped (about 90 minutes; TTL_BENCH=1 runs it, TTL_MB=64 a short version): $OUT kept"
    exit 0
fi
MB=${TTL_MB:-512}
NODES=${TTL_NODES:-4 16 64}
JOBS=${TTL_JOBS:-2}
FORTUNES=/usr/share/games/fortunes
STAGES=4
DEFAULT_MICRO=$((4 * STAGES))   # what --micro is when not given (brigade sim --help)
[ -x "$BUILD/brigade" ] || { echo "bench_ttl: $BUILD/brigade is missing: run make" >&2; exit 1; }
[ -d "$FORTUNES" ] || { echo "bench_ttl: $FORTUNES missing (Debian package fortunes)" >&2; exit 1; }
if [ -n "${TTL_DIR:-}" ]; then WORK=$TTL_DIR; mkdir -p "$WORK"; else
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/brigade-ttl.XXXXXX"); trap 'rm -rf "$WORK"' EXIT INT TERM; fi
[ -x "$WORK/brigade" ] || cp "$BUILD/brigade" "$WORK/brigade"
t_start=$(date +%s)

# VARIANTS (TTL_VARIANTS overrides it): nodes name options, one run a line, run in this order; the default
# is what a user gets: no --micro, --split auto, the default staleness
VARIANTS=${TTL_VARIANTS:-"16 default
64 default
4 default
4 micro4 --micro 4
16 even --split even
64 micro4 --micro 4
4 stale-none --staleness none
16 micro4 --micro 4"}

# one NODES NAME OPTIONS...: one run into WORK/nNODES-NAME.{out,jsonl} unless it is there
one() {
    n=$1 name=$2; shift 2
    tag=n$n-$name
    [ -s "$WORK/$tag.out" ] && grep -q "^sim: .* trace " "$WORK/$tag.out" && return 0
    micro=$DEFAULT_MICRO
    case " $* " in *" --micro "*) micro=$(echo " $* " | sed 's/.* --micro \([0-9]*\) .*/\1/') ;; esac
    every=$((32 / micro)); [ "$every" -ge 1 ] || every=1
    rm -f "$WORK/$tag.jsonl"
    echo "$WORK/brigade sim --nodes $n --stages $STAGES --model gpt-small --data text:$FORTUNES --batch 8 --lr 1e-3" \
         "--threads 1 --seed 1 --compute real --latency-ms 25:25 --bandwidth-mbit 100:100 --eval-batches 8" \
         "--steps $((MB / micro)) --eval-every $every $*" > "$WORK/$tag.cmd"
    nice -n 10 "$WORK/brigade" sim --nodes "$n" --stages $STAGES --model gpt-small --data "text:$FORTUNES" --batch 8 \
        --lr 1e-3 --threads 1 --seed 1 --compute real --latency-ms 25:25 --bandwidth-mbit 100:100 --eval-batches 8 \
        --sim-seconds 100000 --wall-seconds 20000 --steps $((MB / micro)) --eval-every $every "$@" \
        --metrics "$WORK/$tag.jsonl" > "$WORK/$tag.out" 2>&1
    echo "$tag exit $?" >> "$WORK/status"
}

# the runs of the chosen swarm sizes, JOBS at a time (WORK/running.* count them)
rm -f "$WORK"/running.*
while read -r n name opts; do
    case " $NODES " in *" $n "*) ;; *) continue ;; esac
    while [ "$(ls "$WORK" | grep -c '^running\.')" -ge "$JOBS" ]; do sleep 5; done
    touch "$WORK/running.n$n-$name"
    # shellcheck disable=SC2086
    (one "$n" "$name" $opts; rm -f "$WORK/running.n$n-$name") &
done <<EOF
$VARIANTS
EOF
wait

python3 "$HERE/ttl_table.py" "$WORK" "$MB" "${TTL_TARGET:-}" "$NODES" > "$WORK/frag.md" || exit 1
{
    cat "$WORK/frag.md"
    echo
    echo "bench_ttl: $(( $(date +%s) - t_start )) s wall (runs already in TTL_DIR not counted), load average at the end:" \
         "$(cut -d' ' -f1-3 /proc/loadavg)."
} > "$OUT.tmp" && mv "$OUT.tmp" "$OUT"
echo "wrote $OUT"
