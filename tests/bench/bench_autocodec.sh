#!/bin/bash
# --codec auto against fixed codecs, side by side in one run: 4-node gpt-tiny swarms on loopback (a fast link:
# auto should keep int8's tokens/s) and over emulated 5 Mbit/s uplinks (auto should take pca).  Prints one line per
# swarm: codecs, links, tokens/s at stage 0, the wire's bytes against fp32, the final val loss, and the codec events.
# Usage: tests/bench/bench_autocodec.sh [STEPS] [OUT_DIR] [ROUNDS]   (run from the checkout, after make)
# ROUNDS > 0: only the fast links, int8 and the default alternated ROUNDS times (the spread of the ratio).
STEPS=${1:-200}
OUT=${2:-$(mktemp -d /tmp/bench_autocodec.XXXXXX)}
ROUNDS=${3:-0}
mkdir -p "$OUT"
F=/usr/share/games/fortunes
C="--model gpt-tiny --data text:$F --stages 4 --steps $STEPS --batch 8 --lr 1e-3 --seed 1 --eval-every 100 --split even"
PIDS=""
trap 'for p in $PIDS; do kill -9 $p 2>/dev/null; done' EXIT
swarm() {   # swarm TAG ARGS...: one 4-node swarm, metrics in $OUT/TAG[0-3].jsonl
  local tag=$1; shift; local P=$(( 20000 + (RANDOM % 200) * 50 )) a="" i
  PIDS=""
  build/brigade node --listen 127.0.0.1:$P $C "$@" --metrics "$OUT/${tag}0.jsonl" >"$OUT/${tag}0.out" 2>&1 & PIDS="$PIDS $!"
  for _ in $(seq 150); do
    a=$(python3 -c "import json,sys
for l in open(sys.argv[1]):
    e=json.loads(l)
    if e.get('join_addr'): print(e['join_addr']); break" "$OUT/${tag}0.jsonl" 2>/dev/null); [ -n "$a" ] && break; sleep 0.1
  done
  for i in 1 2 3; do
    build/brigade node --listen 127.0.0.1:$((P+i)) --join "$a" --stage $i "$@" --metrics "$OUT/$tag$i.jsonl" >"$OUT/$tag$i.out" 2>&1 &
    PIDS="$PIDS $!"
  done
  for p in $PIDS; do wait $p; done
  python3 - "$OUT" "$tag" "$*" <<'PY'
import glob, json, sys
out, tag, args = sys.argv[1:]
sent = raw = 0; tps = val = None; codecs = []
for f in sorted(glob.glob("%s/%s[0-9].jsonl" % (out, tag))):
    for l in open(f):
        try: e = json.loads(l)
        except ValueError: continue
        ev = e.get("event")
        if ev == "end": sent += e.get("bytes_sent", 0); raw += e.get("bytes_sent_raw", 0)
        if ev == "end" and e.get("stage") == 0 and e.get("tokens") and e.get("wall_s"): tps = e["tokens"] / e["wall_s"]
        if ev == "eval" and isinstance(e.get("val_loss"), (int, float)): val = e["val_loss"]
        if ev == "codec": codecs.append("%s:%s->%s" % (e.get("stage"), e.get("dir"), e.get("codec")))
print("%-40s tokens/s %8.0f  wire x%5.1f  val %s  codec events %d %s" % (args or "default", tps or 0, raw / sent if sent else 0,
      "%.4f" % val if val else "-", len(codecs), " ".join(codecs[:8])))
PY
}
if [ "$ROUNDS" -gt 0 ]; then
  for r in $(seq "$ROUNDS"); do swarm i8r$r --codec int8 --grad-codec int8; swarm aur$r; done
  echo "metrics in $OUT"; exit 0
fi
for links in "" "--emu-bandwidth-mbit 5"; do
  swarm i8$([ -n "$links" ] && echo s) --codec int8 --grad-codec int8 $links
  swarm au$([ -n "$links" ] && echo s) $links
  [ -n "$links" ] && swarm pcs --codec pca --grad-codec pca $links
done
echo "metrics in $OUT"
