#!/bin/sh
# faults.sh: the swarm survives what volunteers' machines do (kill -9, pause)
# and refuses bad starts with one line and exit 2.  Swarm cases go through
# tests/harness.  Prints "ok - NAME" or "FAIL - NAME: why".
BRIGADE=${BRIGADE:-build/brigade}
HARNESS=$(dirname "$0")/../harness
T=$(mktemp -d /tmp/brigade-faults.XXXXXX)
HOLDER=""
trap '[ -n "$HOLDER" ] && kill "$HOLDER" 2>/dev/null; [ -n "$KEEP" ] || rm -rf "$T"' EXIT
trap 'exit 1' INT TERM HUP

. "$(dirname "$0")/hx.inc"
TINY="--model gpt-tiny --data synthetic --micro 1"

# kill -9 one peer of a 2-peer stage once 60 losses are logged.
hx kill9-one-of-two-peers --stages 4 --replicas 2 --fault "kill9 6 after 60" \
    --creator-args "$TINY --steps 250 --seed 2" \
    --expect-exit 0 --expect-loss-ratio 0.6 --expect-lost 0 --expect-failover

# The only peer of stage 2 dies once nodes have run 20 s; stage 1 has two
# peers, so one of them moves to stage 2 (a `move` event) and the run completes.
hx only-peer-killed-a-node-moves --stages 4 --nodes 5 --node 4 "--stage 1" --fault "kill9 2 after 330" \
    --creator-args "$TINY --steps 700 --seed 3" \
    --expect-exit 0 --expect-lost 0 --expect-tokens-grow
if grep -h '"event":"move"' "$T"/only-peer-killed-a-node-moves/*/*.jsonl "$T"/only-peer-killed-a-node-moves/*.jsonl 2>/dev/null \
        | grep -q '"to":2'; then
    echo "ok - a peer of stage 1 moved to the emptied stage 2"
else
    echo "FAIL - move: no node moved to stage 2 after its only peer was killed"
fi

# The bootstrap (node 0) dies; the others train on, and a node started later
# joins through another live node.
hx bootstrap-dies-late-join-elsewhere --stages 4 --replicas 2 --nodes 9 \
    --fault "kill9 0 after 60" --fault "start 8 after 80" \
    --creator-args "$TINY --steps 300 --seed 6" \
    --expect-exit 0 --expect-lost 0 --expect-loss-ratio 0.6 --expect-tokens-grow

# 1% of every node's outgoing messages are lost: lost microbatches are re-issued.
hx emulated-loss-1pct --stages 4 --emu "loss=0.01" \
    --creator-args "$TINY --steps 200 --seed 7" \
    --expect-exit 0 --expect-lost 0 --expect-loss-ratio 0.6 --expect-failover

# SIGSTOP one peer of a 2-peer stage for 4 s, then SIGCONT: it is given work again.
hx sigstop-4s-one-of-two-peers --stages 4 --replicas 2 --fault "stop 5 after 40 for 4" \
    --creator-args "$TINY --steps 400 --seed 2" \
    --expect-exit 0 --expect-loss-ratio 0.6 --expect-lost 0 --expect-tokens-grow

# one_line_exit2 NAME PATTERN CMD...: CMD exits 2 within the bound with exactly
# one line on stderr, matching PATTERN (case-insensitive extended regex).
one_line_exit2() {
    name=$1; pat=$2; shift 2
    timeout 25 "$@" >"$T/o.out" 2>"$T/o.err"; rc=$?
    n=$(grep -c . "$T/o.err")
    if [ $rc = 2 ] && [ "$n" = 1 ] && grep -Eqi "$pat" "$T/o.err"; then echo "ok - $name: $(cat "$T/o.err")"
    elif [ $rc = 124 ]; then echo "FAIL - $name: still running after 25 s"
    else echo "FAIL - $name: exit $rc, $n lines on stderr, want 2 and one line matching '$pat': $(head -n 3 "$T/o.err" | tr '\n' '|')"; fi
}
"$BRIGADE" keygen --out "$T/k1" >/dev/null 2>&1 && "$BRIGADE" keygen --out "$T/k2" >/dev/null 2>&1 \
    || echo "FAIL - keygen: $("$BRIGADE" keygen --out "$T/k3" 2>&1 | tail -n 1)"
KEY=$(head -n 1 "$T/k1/node.pub" 2>/dev/null)

one_line_exit2 "node bad option" "bogus" "$BRIGADE" node --bogus-option
one_line_exit2 "node unreachable bootstrap" "$(free_port >"$T/p"; cat "$T/p")" \
    "$BRIGADE" node --listen "127.0.0.1:$(free_port)" --keys "$T/k2" --threads 1 --join "127.0.0.1:$(cat "$T/p")/$KEY"

# Port in use: a plain listener holds the port; a node asked to listen there refuses.
python3 -c '
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1)
open(sys.argv[1], "w").write(str(s.getsockname()[1])); time.sleep(60)' "$T/held" &
HOLDER=$!
wait_for 60 test -s "$T/held"
one_line_exit2 "node port in use" "in use" "$BRIGADE" node --listen "127.0.0.1:$(cat "$T/held")" --keys "$T/k2" \
    $TINY --stages 1 --steps 5 --threads 1
# --http on a port in use is the same one-line error, before the node does
# anything: a bootstrap starts no run, a joiner does not try its bootstrap
one_line_exit2 "node --http port in use" "cannot serve http.*in use" "$BRIGADE" node --listen "127.0.0.1:$(free_port)" \
    --http "$(cat "$T/held")" --keys "$T/k2" $TINY --stages 1 --steps 5 --threads 1
one_line_exit2 "joiner --http port in use" "cannot serve http.*in use" "$BRIGADE" node --listen "127.0.0.1:$(free_port)" \
    --http "$(cat "$T/held")" --keys "$T/k2" --threads 1 --join "127.0.0.1:$(free_port)/$KEY"
kill "$HOLDER" 2>/dev/null; wait "$HOLDER" 2>/dev/null; HOLDER=""
hx_jsonl
exit 0
