#!/bin/sh
# ab_engine.sh: the 1-thread training step of two (or more) versions of the
# engine, alternated step by step in one process (tests/bench/ab/).
#
#   sh tests/bench/ab_engine.sh [-m gpt-small,gpt-tiny] [-n STEPS] [-t THREADS] A B ...
#
# A, B, ...: git revisions of this repository (main, HEAD~2, a hash) or
# paths of source trees (a worktree).  Each is built with the Makefile's
# flags plus -fPIC into its own folder under $AB_WORK (default a temporary
# folder), linked with tests/bench/ab/step.c into one shared library, and
# tests/bench/ab/run.c alternates their steps: STEPS timed steps per model
# (default 30 for gpt-small, 5x that for smaller models).  Prints each
# build's fastest, 25th percentile and median step with its ratio to A's,
# and the load average before and after.  -t: the engine's threads (default
# 1; more are timed by the wall clock, which other load inflates).  A development tool: `make bench`
# does not run it.
set -eu
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
MODELS=gpt-small,gpt-tiny
STEPS=30
while getopts m:n:t: o; do
    case $o in
    m) MODELS=$OPTARG ;;
    n) STEPS=$OPTARG ;;
    t) export AB_THREADS=$OPTARG ;;
    *) echo "usage: ab_engine.sh [-m MODELS] [-n STEPS] [-t THREADS] A B ..." >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
[ $# -ge 2 ] || { echo "usage: ab_engine.sh [-m MODELS] [-n STEPS] [-t THREADS] A B ..." >&2; exit 2; }
WORK=${AB_WORK:-$(mktemp -d)}
PKGS="libzmq libzstd libsodium openblas zlib"
CC=${CC:-cc}

# s_build NAME SRC: $WORK/NAME.so from the tree SRC
s_build() {
    b=$WORK/build-$1
    make -s -C "$2" -j2 BUILD="$b" OPT="-march=x86-64 -mtune=generic -fPIC" "$b/libbrigade.a" >&2
    $CC -O2 -fPIC -std=c11 -D_GNU_SOURCE -I"$2" $(pkg-config --cflags openblas) \
        -c "$ROOT/tests/bench/ab/step.c" -o "$b/ab_step.o"
    $CC -shared -o "$WORK/$1.so" "$b/ab_step.o" "$b/libbrigade.a" \
        $(pkg-config --libs $PKGS) -lm -pthread -Wl,-Bsymbolic
}

libs=""
i=0
for v in "$@"; do
    i=$((i + 1))
    if [ -d "$v" ]; then
        src=$(cd "$v" && pwd)
    else
        src=$WORK/src-$i
        rm -rf "$src" && mkdir -p "$src"
        git archive "$v" | tar -x -C "$src"
    fi
    s_build "v$i" "$src"
    libs="$libs $WORK/v$i.so"
    echo "v$i = $v" 
done
$CC -O2 -std=c11 -D_GNU_SOURCE -o "$WORK/ab_run" "$ROOT/tests/bench/ab/run.c" -ldl
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for m in $(echo "$MODELS" | tr ',' ' '); do
    n=$STEPS
    [ "$m" = gpt-small ] || n=$((STEPS * 5))
    "$WORK/ab_run" "$m" "$n" $libs
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
