#!/bin/sh
# simfuzz.sh FIRST LAST [extra brigade sim options]: runs `brigade sim` on a
# small swarm with random fault plans (kills later restarted, slowdowns,
# pauses, partitions later healed, rogues) for every seed in FIRST..LAST, modelled
# compute, random links and speeds; of every four seeds one with --split late,
# one with --split auto (the default: chosen before the first update), every
# fifth with evaluations (--eval-every 25: the run's end follows them).  Prints
# one line per failing seed with the command that replays it, then
# "simfuzz: N seeds, F failed".
# Exit 0 only when every seed completed its run with every invariant held.
BRIGADE=${BRIGADE:-build/brigade}
first=$1; last=$2; shift 2
extra="$*"
fails=0; n=0
for seed in $(seq "$first" "$last"); do
  n=$((n + 1))
  split=even; [ $((seed % 4)) = 3 ] && split=late; [ $((seed % 4)) = 1 ] && split=auto
  args="--nodes $((6 + seed % 5)) --stages $((2 + seed % 3)) --split $split --steps 200 --faults $((2 + seed % 6)) --seed $seed"
  [ $((seed % 5)) = 2 ] && args="$args --eval-every 25"
  args="$args --latency-ms 5:60 --bandwidth-mbit 10:200 --speed 1:4 --loss 0.002 --sim-seconds 2000 --wall-seconds 60 $extra"
  # shellcheck disable=SC2086
  out=$("$BRIGADE" sim $args 2>&1); rc=$?
  if [ "$rc" != 0 ]; then
    fails=$((fails + 1))
    echo "seed $seed failed (exit $rc): $(echo "$out" | grep -E 'violation|did not complete' | head -n 1)"
    echo "  replay: $BRIGADE sim $args"
  fi
done
echo "simfuzz: $n seeds, $fails failed"
[ "$fails" = 0 ]
