#!/bin/sh
# Runs the unit test binaries, the fuzz corpus replays and the integration
# scripts, counts the cases and ends with "N passed, M failed".  A case that
# cannot run here says "skip - NAME: why"; those lines are shown, not counted.
#
# The binaries ($BUILD/tests/test_* and fuzz_*) run side by side: most of
# their time is spent waiting on sockets and timeouts, not computing.  The
# scripts run one after another, as they start swarms of their own.
# TESTS: the scripts to run after the binaries (default every
# tests/integration/*.sh; `make check` names its few).  UNIT_JOBS: how many
# binaries at once (default all of them).  SAN_REPORTS=ThreadSanitizer (make tsan):
# every process the tests start writes its sanitizer reports to a folder of
# its test (with the suppressions of tests/tsan/tsan.supp); a test with a
# report fails and the report is printed.
BUILD=${BUILD:-build}
export BRIGADE=${BRIGADE:-$BUILD/brigade}
# The unit tests run the engine as brigade's commands do: each engine thread
# calls single-threaded OpenBLAS (solo, node and sim set it themselves).
# OpenBLAS's own thread pool would also hide its hand-offs from
# ThreadSanitizer, which then reports them as races in the caller's buffers.
export OPENBLAS_NUM_THREADS=1
JOBS=${UNIT_JOBS:-1000}
SAN_BASE=$TSAN_OPTIONS
out=$(mktemp -d); pass=0; fail=0
trap 'rm -rf "$out"' EXIT

# run_one NAME FILE: runs a test binary or script, its output in $out/NAME.log,
# its exit status in NAME.rc, its seconds in NAME.s, sanitizer reports in NAME.san/
run_one() {
  name=$1; t=$2; start=$(date +%s)
  if [ -n "$SAN_REPORTS" ]; then
    mkdir -p "$out/$name.san"
    TSAN_OPTIONS="log_path=$out/$name.san/report second_deadlock_stack=1 suppressions=$(pwd)/tests/tsan/tsan.supp $SAN_BASE"
    export TSAN_OPTIONS
  fi
  case "$t" in *.sh) timeout 600 sh "$t" >"$out/$name.log" 2>&1 ;; *) timeout 600 "$t" >"$out/$name.log" 2>&1 ;; esac
  echo $? >"$out/$name.rc"
  echo $(( $(date +%s) - start )) >"$out/$name.s"
}

# report NAME: counts a finished test's cases and prints its line (its log when it failed)
report() {
  name=$1; log=$out/$name.log; rc=$(cat "$out/$name.rc")
  p=$(grep -c '^ok - ' "$log"); f=$(grep -c '^FAIL - ' "$log")
  if [ "$rc" != 0 ] && [ "$f" = 0 ]; then f=1; echo "FAIL - $name exited $rc" >>"$log"; fi
  if [ -d "$out/$name.san" ] && [ -n "$(ls "$out/$name.san")" ]; then
    n=$(cat "$out/$name.san"/* | grep -c "WARNING: $SAN_REPORTS")
    if [ "$n" != 0 ]; then
      f=$((f + 1)); echo "FAIL - $name: $n $SAN_REPORTS reports" >>"$log"
      cat "$out/$name.san"/* >>"$log"
    fi
  fi
  pass=$((pass + p)); fail=$((fail + f))
  printf '%-28s %3d ok %3d failed  (%ds)\n' "$name" "$p" "$f" "$(cat "$out/$name.s")"
  grep '^skip - ' "$log" | sed 's/^/    /'
  [ "$f" != 0 ] && sed 's/^/    /' "$log"
}

# the binaries, JOBS at a time, reported in name order
bins=""
for t in "$BUILD"/tests/test_* "$BUILD"/tests/fuzz_*; do
  [ -x "$t" ] && bins="$bins $t"
done
running=0
for t in $bins; do
  run_one "$(basename "$t")" "$t" &
  running=$((running + 1))
  if [ "$running" -ge "$JOBS" ]; then wait; running=0; fi
done
wait
for t in $bins; do report "$(basename "$t")"; done

for t in ${TESTS:-tests/integration/*.sh}; do
  [ -f "$t" ] || continue
  run_one "$(basename "$t")" "$t"
  report "$(basename "$t")"
done
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
