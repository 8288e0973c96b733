# netns_bench.sh: the start every tests/netns benchmark shares.  Source it
# from a tests/bench/bench_*.sh script run from the top of the tree, then:
#
#   netns_bench_start NAME "TITLE" OUT
#
# NAME: the script's short name (messages, the work directory's prefix);
# TITLE: its fragment's heading; OUT: the fragment.  Needs BRIGADE (the
# binary) and RESULTS_DIR.  Where network namespaces are not available, OUT
# says why under TITLE and the script exits 0.  Otherwise sets WORK (a
# fresh directory, removed at exit unless KEEP is set), BRIGADE (a copy of
# the binary in it, so a rebuild meanwhile does not change the runs), DATA
# (the fortunes text, or synthetic where it is missing) and t_start (epoch
# seconds).
netns_bench_start() {
    mkdir -p "$RESULTS_DIR"
    [ -x "$BRIGADE" ] || { echo "$1: $BRIGADE is missing: run make" >&2; exit 1; }
    . tests/netns/lib.sh
    if ! netns_check; then
        { echo "## $2"; echo
          echo "Not measured on this machine: $NETNS_WHY (tests/netns needs root and network namespaces)."; } > "$3"
        echo "$1: skipped: $NETNS_WHY"
        exit 0
    fi
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/brigade-$1.XXXXXX")
    [ -n "${KEEP:-}" ] && echo "$1: keeping $WORK" || trap 'rm -rf "$WORK"' EXIT INT TERM
    cp "$BRIGADE" "$WORK/brigade" && BRIGADE=$WORK/brigade
    if [ -d /usr/share/games/fortunes ]; then DATA=text:/usr/share/games/fortunes; else DATA=synthetic; fi
    t_start=$(date +%s)
}
