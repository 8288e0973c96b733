#!/bin/sh
# ux.sh: what a person meets: help texts, one-line errors, the --http status
# page (HTML with SVG, and JSON), `brigade status` against a live node, and a
# short `make demo`.
# Prints "ok - NAME" or "FAIL - NAME: why".
BRIGADE=${BRIGADE:-build/brigade}
T=$(mktemp -d /tmp/brigade-ux.XXXXXX)
PID=""
cleanup() { [ -n "$PID" ] && kill -9 $PID 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT
trap 'exit 1' INT TERM HUP
. "$(dirname "$0")/hx.inc"
ok() { echo "ok - $1"; }
bad() { echo "FAIL - $1: $2"; }
# gone PID TENTHS: 0 when PID exits within TENTHS x 0.1 s (the caller waits for its status); else it is killed, 1
gone() {
    for _ in $(seq "$2"); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.1; done
    kill -0 "$1" 2>/dev/null || return 0
    kill -9 "$1" 2>/dev/null; wait "$1" 2>/dev/null; return 1
}

# help: every command and option a volunteer needs is there
"$BRIGADE" --help >"$T/h" 2>&1 && "$BRIGADE" node --help >"$T/hn" 2>&1 || bad help "--help exited non-zero"
missing=""
for o in --join --listen --stage --codec --max-inflight --metrics --checkpoint --http --advertise --keys --ticket; do
    grep -q -- "$o" "$T/hn" || missing="$missing $o"
done
for c in solo node keygen status sample assemble ticket; do grep -q "^  $c " "$T/h" || missing="$missing $c"; done
[ -z "$missing" ] && ok "help lists the commands and node options" || bad help "missing:$missing"
[ "$(grep -c -- '--join HOST:PORT/KEY ' "$T/hn")" = 1 ] && ok "node --help prints its table once" || bad "node help" "option table printed $(grep -c -- '--join HOST:PORT/KEY ' "$T/hn") times"
"$BRIGADE" help node >"$T/hn2" 2>&1 && "$BRIGADE" help sim >"$T/hs" 2>&1 || bad "help COMMAND" "exited non-zero"
cmp -s "$T/hn" "$T/hn2" && grep -q '^usage: brigade sim ' "$T/hs" && ok "help COMMAND prints the command's help" ||
    bad "help COMMAND" "help node differs from node --help, or help sim printed: $(head -n 1 "$T/hs")"

# version: the release (0.1.N, the Makefile's VERSION), the wire protocol and the kernels;
# `--version` prints the same
"$BRIGADE" version >"$T/v" 2>&1 && "$BRIGADE" --version >"$T/v2" 2>&1 || bad version "exited non-zero"
if grep -qE '^brigade [0-9]+\.[0-9]+\.[0-9]+$' "$T/v" && grep -qE '^wire protocol [0-9]+$' "$T/v" &&
   grep -q '^kernels ' "$T/v" && cmp -s "$T/v" "$T/v2"; then
    ok "version: $(head -n 1 "$T/v"), $(sed -n 2p "$T/v")"
else
    bad version "$(tr '\n' ' ' <"$T/v")"
fi

# `brigade COMMAND --help` (README, "Commands"): every command prints its usage and exits 0
nohelp=""
for c in solo node keygen status sample assemble eval export ticket sim version; do
    "$BRIGADE" $c --help >"$T/hc" 2>&1 && head -n 1 "$T/hc" | grep -q "^usage: brigade $c" || nohelp="$nohelp $c"
done
[ -z "$nohelp" ] && ok "every command's --help prints its usage, exit 0" || bad "COMMAND --help" "no usage or non-zero exit:$nohelp"

# the option reference is the manual page (examples/debian/manpage.sh, `make man`): it lists every option of
# solo and node with its --help text, row for row, and every option it names is one some command takes
"$BRIGADE" solo --help >"$T/hs" 2>&1
sh "$(dirname "$0")/../../examples/debian/manpage.sh" "$BRIGADE" >"$T/brigade.1" 2>"$T/man.err"
for c in sim keygen status sample assemble ticket; do "$BRIGADE" $c --help; done >"$T/hother" 2>&1
d=$(python3 - "$T/hs" "$T/hn" "$T/brigade.1" "$T/hother" <<'PY'
import re, sys
rows, order = {}, []
for f, solo in ((sys.argv[2], 0), (sys.argv[1], 1)):
    for line in open(f):
        m = re.match(r"  (--\S+)(?: (\S+))?\s{2,}(\S.*)$", line.rstrip("\n"))
        if m and m.group(1) not in rows:
            rows[m.group(1)] = (m.group(2), m.group(3) + (" (solo only)" if solo else ""))
            order.append(m.group(1))
page = open(sys.argv[3]).read()
unroff = lambda t: t.replace("\\-", "-").replace("\\e", "\\").replace("\\&", "")
entries = {}
for m in re.finditer(r"^\.TP\n\\fB(\\-\\-[^\\]+(?:\\-[^\\]+)*)\\fR(?: \\fI([^\\]+)\\fR)?\n(.*)$", page, re.M):
    entries[unroff(m.group(1))] = (m.group(2), unroff(m.group(3)))
bad = ["%s: page has %s, --help %s" % (k, entries.get(k), rows[k]) for k in order if entries.get(k) != rows[k]]
known = set(rows) | set(re.findall(r"--[a-z][a-z0-9-]*", open(sys.argv[4]).read())) | {"--help", "--version"}
named = set(re.findall(r"--[a-z][a-z0-9-]*[a-z0-9]", unroff(page)))
stale = sorted(n for n in named - known if n not in ("--name", "--bogus", "--emu", "--now"))   # --now: systemctl's
if len(order) < 30:
    bad.append("only %d options in --help" % len(order))
print("; ".join(bad[:3] + ["names no option: " + " ".join(stale)] * bool(stale)) or "compared %d" % len(order))
PY
)
case $d in
"compared "*) ok "the manual page lists every option of solo and node as --help says it (${d#compared } rows)" ;;
*) bad "manual page options" "$(echo "$d" | tr '\n' ' ') $(head -c 200 "$T/man.err")" ;;
esac

# tests/README.md names every option of brigade sim's own (the run options are the manual page's)
absent=""; nsim=0
for o in $("$BRIGADE" sim --help | sed -n '/^simulation options:/,/^$/p' | awk '/^  --/ { print $1 }'); do
    nsim=$((nsim + 1))
    grep -qE -- "(^|[^a-z-])$o([^a-z-]|\$)" "$(dirname "$0")/../README.md" || absent="$absent $o"
done
if [ -z "$absent" ] && [ "$nsim" -ge 8 ]; then ok "tests/README.md names every simulation option of sim --help ($nsim)"
else bad "tests/README.md sim options" "missing:$absent (of $nsim found in sim --help, want at least 8)"; fi

# node/README.md states the optimizer exactly (test_model checks the same facts against the code)
R="$(dirname "$0")/../../node/README.md"
opt=$(sed -n '/^## The optimizer/,/^## /p' "$R")
missing=""
for f in "betas 0.9 and 0.95" "eps 1e-8" "0.1 lr" "lr (t + 1) / W" "Clipping per unit" "token and" "output head" \
         "Biases and layer-norm" "1 - lr_t wd" "1/(M B T)"; do
    echo "$opt" | grep -qF -- "$f" || missing="$missing '$f'"
done
[ -n "$opt" ] && [ -z "$missing" ] && ok "node/README.md states the optimizer (betas, eps, schedule, decay, clipping unit)" \
    || bad "node/README.md optimizer" "section '## The optimizer' missing or lacks:$missing"

# a bad value: one line naming the option, exit 2
"$BRIGADE" node --stage banana >"$T/e" 2>&1; rc=$?
if [ $rc = 2 ] && [ "$(wc -l <"$T/e")" = 1 ] && grep -q -- "--stage" "$T/e"; then ok "bad --stage: one line, exit 2"
else bad "bad --stage" "exit $rc: $(cat "$T/e")"; fi

# --checkpoint that names a file, not a folder: refused at start, not a run whose every checkpoint fails
touch "$T/ckfile"
"$BRIGADE" node --listen 127.0.0.1:0 --checkpoint "$T/ckfile" --stages 1 --steps 2 --threads 1 >"$T/e" 2>&1; rc=$?
if [ $rc = 2 ] && [ "$(wc -l <"$T/e")" = 1 ] && grep -q -- "--checkpoint $T/ckfile: " "$T/e"; then ok "--checkpoint FILE: one line, exit 2"
else bad "--checkpoint FILE" "exit $rc: $(tail -n 2 "$T/e" | tr '\n' ' ')"; fi
# a folder whose stage.ckpt this brigade cannot read (an older format): one line naming it, the file kept
mkdir -p "$T/oldck" && { printf 'BRGDCKPT\001\000\000\000'; head -c 244 /dev/zero; } >"$T/oldck/stage.ckpt"
"$BRIGADE" node --listen 127.0.0.1:0 --checkpoint "$T/oldck" --stages 1 --steps 2 --threads 1 >"$T/e" 2>&1; rc=$?
if [ $rc = 2 ] && [ "$(wc -l <"$T/e")" = 1 ] && grep -q -- "--checkpoint $T/oldck: .*oldck/stage.ckpt: format version 1, .*move it away" "$T/e" \
    && [ "$(wc -c <"$T/oldck/stage.ckpt")" = 256 ]; then ok "checkpoint of an older format: one line, exit 2, kept: $(cat "$T/e")"
else bad "checkpoint of an older format" "exit $rc: $(tail -n 2 "$T/e" | tr '\n' ' ')"; fi
# solo --save into a folder that is not there: refused before training, not after it
"$BRIGADE" solo --steps 3 --save "$T/none/m.bin" >"$T/e" 2>&1; rc=$?
if [ $rc = 2 ] && [ "$(wc -l <"$T/e")" = 1 ] && grep -q -- "--save $T/none/m.bin: " "$T/e"; then ok "solo --save into no folder: one line before training, exit 2"
else bad "solo --save into no folder" "exit $rc: $(tr '\n' ' ' <"$T/e")"; fi

# the status page and brigade status against a single-stage node
set -- $(free_ports 2); P=$1 H=$2
"$BRIGADE" node --listen 127.0.0.1:$P --http $H --model gpt-tiny --data synthetic --stages 1 --steps 100000 \
    --threads 1 --checkpoint "$T/ck" --save-every 100000 --metrics "$T/m.jsonl" 2>"$T/n.err" &
PID=$!
A=""
for _ in $(seq 100); do
    A=$(python3 -c 'import json,sys
for l in open(sys.argv[1]):
    e=json.loads(l)
    if e.get("event")=="start": print(e["join_addr"]); break' "$T/m.jsonl" 2>/dev/null)
    [ -n "$A" ] && break; sleep 0.1
done
[ -n "$A" ] || bad "node start" "no start event: $(tail -n 2 "$T/n.err")"
# page_shows_progress: the page's JSON counts an update and holds a point of the loss curve
page_shows_progress() {
    curl -sf "http://127.0.0.1:$H/status.json" >"$T/s.json" && python3 -c 'import json, sys
s = json.load(open(sys.argv[1])); sys.exit(0 if s["updates"] > 0 and s["loss_history"] else 1)' "$T/s.json" 2>/dev/null
}
wait_for 120 page_shows_progress
if curl -sf "http://127.0.0.1:$H/status.json" >"$T/s.json" && python3 - "$T/s.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
assert s["nstages"] == 1 and s["stage"] == 0, s
assert any(p.get("self") for p in s["peers"]), "no row for the node itself"
assert s["updates"] > 0 and len(s["loss_history"]) > 0, "no progress in the page"
PY
then ok "/status.json is JSON with the node, its peers and the loss curve"; else bad "/status.json" "$(head -c 300 "$T/s.json")"; fi
curl -sf "http://127.0.0.1:$H/" | grep -q '<svg' && ok "status page draws the loss curve (svg)" || bad "status page" "no <svg> on /"
curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$H/nope" | grep -q 404 && ok "unknown page is 404" || bad "404" "unknown path not 404"
c=$(curl -s -o "$T/rb" -w '%{http_code}' -H 'Host: evil.example' "http://127.0.0.1:$H/status.json")
[ "$c" = 421 ] && ! grep -q join_addr "$T/rb" && ok "a request for another Host (DNS rebinding) is 421, without the page" \
    || bad "foreign Host" "status $c: $(head -c 100 "$T/rb")"
# 10 idle connections do not hold up the page (served one at a time, each held it 2 s: 22 s for this
# request; the bound of 10 s leaves a busy machine room)
dt=$(python3 - "$H" <<'PY'
import socket, sys, time, urllib.request
port = int(sys.argv[1])
idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(10)]
time.sleep(0.2)
t = time.time()
try:
    urllib.request.urlopen("http://127.0.0.1:%d/status.json" % port, timeout=30).read()
    print("%.2f" % (time.time() - t))
except Exception as e:
    print("failed after %.2f s: %s" % (time.time() - t, e))
PY
)
python3 -c "import sys; sys.exit(0 if float('$dt') < 10 else 1)" 2>/dev/null && ok "10 idle connections: /status.json answered in $dt s" \
    || bad "10 idle connections hold up the page" "$dt s"
"$BRIGADE" status "$A" >"$T/st" 2>&1 && grep -q "127.0.0.1:$P" "$T/st" && grep -q "1 stages, split even," "$T/st" \
    && ok "brigade status shows the swarm map and the split" \
    || bad "brigade status" "$(cat "$T/st")"
# a joiner asking for a stage the run does not have is told so by the bootstrap (not left waiting)
"$BRIGADE" node --listen 127.0.0.1:$(free_port) --join "$A" --stage 3 --threads 1 >"$T/j.out" 2>"$T/j.err" &
J=$!
if ! gone "$J" 100; then bad "joiner's --stage" "still waiting after 10 s: $(tail -n 1 "$T/j.err")"
else
    wait "$J"; rc=$?
    [ "$rc" = 2 ] && grep -q "refused by the swarm: --stage 3: the run has 1 stage (0 to 0)" "$T/j.err" \
        && ok "a joiner's --stage out of range: the bootstrap says the run's stages, exit 2" \
        || bad "joiner's --stage" "exit $rc: $(tail -n 1 "$T/j.err")"
fi
kill -TERM "$PID"
for _ in $(seq 50); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$PID" 2>/dev/null; then bad "SIGTERM" "node still running 5 s after SIGTERM"
else
    wait "$PID"; rc=$?
    end=$(python3 -c 'import json,sys
ends=[e for e in map(json.loads, open(sys.argv[1])) if e.get("event")=="end"]
print(ends[-1]["status"] + ": " + ends[-1]["why"] if len(ends)==1 else "%d end events" % len(ends))' "$T/m.jsonl" 2>&1)
    # stopped early on purpose: 128 + 15 as a shell reports it, its state saved although --save-every never came
    if [ "$rc" = 143 ] && [ "$end" = "interrupted: interrupted by SIGTERM" ] && [ -s "$T/ck/stage.ckpt" ] &&
        grep -q "interrupted by SIGTERM after" "$T/n.err"; then
        ok "SIGTERM stops a node: exit 143, end event 'interrupted', checkpoint written"
    else bad "SIGTERM" "exit $rc, end '$end', checkpoint $(ls "$T/ck" 2>&1 | tr '\n' ' '), stderr: $(tail -n 1 "$T/n.err")"; fi
fi
PID=""
# stopped by a signal before any update (waiting for a peer of stage 1): still a line on stderr that says why
"$BRIGADE" node --listen 127.0.0.1:0 --stages 2 --threads 1 --metrics "$T/w.jsonl" >"$T/w.out" 2>"$T/w.err" &
W=$!
# its handlers are set before it prints its address
wait_for 60 grep -qs '^join with' "$T/w.err"
kill -TERM "$W"; wait "$W"; rc=$?
[ "$rc" = 143 ] && grep -q "interrupted by SIGTERM" "$T/w.err" && ok "SIGTERM before any update: exit 143 with the reason on stderr" \
    || bad "SIGTERM before any update" "exit $rc: $(tail -n 1 "$T/w.err")"
# Ctrl-C after the run completed, while the node waits for a paused peer to
# hear of it (at most 15 s): it leaves at once, exit 0 (the run is complete)
ev() { python3 -c 'import json,sys
for l in open(sys.argv[1]):
    e=json.loads(l)
    if e.get("event")==sys.argv[2] and e.get(sys.argv[3]) is not None: print(e[sys.argv[3]])' "$1" "$2" "$3" 2>/dev/null; }
"$BRIGADE" node --listen 127.0.0.1:$(free_port) --stages 2 --micro 1 --steps 200 --threads 1 --metrics "$T/l0.jsonl" 2>"$T/l0.err" &
L0=$!
for _ in $(seq 150); do A=$(ev "$T/l0.jsonl" start join_addr | head -n 1); [ -n "$A" ] && break; sleep 0.1; done
"$BRIGADE" node --listen 127.0.0.1:$(free_port) --join "$A" --stage 1 --threads 1 --metrics "$T/l1.jsonl" 2>"$T/l1.err" &
L1=$!
"$BRIGADE" node --listen 127.0.0.1:$(free_port) --join "$A" --stage 1 --threads 1 --metrics "$T/l2.jsonl" 2>"$T/l2.err" &
L2=$!
PID="$L0 $L1 $L2"
for _ in $(seq 600); do [ "$(ev "$T/l0.jsonl" update version | tail -n 1)" -ge 100 ] 2>/dev/null && break; sleep 0.1; done
kill -STOP $L2
# complete: its updates have stopped (for 3 s, well within the wait of 15 s)
last=""; same=0
for _ in $(seq 240); do
    v=$(ev "$T/l0.jsonl" update version | tail -n 1)
    if [ "$v" = "$last" ]; then same=$((same + 1)); else same=0; last=$v; fi
    [ "$same" -ge 6 ] && [ "${v:-0}" -ge 150 ] && break
    sleep 0.5
done
kill -INT $L0
if ! gone $L0 50; then bad "Ctrl-C while lingering" "still running 5 s after SIGINT"
else
    wait $L0; rc=$?
    st=$(ev "$T/l0.jsonl" end status | tail -n 1)
    [ "$rc" = 0 ] && [ "$st" = ok ] && ok "Ctrl-C while a complete node waits for its peers to hear: it leaves at once, exit 0" \
        || bad "Ctrl-C while lingering" "exit $rc, end '$st': $(tail -n 1 "$T/l0.err")"
fi
kill -CONT $L2; kill -9 $L1 $L2 2>/dev/null; wait $L1 $L2 2>/dev/null
PID=""
# a node that leaves before --split auto chose says nothing of the split (its goodbye said "even", and the
# run's creator took that as the choice with two of four stages served)
"$BRIGADE" node --listen 127.0.0.1:$(free_port) --stages 4 --micro 1 --steps 10 --threads 1 --metrics "$T/a0.jsonl" 2>"$T/a0.err" &
A0=$!; PID="$A0"
for _ in $(seq 150); do A=$(ev "$T/a0.jsonl" start join_addr | head -n 1); [ -n "$A" ] && break; sleep 0.1; done
"$BRIGADE" node --listen 127.0.0.1:$(free_port) --join "$A" --threads 1 --metrics "$T/a1.jsonl" 2>"$T/a1.err" &
A1=$!; PID="$A0 $A1"
for _ in $(seq 150); do [ -n "$(ev "$T/a1.jsonl" resume version)" ] && break; sleep 0.1; done
kill -INT $A1; gone $A1 50; wait $A1
wait_for 60 grep -qs '"what":"gone","why":"bye"' "$T/a0.jsonl"   # its goodbye has come
np=$(grep -c '"event":"plan"' "$T/a0.jsonl")
kill -INT $A0; gone $A0 50; wait $A0
PID=""
[ "$np" = 0 ] && [ -n "$(ev "$T/a1.jsonl" resume version)" ] && ok "a node that leaves before --split auto chose: its peers take no split from its goodbye" \
    || bad "a node leaving before the choice" "the creator wrote $np plan event(s): $(grep '"plan"' "$T/a0.jsonl" | head -n 1)"
# a node whose output's reader went (`| head`) trains on; SIGTERM stops it as usual
mkfifo "$T/fifo"
"$BRIGADE" node --listen 127.0.0.1:$(free_port) --stages 1 --steps 100000 --threads 1 --metrics "$T/p.jsonl" \
    --checkpoint "$T/pck" 2>"$T/fifo" &
P1=$!; PID="$P1"
head -n 1 "$T/fifo" >/dev/null
# a progress line comes with an update every 5 s: an update 7 s after the first came after one met the closed pipe
late() { ! kill -0 $P1 2>/dev/null || ev "$T/p.jsonl" update t | awk 'NR == 1 { t0 = $1 } $1 >= t0 + 7 { found = 1 } END { exit !found }'; }
wait_for 120 late
if kill -0 $P1 2>/dev/null; then
    kill -TERM $P1
    gone $P1 100
    wait $P1; rc=$?
    st=$(ev "$T/p.jsonl" end status | tail -n 1)
    [ "$rc" = 143 ] && [ "$st" = interrupted ] && [ -s "$T/pck/stage.ckpt" ] \
        && ok "a node whose stderr pipe closed trains on; SIGTERM then stops it: exit 143, end event, checkpoint" \
        || bad "closed output" "exit $rc after SIGTERM, end '$st', checkpoint: $(ls "$T/pck" 2>&1)"
else
    wait $P1; rc=$?
    bad "closed output" "the node died (exit $rc) when the reader of its stderr went: no end event ($(ev "$T/p.jsonl" end status)), checkpoint: $(ls "$T/pck" 2>&1)"
fi
PID=""
# its terminal closed (SIGHUP): stopped as by SIGTERM, exit 129, end event, checkpoint
"$BRIGADE" node --listen 127.0.0.1:$(free_port) --stages 1 --steps 100000 --threads 1 --metrics "$T/hup.jsonl" \
    --checkpoint "$T/hck" 2>"$T/hup.err" &
P1=$!; PID="$P1"
wait_for 120 grep -qs '"event":"update"' "$T/hup.jsonl"
kill -HUP $P1
gone $P1 100
wait $P1; rc=$?
why=$(ev "$T/hup.jsonl" end why | tail -n 1)
[ "$rc" = 129 ] && [ "$why" = "interrupted by SIGHUP" ] && [ -s "$T/hck/stage.ckpt" ] \
    && ok "SIGHUP (its terminal closed) stops a node as SIGTERM does: exit 129, end event, checkpoint" \
    || bad "SIGHUP" "exit $rc, end '$why', checkpoint: $(ls "$T/hck" 2>&1)"
PID=""
# SIGTERM while it waits for its bootstrap's WELCOME: exit 143 with an end event, at once.  The
# bootstrap is a socket that takes the connection and never answers: once it has, the node waits
python3 -c 'import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
open(sys.argv[1], "w").write(str(s.getsockname()[1]))
c, _ = s.accept(); open(sys.argv[2], "w").write("connected"); time.sleep(60)' "$T/mute.port" "$T/mute.conn" &
MUTE=$!
wait_for 30 test -s "$T/mute.port"
"$BRIGADE" node --listen 127.0.0.1:0 --join "127.0.0.1:$(cat "$T/mute.port")/$(printf 'A%.0s' $(seq 40))" --threads 1 \
    --metrics "$T/jn.jsonl" 2>"$T/jn.err" &
P1=$!; PID="$P1 $MUTE"
wait_for 60 test -s "$T/mute.conn"
kill -TERM $P1
if ! gone $P1 30; then bad "SIGTERM while joining" "still running 3 s after SIGTERM"
else
    wait $P1; rc=$?
    why=$(ev "$T/jn.jsonl" end why | tail -n 1)
    [ "$rc" = 143 ] && [ "$why" = "interrupted by SIGTERM" ] && [ "$(grep -c . "$T/jn.err")" = 1 ] &&
        ok "SIGTERM while joining: exit 143, end event '$why', one line: $(tail -n 1 "$T/jn.err")" \
        || bad "SIGTERM while joining" "exit $rc, end event '$why': $(tr '\n' '|' <"$T/jn.err")"
fi
kill "$MUTE" 2>/dev/null
PID=""
# every failure after the metrics file is open still ends with an end event naming the reason
# (endcheck NAME REASON ARGS...: REASON, a grep pattern, must be in the event's why)
endcheck() {
    name=$1; want=$2; shift 2
    rm -f "$T/f.jsonl"
    "$BRIGADE" node --metrics "$T/f.jsonl" "$@" >"$T/f.out" 2>&1; rc=$?
    why=$(python3 -c 'import json,sys
ev=[json.loads(l) for l in open(sys.argv[1])]
ends=[e for e in ev if e["event"]=="end"]
print(ends[-1]["status"] + ": " + ends[-1]["why"] if len(ends)==1 else "%d end events" % len(ends))' "$T/f.jsonl" 2>&1)
    case "$why" in
        error:*) if [ $rc = 0 ]; then bad "$name" "exit 0"
                 elif echo "$why" | grep -q -- "$want"; then ok "$name: exit $rc, end event ($why)"
                 else bad "$name" "exit $rc, end event ($why) does not say '$want'"; fi;;
        *) bad "$name" "exit $rc, $why: $(tail -n 1 "$T/f.out")";;
    esac
}
mkdir -p "$T/ro" && touch "$T/ro/stage.ckpt"
endcheck "unreadable checkpoint" "stage.ckpt" --listen 127.0.0.1:0 --checkpoint "$T/ro" --stages 2 --steps 5
endcheck "silent bootstrap" "127.0.0.1:9" --listen 127.0.0.1:0 --join "127.0.0.1:9/$(printf 'A%.0s' $(seq 40))" --stages 2
python3 -c 'import socket,time,sys; s=socket.socket(); s.bind(("127.0.0.1",0)); s.listen(); print(s.getsockname()[1], flush=True); time.sleep(20)' >"$T/busy" &
BUSY=$!
wait_for 30 test -s "$T/busy"
endcheck "port in use" "already in use" --listen "127.0.0.1:$(cat "$T/busy")" --stages 2
kill "$BUSY" 2>/dev/null

# make demo (short): it follows the last stage, so every progress line it
# shows is stage 3/4's with a number for the loss; the assembled model is
# evaluated on held-out text and sampled
P=$(free_port)
STEPS=40 PORT=$P BRIGADE="$BRIGADE" timeout 150 sh examples/demo.sh >"$T/demo.out" 2>&1
rc=$?
lines=$(grep -c '^stage [0-9]*/[0-9]* |' "$T/demo.out")
last=$(grep -c '^stage 3/4 | .* | loss [0-9][0-9.]* |' "$T/demo.out")
if [ $rc = 0 ] && [ "$lines" -ge 1 ] && [ "$lines" = "$last" ] && grep -q '^held-out val_loss [0-9]' "$T/demo.out" &&
   grep -q '^== sampled from the trained model' "$T/demo.out"; then
    ok "demo shows the last stage's loss ($last progress lines, $(grep '^held-out' "$T/demo.out"))"
else
    bad demo "exit $rc, $lines progress lines, $last of stage 3/4 with a loss: $(grep -E '^stage |held-out|^brigade' "$T/demo.out" | head -n 3 | tr '\n' ' ')"
fi

hx_jsonl
exit 0
