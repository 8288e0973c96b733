#!/bin/sh
# nat.sh: nodes that cannot be reached serve anyway.  On 127.0.0.1: a
# 4-stage swarm whose stages 1 and 3 run with --no-listen completes, loses
# nothing, and `brigade status` shows them as outward-only, reached over the
# links they opened (reverse).  Over a real network (tests/netns, as root):
# stages 1 and 3 live behind NAT routers that drop every inbound connection
# and are given nothing but --join; the bootstrap's probe finds them
# unreachable, the swarm completes, the loss halves, nothing is lost.
BRIGADE=${BRIGADE:-build/brigade}
HERE=$(dirname "$0")/..
HARNESS=$HERE/harness
T=$(mktemp -d /tmp/brigade-nat.XXXXXX)
trap '[ -n "$KEEP" ] || rm -rf "$T"' EXIT
trap 'exit 1' INT TERM HUP
. "$(dirname "$0")/hx.inc"

# ok NAME COND-EXIT-STATUS DETAIL
ok() { if [ "$2" = 0 ]; then echo "ok - $1 ($3)"; else echo "FAIL - $1: $3"; fi; }

# reach DIR: "n0:true n1:false ..." from the start events
reach() {
    for f in "$1"/n*/metrics.jsonl; do
        n=$(basename "$(dirname "$f")")
        printf '%s:%s ' "$n" "$(sed -n 's/.*"event":"start".*"reachable":\([a-z]*\).*/\1/p' "$f" | head -n 1)"
    done
}

# 1. --no-listen needs --join: the node that starts a run must be reachable
"$BRIGADE" node --no-listen --stages 2 >"$T/nl.out" 2>&1; rc=$?
[ $rc = 2 ] && grep -q -- '--no-listen' "$T/nl.out"
ok no-listen-needs-join $? "exit $rc: $(head -n 1 "$T/nl.out")"

# 2. loopback: stages 1 and 3 accept no connection at all
python3 "$HARNESS" --quiet --brigade "$BRIGADE" --dir "$T/lo" --timeout 120 --stages 4 \
    --creator-args "--model gpt-tiny --data synthetic --steps 80 --seed 1" \
    --node 1 " --no-listen" --node 3 " --no-listen" \
    --expect-exit 0 --expect-lost 0 --expect-tokens-grow >"$T/lo.out" 2>&1 &
hpid=$!
addr=
for i in $(seq 150); do
    addr=$(sed -n 's/.*"join_addr":"\([^"]*\)".*/\1/p' "$T/lo/n0/metrics.jsonl" 2>/dev/null | head -n 1)
    n=$(cat "$T"/lo/n*/metrics.jsonl 2>/dev/null | grep -c '"event":"update"')
    [ -n "$addr" ] && [ "$n" -ge 12 ] && break
    sleep 0.2
done
"$BRIGADE" status "$addr" >"$T/status.out" 2>&1
wait $hpid; rc=$?
outw=$(grep -c ' outward ' "$T/status.out"); rev=$(grep -c ' reverse' "$T/status.out"); pub=$(grep -c ' public ' "$T/status.out")
r=$(reach "$T/lo")
[ $rc = 0 ] && [ "$outw" = 2 ] && [ "$rev" = 2 ] && [ "$pub" = 2 ] && [ "$r" = "n0:true n1:false n2:true n3:false " ]
ok no-listen-loopback $? "harness exit $rc: $(grep -E '^FAILED|^check lost' "$T/lo.out" | tr '\n' ' ')reachable $r; status: $outw outward, $rev reverse links, $pub public"
[ "$outw" = 2 ] || sed 's/^/    /' "$T/status.out"

# 3. a real network: stages 1 and 3 behind NAT, nothing but --join
. "$HERE/netns/lib.sh"
if ! netns_check; then
    echo "skip - nat-netns: $NETNS_WHY"
else
    if [ -d /usr/share/games/fortunes ]; then DATA=text:/usr/share/games/fortunes; else DATA=synthetic; fi
    sh "$HERE/netns/swarm" --nodes 4 --up 20 --home 1 --home 3 --links "$T/links.json" --max 200 -- \
        --brigade "$BRIGADE" --stages 4 --dir "$T/nn" --timeout 180 --quiet --summary "$T/nn.json" \
        --creator-args "--model gpt-tiny --data synthetic --steps 200 --seed 1" \
        --expect-exit 0 --expect-lost 0 --expect-loss-ratio 0.5 >"$T/nn.out" 2>&1
    rc=$?
    r=$(reach "$T/nn")
    probes=$(grep -h '"what":"probed"' "$T"/nn/n0/metrics.jsonl 2>/dev/null | grep -c '"reachable":false')
    if [ $rc = 77 ]; then
        echo "skip - nat-netns: $(tail -n 1 "$T/nn.out")"
    else
        [ $rc = 0 ] && [ "$r" = "n0:true n1:false n2:true n3:false " ] && [ "$probes" = 2 ]
        ok nat-behind-routers-serve $? "swarm exit $rc: $(grep -E '^FAILED|^check (loss|lost)' "$T/nn.out" | tr '\n' ' ')reachable $r; bootstrap probes that found no way in: $probes"
    fi
fi
hx_jsonl
