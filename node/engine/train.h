/* train.h: the training state of one stage (parameters, gradients, AdamW
 * moments, version) and the update step, shared by solo and the node
 * runtime. */
#ifndef BRIGADE_TRAIN_H
#define BRIGADE_TRAIN_H
#include <stdint.h>
#include "node/engine/model.h"
#include "node/engine/optim.h"

typedef struct {
    stage_t s;         /* layout of this stage */
    float *params;     /* s.nparams floats, one allocation with grads, m and v */
    float *grads;      /* accumulated gradients of the current update */
    float *m, *v;      /* AdamW moments */
    int64_t version;   /* optimizer updates applied so far */
    float last_norm;   /* largest unit gradient norm of the last update */
} stage_state_t;

/* Allocates and initialises stage `stage` of `nstages` from seed.  NULL with a
 * reason in err on a bad split or out of memory. */
stage_state_t *stage_state_new(const model_config_t *cfg, int stage, int nstages, uint64_t seed,
                               char *err, size_t errlen);
void stage_state_destroy(stage_state_t **self_p);
/* One optimizer update: clips per unit, applies AdamW for update `version`,
 * zeroes the gradients, sets last_norm and increments version (optim_step). */
void stage_state_step(stage_state_t *self, const optim_config_t *o);
/* The same with per-update adjustments (a learning-rate scale, a gradient
 * transform; optim_adjust_t); adj NULL is stage_state_step. */
void stage_state_step_adjusted(stage_state_t *self, const optim_config_t *o, const optim_adjust_t *adj);
#endif
