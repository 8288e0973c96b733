#!/bin/sh
# wan_swarm.sh: a local swarm in which every node behaves as if it sat behind
# a home internet link.  Four processes on 127.0.0.1 (a bootstrap and three
# peers, one per pipeline stage) train gpt-tiny; each node delays, jitters
# and rate-limits its own outgoing messages:
#
#   --emu-latency-ms 40  --emu-jitter-ms 10  --emu-bandwidth-mbit 50
#
# so every hop costs about 40 ms one way (80 ms round trip), like two homes
# in one country.  Halfway through it prints the swarm map (`brigade status`,
# with the measured round trips), and at the end a summary: loss, throughput,
# bytes on the wire.
#
# Run it from the top of the source tree after `make`:
#
#   sh examples/wan_swarm.sh
#   STEPS=600 LATENCY=100 BANDWIDTH=20 sh examples/wan_swarm.sh
#
# Settings (environment variables):
#   STEPS=N      optimizer updates of the run (default 300)
#   MODEL=NAME   gpt-tiny (default) | gpt-small
#   DATA=SPEC    default text:/usr/share/games/fortunes, else synthetic
#   CODEC=C      activation and gradient codec (default int8)
#   LATENCY=MS JITTER=MS BANDWIDTH=MBIT   the emulated link (40, 10, 50)
#   PORT=P       first of four TCP ports on 127.0.0.1 (default 7800)
#   KEEP=1       keep the work folder (metrics and logs of every node)
#   BRIGADE=PATH the binary (default build/brigade)
set -u
B=${BRIGADE:-build/brigade}
STEPS=${STEPS:-300}
MODEL=${MODEL:-gpt-tiny}
CODEC=${CODEC:-int8}
LATENCY=${LATENCY:-40}
JITTER=${JITTER:-10}
BANDWIDTH=${BANDWIDTH:-50}
PORT=${PORT:-7800}
if [ -z "${DATA:-}" ]; then
    if [ -e /usr/share/games/fortunes ]; then DATA=text:/usr/share/games/fortunes; else DATA=synthetic; fi
fi
[ -x "$B" ] || { echo "no $B: run make first (or set BRIGADE=PATH)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "python3 is needed to read the metrics" >&2; exit 1; }

W=$(mktemp -d "${TMPDIR:-/tmp}/brigade-wan.XXXXXX")
PIDS=""
TAILPID=""
cleanup() {
    for p in $PIDS $TAILPID; do kill "$p" 2>/dev/null; done
    if [ "${KEEP:-0}" = 1 ]; then echo "work folder kept: $W"; else rm -rf "$W"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The emulated home link, given to every node: it shapes what that node sends.
LINK="--emu-latency-ms $LATENCY --emu-jitter-ms $JITTER --emu-bandwidth-mbit $BANDWIDTH"

# metric addr FILE: the join address from a node's start event.
# metric summary FILES...: loss, throughput and bytes over all nodes.
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
losses = [e["loss"] for e in events if e.get("event") == "update" and isinstance(e.get("loss"), (int, float))]
ends = [e for e in events if e.get("event") == "end"]
if losses:
    k = min(20, len(losses))
    print("loss, mean of the first %d updates: %.3f" % (k, sum(losses[:k]) / k))
    print("loss, mean of the last %d updates:  %.3f" % (k, sum(losses[-k:]) / k))
if ends:
    wall = max(e["wall_s"] for e in ends)
    tokens = max(e["tokens"] for e in ends)
    sent = sum(e.get("bytes_sent", 0) for e in ends)
    raw = sum(e.get("bytes_sent_raw", 0) for e in ends)
    lost = sum(e.get("lost_microbatches", 0) for e in ends)
    if wall > 0:
        print("throughput: %.0f tokens/s (%d tokens in %.1f s)" % (tokens / wall, tokens, wall))
    if sent > 0:
        print("on the wire: %.1f MB sent by all nodes, %.1f MB as raw fp32 (x%.2f smaller), %.0f bytes per token"
              % (sent / 1e6, raw / 1e6, raw / sent, sent / max(tokens, 1)))
    print("microbatches lost: %d" % lost)
PY
}

echo "== a WAN-emulated swarm: $MODEL on $DATA, 4 stages, $STEPS updates, codec $CODEC"
echo "   every node's link: ${LATENCY} ms +/- ${JITTER} ms one way, ${BANDWIDTH} Mbit/s out"
echo "   work folder $W"
"$B" node --listen 127.0.0.1:$PORT --model "$MODEL" --data "$DATA" --stages 4 --steps "$STEPS" \
    --codec "$CODEC" --grad-codec "$CODEC" $LINK --metrics "$W/n0.jsonl" 2>"$W/n0.err" &
PIDS="$PIDS $!"
A=""
for _ in $(seq 100); do
    A=$(metric addr "$W/n0.jsonl")
    [ -n "$A" ] && break
    sleep 0.2
done
[ -n "$A" ] || { echo "the bootstrap node did not start:"; cat "$W/n0.err"; exit 1; }
echo "bootstrap up; peers join with: --join '$A'"
# joiners receive the run config (model, data, codecs...) from the swarm;
# the link emulation is local, so each node gets its own
for i in 1 2 3; do
    "$B" node --listen 127.0.0.1:$((PORT + i)) --join "$A" $LINK \
        --metrics "$W/n$i.jsonl" 2>"$W/n$i.err" &
    PIDS="$PIDS $!"
done

# the swarm map once everyone has joined and traffic flows
sleep 8
echo
echo "== brigade status (the round trips include both nodes' emulated delays)"
"$B" status "$A" || echo "(no status answer)"
echo

# the last stage's progress lines as they come
touch "$W/n3.err"
tail -n +1 -f "$W/n3.err" &
TAILPID=$!
rc=0
for p in $PIDS; do wait "$p" || rc=1; done
PIDS=""
kill $TAILPID 2>/dev/null
TAILPID=""
if [ $rc != 0 ]; then
    echo "a node failed:"
    for i in 0 1 2 3; do echo "-- node $i:"; tail -n 3 "$W/n$i.err"; done
    exit 1
fi
echo
echo "== summary"
metric summary "$W"/n*.jsonl
