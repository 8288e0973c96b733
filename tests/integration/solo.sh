#!/bin/sh
# solo.sh: the in-process reference trainer from the outside: it learns, its
# stage split and seed are exact, it saves/samples/resumes, and it refuses bad
# input with one line and exit 2.  Prints "ok - NAME" or "FAIL - NAME: why".
BRIGADE=${BRIGADE:-build/brigade}
T=$(mktemp -d /tmp/brigade-solo.XXXXXX)
trap 'rm -rf "$T"' EXIT
trap 'exit 1' INT TERM HUP
. "$(dirname "$0")/hx.inc"
B="timeout 120 $BRIGADE"

ok() { echo "ok - $1"; }
bad() { echo "FAIL - $1: $2"; }
# losses FILE: the training losses of the update events, one per line
losses() {
    python3 -c '
import json, sys
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e.get("event") == "update" and isinstance(e.get("loss"), (int, float)):
        print(e["loss"])' "$1"
}
# last_of FILE EVENT KEY: KEY of the last EVENT event
last_of() {
    python3 -c '
import json, sys
v = None
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e.get("event") == sys.argv[2] and sys.argv[3] in e:
        v = e[sys.argv[3]]
print(v)' "$1" "$2" "$3"
}
# run NAME ARGS...: brigade solo ARGS with metrics to $T/NAME.jsonl, output to $T/NAME.out
run() {
    name=$1; shift
    rm -f "$T/$name.jsonl"
    $B solo "$@" --threads 1 --metrics "$T/$name.jsonl" >"$T/$name.out" 2>&1
}
why() { tail -n 1 "$T/$1.out"; }

# 1. gpt-tiny on synthetic data halves its loss in 300 updates.
if run learn --model gpt-tiny --data synthetic --steps 300 --seed 1; then
    losses "$T/learn.jsonl" >"$T/learn.l"
    r=$(python3 -c '
import sys
l = [float(x) for x in open(sys.argv[1])]
f, e = sum(l[:5]) / 5, sum(l[-5:]) / 5
print("%d losses, %.4f -> %.4f" % (len(l), f, e) if len(l) >= 10 and e <= 0.5 * f else "")' "$T/learn.l")
    if [ -n "$r" ]; then ok "solo gpt-tiny loss halves ($r)"
    else bad "solo gpt-tiny loss halves" "$(head -n 5 "$T/learn.l" | tr '\n' ' ')... $(tail -n 5 "$T/learn.l" | tr '\n' ' ')"; fi
else bad "solo gpt-tiny loss halves" "exit $?: $(why learn)"; fi

# 2. --stages 1, --stages 3, --stages 4 --split late and --stages 2 --split front are the same computation; 3. same seed
# twice, same losses.
C="--model gpt-tiny --data synthetic --steps 20 --micro 4 --seed 7"   # one --micro: its default follows --stages
if run s1 $C --stages 1 && run s3 $C --stages 3 && run s4l $C --stages 4 --split late && run s2f $C --stages 2 --split front \
   && run s1b $C --stages 1; then
    for s in s1 s3 s4l s2f s1b; do losses "$T/$s.jsonl" >"$T/$s.l"; done
    for s in "s3:--stages 3" "s4l:--stages 4 --split late" "s2f:--stages 2 --split front (3 blocks and 1)"; do
        r=$(python3 -c '
import sys
a = [float(x) for x in open(sys.argv[1])]; b = [float(x) for x in open(sys.argv[2])]
w = max([abs(x - y) / max(1e-12, abs(x)) for x, y in zip(a, b)] or [1])
print("ok %.2e" % w if len(a) == 20 and len(b) == 20 and w <= 1e-4 else "%d/%d losses, worst relative difference %.2e" % (len(a), len(b), w))' "$T/s1.l" "$T/${s%%:*}.l")
        case $r in ok*) ok "solo --stages 1 == ${s#*:} over 20 updates (worst ${r#ok })" ;;
                   *) bad "solo --stages 1 == ${s#*:}" "$r" ;; esac
    done
    if [ "$(wc -l <"$T/s1.l")" -eq 20 ] && cmp -s "$T/s1.l" "$T/s1b.l"; then ok "solo same seed twice gives identical losses"
    else bad "solo same seed twice gives identical losses" "$(paste "$T/s1.l" "$T/s1b.l" | awk '$1 != $2' | head -n 1)"; fi
else bad "solo --stages 1 == --stages 3 / 4 late / 2 front" "a run failed: $(why s1) $(why s3) $(why s4l) $(why s2f) $(why s1b)"
     bad "solo same seed twice" "a run failed"; fi

# 4. mlp-fmnist reaches 85% on the Fashion-MNIST validation set (300 updates of 128 at lr 1e-3: about 86%).
if [ -f /usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz ]; then
    if run fm --model mlp-fmnist --data fmnist --steps 300 --batch 128 --lr 1e-3 --seed 1; then
        acc=$(last_of "$T/fm.jsonl" eval val_acc)
        if python3 -c "import sys; sys.exit(0 if float('$acc') >= 0.85 else 1)" 2>/dev/null; then ok "solo mlp-fmnist val_acc $acc >= 0.85"
        else bad "solo mlp-fmnist val_acc >= 0.85" "val_acc $acc"; fi
    else bad "solo mlp-fmnist val_acc >= 0.85" "exit: $(why fm)"; fi
else bad "solo mlp-fmnist val_acc >= 0.85" "no data set in /usr/share/datasets/fashion-mnist"; fi

# 5. --save, then sample prints text, then --resume continues from the saved version.
if run save --model gpt-tiny --data synthetic --steps 20 --seed 3 --save "$T/m.bin"; then
    if $B sample --model-file "$T/m.bin" --prompt "ab" >"$T/sample.out" 2>"$T/sample.err" && [ "$(wc -c <"$T/sample.out")" -ge 8 ]; then
        ok "sample --model-file prints text ($(wc -c <"$T/sample.out") bytes)"
    else bad "sample --model-file prints text" "$(tail -n 1 "$T/sample.err") ($(wc -c <"$T/sample.out") bytes out)"; fi
    if run resume --data synthetic --steps 25 --seed 3 --resume "$T/m.bin"; then
        r=$(python3 -c '
import json, sys
fresh = resumed = None
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e.get("event") == "update" and fresh is None: fresh = e
for line in open(sys.argv[2]):
    e = json.loads(line)
    if e.get("event") == "update" and resumed is None: resumed = e
if not fresh or not resumed: print("no update events")
elif resumed["version"] != 21: print("resumed at version %s, want 21" % resumed["version"])
elif not resumed["loss"] < 0.6 * fresh["loss"]: print("resumed first loss %.4f vs fresh %.4f" % (resumed["loss"], fresh["loss"]))
else: print("ok version 21, loss %.4f (fresh start %.4f)" % (resumed["loss"], fresh["loss"]))' "$T/save.jsonl" "$T/resume.jsonl")
        case $r in ok*) ok "solo --resume continues (${r#ok })" ;; *) bad "solo --resume continues" "$r" ;; esac
    else bad "solo --resume continues" "exit: $(why resume)"; fi
else bad "solo --save" "exit: $(why save)"; bad "sample" "no model file"; bad "solo --resume" "no model file"; fi

# 5b. --checkpoint DIR: a run killed after a checkpoint restarts from it, with the same losses as a run that
# went through (2 stages, 2 microbatches per update); also with --delay and a lossy --grad-codec, whose earlier
# weights and error-feedback residuals go to DIR/stage.ckpt.solo (their losses differed after a restart); DIR of
# another run is refused.
ck_resumes() {   # NAME OPTIONS...: the run in $T/NAME, killed after update 4, resumed
    name=$1; shift
    if ! $B solo "$@" --checkpoint "$T/${name}ref" --metrics "$T/${name}ref.jsonl" >"$T/${name}ref.out" 2>&1; then
        bad "solo --checkpoint $name" "exit: $(why "${name}ref")"; return 1
    fi
    # not through timeout: kill -9 must stop the run itself (a run left behind went on saving into the folder)
    "$BRIGADE" solo "$@" --checkpoint "$T/$name" --metrics "$T/${name}1.jsonl" >"$T/${name}1.out" 2>&1 &
    KP=$!
    wait_for 120 grep -qs '"version":4,' "$T/${name}1.jsonl"
    kill -9 $KP 2>/dev/null; wait $KP 2>/dev/null
    $B solo "$@" --checkpoint "$T/$name" --metrics "$T/${name}2.jsonl" >"$T/${name}2.out" 2>&1; rc2=$?
    r=$(python3 -c '
import json, sys
def ups(f): return {e["version"]: e["loss"] for e in map(json.loads, open(f)) if e["event"] == "update"}
ref, got = ups(sys.argv[1]), ups(sys.argv[2])
if sys.argv[3] != "0": print("the resumed run exited %s" % sys.argv[3])
elif not got or min(got) < 2: print("resumed at %s, want a checkpoint version" % (min(got) - 1 if got else "none"))
elif sorted(got) != list(range(min(got), 9)): print("updates %s, want %d..8" % (sorted(got), min(got)))
elif any(ref[v] != got[v] for v in got): print("losses differ: %s vs %s" % (got, ref))
else: print("ok resumed at update %d, updates %d..8 as in one run" % (min(got) - 1, min(got)))' "$T/${name}ref.jsonl" "$T/${name}2.jsonl" "$rc2" 2>&1)
    case $r in ok*) ok "solo --checkpoint resumes, $name (${r#ok })" ;; *) bad "solo --checkpoint resumes, $name" "$r: $(why "${name}2")" ;; esac
}
C="--model gpt-tiny --data synthetic --stages 2 --micro 2 --batch 64 --steps 8 --seed 5 --save-every 3 --threads 1"
if ck_resumes ck $C; then
    $B solo $C --seed 6 --checkpoint "$T/ck" >"$T/ck3.out" 2>&1; rc=$?
    [ $rc = 2 ] && [ "$(wc -l <"$T/ck3.out")" = 1 ] && grep -q "holds another run" "$T/ck3.out" \
        && ok "solo --checkpoint of another run: one line, exit 2" || bad "solo --checkpoint of another run" "exit $rc: $(why ck3)"
fi
if ck_resumes ckd $C --delay 2,0 --grad-codec int8 && [ -s "$T/ckd/stage.ckpt.solo" ]; then
    # without its extra state (a checkpoint of an older brigade) a restart goes on and says what starts afresh
    rm -f "$T/ckd/stage.ckpt.solo"
    $B solo $C --delay 2,0 --grad-codec int8 --steps 8 --checkpoint "$T/ckd" >"$T/ckd4.out" 2>&1; rc=$?
    [ $rc = 0 ] && grep -q "stage.ckpt.solo: .*start afresh" "$T/ckd4.out" \
        && ok "solo --checkpoint without its extra state: goes on, says so" || bad "solo --checkpoint without its extra state" "exit $rc: $(why ckd4)"
fi

# 6. --delay: stage k computes at the weights of Dk updates earlier.  gpt-tiny on fortunes, 4 stages, 150 updates
# of 8 x 64 tokens: with the default correction (predict+ramp) delays 3,2,1,0 end within 2% of no delay (measured
# +0.0%), without correction more than 2% above it (measured +13%); the ramp has let the full delay in by the end.
if [ -d /usr/share/games/fortunes ]; then
    D="--model gpt-tiny --data text:/usr/share/games/fortunes --stages 4 --steps 150 --batch 8 --micro 1 --lr 1e-3 --seed 1"
    if run d0 $D --delay 0,0,0,0 && run dc $D --delay 3,2,1,0 && run dn $D --delay 3,2,1,0 --staleness none; then
        v0=$(last_of "$T/d0.jsonl" eval val_loss); vc=$(last_of "$T/dc.jsonl" eval val_loss); vn=$(last_of "$T/dn.jsonl" eval val_loss)
        dl=$(last_of "$T/dc.jsonl" update delay)
        line="val loss: no delay $v0, 3,2,1,0 corrected $vc, uncorrected $vn; last delay at stage 0: $dl"
        if python3 -c "import sys; sys.exit(0 if $vc <= 1.02 * $v0 and $dl == 3 else 1)"; then ok "solo --delay 3,2,1,0 with the default correction within 2% ($line)"
        else bad "solo --delay 3,2,1,0 with the default correction within 2%" "$line"; fi
        if python3 -c "import sys; sys.exit(0 if $vn > 1.02 * $v0 else 1)"; then ok "solo --delay 3,2,1,0 --staleness none more than 2% worse ($line)"
        else bad "solo --delay 3,2,1,0 --staleness none more than 2% worse" "$line"; fi
    else bad "solo --delay" "a run failed: $(why d0) $(why dc) $(why dn)"; fi
else bad "solo --delay" "no /usr/share/games/fortunes (Debian package fortunes)"; fi

# 7. Bad input: one line on stderr, exit 2.
mkdir -p "$T/empty"
[ -f "$T/m.bin" ] && head -c 1000 "$T/m.bin" >"$T/trunc.bin" || printf 'garbage' >"$T/trunc.bin"
# expect2 NAME [-m TEXT] ARGS...: exit 2, one line on stderr (containing TEXT)
expect2() {
    name=$1; shift
    want=""; [ "$1" = -m ] && { want=$2; shift 2; }
    timeout 20 $B "$@" >"$T/bad.out" 2>"$T/bad.err" </dev/null; rc=$?
    n=$(grep -c . "$T/bad.err")
    if [ "$rc" = 2 ] && [ "$n" = 1 ] && grep -qF -- "$want" "$T/bad.err"; then ok "$name: exit 2, $(cat "$T/bad.err")"
    else bad "$name" "exit $rc, $n lines on stderr (want one${want:+ with '$want'}): $(head -n 3 "$T/bad.err" | tr '\n' '|')"; fi
}
expect2 "solo unknown option" solo --bogus-option 1
expect2 "solo --model nope" solo --model nope
expect2 "solo option holding a newline" -m "unknown option '--bogus?option'" solo "$(printf -- '--bogus\noption')"
expect2 "solo --data text:/nonexistent" -m "--data: text: /nonexistent:" solo --data text:/nonexistent --steps 1
expect2 "solo --data fmnist:<empty dir>" solo --model mlp-fmnist --data "fmnist:$T/empty" --steps 1
expect2 "sample truncated model file" sample --model-file "$T/trunc.bin"
expect2 "sample --length 4294967297" -m "--length" sample --model-file "$T/m.bin" --length 4294967297
expect2 "sample --length 5x" -m "--length" sample --model-file "$T/m.bin" --length 5x
expect2 "sample --temperature ''" -m "--temperature" sample --model-file "$T/m.bin" --temperature ""
expect2 "sample --seed -3" -m "--seed" sample --model-file "$T/m.bin" --seed -3
[ -f "$T/m.bin" ] && expect2 "solo --resume with another --ctx" -m "--resume" solo --resume "$T/m.bin" --ctx 32 --steps 21
# mlpfile PATH CLASSES INPUTS: a model file of a 1-hidden-layer mlp of width 8
# (sizes a swarm's run config can carry too), which no option can make
mlpfile() {
    python3 -c '
import struct, sys, zlib
V, D, C, L = int(sys.argv[2]), int(sys.argv[3]), 8, 1
n = D * C + C + (L - 1) * (C * C + C) + C * V + V
h = b"BRGDMODL" + struct.pack("<I7i", 1, 2, V, 1, C, L, 0, D) + b"mlp-fmnist".ljust(24, b"\0") + struct.pack("<qQ", 0, n)
body = struct.pack("<%df" % n, *[0.01 * (i % 7 - 3) for i in range(n)])
open(sys.argv[1], "wb").write(h + body + struct.pack("<I", zlib.crc32(h + body)))' "$@"
}
mlp_refused() { # FILE V D NAME: solo --resume of that mlp's model file on synthetic data is refused
    if mlpfile "$1" "$2" "$3"; then expect2 "$4" -m "--data synthetic" solo --resume "$1" --data synthetic --steps 1
    else bad "$4" "could not write $1"; fi
}
# the defaults that follow the model (--batch: 64 for an mlp) follow the model file's
if mlpfile "$T/mlp784.bin" 10 784 && timeout 60 $B solo --resume "$T/mlp784.bin" --data synthetic --steps 1 >"$T/mr.out" 2>"$T/mr.err" \
    && grep -q "mlp-fmnist, .* 1 updates of 1 x 64" "$T/mr.err"; then ok "solo --resume of an mlp: its batch default (64)"
else bad "solo --resume of an mlp" "$(head -n 2 "$T/mr.err" | tr '\n' '|')"; fi
mlp_refused "$T/d16.bin" 10 16 "solo --resume of an mlp reading 16 inputs from images of 784"
mlp_refused "$T/d2000.bin" 10 2000 "solo --resume of an mlp reading 2000 inputs from images of 784"
mlp_refused "$T/v2.bin" 2 784 "solo --resume of an mlp with 2 classes for 10 labels"
expect2 "solo --stages past the one bound" solo --model mlp-fmnist --layers 128 --dim 8 --data synthetic --stages 129 --steps 1
expect2 "node --stage past the one bound" node --stage 128
expect2 "solo --delay with too few values" solo --stages 4 --delay 3,2,1 --steps 1
expect2 "solo --delay with a negative value" solo --stages 2 --delay 1,-1 --steps 1
expect2 "solo --delay with a fraction" solo --stages 2 --delay 1.5,0 --steps 1
expect2 "solo --delay of two stages without --stages" solo --delay 2,1 --steps 1
expect2 "solo --staleness unknown" solo --staleness magic
expect2 "solo --bottleneck not dividing the width" -m "--bottleneck 3: must divide the width 128" solo --stages 2 --bottleneck 3 --steps 1
expect2 "solo --bottleneck with one stage" -m "--bottleneck 4: --stages 1 has no cut" solo --bottleneck 4 --steps 1
expect2 "solo --bottleneck of an mlp" -m "not a gpt" solo --model mlp-fmnist --stages 2 --bottleneck 4 --steps 1
expect2 "no command" -m "no command given"
expect2 "version with an option" -m "version takes no options" version --bogus
expect2 "keygen --out without a value" -m "--out needs a value" keygen --out
expect2 "sample unknown option" -m "unknown option '--bogus'" sample --bogus
expect2 "sample --seed without a value" -m "--seed needs a value" sample --seed
expect2 "status with an option for the address" -m "the node's address" status --bogus
expect2 "status --keys without a value" -m "--keys needs a value" status 127.0.0.1:9/AAAA --keys
expect2 "node --relay-mbit 0" -m "--relay-mbit 0: must be in (0" node --relay-mbit 0
# an empty value (an unset shell variable) is an error, not the option left out
expect2 "solo --save ''" -m "--save: empty value" solo --steps 1 --save ""
expect2 "node --join ''" -m "--join: empty value" node --join ""
expect2 "node --owner ''" -m "--owner: empty value" node --owner ""
expect2 "solo --seed ' -1'" -m "--seed  -1: not a valid integer" solo --seed " -1"
expect2 "solo --lr 1e-46 (below a float)" -m "--lr 1e-46: out of range" solo --lr 1e-46
expect2 "node --staleness dc" -m "--staleness dc: solo only" node --staleness predict+dc
expect2 "sim --staleness dc" -m "--staleness dc: solo only" sim --staleness dc
expect2 "node --ticket without --join" -m "--ticket admits a joiner" node --ticket AAAA
# 7a. An option's value apart that starts with -- is the next option: refused (solo --metrics --steps 5
#     wrote a metrics file named --steps, node --metrics --no-listen took the flag as the file); joined,
#     --NAME=VALUE, a value may start with --; one dash is a value (--lr -0.1 is checked as a number).
#     in_t runs expect2 in $T: a brigade that takes such a value writes its file or folder there.
BA=$(cd "$(dirname "$BRIGADE")" && pwd)/$(basename "$BRIGADE")
in_t() { (cd "$T" && B="timeout 120 $BA" && expect2 "$@"); }
in_t "solo --metrics --steps 5" -m "--metrics needs a value (FILE): '--steps' is the next option" solo --metrics --steps 5
[ -e "$T/--steps" ] && bad "solo --metrics --steps 5" "a file named --steps was written"
in_t "node --metrics --no-listen" -m "'--no-listen' is the next option" node --metrics --no-listen
expect2 "sim --plan --nodes 4" -m "--plan needs a value" sim --plan --nodes 4
expect2 "sim --metrics --steps 5 (a run option)" -m "'--steps' is the next option" sim --metrics --steps 5
expect2 "solo --lr -0.1 (one dash: a value)" -m "--lr -0.1: must be in" solo --lr -0.1
expect2 "sample --model-file --prompt" -m "'--prompt' is the next option" sample --model-file --prompt x
in_t "keygen --out --x" -m "keygen: --out needs a value (DIR): '--x' is the next option" keygen --out --x
expect2 "status --keys --ticket" -m "status: --keys needs a value" status 127.0.0.1:9/AAAA --keys --ticket x
expect2 "ticket --owner --peer" -m "ticket: --owner needs a value" ticket --owner --peer x
in_t "assemble --out --x" -m "assemble: --out needs a value" assemble "$T" --out --x
if $B solo --model gpt-tiny --data synthetic --steps 1 --metrics="$T/--m.jsonl" >/dev/null 2>&1 && [ -s "$T/--m.jsonl" ] &&
   [ -f "$T/m.bin" ] && $B sample --model-file="$T/m.bin" --prompt=--x --length=3 >/dev/null 2>&1; then
    ok "--NAME=VALUE takes a value that starts with -- (solo --metrics, sample --prompt)"
else bad "--NAME=VALUE" "solo --metrics=$T/--m.jsonl or sample --prompt=--x failed"; fi
# A file option that cannot be read names the option (solo --resume said only 'nonexist: No such file')
expect2 "solo --resume of no file" -m "--resume $T/none.bin: No such file" solo --resume "$T/none.bin"
expect2 "sample --model-file of no file" -m "--model-file $T/none.bin: No such file" sample --model-file "$T/none.bin"
expect2 "node --keys of no folder" -m "--keys: $T/none/node.key: no such file" node --keys "$T/none"
expect2 "node --owner of no folder" -m "--owner: $T/none/owner.sign: no such file" node --owner "$T/none"
# --save-every without --checkpoint was ignored; assemble --out twice took the last
expect2 "solo --save-every without --checkpoint" -m "--save-every 5: needs --checkpoint" solo --steps 1 --save-every 5
expect2 "node --save-every without --checkpoint" -m "--save-every 5: needs --checkpoint" node --save-every 5
[ -f "$T/ck/stage.ckpt" ] && expect2 "assemble --out twice" -m "assemble: --out given twice" assemble "$T/ck" --out "$T/a.bin" --out "$T/b.bin"
[ -f "$T/m.bin" ] && expect2 "solo --resume past --steps" -m "is at update 20 already" solo --resume "$T/m.bin" --steps 19
# assemble --out "" loaded every stage and failed at its rename ("brigade: : write failed"); a key file that is a
# pipe held ticket in its open; a ticket that could not be written exited 0; a rewritten model file became 0644
[ -f "$T/ck/stage.ckpt" ] && expect2 "assemble --out ''" -m "assemble: --out: empty value" assemble "$T/ck" --out ""
mkfifo "$T/kfifo" && mkdir -p "$T/ownf" && mkfifo "$T/ownf/owner.sign" &&
    $B keygen --out "$T/kown" >/dev/null 2>&1 && $B keygen --out "$T/kpeer" >/dev/null 2>&1
expect2 "ticket --peer a pipe" -m "not a regular file" ticket --owner "$T/kown" --peer "$T/kfifo"
expect2 "ticket --owner holding a pipe" -m "not a regular file" ticket --owner "$T/ownf" --peer "$T/kpeer"
$B ticket --owner "$T/kown" --peer "$T/kpeer" >/dev/full 2>"$T/tfull.err"; rc=$?
[ $rc = 1 ] && grep -q "could not be written" "$T/tfull.err" && ok "a ticket that cannot be written: exit 1, $(cat "$T/tfull.err")" ||
    bad "a ticket into a full device" "exit $rc: $(cat "$T/tfull.err")"
if [ -f "$T/m.bin" ] && [ -f "$T/ck/stage.ckpt" ] && cp "$T/m.bin" "$T/priv.bin" && chmod 600 "$T/priv.bin" &&
   $B assemble "$T/ck" --out "$T/priv.bin" >/dev/null 2>&1 && [ "$(stat -c %a "$T/priv.bin")" = 600 ]; then
    ok "a model file written over keeps its permissions (600)"
else bad "a model file written over" "mode $(stat -c %a "$T/priv.bin" 2>&1)"; fi
if [ -f "$T/ck/stage.ckpt" ]; then
    sum=$(cksum <"$T/ck/stage.ckpt")
    expect2 "solo --save over a checkpoint" -m "holds a checkpoint" solo --steps 1 --save "$T/ck/stage.ckpt"
    expect2 "assemble --out over a checkpoint" -m "holds a checkpoint" assemble "$T/ck" --out "$T/ck/stage.ckpt"
    [ "$(cksum <"$T/ck/stage.ckpt")" = "$sum" ] && ok "a checkpoint named as --save or --out is left as it was" \
        || bad "checkpoint named as --save or --out" "the file changed"
else bad "solo --save over a checkpoint" "no checkpoint from section 5b"; fi

# 7b. Files that are not plain files: --save through a symbolic link replaces the file it points to and keeps
#     the link (the link was replaced by a file); a device or a pipe as --save is refused (a root's --save
#     /dev/null replaced the device with a file); a pipe as --model-file is refused at once (it hung);
#     --save naming the run's own checkpoint fails at the end and leaves the checkpoint (it was overwritten);
#     output that cannot be written is an error (exit 1), a --metrics file that cannot be written is said once
mkfifo "$T/fifo" 2>/dev/null
if [ -f "$T/m.bin" ] && cp "$T/m.bin" "$T/m2.bin" && ln -s m2.bin "$T/link.bin" && [ -p "$T/fifo" ]; then
    sum=$(cksum <"$T/m2.bin")
    $B solo --model gpt-tiny --data synthetic --steps 2 --save "$T/link.bin" >/dev/null 2>&1; rc=$?
    [ $rc = 0 ] && [ -L "$T/link.bin" ] && [ "$(readlink "$T/link.bin")" = m2.bin ] && [ "$(cksum <"$T/m2.bin")" != "$sum" ] &&
        ok "--save through a link: the link kept, its file replaced" || bad "--save through a link" "exit $rc; $(ls -l "$T/link.bin" "$T/m2.bin" | tr '\n' '|')"
    expect2 "solo --save a pipe" -m "not a regular file" solo --steps 1 --save "$T/fifo"
    expect2 "sample --model-file a pipe" -m "not a file" sample --model-file "$T/fifo"
else bad "files that are not plain files" "no model file from section 5, or no link or pipe made"; fi
mkdir -p "$T/ck7"
$B solo --model gpt-tiny --data synthetic --steps 2 --checkpoint "$T/ck7" --save "$T/ck7/stage.ckpt" >/dev/null 2>"$T/ck7.err"; rc=$?
[ $rc = 1 ] && [ "$(head -c 8 "$T/ck7/stage.ckpt" 2>/dev/null)" = BRGDCKPT ] && grep -q "holds a checkpoint" "$T/ck7.err" &&
    ok "--save naming the run's own checkpoint: exit 1, the checkpoint kept" || bad "--save naming the run's checkpoint" "exit $rc: $(tail -n 1 "$T/ck7.err")"
if [ -c /dev/full ] && [ -f "$T/m.bin" ]; then
    $B sample --model-file "$T/m.bin" --length 5 >/dev/full 2>"$T/full.err"; rc=$?
    [ $rc = 1 ] && grep -q "could not be written" "$T/full.err" && ok "sample into a full device: exit 1, $(cat "$T/full.err")" ||
        bad "sample into a full device" "exit $rc: $(cat "$T/full.err")"
    $B solo --model gpt-tiny --data synthetic --steps 3 --metrics /dev/full >/dev/null 2>"$T/mfull.err"; rc=$?
    [ $rc = 0 ] && [ "$(grep -c -- '--metrics: writing failed' "$T/mfull.err")" = 1 ] && ok "--metrics into a full device: said once" ||
        bad "--metrics into a full device" "exit $rc: $(grep -c -- '--metrics' "$T/mfull.err") lines"
fi

# 7a. two processes with one --checkpoint folder: the second is refused at its start (they overwrote each other's
#     stage, and a restart then took over the other's)
$BRIGADE solo --model gpt-tiny --data synthetic --steps 100000 --checkpoint "$T/lk" >/dev/null 2>&1 &
lkpid=$!
wait_for 60 test -s "$T/lk/.lock"
port=$(free_port)
$B solo --model gpt-tiny --data synthetic --steps 3 --checkpoint "$T/lk" >/dev/null 2>"$T/lk1.err"; rc1=$?
$B node --listen 127.0.0.1:$port --stages 1 --steps 3 --checkpoint "$T/lk" >/dev/null 2>"$T/lk2.err"; rc2=$?
kill $lkpid 2>/dev/null; wait $lkpid 2>/dev/null
if [ $rc1 = 2 ] && [ $rc2 = 2 ] && [ "$(wc -l <"$T/lk1.err")" = 1 ] && grep -q "in use by another brigade process (pid $lkpid)" "$T/lk1.err" \
    && grep -q "in use by another brigade process" "$T/lk2.err"; then ok "a --checkpoint folder in use is refused: $(cat "$T/lk1.err")"
else bad "a --checkpoint folder in use" "exit $rc1 / $rc2: $(cat "$T/lk1.err" "$T/lk2.err" | tr '\n' ' ')"; fi

# 7c. a save cut short (kill -9 between the write and the rename) left stage.ckpt.tmp.PID in the folder for good:
#     the next process that takes the folder removes it, and keeps the checkpoint
mkdir -p "$T/sw"
$B solo --model gpt-tiny --data synthetic --steps 3 --checkpoint "$T/sw" >/dev/null 2>&1
head -c 1000 /dev/urandom > "$T/sw/stage.ckpt.tmp.99999"
: > "$T/sw/notes.tmp.1"
$B solo --model gpt-tiny --data synthetic --steps 3 --checkpoint "$T/sw" >"$T/sw.out" 2>&1; rc=$?
if [ $rc = 0 ] && [ ! -e "$T/sw/stage.ckpt.tmp.99999" ] && [ -e "$T/sw/notes.tmp.1" ] && grep -q "resumed at update 3" "$T/sw.out"; then
    ok "a save cut short: its temporary file removed when the folder is next taken"
else bad "a save cut short" "exit $rc; $(ls "$T/sw" | tr '\n' ' '); $(tail -n 1 "$T/sw.out")"; fi

# 7b. a checkpoint folder on a full file system (a 1 MiB tmpfs): each checkpoint not written is a line (a node
#     said so only in its metrics), and a run whose final state was not written exits 1 (it exited 0)
mkdir -p "$T/tfs"
if mount -t tmpfs -o size=1m tmpfs "$T/tfs" 2>/dev/null; then
    $B solo --model gpt-tiny --data synthetic --steps 4 --save-every 2 --checkpoint "$T/tfs/ck" >/dev/null 2>"$T/tfs1.err"; rc=$?
    [ $rc = 1 ] && grep -q "checkpoint at update 2 not written: .*No space left" "$T/tfs1.err" \
        && tail -n 1 "$T/tfs1.err" | grep -q "final checkpoint was not written" \
        && ok "solo, checkpoints on a full file system: a line each, exit 1" || bad "solo, checkpoints on a full file system" "exit $rc: $(tail -n 2 "$T/tfs1.err" | tr '\n' ' ')"
    port=$(free_port)
    timeout 120 $B node --listen 127.0.0.1:$port --stages 1 --model gpt-tiny --data synthetic --steps 12 --save-every 5 \
        --threads 1 --checkpoint "$T/tfs/nck" >/dev/null 2>"$T/tfs2.err"; rc=$?
    [ $rc = 1 ] && [ "$(grep -c "checkpoint at version [0-9]* not written: .*No space left" "$T/tfs2.err")" = 1 ] \
        && tail -n 1 "$T/tfs2.err" | grep -q "run complete, but its final checkpoint was not written" \
        && ok "node, checkpoints on a full file system: a line for the first, exit 1" || bad "node, checkpoints on a full file system" "exit $rc: $(tail -n 3 "$T/tfs2.err" | tr '\n' ' ')"
    umount "$T/tfs"
else echo "skip - checkpoints on a full file system: no tmpfs could be mounted"; fi

# 8. The stage bound is one number (MODEL_STAGES_MAX = 128) for solo and swarm:
#    solo cuts a 100-layer mlp into 100 stages (it stopped at 64 before).
if run k100 --model mlp-fmnist --layers 100 --dim 8 --data synthetic --stages 100 --steps 2 \
    && [ "$(last_of "$T/k100.jsonl" start stages)" = 100 ] && [ "$(last_of "$T/k100.jsonl" end status)" = ok ]; then
    ok "solo --stages 100: a 100-stage split runs"
else bad "solo --stages 100" "$(why k100)"; fi
# 9. Ctrl-C stops solo as it stops a node: at an update boundary, its `end` event "interrupted" with the
#    signal's reason, its state in --checkpoint (the run resumes there), exit 130 (it died with no end event)
rm -f "$T/int.jsonl"
timeout --preserve-status -s INT 3 $BRIGADE solo --model gpt-tiny --data synthetic --steps 100000 --save-every 100000 \
    --threads 1 --checkpoint "$T/ick" --metrics "$T/int.jsonl" >"$T/int.out" 2>&1; rc=$?
st=$(last_of "$T/int.jsonl" end status); u=$(last_of "$T/int.jsonl" end updates); w=$(last_of "$T/int.jsonl" end why)
lu=$(last_of "$T/int.jsonl" update version)
if [ $rc = 130 ] && [ "$st" = interrupted ] && [ "$w" = "interrupted by SIGINT (Ctrl-C)" ] && [ "$u" = "$lu" ] \
    && [ "$(tail -n 1 "$T/int.jsonl" | grep -c '"event":"end"')" = 1 ] && tail -n 1 "$T/int.out" | grep -q "interrupted by SIGINT"; then
    timeout --preserve-status -s INT 2 $BRIGADE solo --model gpt-tiny --data synthetic --steps 100000 --save-every 100000 \
        --threads 1 --checkpoint "$T/ick" >"$T/int2.out" 2>&1
    if grep -q "resumed at update $u from" "$T/int2.out"; then ok "SIGINT stops solo: exit 130, end event 'interrupted' after $u updates, resumed there"
    else bad "SIGINT stops solo: resumed where it stopped" "$(head -n 2 "$T/int2.out" | tr '\n' ' ')"; fi
else bad "SIGINT stops solo" "exit $rc, end status $st ($w), $u updates of $lu; $(tail -n 1 "$T/int.out")"; fi
# 10. --recompute on redoes each stage's forward from its input before its backward: the same
#     losses and the same model, bit for bit, as off (3 stages, 2 microbatches per update)
RC="--model gpt-tiny --layers 3 --data synthetic --stages 3 --steps 6 --micro 2 --seed 4"
if run rc-off $RC --recompute off --save "$T/rc-off.model" && run rc-on $RC --recompute on --save "$T/rc-on.model" \
    && [ "$(losses "$T/rc-off.jsonl" | wc -l)" = 6 ] && [ "$(losses "$T/rc-off.jsonl")" = "$(losses "$T/rc-on.jsonl")" ] \
    && cmp -s "$T/rc-off.model" "$T/rc-on.model"; then
    ok "solo --recompute on: the losses and the model file of off, bit for bit"
else bad "solo --recompute on" "losses or model differ from off: $(why rc-on)"; fi
hx_jsonl
exit 0
