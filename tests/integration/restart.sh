#!/bin/sh
# restart.sh: kill every node of a swarm with -9, restart them with the same
# folders, keys and ports: each resumes its stage from its checkpoint and the
# run completes without starting over.  Prints "ok - NAME" or "FAIL - NAME: why".
BRIGADE=${BRIGADE:-build/brigade}
T=$(mktemp -d /tmp/brigade-restart.XXXXXX)
PIDS=""
cleanup() { for p in $PIDS; do kill -9 "$p" 2>/dev/null; done; rm -rf "$T"; }
trap cleanup EXIT
trap 'exit 1' INT TERM HUP
. "$(dirname "$0")/hx.inc"
ev() {  # ev FILE EVENT KEY: that key of every EVENT line, one per line
    python3 -c 'import json,sys
for l in open(sys.argv[1]):
    try: e=json.loads(l)
    except ValueError: continue
    if e.get("event")==sys.argv[2] and e.get(sys.argv[3]) is not None: print(e[sys.argv[3]])' "$1" "$2" "$3" 2>/dev/null
}
# past FILE VERSION: the last update event of FILE is past VERSION
past() { [ "$(ev "$1" update version | tail -n 1)" -gt "$2" ] 2>/dev/null; }
# has FILE EVENT KEY: FILE holds an EVENT line with KEY
has() { [ -n "$(ev "$1" "$2" "$3" | head -n 1)" ]; }
# addr FILE: the join address of FILE's start event, once written (60 s at most)
addr() { wait_for 60 has "$1" start join_addr; ev "$1" start join_addr | head -n 1; }
"$BRIGADE" keygen --out "$T/k0" >/dev/null && "$BRIGADE" keygen --out "$T/k1" >/dev/null || { echo "FAIL - keygen"; exit 0; }
set -- $(free_ports 2); P0=$1 P1=$2
RUN="--model gpt-tiny --data synthetic --stages 2 --micro 1 --steps 400 --seed 4 --threads 1 --save-every 20"
start() {  # start ROUND
    "$BRIGADE" node --listen 127.0.0.1:$P0 --keys "$T/k0" --checkpoint "$T/ck0" $RUN --metrics "$T/n0.$1.jsonl" 2>"$T/n0.$1.err" &
    N0=$!
    A=""
    A=$(addr "$T/n0.$1.jsonl")
    "$BRIGADE" node --listen 127.0.0.1:$P1 --keys "$T/k1" --checkpoint "$T/ck1" --join "$A" --threads 1 \
        --metrics "$T/n1.$1.jsonl" 2>"$T/n1.$1.err" &
    N1=$!
    PIDS="$N0 $N1"
}
start 1
# wait until both stages have checkpointed at least once (version >= 40 logged), bounded
wait_for 240 past "$T/n1.1.jsonl" 59
kill -9 $N0 $N1; wait $N0 $N1 2>/dev/null
v1=$(ev "$T/n1.1.jsonl" update version | tail -n 1)
first=$(ev "$T/n1.1.jsonl" update loss | head -n 5 | awk '{s+=$1} END {if (NR) print s/NR}')
[ -f "$T/ck0/stage.ckpt" ] && [ -f "$T/ck1/stage.ckpt" ] || { echo "FAIL - checkpoints written: missing after $v1 updates"; exit 0; }
echo "ok - checkpoints written by both stages before the kill (last stage at update $v1)"

start 2
end=$(( $(date +%s) + 240 ))
for p in $N0 $N1; do
    while kill -0 "$p" 2>/dev/null; do [ "$(date +%s)" -ge "$end" ] && break; sleep 0.5; done
done
wait $N0; r0=$?; wait $N1; r1=$?
PIDS=""
s0=$(ev "$T/n0.2.jsonl" start version | head -n 1); s1=$(ev "$T/n1.2.jsonl" start version | head -n 1)
if [ "$r0" = 0 ] && [ "$r1" = 0 ]; then echo "ok - the restarted swarm completed"
else echo "FAIL - restart completes: exits $r0 $r1: $(tail -n 1 "$T/n0.2.err") | $(tail -n 1 "$T/n1.2.err")"; fi
if [ "${s0:-0}" -ge 20 ] && [ "${s1:-0}" -ge 20 ]; then echo "ok - both stages resumed from their checkpoints (versions $s0 and $s1)"
else echo "FAIL - resume: restarted at versions '${s0}' and '${s1}', want >= 20 (the first checkpoint)"; fi
again=$(ev "$T/n1.2.jsonl" update loss | head -n 5 | awk '{s+=$1} END {if (NR) print s/NR}')
n2=$(ev "$T/n1.2.jsonl" update loss | wc -l)
if python3 -c "import sys; sys.exit(0 if float('${again:-nan}') < 0.8 * float('${first:-0}') else 1)" 2>/dev/null; then
    echo "ok - training went on where it stopped (loss $first at the start, $again after the restart)"
else echo "FAIL - no restart from scratch: loss $first at the start, ${again:-none} after the restart"; fi
# (fewer than the run's 400, and not none: a restarted node that made no update redid nothing either)
if [ "$n2" -ge 1 ] && [ "$n2" -lt 400 ]; then echo "ok - the restart did not redo the run ($n2 more updates to reach 400)"
else echo "FAIL - redo: $n2 updates after the restart (want 1..399)"; fi
# the stage checkpoints make one model file that sample reads
if "$BRIGADE" assemble "$T/ck0" "$T/ck1" --out "$T/model.bin" >"$T/asm" 2>&1 \
        && "$BRIGADE" sample --model-file "$T/model.bin" --prompt "the " --length 50 >"$T/sample" 2>&1 \
        && [ "$(wc -c <"$T/sample")" -ge 50 ]; then
    echo "ok - assemble joins the stage checkpoints into a model file that sample reads ($(cat "$T/asm"))"
else
    echo "FAIL - assemble/sample: $(tail -n 1 "$T/asm") $(tail -n 1 "$T/sample")"
fi
"$BRIGADE" assemble "$T/ck0" --out "$T/half.bin" >"$T/asm2" 2>&1; rc=$?
if [ $rc = 2 ] && grep -q "stage 1" "$T/asm2"; then echo "ok - assemble refuses an incomplete set of stages"
else echo "FAIL - assemble incomplete: exit $rc: $(cat "$T/asm2")"; fi
# a joiner that downloaded its stage's state and is stopped before an update of
# its own keeps that state, also when the version is one --save-every would
# have saved (it did not: the version came by the download)
RUN3="--model gpt-tiny --data synthetic --stages 2 --micro 1 --steps 100000 --seed 5 --threads 1"
"$BRIGADE" node --listen 127.0.0.1:$(free_port) $RUN3 --metrics "$T/d0.jsonl" 2>"$T/d0.err" &
D0=$!; PIDS="$D0"
A=$(addr "$T/d0.jsonl")
"$BRIGADE" node --listen 127.0.0.1:$(free_port) --join "$A" --threads 1 --metrics "$T/d1.jsonl" 2>"$T/d1.err" &
D1=$!; PIDS="$D0 $D1"
B=$(addr "$T/d1.jsonl")
wait_for 120 past "$T/d1.jsonl" 2
kill -STOP $D0   # no more work reaches stage 1: the joiner below makes no update
"$BRIGADE" node --listen 127.0.0.1:$(free_port) --join "$B" --stage 1 --threads 1 --checkpoint "$T/ck2" --save-every 1 \
    --metrics "$T/d2.jsonl" 2>"$T/d2.err" &
D2=$!; PIDS="$D0 $D1 $D2"
wait_for 120 has "$T/d2.jsonl" resume version; v=$(ev "$T/d2.jsonl" resume version | head -n 1)
kill -TERM $D2; wait $D2; r2=$?
kill -9 $D0 $D1; wait $D0 $D1 2>/dev/null; PIDS=""
how=$(ev "$T/d2.jsonl" resume from | head -n 1); upd=$(ev "$T/d2.jsonl" update version | wc -l)
if [ "$r2" = 143 ] && [ "$how" = downloaded ] && [ "$upd" = 0 ] && [ -s "$T/ck2/stage.ckpt" ]; then
    echo "ok - a joiner stopped after its download keeps the downloaded state (version $v) in its checkpoint"
else
    echo "FAIL - checkpoint after a download: exit $r2, state $how at '$v', $upd updates, checkpoint: $(ls "$T/ck2" 2>&1 | tr '\n' ' ')"
fi
# a joiner whose checkpoint folder holds another run's stage keeps that file
# aside (DIR/stage.RUN.ckpt) instead of overwriting it with this run's saves
run5=$(ev "$T/d0.jsonl" start run | head -n 1)
cp "$T/ck2/stage.ckpt" "$T/ck2.before" 2>/dev/null
"$BRIGADE" node --listen 127.0.0.1:$(free_port) --model gpt-tiny --data synthetic --stages 2 --micro 1 --steps 20 --seed 6 --threads 1 \
    --metrics "$T/e0.jsonl" 2>"$T/e0.err" &
E0=$!; PIDS="$E0"
A=$(addr "$T/e0.jsonl")
"$BRIGADE" node --listen 127.0.0.1:$(free_port) --join "$A" --threads 1 --checkpoint "$T/ck2" --save-every 5 \
    --metrics "$T/e1.jsonl" 2>"$T/e1.err" &
E1=$!; PIDS="$E0 $E1"
end=$(( $(date +%s) + 120 ))
for p in $E0 $E1; do
    while kill -0 "$p" 2>/dev/null; do [ "$(date +%s)" -ge "$end" ] && break; sleep 0.3; done
done
kill -9 $E0 $E1 2>/dev/null; wait $E0; re0=$?; wait $E1; re1=$?; PIDS=""
run6=$(ev "$T/e0.jsonl" start run | head -n 1)
if [ "$re0" = 0 ] && [ "$re1" = 0 ] && [ -n "$run5" ] && [ "$run5" != "$run6" ] \
        && cmp -s "$T/ck2.before" "$T/ck2/stage.$run5.ckpt" && [ -s "$T/ck2/stage.ckpt" ] \
        && ! cmp -s "$T/ck2.before" "$T/ck2/stage.ckpt" && grep -q "kept as" "$T/e1.err"; then
    echo "ok - a joiner keeps another run's checkpoint in its folder as stage.$run5.ckpt"
else
    echo "FAIL - another run's checkpoint: exits $re0 $re1, runs '$run5' '$run6', folder: $(ls "$T/ck2" 2>&1 | tr '\n' ' ') $(tail -n 1 "$T/e1.err")"
fi
# a joiner asked for another stage (--stage 0) than its folder holds of this run (stage 1) keeps that file aside
# as DIR/stage.RUN.s1.ckpt (it wrote its stage 0 over it, silently); one kept there before stays, and this one
# goes to DIR/stage.RUN.s1.2.ckpt (it replaced the earlier one)
cp "$T/ck2/stage.ckpt" "$T/ck2.s1" 2>/dev/null
echo "kept before" > "$T/ck2/stage.$run6.s1.ckpt"
"$BRIGADE" node --listen 127.0.0.1:$(free_port) --model gpt-tiny --data synthetic --stages 2 --micro 1 --steps 20 --seed 6 --threads 1 \
    --stage 1 --metrics "$T/x0.jsonl" 2>"$T/x0.err" &
G0=$!; PIDS="$G0"
A=$(addr "$T/x0.jsonl")
"$BRIGADE" node --listen 127.0.0.1:$(free_port) --join "$A" --stage 0 --threads 1 --checkpoint "$T/ck2" --save-every 5 \
    --metrics "$T/x1.jsonl" 2>"$T/x1.err" &
G1=$!; PIDS="$G0 $G1"
end=$(( $(date +%s) + 120 ))
for p in $G0 $G1; do
    while kill -0 "$p" 2>/dev/null; do [ "$(date +%s)" -ge "$end" ] && break; sleep 0.3; done
done
kill -9 $G0 $G1 2>/dev/null; wait $G0; rg0=$?; wait $G1; rg1=$?; PIDS=""
if [ "$rg0" = 0 ] && [ "$rg1" = 0 ] && [ "$run6" = "$(ev "$T/x0.jsonl" start run | head -n 1)" ] \
        && cmp -s "$T/ck2.s1" "$T/ck2/stage.$run6.s1.2.ckpt" && [ "$(cat "$T/ck2/stage.$run6.s1.ckpt")" = "kept before" ] \
        && grep -q "held stage 1 of this run .*kept as .*stage.$run6.s1.2.ckpt" "$T/x1.err"; then
    echo "ok - a joiner given another stage keeps this run's stage 1 in its folder as stage.$run6.s1.2.ckpt, beside the one kept before"
else
    echo "FAIL - another stage of this run: exits $rg0 $rg1, folder: $(ls "$T/ck2" 2>&1 | tr '\n' ' ') $(tail -n 1 "$T/x1.err")"
fi
# a joiner with --stage auto whose folder holds stage 0 of another run takes
# the stage this run lacks, not stage 0 again (which left stage 1 unserved)
mkdir -p "$T/ck3" && cp "$T/ck0/stage.ckpt" "$T/ck3/stage.ckpt"
"$BRIGADE" node --listen 127.0.0.1:$(free_port) --model gpt-tiny --data synthetic --stages 2 --micro 1 --steps 10 --seed 7 --threads 1 \
    --metrics "$T/f0.jsonl" 2>"$T/f0.err" &
F0=$!; PIDS="$F0"
A=$(addr "$T/f0.jsonl")
"$BRIGADE" node --listen 127.0.0.1:$(free_port) --join "$A" --threads 1 --checkpoint "$T/ck3" \
    --metrics "$T/f1.jsonl" 2>"$T/f1.err" &
F1=$!; PIDS="$F0 $F1"
end=$(( $(date +%s) + 60 ))
for p in $F0 $F1; do
    while kill -0 "$p" 2>/dev/null; do [ "$(date +%s)" -ge "$end" ] && break; sleep 0.3; done
done
kill -9 $F0 $F1 2>/dev/null; wait $F0; rf0=$?; wait $F1; rf1=$?; PIDS=""
st=$(ev "$T/f1.jsonl" start stage | head -n 1)
if [ "$rf0" = 0 ] && [ "$rf1" = 0 ] && [ "$st" = 1 ]; then
    echo "ok - a joiner with another run's stage-0 checkpoint serves the stage the run lacks (stage $st)"
else
    echo "FAIL - another run's checkpoint and --stage auto: exits $rf0 $rf1, stage '$st': $(tail -n 1 "$T/f1.err")"
fi
# a node stopped while it downloads its stage's state leaves its checkpoint
# as it was: the weights it held then were initial ones (saved, they replaced
# a good earlier state of the stage with version 0)
RUN7="--model gpt-tiny --data synthetic --stages 2 --micro 1 --steps 100000 --seed 8 --threads 1"
"$BRIGADE" node --listen 127.0.0.1:$(free_port) $RUN7 --metrics "$T/g0.jsonl" 2>"$T/g0.err" &
G0=$!; PIDS="$G0"
A=$(addr "$T/g0.jsonl")
"$BRIGADE" node --listen 127.0.0.1:$(free_port) --join "$A" --stage 1 --threads 1 --metrics "$T/g1.jsonl" 2>"$T/g1.err" &
G1=$!; PIDS="$G0 $G1"
"$BRIGADE" node --listen 127.0.0.1:$(free_port) --join "$A" --stage 1 --threads 1 --checkpoint "$T/ck4" \
    --metrics "$T/g2.jsonl" 2>"$T/g2.err" &
G2=$!; PIDS="$G0 $G1 $G2"
wait_for 120 past "$T/g2.jsonl" 4
kill -TERM $G2; wait $G2; rg2=$?
v2=$(ev "$T/g2.jsonl" end updates | tail -n 1)
cp "$T/ck4/stage.ckpt" "$T/ck4.before" 2>/dev/null
# the stage's other node well ahead of the checkpoint, so that a joiner downloads from it
wait_for 180 past "$T/g1.jsonl" $((${v2:-0} + 10))
vg1=$(ev "$T/g1.jsonl" update version | tail -n 1)
# again, with a downlink slow enough that the download takes about 20 s
"$BRIGADE" node --listen 127.0.0.1:$(free_port) --join "$A" --stage 1 --threads 1 --checkpoint "$T/ck4" \
    --emu-downlink-mbit 2 --metrics "$T/g3.jsonl" 2>"$T/g3.err" &
G3=$!; PIDS="$G0 $G1 $G3"
# its start chose: a download, or (when it saw no peer ahead) its checkpoint; either way its word, or its exit
chose() { grep -qE "downloading stage 1|resumed stage" "$T/g3.err" 2>/dev/null || ! kill -0 $G3 2>/dev/null; }
wait_for 120 chose
dl=no; grep -q "downloading stage 1" "$T/g3.err" && dl=yes
# (the download takes about 20 s at 2 Mbit/s, more on a busy machine: the stop below comes during it)
sleep 1
kill -TERM $G3; wait $G3; rg3=$?
kill -9 $G0 $G1; wait $G0 $G1 2>/dev/null; PIDS=""
res=$(ev "$T/g3.jsonl" resume version | head -n 1)
if [ "$dl" = yes ] && [ "$rg2" = 143 ] && [ "$rg3" = 143 ] && [ -z "$res" ] && [ -s "$T/ck4.before" ] && cmp -s "$T/ck4.before" "$T/ck4/stage.ckpt"; then
    echo "ok - a node stopped during its download keeps its earlier checkpoint (version $v2)"
else
    echo "FAIL - checkpoint during a download: download begun: $dl, exits $rg2 $rg3, resumed at '$res', the file $(cmp -s "$T/ck4.before" "$T/ck4/stage.ckpt" && echo kept || echo replaced) (it held version $v2; the stage's other node was at ${vg1:-?} when it joined; it said: $(grep -E 'resumed|download' "$T/g3.err" | head -n 2 | tr '\n' ' '))"
fi
# a one-stage node restarted on a run its checkpoint has completed ends at once: no update past --steps (each
# restart trained one more and rewrote the checkpoint: "run complete after ... 4 updates", then 5)
S1="--listen 127.0.0.1:0 --model gpt-tiny --layers 1 --dim 32 --heads 2 --ctx 16 --stages 1 --steps 3 --threads 1 --checkpoint $T/ck5"
timeout 60 "$BRIGADE" node $S1 >/dev/null 2>"$T/s1.err"; r1=$?
cp "$T/ck5/stage.ckpt" "$T/ck5.before" 2>/dev/null
timeout 60 "$BRIGADE" node $S1 --metrics "$T/s2.jsonl" >/dev/null 2>"$T/s2.err"; r2=$?
ups=$(ev "$T/s2.jsonl" update version | tr '\n' ' ')
if [ $r1 = 0 ] && [ $r2 = 0 ] && [ -z "$ups" ] && cmp -s "$T/ck5.before" "$T/ck5/stage.ckpt"; then
    echo "ok - a node restarted on a run its checkpoint completed ends at once: $(tail -n 1 "$T/s2.err")"
else
    echo "FAIL - restarted on a completed run: exits $r1 $r2, updates '$ups', the checkpoint $(cmp -s "$T/ck5.before" "$T/ck5/stage.ckpt" && echo kept || echo rewritten): $(tail -n 1 "$T/s2.err")"
fi
hx_jsonl
exit 0
