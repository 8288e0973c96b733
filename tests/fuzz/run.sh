#!/bin/sh
# Builds every tests/fuzz/fuzz_*.c with clang's libFuzzer, ASan and UBSan and
# runs each for FUZZ_SECONDS (default 30) from its seed corpus
# tests/fuzz/corpus/<name>/.  A target lists the sources it needs on a line
# "fuzz-sources: ..." (default compress/*.c).  Exits 0 with a message when
# clang or libFuzzer is missing; non-zero when a target crashes.
cd "$(dirname "$0")/../.." || exit 1
SECS=${FUZZ_SECONDS:-30}
OUT=${BUILD_FUZZ:-build-fuzz}
CLANG=${CLANG:-clang}
if ! command -v "$CLANG" >/dev/null 2>&1; then
  echo "fuzz: skipped: $CLANG not found (apt-get install clang)"; exit 0
fi
mkdir -p "$OUT"
probe="$OUT/probe.c"
printf '#include <stdint.h>\n#include <stddef.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n' >"$probe"
if ! "$CLANG" -fsanitize=fuzzer "$probe" -o "$OUT/probe" >/dev/null 2>&1; then
  echo "fuzz: skipped: $CLANG cannot build with -fsanitize=fuzzer (libFuzzer missing)"; exit 0
fi
PKGS="libzmq libzstd libsodium openblas zlib"
CF="-std=c11 -D_GNU_SOURCE -g -O1 -I. $(pkg-config --cflags $PKGS 2>/dev/null)"
LIBS="$(pkg-config --libs $PKGS 2>/dev/null) -lm -pthread"
status=0
for src in tests/fuzz/fuzz_*.c; do
  [ -f "$src" ] || continue
  name=$(basename "$src" .c); name=${name#fuzz_}
  srcs=$(sed -n 's/.*fuzz-sources:[[:space:]]*//p' "$src" | head -n 1)
  [ -n "$srcs" ] || srcs="compress/*.c"
  bin="$OUT/fuzz_$name"
  # shellcheck disable=SC2086
  if ! "$CLANG" $CF -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
      "$src" $srcs -o "$bin" $LIBS; then
    echo "fuzz: $name: build failed"; status=1; continue
  fi
  work="$OUT/corpus-$name"; mkdir -p "$work" "tests/fuzz/corpus/$name"
  echo "fuzz: $name for ${SECS}s"
  if "$bin" -max_total_time="$SECS" -max_len=8192 -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="$OUT/$name-" "$work" "tests/fuzz/corpus/$name" \
      >"$OUT/$name.log" 2>&1; then
    echo "fuzz: $name: ok, $(sed -n 's/^stat::number_of_executed_units: *//p' "$OUT/$name.log") runs, no crash"
  else
    echo "fuzz: $name: FAILED, see $OUT/$name.log and $OUT/$name-*"; tail -n 30 "$OUT/$name.log"; status=1
  fi
done
exit $status
