/* eval.h: evaluation at the compute side (eval.c): validation batches
 * issued through the pipeline, forwarded, summed and reported (the rounds
 * being summed are the compute side's evalsum_t). */
#ifndef BRIGADE_RUNTIME_COMPUTE_EVAL_H
#define BRIGADE_RUNTIME_COMPUTE_EVAL_H
#include "node/runtime/compute.h"
#include "node/runtime/evalsum.h"

/* Each contract at its definition in eval.c. */
int eval_slot(compute_t *c);
void eval_flush(compute_t *c, double before);
int eval_issue(compute_t *c, uint32_t flags);
void eval_batch(compute_t *c, uint32_t round, int final, int nval, int i, const acts_t *a);
int eval_on_act(compute_t *c, const mail_t *m);
void eval_stale(compute_t *c, double now);
#endif
