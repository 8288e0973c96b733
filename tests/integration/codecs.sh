#!/bin/sh
# codecs.sh: quantizing activations and gradients at the stage cuts costs
# little: gpt-tiny on the fortunes text, 4 stages in one process, final
# val_loss of int8/int8 within 1% of fp32 and int4/int8 within 3%.  200
# updates (the acceptance check runs 400); the three runs go side by side.
BRIGADE=${BRIGADE:-build/brigade}
DATA=/usr/share/games/fortunes
T=$(mktemp -d /tmp/brigade-codecs.XXXXXX)
trap 'rm -rf "$T"' EXIT
trap 'exit 1' INT TERM HUP
. "$(dirname "$0")/hx.inc"

if [ ! -d "$DATA" ]; then
    echo "FAIL - codecs int8 and int4 vs fp32: $DATA not installed (apt-get install fortunes)"
    exit 0
fi
for c in fp32-fp32 int8-int8 int4-int8; do
    timeout 240 "$BRIGADE" solo --model gpt-tiny --data "text:$DATA" --stages 4 --micro 1 --steps 200 --seed 3 \
        --threads 1 --codec "${c%-*}" --grad-codec "${c#*-}" --metrics "$T/$c.jsonl" >"$T/$c.out" 2>&1 &
done
wait
val() {
    python3 -c '
import json, sys
v = "nan"
try:
    for line in open(sys.argv[1]):
        e = json.loads(line)
        if e.get("event") == "eval" and isinstance(e.get("val_loss"), (int, float)): v = e["val_loss"]
except OSError: pass
print(v)' "$1"
}
v32=$(val "$T/fp32-fp32.jsonl"); v8=$(val "$T/int8-int8.jsonl"); v4=$(val "$T/int4-int8.jsonl")
for c in fp32-fp32 int8-int8 int4-int8; do
    [ "$(val "$T/$c.jsonl")" = nan ] && echo "FAIL - solo --codec ${c%-*} --grad-codec ${c#*-}: no val_loss: $(tail -n 1 "$T/$c.out")"
done
check() { # NAME VALUE LIMIT
    python3 -c '
import math, sys
a, b, lim = float(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
ok = math.isfinite(a) and math.isfinite(b) and a < 4.0 and b <= a * (1 + lim)
print(("ok - %s: val_loss %.4f vs fp32 %.4f (%+.2f%%, limit %g%%)" if ok else
       "FAIL - %s: val_loss %.4f vs fp32 %.4f (%+.2f%%, limit %g%%; fp32 must also have learned, < 4.0)")
      % (sys.argv[4], b, a, 100 * (b / a - 1) if a else 0, 100 * lim))' "$v32" "$2" "$3" "$1" ||
        echo "FAIL - $1: could not compare val_loss '$2' with fp32's '$v32'"
}
check "codec int8/int8 at 4 stage cuts" "$v8" 0.01
check "codec int4/int8 at 4 stage cuts" "$v4" 0.03
hx_jsonl
exit 0
