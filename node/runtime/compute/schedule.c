/* schedule.c: the schedule of the compute side (schedule.h): activation
 * slots and microbatch records, the data stage's issue and re-issue, forward,
 * backward and routing, the optimizer step and what follows it. */
#include "compress/codec.h"
#include "node/runtime/compute/internal.h"
#include "node/runtime/invariant.h"
#include "node/engine/staleness.h"

#define STALE_S 120.0        /* a non-data stage forgets a microbatch after this */
#define MAX_TRIES 20         /* a data-stage microbatch is given up after this many issues */
#define RECOMPUTE_AUTO_BYTES (256.0 * 1024 * 1024)   /* --recompute auto: on above this much of a small window's activations */

/* mb (attempt flags as an ACT carries them) counts as applied here: the
 * first attempt (1) by the ids remembered exactly, a re-issue by its
 * origin's floor too (applied.h) */
static int s_applied(const compute_t *c, uint64_t mb, uint32_t flags)
{
    return applied_has(&c->work.applied, mb, MB_ATTEMPT(flags) != 1);
}

/* Remembers that mb's gradient was accumulated here. */
static void s_mark_applied(compute_t *c, uint64_t mb)
{
    applied_mark(&c->work.applied, mb);
    compute_trace(c, TRACE_APPLY, mb, c->version);
}

static int s_slot_get(compute_t *c)
{
    for (int i = 0; i < c->work.npool; i++)
        if (!c->work.slot_used[i]) { c->work.slot_used[i] = 1; return i; }
    if (c->work.npool == POOL_MAX) return -1;
    acts_t *a = NULL;
    if (!c->cfg.modelled && !(a = c->work.recompute ? acts_new_inputs(&c->lay, c->shape.B, c->shape.T)
                                                    : acts_new(&c->lay, c->shape.B, c->shape.T))) return -1;
    c->work.pool[c->work.npool] = a;
    c->work.slot_used[c->work.npool] = 1;
    return c->work.npool++;
}

static mbrec_t *s_rec_new(compute_t *c)
{
    for (int i = 0; i < REC_MAX; i++)
        if (!c->work.rec[i].used) {
            memset(&c->work.rec[i], 0, sizeof c->work.rec[i]);
            c->work.rec[i].used = 1;
            c->work.rec[i].slot = -1;
            c->work.inflight++;
            INVARIANT(c->work.inflight <= REC_MAX);
            return &c->work.rec[i];
        }
    return NULL;
}

static mbrec_t *s_rec_find(compute_t *c, uint64_t mb)
{
    for (int i = 0; i < REC_MAX; i++)
        if (c->work.rec[i].used && c->work.rec[i].mb == mb) return &c->work.rec[i];
    return NULL;
}

static void s_rec_free(compute_t *c, mbrec_t *r)
{
    INVARIANT(r->used && c->work.inflight > 0);
    free(r->targets);
    r->targets = NULL;
    r->held = 0;
    if (r->slot >= 0) c->work.slot_used[r->slot] = 0;
    if (r->slot == c->work.redo_slot) c->work.redo_slot = -1;   /* the slot's next holder has another forward */
    stash_unref(&c->delay.stash, r->version, c->version);
    r->used = 0;
    c->work.inflight--;
}

/* The optimizer step, with the lr correction of --staleness (dc is solo's). */
static void s_step(compute_t *c)
{
    optim_adjust_t adj;
    stale_dc_t dc;
    stale_adjust(&adj, &dc, &c->o->optim, c->o->staleness & ~STALE_DC, (int)c->st->version, delay_now(c),
                 c->st->params, c->st->params, c->st->v);
    stage_state_step_adjusted(c->st, &c->o->optim, &adj);
}

/* Counts a finished backward; every `micro` of them, one optimizer step. */
static void s_after_backward(compute_t *c)
{
    if (++c->upd.bwd_count < c->o->micro) return;
    c->upd.bwd_count = 0;
    int64_t before = c->version;
    if (stash_before_update(&c->delay.stash, c->version, delay_version_weights(c)) < 0) { compute_fail(c, "out of memory for the weight stash"); return; }
    if (c->st) {
        s_step(c);
        if (!isfinite(c->st->last_norm)) { compute_fail(c, "a non-finite gradient (training diverged; lower --lr)"); return; }
        c->version = c->st->version;
        state_apply_avg(c);
    } else {
        c->version++;
    }
    INVARIANT(c->version > before);   /* versions only increase */
    c->upd.flops += 16.0 * (double)c->lay.nparams;
    compute_trace(c, TRACE_UPDATE, (uint64_t)c->stage, c->version);
    double loss = c->upd.loss_n ? c->upd.loss_sum / c->upd.loss_n : NAN;
    c->upd.loss_sum = 0;
    c->upd.loss_n = 0;
    compute_emit_update(c, loss);
    c->delay.max = c->delay.n = 0;
    c->delay.sum = 0;
    if (compute_last(c) && isfinite(loss)) c->upd.last_loss = loss;
    compute_send_self(c, MAIL_SELF);
    if (c->stage == 0 && c->o->eval_every > 0) {
        if (c->version >= c->o->steps && !c->closing.reopened) closing_issue_final(c);
        else if (c->version % c->o->eval_every == 0) eval_issue(c, 0);
    }
    state_maybe_backup(c);
    if (c->cfg.ckpt_path && c->cfg.ckpt_path[0] && c->version % c->o->save_every == 0) state_save_periodic(c);
    if (c->version % AVG_EVERY == 0) state_average(c);
}

/* The floating-point work of one forward of a microbatch at this stage. */
double schedule_fwd_flops(const compute_t *c)
{
    return 2.0 * (double)c->lay.nparams * (double)c->shape.B * (double)c->shape.T;
}

/* Whether this node recomputes (--recompute; auto: on where the
 * activations of 2 x stages microbatches in flight, the window the data
 * stage starts from, pass RECOMPUTE_AUTO_BYTES: a gpt-small stage at 4
 * stages, not a gpt-tiny one), and if so its one set of full activations.
 * Real compute only: the simulator's modelled tensors hold nothing.  Made
 * before any slot; 0, or -1 when out of memory. */
int schedule_setup_recompute(compute_t *c)
{
    int mode = c->o->recompute;
    double window = 2.0 * c->nstages * sizeof(float) * (double)acts_floats(&c->lay, c->shape.B, c->shape.T);
    c->work.recompute = !c->cfg.modelled && (mode == RECOMPUTE_ON || (mode == RECOMPUTE_AUTO && window > RECOMPUTE_AUTO_BYTES));
    c->work.redo_slot = -1;
    if (c->work.recompute && !(c->work.redo = acts_new(&c->lay, c->shape.B, c->shape.T))) return -1;
    return 0;
}

/* The weights record r's forward used, and so its backward uses. */
static const float *s_rec_weights(const compute_t *c, const mbrec_t *r)
{
    return stash_params(&c->delay.stash, r->version, c->version, delay_version_weights(c));
}

/* The activations a forward of record r runs in: its slot's, or under
 * --recompute the full ones, its slot's inputs copied in (NULL when
 * modelled). */
static acts_t *s_pass_acts(compute_t *c, const mbrec_t *r)
{
    acts_t *slot = c->work.pool[r->slot];
    if (!c->work.recompute || !slot) return slot;
    acts_copy_inputs(&c->lay, c->work.redo, slot);
    return c->work.redo;
}

/* The activations that hold record r's forward (NULL when modelled): under
 * --recompute, when another forward has run in them since, r's is run
 * again from its slot's inputs at the weights its forward used, the same
 * bits (model.h: the same inputs, weights and threads); its output too
 * when `out` (to send it), else only what its backward reads
 * (stage_recompute), its backward to follow at once. */
static acts_t *s_held_acts(compute_t *c, const mbrec_t *r, int out)
{
    if (!c->work.recompute) return c->work.pool[r->slot];
    if (c->work.redo_slot != r->slot) {
        (out ? stage_forward : stage_recompute)(&c->lay, s_rec_weights(c, r), s_pass_acts(c, r));
        c->work.redo_slot = r->slot;
        c->upd.flops += schedule_fwd_flops(c);
    }
    return c->work.redo;
}

/* The output of slot's last forward (under --recompute, of a training
 * slot: the full activations', which s_held_acts made hold it). */
static const float *s_slot_out(const compute_t *c, int slot)
{
    const acts_t *a = c->work.recompute && slot != EVAL_SLOT ? c->work.redo : c->work.pool[slot];
    return a ? a->out : NULL;
}

/* The peer of the next stage that work with these flags goes to, 0 none: an
 * evaluation's batch for the last stage to its peer of the lowest id (where
 * the evaluation is summed whole), the rest to the router's choice, not
 * `avoid` when another exists. */
uint64_t schedule_next_peer(compute_t *c, uint32_t flags, uint64_t avoid)
{
    if ((flags & ACT_FLAG_EVAL) && c->stage + 2 == c->nstages) {
        int n;
        const int *ix = view_stage_peers(c, c->stage + 1, &n);
        return router_pick_lowest(c->seen.view, ix, n, 0);
    }
    uint64_t to = view_pick(c, c->stage + 1, avoid);
    if (!to && avoid) to = view_pick(c, c->stage + 1, 0);
    return to;
}

/* Sends the output of slot to peer `to` of the next stage: to, or 0 when
 * out of memory. */
static uint64_t s_send_to(compute_t *c, uint64_t to, int slot, uint64_t mb, uint32_t flags, const uint8_t *targets)
{
    mail_t *m = compute_tensor_mail(c, WIRE_ACT, to, mb, s_slot_out(c, slot), c->shape.out_n, codecpick_id(c->o->codec));
    if (!m) return 0;
    m->aux = malloc(c->shape.targets_len);
    if (!m->aux) { mail_free(m); return 0; }
    if (targets) memcpy(m->aux, targets, c->shape.targets_len);
    else memset(m->aux, 0, c->shape.targets_len);
    m->aux_len = c->shape.targets_len;
    m->raw_bytes += c->shape.targets_n * sizeof(float);  /* the targets are a tensor too: 4 bytes each as raw fp32, 1, 2 or 4 on the wire */
    m->hdr.flags = flags;
    compute_out(c, m);
    return to;
}

/* Sends the output of slot to the next stage (schedule_next_peer).  Returns the
 * peer's id, 0 when there is none. */
uint64_t schedule_send_out(compute_t *c, int slot, uint64_t mb, uint32_t flags, const uint8_t *targets, uint64_t avoid)
{
    uint64_t to = schedule_next_peer(c, flags, avoid);
    return to ? s_send_to(c, to, slot, mb, flags, targets) : 0;
}

/* Sends record r's output on (its targets kept in the record) and remembers
 * where it went: 0.  With no peer of the next stage routable (but avoid),
 * the output is held and goes out when one is: -1; -2 when there is no
 * memory to keep its targets. */
static int s_send_act(compute_t *c, mbrec_t *r, const uint8_t *targets, uint64_t avoid)
{
    if (!r->targets) {
        if (!(r->targets = malloc(c->shape.targets_len))) return -2;
        memcpy(r->targets, targets, c->shape.targets_len);
    }
    uint32_t flags = ((uint32_t)(r->attempt & 0xff) << MB_ATTEMPT_SHIFT) | (r->ahead ? ACT_FLAG_AHEAD : 0) | (r->last ? ACT_FLAG_LAST : 0);
    uint64_t to = schedule_next_peer(c, flags, avoid);
    if (to) {
        s_held_acts(c, r, 1);   /* its output: recomputed when it was let go (--recompute) */
        to = s_send_to(c, to, r->slot, r->mb, flags, r->targets);
    }
    r->to = to;
    r->held = !to;
    if (!to) return -1;
    router_sent(&c->seen.router, to);
    return 0;
}

/* Forward of record r (inputs already in its slot); returns the
 * activations that hold it (NULL when modelled). */
static acts_t *s_forward(compute_t *c, mbrec_t *r)
{
    delay_choose_weights(c);
    r->version = c->version;
    stash_ref(&c->delay.stash, r->version);
    acts_t *a = s_pass_acts(c, r);
    if (a) stage_forward(&c->lay, delay_version_weights(c), a);
    c->work.redo_slot = r->slot;
    c->count.tokens += (uint64_t)c->shape.B * c->shape.T;
    c->count.fwd_done++;
    c->upd.flops += schedule_fwd_flops(c);
    r->t = compute_now(c);
    return a;
}

/* Backward of record r with dout, the gradient of its output (NULL on the
 * last stage); sends din upstream. */
static void s_backward(compute_t *c, mbrec_t *r, const float *dout)
{
    delay_note(c, r->version);
    acts_t *a = s_held_acts(c, r, 0);
    if (a) {
        float scale = 1.0f / ((float)c->shape.B * c->shape.T * c->o->micro);
        if (dout) memcpy(a->dout, dout, sizeof(float) * c->shape.out_n);
        stage_backward(&c->lay, s_rec_weights(c, r), c->st->grads, a, c->work.gs, scale);
    }
    s_mark_applied(c, r->mb);
    c->upd.flops += 2 * schedule_fwd_flops(c);
    if (c->stage > 0) {
        mail_t *m = compute_tensor_mail(c, WIRE_GRAD, r->from, r->mb, a ? a->din : NULL, c->shape.in_n, codecpick_id(c->o->grad_codec));
        if (m) {
            m->feedback = 1;
            m->hdr.flags = (uint32_t)(r->attempt & 0xff) << MB_ATTEMPT_SHIFT;
        }
        compute_out(c, m);
    }
}

/* The last stage finished a microbatch: count it (for the whole swarm's
 * progress), maybe update, and end the run when enough are done. */
static void s_completed_one(compute_t *c)
{
    c->count.completed++;
    s_after_backward(c);
    closing_last_stage_end(c);
}

/* The stage that computes the loss (the last, or the only one) trains r
 * through whole: forward, loss, backward; then r is done here. */
static void s_train_here(compute_t *c, mbrec_t *r)
{
    acts_t *a = s_forward(c, r);
    c->upd.loss_sum += a ? a->loss : 0;
    c->upd.loss_n++;
    s_backward(c, r, NULL);
    s_rec_free(c, r);
    s_completed_one(c);
}

/* Fills slot's inputs with the data stage's current batch. */
void schedule_load_batch(compute_t *c, int slot)
{
    acts_t *a = c->work.pool[slot];
    const model_config_t *model = &c->model;
    proto_put_targets(c->issue.targets_wire, c->issue.batch.targets, c->shape.targets_n, proto_target_width(model->V));
    if (!a) return;
    if (model->kind == MODEL_GPT) memcpy(a->tokens, c->issue.batch.tokens, sizeof(int) * (size_t)c->shape.B * c->shape.T);
    else memcpy(a->x, c->issue.batch.x, sizeof(float) * (size_t)c->shape.B * model->D);
}

static void s_retry_event(compute_t *c, const mbrec_t *old)
{
    char why[64];
    snprintf(why, sizeof why, "no gradient after %.1f s", compute_now(c) - old->t);
    metrics_event(c->cfg.metrics, "retry", "\"mb\":%llu,\"why\":%s", (unsigned long long)old->mb, why);
}

/* The data stage starts a new microbatch (or re-issues `old`, or one
 * carried across a relayout: schedule_issued_restore).  -1 when no
 * activation slot (or record) is free; a re-issue reuses its record's
 * slot, so it needs no free one. */
int schedule_issue(compute_t *c, mbrec_t *old)
{
    /* the old attempt's slot is the new attempt's: taking another first
     * would stall re-issue for good once every slot is in flight */
    int slot = old && old->slot >= 0 ? old->slot : s_slot_get(c);
    if (slot < 0) return -1;
    mbrec_t *r = old ? old : s_rec_new(c);
    if (!r) { c->work.slot_used[slot] = 0; return -1; }
    const issued_t *carry = !old && c->issue.ncarried ? &c->issue.carried[--c->issue.ncarried] : NULL;
    uint64_t avoid = 0;
    if (old) {
        avoid = old->to;
        stash_unref(&c->delay.stash, old->version, c->version);
        view_peer_returned(c, old->to, 0, 0);
        c->count.retries++;
        s_retry_event(c, old);
    } else {
        r->cursor = carry ? carry->cursor : c->issue.cursor;
    }
    r->slot = slot;
    r->from = 0;
    if (carry) {
        r->mb = carry->mb;
        r->tries = carry->tries;
        c->count.retries++;
    } else if (!old) {
        /* the id stays across re-issues: every node applies a microbatch at most once */
        r->mb = (c->issue.mb_origin << APPLIED_SEQ_BITS) | (++c->issue.mb_seq & ((1ULL << APPLIED_SEQ_BITS) - 1));
        compute_trace(c, TRACE_ISSUE, r->mb, c->version);
    }
    r->tries++;
    /* FIFO completion puts its backward after bwd_count + the others in flight (delay_budget_room) */
    r->ahead = c->upd.bwd_count + (c->work.inflight - 1) >= c->o->micro;
    /* the update waits on its last K (stages) most: a flush at its end lasts their round trip */
    r->last = !r->ahead && c->upd.bwd_count + (c->work.inflight - 1) >= c->o->micro - c->nstages;
    r->attempt = r->tries;
    uint64_t cur = r->cursor;
    /* the first data-stage node reads the stream solo reads (shard 0 of 1: parity);
     * the k-th reads shard k of k+1, another random stream of the same data */
    if (c->issue.data) data_next_train(c->issue.data, &c->issue.batch, c->cfg.shard, c->cfg.shard + 1, &cur);
    else cur++;
    if (!old && !carry) c->issue.cursor = cur;
    schedule_load_batch(c, slot);
    acts_t *a = c->work.pool[slot];
    if (c->nstages == 1) {
        /* a single stage: forward, loss and backward here */
        if (a) memcpy(a->targets, c->issue.batch.targets, sizeof(int) * c->shape.targets_n);
        s_train_here(c, r);
    } else {
        s_forward(c, r);
        if (s_send_act(c, r, c->issue.targets_wire, avoid) == -2) {
            /* out of memory to hold its output: given up (the cursor has moved past it), counted as lost */
            c->count.lost++;
            compute_trace(c, TRACE_LOST, r->mb, c->version);
            metrics_event(c->cfg.metrics, "retry", "\"mb\":%llu,\"why\":\"given up: no memory to hold its output\"",
                          (unsigned long long)r->mb);
            s_rec_free(c, r);
        }
    }
    return 0;
}

/* Sends the outputs held for want of a next-stage peer. */
void schedule_send_held(compute_t *c)
{
    /* sending makes and frees no record: once the records in use are seen, none is left */
    for (int i = 0, left = c->work.inflight; i < REC_MAX && left > 0; i++) {
        mbrec_t *r = &c->work.rec[i];
        if (!r->used) continue;
        left--;
        if (!r->held) continue;
        if (s_send_act(c, r, r->targets, 0) < 0) return;
        r->t = compute_now(c);
    }
}

/* An activation m is for this stage and of its input's size. */
static int s_input_fits(const compute_t *c, const mail_t *m)
{
    return m->n == c->shape.in_n && m->hdr.stage == c->stage;
}

/* Copies a tensor mail's values into slot's input (its length was checked by the network side for the stage it had). */
int schedule_take_input(compute_t *c, int slot, const mail_t *m)
{
    if (!s_input_fits(c, m)) return -1;
    if (c->work.pool[slot] && m->x) memcpy(c->work.pool[slot]->in, m->x, sizeof(float) * c->shape.in_n);
    return 0;
}

/* Decodes an ACT mail's targets (its frame 1, proto_put_targets) into a's
 * targets; the network side checked their length and range. */
void schedule_take_targets(compute_t *c, acts_t *a, const mail_t *m)
{
    int ok = proto_get_targets(a->targets, m->aux, m->aux_len, c->shape.targets_n, proto_target_width(c->model.V), c->model.V);
    INVARIANT(ok == 0);
}

/* Issue attempt a is older than attempt b, both as the flags carry them
 * (8 bits, MB_ATTEMPT): serial-number order modulo 256.  The data stage
 * issues a microbatch at most MAX_TRIES (< 128) times, so two attempts of
 * one microbatch are never 128 or more apart. */
static int s_attempt_older(unsigned a, unsigned b)
{
    unsigned d = (b - a) & 0xffu;
    return d != 0 && d < 128;
}

/* Tells the sender of an ACT that its microbatch was applied here already. */
static void s_send_dup(compute_t *c, uint64_t to, uint64_t mb, uint32_t attempt_flags)
{
    mail_t *m = mail_new(MAIL_SEND);
    if (!m) return;
    wire_hdr_init(&m->hdr, WIRE_GRAD);
    m->hdr.mb = mb;
    m->hdr.stage = (uint16_t)(c->stage - 1);
    m->hdr.wversion = (uint32_t)c->version;
    m->hdr.flags = GRAD_FLAG_DUP | (attempt_flags & (0xffu << MB_ATTEMPT_SHIFT));
    m->peer = to;
    m->raw_bytes = WIRE_HDR_LEN;
    compute_out(c, m);
}

/* An activation from the previous stage: forward (and, on the last stage,
 * loss and backward at once).  -1 when it must wait (no slot free). */
int schedule_on_act(compute_t *c, const mail_t *m)
{
    if (m->hdr.flags & ACT_FLAG_EVAL) return eval_on_act(c, m);
    if (closing_closed_to_training(c)) return 0;   /* the run is complete: only its final evaluation is still wanted */
    if (!s_input_fits(c, m)) {   /* before a held attempt of its microbatch is let go for it */
        compute_drop(c, "tensor for another stage or size", m->peer);
        return 0;
    }
    if (s_applied(c, m->hdr.mb, m->hdr.flags)) { s_send_dup(c, m->peer, m->hdr.mb, m->hdr.flags); return 0; }
    mbrec_t *old = s_rec_find(c, m->hdr.mb);
    unsigned attempt = MB_ATTEMPT(m->hdr.flags);
    if (old && (attempt == (unsigned)old->attempt || s_attempt_older(attempt, (unsigned)old->attempt))) {
        /* a late copy of an attempt the data stage has re-issued since, or a second copy of the one held
         * here (a re-issue raises the attempt; taking a copy would send the gradient to whoever sent it):
         * the one held here stays */
        compute_drop(c, "a copy of an attempt held here, or an older one", m->peer);
        return 0;
    }
    if (old) {
        /* a re-issue of a microbatch held here: the new attempt replaces the old one */
        view_peer_returned(c, old->to, 0, 0);
        s_rec_free(c, old);
    }
    int slot = s_slot_get(c);
    if (slot < 0) return -1;
    schedule_take_input(c, slot, m);   /* it fits */
    mbrec_t *r = s_rec_new(c);
    if (!r) { c->work.slot_used[slot] = 0; return -1; }
    r->mb = m->hdr.mb;
    r->slot = slot;
    r->from = m->peer;
    r->attempt = (int)attempt;
    r->ahead = (m->hdr.flags & ACT_FLAG_AHEAD) != 0;
    r->last = (m->hdr.flags & ACT_FLAG_LAST) != 0;
    acts_t *a = c->work.pool[slot];
    if (compute_last(c)) {
        if (a) schedule_take_targets(c, a, m);
        s_train_here(c, r);
    } else {
        s_forward(c, r);
        if (s_send_act(c, r, m->aux, 0) == -2) s_rec_free(c, r);  /* cannot hold it: the data stage re-issues it */
    }
    return 0;
}

/* A microbatch applied here no more (applied further on, or refused):
 * upstream learns the same, and the data stage counts it skipped. */
static void s_skip(compute_t *c, mbrec_t *r)
{
    if (c->stage > 0) s_send_dup(c, r->from, r->mb, (uint32_t)(r->attempt & 0xff) << MB_ATTEMPT_SHIFT);
    else { c->count.skipped++; compute_trace(c, TRACE_SKIP, r->mb, c->version); }
    s_rec_free(c, r);
}

/* A gradient from the next stage: its microbatch's backward (din sent
 * upstream) and maybe an update; a DUP or a refused one skips it. */
void schedule_on_grad(compute_t *c, const mail_t *m)
{
    mbrec_t *r = s_rec_find(c, m->hdr.mb);
    if (!r || r->to != m->peer || r->held || (int)MB_ATTEMPT(m->hdr.flags) != (r->attempt & 0xff)) {
        compute_drop(c, "gradient of an unknown microbatch", m->peer);   /* re-issued or forgotten */
        return;
    }
    int dup = (m->hdr.flags & GRAD_FLAG_DUP) != 0;   /* applied further on already: nothing to apply here */
    if (!dup && (m->n != c->shape.out_n || m->hdr.stage != c->stage)) {   /* the record stays, its peer still owing it */
        compute_drop(c, "tensor for another stage or size", m->peer);
        return;
    }
    /* work the peer held across a silence of its own (a pause) says little of its or the pipeline's
     * speed: the router and the window take it only when they have no measure yet */
    double turn = compute_now(c) - r->t;
    int held_silent = r->t < m->silent_until;
    view_peer_returned(c, r->to, turn, held_silent);
    if (dup) {
        s_skip(c, r);
        return;
    }
    if (c->o->stash == STASH_2BW && !stash_holds(&c->delay.stash, r->version, c->version)) {
        /* 2bw folded its forward's weights away (a later stage fed by several data-stage nodes, or peers of
         * different speeds, can see more delay than the budget): a backward on other weights would be wrong,
         * a third version is what 2bw does not keep */
        c->delay.stash_refused++;
        s_skip(c, r);
        return;
    }
    if (c->stage == 0 && !(held_silent && c->issue.turn_mean > 0)) {
        c->issue.turn_mean = c->issue.turn_mean > 0 ? 0.9 * c->issue.turn_mean + 0.1 * turn : turn;
        c->issue.turn_dev = 0.9 * c->issue.turn_dev + 0.1 * fabs(turn - c->issue.turn_mean);
        if (c->issue.auto_window) window_on_turn(&c->issue.win, compute_now(c), turn, c->work.inflight, delay_window_held(c));
    }
    s_backward(c, r, m->x);
    s_rec_free(c, r);
    s_after_backward(c);
}

/* The data stage's microbatches in flight into out (room for REC_MAX):
 * their number (0 at other stages). */
int schedule_issued_save(const compute_t *c, issued_t *out)
{
    int n = 0;
    for (int i = 0; c->stage == 0 && i < REC_MAX; i++) {
        const mbrec_t *r = &c->work.rec[i];
        if (r->used) out[n++] = (issued_t){ .mb = r->mb, .cursor = r->cursor, .tries = r->tries };
    }
    return n;
}

/* The data stage's microbatches saved by schedule_issued_save, after a
 * relayout dropped their records (their work in the old layout is lost):
 * each is issued again, with its id and data, before any new one
 * (schedule_issue), and counts as in flight until then. */
void schedule_issued_restore(compute_t *c, const issued_t *in, int n)
{
    c->issue.ncarried = 0;
    for (int i = n - 1; i >= 0; i--) c->issue.carried[c->issue.ncarried++] = in[i];
}

/* Re-issues (data stage) or forgets (other stages) microbatches whose
 * gradient is overdue or whose next-stage peer is gone. */
void schedule_timeouts(compute_t *c)
{
    double now = compute_now(c);
    /* while a stage has no peer the swarm waits: nothing can complete, nothing is re-issued */
    if (c->stage == 0 && !view_all_stages_served(c)) return;
    /* the deadline comes from measured turnarounds; before the first, from the heartbeats' round trips */
    double rtt;
    view_rtt(c, &rtt, NULL);
    double deadline = c->issue.turn_mean > 0 ? 4 * c->issue.turn_mean + 8 * c->issue.turn_dev
                      : rtt > 0 ? 5.0 + 8.0 * (c->nstages - 1) * rtt * 1e-3 : 30.0;
    if (deadline < 5.0) deadline = 5.0;
    /* records are only freed here, never made: once the used ones at the start are seen, none is left */
    for (int i = 0, left = c->work.inflight; i < REC_MAX && left > 0; i++) {
        mbrec_t *r = &c->work.rec[i];
        if (!r->used) continue;
        left--;
        int gone = 0;
        if (r->to) {
            const view_peer_t *p = peer_view_find(c->seen.view, r->to);
            gone = !p || p->health == PEER_GONE || p->stage != c->stage + 1;
        }
        if (c->stage == 0) {
            if (r->held) continue;   /* waits for a route */
            if ((gone || now - r->t > deadline) && r->tries >= MAX_TRIES) {
                c->count.lost++;
                compute_trace(c, TRACE_LOST, r->mb, c->version);
                metrics_event(c->cfg.metrics, "retry", "\"mb\":%llu,\"why\":\"given up after %d tries\"", (unsigned long long)r->mb, r->tries);
                view_peer_returned(c, r->to, 0, 0);
                s_rec_free(c, r);
            } else if (gone || now - r->t > deadline) {
                if (c->closing.active) {
                    continue;   /* beyond the run's last, not issued again: in flight until the node ends */
                } else if (schedule_issue(c, r) < 0) {
                    continue;   /* no slot: it is tried again later; the records after it may still be given up */
                }
            }
        } else if (gone && r->targets && !c->closing.active) {
            /* its output went to a peer now gone: to another peer of that stage (held when there is
             * none), so the microbatch goes on at once instead of after the data stage's deadline */
            uint64_t was = r->to;
            view_peer_returned(c, was, 0, 0);
            int rc = s_send_act(c, r, r->targets, was);
            if (rc == 0) {
                r->t = now;   /* the new peer's turnaround counts from here */
                c->count.retries++;
                metrics_event(c->cfg.metrics, "retry", "\"mb\":%llu,\"why\":\"its next-stage peer is gone: sent to another\"",
                              (unsigned long long)r->mb);
            } else if (rc == -2) {
                s_rec_free(c, r);
            }
        } else if (gone || now - r->t > STALE_S) {
            view_peer_returned(c, r->to, 0, 0);
            s_rec_free(c, r);
        }
    }
}

/* The data stage may start new microbatches now. */
int schedule_may_issue(const compute_t *c)
{
    if (c->stage != 0 || !view_all_stages_served(c) || c->closing.active) return 0;
    /* those carried across a relayout were in flight: a drain or the run's end waits for them as for those */
    if (!c->issue.ncarried && (c->balance.drain_to >= 0 || closing_steps_covered(c))) return 0;
    if (c->o->schedule == SCHED_GPIPE) return c->work.inflight == 0;
    return c->work.inflight < c->issue.max_inflight && delay_budget_room(c);
}

/* The schedule's invariants, checked on each tick that looks at the
 * records (a pass over them and the stash's slots): the records in use are
 * the in-flight count, each holds an activation slot of its own and one
 * reference to the weight version its forward used, and no version held is
 * newer than the live one. */
void schedule_check(const compute_t *c)
{
    unsigned char slot_held[POOL_MAX] = {0};
    int used = 0, refs = 0;
    for (int i = 0; i < REC_MAX; i++) {
        const mbrec_t *r = &c->work.rec[i];
        if (!r->used) continue;
        used++;
        INVARIANT(r->slot >= 0 && r->slot < c->work.npool && c->work.slot_used[r->slot] && !slot_held[r->slot]);
        slot_held[r->slot] = 1;
        INVARIANT(r->version <= c->version);
    }
    INVARIANT(used == c->work.inflight);
    const stash_t *st = &c->delay.stash;
    for (int i = 0; i < st->nslots; i++) {
        INVARIANT(st->slot[i].refs > 0 && st->slot[i].version <= c->version);
        refs += st->slot[i].refs;
    }
    INVARIANT(refs == used);
    INVARIANT(c->upd.bwd_count >= 0 && c->upd.bwd_count < c->o->micro);
    INVARIANT(c->delay.fwd_for == -1 || c->delay.fwd_for == c->delay.fwd_chosen);
}
