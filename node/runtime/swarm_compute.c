/* swarm_compute.c: the compute side of a node: the asynchronous 1F1B
 * schedule with weight stashing (or the gpipe baseline), routing of
 * microbatches to the next stage, optimizer updates, re-issue of lost
 * microbatches, and within-stage averaging. */
#include "node/runtime/swarm.h"
#include "node/runtime/progress.h"
#include "node/runtime/stash.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define POOL_MAX 64          /* activation slots (microbatches held at once) */
#define REC_MAX 256          /* microbatch records */
#define AVG_EVERY 20         /* updates between within-stage averaging (weights sent as fp16) */
#define STALE_S 120.0        /* a non-data stage forgets a microbatch after this */
#define PENDING_MAX 1024
#define MAX_TRIES 20         /* a data-stage microbatch is given up after this many issues */

typedef struct {
    int used;
    uint64_t mb;          /* microbatch id */
    int slot;             /* activation slot */
    int64_t version;      /* weights its forward used */
    uint64_t from;        /* peer that sent the activation (0 on the data stage) */
    uint64_t to;          /* peer the output went to (0 on the last stage) */
    double t;             /* when its forward ran */
    uint64_t cursor;      /* data stage: the data position, to re-issue it */
    int tries;            /* data stage: times issued */
} mbrec_t;

typedef struct {
    node_t *n;
    stage_state_t *st;
    int B, T;
    acts_t *pool[POOL_MAX];
    int npool, slot_used[POOL_MAX];
    grad_scratch_t *gs;
    stash_t stash;
    mbrec_t rec[REC_MAX];
    int inflight;                 /* records in use */
    item_t *acts_q[PENDING_MAX];  /* activations waiting for a slot */
    int nacts;
    codec_ctx_t *ecodec;
    int act_codec, grad_codec;
    uint64_t res_peer[16];        /* error-feedback streams: gradient residual per upstream peer */
    float *residual[16];
    batch_t batch;                /* data stage: the batch being issued */
    uint8_t *targets8;            /* data stage: its targets as sent (one byte each) */
    uint64_t cursor, mb_seq;
    int bwd_count;                /* backward passes since the last update */
    double loss_sum;
    int loss_n;
    double turn_mean, turn_dev;   /* data stage: round-trip time of a microbatch */
    uint64_t retries, lost;
    double busy_s;                /* compute seconds (rate) */
    uint64_t fwd_done;
    double eval_loss;             /* evaluation round being summed (last stage) */
    int eval_correct, eval_n;
    uint32_t eval_round;
    double last_backup;           /* when the last backup snapshot was pushed */
    double last_move;             /* when this node last moved to another stage */
    uint64_t backup_sent_mark;    /* bytes_sent at the last backup */
} compute_t;

static void s_emit_eval(compute_t *c, uint32_t round);
static void s_issue_eval(compute_t *c);
static void s_backup(compute_t *c);

static double s_now(void) { return metrics_now(); }

static void s_slowdown(node_t *n, double t_start)
{
    if (n->o.emu_slowdown <= 1.0) return;
    double dt = (s_now() - t_start) * (n->o.emu_slowdown - 1.0);
    if (dt > 0) usleep((useconds_t)(dt * 1e6));
}

static int s_slot_get(compute_t *c)
{
    for (int i = 0; i < c->npool; i++)
        if (!c->slot_used[i]) { c->slot_used[i] = 1; return i; }
    if (c->npool == POOL_MAX) return -1;
    acts_t *a = acts_new(&c->st->s, c->B, c->T);
    if (!a) return -1;
    c->pool[c->npool] = a;
    c->slot_used[c->npool] = 1;
    return c->npool++;
}

static mbrec_t *s_rec_new(compute_t *c)
{
    for (int i = 0; i < REC_MAX; i++)
        if (!c->rec[i].used) { memset(&c->rec[i], 0, sizeof c->rec[i]); c->rec[i].used = 1; c->inflight++; return &c->rec[i]; }
    return NULL;
}

static mbrec_t *s_rec_find(compute_t *c, uint64_t mb)
{
    for (int i = 0; i < REC_MAX; i++)
        if (c->rec[i].used && c->rec[i].mb == mb) return &c->rec[i];
    return NULL;
}

static void s_rec_free(compute_t *c, mbrec_t *r)
{
    if (r->slot >= 0) c->slot_used[r->slot] = 0;
    stash_unref(&c->stash, r->version, c->st->version);
    r->used = 0;
    c->inflight--;
}

static float *s_residual(compute_t *c, uint64_t peer)
{
    int free_i = -1;
    for (int i = 0; i < 16; i++) {
        if (c->res_peer[i] == peer && c->residual[i]) return c->residual[i];
        if (!c->residual[i] && free_i < 0) free_i = i;
    }
    if (free_i < 0) return NULL;
    c->residual[free_i] = calloc(c->n->in_n, sizeof(float));
    c->res_peer[free_i] = peer;
    return c->residual[free_i];
}

/* Encodes x (n floats) into a new outbox item of the given type for peer. */
static item_t *s_tensor_item(compute_t *c, int type, uint64_t peer, uint64_t mb, const float *x, size_t n,
                             int codec, float *residual)
{
    node_t *nd = c->n;
    item_t *it = item_new();
    if (!it) return NULL;
    size_t cap = frame_bound(n, codec);
    it->frame[0] = malloc(cap);
    if (!it->frame[0]) { item_free(it); return NULL; }
    uint32_t shape[1] = { (uint32_t)n };
    encode_opts_t eo = { .residual = residual };
    char err[200];
    long len = frame_encode(c->ecodec, it->frame[0], cap, x, shape, 1, codec, &eo, err, sizeof err);
    if (len < 0) { item_free(it); return NULL; }
    it->len[0] = (size_t)len;
    it->nframes = 1;
    wire_hdr_init(&it->hdr, (wire_type_t)type);
    it->hdr.run = nd->run;
    it->hdr.mb = mb;
    it->hdr.wversion = (uint32_t)c->st->version;
    it->hdr.stage = (uint16_t)(type == WIRE_ACT ? nd->stage + 1 : type == WIRE_GRAD ? nd->stage - 1 : nd->stage);
    it->peer = peer;
    it->raw_bytes = WIRE_HDR_LEN + n * sizeof(float);
    return it;
}

static void s_emit_update(compute_t *c, double loss)
{
    node_t *n = c->n;
    int last = n->stage == n->nstages - 1;
    int64_t v = c->st->version;
    metrics_event(n->metrics, "update",
                  "\"version\":%lld,\"tokens\":%llu,\"loss\":%.9g,\"bytes_sent\":%llu,\"bytes_sent_raw\":%llu,"
                  "\"bytes_recv\":%llu,\"bytes_sent_state\":%llu,\"stash\":%d,\"inflight\":%d,\"drops\":%llu,\"retries\":%llu",
                  (long long)v, (unsigned long long)atomic_load(&n->tokens),
                  last ? loss : NAN,
                  (unsigned long long)atomic_load(&n->bytes_sent), (unsigned long long)atomic_load(&n->bytes_sent_raw),
                  (unsigned long long)atomic_load(&n->bytes_recv), (unsigned long long)atomic_load(&n->bytes_sent_state),
                  stash_versions(&c->stash, v), c->inflight,
                  (unsigned long long)atomic_load(&n->drops), (unsigned long long)c->retries);
    double el = s_now() - n->t0;
    uint64_t sent = atomic_load(&n->bytes_sent), raw = atomic_load(&n->bytes_sent_raw);
    int counts[MODEL_STAGES_MAX];
    peers_stage_counts(&n->peers, n->nstages, counts);
    int npeers = 0;
    for (int s = 0; s < n->nstages; s++) npeers += counts[s];
    double rtt = 0;
    int nr = 0;
    pthread_mutex_lock(&n->peers.lock);
    for (int i = 0; i < n->peers.n; i++)
        if (n->peers.p[i].rtt_ms > 0 && n->peers.p[i].health != PEER_GONE) { rtt += n->peers.p[i].rtt_ms; nr++; }
    pthread_mutex_unlock(&n->peers.lock);
    char lossbuf[32] = "-";
    if (last) snprintf(lossbuf, sizeof lossbuf, "%.4f", loss);
    progress_line(0, 5.0, "stage %d/%d | peers %d | update %lld | loss %s | %.0f tok/s | out %.1f kB/s x%.2f | stash %d | rtt %.1f ms",
                  n->stage, n->nstages, npeers, (long long)v, lossbuf, el > 0 ? atomic_load(&n->tokens) / el : 0.0,
                  el > 0 ? sent / el / 1e3 : 0.0, sent ? (double)raw / sent : 0.0, stash_versions(&c->stash, v),
                  nr ? rtt / nr : 0.0);
}

/* Counts a finished backward; every `micro` of them, one optimizer step. */
static void s_after_backward(compute_t *c)
{
    node_t *n = c->n;
    if (++c->bwd_count < n->o.micro) return;
    c->bwd_count = 0;
    if (stash_before_update(&c->stash, c->st->version, c->st->params) < 0) {
        snprintf(n->why, sizeof n->why, "out of memory for the weight stash");
        n->status = 1;
        atomic_store(&n->done, 1);
        return;
    }
    stage_state_step(c->st, &n->o.optim);
    atomic_store(&n->version, c->st->version);
    double loss = c->loss_n ? c->loss_sum / c->loss_n : NAN;
    if (c->loss_n) atomic_store(&n->last_loss, loss);
    if (!c->loss_n) {
        /* not the last stage: the curve shows the last stage's loss as gossip brings it */
        pthread_mutex_lock(&n->peers.lock);
        for (int i = 0; i < n->peers.n; i++)
            if (n->peers.p[i].info.stage == n->nstages - 1 && n->peers.p[i].last_loss > 0) loss = n->peers.p[i].last_loss;
        pthread_mutex_unlock(&n->peers.lock);
    }
    if (n->on_loss) n->on_loss(n->on_loss_arg, c->st->version, loss);
    if (!c->loss_n) loss = NAN;
    c->loss_sum = 0;
    c->loss_n = 0;
    s_emit_update(c, loss);
    if (n->stage == 0 && n->o.eval_every > 0 && c->st->version % n->o.eval_every == 0) s_issue_eval(c);
    uint64_t sent = atomic_load(&n->bytes_sent), snapshot = 3 * c->st->s.nparams * sizeof(float);
    if (n->nstages > 1 && c->st->version % BACKUP_EVERY == 0 && s_now() - c->last_backup >= BACKUP_MIN_S
        && (double)(sent - c->backup_sent_mark) * BACKUP_BUDGET >= (double)snapshot) {
        c->last_backup = s_now();
        c->backup_sent_mark = sent;
        s_backup(c);
    }
    if (n->ckpt_path[0] && c->st->version % n->o.save_every == 0) {
        char err[300];
        if (swarm_save_checkpoint(n, c->cursor, err, sizeof err) < 0)
            metrics_event(n->metrics, "checkpoint", "\"ok\":false,\"why\":%s", err);
    }
    /* within-stage averaging with the other peers of this stage */
    if (c->st->version % AVG_EVERY == 0) {
        uint64_t ids[PEERS_CAP];
        int k = 0;
        pthread_mutex_lock(&n->peers.lock);
        for (int i = 0; i < n->peers.n; i++) {
            peer_t *p = &n->peers.p[i];
            if (p->info.id != n->id && p->info.stage == n->stage && p->health != PEER_GONE) ids[k++] = p->info.id;
        }
        pthread_mutex_unlock(&n->peers.lock);
        for (int i = 0; i < k; i++) {
            item_t *it = s_tensor_item(c, WIRE_AVG, ids[i], (uint64_t)c->st->version, c->st->params, c->st->s.nparams, codec_from_name("fp16"), NULL);
            if (it) node_send(n, it);
        }
    }
}

/* Sends the output in a to the best peer of the next stage (not `avoid`
 * when another exists).  Returns the peer's id, 0 when there is none. */
static uint64_t s_send_out(compute_t *c, const acts_t *a, uint64_t mb, uint32_t flags, const uint8_t *targets,
                           uint64_t avoid)
{
    node_t *n = c->n;
    int link;
    uint64_t to = peers_route(&n->peers, n->stage + 1, avoid, &link);
    if (!to && avoid) to = peers_route(&n->peers, n->stage + 1, 0, &link);
    if (!to) return 0;
    item_t *it = s_tensor_item(c, WIRE_ACT, to, mb, a->out, n->out_n, c->act_codec, NULL);
    if (!it) return 0;
    it->frame[1] = malloc(n->targets_n);
    if (!it->frame[1]) { item_free(it); return 0; }
    memcpy(it->frame[1], targets, n->targets_n);
    it->len[1] = n->targets_n;
    it->nframes = 2;
    it->raw_bytes += n->targets_n * sizeof(float);  /* the targets are a tensor too: 4 bytes each as raw fp32, 1 on the wire */
    it->hdr.flags = flags;
    node_send(n, it);
    return to;
}

/* Sends record r's output on and remembers where it went. */
static int s_send_act(compute_t *c, mbrec_t *r, const uint8_t *targets, uint64_t avoid)
{
    node_t *n = c->n;
    uint64_t to = s_send_out(c, c->pool[r->slot], r->mb, 0, targets, avoid);
    if (!to) return -1;
    r->to = to;
    pthread_mutex_lock(&n->peers.lock);
    int i = peers_find_locked(&n->peers, to);
    if (i >= 0) n->peers.p[i].outstanding++;
    pthread_mutex_unlock(&n->peers.lock);
    return 0;
}

static void s_peer_returned(compute_t *c, uint64_t peer, double turnaround)
{
    node_t *n = c->n;
    pthread_mutex_lock(&n->peers.lock);
    int i = peers_find_locked(&n->peers, peer);
    if (i >= 0) {
        peer_t *p = &n->peers.p[i];
        if (p->outstanding > 0) p->outstanding--;
        if (turnaround > 0) p->turnaround = p->turnaround > 0 ? 0.8 * p->turnaround + 0.2 * turnaround : turnaround;
    }
    pthread_mutex_unlock(&n->peers.lock);
}

/* Forward of record r (inputs already in its slot). */
static void s_forward(compute_t *c, mbrec_t *r)
{
    node_t *n = c->n;
    double t = s_now();
    r->version = c->st->version;
    stash_ref(&c->stash, r->version);
    stage_forward(&c->st->s, c->st->params, c->pool[r->slot]);
    atomic_fetch_add(&n->tokens, (uint64_t)c->B * c->T);
    c->fwd_done++;
    c->busy_s += s_now() - t;
    s_slowdown(n, t);
    r->t = s_now();
}

/* Backward of record r (dout in its slot unless last); sends din upstream. */
static void s_backward(compute_t *c, mbrec_t *r)
{
    node_t *n = c->n;
    double t = s_now();
    acts_t *a = c->pool[r->slot];
    const float *w = stash_params(&c->stash, r->version, c->st->version, c->st->params);
    float scale = 1.0f / ((float)c->B * c->T * n->o.micro);
    stage_backward(&c->st->s, w, c->st->grads, a, c->gs, scale);
    c->busy_s += s_now() - t;
    s_slowdown(n, t);
    if (n->stage > 0) {
        item_t *it = s_tensor_item(c, WIRE_GRAD, r->from, r->mb, a->din, n->in_n, c->grad_codec, s_residual(c, r->from));
        if (it) node_send(n, it);
    }
}

/* The last stage finished a microbatch: count it (for the whole swarm's
 * progress), maybe update, and end the run when enough are done. */
static void s_completed_one(compute_t *c)
{
    node_t *n = c->n;
    atomic_fetch_add(&n->completed, 1);
    pthread_mutex_lock(&n->peers.lock);
    int i = peers_find_locked(&n->peers, n->id);
    if (i >= 0) n->peers.p[i].completed = atomic_load(&n->completed);
    pthread_mutex_unlock(&n->peers.lock);
    s_after_backward(c);
    if (peers_completed(&n->peers) >= n->target) atomic_store(&n->done, 1);
}

/* The data stage starts a new microbatch (or re-issues `old`). */
static int s_issue(compute_t *c, mbrec_t *old)
{
    node_t *n = c->n;
    int slot = s_slot_get(c);
    if (slot < 0) return -1;
    mbrec_t *r = old ? old : s_rec_new(c);
    if (!r) { c->slot_used[slot] = 0; return -1; }
    uint64_t avoid = 0;
    if (old) {
        avoid = old->to;
        if (old->slot >= 0) c->slot_used[old->slot] = 0;
        stash_unref(&c->stash, old->version, c->st->version);
        s_peer_returned(c, old->to, 0);
        c->retries++;
        char why[64];
        snprintf(why, sizeof why, "no gradient after %.1f s", s_now() - old->t);
        metrics_event(n->metrics, "retry", "\"mb\":%llu,\"why\":%s", (unsigned long long)old->mb, why);
    } else {
        r->cursor = c->cursor;
    }
    r->slot = slot;
    r->from = 0;
    r->mb = ((n->id & 0xffffffULL) << 40) | (++c->mb_seq & 0xffffffffffULL);
    r->tries++;
    uint64_t cur = r->cursor;
    /* the first data-stage node reads the stream solo reads (shard 0 of 1: parity);
     * the k-th reads shard k of k+1, another random stream of the same data */
    data_next_train(n->data, &c->batch, n->shard, n->shard + 1, &cur);
    if (!old) c->cursor = cur;
    acts_t *a = c->pool[slot];
    const model_config_t *cfg = &n->o.cfg;
    if (cfg->kind == MODEL_GPT) memcpy(a->tokens, c->batch.tokens, sizeof(int) * c->B * c->T);
    else memcpy(a->x, c->batch.x, sizeof(float) * c->B * cfg->D);
    uint8_t *tg = c->targets8;
    for (size_t i = 0; i < n->targets_n; i++) tg[i] = (uint8_t)c->batch.targets[i];
    if (n->nstages == 1) {
        /* a single stage: forward, loss and backward here */
        memcpy(a->targets, c->batch.targets, sizeof(int) * n->targets_n);
        s_forward(c, r);
        c->loss_sum += a->loss;
        c->loss_n++;
        s_backward(c, r);
        s_rec_free(c, r);
        s_completed_one(c);
    } else {
        s_forward(c, r);
        if (s_send_act(c, r, tg, avoid) < 0) {
            /* no next-stage peer right now: keep it and re-issue later */
            r->to = 0;
            r->t = s_now() - 1e9;
        }
    }
    return 0;
}

/* Evaluation microbatch ids: round, batches in the round, index. */
#define EVAL_MB(round, nval, idx) (((uint64_t)(round) << 32) | ((uint64_t)(nval) << 16) | (uint64_t)(idx))

/* The data stage sends the validation batches through the pipeline, forward
 * only, with the weights of this moment. */
static void s_issue_eval(compute_t *c)
{
    node_t *n = c->n;
    int nval = opts_eval_batches(&n->o, data_val_batches(n->data, c->B));
    int slot = s_slot_get(c);
    if (slot < 0) return;
    acts_t *a = c->pool[slot];
    uint8_t *tg = c->targets8;
    uint32_t round = (uint32_t)c->st->version;
    for (int i = 0; i < nval; i++) {
        data_val_batch(n->data, &c->batch, i);
        if (n->o.cfg.kind == MODEL_GPT) memcpy(a->tokens, c->batch.tokens, sizeof(int) * c->B * c->T);
        else memcpy(a->x, c->batch.x, sizeof(float) * c->B * n->o.cfg.D);
        for (size_t k = 0; k < n->targets_n; k++) tg[k] = (uint8_t)c->batch.targets[k];
        stage_forward(&c->st->s, c->st->params, a);
        if (n->nstages == 1) {
            c->eval_loss += a->loss;
            c->eval_correct += a->correct;
            c->eval_n++;
        } else {
            s_send_out(c, a, EVAL_MB(round, nval, i), ACT_FLAG_EVAL, tg, 0);
        }
    }
    if (n->nstages == 1) s_emit_eval(c, round);
    c->slot_used[slot] = 0;
}

static void s_emit_eval(compute_t *c, uint32_t round)
{
    node_t *n = c->n;
    if (c->eval_n == 0) return;
    double vl = c->eval_loss / c->eval_n;
    if (n->o.cfg.kind == MODEL_MLP)
        metrics_event(n->metrics, "eval", "\"version\":%u,\"val_loss\":%.9g,\"val_acc\":%.9g,\"batches\":%d", round,
                      vl, (double)c->eval_correct / ((double)c->eval_n * c->B), c->eval_n);
    else
        metrics_event(n->metrics, "eval", "\"version\":%u,\"val_loss\":%.9g,\"batches\":%d", round, vl, c->eval_n);
    c->eval_loss = 0;
    c->eval_correct = 0;
    c->eval_n = 0;
}

/* An evaluation microbatch: forward only; the last stage accumulates. */
static int s_on_eval_act(compute_t *c, item_t *it)
{
    node_t *n = c->n;
    int slot = s_slot_get(c);
    if (slot < 0) return -1;
    acts_t *a = c->pool[slot];
    memcpy(a->in, it->tensor, sizeof(float) * n->in_n);
    uint32_t round = (uint32_t)(it->hdr.mb >> 32);
    int nval = (int)((it->hdr.mb >> 16) & 0xffff);
    if (n->stage == n->nstages - 1) {
        if (c->eval_n > 0 && round != c->eval_round) s_emit_eval(c, c->eval_round);  /* a round with losses */
        c->eval_round = round;
        for (size_t i = 0; i < n->targets_n; i++) a->targets[i] = it->frame[0][i];
        stage_forward(&c->st->s, c->st->params, a);
        c->eval_loss += a->loss;
        c->eval_correct += a->correct;
        if (++c->eval_n >= nval) s_emit_eval(c, round);
    } else {
        stage_forward(&c->st->s, c->st->params, a);
        s_send_out(c, a, it->hdr.mb, ACT_FLAG_EVAL, it->frame[0], 0);
    }
    c->slot_used[slot] = 0;
    return 0;
}

/* An activation from the previous stage: forward (and, on the last stage,
 * loss and backward at once). */
static int s_on_act(compute_t *c, item_t *it)
{
    node_t *n = c->n;
    if (it->hdr.flags & ACT_FLAG_EVAL) return s_on_eval_act(c, it);
    int slot = s_slot_get(c);
    if (slot < 0) return -1;
    mbrec_t *r = s_rec_new(c);
    if (!r) { c->slot_used[slot] = 0; return -1; }
    r->mb = it->hdr.mb;
    r->slot = slot;
    r->from = it->peer;
    acts_t *a = c->pool[slot];
    memcpy(a->in, it->tensor, sizeof(float) * n->in_n);
    if (n->stage == n->nstages - 1) {
        for (size_t i = 0; i < n->targets_n; i++) a->targets[i] = it->frame[0][i];
        s_forward(c, r);
        c->loss_sum += a->loss;
        c->loss_n++;
        s_backward(c, r);
        s_rec_free(c, r);
        s_completed_one(c);
    } else {
        s_forward(c, r);
        if (s_send_act(c, r, it->frame[0], 0) < 0) s_rec_free(c, r);  /* no next peer: the data stage re-issues it */
    }
    return 0;
}

static void s_on_grad(compute_t *c, item_t *it)
{
    node_t *n = c->n;
    mbrec_t *r = s_rec_find(c, it->hdr.mb);
    if (!r || r->to != it->peer) {
        /* a late gradient of a microbatch already re-issued or forgotten */
        atomic_fetch_add(&n->drops, 1);
        metrics_event(n->metrics, "drop", "\"why\":\"gradient of an unknown microbatch\",\"from\":\"%08llx\"",
                      (unsigned long long)(it->peer >> 32));
        return;
    }
    double turn = s_now() - r->t;
    s_peer_returned(c, r->to, turn);
    if (n->stage == 0) {
        c->turn_mean = c->turn_mean > 0 ? 0.9 * c->turn_mean + 0.1 * turn : turn;
        c->turn_dev = 0.9 * c->turn_dev + 0.1 * fabs(turn - c->turn_mean);
    }
    memcpy(c->pool[r->slot]->dout, it->tensor, sizeof(float) * n->out_n);
    s_backward(c, r);
    s_rec_free(c, r);
    s_after_backward(c);
}

/* Averages this stage's weights with a replica's; refuses weights that are
 * far from ours (replicas drift apart slowly; a far copy is a bad peer). */
static void s_on_avg(compute_t *c, item_t *it)
{
    float *p = c->st->params;
    double d2 = 0, p2 = 0;
    for (size_t i = 0; i < it->n; i++) {
        double d = (double)it->tensor[i] - p[i];
        d2 += d * d;
        p2 += (double)p[i] * p[i];
    }
    if (d2 > 0.25 * p2) {
        atomic_fetch_add(&c->n->drops, 1);
        metrics_event(c->n->metrics, "drop", "\"why\":\"averaging weights too far from ours (%.2f relative)\",\"from\":\"%08llx\"",
                      sqrt(d2 / (p2 > 0 ? p2 : 1)), (unsigned long long)(it->peer >> 32));
        return;
    }
    for (size_t i = 0; i < it->n; i++) p[i] = 0.5f * (p[i] + it->tensor[i]);
}

/* Sends this stage's state (params, m, v) to peer in STATE chunks. */
static void s_send_state(compute_t *c, uint64_t peer, uint32_t flags)
{
    node_t *n = c->n;
    size_t np = c->st->s.nparams, total = 3 * np * sizeof(float);
    uint8_t *snap = malloc(total);
    if (!snap) return;
    memcpy(snap, c->st->params, np * sizeof(float));
    memcpy(snap + np * sizeof(float), c->st->m, 2 * np * sizeof(float));  /* m and v follow grads in one allocation */
    uint32_t sum = frame_checksum(snap, total, 0);
    uint32_t nchunks = (uint32_t)((total + STATE_CHUNK - 1) / STATE_CHUNK);
    for (uint32_t k = 0; k < nchunks; k++) {
        item_t *o = item_new();
        if (!o) break;
        size_t off = (size_t)k * STATE_CHUNK, len = total - off < STATE_CHUNK ? total - off : STATE_CHUNK;
        wbuf_t w;
        wbuf_init(&w, 64);
        wbuf_put_u64(&w, total);
        wbuf_put_u32(&w, sum);
        wbuf_put_u64(&w, (uint64_t)c->st->version);
        wbuf_put_u32(&w, nchunks);
        o->frame[0] = w.data;
        o->len[0] = w.len;
        o->frame[1] = malloc(len);
        if (!o->frame[1]) { item_free(o); break; }
        memcpy(o->frame[1], snap + off, len);
        o->len[1] = len;
        o->nframes = 2;
        wire_hdr_init(&o->hdr, WIRE_STATE);
        o->hdr.run = n->run;
        o->hdr.stage = (uint16_t)n->stage;
        o->hdr.mb = k;
        o->hdr.flags = flags;
        o->hdr.wversion = (uint32_t)c->st->version;
        o->peer = peer;
        atomic_fetch_add(&n->bytes_sent_state, WIRE_HDR_LEN + o->len[0] + o->len[1]);
        node_send(n, o);
    }
    free(snap);
    char s[9];
    node_id_short(peer, s);
    metrics_event(n->metrics, flags & STATE_FLAG_BACKUP ? "backup" : "state", "\"to\":%s,\"version\":%lld,\"bytes\":%zu",
                  s, (long long)c->st->version, total);
}

static void s_on_state_req(compute_t *c, item_t *it)
{
    s_send_state(c, it->peer, STATE_FLAG_REPLY);
}

/* A stage served by this node alone pushes a snapshot of its state to a
 * node of another stage every BACKUP_EVERY updates, so that a replacement
 * can resume it if this node dies. */
static void s_backup(compute_t *c)
{
    node_t *n = c->n;
    uint64_t holder = 0;
    int alone = 1;
    pthread_mutex_lock(&n->peers.lock);
    for (int i = 0; i < n->peers.n; i++) {
        peer_t *p = &n->peers.p[i];
        if (p->info.id == n->id || p->health == PEER_GONE) continue;
        if (p->info.stage == n->stage) alone = 0;
        /* the holder: a peer of the next stage, else of any other stage */
        int next = p->info.stage == (n->stage + 1) % n->nstages;
        if (p->info.stage != n->stage && (!holder || next)) holder = p->info.id;
    }
    pthread_mutex_unlock(&n->peers.lock);
    if (alone && holder) s_send_state(c, holder, STATE_FLAG_BACKUP);
}

/* Re-issues (data stage) or forgets (other stages) microbatches whose
 * gradient is overdue or whose next-stage peer is gone. */
static int s_all_stages_served(node_t *n);

static void s_timeouts(compute_t *c)
{
    node_t *n = c->n;
    double now = s_now();
    /* while a stage has no peer the swarm waits: nothing can complete, nothing is re-issued */
    if (n->stage == 0 && !s_all_stages_served(n)) return;
    double deadline = c->turn_mean > 0 ? 4 * c->turn_mean + 8 * c->turn_dev : 30.0;
    if (deadline < 5.0) deadline = 5.0;
    for (int i = 0; i < REC_MAX; i++) {
        mbrec_t *r = &c->rec[i];
        if (!r->used) continue;
        int gone = 0;
        if (r->to) {
            pthread_mutex_lock(&n->peers.lock);
            int k = peers_find_locked(&n->peers, r->to);
            gone = k < 0 || n->peers.p[k].health == PEER_GONE || n->peers.p[k].info.stage != n->stage + 1;
            pthread_mutex_unlock(&n->peers.lock);
        }
        if (n->stage == 0) {
            if ((gone || now - r->t > deadline) && r->tries >= MAX_TRIES) {
                c->lost++;
                metrics_event(n->metrics, "retry", "\"mb\":%llu,\"why\":\"given up after %d tries\"", (unsigned long long)r->mb, r->tries);
                s_peer_returned(c, r->to, 0);
                s_rec_free(c, r);
            } else if (gone || now - r->t > deadline) {
                if (s_issue(c, r) < 0) break;
            }
        } else if (gone || now - r->t > STALE_S) {
            s_peer_returned(c, r->to, 0);
            s_rec_free(c, r);
        }
    }
}

static int s_all_stages_served(node_t *n)
{
    int counts[MODEL_STAGES_MAX];
    peers_stage_counts(&n->peers, n->nstages, counts);
    for (int s = 0; s < n->nstages; s++)
        if (counts[s] == 0) return 0;
    return 1;
}

/* The data stage's window when --max-inflight is not given: enough
 * microbatches to cover the pipeline's network round trip with compute
 * (Little's law: latency / time per microbatch), at least 2 per stage and at
 * most 8 per stage (each one holds activations at every stage). */
static int s_auto_window(compute_t *c)
{
    node_t *n = c->n;
    int K = n->nstages;
    double rtt = 0;
    int nr = 0;
    pthread_mutex_lock(&n->peers.lock);
    for (int i = 0; i < n->peers.n; i++)
        if (n->peers.p[i].info.id != n->id && n->peers.p[i].health != PEER_GONE && n->peers.p[i].rtt_ms > 0) {
            rtt += n->peers.p[i].rtt_ms;
            nr++;
        }
    pthread_mutex_unlock(&n->peers.lock);
    double per_mb = c->fwd_done ? c->busy_s / (double)c->fwd_done : 0;  /* my compute per microbatch */
    if (!nr || per_mb <= 0) return 2 * K;
    /* forward and backward cross K-1 links each way: (K-1) round trips */
    double latency = (K - 1) * (rtt / nr) * 1e-3;
    int w = K + (int)ceil(latency / per_mb);
    if (w < 2 * K) w = 2 * K;
    if (w > 8 * K) w = 8 * K;
    return w;
}

static void s_update_rate(compute_t *c)
{
    node_t *n = c->n;
    /* capacity: microbatches per second of compute (forward and backward),
     * what this node could do if never idle; 0 until it has worked */
    if (c->busy_s < 0.5) return;
    float rate = (float)(c->fwd_done / c->busy_s);
    pthread_mutex_lock(&n->peers.lock);
    int i = peers_find_locked(&n->peers, n->id);
    if (i >= 0) n->peers.p[i].info.rate = rate;
    pthread_mutex_unlock(&n->peers.lock);
}

/* The per-stage objects of the compute loop: made at start and again after
 * a move to another stage. */
static int s_stage_setup(compute_t *c)
{
    node_t *n = c->n;
    c->st = n->st;
    c->gs = grad_scratch_new(&c->st->s, c->B, c->T);
    stash_init(&c->stash, c->st->s.nparams, n->o.stash == STASH_2BW);
    c->bwd_count = 0;
    c->loss_sum = 0;
    c->loss_n = 0;
    c->busy_s = 0;
    c->fwd_done = 0;
    if (n->stage == 0 && !c->batch.targets && data_batch_alloc(n->data, &c->batch, c->B) < 0) return -1;
    if (n->stage == 0 && !c->targets8 && !(c->targets8 = malloc(n->targets_n))) return -1;
    return c->gs ? 0 : -1;
}

static void s_stage_teardown(compute_t *c)
{
    for (int i = 0; i < c->nacts; i++) item_free(c->acts_q[i]);
    c->nacts = 0;
    for (int i = 0; i < REC_MAX; i++)
        if (c->rec[i].used) s_peer_returned(c, c->rec[i].to, 0);
    memset(c->rec, 0, sizeof c->rec);
    c->inflight = 0;
    for (int i = 0; i < c->npool; i++) acts_destroy(&c->pool[i]);
    memset(c->slot_used, 0, sizeof c->slot_used);
    c->npool = 0;
    for (int i = 0; i < 16; i++) { free(c->residual[i]); c->residual[i] = NULL; c->res_peer[i] = 0; }
    grad_scratch_destroy(&c->gs);
    stash_fini(&c->stash);
}

#define MOVE_FIRST_S 20.0     /* no move before a node has run this long, */
#define MOVE_BALANCE_S 120.0  /* nor a move for speed (not to fill an empty stage) before this: rates settle first */
#define MOVE_COOLDOWN_S 60.0  /* nor sooner than this after its last move */
#define MOVE_GAIN 1.2         /* the slowest stage must get at least this much faster */

/* Moves this node to stage `to`: drops its work at the old stage (the data
 * stage re-issues it), downloads the new stage's state from a peer of it
 * (or a backup), and serves it. */
static void s_move(compute_t *c, int to, const char *why)
{
    node_t *n = c->n;
    char err[300];
    int from = n->stage;
    stage_state_t *st = stage_state_new(&n->o.cfg, to, n->nstages, n->o.seed, err, sizeof err);
    if (!st || swarm_rx_begin(n, st->s.nparams) < 0) { stage_state_destroy(&st); return; }
    s_stage_teardown(c);
    /* from here on the I/O thread refuses tensors of the old stage */
    n->nparams = st->s.nparams;
    n->in_n = stage_in_size(&st->s, c->B, c->T);
    n->out_n = stage_out_size(&st->s, c->B, c->T);
    n->stage = to;
    metrics_set_stage(n->metrics, to);
    uint64_t donor = 0;
    uint32_t best = 0;
    pthread_mutex_lock(&n->peers.lock);
    for (int i = 0; i < n->peers.n; i++) {
        peer_t *p = &n->peers.p[i];
        if (p->info.id == n->id) { p->info.stage = (int16_t)to; p->info.rate = 0; continue; }
        if (p->info.stage == to && p->health != PEER_GONE && (!donor || p->info.version >= best)) { donor = p->info.id; best = p->info.version; }
    }
    pthread_mutex_unlock(&n->peers.lock);
    item_t *req = item_new();
    if (req) {
        wire_hdr_init(&req->hdr, WIRE_STATE_REQ);
        req->hdr.run = n->run;
        req->hdr.stage = (uint16_t)to;
        req->hdr.flags = donor ? 0 : STATE_FLAG_BACKUP;
        req->peer = donor;   /* 0: ask everyone for a backup */
        req->raw_bytes = WIRE_HDR_LEN;
        node_send(n, req);
    }
    int got = !donor && swarm_own_backup(n, to, st);
    int polls = donor ? 600 : 100;  /* 30 s for a download, 5 s for a backup that may not exist */
    for (int i = 0; i < polls && !got && !atomic_load(&n->done); i++) {
        got = swarm_rx_poll(n, st);
        if (!got) usleep(50000);
    }
    swarm_rx_end();
    stage_state_t *old = n->st;
    n->st = st;
    atomic_store(&n->version, st->version);
    stage_state_destroy(&old);
    if (s_stage_setup(c) < 0) {
        snprintf(n->why, sizeof n->why, "out of memory after moving to stage %d", to);
        n->status = 1;
        atomic_store(&n->done, 1);
        return;
    }
    c->last_move = s_now();
    metrics_event(n->metrics, "move", "\"from\":%d,\"to\":%d,\"why\":%s,\"version\":%lld,\"state\":%s",
                  from, to, why, (long long)st->version, got ? (donor ? "downloaded" : "backup") : "initial");
    progress_line(1, 0, "moved from stage %d to stage %d (%s); its state %s at version %lld", from, to, why,
                  got ? "downloaded" : "not found, initial weights", (long long)st->version);
    progress_done();
}

/* Rebalancing (every few seconds): a node of a stage served by several
 * peers moves to a stage with none, or to the slowest stage when that makes
 * the slowest stage MOVE_GAIN times faster.  Only the highest-id peer of a
 * stage moves, at most once per MOVE_COOLDOWN_S; the data stage (which
 * holds the data) neither gives nor takes nodes. */
static void s_consider_move(compute_t *c)
{
    node_t *n = c->n;
    double now = s_now();
    if (n->stage == 0 || n->nstages < 3 || now - n->t0 < MOVE_FIRST_S || now - c->last_move < MOVE_COOLDOWN_S) return;
    enum { MAXS = 256 };
    if (n->nstages > MAXS) return;
    int count[MAXS] = {0}, unknown = 0, highest = 1;
    double cap[MAXS] = {0}, mine = 0;
    pthread_mutex_lock(&n->peers.lock);
    for (int i = 0; i < n->peers.n; i++) {
        peer_t *p = &n->peers.p[i];
        int s = p->info.stage;
        if (p->health == PEER_GONE || s < 0 || s >= n->nstages) continue;
        count[s]++;
        cap[s] += p->info.rate;
        if (s > 0 && p->info.rate <= 0) unknown = 1;
        if (p->info.id == n->id) mine = p->info.rate;
        else if (s == n->stage && p->info.id > n->id) highest = 0;
    }
    pthread_mutex_unlock(&n->peers.lock);
    if (count[n->stage] < 2 || !highest) return;
    for (int s = 1; s < n->nstages; s++)
        if (count[s] == 0) { s_move(c, s, "stage without peers"); return; }
    if (unknown || mine <= 0 || now - n->t0 < MOVE_BALANCE_S) return;
    int b = 1;
    for (int s = 2; s < n->nstages; s++)
        if (cap[s] < cap[b]) b = s;
    if (b == n->stage) return;
    double after_mine = cap[n->stage] - mine, after_b = cap[b] + mine;
    double new_min = after_mine < after_b ? after_mine : after_b;
    if (new_min >= MOVE_GAIN * cap[b]) {
        char why[96];
        snprintf(why, sizeof why, "stage %d is the slowest (%.1f vs %.1f microbatches/s here)", b, cap[b], cap[n->stage]);
        s_move(c, b, why);
    }
}

void swarm_compute(node_t *n)
{
    static compute_t C;
    compute_t *c = &C;
    memset(c, 0, sizeof *c);
    c->n = n;
    c->B = n->o.batch;
    c->T = n->o.cfg.kind == MODEL_GPT ? n->o.cfg.maxT : 1;
    c->ecodec = codec_ctx_new(1);
    c->act_codec = codec_from_name(n->o.codec);
    c->grad_codec = codec_from_name(n->o.grad_codec);
    c->last_backup = s_now();
    c->last_move = -1e9;
    c->cursor = n->start_cursor;
    if (s_stage_setup(c) < 0 || !c->ecodec) {
        snprintf(n->why, sizeof n->why, "out of memory for activations");
        n->status = 1;
        atomic_store(&n->done, 1);
    }
    int max_inflight = n->o.max_inflight > 0 ? n->o.max_inflight : 2 * n->nstages;
    if (n->o.schedule == SCHED_GPIPE) max_inflight = n->o.micro;
    int auto_window = n->o.max_inflight == 0 && n->o.schedule != SCHED_GPIPE;
    double next_timeout = 0, next_move = 0;
    while (!atomic_load(&n->done)) {
        /* 1. take everything that arrived: gradients first (1F1B) */
        int did = 0;
        queue_item_t *q;
        item_t *grads[PENDING_MAX];
        int ngrads = 0;
        while ((q = queue_pop(&n->inbox, 0))) {
            item_t *it = (item_t *)q;
            switch (it->hdr.type) {
            case WIRE_GRAD:
                if (ngrads < PENDING_MAX) { grads[ngrads++] = it; it = NULL; }
                break;
            case WIRE_ACT:
                if (c->nacts < PENDING_MAX) { c->acts_q[c->nacts++] = it; it = NULL; }
                break;
            case WIRE_AVG: s_on_avg(c, it); break;
            case WIRE_STATE_REQ: s_on_state_req(c, it); break;
            default: break;
            }
            item_free(it);
        }
        for (int i = 0; i < ngrads; i++) {
            s_on_grad(c, grads[i]);
            item_free(grads[i]);
            did = 1;
        }
        /* 2. one forward: an activation waiting, or a new microbatch on the data stage */
        if (c->nacts > 0) {
            if (s_on_act(c, c->acts_q[0]) == 0) {
                item_free(c->acts_q[0]);
                memmove(c->acts_q, c->acts_q + 1, sizeof(item_t *) * (size_t)(--c->nacts));
                did = 1;
            }
        } else if (n->stage == 0 && s_all_stages_served(n)) {
            int may = n->o.schedule == SCHED_GPIPE ? c->inflight == 0 : c->inflight < max_inflight;
            if (n->o.schedule == SCHED_GPIPE && may) {
                for (int k = 0; k < max_inflight; k++) s_issue(c, NULL);
                did = 1;
            } else if (may && s_issue(c, NULL) == 0) {
                did = 1;
            }
        }
        /* 3. housekeeping */
        double now = s_now();
        if (now >= next_timeout) {
            s_timeouts(c);
            s_update_rate(c);
            if (auto_window && n->stage == 0) max_inflight = s_auto_window(c);
            next_timeout = now + 0.2;
        }
        if (now >= next_move) {
            s_consider_move(c);
            next_move = now + 5.0;
        }
        /* 4. nothing to do: wait for the next message (taken at the top) */
        if (!did) queue_wait(&n->inbox, 5);
    }
    progress_done();
    n->lost = c->lost;
    n->start_cursor = c->cursor;
    s_stage_teardown(c);
    codec_ctx_destroy(&c->ecodec);
    data_batch_free(&c->batch);
    free(c->targets8);
    c->targets8 = NULL;
}
