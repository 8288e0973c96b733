/* eval.c: evaluation at the compute side (eval.h): validation
 * batches issued through the pipeline, forwarded, summed and reported. */
#include "node/runtime/compute/internal.h"

#define EVAL_STALE_S 20.0     /* an evaluation round none of whose batches came for this long is reported as it is */

static void s_emit_eval(compute_t *c, const evalsum_round_t *r);

/* The evaluation's slot (an evaluation batch is forwarded and sent on at
 * once: a closing run's training keeps every other slot in flight, which
 * held back its final evaluation for good).  -1 when out of memory. */
int eval_slot(compute_t *c)
{
    if (!c->cfg.modelled && !c->work.pool[EVAL_SLOT] && !(c->work.pool[EVAL_SLOT] = acts_new(&c->lay, c->shape.B, c->shape.T))) return -1;
    return EVAL_SLOT;
}

/* Reports the evaluation rounds whose last batch came before `before`, the
 * oldest first, as they are (their other batches were lost, or the run ends). */
void eval_flush(compute_t *c, double before)
{
    evalsum_round_t r;
    while (evalsum_stale(&c->evals, before, &r)) s_emit_eval(c, &r);
}

/* Evaluation microbatch ids: round, batches in the round, index. */
#define EVAL_MB(round, nval, idx) (((uint64_t)(round) << 32) | ((uint64_t)(nval) << 16) | (uint64_t)(idx))

/* The data stage sends the validation batches through the pipeline, forward
 * only, with the weights of this moment (flags: ACT_FLAG_FINAL or 0), or
 * evaluates them here when it is the only stage (in EVAL_SLOT).  0, or -1
 * when out of memory (nothing sent). */
int eval_issue(compute_t *c, uint32_t flags)
{
    if (!c->issue.data) return 0;
    int nval = opts_eval_batches(c->o, data_val_batches(c->issue.data, c->shape.B));
    int slot = eval_slot(c);
    if (slot < 0) return -1;
    acts_t *a = c->work.pool[slot];
    uint32_t round = (uint32_t)c->version;
    for (int i = 0; i < nval; i++) {
        data_val_batch(c->issue.data, &c->issue.batch, i);
        schedule_load_batch(c, slot);
        if (a) stage_forward(&c->lay, compute_params(c), a);
        c->upd.flops += schedule_fwd_flops(c);
        if (c->nstages == 1) eval_batch(c, round, 0, nval, i, a);
        else schedule_send_out(c, slot, EVAL_MB(round, nval, i), ACT_FLAG_EVAL | flags, c->issue.targets_wire, 0);
    }
    return 0;
}

static void s_emit_eval(compute_t *c, const evalsum_round_t *r)
{
    if (r->n == 0) return;
    double vl = r->loss / r->n;
    if (c->model.kind == MODEL_MLP)
        metrics_event(c->cfg.metrics, "eval", "\"version\":%u,\"val_loss\":%.9g,\"val_acc\":%.9g,\"batches\":%d", r->round,
                      vl, r->correct / ((double)r->n * c->shape.B), r->n);
    else
        metrics_event(c->cfg.metrics, "eval", "\"version\":%u,\"val_loss\":%.9g,\"batches\":%d", r->round, vl, r->n);
}

/* Batch i of an evaluation round, evaluated in a: summed, and every round
 * it completes (or pushes out, partial) reported.  A final round complete
 * ends the run when its count is complete too (else notes it). */
void eval_batch(compute_t *c, uint32_t round, int final, int nval, int i, const acts_t *a)
{
    evalsum_round_t out[2];
    int k = evalsum_add(&c->evals, round, final, nval, i, a ? a->loss : 0, a ? a->correct : 0, compute_now(c), out);
    int final_whole = k > 0 && out[k - 1].final && out[k - 1].n == out[k - 1].nval;
    int ending = final_whole && closing_run_complete(c);
    if (ending) eval_flush(c, INFINITY);   /* the rounds before it first */
    for (int j = 0; j < k; j++) s_emit_eval(c, &out[j]);
    if (ending) closing_finish(c);
    else if (final_whole) c->closing.final_early_t = out[k - 1].first_t;   /* its first batch: the nearest to its sending */
}

/* An evaluation microbatch: forward only; the last stage accumulates. */
int eval_on_act(compute_t *c, const mail_t *m)
{
    uint32_t round = (uint32_t)(m->hdr.mb >> 32);
    int nval = (int)((m->hdr.mb >> 16) & 0xffff), i = (int)(m->hdr.mb & 0xffff);
    if (i >= nval) { compute_drop(c, "evaluation batch out of its round's count", m->peer); return 0; }
    int slot = eval_slot(c);
    if (slot < 0) return -1;
    if (schedule_take_input(c, slot, m) < 0) { compute_drop(c, "tensor for another stage or size", m->peer); return 0; }
    acts_t *a = c->work.pool[slot];
    c->upd.flops += schedule_fwd_flops(c);
    if (compute_last(c)) {
        if (a) {
            schedule_take_targets(c, a, m);
            stage_forward(&c->lay, compute_params(c), a);
        }
        eval_batch(c, round, (m->hdr.flags & ACT_FLAG_FINAL) != 0, nval, i, a);
    } else {
        if (a) stage_forward(&c->lay, compute_params(c), a);
        schedule_send_out(c, slot, m->hdr.mb, m->hdr.flags & (ACT_FLAG_EVAL | ACT_FLAG_FINAL), m->aux, 0);
    }
    return 0;
}

/* Evaluation rounds none of whose batches came for EVAL_STALE_S (the rest
 * were lost) are reported as they are. */
void eval_stale(compute_t *c, double now)
{
    eval_flush(c, now - EVAL_STALE_S);
}
