#!/bin/sh
# build-deb.sh: the brigade Debian package, built with dpkg-deb (`make deb`).
#
#   sh examples/debian/build-deb.sh BINARY OUTDIR [VERSION]
#
# Packs BINARY (a portable build: `make` targets baseline x86-64 and picks
# the fast kernels at run time) as /usr/bin/brigade with its man page, the
# systemd unit of examples/brigade-node.service, /etc/brigade/node.env (a
# conffile) and maintainer scripts that make the `brigade` system user and
# its identity.  Depends names the runtime libraries only.  Writes
# OUTDIR/brigade_VERSION_ARCH.deb and prints its path.
set -eu
if [ $# -lt 2 ]; then
    echo "usage: build-deb.sh BINARY OUTDIR [VERSION]" >&2
    exit 2
fi
BIN=$1 OUT=$2 VERSION=${3:-0.1.0}
HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/../.." && pwd)
MAINTAINER=${MAINTAINER:-brigade developers <brigade@example.org>}
for tool in dpkg-deb gzip; do
    command -v $tool >/dev/null 2>&1 || { echo "build-deb.sh: $tool not found (apt-get install dpkg gzip)" >&2; exit 1; }
done
[ -x "$BIN" ] || { echo "build-deb.sh: $BIN: no such executable (run make)" >&2; exit 1; }
ARCH=$(dpkg --print-architecture 2>/dev/null || echo amd64)
ROOT=$(mktemp -d "${TMPDIR:-/tmp}/brigade-deb.XXXXXX")
chmod 0755 "$ROOT"
trap 'rm -rf "$ROOT"' EXIT INT TERM

install -d "$ROOT/DEBIAN" "$ROOT/usr/bin" "$ROOT/usr/share/man/man1" "$ROOT/lib/systemd/system" \
    "$ROOT/etc/brigade" "$ROOT/usr/share/doc/brigade"
install -m 0755 "$BIN" "$ROOT/usr/bin/brigade"
if command -v strip >/dev/null 2>&1; then strip --strip-unneeded "$ROOT/usr/bin/brigade"; fi

# the man page, its OPTIONS from the binary's own help
sh "$HERE/manpage.sh" "$BIN" "$VERSION" | gzip -9n > "$ROOT/usr/share/man/man1/brigade.1.gz"

# the unit of examples/, for /usr/bin, without its manual install notes
{
    echo "# brigade-node.service (installed by the brigade package): a volunteer node"
    echo "# as the brigade user, state in /var/lib/brigade.  Edit /etc/brigade/node.env,"
    echo "# then: systemctl enable --now brigade-node.  See brigade(1)."
    echo
    sed -n '/^\[Unit\]/,$p' "$TOP/examples/brigade-node.service" | sed 's|/usr/local/bin/brigade|/usr/bin/brigade|g'
} > "$ROOT/lib/systemd/system/brigade-node.service"
chmod 0644 "$ROOT/lib/systemd/system/brigade-node.service"
install -m 0644 "$HERE/node.env" "$ROOT/etc/brigade/node.env"
gzip -9n < "$TOP/README.md" > "$ROOT/usr/share/doc/brigade/README.md.gz"

for s in postinst prerm postrm; do install -m 0755 "$HERE/$s" "$ROOT/DEBIAN/$s"; done
echo /etc/brigade/node.env > "$ROOT/DEBIAN/conffiles"
SIZE=$(du -sk --exclude=DEBIAN "$ROOT" | cut -f1)
cat > "$ROOT/DEBIAN/control" <<CONTROL
Package: brigade
Version: $VERSION
Architecture: $ARCH
Maintainer: $MAINTAINER
Installed-Size: $SIZE
Depends: libc6 (>= 2.34), libzmq5, libzstd1, libsodium23, libopenblas0, zlib1g, adduser
Section: science
Priority: optional
Description: train one neural network across volunteer machines
 brigade cuts a model into pipeline stages served by volunteer machines on
 ordinary home links: activations and gradients travel between them
 quantized and zstd-compressed over CurveZMQ, with an asynchronous
 weight-stashing schedule and peers that may come and go.
 .
 This package holds the brigade command, its manual page and the
 brigade-node systemd service, which runs a node as the brigade system user.
 One binary runs on every x86-64 CPU: it picks its fast kernels at run time.
CONTROL

mkdir -p "$OUT"
DEB="$OUT/brigade_${VERSION}_${ARCH}.deb"
dpkg-deb --root-owner-group --build "$ROOT" "$DEB" >/dev/null
echo "$DEB"
