#!/bin/sh
# swarm.sh: what `make tsan` runs besides the unit tests: small multi-process
# swarms of the ThreadSanitizer build (tests/run.sh collects every process's
# reports), through the paths where the node's two threads meet: training,
# two engine threads, a node killed and its work re-issued, a node joining
# and downloading its stage, a stage left empty and a peer moving to it, and
# the status page's thread.
# Small models and few updates: the sanitized binary runs ~10x slower.
BRIGADE=${BRIGADE:-build/brigade}
HARNESS=$(dirname "$0")/../harness
T=$(mktemp -d /tmp/brigade-tsan.XXXXXX)
trap '[ -n "$KEEP" ] || rm -rf "$T"' EXIT
trap 'exit 1' INT TERM HUP

. "$(dirname "$0")/../integration/hx.inc"
SMALL="--model gpt-tiny --layers 4 --dim 32 --heads 2 --ctx 16 --data synthetic --micro 1"   # updates of one microbatch, as these runs were sized for

hx tsan-4-stages-2-threads --stages 4 --node-args "--threads 2" \
    --creator-args "$SMALL --steps 40 --seed 1" \
    --expect-exit 0 --expect-lost 0 --expect-tokens-grow

# nodes 0-2 serve stages 0-2, node 3 a second stage 1, node 4 joins late on
# stage 0 (downloads it); node 2, stage 2's only peer, dies: a stage-1 peer moves
hx tsan-kill-join-move --stages 3 --nodes 5 --node 3 "--stage 1" --node 4 "--stage 0" \
    --fault "start 4 after 20" --fault "kill9 2 after 60" \
    --creator-args "$SMALL --steps 200 --seed 2" \
    --expect-exit 0 --expect-lost 0

# the status page's thread reads a node that has made no update yet (no
# report: the page shows what it knew at start) while its I/O thread runs
H=$(free_port)
"$BRIGADE" node --listen 127.0.0.1:$(free_port) $SMALL --stages 2 --stage 1 --steps 10 --http $H --metrics "$T/page.jsonl" \
    2>"$T/page.err" &
P=$!
got=0
for _ in $(seq 40); do curl -sf "http://127.0.0.1:$H/status.json" >/dev/null && got=$((got + 1)); sleep 0.1; done
kill -TERM $P; wait $P; rc=$?
if [ "$got" -gt 0 ] && [ "$rc" = 143 ]; then echo "ok - tsan-status-page ($got pages served before the first update)"
else echo "FAIL - tsan-status-page: $got pages, exit $rc: $(tail -n 1 "$T/page.err")"; fi

hx_jsonl
