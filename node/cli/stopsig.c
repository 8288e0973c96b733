/* stopsig.c: signals that stop a run at its next boundary (stopsig.h). */
#include "node/cli/stopsig.h"
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

/* The only file-scope state: a signal handler has nowhere else to put it. */
static atomic_int s_caught;          /* the last signal caught, 0 none */
static atomic_uintptr_t s_target;    /* the stopsig_target_t a signal calls, 0 none */

static void s_call_target(void)
{
    const stopsig_target_t *t = (const stopsig_target_t *)atomic_load(&s_target);
    if (t && t->fn) t->fn(t->arg);
}

static void s_on_signal(int sig)
{
    atomic_store(&s_caught, sig);
    s_call_target();
}

void stopsig_install(void)
{
    signal(SIGINT, s_on_signal);
    signal(SIGTERM, s_on_signal);
    signal(SIGHUP, s_on_signal);
}

int stopsig_caught(void)
{
    return atomic_load(&s_caught);
}

void stopsig_watch(const stopsig_target_t *t)
{
    atomic_store(&s_target, (uintptr_t)t);
    if (t && atomic_load(&s_caught)) s_call_target();
}

void stopsig_reason(int sig, char *err, size_t errlen)
{
    snprintf(err, errlen, "interrupted by %s", sig == SIGINT ? "SIGINT (Ctrl-C)" : sig == SIGHUP ? "SIGHUP" : "SIGTERM");
}

int stopsig_status(int sig)
{
    return 128 + (sig ? sig : SIGTERM);
}

const char *stopsig_end_status(int status)
{
    return status == 0 ? "ok" : status > 128 ? "interrupted" : "error";
}
