/* optim.h: AdamW or Muon with decoupled weight decay, warmup + cosine
 * learning rate, and gradient-norm clipping per unit (embedding, each block,
 * head, each MLP layer).  Clipping per unit rather than per stage keeps a run
 * independent of how the model is split, and needs nothing from other stages.
 *
 * Muon (OPTIM_MUON) updates the matrices of the gpt blocks (param_tensor_t
 * .rows > 0) with orthogonalized Nesterov momentum and everything else
 * (embeddings, head, layernorms, biases, the MLP) with AdamW.  For such a
 * matrix W (r x c), with g its clipped gradient and lr the scheduled rate:
 *     m <- momentum m + g;   u = g + momentum m
 *     O = orthogonalize(u)                          (muon.h)
 *     W <- W (1 - lr wd) - lr 0.2 sqrt(max(r, c)) O
 * The factor 0.2 sqrt(max(r, c)) gives the step the root-mean-square size of
 * an AdamW step, so --lr, --wd and the schedule mean the same for both.  The
 * matrix's v buffer holds its last step per unit rate, 0.2 sqrt(max(r, c)) O,
 * which is what weight prediction (staleness.h) extrapolates along.  A stale
 * gradient moves an orthogonalized step less than an AdamW one, whose
 * per-element normalization lets a few stale coordinates take full-size
 * steps: a pipeline with delayed gradients converges much closer to its
 * synchronous run with Muon (node/README.md, "Staleness").
 *
 * optim_step is the update the trainers run: one fused pass per unit (norm,
 * clip, AdamW, Muon, zeroing of the gradients).  optim_clip + optim_adamw +
 * optim_muon are the plain reference it is tested against. */
#ifndef BRIGADE_OPTIM_H
#define BRIGADE_OPTIM_H
#include "node/engine/model.h"

enum { OPTIM_ADAMW = 0, OPTIM_MUON = 1 };

typedef struct {
    int kind;       /* OPTIM_ADAMW or OPTIM_MUON */
    float lr;       /* peak learning rate */
    float wd;       /* decoupled weight decay (matrices only) */
    float beta1, beta2, eps;   /* AdamW */
    float momentum; /* Muon */
    int warmup;     /* updates of linear warmup */
    int total;      /* updates of the run (cosine decay to lr_min_frac * lr) */
    float lr_min_frac;
    float clip;     /* max gradient L2 norm per unit; 0 = no clipping */
} optim_config_t;

/* What one update may change beyond the run's optim_config_t, for a caller
 * that corrects for weight delay (or any other per-stage, per-update policy).
 * Zero-initialise and set what is used; lr_scale 0 is read as 1. */
typedef struct {
    float lr_scale;   /* multiplies optim_lr() for this update; 0 or 1 = as scheduled */
    /* Optional gradient transform, called once per unit before its norm is
     * taken: grads[0, n) are the unit's gradients, which start at float
     * `offset` of the stage's buffers (params, m, v at the same offset); it
     * may rewrite them in place.  Pure per unit: it must not touch other units. */
    void (*grad_fn)(void *ctx, const stage_t *s, int unit, float *grads, size_t offset, size_t n);
    void *ctx;        /* grad_fn's argument */
} optim_adjust_t;

/* Defaults: adamw, lr 1e-3, wd 0.01, betas (0.9, 0.95), eps 1e-8, momentum
 * 0.95, warmup 10, clip 1.0, min 0.1. */
void optim_defaults(optim_config_t *o);
/* Parses "adamw" or "muon" into *kind: 0, or -1 for another name. */
int optim_parse_kind(const char *text, int *kind);
/* "adamw" or "muon". */
const char *optim_kind_name(int kind);
/* 1 when Muon updates tensor pt under o (a block matrix and o->kind muon). */
int optim_is_muon(const optim_config_t *o, const param_tensor_t *pt);
/* The learning rate of update t (0-based). */
float optim_lr(const optim_config_t *o, int t);

/* One optimizer update of a stage's buffers (s->nparams floats each) at
 * update index t (0-based), unit by unit: adj->grad_fn (if any), the unit's
 * gradient L2 norm, clipping to o->clip, AdamW and Muon (o->kind) with
 * learning rate optim_lr(o, t) * adj->lr_scale, and the unit's gradients set
 * to 0.  adj may be NULL.  Returns the largest unit norm before clipping
 * (NaN when a unit's norm is NaN: the caller can tell a diverged update).
 * Uses up to s->threads threads of its own, joined before it returns (one
 * Muon matrix per thread, each with single-threaded BLAS); the result does
 * not depend on the thread count.  Muon's scratch is allocated per update;
 * out of memory for it is fatal (a message, then abort). */
float optim_step(const stage_t *s, const optim_config_t *o, const optim_adjust_t *adj, int t,
                 float *params, float *grads, float *m, float *v);

/* Reference, used by the tests: clips grads unit by unit (norm summed in
 * double, in order); returns the largest unit norm before clipping. */
float optim_clip(const stage_t *s, float *grads, float clip);
/* 1 when an optimizer state may be stepped from: params and m finite, v
 * finite and >= 0 (n floats each; a state that came over the network is
 * checked before it replaces ours), else 0. */
int optim_state_ok(const float *params, const float *m, const float *v, size_t n);
/* Reference, used by the tests: one AdamW update of params with moments m, v
 * at update index t, of every tensor Muon does not own (optim_is_muon); grads
 * are left as they are. */
void optim_adamw(const stage_t *s, const optim_config_t *o, float *params, const float *grads,
                 float *m, float *v, int t);
/* Reference, used by the tests: one Muon update (muon_orthogonalize_ref) of
 * the tensors Muon owns under o; grads are left as they are.  0, or -1 when
 * out of memory. */
int optim_muon(const stage_t *s, const optim_config_t *o, float *params, const float *grads,
               float *m, float *v, int t);
#endif
