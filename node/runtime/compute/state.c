/* state.c: the stage's state at the compute side (state.h): snapshots
 * out (downloads, backups, within-stage averaging, checkpoints), fetches
 * in, the per-stage objects, and moves to other stages. */
#include "compress/codec.h"
#include "node/runtime/compute/internal.h"

#define AVG_PEERS 2          /* to this many live peers of the stage, in turn (bounded: a stage may have hundreds) */
#define BACKUP_EVERY 20      /* backup snapshots of a stage served by one node: at most every 20 updates, */
#define BACKUP_MIN_S 60.0    /* at most once a minute, */
#define BACKUP_BUDGET 0.05   /* and only when they stay within 5% of the bytes this node sends */
#define FETCH_DOWNLOAD_S 30.0   /* a stage's state from a serving peer must begin to come within this long, */
#define FETCH_BACKUP_S 5.0      /* from a backup that may not exist this long (then it goes on while it comes) */

static void s_backup(compute_t *c);

/* The checkpoint of every --save-every updates.  A failure is a `checkpoint`
 * event and, the first time and every tenth after, a line for the user (a
 * node that could not save for a whole run said so only in its metrics). */
void state_save_periodic(compute_t *c)
{
    char err[300], line[400];
    if (compute_save_checkpoint(c, err, sizeof err) == 0) return;
    metrics_event(c->cfg.metrics, "checkpoint", "\"ok\":false,\"why\":%s", err);
    if (c->state.ckpt_failures++ % 10 != 0) return;
    snprintf(line, sizeof line, "checkpoint at version %lld not written: %s", (long long)c->version, err);
    compute_say(c, line);
}

/* Sends this node's weights to AVG_PEERS live peers of its stage, from a
 * place in the stage's list that moves on every round (pairwise gossip
 * averaging: the replicas converge, and the bytes do not grow with the stage). */
void state_average(compute_t *c)
{
    if (frame_bound(c->lay.nparams, codec_from_name("fp16")) > WIRE_FRAME_BYTES_MAX) {
        /* a frame this big never arrives (the receiver's transport resets the connection) */
        if (!c->state.avg_refused) {
            char line[300];
            snprintf(line, sizeof line, "this stage's %zu parameters take more than %u MiB in fp16, more than a message's "
                     "frame may: its replicas are not averaged (more stages make each smaller)", c->lay.nparams,
                     WIRE_FRAME_BYTES_MAX >> 20);
            compute_say(c, line);
        }
        c->state.avg_refused = 1;
        return;
    }
    int n;
    const int *ix = view_stage_peers(c, c->stage, &n);
    uint64_t round = (uint64_t)c->version / AVG_EVERY;
    int start = n ? (int)(((c->cfg.id ^ round) * 0x9e3779b97f4a7c15ULL) >> 33) % n : 0;
    for (int k = 0, sent = 0; k < n && sent < AVG_PEERS; k++) {
        const view_peer_t *p = &c->seen.view->p[ix[(start + k) % n]];
        if (p->health == PEER_GONE) continue;
        compute_out(c, compute_tensor_mail(c, WIRE_AVG, p->id, (uint64_t)c->version, compute_params(c), c->lay.nparams, codec_from_name("fp16")));
        sent++;
    }
}

/* After an update: a backup snapshot when BACKUP_EVERY, BACKUP_MIN_S and
 * BACKUP_BUDGET allow it. */
void state_maybe_backup(compute_t *c)
{
    uint64_t sent = atomic_load(&c->cfg.net->bytes_sent), snapshot = 3 * c->lay.nparams * sizeof(float);
    if (c->nstages > 1 && c->version % BACKUP_EVERY == 0 && compute_now(c) - c->state.last_backup >= BACKUP_MIN_S
        && (double)(sent - c->state.backup_sent_mark) * BACKUP_BUDGET >= (double)snapshot) {
        c->state.last_backup = compute_now(c);
        c->state.backup_sent_mark = sent;
        s_backup(c);
    }
}

/* A replica's weights (within-stage averaging): held until our next update,
 * a later one replacing it.  1 when m was kept (owned here now). */
int state_on_avg(compute_t *c, mail_t *m)
{
    if (c->cfg.modelled || !c->st || m->n != c->lay.nparams || m->hdr.stage != c->stage || !m->x) return 0;
    mail_free(c->state.avg_pending);
    c->state.avg_pending = m;
    return 1;
}

/* Averages the held replica's weights into ours, just after an update (no
 * forward has used the new version yet); refuses weights far from ours
 * (replicas drift apart slowly; a far copy is a bad peer). */
void state_apply_avg(compute_t *c)
{
    mail_t *m = c->state.avg_pending;
    if (!m) return;
    c->state.avg_pending = NULL;
    if (c->st && m->n == c->lay.nparams && m->hdr.stage == c->stage) {
        float *p = c->st->params;
        double d2 = 0, p2 = 0;
        for (size_t i = 0; i < m->n; i++) {
            double d = (double)m->x[i] - p[i];
            d2 += d * d;
            p2 += (double)p[i] * p[i];
        }
        if (d2 > 0.25 * p2) {
            char why[96];
            snprintf(why, sizeof why, "averaging weights too far from ours (%.2f relative)", sqrt(d2 / (p2 > 0 ? p2 : 1)));
            compute_drop(c, why, m->peer);
        } else {
            for (size_t i = 0; i < m->n; i++) p[i] = 0.5f * (p[i] + m->x[i]);
        }
    }
    mail_free(m);
}

/* Sends this stage's state (params, m, v) to peer. */
void state_send(compute_t *c, uint64_t peer, uint32_t flags)
{
    mail_t *m = mail_new(MAIL_STATE_OUT);
    size_t np = c->lay.nparams;
    if (!m || !(m->state = state_blob_new(c->stage, c->cfg.modelled ? 0 : np))) { mail_free(m); return; }
    m->state->nparams = np;
    m->state->version = c->version;
    if (c->st) {
        memcpy(m->state->data, c->st->params, np * sizeof(float));
        memcpy(m->state->data + np, c->st->m, 2 * np * sizeof(float));  /* m and v follow each other in one allocation */
    }
    m->hdr.flags = flags;
    m->peer = peer;
    compute_out(c, m);
}

/* A stage served by this node alone pushes a snapshot of its state to a
 * node of another stage every BACKUP_EVERY updates, so that a replacement
 * can resume it if this node dies. */
static void s_backup(compute_t *c)
{
    uint64_t holder = 0;
    int alone = 1;
    for (int i = 0; c->seen.view && i < c->seen.view->n; i++) {
        const view_peer_t *p = &c->seen.view->p[i];
        if (p->health == PEER_GONE) continue;
        if (p->stage == c->stage) alone = 0;
        /* the holder: a peer of the next stage, else of any other stage */
        int next = p->stage == (c->stage + 1) % c->nstages;
        if (p->stage != c->stage && (!holder || next)) holder = p->id;
    }
    if (alone && holder) state_send(c, holder, STATE_FLAG_BACKUP);
}

/* Asks the network side for stage `stage`'s state: from donor, or (0) a backup. */
void state_fetch(compute_t *c, uint64_t donor)
{
    mail_t *m = mail_new(MAIL_FETCH);
    if (!m) return;
    c->state.fetch_donor = donor;
    c->state.fetch_tries++;
    m->hdr.stage = (uint16_t)c->stage;
    m->peer = donor;
    m->hdr.mb = (uint64_t)((donor ? FETCH_DOWNLOAD_S : FETCH_BACKUP_S) * 1000);
    c->state.fetch_kind = donor ? START_DOWNLOAD : START_BACKUP;
    c->phase = PH_FETCH;
    c->state.fetching = 1;
    compute_out(c, m);
}

/* The live peer of this node's stage with the highest version, not `skip`,
 * at least at version `min`, and not known to be laid out in another split
 * than this node (its state would not fit; `known`: known to be laid out
 * in this node's); 0 none. */
static uint64_t s_stage_donor(const compute_t *c, uint64_t skip, uint32_t min, int known)
{
    uint64_t donor = 0;
    uint32_t best = 0;
    for (int i = 0; c->seen.view && i < c->seen.view->n; i++) {
        const view_peer_t *p = &c->seen.view->p[i];
        if ((plan_chosen(p->plan) || known) && p->plan != (int)c->model.split) continue;
        if (p->stage == c->stage && p->health != PEER_GONE && p->id != skip && p->version >= min && (!donor || p->version >= best)) {
            donor = p->id;
            best = p->version;
        }
    }
    return donor;
}

/* This node was laid out anew in another split of the run (plan_adopt),
 * with its initial weights: the stage's state from the live peer of the
 * stage known to hold that split with the highest version above this
 * node's, as a joiner downloads it (a fetch under way starts again in the
 * new layout).  1 when a fetch started; 0 when no such peer is known (the
 * weights stay as they are). */
int state_take_split(compute_t *c)
{
    uint64_t donor = s_stage_donor(c, 0, (uint32_t)c->version + 1, 1);
    if (!donor && !c->state.fetching) return 0;
    if (!c->state.fetching) c->state.fetch_from = -1;   /* not a move: the stage stays */
    if (donor) c->state.fetch_tries = 0;
    state_fetch(c, donor ? donor : c->state.fetch_donor);
    return 1;
}

/* The donor of a download did not deliver (why): another live peer of the
 * stage (three tries in all), else a backup, else the initial weights. */
static void s_fetch_elsewhere(compute_t *c, const char *why)
{
    uint64_t next = c->state.fetch_tries < 3 ? s_stage_donor(c, c->state.fetch_donor, 0, 0) : 0;
    char line[256];
    snprintf(line, sizeof line, "%s; %s", why, next ? "asking another peer of the stage" : "looking for a backup");
    compute_say(c, line);
    state_fetch(c, next);
}

/* While downloading: a donor the peer table has declared gone will not
 * deliver; ask elsewhere at once instead of waiting out the fetch. */
void state_check_donor(compute_t *c)
{
    if (c->phase != PH_FETCH || c->state.fetch_kind != START_DOWNLOAD || !c->state.fetch_donor) return;
    const view_peer_t *p = peer_view_find(c->seen.view, c->state.fetch_donor);
    if (!p || p->health == PEER_GONE) s_fetch_elsewhere(c, "the stage's peer asked for its state is gone");
}

/* The split's largest stage in parameters over this stage's, at least 1: how
 * much longer than this stage's the busiest stage's compute per microbatch is
 * reckoned (a stage-0 node holding the embedding alone, --split late, computes
 * little itself). */
static double s_busiest(const compute_t *c)
{
    size_t most = c->lay.nparams;
    for (int k = 0; k < c->nstages; k++) {
        size_t n = stage_num_params(&c->model, k, c->nstages);
        if (n > most) most = n;
    }
    return c->lay.nparams ? (double)most / (double)c->lay.nparams : 1.0;
}

/* The per-stage objects: made at start and again after a move. */
int state_stage_setup(compute_t *c)
{
    c->issue.busiest = s_busiest(c);
    c->shape.in_n = stage_in_size(&c->lay, c->shape.B, c->shape.T);
    c->shape.out_n = stage_out_size(&c->lay, c->shape.B, c->shape.T);
    if (!c->cfg.modelled && !(c->work.gs = grad_scratch_new(&c->lay, c->shape.B, c->shape.T))) return -1;
    if (schedule_setup_recompute(c) < 0) return -1;
    stash_init(&c->delay.stash, c->st ? c->lay.nparams : 1, c->o->stash == STASH_2BW);
    c->delay.fwd_for = c->delay.fwd_chosen = -1;
    c->delay.ewma = -1;
    c->upd.bwd_count = 0;
    c->upd.loss_sum = 0;
    c->upd.loss_n = 0;
    c->count.busy_s = 0;
    c->count.held_s = c->count.held_from = 0;
    c->count.fwd_done = 0;
    if (c->stage == 0 && c->issue.data && !c->issue.batch.targets && data_batch_alloc(c->issue.data, &c->issue.batch, c->shape.B) < 0) return -1;
    if (c->stage == 0 && !c->issue.targets_wire && !(c->issue.targets_wire = calloc(c->shape.targets_len, 1))) return -1;
    if (c->stage == 0 && !c->issue.data && !c->issue.batch.targets && !(c->issue.batch.targets = calloc(c->shape.targets_n, sizeof(int)))) return -1;
    return 0;
}

/* Drops the per-stage objects (state_stage_setup's) and the work held:
 * records, slots, tensors waiting, the stash. */
void state_stage_teardown(compute_t *c)
{
    pending_clear(&c->work.acts);
    pending_clear(&c->work.grads);
    pending_clear(&c->work.ahead);
    pending_clear(&c->work.last);
    for (int i = 0; i < REC_MAX; i++)
        if (c->work.rec[i].used) {
            view_peer_returned(c, c->work.rec[i].to, 0, 0);
            free(c->work.rec[i].targets);   /* a record owns its targets */
        }
    memset(c->work.rec, 0, sizeof c->work.rec);
    c->work.inflight = 0;
    for (int i = 0; i < c->work.npool; i++) acts_destroy(&c->work.pool[i]);
    acts_destroy(&c->work.pool[EVAL_SLOT]);
    memset(c->work.slot_used, 0, sizeof c->work.slot_used);
    c->work.npool = 0;
    grad_scratch_destroy(&c->work.gs);
    acts_destroy(&c->work.redo);
    stash_fini(&c->delay.stash);
    free(c->delay.fwd_w);
    c->delay.fwd_w = NULL;
    mail_free(c->state.avg_pending);
    c->state.avg_pending = NULL;
}

/* A fetch ended (blob NULL: nothing came): serve the stage from what there is. */
void state_on_fetched(compute_t *c, mail_t *m)
{
    if (c->phase != PH_FETCH || m->hdr.stage != c->stage || m->peer != c->state.fetch_donor) return;   /* late: a fetch given up */
    state_blob_t *b = m->state;
    /* a snapshot older than the state here (its checkpoint's: a backup can be older) is not taken */
    int got = b && b->nparams == c->lay.nparams && b->version >= c->version;
    /* no backup came, but a trained peer serves the stage by now (back from a partition, or just joined); one
     * at version 0 may be fetching it as this node did (two nodes that moved to it at once waited on each other) */
    uint64_t late = !got && !c->state.fetch_donor && c->state.fetch_tries < 3 ? s_stage_donor(c, 0, 1, 0) : 0;
    if (late) {
        compute_say(c, "no backup of the stage came, but a peer serves it now: downloading from it");
        state_fetch(c, late);
        return;
    }
    if (got) {
        if (c->st) {
            size_t np = c->lay.nparams;
            memcpy(c->st->params, b->data, sizeof(float) * np);
            memcpy(c->st->m, b->data + np, 2 * sizeof(float) * np);
            c->st->version = b->version;
        }
        c->version = b->version;
    }
    if (c->state.fetch_kind == START_DOWNLOAD && !got) {   /* a joiner's or a mover's: another peer, else a backup */
        s_fetch_elsewhere(c, "no state from the stage's peer in time");
        return;
    }
    char line[256];
    const char *how = got ? (b->backup ? "backup" : "downloaded") : c->version > 0 ? "checkpoint" : "initial";
    if (c->state.fetch_from >= 0) {
        metrics_event(c->cfg.metrics, "move", "\"from\":%d,\"to\":%d,\"why\":%s,\"version\":%lld,\"state\":%s",
                      c->state.fetch_from, c->stage, c->state.fetch_why, (long long)c->version, how);
        snprintf(line, sizeof line, "moved from stage %d to stage %d (%s); its state %s at version %lld", c->state.fetch_from, c->stage,
                 c->state.fetch_why, got ? how : "not found, initial weights", (long long)c->version);
        compute_say(c, line);
        c->state.last_move = compute_now(c);
    } else {
        metrics_event(c->cfg.metrics, "resume", "\"version\":%lld,\"from\":%s", (long long)c->version, how);
        if (got) snprintf(line, sizeof line, "stage %d %s at version %lld", c->stage, b->backup ? "resumed from a backup" : "downloaded",
                          (long long)c->version);
        else if (c->version > 0)
            snprintf(line, sizeof line, "no newer state of stage %d came: it resumes from its checkpoint at version %lld", c->stage,
                     (long long)c->version);
        else snprintf(line, sizeof line, "no backup of stage %d found: it starts from its initial weights", c->stage);
        compute_say(c, line);
    }
    c->phase = PH_RUN;
    c->state.fetching = 0;
    compute_send_self(c, MAIL_SELF);
}

/* Lays this node out as stage `stage` of the split of model, with that
 * stage's initial weights; the work it held is dropped (the data stage
 * re-issues it).  0; -1 when the new stage cannot be made (nothing changed);
 * -2 when its activations cannot be (the node has failed). */
int state_relayout(compute_t *c, const model_config_t *model, int stage)
{
    char err[300];
    stage_state_t *st = NULL;
    stage_t lay;
    if (stage_init(&lay, model, stage, c->nstages, err, sizeof err) < 0) return -1;
    if (!c->cfg.modelled && !(st = stage_state_new(model, stage, c->nstages, c->o->seed, err, sizeof err))) return -1;
    state_stage_teardown(c);
    stage_state_destroy(&c->st);
    c->st = st;
    c->lay = lay;
    c->model = *model;
    c->lay.threads = c->o->threads;
    if (st) st->s.threads = c->o->threads;
    c->version = st ? st->version : 0;
    c->stage = stage;
    delay_window_reset(c);   /* another path: measured again */
    metrics_set_stage(c->cfg.metrics, stage);
    if (state_stage_setup(c) < 0) {
        char w[96];
        snprintf(w, sizeof w, "out of memory for stage %d's activations", stage);
        compute_fail(c, w);
        return -2;
    }
    return 0;
}

/* Moves this node to stage `to`: drops its work at the old stage (the data
 * stage re-issues it) and fetches the new stage's state from a peer of it
 * (or a backup); serving resumes when it arrives (state_on_fetched).  A
 * move to the data stage takes the data first (balance_take_data); it
 * stays where it is when it cannot. */
void state_move(compute_t *c, int to, const char *why)
{
    int from = c->stage;
    c->balance.drain_to = -1;
    if (to == 0 && balance_take_data(c) < 0) return;
    if (state_relayout(c, &c->model, to) < 0) return;
    /* what was applied at the old stage says nothing of the new one's microbatches: remembered, it
     * answered "applied already" (DUP) to microbatches this node applied only at its old stage */
    applied_clear(&c->work.applied);
    compute_trace(c, TRACE_MOVE, (uint64_t)to, c->version);
    c->state.fetch_from = from;
    c->state.fetch_tries = 0;
    snprintf(c->state.fetch_why, sizeof c->state.fetch_why, "%s", why);
    compute_send_self(c, MAIL_SELF);   /* the network side refuses the old stage's tensors from now on */
    state_fetch(c, s_stage_donor(c, 0, 0, 0));
}
