#!/bin/sh
# fmnist_swarm.sh: a classifier trained by a local swarm.  The mlp-fmnist
# model (784-1024-1024-1024-10) is cut into STAGES pipeline stages (2 to 4),
# one node process per stage on 127.0.0.1, and trained on Fashion-MNIST
# (Debian package dataset-fashion-mnist, in /usr/share/datasets/fashion-mnist).
# Every EVAL updates the swarm measures loss and accuracy on the held-out
# test images; the script prints each evaluation as it comes and a summary.
#
# Run it from the top of the source tree after `make`:
#
#   sh examples/fmnist_swarm.sh
#   STAGES=4 STEPS=600 EVAL=100 CODEC=int4 sh examples/fmnist_swarm.sh
#
# Settings (environment variables):
#   STAGES=K     pipeline stages and node processes, 2..4 (default 3)
#   STEPS=N      optimizer updates of the run (default 600)
#   EVAL=N       --eval-every N (default 100)
#   BATCH=B      images per microbatch (default 64)
#   CODEC=C      activation and gradient codec (default int8)
#   FMNIST=DIR   data folder (default /usr/share/datasets/fashion-mnist)
#   PORT=P       first of STAGES TCP ports on 127.0.0.1 (default 7900)
#   KEEP=1       keep the work folder (metrics and logs of every node)
#   BRIGADE=PATH the binary (default build/brigade)
set -u
B=${BRIGADE:-build/brigade}
STAGES=${STAGES:-3}
STEPS=${STEPS:-600}
EVAL=${EVAL:-100}
BATCH=${BATCH:-64}
CODEC=${CODEC:-int8}
FMNIST=${FMNIST:-/usr/share/datasets/fashion-mnist}
PORT=${PORT:-7900}
case "$STAGES" in 2|3|4) ;; *) echo "STAGES must be 2, 3 or 4" >&2; exit 1 ;; esac
[ -x "$B" ] || { echo "no $B: run make first (or set BRIGADE=PATH)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "python3 is needed to read the metrics" >&2; exit 1; }
[ -f "$FMNIST/train-images-idx3-ubyte.gz" ] || {
    echo "no Fashion-MNIST in $FMNIST: apt-get install dataset-fashion-mnist (or set FMNIST=DIR)" >&2; exit 1; }

W=$(mktemp -d "${TMPDIR:-/tmp}/brigade-fmnist.XXXXXX")
PIDS=""
TAILPID=""
cleanup() {
    for p in $PIDS $TAILPID; do kill "$p" 2>/dev/null; done
    if [ "${KEEP:-0}" = 1 ]; then echo "work folder kept: $W"; else rm -rf "$W"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# metric addr FILE: the join address from a node's start event.
# metric evals FILES...: one line per evaluation event.
# metric summary FILES...: training loss, last evaluation, throughput, bytes.
metric() { python3 - "$@" <<'PY'
import json, sys
what, files = sys.argv[1], sys.argv[2:]
events = []
for name in files:
    try:
        for line in open(name):
            try: events.append(json.loads(line))
            except ValueError: pass
    except OSError: pass
if what == "addr":
    print(next((e["join_addr"] for e in events if e.get("event") == "start"), ""))
    sys.exit(0)
evals = sorted((e for e in events if e.get("event") == "eval"), key=lambda e: e.get("version", 0))
if what == "evals":
    for e in evals:
        acc = e.get("val_acc")
        print("after update %4s: val_loss %.4f  val_acc %s" % (e.get("version", "?"), e["val_loss"],
              "%.2f%%" % (100 * acc) if isinstance(acc, (int, float)) else "-"))
    sys.exit(0)
losses = [e["loss"] for e in events if e.get("event") == "update" and isinstance(e.get("loss"), (int, float))]
ends = [e for e in events if e.get("event") == "end"]
if losses:
    k = min(20, len(losses))
    print("training loss, mean of the first %d updates: %.3f" % (k, sum(losses[:k]) / k))
    print("training loss, mean of the last %d updates:  %.3f" % (k, sum(losses[-k:]) / k))
if evals:
    e = evals[-1]
    acc = e.get("val_acc")
    print("last evaluation (after update %s): val_loss %.4f, val_acc %s" % (e.get("version", "?"), e["val_loss"],
          "%.2f%%" % (100 * acc) if isinstance(acc, (int, float)) else "-"))
if ends:
    wall = max(e["wall_s"] for e in ends)
    samples = max(e["tokens"] for e in ends)
    sent = sum(e.get("bytes_sent", 0) for e in ends)
    raw = sum(e.get("bytes_sent_raw", 0) for e in ends)
    if wall > 0:
        print("throughput: %.0f images/s (%d images in %.1f s)" % (samples / wall, samples, wall))
    if sent > 0:
        print("on the wire: %.1f MB sent by all nodes, %.1f MB as raw fp32 (x%.2f smaller)"
              % (sent / 1e6, raw / 1e6, raw / sent))
PY
}

LAST=$((STAGES - 1))
echo "== mlp-fmnist over $STAGES stages: $STEPS updates of $BATCH images, evaluation every $EVAL, codec $CODEC"
echo "   work folder $W"
# the run's creator fixes model, data, stages, steps, codecs and evaluation
"$B" node --listen 127.0.0.1:$PORT --model mlp-fmnist --data "fmnist:$FMNIST" --stages "$STAGES" \
    --steps "$STEPS" --batch "$BATCH" --eval-every "$EVAL" --codec "$CODEC" --grad-codec "$CODEC" \
    --metrics "$W/n0.jsonl" 2>"$W/n0.err" &
PIDS="$PIDS $!"
A=""
for _ in $(seq 100); do
    A=$(metric addr "$W/n0.jsonl")
    [ -n "$A" ] && break
    sleep 0.2
done
[ -n "$A" ] || { echo "the bootstrap node did not start:"; cat "$W/n0.err"; exit 1; }
echo "bootstrap up; peers join with: --join '$A'"
i=1
while [ $i -le $LAST ]; do
    "$B" node --listen 127.0.0.1:$((PORT + i)) --join "$A" --metrics "$W/n$i.jsonl" 2>"$W/n$i.err" &
    PIDS="$PIDS $!"
    i=$((i + 1))
done

# the last stage's progress lines as they come
touch "$W/n$LAST.err"
tail -n +1 -f "$W/n$LAST.err" &
TAILPID=$!
rc=0
for p in $PIDS; do wait "$p" || rc=1; done
PIDS=""
kill $TAILPID 2>/dev/null
TAILPID=""
if [ $rc != 0 ]; then
    echo "a node failed:"
    for f in "$W"/n*.err; do echo "-- $f:"; tail -n 3 "$f"; done
    exit 1
fi
echo
echo "== evaluations (held-out test images)"
metric evals "$W"/n*.jsonl
echo
echo "== summary"
metric summary "$W"/n*.jsonl
