#!/bin/sh
# security.sh: a swarm under attack and a closed swarm.
#   rogue: a hostile peer (tests/test_rogue) fires malformed and lying
#   messages at the creator of a 2-stage run for ~10 s; the run must still
#   complete and learn, the drops must be counted, no node may crash.
#   transport drops: messages the transport refuses before the node's
#   checks (a header with a wrong magic) are drop events and in the drops
#   of the end event, like any other refused message.
#   closed: a swarm started with --owner admits a ticket holder and refuses
#   a joiner without a ticket, with an expired ticket, with a ticket for
#   another key and with a ticket of another owner (exit 2, "refused").
# Prints "ok - NAME" or "FAIL - NAME: why".  Bounded to about 90 s.
BRIGADE=${BRIGADE:-build/brigade}
ROGUE=${ROGUE:-$(dirname "$BRIGADE")/tests/test_rogue}
T=$(mktemp -d /tmp/brigade-security.XXXXXX)
PIDS=""
cleanup() {
    for p in $PIDS; do kill "$p" 2>/dev/null; done
    for p in $PIDS; do wait "$p" 2>/dev/null; done
    [ -n "$KEEP" ] || rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP PIPE
. "$(dirname "$0")/hx.inc"

cat >"$T/m.py" <<'EOF'
import json, sys

def events(path):
    out = []
    try:
        for line in open(path):
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    except OSError:
        pass
    return out

cmd, args = sys.argv[1], sys.argv[2:]
if cmd == "get":            # FILE EVENT KEY: the key of the first such event
    for e in events(args[0]):
        if e.get("event") == args[1] and args[2] in e:
            print(e[args[2]])
            break
elif cmd == "losses":       # FILE: "n first5 last5" of the non-null update losses
    ls = [e["loss"] for e in events(args[0]) if e.get("event") == "update" and e.get("loss") is not None]
    if len(ls) < 10:
        print("%d 0 0" % len(ls))
    else:
        print("%d %.4f %.4f" % (len(ls), sum(ls[:5]) / 5, sum(ls[-5:]) / 5))
elif cmd == "drops":        # FILE...: drop events and the largest drops counter
    nev, top, whys = 0, 0, {}
    for f in args:
        for e in events(f):
            if e.get("event") == "drop":
                nev += 1
                w = str(e.get("why", "?"))
                whys[w] = whys.get(w, 0) + 1
            if e.get("event") in ("update", "end") and isinstance(e.get("drops"), int):
                top = max(top, e["drops"])
    common = sorted(whys.items(), key=lambda kv: -kv[1])[:3]
    print("%d %d %s" % (nev, top, "; ".join("%s x%d" % kv for kv in common) or "-"))
elif cmd == "end":          # FILE: the status of the end event
    st = [e.get("status") for e in events(args[0]) if e.get("event") == "end"]
    print(st[-1] if st else "none")
elif cmd == "count":        # FILE EVENT KEY VALUE: events with key == value
    print(sum(1 for e in events(args[0]) if e.get("event") == args[1] and str(e.get(args[2])) == args[3]))
elif cmd == "prefix":       # FILE EVENT KEY PREFIX: events whose key starts with PREFIX
    print(sum(1 for e in events(args[0]) if e.get("event") == args[1] and str(e.get(args[2])).startswith(args[3])))
elif cmd == "lt":           # A B F: exit 0 when A < F * B
    sys.exit(0 if float(args[0]) < float(args[2]) * float(args[1]) else 1)
EOF
M() { python3 "$T/m.py" "$@"; }

# start NAME CMD...: runs CMD in the background (stdout NAME.out, stderr
# NAME.err); its pid lands in $LAST and in the cleanup list.
start() {
    name=$1; shift
    "$@" >"$T/$name.out" 2>"$T/$name.err" </dev/null &
    LAST=$!
    PIDS="$PIDS $LAST"
}

# finish PID SECONDS: waits for PID at most SECONDS (then kills it); its
# exit status in $RC (124 after a kill), seconds waited in $WAITED.
finish() {
    i=0
    while kill -0 "$1" 2>/dev/null; do
        if [ $i -ge $(($2 * 10)) ]; then
            kill "$1" 2>/dev/null; sleep 1; kill -9 "$1" 2>/dev/null
            wait "$1" 2>/dev/null; RC=124; WAITED=$2; return
        fi
        sleep 0.1; i=$((i + 1))
    done
    wait "$1"; RC=$?
    WAITED=$((i / 10))
}

# wait_event FILE EVENT SECONDS [PID]: 0 once FILE holds an EVENT line;
# 1 after SECONDS or once PID has exited without writing it.
wait_event() {
    i=0
    while [ $i -lt $(($3 * 10)) ]; do
        grep -q "\"event\":\"$2\"" "$1" 2>/dev/null && return 0
        if [ -n "$4" ] && ! kill -0 "$4" 2>/dev/null; then
            grep -q "\"event\":\"$2\"" "$1" 2>/dev/null; return $?
        fi
        sleep 0.1; i=$((i + 1))
    done
    return 1
}

# crashed NAME...: prints the first sanitizer/assert/signal trace line of their stderr.
crashed() {
    for n in "$@"; do
        grep -m 1 -E 'AddressSanitizer|runtime error|Assertion|Segmentation|Aborted|LeakSanitizer' "$T/$n.err" 2>/dev/null \
            | sed "s/^/$n: /"
    done | head -n 1
}

oneline() { head -n "${2:-2}" "$1" 2>/dev/null | tr '\n' '|' | cut -c 1-300; }

# creator NAME WHAT PORT ARGS...: starts the creator of a 2-stage run at stage 0 on PORT (metrics
# $T/NAME.jsonl) and waits for its start event.  0 with C (its pid), ADDR (its join address) and
# RID (the run id) set; else prints the FAIL line of the case WHAT and returns 1.
creator() {
    name=$1 what=$2 port=$3; shift 3
    start "$name" "$BRIGADE" node --listen "127.0.0.1:$port" $RUN --stages 2 --stage 0 "$@" --metrics "$T/$name.jsonl"
    C=$LAST
    if ! wait_event "$T/$name.jsonl" start 15 "$C"; then
        finish "$C" 1
        echo "FAIL - $what: the creator wrote no start event (exit $RC): $(oneline "$T/$name.err")"
        return 1
    fi
    ADDR=$(M get "$T/$name.jsonl" start join_addr)
    RID=$(M get "$T/$name.jsonl" start run)
}

PORTS=$(free_ports 9) || { echo "FAIL - ports: $PORTS"; exit 1; }
port() { echo "$PORTS" | cut -d ' ' -f $(($1 + 1)); }     # port K: the K-th of PORTS, from 0
RUN="--model gpt-tiny --data synthetic --micro 1 --threads 1 --codec int8 --grad-codec int8"

# ---- rogue ----------------------------------------------------------------
if ! [ -x "$ROGUE" ]; then
    echo "FAIL - rogue: $ROGUE not built (make $ROGUE)"
else
    if creator rc0 rogue "$(port 0)" --steps 300 --seed 3; then
        start rc1 "$BRIGADE" node --listen "127.0.0.1:$(port 1)" --join "$ADDR" --threads 1 \
            --metrics "$T/rc1.jsonl"
        J=$LAST
        wait_event "$T/rc1.jsonl" start 15 "$J"
        start rogue "$ROGUE" --target "$ADDR" --run "$RID" --seconds 10
        R=$LAST
        finish "$C" 75; crc=$RC; cw=$WAITED
        finish "$J" 10; jrc=$RC
        finish "$R" 25; rrc=$RC
        set -- $(M losses "$T/rc1.jsonl"); nl=${1:-0}; first=${2:-0}; last=${3:-0}
        drops=$(M drops "$T/rc0.jsonl" "$T/rc1.jsonl")
        set -- $drops; ndrop=${1:-0}; dmax=${2:-0}
        dwhy=$(echo "$drops" | cut -d' ' -f3-)
        crash=$(crashed rc0 rc1)
        summary=$(grep '^rogue: admitted=' "$T/rogue.out" | tail -n 1)
        lost="$(M get "$T/rc0.jsonl" end lost_microbatches)/$(M get "$T/rc1.jsonl" end lost_microbatches)"
        why=""
        [ "$crc" = 0 ] || why="$why creator exit $crc ($(oneline "$T/rc0.err" 3));"
        [ "$jrc" = 0 ] || why="$why joiner exit $jrc ($(oneline "$T/rc1.err" 3));"
        [ "$(M end "$T/rc0.jsonl")" = ok ] && [ "$(M end "$T/rc1.jsonl")" = ok ] \
            || why="$why end status creator=$(M end "$T/rc0.jsonl") joiner=$(M end "$T/rc1.jsonl");"
        if [ "$nl" -lt 10 ]; then why="$why only $nl last-stage losses;"
        elif ! M lt "$last" "$first" 0.7; then why="$why loss did not fall enough: first 5 $first, last 5 $last (want < 0.7x);"; fi
        [ "$ndrop" -gt 0 ] || [ "$dmax" -gt 0 ] || why="$why no drops counted (drop events $ndrop, drops key $dmax);"
        [ -z "$crash" ] || why="$why crash: $crash;"
        [ "$rrc" = 0 ] || why="$why rogue tool exit $rrc ($(oneline "$T/rogue.err"));"
        if [ -z "$why" ]; then
            echo "ok - rogue: run completed in ${cw}s, loss $first -> $last, lost microbatches $lost, $ndrop drop events (drops $dmax; $dwhy), $summary"
        else
            echo "FAIL - rogue:$why [$summary]"
        fi
        # The attacks on tensors and state only reach the stage checks when
        # the rogue got in like a real joiner (WELCOME received).
        if echo "$summary" | grep -q 'admitted=yes'; then
            echo "ok - rogue admitted: its stage-shaped tensors reached the checks"
        else
            jd=$(M count "$T/rc0.jsonl" drop why "malformed JOIN")
            echo "FAIL - rogue admitted: the rogue never got a WELCOME ($summary; creator dropped $jd of its JOINs as 'malformed JOIN'), so its tensor attacks only met the sender checks"
        fi
    fi
fi

# ---- transport drops ------------------------------------------------------
if [ -x "$ROGUE" ]; then
    if creator td0 "transport drops" "$(port 2)" --steps 1000 --seed 5; then
        start tdr "$ROGUE" --target "$ADDR" --run "$RID" --seconds 2 --rate 5 --only wrong_magic
        finish "$LAST" 30; rrc=$RC
        # the node has read them once it has counted one (a node that counts none fails below, 30 s on)
        bad_header() { [ "$(M prefix "$T/td0.jsonl" drop why "bad header")" -ge 1 ] 2>/dev/null; }
        wait_for 30 bad_header
        kill -TERM "$C" 2>/dev/null
        finish "$C" 15; crc=$RC
        sent=$(sed -n 's/^rogue: sent wrong_magic //p' "$T/tdr.out")
        nbad=$(M prefix "$T/td0.jsonl" drop why "bad header")
        edrops=$(M get "$T/td0.jsonl" end drops)
        why=""
        [ "$rrc" = 0 ] || why="$why rogue tool exit $rrc ($(oneline "$T/tdr.err"));"
        [ "${sent:-0}" -ge 1 ] || why="$why the rogue sent no wrong_magic message;"
        [ "$nbad" -ge 1 ] || why="$why no 'bad header' drop event for $sent wrong-magic headers;"
        [ "${edrops:-0}" -ge "$nbad" ] 2>/dev/null || why="$why end event drops '$edrops' < $nbad drop events;"
        [ "$crc" = 143 ] || why="$why node exit $crc after SIGTERM ($(oneline "$T/td0.err" 3));"
        crash=$(crashed td0)
        [ -z "$crash" ] || why="$why crash: $crash;"
        if [ -z "$why" ]; then
            echo "ok - transport drops: $sent wrong-magic headers sent, $nbad 'bad header' drop events, end drops $edrops"
        else
            echo "FAIL - transport drops:$why"
        fi
    fi
fi

# ---- closed swarm ---------------------------------------------------------
for k in owner a b c other; do
    "$BRIGADE" keygen --out "$T/$k" >/dev/null 2>"$T/keygen.err" \
        || { echo "FAIL - closed: keygen: $(oneline "$T/keygen.err")"; exit 0; }
done
# an expired ticket first, so that it has expired by the time it is used
"$BRIGADE" ticket --owner "$T/owner" --peer "$T/b" --expires 1 >"$T/t_expired" 2>/dev/null
EXPIRED_AT=$(date +%s)
"$BRIGADE" ticket --owner "$T/owner" --peer "$T/a" --expires 1h >"$T/t_good" 2>"$T/ticket.err" \
    || { echo "FAIL - closed: brigade ticket: $(oneline "$T/ticket.err")"; exit 0; }
# C presents A's ticket; B's second try carries a ticket of another owner
"$BRIGADE" ticket --owner "$T/other" --peer "$T/c" --expires 1h >"$T/t_foreign" 2>/dev/null
[ "$(wc -c <"$T/t_good")" -ge 100 ] || { echo "FAIL - closed: brigade ticket printed '$(oneline "$T/t_good")'"; exit 0; }

start cc0 "$BRIGADE" node --listen "127.0.0.1:$(port 3)" --keys "$T/owner" --owner "$T/owner" \
    $RUN --stages 2 --stage 0 --steps 40 --seed 4 --metrics "$T/cc0.jsonl"
C=$LAST
if ! wait_event "$T/cc0.jsonl" start 15 "$C"; then
    finish "$C" 1
    echo "FAIL - closed: the creator wrote no start event (exit $RC): $(oneline "$T/cc0.err")"
    exit 0
fi
ADDR=$(M get "$T/cc0.jsonl" start join_addr)
while [ "$(date +%s)" -le $((EXPIRED_AT + 1)) ]; do sleep 0.2; done

# the refused ones first, all at once: the run cannot start without stage 1
T0=$(date +%s)
start no_ticket "$BRIGADE" node --listen "127.0.0.1:$(port 4)" --keys "$T/b" --join "$ADDR" --threads 1
P1=$LAST
start expired "$BRIGADE" node --listen "127.0.0.1:$(port 5)" --keys "$T/b" --join "$ADDR" --threads 1 \
    --ticket "@$T/t_expired"
P2=$LAST
start other_key "$BRIGADE" node --listen "127.0.0.1:$(port 6)" --keys "$T/c" --join "$ADDR" --threads 1 \
    --ticket "@$T/t_good"
P3=$LAST
start other_owner "$BRIGADE" node --listen "127.0.0.1:$(port 7)" --keys "$T/c" --join "$ADDR" --threads 1 \
    --ticket "@$T/t_foreign"
P4=$LAST
for pair in "no_ticket:$P1" "expired:$P2" "other_key:$P3" "other_owner:$P4"; do
    n=${pair%%:*}; p=${pair#*:}
    left=$((60 - ($(date +%s) - T0))); [ $left -ge 1 ] || left=1
    finish "$p" $left; WAITED=$(($(date +%s) - T0))
    msg=$(oneline "$T/$n.err" 3)
    if [ "$RC" = 2 ] && grep -qi refused "$T/$n.err"; then
        echo "ok - closed: joiner $(echo "$n" | tr _ ' ') refused (exit 2 after ${WAITED}s): $(grep -i -m 1 refused "$T/$n.err" | cut -c 1-200)"
    elif [ "$RC" = 124 ]; then
        echo "FAIL - closed: joiner $(echo "$n" | tr _ ' ') still running after 60 s: $msg"
    else
        echo "FAIL - closed: joiner $(echo "$n" | tr _ ' '): exit $RC, want 2 with 'refused': $msg"
    fi
done
nref=$(M count "$T/cc0.jsonl" peer what refused)

start good "$BRIGADE" node --listen "127.0.0.1:$(port 8)" --keys "$T/a" --join "$ADDR" --threads 1 \
    --ticket "@$T/t_good" --metrics "$T/good.jsonl"
G=$LAST
finish "$C" 40; crc=$RC
finish "$G" 10; grc=$RC
why=""
[ "$crc" = 0 ] || why="$why creator exit $crc ($(oneline "$T/cc0.err" 3));"
[ "$grc" = 0 ] || why="$why ticket holder exit $grc ($(oneline "$T/good.err" 3));"
[ "$(M end "$T/good.jsonl")" = ok ] || why="$why ticket holder end status $(M end "$T/good.jsonl");"
crash=$(crashed cc0 good no_ticket expired other_key other_owner)
[ -z "$crash" ] || why="$why crash: $crash;"
[ "$nref" -ge 1 ] || why="$why the creator logged no peer event what=refused;"
if [ -z "$why" ]; then
    echo "ok - closed: the ticket holder joined and the run completed ($(M get "$T/good.jsonl" end updates) updates; creator logged $nref refusals)"
else
    echo "FAIL - closed: ticket holder run:$why"
fi
hx_jsonl
exit 0
