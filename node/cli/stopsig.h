/* stopsig.h: how a signal stops a long command (`brigade node`, `brigade
 * solo`).  SIGINT (Ctrl-C), SIGTERM and SIGHUP (its terminal closed) ask it
 * to stop at its next boundary; it then writes its `end` event with status
 * "interrupted" and the reason stopsig_reason gives, and exits with
 * stopsig_status: 128 + the signal, as a shell reports it.  The state a
 * signal handler sets is process-wide and lives only in stopsig.c. */
#ifndef BRIGADE_STOPSIG_H
#define BRIGADE_STOPSIG_H
#include <stddef.h>

/* What a signal calls besides recording itself, e.g. node_interrupt.  fn
 * runs in the signal handler: it must be async-signal-safe. */
typedef struct {
    void (*fn)(void *arg);   /* the call */
    void *arg;               /* its argument */
} stopsig_target_t;

/* Installs the handler for SIGINT, SIGTERM and SIGHUP.  From then on these
 * signals no longer end the process: the caller checks stopsig_caught at
 * its boundaries (or is told through stopsig_watch). */
void stopsig_install(void);
/* The last signal caught, 0 none.  Async-signal-safe. */
int stopsig_caught(void);
/* From now on each signal also calls t->fn(t->arg); when one was caught
 * already, calls it at once.  NULL: no call.  t must outlive the watch
 * (stopsig_watch(NULL) ends it). */
void stopsig_watch(const stopsig_target_t *t);
/* "interrupted by SIGINT (Ctrl-C)" (or SIGTERM, SIGHUP) into err. */
void stopsig_reason(int sig, char *err, size_t errlen);
/* The exit status of a run sig stopped: 128 + sig (SIGTERM's when sig is 0). */
int stopsig_status(int sig);
/* The `end` event's status for a run's exit status: "ok" (0), "interrupted"
 * (above 128: stopsig_status), else "error". */
const char *stopsig_end_status(int status);
#endif
