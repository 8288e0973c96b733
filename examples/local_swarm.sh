#!/bin/sh
# local_swarm.sh: a whole brigade swarm on this machine, one process per node.
#
#   examples/local_swarm.sh [-k STAGES] [-r REPLICAS] [-p PORT] [-s STEPS]
#                           [-m MODEL] [-d DATA] [-o DIR] [-- CREATOR-OPTIONS...]
#
#   -k STAGES    pipeline stages (default 4)
#   -r REPLICAS  nodes serving each stage (default 1): K x R nodes in all
#   -p PORT      node i listens on 127.0.0.1:PORT+i (default 7700)
#   -s STEPS     optimizer updates of the run (default 300)
#   -m MODEL     gpt-tiny, gpt-small, ... (default gpt-tiny)
#   -d DATA      synthetic | text:PATH | fmnist[:DIR]
#                (default text:/usr/share/games/fortunes when installed, else synthetic)
#   -o DIR       keep each node's metrics and log in DIR (default: a temp dir, removed)
#   after --      more options for the node that creates the run, e.g.
#                 -- --codec int4 --grad-codec int8 --lr 2e-3
#
# What it does, step by step, as you would by hand on several machines:
#   1. start node 0 without --join: it creates the run (model, data, stages,
#      steps and codecs are its options) and prints "join with: --join ADDR";
#      the same ADDR is the join_addr of the start event in its metrics file;
#   2. start every other node with --join ADDR --stage N: node i serves stage
#      i mod K; a joiner receives the run config from the swarm;
#   3. show the progress line of a last-stage node while the swarm trains;
#   4. when every node has exited, print a summary from the metrics files:
#      loss at start and end, tokens/s, bytes on the wire vs raw fp32.
# Ctrl-C stops every node it started.  BRIGADE=path picks the binary
# (default build/brigade).  tests/harness does the same with fault plans
# (kill -9, SIGSTOP, late joiners) and checks, for tests.
set -u
BRIGADE=${BRIGADE:-build/brigade}
K=4; R=1; PORT=7700; STEPS=300; MODEL=gpt-tiny; DATA=""; OUT=""
while getopts k:r:p:s:m:d:o:h opt; do
    case $opt in
        k) K=$OPTARG ;; r) R=$OPTARG ;; p) PORT=$OPTARG ;; s) STEPS=$OPTARG ;;
        m) MODEL=$OPTARG ;; d) DATA=$OPTARG ;; o) OUT=$OPTARG ;;
        *) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
[ "${1:-}" = "--" ] && shift
if [ -z "$DATA" ]; then
    if [ -d /usr/share/games/fortunes ]; then DATA=text:/usr/share/games/fortunes; else DATA=synthetic; fi
fi
case "$K$R$PORT$STEPS" in *[!0-9]*) echo "local_swarm: -k -r -p -s take numbers" >&2; exit 2 ;; esac
[ -x "$BRIGADE" ] || { echo "local_swarm: no $BRIGADE (run make, or set BRIGADE=)" >&2; exit 2; }
N=$((K * R))

if [ -n "$OUT" ]; then mkdir -p "$OUT" && DIR=$(cd "$OUT" && pwd) || exit 2; KEEP=1
else DIR=$(mktemp -d /tmp/local_swarm.XXXXXX); KEEP=""; fi
PIDS=""
cleanup() {
    for p in $PIDS; do kill "$p" 2>/dev/null; done
    sleep 0.5
    for p in $PIDS; do kill -9 "$p" 2>/dev/null; done
    [ -n "$KEEP" ] || rm -rf "$DIR"
}
trap cleanup EXIT
trap 'echo; echo "local_swarm: interrupted, stopping the nodes"; exit 130' INT TERM HUP

# join_addr FILE: the join_addr of the start event in a metrics file
join_addr() {
    python3 -c '
import json, sys
try:
    for line in open(sys.argv[1]):
        e = json.loads(line)
        if e.get("event") == "start" and e.get("join_addr"):
            print(e["join_addr"]); break
except (OSError, ValueError): pass' "$1"
}

echo "local_swarm: $N nodes ($K stages x $R), $MODEL on $DATA, $STEPS updates; files in $DIR"
rm -f "$DIR"/n*.jsonl
"$BRIGADE" node --listen "127.0.0.1:$PORT" --stage 0 --model "$MODEL" --data "$DATA" --stages "$K" \
    --steps "$STEPS" --threads 1 "$@" --metrics "$DIR/n0.jsonl" >"$DIR/n0.log" 2>&1 &
PIDS=$!
ADDR=""
for _ in $(seq 200); do
    ADDR=$(join_addr "$DIR/n0.jsonl"); [ -n "$ADDR" ] && break
    kill -0 "$PIDS" 2>/dev/null || break
    sleep 0.1
done
if [ -z "$ADDR" ]; then echo "local_swarm: node 0 did not start: $(tail -n 1 "$DIR/n0.log")" >&2; exit 1; fi
echo "local_swarm: node 0 created the run; others join with --join '$ADDR'"
i=1
while [ $i -lt $N ]; do
    "$BRIGADE" node --listen "127.0.0.1:$((PORT + i))" --join "$ADDR" --stage $((i % K)) --threads 1 \
        --metrics "$DIR/n$i.jsonl" >"$DIR/n$i.log" 2>&1 &
    PIDS="$PIDS $!"
    i=$((i + 1))
done

# Progress: the last line a last-stage node printed, every 2 s, until all exit.
WATCH="$DIR/n$((K - 1)).log"
shown=""
while :; do
    alive=0
    for p in $PIDS; do kill -0 "$p" 2>/dev/null && alive=$((alive + 1)); done
    [ $alive = 0 ] && break
    line=$(grep '|' "$WATCH" 2>/dev/null | tail -n 1)
    if [ -n "$line" ] && [ "$line" != "$shown" ]; then echo "  [$alive running] $line"; shown=$line; fi
    sleep 2
done
rc=0; i=0
for p in $PIDS; do
    wait "$p"; s=$?
    [ $s = 0 ] || { echo "local_swarm: node $i exited $s: $(tail -n 1 "$DIR/n$i.log")"; rc=1; }
    i=$((i + 1))
done
PIDS=""

python3 - "$DIR" "$N" <<'PY'
import json, os, sys
d, n = sys.argv[1], int(sys.argv[2])
losses, sent, raw, tokens, wall, lost = [], 0, 0, 0, 0.0, 0
for i in range(n):
    ev = []
    try:
        for line in open(os.path.join(d, "n%d.jsonl" % i)):
            try: ev.append(json.loads(line))
            except ValueError: pass
    except OSError:
        continue
    ups = [e for e in ev if e.get("event") == "update"]
    losses += [e["loss"] for e in ups if isinstance(e.get("loss"), (int, float))]
    end = next((e for e in ev if e.get("event") == "end"), None)
    src = end or (ups[-1] if ups else {})
    sent += src.get("bytes_sent") or 0
    raw += src.get("bytes_sent_raw") or 0
    if end:
        wall = max(wall, end.get("wall_s") or 0)
        lost += end.get("lost_microbatches") or 0
    if i < n and ev and (next((e for e in ev if e.get("event") == "start"), {}) or {}).get("stage") == 0:
        tokens += src.get("tokens") or 0
def m(xs): return sum(xs) / len(xs) if xs else float("nan")
print("summary:")
if losses:
    print("  training loss  %.4f -> %.4f  (mean of the first and last 5 of %d updates)" % (m(losses[:5]), m(losses[-5:]), len(losses)))
if wall:
    print("  throughput     %.0f tokens/s at the data stage (%d tokens in %.1f s)" % (tokens / wall, tokens, wall))
if sent:
    print("  on the wire    %.1f MB sent vs %.1f MB as raw fp32: x%.2f smaller" % (sent / 1e6, raw / 1e6, raw / sent))
print("  lost microbatches %d" % lost)
PY
[ -n "$KEEP" ] && echo "local_swarm: metrics and logs kept in $DIR"
exit $rc
