#!/bin/sh
# netns.sh: the real-network harness (tests/netns): tbf really limits a
# link's rate, a 4-stage swarm over tbf-shaped links between network
# namespaces completes with every message through the shapers, and a node
# behind a NAT router cannot be reached from the internet while it can reach
# out.  Skipped (a "skip -" line) where network namespaces are not available.
BRIGADE=${BRIGADE:-build/brigade}
HERE=$(dirname "$0")/..
NETNS_HERE=$HERE/netns
. "$NETNS_HERE/lib.sh"
if ! netns_check; then echo "skip - netns: $NETNS_WHY"; exit 0; fi
T=$(mktemp -d /tmp/brigade-netns-test.XXXXXX)
NETNS_ON_EXIT='[ -n "$KEEP" ] || rm -rf "$T"'
netns_init 110 || { echo "FAIL - netns-setup: cannot build the namespaces"; exit 1; }
if [ -d /usr/share/games/fortunes ]; then DATA=text:/usr/share/games/fortunes; else DATA=synthetic; fi

# ok NAME COND-EXIT-STATUS DETAIL
ok() { if [ "$2" = 0 ]; then echo "ok - $1 ($3)"; else echo "FAIL - $1: $3"; fi; }

netns_public p0 20
netns_public p1 20
netns_home h0 20

# 1. The shaper: 1.25 MB at 20 Mbit/s cannot take less than 0.5 s (the tbf
#    burst allows a few ms less); unshaped veths carry it in ~10 ms.
netns_spawn p1 "$T/serve.log" python3 "$NETNS_HERE/tcp.py" serve 5000 "$T/serve.txt" 20
sleep 0.3
secs=$(netns_tcp p0 send "$(netns_addr p1)" 5000 1250000 | sed -n 's/^seconds=//p')
rc=$(awk -v s="${secs:-0}" 'BEGIN { print (s >= 0.45) ? 0 : 1 }')
ok tbf-limits-rate "$rc" "1.25 MB over a 20 Mbit/s uplink in ${secs:-?} s, want >= 0.45 s"

# 2. NAT: a node listening in the home is reachable from the home itself,
#    not from the internet (its router's public address, or its private
#    address routed through the router), not from a public node; and it
#    reaches out, seen from outside as the router's address.
netns_spawn h0 "$T/h0.log" "$BRIGADE" node --listen "$(netns_addr h0):7700" --stages 2 --stage 0 \
    --model gpt-tiny --data synthetic --threads 1 --metrics "$T/h0.jsonl"
home_pid=$NETNS_PID
for i in $(seq 50); do grep -q '"join_addr"' "$T/h0.jsonl" 2>/dev/null && break; sleep 0.2; done
netns_tcp h0 connect "$(netns_addr h0)" 7700 2; from_home=$?
netns_tcp inet connect "$(netns_wan h0)" 7700 2; to_wan=$?
netns_exec inet ip route add "$(netns_addr h0)/32" via "$(netns_wan h0)"
netns_tcp inet connect "$(netns_addr h0)" 7700 2; to_lan=$?
netns_tcp p0 connect "$(netns_addr h0)" 7700 1; from_public=$?
[ $from_home = 0 ] && [ $to_wan != 0 ] && [ $to_lan != 0 ] && [ $from_public != 0 ]
ok nat-blocks-inbound $? "node in the home reachable from the home: $([ $from_home = 0 ] && echo yes || echo no); from the internet via the router's address: $([ $to_wan = 0 ] && echo yes || echo no), routed to its private address: $([ $to_lan = 0 ] && echo yes || echo no); from a public node: $([ $from_public = 0 ] && echo yes || echo no)"
netns_kill "$home_pid"
netns_spawn p1 "$T/serve2.log" python3 "$NETNS_HERE/tcp.py" serve 5001 "$T/serve2.txt" 20
sleep 0.3
netns_tcp h0 send "$(netns_addr p1)" 5001 100000 >/dev/null; sent=$?
peer=$(sed -n 's/^peer=\([^ ]*\) .*/\1/p' "$T/serve2.txt" 2>/dev/null)
[ $sent = 0 ] && [ "$peer" = "$(netns_wan h0)" ]
ok nat-outbound-masqueraded $? "home -> public: sent rc $sent, seen from $peer, router $(netns_wan h0)"

# 3. A 4-stage swarm over 20 Mbit/s links (tests/netns/swarm, its own
#    namespaces): completes, loses nothing, and every node's messages went
#    through its shaped uplink (tbf bytes >= the node's bytes_sent).
netns_run sh "$NETNS_HERE/swarm" --nodes 4 --up 20 --links "$T/links.json" --max 90 -- \
    --brigade "$BRIGADE" --stages 4 --dir "$T/swarm" --timeout 75 --quiet --summary "$T/swarm.json" \
    --creator-args "--model gpt-tiny --data $DATA --batch 8 --micro 2 --steps 12 --seed 1" \
    --expect-exit 0 --expect-lost 0 >"$T/swarm.out" 2>&1
rc=$?
detail=$(python3 - "$T/swarm.json" "$T/links.json" <<'PY' 2>&1
import json, sys
try:
    s = json.load(open(sys.argv[1])); l = json.load(open(sys.argv[2]))
except (OSError, ValueError) as e:
    print("no summary or link figures: %s" % e); sys.exit(1)
bad, parts = [], []
for p, n in zip(s["per_node"], l["nodes"]):
    sent = int(p["bytes_sent"] or 0)
    parts.append("n%d stage %s sent %d B, its tbf %d B" % (p["node"], p["stage"], sent, n["up_bytes"]))
    if sent <= 0 or n["up_bytes"] < sent:
        bad.append(p["node"])
fwd = [l["nodes"][i]["to"][str(i + 1)] for i in range(3)]
if min(fwd) <= 0:
    bad.append("forward links %s" % fwd)
print(("; ".join(parts)) + ("; BAD: %s" % bad if bad else ""))
sys.exit(1 if bad else 0)
PY
)
prc=$?
if [ $rc != 0 ]; then
    ok swarm-over-tbf-links 1 "swarm exit $rc: $(grep -E '^FAILED|^harness|skipped' "$T/swarm.out" | tr '\n' ' ')"
else
    ok swarm-over-tbf-links $prc "$detail"
fi
exit 0
