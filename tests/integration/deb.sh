#!/bin/sh
# deb.sh: the Debian package (`make deb`, examples/debian/build-deb.sh) of
# the binary under test: built with dpkg-deb, inspected with --info and
# --contents, unpacked into a scratch root, and run from there.  Prints
# "ok - NAME", "FAIL - NAME: why" or "skip - deb: why".
BRIGADE=${BRIGADE:-build/brigade}
if ! command -v dpkg-deb >/dev/null 2>&1; then
    echo "skip - deb: dpkg-deb not found (not a Debian system)"
    exit 0
fi
T=$(mktemp -d /tmp/brigade-deb.XXXXXX)
trap 'rm -rf "$T"' EXIT
trap 'exit 1' INT TERM HUP
ok() { echo "ok - $1"; }
bad() { echo "FAIL - $1: $2"; }

if ! DEB=$(sh examples/debian/build-deb.sh "$BRIGADE" "$T/out" 0.0.1 2>"$T/build.err"); then
    bad deb-build "$(tail -n 2 "$T/build.err" | tr '\n' ' ')"
    exit 0
fi
[ -f "$DEB" ] && ok "deb-build ($(basename "$DEB"), $(wc -c <"$DEB") bytes)" || bad deb-build "no file $DEB"

# control: name, version, and Depends naming runtime libraries only
dpkg-deb --info "$DEB" >"$T/info" 2>&1
field() { sed -n "s/^ $1: //p" "$T/info"; }
DEPS=$(field Depends)
if [ "$(field Package)" = brigade ] && [ "$(field Version)" = 0.0.1 ] && [ -n "$(field Architecture)" ] &&
   [ -n "$(field Maintainer)" ] && [ -n "$DEPS" ] && ! echo "$DEPS" | grep -q -- '-dev'; then
    ok "deb-control (Depends: $DEPS)"
else
    bad deb-control "$(tr '\n' ' ' <"$T/info" | cut -c1-300)"
fi
for s in postinst prerm postrm conffiles; do
    grep -q "^ *[0-9]* bytes, *[0-9]* lines *[*]* *$s" "$T/info" || bad deb-control "no $s in the control archive"
done

# every shared library the binary needs comes from a package in Depends
# (libopenblas0 stands for its variants; a sanitizer runtime is not shipped)
missing=""; nlib=0
for lib in $(objdump -p "$BRIGADE" | awk '$1 == "NEEDED" { print $2 }'); do
    case "$lib" in libasan*|libubsan*|libtsan*|ld-linux*) continue ;; esac
    nlib=$((nlib + 1))
    path=$(ldd "$BRIGADE" | awk -v l="$lib" '$1 == l { print $3 }')
    real=$(readlink -f "$path")
    pkg=""
    for p in "$path" "$real" "${real#/usr}" "/usr$path"; do   # merged /usr: either spelling is registered
        pkg=$(dpkg -S "$p" 2>/dev/null | head -n 1 | cut -d: -f1)
        [ -n "$pkg" ] && break
    done
    case "$pkg" in libopenblas0-*) pkg=libopenblas0 ;; esac
    if [ -z "$pkg" ] || ! echo ", $DEPS," | grep -q ", $pkg[ ,(]"; then missing="$missing $lib(${pkg:-no package})"; fi
done
# (no library read is no check: the binary links libzmq, libsodium, libopenblas...)
if [ "$nlib" = 0 ]; then bad deb-depends "objdump -p $BRIGADE listed no NEEDED library: $(objdump -p "$BRIGADE" 2>&1 | tail -n 1)"
elif [ -z "$missing" ]; then ok "deb-depends (the packages of all $nlib NEEDED libraries are in Depends)"
else bad deb-depends "not in Depends:$missing"; fi

# contents: the binary, the man page, the unit, the conffile
dpkg-deb --contents "$DEB" >"$T/contents"
lack=""
for f in ./usr/bin/brigade ./usr/share/man/man1/brigade.1.gz ./lib/systemd/system/brigade-node.service ./etc/brigade/node.env; do
    grep -q " $f\$" "$T/contents" || lack="$lack $f"
done
[ -z "$lack" ] && ok "deb-contents ($(wc -l <"$T/contents") entries)" || bad deb-contents "missing:$lack"
grep -q ' ./usr/bin/brigade$' "$T/contents" && grep ' ./usr/bin/brigade$' "$T/contents" | grep -q '^-rwxr-xr-x root/root' ||
    bad deb-contents "usr/bin/brigade is not 0755 root: $(grep ' ./usr/bin/brigade$' "$T/contents")"

# unpacked into a scratch root: the binary runs, the unit starts what is there
dpkg-deb -x "$DEB" "$T/root"
dpkg-deb -e "$DEB" "$T/root/DEBIAN"
if "$T/root/usr/bin/brigade" --help >"$T/help" 2>&1 && grep -q '^brigade: train one neural network' "$T/help"; then
    ok "deb-runs (brigade --help from the unpacked package)"
else
    bad deb-runs "$(head -n 2 "$T/help" | tr '\n' ' ')"
fi
"$T/root/usr/bin/brigade" keygen --out "$T/keys" >/dev/null 2>&1 && [ -s "$T/keys/node.pub" ] ||
    bad deb-runs "brigade keygen (postinst makes the identity with it) failed"
exe=$(sed -n 's/^ExecStart=\([^ ]*\).*/\1/p' "$T/root/lib/systemd/system/brigade-node.service")
if [ "$exe" = /usr/bin/brigade ] && grep -q '^User=brigade$' "$T/root/lib/systemd/system/brigade-node.service" &&
   grep -q '^EnvironmentFile=/etc/brigade/node.env$' "$T/root/lib/systemd/system/brigade-node.service"; then
    ok "deb-unit (ExecStart $exe as User=brigade, EnvironmentFile the conffile)"
else
    bad deb-unit "ExecStart '$exe'"
fi
[ "$(cat "$T/root/DEBIAN/conffiles")" = /etc/brigade/node.env ] || bad deb-unit "conffiles: $(cat "$T/root/DEBIAN/conffiles")"
for s in postinst prerm postrm; do
    sh -n "$T/root/DEBIAN/$s" 2>"$T/sh.err" || bad deb-scripts "$s: $(cat "$T/sh.err")"
done
grep -q 'adduser --system --group .*brigade' "$T/root/DEBIAN/postinst" && grep -q 'keygen' "$T/root/DEBIAN/postinst" &&
    ok "deb-scripts (postinst makes the brigade system user and its identity)" ||
    bad deb-scripts "postinst makes no brigade system user"

# the man page renders without warnings and names every option of node and solo
if command -v groff >/dev/null 2>&1; then
    gunzip -c "$T/root/usr/share/man/man1/brigade.1.gz" >"$T/brigade.1"
    warn=$(groff -man -ww -z "$T/brigade.1" 2>&1)
    groff -man -Tascii "$T/brigade.1" 2>/dev/null | col -b >"$T/man.txt" 2>/dev/null ||
        groff -man -Tascii -P-cbou "$T/brigade.1" >"$T/man.txt" 2>/dev/null
    absent=""; nopt=0
    for o in $({ "$BRIGADE" node --help; "$BRIGADE" solo --help; } | awk '/^  --/ { print $1 }' | sort -u); do
        nopt=$((nopt + 1))
        # the whole name: --save is not --save-every
        grep -qE -- "(^|[^a-z-])$o([^a-z-]|\$)" "$T/man.txt" || absent="$absent $o"
    done
    # no option read from --help is no check
    [ "$nopt" = 0 ] && absent=" (node and solo --help printed no option on stdout)"
    [ -z "$warn$absent" ] && ok "deb-manpage (renders; all $nopt options of node and solo --help in it)" ||
        bad deb-manpage "${warn:+groff: $warn }${absent:+options missing:$absent}"
else
    echo "skip - deb-manpage: groff not found"
fi
