# lib.sh: a real network in network namespaces, for tests and benchmarks.
# Source it from a POSIX sh script (as root):
#
#   . tests/netns/lib.sh
#   netns_check || { echo "skip - $NETNS_WHY"; exit 0; }
#   netns_init 120                     # the internet (a bridge), cleanup trap, 120 s bound
#   netns_public p0 20                 # a reachable node, uplink shaped to 20 Mbit/s
#   netns_home h0 20 100               # a node behind a NAT router: 20 up, 100 down
#   netns_spawn p0 "$T/p0.log" build/brigade node --listen "$(netns_addr p0):7700" ...
#   netns_kill "$NETNS_PID"
#
# Topology (every address inside 10.213.0.0/16, every interface inside a
# namespace this library created; nothing is added to the caller's own
# network namespace):
#   inet        the internet: bridge br0, 10.213.0.1/17
#   public P    namespace P, eth0 10.213.1.X/17 on the bridge
#   home H      router namespace H-gw: wan0 10.213.2.X/17 on the bridge,
#               lan0 10.213.(128+X).1/24, forwarding, nftables masquerade
#               out of wan0, and a firewall that drops every connection
#               that starts on the wan side (no port forwarding: inbound
#               connections are impossible); namespace H: eth0
#               10.213.(128+X).2/24, default route via the router
# Shaping is tbf (no netem on this kernel; delay is the nodes' own
# --emu-latency-ms): a node's uplink is shaped where it leaves for the
# internet (a public node's eth0, a home router's wan0), its downlink on the
# bridge side of that link.  Rates are Mbit/s; 0 or "" leaves a direction
# unshaped.  NETNS_TBF_LATENCY_MS (default 100) bounds each tbf queue.
# Every namespace uses the TCP congestion control NETNS_TCP_CC (default
# reno: loss-based like cubic, the Linux default most volunteers run, which
# behaves like reno at these sub-millisecond round trips; a namespace may
# only pick what the host's net.ipv4.tcp_allowed_congestion_control lists,
# and a host set to bbr overruns tbf's queue with retransmissions).
#
# Namespaces are named brn<pid>-NAME (pid: the script that called
# netns_init), so runs never collide and stale ones of a dead run are
# recognised and removed by the next netns_init.  netns_cleanup (installed
# as an EXIT/INT/TERM/HUP trap; a caller's own cleanup goes in NETNS_ON_EXIT)
# kills what netns_spawn started and every process still inside these
# namespaces, by pid, then deletes the namespaces by name.  A watchdog ends
# the run at the bound given to netns_init and cleans up even if the caller
# was killed with -9 (it is not a job of the caller's shell: `wait` without
# arguments does not wait for it).
#
# Functions (NAME: [a-z0-9_]+, "inet" is the internet itself):
#   netns_check                      0 if usable, else 1 with the reason in NETNS_WHY
#   netns_init [MAX_S]               set up the internet; bound everything to MAX_S (default 300)
#   netns_public NAME [UP [DOWN]]    a reachable node
#   netns_home NAME [UP [DOWN]]      a node behind NAT (its router is NAME-gw)
#   netns_shape NAME UP [DOWN]       change a node's rates (UP/DOWN "" or 0: unshaped)
#   netns_addr NAME                  the node's own address (a home node's is private)
#   netns_wan NAME                   the address the internet sees (home: its router's)
#   netns_ns NAME                    the namespace's full name (for ip netns exec)
#   netns_exec NAME CMD...           run CMD in NAME's namespace, in the foreground
#   netns_spawn NAME LOG CMD...      start CMD in NAME's namespace in the background,
#                                    output to LOG; its pid in NETNS_PID (recorded)
#   netns_kill PID [SIGNAL]          signal one process started by netns_spawn (default KILL)
#   netns_run CMD...                 run CMD (in the caller's namespace) and wait for it, so
#                                    that a signal to the caller cleans up at once (sh runs a
#                                    trap only after a foreground command has ended, but
#                                    interrupts `wait`); CMD gets SIGTERM at the cleanup
#   netns_tcp NAME ARGS...           tests/netns/tcp.py in NAME's namespace (connect, serve, send)
#   netns_account NAME               count bytes from NAME to every other node (call after
#                                    the topology is complete, before the traffic)
#   netns_bytes_to NAME PEER         bytes (IP) NAME sent to PEER's address since netns_account
#   netns_shaper_bytes NAME up|down  bytes the tbf of NAME's uplink / downlink carried
#   netns_shaper_drops NAME up|down  packets that tbf dropped (its queue was full)
#   netns_retrans NAME               TCP segments NAME's namespace retransmitted
#   netns_sample FILE SECONDS NAME... every SECONDS, append each NAME's counters to FILE:
#                                    "T NAME up|down BYTES" (its shapers) and
#                                    "T NAME to:PEER BYTES" (after netns_account); T: epoch
#                                    seconds.  Runs in the background until netns_sample_stop
#   netns_sample_stop                stop it (after one last sample)
#   netns_remaining                  seconds left before the bound
#   netns_cleanup                    everything above removed (also the trap)

NETNS_HERE=${NETNS_HERE:-tests/netns}
NETNS_WHY=
NETNS_PID=
NETNS_DIR=
NETNS_ON_EXIT=${NETNS_ON_EXIT:-}

s_netns_names_ok() {
    case "$1" in
        ''|*[!a-z0-9_]*) echo "netns: bad name '$1' (want [a-z0-9_]+)" >&2; return 1 ;;
    esac
    [ ${#1} -le 24 ] || { echo "netns: name '$1' is too long" >&2; return 1; }
}

netns_check() {
    NETNS_WHY=
    if [ "$(id -u)" != 0 ]; then NETNS_WHY="network namespaces need root"; return 1; fi
    for c in ip tc nft python3; do
        command -v "$c" >/dev/null 2>&1 || { NETNS_WHY="no '$c' command (apt-get install iproute2 nftables python3)"; return 1; }
    done
    probe="brnprobe$$"
    if ! ip netns add "$probe" 2>/dev/null; then
        NETNS_WHY="cannot create a network namespace here (ip netns add failed: no CAP_SYS_ADMIN?)"
        return 1
    fi
    ok=1
    ip -n "$probe" link add name va type veth peer name vb 2>/dev/null || { ok=0; NETNS_WHY="cannot create veth pairs"; }
    [ $ok = 1 ] && { ip netns exec "$probe" tc qdisc add dev va root tbf rate 1mbit burst 4kb latency 50ms 2>/dev/null \
        || { ok=0; NETNS_WHY="no tbf qdisc (sch_tbf)"; }; }
    [ $ok = 1 ] && { printf 'table ip t {\n chain c {\n type nat hook postrouting priority 100; masquerade\n }\n}\n' \
        | ip netns exec "$probe" nft -f - 2>/dev/null || { ok=0; NETNS_WHY="nftables masquerade does not work (nf_tables, nft_masq)"; }; }
    ip netns del "$probe" 2>/dev/null
    [ $ok = 1 ]
}

# Removes the namespaces of runs whose script is gone.
s_netns_reap_stale() {
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep '^brn[0-9][0-9]*-'); do
        pid=${ns#brn}
        pid=${pid%%-*}
        [ "$pid" = "$NETNS_OWNER" ] && continue
        kill -0 "$pid" 2>/dev/null && continue
        for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
        ip netns del "$ns" 2>/dev/null
    done
}

netns_ns() {
    [ -f "$NETNS_DIR/n.$1" ] || { echo "netns: no node '$1'" >&2; return 1; }
    awk '{print $2}' "$NETNS_DIR/n.$1"
}
netns_addr() { [ -f "$NETNS_DIR/n.$1" ] && awk '{print $3}' "$NETNS_DIR/n.$1"; }
netns_wan() { [ -f "$NETNS_DIR/n.$1" ] && awk '{print $4}' "$NETNS_DIR/n.$1"; }
# s_netns_field NAME K: field K of the node's record
#   kind ns addr wan up_ns up_dev down_dev (down_dev lives in inet)
s_netns_field() { awk -v k="$2" '{print $k}' "$NETNS_DIR/n.$1"; }

netns_remaining() {
    r=$((NETNS_DEADLINE - $(date +%s)))
    [ $r -lt 0 ] && r=0
    echo $r
}

# s_netns_new NAME: creates the namespace brn<pid>-NAME with lo up.
s_netns_new() {
    ns="${NETNS_PREFIX}$1"
    ip netns add "$ns" || return 1
    echo "$ns" >> "$NETNS_DIR/namespaces"
    ip -n "$ns" link set lo up || return 1
    ip netns exec "$ns" sysctl -qw "net.ipv4.tcp_congestion_control=${NETNS_TCP_CC:-reno}" 2>/dev/null ||
        echo "netns: $1 keeps the host's TCP congestion control (${NETNS_TCP_CC:-reno} is not allowed)" >&2
    return 0
}

netns_init() {
    max=${1:-300}
    NETNS_OWNER=$$
    NETNS_OWNER_START=$(s_netns_start_time $$)
    NETNS_PREFIX="brn$$-"
    NETNS_DIR=$(mktemp -d "${TMPDIR:-/tmp}/brigade-netns.XXXXXX") || return 1
    : > "$NETNS_DIR/namespaces"
    : > "$NETNS_DIR/pids"
    : > "$NETNS_DIR/running"
    echo 0 > "$NETNS_DIR/publics"
    echo 0 > "$NETNS_DIR/homes"
    NETNS_DEADLINE=$(( $(date +%s) + max ))
    trap 'netns_cleanup' EXIT
    trap 'netns_cleanup; exit 130' INT
    trap 'netns_cleanup; exit 143' TERM
    trap 'netns_cleanup; exit 129' HUP
    s_netns_reap_stale
    s_netns_new inet || { echo "netns: cannot create namespaces" >&2; return 1; }
    inet="${NETNS_PREFIX}inet"
    ip -n "$inet" link add name br0 type bridge &&
    ip -n "$inet" addr add 10.213.0.1/17 dev br0 &&
    ip -n "$inet" link set br0 up || { echo "netns: cannot set up the internet bridge" >&2; return 1; }
    echo "inet $inet 10.213.0.1 10.213.0.1 - - -" > "$NETNS_DIR/n.inet"
    # not a job of the caller's shell, so that its `wait` does not wait for it
    ( s_netns_watchdog & echo $! > "$NETNS_DIR/watchdog" )
    NETNS_WATCHDOG=$(cat "$NETNS_DIR/watchdog")
}

# s_netns_start_time PID: when PID started (clock ticks since boot), so that
# a reused pid is not taken for the process it was.
s_netns_start_time() { awk '{ sub(/^.*\) /, ""); print $20 }' "/proc/$1/stat" 2>/dev/null; }
s_netns_owner_alive() { [ "$(s_netns_start_time "$NETNS_OWNER")" = "$NETNS_OWNER_START" ]; }

# The watchdog: past the deadline, or when the caller has died, kill and
# remove everything (the caller's trap does the same when it can run).
s_netns_watchdog() {
    trap - EXIT INT TERM HUP
    exec </dev/null >/dev/null 2>&1
    while s_netns_owner_alive; do
        if [ "$(date +%s)" -ge "$NETNS_DEADLINE" ]; then
            echo "netns: time bound reached" > "$NETNS_DIR/timed_out"
            s_netns_kill_all
            s_netns_owner_alive && kill -TERM "$NETNS_OWNER" 2>/dev/null
            sleep 5
            break
        fi
        sleep 1
    done
    [ -d "$NETNS_DIR" ] || return 0
    s_netns_kill_all
    s_netns_remove_all
}

# s_netns_ours: the pids to stop: what netns_run is waiting for (children
# of the caller, not yet reaped) and what netns_spawn started that still
# lives in one of our namespaces (a pid that has exited may be reused).
s_netns_ours() {
    cat "$NETNS_DIR/running" 2>/dev/null
    for p in $(cat "$NETNS_DIR/pids" 2>/dev/null); do
        ns=$(ip netns identify "$p" 2>/dev/null)
        [ -n "$ns" ] && grep -qx "$ns" "$NETNS_DIR/namespaces" && echo "$p"
    done
}

# Kills every process we started and every process inside our namespaces,
# by pid: SIGTERM first, SIGKILL after 2 s.
s_netns_kill_all() {
    [ -f "$NETNS_DIR/pids" ] || return 0
    ours=$(s_netns_ours)
    for p in $ours; do kill -TERM "$p" 2>/dev/null; done
    for i in 1 2 3 4 5 6 7 8 9 10; do
        alive=0
        for p in $ours; do kill -0 "$p" 2>/dev/null && alive=1; done
        [ $alive = 0 ] && break
        sleep 0.2
    done
    for p in $ours; do kill -KILL "$p" 2>/dev/null; done
    for ns in $(cat "$NETNS_DIR/namespaces" 2>/dev/null); do
        for p in $(ip netns pids "$ns" 2>/dev/null); do
            [ "$p" = "$NETNS_OWNER" ] || kill -KILL "$p" 2>/dev/null
        done
    done
}

s_netns_remove_all() {
    for ns in $(cat "$NETNS_DIR/namespaces" 2>/dev/null); do
        ip netns del "$ns" 2>/dev/null
    done
    rm -rf "$NETNS_DIR"
}

netns_cleanup() {
    trap - EXIT INT TERM HUP
    [ -n "$NETNS_ON_EXIT" ] && eval "$NETNS_ON_EXIT"
    [ -n "$NETNS_DIR" ] && [ -d "$NETNS_DIR" ] || return 0
    [ -n "${NETNS_WATCHDOG:-}" ] && kill -KILL "$NETNS_WATCHDOG" 2>/dev/null
    s_netns_kill_all
    s_netns_remove_all
    NETNS_DIR=
}

# s_netns_count FILE: increments the counter in FILE and prints the new value.
s_netns_count() {
    n=$(($(cat "$1") + 1))
    echo $n > "$1"
    echo $n
}

# s_netns_tbf NS DEV MBIT: shape DEV's egress to MBIT (removed if empty or 0).
s_netns_tbf() {
    if [ -z "$3" ] || [ "$(awk -v r="$3" 'BEGIN { print (r + 0 > 0) }')" = 0 ]; then
        ip netns exec "$1" tc qdisc del dev "$2" root 2>/dev/null
        return 0
    fi
    # burst: 4 ms at the rate, at least two full-size frames
    burst=$(awk -v r="$3" 'BEGIN { b = r * 1e6 / 8 * 0.004; if (b < 3100) b = 3100; printf "%d", b }')
    ip netns exec "$1" tc qdisc replace dev "$2" root tbf rate "${3}mbit" burst "$burst" \
        latency "${NETNS_TBF_LATENCY_MS:-100}ms"
}

# s_netns_plug NS IFNAME PEERNAME: a veth from NS (IFNAME) to the bridge (PEERNAME).
s_netns_plug() {
    inet="${NETNS_PREFIX}inet"
    ip -n "$inet" link add name "$3" type veth peer name "$2" netns "$1" &&
    ip -n "$inet" link set "$3" master br0 up &&
    ip -n "$1" link set "$2" up
}

netns_public() {
    s_netns_names_ok "$1" || return 1
    [ -e "$NETNS_DIR/n.$1" ] && { echo "netns: '$1' exists" >&2; return 1; }
    x=$(s_netns_count "$NETNS_DIR/publics")
    [ "$x" -le 250 ] || { echo "netns: at most 250 public nodes" >&2; return 1; }
    s_netns_new "$1" || return 1
    ns="${NETNS_PREFIX}$1"
    s_netns_plug "$ns" eth0 "p$x" &&
    ip -n "$ns" addr add "10.213.1.$x/17" dev eth0 || { echo "netns: cannot plug $1" >&2; return 1; }
    echo "public $ns 10.213.1.$x 10.213.1.$x $ns eth0 p$x" > "$NETNS_DIR/n.$1"
    netns_shape "$1" "${2:-}" "${3:-}"
}

netns_home() {
    s_netns_names_ok "$1" || return 1
    [ -e "$NETNS_DIR/n.$1" ] && { echo "netns: '$1' exists" >&2; return 1; }
    x=$(s_netns_count "$NETNS_DIR/homes")
    [ "$x" -le 120 ] || { echo "netns: at most 120 homes" >&2; return 1; }
    s_netns_new "$1-gw" || return 1
    s_netns_new "$1" || return 1
    gw="${NETNS_PREFIX}$1-gw"
    ns="${NETNS_PREFIX}$1"
    lan="10.213.$((128 + x))"
    s_netns_plug "$gw" wan0 "h$x" &&
    ip -n "$gw" addr add "10.213.2.$x/17" dev wan0 &&
    ip -n "$gw" link add name lan0 type veth peer name eth0 netns "$ns" &&
    ip -n "$gw" addr add "$lan.1/24" dev lan0 &&
    ip -n "$gw" link set lan0 up &&
    ip -n "$ns" addr add "$lan.2/24" dev eth0 &&
    ip -n "$ns" link set eth0 up &&
    ip -n "$ns" route add default via "$lan.1" &&
    ip netns exec "$gw" sysctl -qw net.ipv4.ip_forward=1 || { echo "netns: cannot build home $1" >&2; return 1; }
    # NAT out of wan0; nothing that starts on the wan side gets in or through
    ip netns exec "$gw" nft -f - <<EOF || { echo "netns: cannot set up the NAT of $1" >&2; return 1; }
table ip nat {
    chain post {
        type nat hook postrouting priority srcnat; policy accept;
        oifname "wan0" masquerade
    }
}
table inet fw {
    chain through {
        type filter hook forward priority filter; policy drop;
        ct state established,related accept
        iifname "lan0" oifname "wan0" accept
    }
    chain to_router {
        type filter hook input priority filter; policy drop;
        ct state established,related accept
        iifname { "lo", "lan0" } accept
    }
}
EOF
    echo "home $ns $lan.2 10.213.2.$x $gw wan0 h$x" > "$NETNS_DIR/n.$1"
    netns_shape "$1" "${2:-}" "${3:-}"
}

netns_shape() {
    [ -f "$NETNS_DIR/n.$1" ] || { echo "netns: no node '$1'" >&2; return 1; }
    s_netns_tbf "$(s_netns_field "$1" 5)" "$(s_netns_field "$1" 6)" "${2:-}" &&
    s_netns_tbf "${NETNS_PREFIX}inet" "$(s_netns_field "$1" 7)" "${3:-}"
}

netns_exec() {
    ns=$(netns_ns "$1") || return 1
    shift
    ip netns exec "$ns" "$@"
}

netns_spawn() {
    ns=$(netns_ns "$1") || return 1
    log=$2
    shift 2
    # ip netns exec execs the command: $! is the command's own pid
    ip netns exec "$ns" "$@" >"$log" 2>&1 </dev/null &
    NETNS_PID=$!
    echo "$NETNS_PID" >> "$NETNS_DIR/pids"
}

netns_run() {
    "$@" &
    s_pid=$!
    echo "$s_pid" >> "$NETNS_DIR/running"
    wait "$s_pid"
    s_rc=$?
    # reaped: forget the pid before it can be reused
    grep -vx "$s_pid" "$NETNS_DIR/running" > "$NETNS_DIR/running.tmp"
    mv "$NETNS_DIR/running.tmp" "$NETNS_DIR/running"
    return $s_rc
}

netns_kill() {
    grep -qx "$1" "$NETNS_DIR/pids" 2>/dev/null || { echo "netns: $1 was not started by netns_spawn" >&2; return 1; }
    ns=$(ip netns identify "$1" 2>/dev/null)
    [ -n "$ns" ] && grep -qx "$ns" "$NETNS_DIR/namespaces" || return 0   # gone already
    kill -"${2:-KILL}" "$1" 2>/dev/null
}

netns_tcp() {
    who=$1
    shift
    netns_exec "$who" python3 "$NETNS_HERE/tcp.py" "$@"
}

netns_account() {
    ns=$(netns_ns "$1") || return 1
    {
        echo "table ip brnacct {"
        echo "    chain out {"
        echo "        type filter hook output priority filter; policy accept;"
        for f in "$NETNS_DIR"/n.*; do
            peer=${f##*/n.}
            [ "$peer" = "$1" ] && continue
            for a in $(awk '{print $3; if ($4 != $3) print $4}' "$f"); do
                echo "        ip daddr $a counter comment \"$peer\""
            done
        done
        echo "    }"
        echo "}"
    } | ip netns exec "$ns" nft -f -
}

netns_bytes_to() {
    ns=$(netns_ns "$1") || return 1
    ip netns exec "$ns" nft list chain ip brnacct out 2>/dev/null |
        awk -v p="\"$2\"" '/counter/ && $NF == p { for (i = 1; i < NF; i++) if ($i == "bytes") s += $(i + 1) } END { print s + 0 }'
}

s_netns_sample_once() {
    t=$(date +%s.%N)
    for who in "$@"; do
        echo "$t $who up $(netns_shaper_bytes "$who" up)"
        echo "$t $who down $(netns_shaper_bytes "$who" down)"
        ip netns exec "$(netns_ns "$who")" nft list chain ip brnacct out 2>/dev/null |
            awk -v t="$t" -v w="$who" '/counter/ { for (i = 1; i < NF; i++) if ($i == "bytes") b = $(i + 1)
                                                   p = $NF; gsub(/"/, "", p); s[p] += b }
                                       END { for (p in s) print t, w, "to:" p, s[p] }'
    done
}

netns_sample() {
    out=$1 every=$2
    shift 2
    : > "$NETNS_DIR/sample.on"
    ( trap - EXIT INT TERM HUP
      while [ -f "$NETNS_DIR/sample.on" ]; do s_netns_sample_once "$@"; sleep "$every"; done
      s_netns_sample_once "$@" ) >> "$out" 2>/dev/null &
    NETNS_SAMPLER=$!
    echo "$NETNS_SAMPLER" >> "$NETNS_DIR/running"
}

netns_sample_stop() {
    [ -n "${NETNS_SAMPLER:-}" ] || return 0
    rm -f "$NETNS_DIR/sample.on"
    wait "$NETNS_SAMPLER"
    grep -vx "$NETNS_SAMPLER" "$NETNS_DIR/running" > "$NETNS_DIR/running.tmp"
    mv "$NETNS_DIR/running.tmp" "$NETNS_DIR/running"
    NETNS_SAMPLER=
}

# s_netns_qdisc_stat NAME up|down FIELD: a number of the root qdisc's
# statistics line ("Sent B bytes P pkt (dropped D, ...)"): 2 bytes, 7 drops.
s_netns_qdisc_stat() {
    [ -f "$NETNS_DIR/n.$1" ] || { echo "netns: no node '$1'" >&2; return 1; }
    if [ "$2" = up ]; then ns=$(s_netns_field "$1" 5); dev=$(s_netns_field "$1" 6)
    else ns="${NETNS_PREFIX}inet"; dev=$(s_netns_field "$1" 7); fi
    ip netns exec "$ns" tc -s qdisc show dev "$dev" root 2>/dev/null |
        awk -v k="$3" '$1 == "Sent" { v = $k; gsub(/[^0-9]/, "", v); print v + 0; found = 1; exit }
                       END { if (!found) print 0 }'
}
netns_shaper_bytes() { s_netns_qdisc_stat "$1" "$2" 2; }
netns_shaper_drops() { s_netns_qdisc_stat "$1" "$2" 7; }

netns_retrans() {
    netns_exec "$1" nstat -az TcpRetransSegs 2>/dev/null | awk '$1 == "TcpRetransSegs" { print $2; f = 1 } END { if (!f) print 0 }'
}
