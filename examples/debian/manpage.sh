#!/bin/sh
# manpage.sh: the brigade(1) manual page on stdout, from brigade.1.in and the
# binary's own help (its OPTIONS: node's, then solo's own, those node does
# not take, marked "(solo only)"), so the page lists the options of the
# binary it ships with.  `make man` writes build/brigade.1; build-deb.sh
# packs it; tests/integration/ux.sh checks it against --help.
#
#   sh examples/debian/manpage.sh BINARY [VERSION]
set -eu
BIN=$1 VERSION=${2:-0.1.0}
HERE=$(cd "$(dirname "$0")" && pwd)
OPTS=$(mktemp "${TMPDIR:-/tmp}/brigade-man.XXXXXX")
trap 'rm -f "$OPTS"' EXIT
{ "$BIN" node --help; echo "@SOLO@"; "$BIN" solo --help; } | awk '
    /^@SOLO@$/ { solo = 1; next }
    /^  --/ {
        line = substr($0, 3)
        i = index(line, "  ")
        opt = i ? substr(line, 1, i - 1) : $1
        desc = i ? substr(line, i) : ""
        sub(/^ +/, "", desc)
        n = split(opt, part, " ")
        if (part[1] in seen) next
        seen[part[1]] = 1
        if (solo) desc = desc " (solo only)"
        name = part[1]; gsub(/-/, "\\-", name)
        gsub(/\\/, "\\e", desc)
        sub(/^[.'"'"']/, "\\\\\\&&", desc)
        arg = n > 1 ? " \\fI" part[2] "\\fR" : ""
        printf(".TP\n\\fB%s\\fR%s\n%s\n", name, arg, desc)
    }' > "$OPTS"
awk -v version="$VERSION" -v opts="$OPTS" '
    /@OPTIONS@/ { while ((getline l < opts) > 0) print l; next }
    { gsub(/@VERSION@/, version); print }' "$HERE/brigade.1.in"
