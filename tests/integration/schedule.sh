#!/bin/sh
# The asynchronous schedule's delay budget (--max-delay), measured in whole
# simulated swarms (brigade sim, modelled compute): no backward runs more
# than the budget's updates after its forward, the budget is used, 2bw keeps
# two weight versions and never runs a backward on weights its forward did
# not use, and a micro too small for the round trip is named in a warning.
BRIGADE=${BRIGADE:-build/brigade}
T=$(mktemp -d /tmp/brigade-schedule.XXXXXX)
trap 'rm -rf "$T"' EXIT
SIM="--nodes 4 --stages 4 --steps 60 --micro 2 --latency-ms 20:50 --seed 4"

# delays FILE: "max_delay_max max_stash mismatches warnings micro_needed updates" over FILE's events
# (updates: the update events read; with none the maxima are 0 and prove nothing)
delays() {
    python3 - "$1" <<'PY'
import json, sys
dmax = smax = mism = warn = need = nup = 0
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e["event"] == "update":
        nup += 1
        dmax = max(dmax, e.get("delay_max", 99)); smax = max(smax, e["stash"]); mism = max(mism, e.get("stash_mismatch", 99))
    elif e["event"] == "warning" and e.get("what") == "window":
        warn += 1; need = e["micro_needed"]
print(dmax, smax, mism, warn, need, nup)
PY
}

# 1. each budget holds and is reached (the round trip asks for more in flight than micro 2 allows)
for D in 0 1 2; do
    "$BRIGADE" sim $SIM --max-delay "$D" --staleness none --metrics "$T/d$D.jsonl" >"$T/d$D.out" 2>&1; rc=$?
    set -- $(delays "$T/d$D.jsonl")
    if [ $rc = 0 ] && [ "$1" = "$D" ] && [ "${6:-0}" -ge 60 ]; then echo "ok - max-delay $D: largest delay seen $1 update(s) over $6 update events, $(tail -n 1 "$T/d$D.out" | sed 's/^sim: //')"
    else echo "FAIL - max-delay $D: exit $rc, largest delay seen '$1' (want exactly $D) over '$6' update events (want >= 60): $(tail -n 1 "$T/d$D.out")"; fi
done

# 2. --staleness ramp lets the delay in: none over the first 3 x warmup (10) updates, all of it by the end
"$BRIGADE" sim $SIM --steps 100 --max-delay 2 --staleness ramp --metrics "$T/ramp.jsonl" >"$T/ramp.out" 2>&1; rc=$?
r=$(python3 -c "
import json, sys
ev = [json.loads(l) for l in open('$T/ramp.jsonl')]
up = [e for e in ev if e['event'] == 'update']
print(max([e['delay_max'] for e in up if e['version'] <= 30] or [-1]), max([e['delay_max'] for e in up] or [-1]))")
if [ $rc = 0 ] && [ "$r" = "0 2" ]; then echo "ok - ramp: largest delay 0 up to update 30, 2 over the run"
else echo "FAIL - ramp: exit $rc, largest delay up to update 30 and over the run: '$r' (want '0 2')"; fi

# 2b. the ramp lets the delay in by microbatches as the rate decays: with micro 4 and a budget of one update,
# one microbatch in four is late just after the ramp's start, all four at the end
"$BRIGADE" sim $SIM --micro 4 --steps 100 --max-delay 1 --staleness predict+ramp --metrics "$T/rampm.jsonl" >"$T/rampm.out" 2>&1; rc=$?
r=$(python3 -c "
import json
up = [e for e in map(json.loads, open('$T/rampm.jsonl')) if e['event'] == 'update' and e['stage'] == 0 and e['delay'] == e['delay']]
mean = lambda xs: sum(xs) / len(xs) if xs else -1
print('%.2f %.2f' % (mean([e['delay'] for e in up if 31 <= e['version'] <= 50]), mean([e['delay'] for e in up if e['version'] > 90])))")
set -- $r
if [ $rc = 0 ] && python3 -c "import sys; sys.exit(0 if 0.1 <= $1 <= 0.4 and $2 >= 0.75 else 1)"; then
    echo "ok - ramp by microbatches: stage 0's mean delay $1 over updates 31-50, $2 over the last 10"
else echo "FAIL - ramp by microbatches: exit $rc, stage 0's mean delay over updates 31-50 and the last 10: '$r' (want 0.1..0.4, >= 0.75)"; fi

# 3. 2bw: at most two versions, every backward on its forward's weights
"$BRIGADE" sim $SIM --stash 2bw --metrics "$T/2bw.jsonl" >"$T/2bw.out" 2>&1; rc=$?
set -- $(delays "$T/2bw.jsonl")
if [ $rc = 0 ] && [ "${6:-0}" -ge 60 ] && [ "$2" -le 2 ] && [ "$3" = 0 ]; then echo "ok - 2bw: at most $2 weight versions, $3 backwards on other weights ($6 update events)"
else echo "FAIL - 2bw: exit $rc, versions held up to '$2', backwards on weights their forward did not use '$3', over '$6' update events (want >= 60)"; fi

# 3b. 2bw with three data-stage nodes and peers of different speeds: a later stage sees more delay than the budget,
#     and refuses a backward whose forward's weights were folded away (it ran 5 on newer weights before)
"$BRIGADE" sim --nodes 9 --stages 3 --steps 400 --micro 2 --stash 2bw --seed 5 --latency-ms 5:80 --speed 1:4 \
    --metrics "$T/2bw9.jsonl" >"$T/2bw9.out" 2>&1; rc=$?
set -- $(delays "$T/2bw9.jsonl")
refused=$(grep -o '"stash_refused":[0-9]*' "$T/2bw9.jsonl" | cut -d: -f2 | sort -n | tail -n 1)
if [ $rc = 0 ] && [ "$2" -le 2 ] && [ "$3" = 0 ] && [ "${refused:-0}" -ge 1 ]; then
    echo "ok - 2bw, 9 nodes: at most $2 weight versions, $3 backwards on other weights, ${refused} refused at one node"
else echo "FAIL - 2bw, 9 nodes: exit $rc, versions held up to '$2', backwards on other weights '$3' (want 0), refused '${refused}' (want >= 1: the case arose)"; fi

# 4. the node names the micro the round trip needs
set -- $(delays "$T/d1.jsonl")
if [ "$4" -ge 1 ] && [ "$5" -gt 2 ]; then echo "ok - window warning: micro $5 would keep every stage busy"
else echo "FAIL - window warning: $4 warnings, micro_needed '$5' (want a warning naming a micro above 2)"; fi

# 5. gpipe never runs a stale backward
"$BRIGADE" sim $SIM --schedule gpipe --metrics "$T/gp.jsonl" >"$T/gp.out" 2>&1; rc=$?
set -- $(delays "$T/gp.jsonl")
if [ $rc = 0 ] && [ "$1" = 0 ] && [ "${6:-0}" -ge 60 ]; then echo "ok - gpipe: largest delay 0 over $6 update events"
else echo "FAIL - gpipe: exit $rc, largest delay '$1' over '$6' update events (want >= 60)"; fi
