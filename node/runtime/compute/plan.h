/* plan.h: the run's split at the compute side (plan.c): --split auto's
 * choice at the data stage before its first update, and its adoption. */
#ifndef BRIGADE_RUNTIME_COMPUTE_PLAN_H
#define BRIGADE_RUNTIME_COMPUTE_PLAN_H
#include "node/runtime/compute.h"

typedef struct {
    plan_t split;                 /* the run's split (options.h) */
    double wait_from;             /* data stage, choosing: when every stage first had a peer (0: not yet) */
    int probes, probing;          /* choosing: forwards timed so far; the step just run was one */
    double probe_best;            /* their shortest, seconds */
    double seek_until;            /* laid out anew in a split of precedence: until then, the stage's state is taken
                                     from a peer of the stage that shows up trained on it (0: not looking) */
} plan_choice_t;

/* Each contract at its definition in plan.c. */
int plan_late_split_helps(const compute_t *c, int need, int holds);
void plan_adopt(compute_t *c, plan_t plan, const char *how);
int plan_tensor_split_ok(compute_t *c, const mail_t *m);
int plan_step(compute_t *c);
void plan_seek_state(compute_t *c);
#endif
