#!/bin/sh
# Installs the Debian packages brigade needs to build, test and run its demo,
# when any is missing.  Used by `make test`, `make demo`, `make bench` and .ci/run;
# arguments name more packages (`make bench` adds python3-torch, the PyTorch
# the engine benchmark compares with).
PKGS="$* build-essential pkg-config libzmq3-dev libzstd-dev libsodium-dev libopenblas-dev zlib1g-dev python3 curl iproute2 nftables dataset-fashion-mnist fortunes"
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "brigade needs these Debian packages; run as root:" >&2
  echo "  apt-get install -y$missing" >&2
  exit 1
fi
echo "installing Debian packages:$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null && apt-get install -y -qq $missing >/dev/null || {
  echo "apt-get install -y$missing failed" >&2; exit 1; }
