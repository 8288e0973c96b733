#!/bin/sh
# cpu.sh: one binary for every x86-64 CPU.  The fast kernels are picked at run
# time (compress/cpu.h); BRIGADE_CPU caps them, and with them off (generic)
# the binary trains to the same losses.  Prints "ok - NAME" or "FAIL - NAME: why".
BRIGADE=${BRIGADE:-build/brigade}
T=$(mktemp -d /tmp/brigade-cpu.XXXXXX)
trap 'rm -rf "$T"' EXIT
trap 'exit 1' INT TERM HUP
. "$(dirname "$0")/hx.inc"
B="timeout 120 $BRIGADE"

ok() { echo "ok - $1"; }
bad() { echo "FAIL - $1: $2"; }
# run NAME LEVEL ARGS...: brigade solo ARGS under BRIGADE_CPU=LEVEL ("" = unset),
# OPENBLAS_CORETYPE=$CORE when CORE is set and BRIGADE_GEMM=$GEMM when GEMM is
run() {
    name=$1 level=$2; shift 2
    rm -f "$T/$name.jsonl"
    if [ -n "$level" ]; then
        env ${CORE:+OPENBLAS_CORETYPE=$CORE} ${GEMM:+BRIGADE_GEMM=$GEMM} BRIGADE_CPU=$level $B solo "$@" --threads 1 --metrics "$T/$name.jsonl" >"$T/$name.out" 2>&1
    else
        env -u BRIGADE_CPU ${CORE:+OPENBLAS_CORETYPE=$CORE} ${GEMM:+BRIGADE_GEMM=$GEMM} $B solo "$@" --threads 1 --metrics "$T/$name.jsonl" >"$T/$name.out" 2>&1
    fi
}
# trace NAME: the start event's cpu, then every update's loss and every
# eval's val_loss, one per line, as written (%.9g: equal text, equal float)
trace() {
    python3 -c '
import json, sys
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e["event"] == "start": print("cpu", e.get("cpu"))
    if e["event"] == "update": print("loss", repr(e["loss"]))
    if e["event"] == "eval": print("val_loss", repr(e["val_loss"]))' "$T/$1.jsonl"
}
# worst A B: the largest relative difference between the numbers of two traces
worst() {
    python3 -c '
import sys
a = [l.split() for l in open(sys.argv[1]) if not l.startswith("cpu")]
b = [l.split() for l in open(sys.argv[2]) if not l.startswith("cpu")]
if len(a) != len(b) or not a: print("inf"); sys.exit()
print(max(abs(float(x[1]) - float(y[1])) / max(1e-9, abs(float(x[1]))) for x, y in zip(a, b)))' "$1" "$2"
}

# the level this CPU runs: what an unset BRIGADE_CPU gives
run hw "" --model gpt-tiny --steps 1 --eval-every 0
HW=$(trace hw | sed -n 's/^cpu //p')
case "$HW" in
    generic|sse4.1|avx2|avx512) ok "cpu-level (this CPU: $HW)" ;;
    *) bad cpu-level "the start event has no cpu level: $(tail -n 1 "$T/hw.out")" ;;
esac

# bad_env NAME VAR=VALUE: a bad value in the environment is one line naming
# it, exit 2
bad_env() {
    env "$2" $B solo --steps 1 >"$T/$1.out" 2>&1
    rc=$?
    if [ $rc = 2 ] && [ "$(wc -l <"$T/$1.out")" = 1 ] && grep -q "$2" "$T/$1.out"; then
        ok "$1 (exit 2: $(cat "$T/$1.out"))"
    else
        bad "$1" "exit $rc: $(head -n 2 "$T/$1.out" | tr '\n' ' ')"
    fi
}
bad_env bad-level BRIGADE_CPU=avx9
bad_env bad-gemm BRIGADE_GEMM=mkl

# gemm NAME: the start event's gemm (own or blas)
gemm() { sed -n 's/.*"event":"start".*"gemm":"\([a-z]*\)".*/\1/p' "$T/$1.jsonl"; }

# Head size 24: attention takes its reference path at every level, so every
# other kernel (quantizers, fp16 frames, gelu, AdamW) decides: the fast paths
# off must give the same losses bit for bit, int8 and fp16 frames at the cut.
# The matrix products must then come from OpenBLAS at every level
# (BRIGADE_GEMM=blas; on an AVX-512 CPU its AVX-512 kernel is asked for,
# OPENBLAS_CORETYPE=SkylakeX).
ARGS="--model gpt-tiny --dim 96 --heads 4 --stages 2 --codec int8 --grad-codec fp16 --steps 8 --eval-every 4 --seed 3"
[ "$HW" = avx512 ] && CORE=SkylakeX
GEMM=blas
run ref24 generic $ARGS
run hw24 "" $ARGS
CORE= GEMM=
trace ref24 | grep -v '^cpu' >"$T/ref24.t"
trace hw24 | grep -v '^cpu' >"$T/hw24.t"
if [ "$(trace ref24 | sed -n 1p)" != "cpu generic" ]; then
    bad generic-same-losses "BRIGADE_CPU=generic ran at $(trace ref24 | sed -n 1p)"
elif [ "$(trace hw24 | sed -n 1p)" != "cpu $HW" ]; then
    bad generic-same-losses "BRIGADE_CPU unset ran at $(trace hw24 | sed -n 1p), want $HW"
elif [ "$(grep -Ec '^(loss|val_loss) -?[0-9]' "$T/ref24.t")" -lt 10 ]; then
    bad generic-same-losses "too few losses (numbers): $(tail -n 1 "$T/ref24.out")"
elif cmp -s "$T/ref24.t" "$T/hw24.t"; then
    ok "generic-same-losses ($(wc -l <"$T/ref24.t") losses equal, generic vs $HW, head size 24, int8/fp16 cut)"
else
    bad generic-same-losses "generic vs $HW: $(diff "$T/ref24.t" "$T/hw24.t" | head -n 4 | tr '\n' ' ')"
fi

# The own matrix product (AVX-512, the default there): fused multiply-adds
# and another order of the sums (test_gemm bounds a product at 1e-6 of its
# terms' magnitude); over 8 updates the losses stay within 1e-3 relative of
# OpenBLAS's.
if [ "$HW" = avx512 ]; then
    run own24 "" $ARGS
    trace own24 | grep -v '^cpu' >"$T/own24.t"
    w=$(worst "$T/ref24.t" "$T/own24.t")
    if [ "$(gemm own24)" = own ] && [ "$(gemm hw24)" = blas ] &&
       python3 -c "import sys; sys.exit(0 if float('$w') <= 1e-3 else 1)"; then
        ok "own-gemm-close (own AVX-512 product vs OpenBLAS: worst relative loss difference $w)"
    else
        bad own-gemm-close "gemm $(gemm own24) (want own) vs $(gemm hw24) (want blas): worst relative loss difference $w"
    fi
fi

# Head size 32 (gpt-tiny): below AVX-512 the attention reference runs, so any
# level up to avx2 gives the generic losses bit for bit.  With AVX-512 the
# register-blocked attention kernels run: fused multiply-adds and another order
# of the sums change roundings (test_layers bounds one call at 1e-6 on att,
# 1e-5 on out, 1e-4 relative on the gradients); over 8 updates the losses
# then stay within 1e-3 relative, while a wrong kernel moves them by far more.
ARGS="--model gpt-tiny --stages 2 --codec int4 --grad-codec int8 --steps 8 --eval-every 4 --seed 5"
run ref32 generic $ARGS
trace ref32 | grep -v '^cpu' >"$T/ref32.t"
n32=$(grep -Ec '^(loss|val_loss) -?[0-9]' "$T/ref32.t")   # numbers only: two runs of nulls compare equal too
rank() { case $1 in generic) echo 0 ;; sse4.1) echo 1 ;; avx2) echo 2 ;; avx512) echo 3 ;; *) echo 9 ;; esac; }
for level in sse4.1 avx2 ""; do
    tag=${level:-$HW}
    want=$tag; [ "$(rank "$HW")" -lt "$(rank "$tag")" ] && want=$HW   # the cap, or the CPU where it is lower
    run "l$tag" "$level" $ARGS
    trace "l$tag" | grep -v '^cpu' >"$T/l$tag.t"
    got=$(trace "l$tag" | sed -n 's/^cpu //p')
    # two runs that both wrote nothing compare equal: the reference must have
    # its 8 losses and 2 evaluations, and this run a start event
    if [ "$n32" -lt 10 ]; then
        bad "same-losses-$tag" "the generic reference wrote $n32 losses: $(tail -n 1 "$T/ref32.out")"
    elif [ -z "$got" ]; then
        bad "same-losses-$tag" "BRIGADE_CPU=${level:-unset} wrote no start event: $(tail -n 1 "$T/l$tag.out")"
    elif [ "$got" != "$want" ]; then
        bad "same-losses-$tag" "BRIGADE_CPU=${level:-unset} on a $HW CPU ran at $got, want $want"
    elif [ "$got" = avx512 ]; then
        w=$(worst "$T/ref32.t" "$T/l$tag.t")
        if python3 -c "import sys; sys.exit(0 if float('$w') <= 1e-3 else 1)"; then
            ok "fast-attention-close (avx512 vs generic: worst relative loss difference $w)"
        else
            bad fast-attention-close "avx512 vs generic: worst relative loss difference $w"
        fi
    elif cmp -s "$T/ref32.t" "$T/l$tag.t"; then
        ok "same-losses-$tag (BRIGADE_CPU=${level:-unset} ran at $got: $(wc -l <"$T/ref32.t") losses equal to generic)"
    else
        bad "same-losses-$tag" "at $got: $(diff "$T/ref32.t" "$T/l$tag.t" | head -n 4 | tr '\n' ' ')"
    fi
done

hx_jsonl
