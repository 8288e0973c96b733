/* staleness.h: delay compensation for asynchronous pipelines.
 *
 * In an asynchronous pipeline a stage computes the gradient of a microbatch
 * at the weights its forward used and applies it to the live weights some
 * updates later: with a weight delay of D updates, update t applies a
 * gradient taken at version t - D.  The functions here are the corrections a
 * stage may apply, as pure math on one stage's buffers (parameters,
 * gradients and AdamW moments share the layout of stage_t), so that
 * `brigade solo --delay` and the node runtime run the same code.
 *
 * A correction is a set of flags (--staleness, part of the run config):
 *
 *   predict  the forward (and so the backward) of version t runs at the
 *            weights predicted D updates ahead along the optimizer's step,
 *            so that the gradient is taken about where it will be applied
 *            (the look-ahead of Nesterov-style asynchronous pipelines and of
 *            weight prediction).  stale_forward_weights().
 *   ramp     the delay is let in as the learning rate comes down: none
 *            over the first stale_ramp_updates() (a synchronous pipeline),
 *            then a quarter of each update's microbatches (at least one)
 *            run one update late, and
 *            whole updates of delay come in as the rate decays, until the
 *            whole budget is used at its floor.
 *            stale_budget_micro(); the swarm meets it by narrowing its
 *            window (a delayed stage hurts most while the rate is high).
 *   lr       PipeMare-style learning-rate rescheduling: the rate of a stage
 *            with delay D is divided by (1 + D), annealed back to the
 *            scheduled rate over the run.  stale_lr_scale().
 *   dc       DC-ASGD's first-order delay compensation of the gradient, with
 *            the curvature estimated from the gradient and AdamW's second
 *            moment.  stale_dc_grad().
 *
 * The optimizer step takes lr and dc through its optim_adjust_t hooks
 * (stale_adjust() fills one), so a trainer calls, per stage and update t:
 *   e = stale_budget_micro(...)              how stale this update may be
 *   stale_forward_weights(w_v, ...)          the weights of version v's passes
 *   stale_adjust(&adj, &dc, ...)             then stage_state_step_adjusted()
 *
 * A stage needs to know only its own steady-state delay D in updates (the
 * updates between a forward and the step that applies its gradient: 0 on
 * the last stage of a 1F1B pipeline) and the run's flags. */
#ifndef BRIGADE_STALENESS_H
#define BRIGADE_STALENESS_H
#include <stddef.h>
#include "node/engine/model.h"
#include "node/engine/optim.h"

enum {
    STALE_PREDICT = 1,  /* forward at the weights predicted D updates ahead */
    STALE_RAMP = 2,     /* delay budget rising from 0 to D */
    STALE_LR = 4,       /* learning rate / (1 + D), annealed over the run */
    STALE_DC = 8,       /* delay-compensated gradient */
    STALE_ALL = 15
};
#define STALE_DEFAULT (STALE_PREDICT | STALE_RAMP)
#define STALE_DC_LAMBDA 2.0f   /* strength of the dc term */

/* Parses "none" or flag names joined by '+' ("predict+ramp") into *flags.
 * Returns 0, or -1 for an unknown or repeated name. */
int stale_parse(const char *text, int *flags);
/* Writes the canonical name of flags ("none", "predict+ramp", ...) to buf. */
void stale_name(int flags, char *buf, size_t len);

/* Updates at the start of a ramp with no delay at all: 3 x the
 * learning-rate warmup (at least 1). */
int stale_ramp_updates(const optim_config_t *o);

/* The delay budget of update t (0-based) of a stage whose steady-state
 * delay is `delay` updates, in microbatches of `micro` per update: how many
 * of the update's microbatches, counted with their extra updates of delay,
 * may be late (delay x micro without STALE_RAMP).  With STALE_RAMP: 0 before
 * stale_ramp_updates(o), then f x delay rounded to whole updates, times
 * micro, at least one in four of the update's microbatches (at least 1), where f is the share of the cosine decay the rate has
 * done (0 at the peak rate, 1 at its floor o->lr_min_frac x o->lr; 1 without
 * a decay).  The swarm's data stage keeps at most micro + budget
 * microbatches in flight. */
int stale_budget_micro(const optim_config_t *o, int flags, int t, int delay, int micro);

/* The delay in updates of microbatch m (0-based) of an update whose budget
 * is `budget` microbatches (stale_budget_micro): budget / micro for each, one
 * more for the first budget % micro (in a pipeline, the ones started before
 * the previous update). */
static inline int stale_micro_delay(int budget, int micro, int m)
{
    return budget / micro + (m < budget % micro ? 1 : 0);
}

/* The updates a budget of `budget` microbatches lets the latest microbatch
 * be late: ceil(budget / micro). */
static inline int stale_budget_updates(int budget, int micro)
{
    return (budget + micro - 1) / micro;
}

/* The factor on the scheduled learning rate of update t (0-based) for a stage
 * with delay `delay`: with STALE_LR and delay > 0, 1 / (1 + delay)^(1 - t /
 * o->total) (t capped at o->total); otherwise 1. */
float stale_lr_scale(const optim_config_t *o, int flags, int t, int delay);

/* Writes into out (s->nparams floats; must not alias params) the weights a
 * forward pass of version `version` runs with (and its backward, which uses
 * the same weights), for a stage with steady-state delay `delay`, given its
 * live params and AdamW moments m, v after `version` updates and the run's
 * optimizer settings o.  With STALE_PREDICT, delay > 0 and version > 0: the
 * live weights advanced `delay` steps along the current step per unit rate u
 * (AdamW's bias-corrected m_hat / (sqrt(v_hat) + eps); for a matrix Muon
 * updates, its last step, which optim_step keeps in v), that is params x prod(1 - lr_i wd)
 * (decayed tensors only) - sum(lr_i) x u, lr_i being the rates updates
 * version .. version + delay - 1 will step with (optim_lr x stale_lr_scale);
 * otherwise a copy of params. */
void stale_forward_weights(float *out, const stage_t *s, const optim_config_t *o, int flags, const float *params,
                           const float *m, const float *v, int version, int delay);

/* What stale_dc_grad needs: the weights the passes ran at, the live ones,
 * AdamW's second moment (all of the stage's layout) and its bias correction. */
typedef struct {
    const float *w_live, *w_used, *v;
    float c2;       /* 1 / (1 - beta2^version) */
    float eps;      /* AdamW's eps */
} stale_dc_t;

/* optim_adjust_t's gradient hook for STALE_DC (ctx: a stale_dc_t): corrects
 * grads[0, n), the accumulated gradients (before clipping) that start at
 * float `offset` of the stage's buffers, as DC-ASGD does:
 * g += STALE_DC_LAMBDA g*g / (sqrt(v c2) + eps) (w_live - w_used). */
void stale_dc_grad(void *ctx, const stage_t *s, int unit, float *grads, size_t offset, size_t n);

/* Fills adj (and dc, which adj then points to: keep it alive until the
 * step) for update t (0-based, the stage's version) of a stage with delay
 * `delay` whose passes ran at w_used while its live weights are w_live, v
 * being its AdamW second moment: lr_scale = stale_lr_scale(); with STALE_DC,
 * delay > 0, t > 0 and w_used != w_live, grad_fn = stale_dc_grad.
 * Everything else zero: no change to the step. */
void stale_adjust(optim_adjust_t *adj, stale_dc_t *dc, const optim_config_t *o, int flags, int t, int delay,
                  const float *w_live, const float *w_used, const float *v);
#endif
