/* delay.h: weight delay at the compute side (delay.c): the weight stash,
 * the weights each version's forwards use, the measured delay, and the
 * budget and window it allows. */
#ifndef BRIGADE_RUNTIME_COMPUTE_DELAY_H
#define BRIGADE_RUNTIME_COMPUTE_DELAY_H
#include "node/runtime/compute.h"
#include "node/runtime/stash.h"

typedef struct {
    stash_t stash;                /* the weights of the versions forwards in flight used */
    float *fwd_w;                 /* --staleness predict: the forward weights of version fwd_for */
    int64_t fwd_for;              /* version fwd_w holds (-1: forwards run at the live weights) */
    int64_t fwd_chosen;           /* version whose forward weights are chosen (-1: none yet) */
    double ewma;                  /* measured weight delay in updates (smoothed; -1: none yet) */
    int max, n;                   /* largest delay and count of the backwards since the last update */
    double sum;                   /* their sum */
    uint64_t stash_mismatch;      /* backwards on weights their forward did not use (none: 2bw refuses them) */
    uint64_t stash_refused;       /* 2bw: backwards refused, their forward's weights folded away */
} delay_t;

/* Each contract at its definition in delay.c. */
int delay_max_delay(const compute_t *c);
int delay_budget_room(const compute_t *c);
int delay_window_held(const compute_t *c);
void delay_window_reset(compute_t *c);
int delay_budget(const compute_t *c);
int delay_now(const compute_t *c);
const float *delay_version_weights(const compute_t *c);
void delay_choose_weights(compute_t *c);
int delay_budget_holds(const compute_t *c);
int delay_micro_needed(const compute_t *c);
void delay_note(compute_t *c, int64_t v);
int delay_inflight_need(int K, double rtt_ms, double per_mb);
int delay_window_need(compute_t *c);
void delay_auto_window(compute_t *c);
#endif
