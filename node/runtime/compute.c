/* compute.c: the compute side of a node (compute.h): its entry points
 * (mail in, ticks, steps), the object's making and unmaking, mail out, and
 * reports.  The parts live in compute/ (internal.h): the peer table as seen
 * here, the schedule, the end of a run, evaluation, state and moves, the
 * split choice and weight delay. */
#include "node/runtime/compute/internal.h"
#include "compress/codec.h"
#include "node/runtime/invariant.h"
#include "node/engine/modelfile.h"
#include "node/engine/rng.h"

#define ALONE_S 600.0         /* a node that had peers and has seen none alive this long gives up */

/* The compute side fails for `why`: it ends at once (status 1). */
void compute_fail(compute_t *c, const char *why)
{
    snprintf(c->end.why, sizeof c->end.why, "%s", why);
    c->end.status = 1;
    c->end.done = COMPUTE_ENDED;
    c->phase = PH_DONE;
}

/* Queues mail for the network side (sent at the next flush). */
void compute_out(compute_t *c, mail_t *m)
{
    if (!m) return;
    m->q.next = NULL;
    if (c->outbox.tail) c->outbox.tail->q.next = &m->q;
    else c->outbox.head = m;
    c->outbox.tail = m;
}

void compute_flush(compute_t *c)
{
    mail_t *m = c->outbox.head;
    c->outbox.head = c->outbox.tail = NULL;
    while (m) {
        mail_t *next = (mail_t *)m->q.next;
        m->q.next = NULL;
        c->cfg.post(c->cfg.post_arg, m);
        m = next;
    }
}

/* A message refused by the compute side: counted, logged. */
void compute_drop(compute_t *c, const char *why, uint64_t from)
{
    c->count.drops++;
    char id[9];
    node_id_short(from, id);
    metrics_event(c->cfg.metrics, "drop", "\"why\":%s,\"from\":%s", why, id);
}

/* Tells the trace hook (TRACE_*), when there is one. */
void compute_trace(compute_t *c, int what, uint64_t mb, int64_t v)
{
    if (c->cfg.obs.trace) c->cfg.obs.trace(c->cfg.obs.arg, what, mb, v);
}

/* A SEND of n floats (copied from x; NULL when modelled) to peer. */
mail_t *compute_tensor_mail(compute_t *c, int type, uint64_t peer, uint64_t mb, const float *x, size_t n, int codec)
{
    mail_t *m = mail_new(MAIL_SEND);
    if (!m) return NULL;
    if (!c->cfg.modelled && x) {
        m->x = malloc(sizeof(float) * n);
        if (!m->x) { mail_free(m); return NULL; }
        memcpy(m->x, x, sizeof(float) * n);
    }
    m->n = n;
    m->codec = codec;
    m->block = codec_block_for_rows(codec, n / ((size_t)c->shape.B * (size_t)c->shape.T));   /* blocks within one position */
    wire_hdr_init(&m->hdr, (wire_type_t)type);
    m->hdr.mb = mb;
    m->hdr.wversion = (uint32_t)c->version;
    m->hdr.stage = (uint16_t)(type == WIRE_ACT ? c->stage + 1 : type == WIRE_GRAD ? c->stage - 1 : c->stage);
    m->peer = peer;
    m->raw_bytes = WIRE_HDR_LEN + n * sizeof(float);
    return m;
}

/* Microbatches per second this node adds to its stage's throughput (0:
 * not measured yet), which rebalancing evens out (balance.c): forwards per
 * busy second; at the data stage per busy or held second, as the delay
 * budget holds a data-stage node back between updates for a share of its
 * time (so the data stage gets more nodes than its compute alone would say). */
double compute_rate(const compute_t *c)
{
    return c->count.busy_s >= 0.5 ? c->count.fwd_done / (c->count.busy_s + c->count.held_s) : 0;
}

/* Tells the network side this node's stage, plan, sizes and progress (mail of `kind`). */
void compute_send_self(compute_t *c, int kind)
{
    mail_t *m = mail_new(kind);
    if (!m) return;
    self_info_t *s = &m->self;
    s->stage = c->stage;
    s->plan = c->plan.split;
    s->in_n = c->shape.in_n;
    s->out_n = c->shape.out_n;
    s->nparams = c->lay.nparams;
    s->version = c->version;
    s->rate = (float)compute_rate(c);
    s->completed = c->count.completed;
    s->loss = c->upd.last_loss;
    s->done = c->end.done;
    s->status = c->end.status;
    compute_out(c, m);
}

/* The `update` event and the owner's report after an optimizer update
 * (loss: the update's mean at the last stage, NaN none). */
void compute_emit_update(compute_t *c, double loss)
{
    const net_counters_t *k = c->cfg.net;
    uint64_t sent = atomic_load(&k->bytes_sent), raw = atomic_load(&k->bytes_sent_raw);
    int stash = stash_versions(&c->delay.stash, c->version);
    double rtt;   /* the mean round trip to the neighbouring stages' peers */
    view_rtt(c, &rtt, NULL);
    metrics_event(c->cfg.metrics, "update",
                  "\"version\":%lld,\"tokens\":%llu,\"loss\":%.9g,\"bytes_sent\":%llu,\"bytes_sent_raw\":%llu,"
                  "\"bytes_recv\":%llu,\"bytes_sent_state\":%llu,\"stash\":%d,\"inflight\":%d,\"drops\":%llu,\"retries\":%llu,"
                  "\"delay\":%g,\"delay_max\":%d,\"delay_budget\":%d,\"window\":%d,\"micro_needed\":%d,\"stash_mismatch\":%llu,"
                  "\"stash_refused\":%llu,\"rtt_ms\":%.1f,\"queued\":%.2f",
                  (long long)c->version, (unsigned long long)c->count.tokens,
                  compute_last(c) ? loss : NAN,
                  (unsigned long long)sent, (unsigned long long)raw,
                  (unsigned long long)atomic_load(&k->bytes_recv), (unsigned long long)atomic_load(&k->bytes_sent_state),
                  stash, c->work.inflight,
                  (unsigned long long)(atomic_load(&k->drops) + c->count.drops), (unsigned long long)c->count.retries,
                  c->delay.n ? c->delay.sum / c->delay.n : NAN, c->delay.max, delay_budget(c),
                  c->stage == 0 ? c->issue.max_inflight : 0, delay_micro_needed(c), (unsigned long long)c->delay.stash_mismatch,
                  (unsigned long long)c->delay.stash_refused, rtt > 0 ? rtt : NAN, c->stage == 0 && c->issue.auto_window ? c->issue.win.queued : NAN);
    if (!c->cfg.obs.report) return;
    node_report_t r = {0};
    r.stage = c->stage;
    r.nstages = c->nstages;
    r.peers = 1 + c->seen.live;
    r.version = c->version;
    r.tokens = c->count.tokens;
    r.last = compute_last(c);
    r.loss = r.last ? loss : view_loss(c);
    r.elapsed_s = compute_now(c) - c->t0;
    r.bytes_sent = sent;
    r.bytes_sent_raw = raw;
    r.bytes_recv = atomic_load(&k->bytes_recv);
    r.drops = atomic_load(&k->drops) + c->count.drops;
    r.stash = stash;
    r.inflight = c->work.inflight;
    r.rtt_ms = rtt;
    c->cfg.obs.report(c->cfg.obs.arg, &r);
}

/* A line for the user, when the observer takes them. */
void compute_say(compute_t *c, const char *line)
{
    if (c->cfg.obs.say) c->cfg.obs.say(c->cfg.obs.arg, line);
}

/* The queue a tensor waits in: gradients first, then the activations of
 * ACT_FLAG_LAST and evaluations, then the others an update under way waits
 * for, then those of ACT_FLAG_AHEAD (a shared stage serves first what keeps
 * a data stage's budget from holding it: the end of an update waits for its
 * last microbatches' round trip; an evaluation should see the weights of
 * when it was asked for, not those of a queue's wait later). */
static pending_t *s_queue_of(compute_t *c, const mail_t *m)
{
    if (m->hdr.type == WIRE_GRAD) return &c->work.grads;
    if (m->hdr.flags & (ACT_FLAG_LAST | ACT_FLAG_EVAL)) return &c->work.last;
    return m->hdr.flags & ACT_FLAG_AHEAD ? &c->work.ahead : &c->work.acts;
}

/* The first of the activation queues (in s_queue_of's order) that holds
 * one; the last of them when none does. */
static pending_t *s_next_acts(compute_t *c)
{
    if (pending_peek(&c->work.last)) return &c->work.last;
    return pending_peek(&c->work.acts) ? &c->work.acts : &c->work.ahead;
}

void compute_on_mail(compute_t *c, mail_t *m)
{
    switch (m->kind) {
    case MAIL_TENSOR:
        if (c->phase == PH_DONE) break;
        if (!plan_tensor_split_ok(c, m)) { compute_drop(c, "a tensor of another split of the run", m->peer); break; }
        if (m->hdr.type == WIRE_AVG) { if (state_on_avg(c, m)) return; break; }
        if (m->hdr.type == WIRE_ACT && (m->hdr.flags & ACT_FLAG_EVAL) && (m->hdr.flags & ACT_FLAG_FINAL) && closing_run_complete(c))
            closing_final_passing(c);
        if (pending_push(s_queue_of(c, m), m) == 0) return;  /* kept */
        compute_drop(c, "compute queue full", m->peer);
        break;
    case MAIL_STATE_REQ:
        if (c->phase == PH_RUN && m->hdr.stage == c->stage) state_send(c, m->peer, STATE_FLAG_REPLY);
        break;
    case MAIL_VIEW:
        view_take(c, m->view);
        m->view = NULL;
        if (c->seen.view) plan_adopt(c, c->seen.view->plan, "said by a peer");
        plan_seek_state(c);
        state_check_donor(c);
        break;
    case MAIL_STATE: state_on_fetched(c, m); break;
    case MAIL_STOP:
        if (c->phase != PH_DONE) closing_finish(c);
        break;
    default: break;
    }
    mail_free(m);
}

/* A node cut off from every peer for ALONE_S (after it had some) stops:
 * the run has ended without it hearing so, or the swarm is out of reach. */
static void s_check_alone(compute_t *c, double now)
{
    int live = 0;
    for (int i = 0; c->seen.view && i < c->seen.view->n && !live; i++) live = c->seen.view->p[i].health != PEER_GONE;
    if (live) c->last_company = now;
    else if (c->last_company > 0 && now - c->last_company > ALONE_S) {
        char why[128];
        snprintf(why, sizeof why, "no live peer for %.0f s: the run has ended or the swarm is out of reach", ALONE_S);
        compute_fail(c, why);
    }
}

double compute_tick(compute_t *c)
{
    double now = compute_now(c);
    INVARIANT((c->phase == PH_DONE) == (c->end.done != COMPUTE_RUNNING));
    closing_check(c);
    if (c->phase != PH_DONE && c->nstages > 1) s_check_alone(c, now);
    if (c->phase == PH_RUN && now >= c->issue.next_timeout) {
        schedule_check(c);
        schedule_timeouts(c);
        schedule_send_held(c);
        if (c->issue.auto_window && c->stage == 0) delay_auto_window(c);
        compute_send_self(c, MAIL_SELF);
        c->issue.next_timeout = now + 0.2;
    }
    if (c->phase == PH_RUN) closing_data_stage_end(c, now);
    if (c->phase == PH_RUN) balance_drained(c);
    closing_last_stage_end(c);
    closing_final_wait_end(c, now);
    eval_stale(c, now);
    if (c->phase == PH_RUN && c->closing.final_wait_until == 0 && now >= c->state.next_move) {
        balance_consider_move(c);
        c->state.next_move = now + 5.0;
    }
    return c->issue.next_timeout < c->state.next_move ? c->issue.next_timeout : c->state.next_move;
}

int compute_idle(const compute_t *c)
{
    if (c->phase != PH_RUN || c->state.fetching || (!plan_chosen(c->plan.split) && c->stage == 0) || c->balance.drain_to >= 0)
        return COMPUTE_IDLE_OTHER;
    if (c->stage != 0 || !view_all_stages_served(c) || c->closing.active || closing_steps_covered(c)) return COMPUTE_IDLE_INPUT;
    if (c->o->schedule == SCHED_GPIPE) return c->work.inflight ? COMPUTE_IDLE_HELD : COMPUTE_IDLE_INPUT;
    if (!delay_budget_room(c)) return COMPUTE_IDLE_HELD;
    return c->work.inflight >= c->issue.max_inflight ? COMPUTE_IDLE_WINDOW : COMPUTE_IDLE_INPUT;
}

/* The data stage's time held by the delay budget (compute_rate): held now or not. */
static void s_note_held(compute_t *c, int held)
{
    double now = compute_now(c);
    if (held && c->count.held_from == 0) c->count.held_from = now;
    if (!held && c->count.held_from > 0) {
        c->count.held_s += now - c->count.held_from;
        c->count.held_from = 0;
    }
}

int compute_step(compute_t *c, double *flops)
{
    c->upd.flops = 0;
    int did = 0;
    if (c->phase == PH_RUN) {
        mail_t *m;
        pending_t *q;
        if ((m = pending_pop(&c->work.grads))) {
            schedule_on_grad(c, m);
            mail_free(m);
            did = 1;
        } else if ((m = pending_peek(q = s_next_acts(c)))) {
            if (schedule_on_act(c, m) == 0) {
                mail_free(pending_pop(q));
                did = 1;
            }
        } else if (!plan_chosen(c->plan.split) && c->stage == 0) {
            did = plan_step(c);
        } else if (schedule_may_issue(c)) {
            /* gpipe: the rest of this update's microbatches at once (a round is cut by the POOL_MAX slots when
             * --micro is larger: the next round then completes the update, never runs past it) */
            int n = c->o->schedule == SCHED_GPIPE ? c->o->micro - c->upd.bwd_count : 1;
            for (int k = 0; k < n; k++)
                if (schedule_issue(c, NULL) == 0) did = 1;
        }
    }
    if (c->stage == 0) s_note_held(c, !did && c->phase == PH_RUN && compute_idle(c) == COMPUTE_IDLE_HELD);
    if (flops) *flops = c->upd.flops;
    return did;
}

void compute_account(compute_t *c, double seconds)
{
    if (c->plan.probing) {   /* --split auto's timed forward: not the training's compute */
        c->plan.probing = 0;
        if (seconds > 0 && (c->plan.probe_best == 0 || seconds < c->plan.probe_best)) c->plan.probe_best = seconds;
    } else if (seconds > 0) {
        c->count.busy_s += seconds;
    }
}

void compute_stop(compute_t *c, compute_done_t done)
{
    if (c->phase == PH_DONE) return;
    c->end.done = done;
    c->phase = PH_DONE;
}

int compute_finished(const compute_t *c)
{
    return c->phase == PH_DONE;
}

void compute_result(const compute_t *c, compute_result_t *out)
{
    memset(out, 0, sizeof *out);
    out->status = c->end.status;
    out->done = c->end.done;
    snprintf(out->why, sizeof out->why, "%s", c->end.status ? c->end.why : "completed");
    out->stage = c->stage;
    out->version = c->version;
    out->tokens = c->count.tokens;
    out->completed = c->count.completed;
    out->lost = c->count.lost;
    out->retries = c->count.retries;
    out->drops = c->count.drops;
    out->skipped = c->count.skipped;
    out->inflight = c->work.inflight + c->issue.ncarried;
    out->cursor = c->issue.cursor;
    out->saved = c->state.saved_version == c->version && c->state.saved_stage == c->stage;
}

int compute_save_checkpoint(compute_t *c, char *err, size_t errlen)
{
    if (!c->st || !c->cfg.ckpt_path || !c->cfg.ckpt_path[0] || c->state.fetching) return 0;
    checkpoint_info_t info = {0};
    info.cfg = c->model;
    info.run = c->cfg.run;
    info.stage = c->stage;
    info.nstages = c->nstages;
    info.version = c->st->version;
    info.cursor = c->issue.cursor;
    info.completed = c->count.completed;
    if (checkpoint_save(c->cfg.ckpt_path, &info, c->st->params, c->st->m, c->st->v, c->lay.nparams, err, errlen) < 0)
        return -1;
    c->state.saved_stage = c->stage;
    c->state.saved_version = c->st->version;
    return 0;
}

const stage_state_t *compute_state(const compute_t *c)
{
    return c->st;
}

int compute_choose_start(const peer_view_t *v, int stage, int64_t ck_version, int joiner, uint64_t *donor, int *use_ck)
{
    uint64_t best = 0;
    uint32_t bv = 0, maxv = 0;
    for (int i = 0; v && i < v->n; i++) {
        const view_peer_t *p = &v->p[i];
        if (p->version > maxv) maxv = p->version;
        if (p->stage == stage && p->health != PEER_GONE && (!best || p->version >= bv)) { best = p->id; bv = p->version; }
    }
    *use_ck = ck_version >= 0 && (!best || (int64_t)bv <= ck_version);
    *donor = *use_ck ? 0 : best;
    if (*donor) return START_DOWNLOAD;
    if (!*use_ck && joiner && maxv > 0) return START_BACKUP;
    return START_AS_IS;
}

compute_t *compute_new(const compute_cfg_t *cfg, char *err, size_t errlen)
{
    compute_t *c = calloc(1, sizeof *c);
    if (!c) { snprintf(err, errlen, "out of memory"); return NULL; }
    c->seen.rtt_for = -1;
    c->cfg = *cfg;
    c->o = cfg->o;
    c->st = cfg->st;
    c->issue.data = cfg->data;
    c->cfg.st = NULL;
    c->cfg.data = NULL;
    c->cfg.view = NULL;
    router_init(&c->seen.router);
    evalsum_init(&c->evals);
    applied_init(&c->work.applied);
    c->stage = cfg->stage;
    c->nstages = c->o->stages;
    if (cfg->view) view_take(c, cfg->view);
    c->shape.B = c->o->batch;
    c->model = c->o->cfg;
    c->plan.split = cfg->plan;
    if (plan_chosen(c->plan.split)) c->model.split = (model_split_t)c->plan.split;
    c->shape.T = c->model.kind == MODEL_GPT ? c->model.maxT : 1;
    c->shape.targets_n = (size_t)c->shape.B * c->shape.T;
    c->shape.targets_len = c->shape.targets_n * (size_t)proto_target_width(c->model.V);
    c->issue.cursor = cfg->cursor;
    /* microbatch ids: an origin of 32 bits drawn from the node id and the
     * start's wall clock (each start of a node its own, so a node restarted
     * with the same identity never reissues an id peers have seen, and never
     * looks older than its last start: applied.h), then a sequence from 1 */
    c->issue.mb_origin = rng_mix(c->cfg.id ^ rng_mix((uint64_t)c->cfg.clock.wall_ms(c->cfg.clock.arg))) >> APPLIED_SEQ_BITS;
    c->issue.mb_seq = 0;
    c->count.completed = cfg->completed;
    c->t0 = compute_now(c);
    c->state.last_backup = c->t0;
    c->state.last_move = -1e9;
    c->balance.drain_to = -1;
    c->state.fetch_from = -1;
    c->state.saved_version = -1;
    c->upd.last_loss = NAN;
    if (c->st) { c->lay = c->st->s; c->version = c->st->version; }
    else if (stage_init(&c->lay, &c->model, c->stage, c->nstages, err, errlen) < 0) { compute_destroy(&c); return NULL; }
    c->lay.threads = c->o->threads;   /* threads of each engine call (--threads) */
    if (c->st) c->st->s.threads = c->o->threads;
    c->issue.max_inflight = c->o->max_inflight > 0 ? c->o->max_inflight : 2 * c->nstages;
    if (c->o->schedule == SCHED_GPIPE) c->issue.max_inflight = c->o->micro;
    c->issue.auto_window = c->o->max_inflight == 0 && c->o->schedule != SCHED_GPIPE;
    delay_window_reset(c);
    metrics_set_stage(c->cfg.metrics, c->stage);
    if (c->o->split == SPLIT_AUTO && plan_chosen(c->plan.split))
        metrics_event(c->cfg.metrics, "plan", "\"split\":%s,\"how\":%s", split_name((model_split_t)c->plan.split),
                      "known at the start (the run's checkpoint here, or its WELCOME)");
    if (state_stage_setup(c) < 0) {
        snprintf(err, errlen, "out of memory for activations");
        compute_destroy(&c);
        return NULL;
    }
    c->phase = PH_RUN;
    if (cfg->start != START_AS_IS) state_fetch(c, cfg->start == START_DOWNLOAD ? cfg->donor : 0);
    else metrics_event(c->cfg.metrics, "resume", "\"version\":%lld,\"from\":%s", (long long)c->version,
                       c->version > 0 ? "checkpoint" : "initial");
    compute_send_self(c, MAIL_SELF);
    return c;
}

void compute_destroy(compute_t **self_p)
{
    compute_t *c = *self_p;
    if (!c) return;
    state_stage_teardown(c);
    mail_t *m = c->outbox.head;
    while (m) { mail_t *next = (mail_t *)m->q.next; mail_free(m); m = next; }
    router_fini(&c->seen.router);
    evalsum_fini(&c->evals);
    free(c->seen.pick_rix);
    applied_fini(&c->work.applied);
    free(c->seen.view);
    free(c->seen.by_stage);
    stage_state_destroy(&c->st);
    data_close(&c->issue.data);
    data_batch_free(&c->issue.batch);
    free(c->issue.targets_wire);
    free(c);
    *self_p = NULL;
}
