#!/bin/sh
# Runs every unit test binary and every integration script under tests/,
# counts the cases and ends with "N passed, M failed".  A case that cannot
# run here says "skip - NAME: why"; those lines are shown, not counted.
# TESTS: the scripts to run after the unit tests (default every
# tests/integration/*.sh).  SAN_REPORTS=ThreadSanitizer (make tsan): every
# process the tests start writes its sanitizer reports to a folder (with
# the suppressions of tests/tsan/tsan.supp); a test with a report fails and
# the report is printed.
BUILD=${BUILD:-build}
export BRIGADE=${BRIGADE:-$BUILD/brigade}
# The unit tests run the engine as brigade's commands do: each engine thread
# calls single-threaded OpenBLAS (solo, node and sim set it themselves).
# OpenBLAS's own thread pool would also hide its hand-offs from
# ThreadSanitizer, which then reports them as races in the caller's buffers.
export OPENBLAS_NUM_THREADS=1
log=$(mktemp); pass=0; fail=0
sandir=""
if [ -n "$SAN_REPORTS" ]; then
  sandir=$(mktemp -d)
  export TSAN_OPTIONS="log_path=$sandir/report second_deadlock_stack=1 suppressions=$(pwd)/tests/tsan/tsan.supp $TSAN_OPTIONS"
fi
for t in "$BUILD"/tests/test_* ${TESTS:-tests/integration/*.sh}; do
  [ -x "$t" ] || [ -f "$t" ] || continue
  name=$(basename "$t")
  start=$(date +%s)
  case "$t" in *.sh) timeout 600 sh "$t" >"$log" 2>&1 ;; *) timeout 600 "$t" >"$log" 2>&1 ;; esac
  rc=$?
  p=$(grep -c '^ok - ' "$log"); f=$(grep -c '^FAIL - ' "$log")
  if [ "$rc" != 0 ] && [ "$f" = 0 ]; then f=1; echo "FAIL - $name exited $rc" >>"$log"; fi
  if [ -n "$sandir" ] && [ -n "$(ls "$sandir")" ]; then
    n=$(cat "$sandir"/* | grep -c "WARNING: $SAN_REPORTS")
    if [ "$n" != 0 ]; then
      f=$((f + 1)); echo "FAIL - $name: $n $SAN_REPORTS reports" >>"$log"
      cat "$sandir"/* >>"$log"
    fi
    rm -f "$sandir"/*
  fi
  pass=$((pass + p)); fail=$((fail + f))
  printf '%-28s %3d ok %3d failed  (%ds)\n' "$name" "$p" "$f" $(( $(date +%s) - start ))
  grep '^skip - ' "$log" | sed 's/^/    /'
  [ "$f" != 0 ] && sed 's/^/    /' "$log"
done
rm -f "$log"
[ -n "$sandir" ] && rm -rf "$sandir"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
