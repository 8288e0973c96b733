/* invariant.h: checks of the runtime's own invariants (the state machines
 * of the compute side, the stash, the router, the window, the pending
 * queues, the network side and its peer table).  They are on in every build, release included, so each is
 * cheap where it runs.  A broken one is a bug in this program, never bad
 * input: bad network input is dropped and counted before it can reach one.
 *
 * A failure prints "brigade: invariant violation at FILE:LINE: EXPR" to
 * stderr and aborts.  Under `brigade sim` the process ends with SIGABRT;
 * tests/sim/simfuzz.sh reports the seed with the command that replays it. */
#ifndef BRIGADE_RUNTIME_INVARIANT_H
#define BRIGADE_RUNTIME_INVARIANT_H

#define INVARIANT(cond) ((cond) ? (void)0 : invariant_fail(#cond, __FILE__, __LINE__))

/* Reports the broken invariant expr (at file:line) and aborts. */
_Noreturn void invariant_fail(const char *expr, const char *file, int line);
#endif
