#!/bin/sh
# make demo: a local swarm of 4 processes (a bootstrap and 3 peers, one per
# pipeline stage) trains a small gpt on the fortunes text over CurveZMQ on
# 127.0.0.1, then the stage checkpoints are assembled, evaluated on held-out
# text and sampled.  Each node asks for its stage (the bootstrap 0, peer i
# stage i), so the progress shown is the last stage's, which has the loss.
# The data stage keeps as many microbatches in flight as the weight-delay
# budget allows (up to two updates by default, let in as the learning rate
# comes down; the swarm predicts the weights for that delay): held-out loss
# after 300 updates was 2.52, against 2.51 with one microbatch in flight
# (exactly what `brigade solo --stages 4` computes).  7000 updates (about two
# minutes of training on a quiet 2-core machine) brought the held-out loss
# to 1.64 nats per byte, where the sample is mostly English words; 2000
# stopped at 1.96, where it was not yet.
#   STEPS=N  updates (default 7000)    MODEL=NAME  (default gpt-tiny)
#   LR=X     peak learning rate (3e-3)  BATCH=B     microbatch (8)
#   INFLIGHT=N  microbatches in flight (default 0: as the delay budget allows)
#   MICRO=M  microbatches per update (default 1, the figures above; brigade's own
#            default for 4 stages is 16, which keeps a swarm of many nodes busy)
#   PORT=P   the bootstrap's port (7700; the peers take free ones)  KEEP=1  keep the work folder
set -u
B=${BRIGADE:-build/brigade}
STEPS=${STEPS:-7000}
MICRO=${MICRO:-1}
MODEL=${MODEL:-gpt-tiny}
LR=${LR:-3e-3}
BATCH=${BATCH:-8}
INFLIGHT=${INFLIGHT:-0}
PORT=${PORT:-7700}
DATA=${DATA:-text:/usr/share/games/fortunes}
W=$(mktemp -d /tmp/brigade-demo.XXXXXX)
PIDS=""
cleanup() { for p in $PIDS; do kill "$p" 2>/dev/null; done; [ "${KEEP:-0}" = 1 ] || rm -rf "$W"; }
trap cleanup EXIT INT TERM
metric() { python3 - "$@" <<'PY'
import json, sys
q, files = sys.argv[1], sys.argv[2:]
ev = []
for f in files:
    for line in open(f):
        try: ev.append(json.loads(line))
        except ValueError: pass
if q == "addr":
    print(next((e["join_addr"] for e in ev if e.get("event") == "start"), ""))
elif q == "summary":
    ls = [e["loss"] for e in ev if e.get("event") == "update" and isinstance(e.get("loss"), (int, float))]
    ends = [e for e in ev if e.get("event") == "end"]
    wall = max(e["wall_s"] for e in ends) if ends else 0
    tok = max((e["tokens"] for e in ends), default=0)
    sent = sum(e.get("bytes_sent", 0) for e in ends); raw = sum(e.get("bytes_sent_raw", 0) for e in ends)
    if ls:
        k = min(20, len(ls))
        print("loss at start (first %d updates): %.3f" % (k, sum(ls[:k]) / k))
        print("loss at end   (last %d updates):  %.3f" % (k, sum(ls[-k:]) / k))
    if wall:
        print("throughput: %.0f tokens/s through the pipeline (%d tokens in %.1f s)" % (tok / wall, tok, wall))
    if sent:
        print("on the wire: %.1f MB sent in all, %.1f MB as raw fp32: x%.2f smaller" % (sent / 1e6, raw / 1e6, raw / sent))
PY
}
echo "== a local swarm: $MODEL on ${DATA#text:}, 4 stages, $STEPS updates (work folder $W)"
"$B" node --listen 127.0.0.1:$PORT --stage 0 --model "$MODEL" --data "$DATA" --stages 4 --steps "$STEPS" --micro "$MICRO" \
    --lr "$LR" --batch "$BATCH" --max-inflight "$INFLIGHT" --codec int8 --grad-codec int8 --checkpoint "$W/ck0" --save-every 500 \
    --metrics "$W/n0.jsonl" 2>"$W/n0.err" &
PIDS="$PIDS $!"
A=""
for _ in $(seq 100); do A=$(metric addr "$W/n0.jsonl" 2>/dev/null); [ -n "$A" ] && break; sleep 0.1; done
[ -n "$A" ] || { echo "the bootstrap node did not start:"; cat "$W/n0.err"; exit 1; }
echo "bootstrap up; peers join with: --join $A"
for i in 1 2 3; do
    : >"$W/n$i.err"   # there before tail looks for it (the node's shell opens it in the background)
    "$B" node --listen 127.0.0.1:0 --join "$A" --stage $i --checkpoint "$W/ck$i" --save-every 500 \
        --metrics "$W/n$i.jsonl" 2>"$W/n$i.err" &
    PIDS="$PIDS $!"
    P3=$!
done
# the last stage's progress lines (stage 3 of 0..3: the one with the loss), as they come; tail reads to
# the end of the file once that node has exited, so the last lines are shown too
tail -f --pid="$P3" "$W/n3.err" &
TAILPID=$!
rc=0
for p in $PIDS; do wait "$p" || rc=1; done
wait $TAILPID 2>/dev/null
PIDS=""
[ $rc = 0 ] || { echo "a node failed:"; tail -n 2 "$W"/n*.err; exit 1; }
echo
echo "== summary"
metric summary "$W"/n*.jsonl
"$B" assemble "$W/ck0" "$W/ck1" "$W/ck2" "$W/ck3" --out "$W/model.bin" || exit 1
# the assembled model on the held-out text (solo with nothing left to train evaluates it)
"$B" solo --resume "$W/model.bin" --steps "$STEPS" --data "$DATA" 2>&1 | sed -n 's/^eval after update [0-9]*: /held-out /p'
echo
echo "== sampled from the trained model"
"$B" sample --model-file "$W/model.bin" --prompt "The " --length 400 --temperature 0.5
