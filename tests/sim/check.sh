#!/bin/sh
# The simulator's share of `make check`: a few dozen random fault plans on
# small swarms (every run completes, every invariant holds) and one
# determinism check (a seed run twice gives the same trace and weights).
# Seconds on a quiet machine; tests/integration/sim.sh (in `make test`) runs
# hundreds of seeds and the longer cases.  SIM_SEEDS: how many (default 60).
BRIGADE=${BRIGADE:-build/brigade}
T=$(mktemp -d /tmp/brigade-simcheck.XXXXXX)
trap 'rm -rf "$T"' EXIT
SEEDS=${SIM_SEEDS:-60}

if BRIGADE=$BRIGADE sh tests/sim/simfuzz.sh 1 "$SEEDS" >"$T/fuzz.out" 2>&1; then
    echo "ok - random fault plans: $(tail -n 1 "$T/fuzz.out")"
else
    echo "FAIL - random fault plans: $(grep -E 'failed|replay' "$T/fuzz.out" | head -n 4 | tr '\n' ' ')"
fi

R="--nodes 6 --stages 3 --steps 40 --compute real --model gpt-tiny --layers 3 --dim 64 --heads 2 --ctx 32 --latency-ms 5:40 --jitter-ms 5 --loss 0.01 --faults 3 --seed 11"
"$BRIGADE" sim $R >"$T/a.out" 2>&1; rc=$?
"$BRIGADE" sim $R >"$T/b.out" 2>&1
ta=$(tail -n 1 "$T/a.out" | sed -n 's/.*trace \([0-9a-f]*\)$/\1/p'); tb=$(tail -n 1 "$T/b.out" | sed -n 's/.*trace \([0-9a-f]*\)$/\1/p')
wa=$(sed -n 's/^sim: weights //p' "$T/a.out"); wb=$(sed -n 's/^sim: weights //p' "$T/b.out")
if [ $rc = 0 ] && [ -n "$ta" ] && [ "$ta" = "$tb" ] && [ -n "$wa" ] && [ "$wa" = "$wb" ]; then
    echo "ok - deterministic: real compute, seed 11 twice gives trace $ta and weights $wa"
else
    echo "FAIL - determinism: traces '$ta' '$tb', weights '$wa' '$wb', exit $rc: $(tail -n 1 "$T/a.out")"
fi
