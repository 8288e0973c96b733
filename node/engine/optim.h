/* optim.h: AdamW with decoupled weight decay, warmup + cosine learning rate,
 * and gradient-norm clipping per unit (embedding, each block, head, each MLP
 * layer).  Clipping per unit rather than per stage keeps a run independent of
 * how the model is split, and needs nothing from other stages. */
#ifndef BRIGADE_OPTIM_H
#define BRIGADE_OPTIM_H
#include "node/engine/model.h"

typedef struct {
    float lr;       /* peak learning rate */
    float wd;       /* decoupled weight decay (matrices only) */
    float beta1, beta2, eps;
    int warmup;     /* updates of linear warmup */
    int total;      /* updates of the run (cosine decay to lr_min_frac * lr) */
    float lr_min_frac;
    float clip;     /* max gradient L2 norm per unit; 0 = no clipping */
} optim_config_t;

/* Defaults: lr 1e-3, wd 0.01, betas (0.9, 0.95), eps 1e-8, warmup 10, clip 1.0, min 0.1. */
void optim_defaults(optim_config_t *o);
/* The learning rate of update t (0-based). */
float optim_lr(const optim_config_t *o, int t);
/* Clips grads unit by unit; returns the largest unit norm before clipping. */
float optim_clip(const stage_t *s, float *grads, float clip);
/* One AdamW update of params (n = s->nparams floats) with moments m, v at
 * update index t (0-based); the caller zeroes grads afterwards. */
void optim_adamw(const stage_t *s, const optim_config_t *o, float *params, const float *grads,
                 float *m, float *v, int t);
#endif
