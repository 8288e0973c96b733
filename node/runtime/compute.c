/* compute.c: the compute side of a node (compute.h): the asynchronous
 * 1F1B schedule with weight stashing (or the gpipe baseline), routing of
 * microbatches to the next stage, optimizer updates, re-issue of lost
 * microbatches, evaluation, backups, checkpoints, within-stage averaging and
 * moves to other stages. */
#include "node/runtime/compute.h"
#include "compress/codec.h"
#include "node/engine/modelfile.h"
#include "node/engine/rng.h"
#include "node/runtime/applied.h"
#include "node/runtime/evalsum.h"
#include "node/runtime/pending.h"
#include "node/runtime/router.h"
#include "node/runtime/stash.h"
#include "node/runtime/window.h"
#include "node/engine/staleness.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define POOL_MAX 64          /* activation slots (microbatches held at once) */
#define EVAL_SLOT POOL_MAX   /* one more, evaluation's own: it never waits on training work in flight */
#define REC_MAX 256          /* microbatch records */
#define AVG_EVERY 20         /* updates between within-stage averaging (weights sent as fp16) */
#define AVG_PEERS 2          /* to this many live peers of the stage, in turn (bounded: a stage may have hundreds) */
#define STALE_S 120.0        /* a non-data stage forgets a microbatch after this */
#define MAX_TRIES 20         /* a data-stage microbatch is given up after this many issues */
#define BACKUP_EVERY 20      /* backup snapshots of a stage served by one node: at most every 20 updates, */
#define BACKUP_MIN_S 60.0    /* at most once a minute, */
#define BACKUP_BUDGET 0.05   /* and only when they stay within 5% of the bytes this node sends */
#define FETCH_DOWNLOAD_S 30.0   /* a stage's state from a serving peer must begin to come within this long, */
#define FETCH_BACKUP_S 5.0      /* from a backup that may not exist this long (then it goes on while it comes) */
#define MOVE_FIRST_S 20.0     /* no move before a node has run this long, */
#define MOVE_BALANCE_S 120.0  /* nor a move for speed (not to fill an empty stage) before this: rates settle first */
#define MOVE_COOLDOWN_S 60.0  /* nor sooner than this after its last move */
#define MOVE_GAIN 1.2         /* the slowest stage must get at least this much faster */
#define ALONE_S 600.0         /* a node that had peers and has seen none alive this long gives up */
#define PLAN_PROBES 3         /* --split auto: forwards the choosing data stage times (the best counts) */
#define PLAN_WAIT_S 20.0      /* and how long it waits for a round trip to stage 1 before choosing without one */
#define FINAL_EVAL_S 60.0     /* the last stage of a complete run waits this long at most for the final evaluation */
#define FINAL_GAP_S 10.0      /* and gives up on the rest of it when none of its batches has come for this long */
#define EVAL_STALE_S 20.0     /* an evaluation round none of whose batches came for this long is reported as it is */
#define REOPEN_S 30.0         /* a data stage whose final evaluation went out at --steps while the swarm's count of
                                 completed microbatches stays short trains on after this long (the count comes by
                                 gossip, straight from last-stage nodes: in a large swarm seconds apart) */
#define CLOSED_HOLD_S (REOPEN_S / 2)   /* a stage the final evaluation passed takes no training for this long:
                                         the data stage trains on (s_train_on) only REOPEN_S after it sent it */
#define FINAL_LAG_S 5.0       /* a data stage behind a complete count sends its final evaluation this long (or two of
                                 its round trips) after it saw the count complete: the gradients of the last
                                 microbatches, which the gossip overtakes, bring its version to --steps first */

typedef struct {
    int used;
    uint64_t mb;          /* microbatch id */
    int slot;             /* activation slot */
    int64_t version;      /* weights its forward used */
    uint64_t from;        /* peer that sent the activation (0 on the data stage) */
    uint64_t to;          /* peer the output went to (0 on the last stage, or none yet) */
    double t;             /* when its forward ran (or when it last failed to go out) */
    uint64_t cursor;      /* data stage: the data position, to re-issue it */
    int tries;            /* data stage: times issued */
    int attempt;          /* the issue attempt this record carries (flags bits 8..15) */
    uint8_t *targets;     /* the targets its output carries (owned; NULL until it first goes out or waits),
                             kept to send it again when its next-stage peer is gone */
    int held;             /* its output waits for a route */
} mbrec_t;

enum { PH_FETCH = 0, PH_RUN, PH_DONE };

struct compute {
    compute_cfg_t c;              /* configuration (view, st, data moved out) */
    const opts_t *o;              /* == c.o */
    model_config_t cfg;           /* the model as this node splits it: o->cfg with the split of the plan */
    int plan;                     /* the run's split (SPLIT_EVEN, SPLIT_LATE); -1: --split auto, not chosen yet
                                     (laid out even until then; the data stage issues nothing before) */
    double plan_wait_from;        /* data stage, choosing: when every stage first had a peer (0: not yet) */
    int probes, probing;          /* choosing: forwards timed so far; the step just run was one */
    double probe_best;            /* their shortest, seconds */
    int stage, nstages, B, T;
    size_t in_n, out_n, targets_n;
    stage_t lay;                  /* the stage's layout */
    stage_state_t *st;            /* its training state (NULL when modelled) */
    int64_t version;              /* weight version (== st->version when not modelled) */
    int saved_stage;              /* the stage the checkpoint file holds (compute_save_checkpoint) */
    int64_t saved_version;        /* and its version (-1: nothing written by this process) */
    float dummy;                  /* modelled: the "weights" the stash tracks */
    data_t *data;
    int phase;                    /* PH_* */
    int fetching;                 /* a fetch is under way: st is not the stage's state yet (never saved) */
    int fetch_from;               /* moving: the stage left (-1 at start) */
    int fetch_kind;               /* START_DOWNLOAD or START_BACKUP */
    uint64_t fetch_donor;         /* the peer asked (0: backup holders) */
    int fetch_tries;              /* fetches of this stage so far */
    char fetch_why[128];          /* why the move */
    acts_t *pool[POOL_MAX + 1];   /* training's, then EVAL_SLOT */
    int npool, slot_used[POOL_MAX];   /* training's slots only: EVAL_SLOT is never held */
    grad_scratch_t *gs;
    stash_t stash;
    float *fwd_w;                 /* --staleness predict: the forward weights of version fwd_for */
    int64_t fwd_for;              /* version fwd_w holds (-1: forwards run at the live weights) */
    int64_t fwd_chosen;           /* version whose forward weights are chosen (-1: none yet) */
    double delay_ewma;            /* measured weight delay in updates (smoothed; -1: none yet) */
    int delay_max, delay_n;       /* largest delay and count of the backwards since the last update */
    double delay_sum;             /* their sum */
    uint64_t stash_mismatch;      /* backwards on weights their forward did not use (none: 2bw refuses them) */
    uint64_t stash_refused;       /* 2bw: backwards refused, their forward's weights folded away */
    int window_need;              /* data stage: microbatches in flight the round trip asks for */
    double busiest;               /* the split's largest stage in parameters over this one's (>= 1) */
    int micro_said;               /* the micro last named in a warning (0: none) */
    window_t win;                 /* data stage: the window the queueing along the pipeline allows */
    mbrec_t rec[REC_MAX];
    int inflight;                 /* records in use */
    pending_t acts, grads;        /* tensors waiting */
    router_t router;              /* per peer we send to */
    uint64_t view_gen;            /* views taken so far */
    int *pick_rix;                /* routes of the picked stage's peers (router_index), for: */
    int pick_cap, pick_stage, pick_routes;
    uint64_t pick_gen;            /* the view (view_gen), stage and route count they were found for; 0: none */
    applied_t applied;            /* microbatches whose gradient this node accumulated */
    peer_view_t *view;            /* the latest snapshot of the peer table */
    int *by_stage;                /* view entries grouped by stage: stage s at by_stage[stage_at[s] .. stage_at[s + 1]) */
    int stage_at[MODEL_STAGES_MAX + 1];
    int view_live;                /* live peers in the view */
    int live_at[MODEL_STAGES_MAX]; /* live peers of each stage in the view */
    int rtt_for;                  /* the stage rtt_mean/rtt_min were computed for with this view, -1 none */
    double rtt_mean, rtt_min;     /* s_rtt's result, kept until the view or the stage changes */
    batch_t batch;                /* data stage: the batch being issued */
    uint8_t *targets8;            /* its targets as sent (one byte each) */
    uint64_t cursor, mb_origin, mb_seq;   /* data stage: its position in the data; microbatch ids (s_issue) */
    int bwd_count;                /* backward passes since the last update */
    double loss_sum;
    int loss_n;
    double last_loss;             /* last stage: the last update's mean loss, NaN none */
    double turn_mean, turn_dev;   /* data stage: round-trip time of a microbatch */
    uint64_t retries, lost, drops, tokens, completed, skipped;
    double busy_s;                /* compute seconds (rate) */
    uint64_t fwd_done;
    evalsum_t evals;              /* evaluation rounds being summed (last stage, or a single stage) */
    double final_early_t;         /* last stage: when a final evaluation that came whole before the run was
                                     complete began to arrive (0: none); REOPEN_S later its data stage trains on */
    uint64_t final_receiver;      /* last stage, waiting: the node the final evaluation's batches go to */
    double final_wait_from;       /* last stage: when it began waiting for the final evaluation (a final
                                     round begun before came too early: not the one awaited) */
    uint64_t ckpt_failures;       /* periodic checkpoints not written */
    int avg_refused;              /* this stage's weights take more than a frame may: said once, not averaged */
    int closing;                  /* the run is complete: no more training here, only its final evaluation (sent by
                                     the data stage, seen passing by a middle stage, awaited by the last stage) */
    double passed_t;              /* a stage after the data stage: when the final evaluation passed (closing; 0: not) */
    double final_wait_until;      /* last stage: closing, waiting for the final evaluation until then (0: not) */
    double final_sent;            /* data stage: when its final evaluation went out (0: not yet, or trained on after it) */
    int final_due;                /* data stage: closing, its final evaluation could not go out yet (no memory) */
    int final_short;              /* data stage: its final evaluation went out with the swarm's count short */
    int reopened;                 /* data stage: trained on after its final evaluation (or, without evaluations,
                                     after it stopped at --steps): s_reopened_short says when it has done enough */
    double count_done_t;          /* data stage: when it first saw the swarm's count complete (0: not yet) */
    double last_short_t;          /* data stage, no evaluations: since when it has stopped (version at --steps,
                                     count complete) while a last-stage node's own count is short (0: not) */
    mail_t *avg_pending;          /* a replica's weights, averaged into ours right after our next update: the
                                     forwards of this version used ours, and their backwards must find them */
    double t0;                    /* when this node started */
    double last_backup;           /* when the last backup snapshot was pushed */
    double last_move;             /* when this node last moved to another stage */
    uint64_t backup_sent_mark;    /* bytes_sent at the last backup */
    int max_inflight, auto_window;
    double next_timeout, next_move;
    double last_company;          /* when the view last held a live peer (0: never yet) */
    mail_t *out_head, *out_tail;  /* mail produced, not yet flushed */
    double flops;                 /* work of the current step */
    int status, done;
    char why[256];
};

static void s_eval_batch(compute_t *c, uint32_t round, int final, int nval, int i, const acts_t *a);
static void s_emit_eval(compute_t *c, const evalsum_round_t *r);
static int s_issue_eval(compute_t *c, uint32_t flags);
static void s_issue_final_eval(compute_t *c);
static void s_apply_avg(compute_t *c);
static void s_backup(compute_t *c);

static double s_now(const compute_t *c) { return rt_now(&c->c.clock); }

static int s_last(const compute_t *c) { return c->stage == c->nstages - 1; }

static void s_fail(compute_t *c, const char *why)
{
    snprintf(c->why, sizeof c->why, "%s", why);
    c->status = 1;
    c->done = 1;
    c->phase = PH_DONE;
}

/* Queues mail for the network side (sent at the next flush). */
static void s_out(compute_t *c, mail_t *m)
{
    if (!m) return;
    m->q.next = NULL;
    if (c->out_tail) c->out_tail->q.next = &m->q;
    else c->out_head = m;
    c->out_tail = m;
}

void compute_flush(compute_t *c)
{
    mail_t *m = c->out_head;
    c->out_head = c->out_tail = NULL;
    while (m) {
        mail_t *next = (mail_t *)m->q.next;
        m->q.next = NULL;
        c->c.post(c->c.post_arg, m);
        m = next;
    }
}

/* A message refused by the compute side: counted, logged. */
static void s_drop(compute_t *c, const char *why, uint64_t from)
{
    c->drops++;
    char id[9];
    node_id_short(from, id);
    metrics_event(c->c.metrics, "drop", "\"why\":%s,\"from\":%s", why, id);
}

static void s_trace(compute_t *c, int what, uint64_t mb, int64_t v)
{
    if (c->c.obs.trace) c->c.obs.trace(c->c.obs.arg, what, mb, v);
}

/* ---- exactly once per node ---- */

/* mb (attempt flags as an ACT carries them) counts as applied here: the
 * first attempt (1) by the ids remembered exactly, a re-issue by its
 * origin's floor too (applied.h) */
static int s_applied(const compute_t *c, uint64_t mb, uint32_t flags)
{
    return applied_has(&c->applied, mb, MB_ATTEMPT(flags) != 1);
}

/* Remembers that mb's gradient was accumulated here. */
static void s_mark_applied(compute_t *c, uint64_t mb)
{
    applied_mark(&c->applied, mb);
    s_trace(c, TRACE_APPLY, mb, c->version);
}

/* ---- the peer table as seen here ---- */

/* Takes a new snapshot of the peer table and groups it by stage. */
static void s_take_view(compute_t *c, peer_view_t *v)
{
    int *ix = malloc(sizeof(int) * (size_t)(v->n > 0 ? v->n : 1));
    if (!ix) { free(v); return; }   /* keep the old one */
    free(c->view);
    free(c->by_stage);
    c->view = v;
    c->view_gen++;
    c->by_stage = ix;
    int K = c->nstages;
    c->view_live = 0;
    for (int i = 0; i < v->n; i++) c->view_live += v->p[i].health != PEER_GONE;
    memset(c->stage_at, 0, sizeof(int) * (size_t)(K + 1));
    for (int i = 0; i < v->n; i++)
        if (v->p[i].stage >= 0 && v->p[i].stage < K) c->stage_at[v->p[i].stage + 1]++;
    for (int s = 0; s < K; s++) c->stage_at[s + 1] += c->stage_at[s];
    int fill[MODEL_STAGES_MAX];
    memcpy(fill, c->stage_at, sizeof(int) * (size_t)K);
    memset(c->live_at, 0, sizeof(int) * (size_t)K);
    for (int i = 0; i < v->n; i++)
        if (v->p[i].stage >= 0 && v->p[i].stage < K) {
            ix[fill[v->p[i].stage]++] = i;
            c->live_at[v->p[i].stage] += v->p[i].health != PEER_GONE;
        }
    c->rtt_for = -1;
    if (c->router.n > 2 * v->n + 64) router_prune(&c->router, v);   /* amortized: the routes of forgotten peers */
}

/* The view entries of stage s (count in *n). */
static const int *s_stage_peers(const compute_t *c, int s, int *n)
{
    if (!c->view || s < 0 || s >= c->nstages) { *n = 0; return NULL; }
    *n = c->stage_at[s + 1] - c->stage_at[s];
    return c->by_stage + c->stage_at[s];
}

/* Live peers of `stage` in the view (self excluded). */
static int s_stage_live(const compute_t *c, int stage)
{
    return c->view && stage >= 0 && stage < c->nstages ? c->live_at[stage] : 0;
}

static int s_all_stages_served(const compute_t *c)
{
    for (int s = 0; s < c->nstages; s++)
        if (s != c->stage && s_stage_live(c, s) == 0) return 0;
    return 1;
}

/* Mean smoothed and minimum round trips to the live peers of the
 * neighbouring stages, the links this node's work crosses (ms; 0 unknown). */
static void s_rtt(compute_t *c, double *mean, double *min)
{
    if (c->rtt_for != c->stage) {
        double sum = 0, lo = 0;
        int n = 0;
        for (int s = c->stage - 1; s <= c->stage + 1; s += 2) {
            int k;
            const int *ix = s_stage_peers(c, s, &k);
            for (int i = 0; i < k; i++) {
                const view_peer_t *p = &c->view->p[ix[i]];
                if (p->health == PEER_GONE || p->rtt_ms <= 0) continue;
                sum += p->rtt_ms;
                if (p->rtt_min_ms > 0 && (lo == 0 || p->rtt_min_ms < lo)) lo = p->rtt_min_ms;
                n++;
            }
        }
        c->rtt_mean = n ? sum / n : 0;
        c->rtt_min = lo;
        c->rtt_for = c->stage;
    }
    *mean = c->rtt_mean;
    if (min) *min = c->rtt_min;
}

static uint64_t s_pick(compute_t *c, int stage, uint64_t avoid)
{
    int n;
    const int *ix = s_stage_peers(c, stage, &n);
    if (c->pick_gen != c->view_gen || c->pick_stage != stage || c->pick_routes != c->router.n) {
        if (n > c->pick_cap) {
            int *r = realloc(c->pick_rix, sizeof(int) * (size_t)n);
            if (!r) return router_pick(&c->router, c->view, ix, n, avoid);
            c->pick_rix = r;
            c->pick_cap = n;
        }
        router_index(&c->router, c->view, ix, n, c->pick_rix);
        c->pick_gen = c->view_gen;
        c->pick_stage = stage;
        c->pick_routes = c->router.n;
    }
    return router_pick_ix(&c->router, c->view, ix, c->pick_rix, n, avoid);
}

/* Peer returned (or lost: turnaround 0) a microbatch (router_returned). */
static void s_peer_returned(compute_t *c, uint64_t peer, double turnaround, int silent)
{
    router_returned(&c->router, peer, turnaround, silent);
}

/* ---- slots and records ---- */

static int s_slot_get(compute_t *c)
{
    for (int i = 0; i < c->npool; i++)
        if (!c->slot_used[i]) { c->slot_used[i] = 1; return i; }
    if (c->npool == POOL_MAX) return -1;
    acts_t *a = NULL;
    if (!c->c.modelled && !(a = acts_new(&c->lay, c->B, c->T))) return -1;
    c->pool[c->npool] = a;
    c->slot_used[c->npool] = 1;
    return c->npool++;
}

/* The evaluation's slot (an evaluation batch is forwarded and sent on at
 * once: a closing run's training keeps every other slot in flight, which
 * held back its final evaluation for good).  -1 when out of memory. */
static int s_eval_slot(compute_t *c)
{
    if (!c->c.modelled && !c->pool[EVAL_SLOT] && !(c->pool[EVAL_SLOT] = acts_new(&c->lay, c->B, c->T))) return -1;
    return EVAL_SLOT;
}

static mbrec_t *s_rec_new(compute_t *c)
{
    for (int i = 0; i < REC_MAX; i++)
        if (!c->rec[i].used) {
            memset(&c->rec[i], 0, sizeof c->rec[i]);
            c->rec[i].used = 1;
            c->rec[i].slot = -1;
            c->inflight++;
            return &c->rec[i];
        }
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
    free(r->targets);
    r->targets = NULL;
    r->held = 0;
    if (r->slot >= 0) c->slot_used[r->slot] = 0;
    stash_unref(&c->stash, r->version, c->version);
    r->used = 0;
    c->inflight--;
}

static const float *s_params(const compute_t *c) { return c->st ? c->st->params : &c->dummy; }

/* ---- mail out ---- */

/* A SEND of n floats (copied from x; NULL when modelled) to peer. */
static mail_t *s_tensor_mail(compute_t *c, int type, uint64_t peer, uint64_t mb, const float *x, size_t n, int codec)
{
    mail_t *m = mail_new(MAIL_SEND);
    if (!m) return NULL;
    if (!c->c.modelled && x) {
        m->x = malloc(sizeof(float) * n);
        if (!m->x) { mail_free(m); return NULL; }
        memcpy(m->x, x, sizeof(float) * n);
    }
    m->n = n;
    m->codec = codec;
    wire_hdr_init(&m->hdr, (wire_type_t)type);
    m->hdr.mb = mb;
    m->hdr.wversion = (uint32_t)c->version;
    m->hdr.stage = (uint16_t)(type == WIRE_ACT ? c->stage + 1 : type == WIRE_GRAD ? c->stage - 1 : c->stage);
    m->peer = peer;
    m->raw_bytes = WIRE_HDR_LEN + n * sizeof(float);
    return m;
}

static void s_send_self(compute_t *c, int kind)
{
    mail_t *m = mail_new(kind);
    if (!m) return;
    self_info_t *s = &m->self;
    s->stage = c->stage;
    s->plan = c->plan;
    s->in_n = c->in_n;
    s->out_n = c->out_n;
    s->nparams = c->lay.nparams;
    s->version = c->version;
    s->rate = c->busy_s >= 0.5 ? (float)(c->fwd_done / c->busy_s) : 0.0f;
    s->completed = c->completed;
    s->loss = c->last_loss;
    s->done = c->done;
    s->status = c->status;
    s_out(c, m);
}

/* ---- weight delay ---- */

/* The delay budget in updates at this (data) stage: --max-delay, and when
 * it was not given, one more when --split auto chose the late split: stage
 * 0 then holds the embedding alone, and the blocks, a stage later each, see
 * about the delays the default budget gives them under the even split
 * (README, "Where the blocks sit"). */
static int s_max_delay(const compute_t *c)
{
    return c->o->max_delay + (c->o->split == SPLIT_AUTO && c->plan == SPLIT_LATE && !c->o->max_delay_given);
}

/* The weight delay budget of the current version in microbatches beyond
 * --micro (stale_budget_micro): --max-delay x micro, let in as the learning
 * rate decays with --staleness ramp; 0 under gpipe. */
static int s_budget_micro(const compute_t *c)
{
    if (c->o->schedule == SCHED_GPIPE) return 0;
    return stale_budget_micro(&c->o->optim, c->o->staleness, (int)c->version, s_max_delay(c), c->o->micro);
}

/* The delay budget lets the data stage start another microbatch: FIFO
 * completion puts its backward after bwd_count + inflight others of this
 * update (s_micro_needed). */
static int s_budget_room(const compute_t *c)
{
    return c->bwd_count + c->inflight < c->o->micro + s_budget_micro(c);
}

/* The window, not the delay budget, is what holds the data stage back
 * from issuing more. */
static int s_window_held(const compute_t *c)
{
    return c->inflight >= c->max_inflight && s_budget_room(c);
}

/* The most microbatches the automatic window lets the data stage keep in
 * flight: 8 x stages microbatches of 8 sequences or more, of smaller ones
 * 8 x stages x (8 / sequences, rounded down), at most 64 x stages sequences
 * (each holds activations at every stage, so the cap is one of memory),
 * within the activation slots. */
static int s_window_cap(const compute_t *c)
{
    int cap = 8 * c->nstages * (c->B < 8 ? 8 / c->B : 1);
    return cap > POOL_MAX ? POOL_MAX : cap;
}

/* The congestion window from scratch (a new stage, a new path): 2 x
 * stages, within [stages, s_window_cap] as the round trip's need is. */
static void s_window_reset(compute_t *c)
{
    window_init(&c->win, 2 * c->nstages, c->nstages, s_window_cap(c));
}

/* The same budget in updates: the most a backward may now be late. */
static int s_delay_budget(const compute_t *c)
{
    return stale_budget_updates(s_budget_micro(c), c->o->micro);
}

/* The delay this stage runs with now: the measured one rounded up, so that
 * a stage some of whose microbatches are late predicts for them (as solo
 * --delay does), within the budget. */
static int s_delay_now(const compute_t *c)
{
    int d = c->delay_ewma > 0.05 ? (int)ceil(c->delay_ewma - 0.05) : 0, b = s_delay_budget(c);
    return d < b ? d : b;
}

/* The weights the live version's forwards (and so their backwards) use. */
static const float *s_version_weights(const compute_t *c)
{
    return c->fwd_for == c->version ? c->fwd_w : s_params(c);
}

/* At the first forward of a version: chooses its weights, the live ones or
 * (--staleness predict) those predicted s_delay_now() updates ahead. */
static void s_choose_weights(compute_t *c)
{
    if (c->fwd_chosen == c->version) return;
    c->fwd_chosen = c->version;
    c->fwd_for = -1;
    int d = s_delay_now(c);
    if (!c->st || !(c->o->staleness & STALE_PREDICT) || d <= 0 || c->version == 0) return;
    if (!c->fwd_w && !(c->fwd_w = malloc(sizeof(float) * c->lay.nparams))) return;   /* no memory: live weights */
    stale_forward_weights(c->fwd_w, &c->st->s, &c->o->optim, c->o->staleness, c->st->params, c->st->m, c->st->v,
                          (int)c->version, d);
    c->fwd_for = c->version;
}

/* Microbatches the full delay budget lets the data stage keep in flight:
 * (--max-delay + 1) x --micro (s_micro_needed). */
static int s_budget_holds(const compute_t *c)
{
    return (s_max_delay(c) + 1) * c->o->micro;
}

/* The micro an update would need for the window the round trip asks for
 * (window_need) to fit the delay budget: microbatch j's backward at the
 * data stage follows the backwards of the ones in flight before it, so it
 * is at most D updates late while bwd_count + inflight < (D + 1) x micro.
 * 0 when the current micro is enough (or this is not the data stage). */
static int s_micro_needed(const compute_t *c)
{
    int D = s_max_delay(c);
    if (c->stage != 0 || c->o->schedule == SCHED_GPIPE || c->window_need <= s_budget_holds(c)) return 0;
    return (c->window_need + D) / (D + 1);
}

/* Whether the late split can serve this run at all: a gpt of 3 or more
 * stages whose window adapts to the round trip (not gpipe, not a fixed
 * --max-inflight), and whose budget may grow by an update (not 2bw's). */
static int s_late_split_may_pay(const compute_t *c)
{
    return c->cfg.kind == MODEL_GPT && c->nstages >= 3 && c->auto_window && c->o->stash != STASH_2BW;
}

/* Whether the late split would serve this run better than the even one: it
 * may pay, and the round trip asks for `need` microbatches in flight, at
 * least 1.75 times the `holds` the delay budget holds.
 * Measured (sim, gpt-tiny, 4 stages, micro 4): at 50 ms / 20 Mbit/s (27
 * asked, 12 held: 2.25 x) and 100 ms / 10 Mbit/s (49) the late split ran
 * 1-3% faster and ended 0.9-1.0% lower; at 25 ms / 50 Mbit/s (16: 1.33 x) it
 * ran 6% slower, and gpt-small at 50 ms / 20 Mbit/s, which asks for no more
 * than it holds, 9%: between 1.33 and 2.25 the gain crosses zero near 1.85
 * (linearly), and a choice near there costs little either way. */
static int s_late_split_helps(const compute_t *c, int need, int holds)
{
    return s_late_split_may_pay(c) && 4 * need >= 7 * holds;
}

/* A backward of a microbatch whose forward ran at version v starts now. */
static void s_note_delay(compute_t *c, int64_t v)
{
    int d = (int)(c->version - v);
    c->delay_ewma = c->delay_ewma < 0 ? d : 0.9 * c->delay_ewma + 0.1 * d;
    if (d > c->delay_max) c->delay_max = d;
    c->delay_sum += d;
    c->delay_n++;
    if (!stash_holds(&c->stash, v, c->version)) c->stash_mismatch++;
}

/* The optimizer step, with the lr correction of --staleness (dc is solo's). */
static void s_step(compute_t *c)
{
    optim_adjust_t adj;
    stale_dc_t dc;
    stale_adjust(&adj, &dc, &c->o->optim, c->o->staleness & ~STALE_DC, (int)c->st->version, s_delay_now(c),
                 c->st->params, c->st->params, c->st->v);
    stage_state_step_adjusted(c->st, &c->o->optim, &adj);
}

/* ---- reports ---- */

static double s_view_loss(const compute_t *c)
{
    double loss = NAN;
    int n;
    const int *ix = s_stage_peers(c, c->nstages - 1, &n);
    for (int i = 0; i < n; i++)
        if (isfinite(c->view->p[ix[i]].loss) && c->view->p[ix[i]].loss > 0) loss = c->view->p[ix[i]].loss;
    return loss;
}

static void s_emit_update(compute_t *c, double loss)
{
    const net_counters_t *k = c->c.net;
    uint64_t sent = atomic_load(&k->bytes_sent), raw = atomic_load(&k->bytes_sent_raw);
    int stash = stash_versions(&c->stash, c->version);
    double rtt;   /* the mean round trip to the neighbouring stages' peers */
    s_rtt(c, &rtt, NULL);
    metrics_event(c->c.metrics, "update",
                  "\"version\":%lld,\"tokens\":%llu,\"loss\":%.9g,\"bytes_sent\":%llu,\"bytes_sent_raw\":%llu,"
                  "\"bytes_recv\":%llu,\"bytes_sent_state\":%llu,\"stash\":%d,\"inflight\":%d,\"drops\":%llu,\"retries\":%llu,"
                  "\"delay\":%g,\"delay_max\":%d,\"delay_budget\":%d,\"window\":%d,\"micro_needed\":%d,\"stash_mismatch\":%llu,"
                  "\"stash_refused\":%llu,\"rtt_ms\":%.1f,\"queued\":%.2f",
                  (long long)c->version, (unsigned long long)c->tokens,
                  s_last(c) ? loss : NAN,
                  (unsigned long long)sent, (unsigned long long)raw,
                  (unsigned long long)atomic_load(&k->bytes_recv), (unsigned long long)atomic_load(&k->bytes_sent_state),
                  stash, c->inflight,
                  (unsigned long long)(atomic_load(&k->drops) + c->drops), (unsigned long long)c->retries,
                  c->delay_n ? c->delay_sum / c->delay_n : NAN, c->delay_max, s_delay_budget(c),
                  c->stage == 0 ? c->max_inflight : 0, s_micro_needed(c), (unsigned long long)c->stash_mismatch,
                  (unsigned long long)c->stash_refused, rtt > 0 ? rtt : NAN, c->stage == 0 && c->auto_window ? c->win.queued : NAN);
    if (!c->c.obs.report) return;
    node_report_t r = {0};
    r.stage = c->stage;
    r.nstages = c->nstages;
    r.peers = 1 + c->view_live;
    r.version = c->version;
    r.tokens = c->tokens;
    r.last = s_last(c);
    r.loss = r.last ? loss : s_view_loss(c);
    r.elapsed_s = s_now(c) - c->t0;
    r.bytes_sent = sent;
    r.bytes_sent_raw = raw;
    r.bytes_recv = atomic_load(&k->bytes_recv);
    r.drops = atomic_load(&k->drops) + c->drops;
    r.stash = stash;
    r.inflight = c->inflight;
    r.rtt_ms = rtt;
    c->c.obs.report(c->c.obs.arg, &r);
}

static void s_say(compute_t *c, const char *line)
{
    if (c->c.obs.say) c->c.obs.say(c->c.obs.arg, line);
}

/* ---- the optimizer step and what follows it ---- */

/* The checkpoint of every --save-every updates.  A failure is a `checkpoint`
 * event and, the first time and every tenth after, a line for the user (a
 * node that could not save for a whole run said so only in its metrics). */
static void s_save_periodic(compute_t *c)
{
    char err[300], line[400];
    if (compute_save_checkpoint(c, err, sizeof err) == 0) return;
    metrics_event(c->c.metrics, "checkpoint", "\"ok\":false,\"why\":%s", err);
    if (c->ckpt_failures++ % 10 != 0) return;
    snprintf(line, sizeof line, "checkpoint at version %lld not written: %s", (long long)c->version, err);
    s_say(c, line);
}

/* Sends this node's weights to AVG_PEERS live peers of its stage, from a
 * place in the stage's list that moves on every round (pairwise gossip
 * averaging: the replicas converge, and the bytes do not grow with the stage). */
static void s_average(compute_t *c)
{
    if (frame_bound(c->lay.nparams, codec_from_name("fp16")) > WIRE_FRAME_BYTES_MAX) {
        /* a frame this big never arrives (the receiver's transport resets the connection) */
        if (!c->avg_refused) {
            char line[300];
            snprintf(line, sizeof line, "this stage's %zu parameters take more than %u MiB in fp16, more than a message's "
                     "frame may: its replicas are not averaged (more stages make each smaller)", c->lay.nparams,
                     WIRE_FRAME_BYTES_MAX >> 20);
            s_say(c, line);
        }
        c->avg_refused = 1;
        return;
    }
    int n;
    const int *ix = s_stage_peers(c, c->stage, &n);
    uint64_t round = (uint64_t)c->version / AVG_EVERY;
    int start = n ? (int)(((c->c.id ^ round) * 0x9e3779b97f4a7c15ULL) >> 33) % n : 0;
    for (int k = 0, sent = 0; k < n && sent < AVG_PEERS; k++) {
        const view_peer_t *p = &c->view->p[ix[(start + k) % n]];
        if (p->health == PEER_GONE) continue;
        s_out(c, s_tensor_mail(c, WIRE_AVG, p->id, (uint64_t)c->version, s_params(c), c->lay.nparams, codec_from_name("fp16")));
        sent++;
    }
}

static void s_maybe_backup(compute_t *c)
{
    uint64_t sent = atomic_load(&c->c.net->bytes_sent), snapshot = 3 * c->lay.nparams * sizeof(float);
    if (c->nstages > 1 && c->version % BACKUP_EVERY == 0 && s_now(c) - c->last_backup >= BACKUP_MIN_S
        && (double)(sent - c->backup_sent_mark) * BACKUP_BUDGET >= (double)snapshot) {
        c->last_backup = s_now(c);
        c->backup_sent_mark = sent;
        s_backup(c);
    }
}

/* Counts a finished backward; every `micro` of them, one optimizer step. */
static void s_after_backward(compute_t *c)
{
    if (++c->bwd_count < c->o->micro) return;
    c->bwd_count = 0;
    if (stash_before_update(&c->stash, c->version, s_version_weights(c)) < 0) { s_fail(c, "out of memory for the weight stash"); return; }
    if (c->st) {
        s_step(c);
        if (!isfinite(c->st->last_norm)) { s_fail(c, "a non-finite gradient (training diverged; lower --lr)"); return; }
        c->version = c->st->version;
        s_apply_avg(c);
    } else {
        c->version++;
    }
    c->flops += 16.0 * (double)c->lay.nparams;
    s_trace(c, TRACE_UPDATE, (uint64_t)c->stage, c->version);
    double loss = c->loss_n ? c->loss_sum / c->loss_n : NAN;
    c->loss_sum = 0;
    c->loss_n = 0;
    s_emit_update(c, loss);
    c->delay_max = c->delay_n = 0;
    c->delay_sum = 0;
    if (s_last(c) && isfinite(loss)) c->last_loss = loss;
    s_send_self(c, MAIL_SELF);
    if (c->stage == 0 && c->o->eval_every > 0) {
        if (c->version >= c->o->steps && !c->reopened) s_issue_final_eval(c);
        else if (c->version % c->o->eval_every == 0) s_issue_eval(c, 0);
    }
    s_maybe_backup(c);
    if (c->c.ckpt_path && c->c.ckpt_path[0] && c->version % c->o->save_every == 0) s_save_periodic(c);
    if (c->version % AVG_EVERY == 0) s_average(c);
}

/* ---- forward, backward, routing ---- */

static double s_fwd_flops(const compute_t *c)
{
    return 2.0 * (double)c->lay.nparams * (double)c->B * (double)c->T;
}

/* The peer of the next stage that work with these flags goes to, 0 none: an
 * evaluation's batch for the last stage to its peer of the lowest id (where
 * the evaluation is summed whole), the rest to the router's choice, not
 * `avoid` when another exists. */
static uint64_t s_next_peer(compute_t *c, uint32_t flags, uint64_t avoid)
{
    if ((flags & ACT_FLAG_EVAL) && c->stage + 2 == c->nstages) {
        int n;
        const int *ix = s_stage_peers(c, c->stage + 1, &n);
        return router_pick_lowest(c->view, ix, n, 0);
    }
    uint64_t to = s_pick(c, c->stage + 1, avoid);
    if (!to && avoid) to = s_pick(c, c->stage + 1, 0);
    return to;
}

/* Sends the output of slot to the next stage (s_next_peer).  Returns the
 * peer's id, 0 when there is none. */
static uint64_t s_send_out(compute_t *c, int slot, uint64_t mb, uint32_t flags, const uint8_t *targets, uint64_t avoid)
{
    uint64_t to = s_next_peer(c, flags, avoid);
    if (!to) return 0;
    const float *out = c->pool[slot] ? c->pool[slot]->out : NULL;
    mail_t *m = s_tensor_mail(c, WIRE_ACT, to, mb, out, c->out_n, codec_from_name(c->o->codec));
    if (!m) return 0;
    m->aux = malloc(c->targets_n);
    if (!m->aux) { mail_free(m); return 0; }
    if (targets) memcpy(m->aux, targets, c->targets_n);
    else memset(m->aux, 0, c->targets_n);
    m->aux_len = c->targets_n;
    m->raw_bytes += c->targets_n * sizeof(float);  /* the targets are a tensor too: 4 bytes each as raw fp32, 1 on the wire */
    m->hdr.flags = flags;
    s_out(c, m);
    return to;
}

/* Sends record r's output on (its targets kept in the record) and remembers
 * where it went: 0.  With no peer of the next stage routable (but avoid),
 * the output is held and goes out when one is: -1; -2 when there is no
 * memory to keep its targets. */
static int s_send_act(compute_t *c, mbrec_t *r, const uint8_t *targets, uint64_t avoid)
{
    if (!r->targets) {
        if (!(r->targets = malloc(c->targets_n))) return -2;
        memcpy(r->targets, targets, c->targets_n);
    }
    uint64_t to = s_send_out(c, r->slot, r->mb, (uint32_t)(r->attempt & 0xff) << MB_ATTEMPT_SHIFT, r->targets, avoid);
    r->to = to;
    r->held = !to;
    if (!to) return -1;
    router_sent(&c->router, to);
    return 0;
}

/* Forward of record r (inputs already in its slot). */
static void s_forward(compute_t *c, mbrec_t *r)
{
    s_choose_weights(c);
    r->version = c->version;
    stash_ref(&c->stash, r->version);
    if (!c->c.modelled) stage_forward(&c->lay, s_version_weights(c), c->pool[r->slot]);
    c->tokens += (uint64_t)c->B * c->T;
    c->fwd_done++;
    c->flops += s_fwd_flops(c);
    r->t = s_now(c);
}

/* Backward of record r (dout in its slot unless last); sends din upstream. */
static void s_backward(compute_t *c, mbrec_t *r)
{
    acts_t *a = c->pool[r->slot];
    s_note_delay(c, r->version);
    if (!c->c.modelled) {
        const float *w = stash_params(&c->stash, r->version, c->version, s_version_weights(c));
        float scale = 1.0f / ((float)c->B * c->T * c->o->micro);
        stage_backward(&c->lay, w, c->st->grads, a, c->gs, scale);
    }
    s_mark_applied(c, r->mb);
    c->flops += 2 * s_fwd_flops(c);
    if (c->stage > 0) {
        mail_t *m = s_tensor_mail(c, WIRE_GRAD, r->from, r->mb, a ? a->din : NULL, c->in_n, codec_from_name(c->o->grad_codec));
        if (m) {
            m->feedback = 1;
            m->hdr.flags = (uint32_t)(r->attempt & 0xff) << MB_ATTEMPT_SHIFT;
        }
        s_out(c, m);
    }
}

/* The run's progress: last-stage microbatches of every peer, and ours. */
static uint64_t s_progress(const compute_t *c)
{
    return (c->view ? c->view->completed : 0) + c->completed;
}

static int s_run_complete(const compute_t *c)
{
    return s_progress(c) >= (uint64_t)c->o->steps * (uint64_t)c->o->micro;
}

/* Reports the evaluation rounds whose last batch came before `before`, the
 * oldest first, as they are (their other batches were lost, or the run ends). */
static void s_eval_flush(compute_t *c, double before)
{
    evalsum_round_t r;
    while (evalsum_stale(&c->evals, before, &r)) s_emit_eval(c, &r);
}

/* The run completed here: this node is done (rounds still summed reported). */
static void s_finish(compute_t *c)
{
    s_eval_flush(c, INFINITY);
    c->done = 1;
    c->phase = PH_DONE;
}

/* The live node of this stage of the lowest id, this one included: at the
 * last stage the one an evaluation's batches go to (s_next_peer), at the
 * data stage the one that chooses --split auto's split (s_plan_step). */
static uint64_t s_stage_lowest(const compute_t *c)
{
    int n;
    const int *ix = s_stage_peers(c, c->stage, &n);
    uint64_t lo = router_pick_lowest(c->view, ix, n, 0);
    return lo && lo < c->c.id ? lo : c->c.id;
}

/* The last stage of a complete run waits for the final evaluation (--eval-every;
 * none when the compute is modelled) while a data-stage node is live to send
 * it (each sends one; the first to come whole ends the run).  Every node of
 * the stage waits: the first to end tells the others (its DONE stops them),
 * and the one the batches go to (s_next_peer) ends when they are in. */
static int s_final_eval_coming(const compute_t *c)
{
    return c->nstages > 1 && c->o->eval_every > 0 && !c->c.modelled && s_stage_live(c, 0) > 0;
}

/* Sends the final evaluation now (out of memory: final_due, tried again on
 * each tick by s_data_stage_end). */
static void s_send_final(compute_t *c, double now)
{
    c->final_sent = now;
    c->final_due = s_issue_eval(c, ACT_FLAG_FINAL) < 0;
}

/* The data stage's last evaluation, at the final version; it starts no
 * training microbatch after it (unless s_data_stage_end reopens). */
static void s_issue_final_eval(compute_t *c)
{
    if (c->closing) return;
    c->closing = 1;
    c->final_short = !s_run_complete(c);
    s_send_final(c, s_now(c));
}

/* The microbatches the swarm still needs by its count (0 when complete). */
static uint64_t s_run_short(const compute_t *c)
{
    uint64_t want = (uint64_t)c->o->steps * (uint64_t)c->o->micro, have = s_progress(c);
    return have >= want ? 0 : want - have;
}

/* The most microbatches a live last-stage peer says the run still lacks by
 * its own count (0: none says it is short).  The data stage's count can run
 * ahead of the last stage's for good: the last stage's nodes restarted
 * without their counts (no checkpoint, and no node of the stage left to tell
 * them), and only the other stages' tables kept the earlier ones; such a
 * node may count 0, which is short too. */
static uint64_t s_last_stage_short(const compute_t *c)
{
    uint64_t want = (uint64_t)c->o->steps * (uint64_t)c->o->micro, most = 0;
    int n;
    const int *ix = s_stage_peers(c, c->nstages - 1, &n);
    for (int i = 0; i < n; i++) {
        const view_peer_t *p = &c->view->p[ix[i]];
        if (p->health != PEER_GONE && p->progress_said && p->progress < want && want - p->progress > most)
            most = want - p->progress;
    }
    return most;
}

/* What a data stage that trains on (s_train_on) still waits for: the
 * swarm's count and every live last-stage node's. */
static uint64_t s_reopened_short(const compute_t *c)
{
    uint64_t a = s_run_short(c), b = s_last_stage_short(c);
    return a > b ? a : b;
}

/* The data stage stopped (its final evaluation went out, or its version
 * reached --steps) with `what` short: it trains on. */
static void s_train_on(compute_t *c, const char *what)
{
    c->closing = 0;
    c->final_sent = 0;
    c->final_due = 0;
    c->reopened = 1;
    c->count_done_t = 0;   /* complete again: the gradients of the last microbatches come before the evaluation */
    char line[200];
    snprintf(line, sizeof line, "%s %llu microbatches too few: training on", what, (unsigned long long)s_reopened_short(c));
    s_say(c, line);
}

/* The end of a run without evaluations, at a data stage: once its version
 * reached --steps and the swarm's count is complete it issues nothing more,
 * and the last stage ends the run by its own count; when a live last-stage
 * node's count stays short REOPEN_S (s_last_stage_short), it trains on. */
static void s_data_stage_short(compute_t *c, double now)
{
    if (c->reopened) return;
    if (c->version < c->o->steps || !s_run_complete(c) || !s_last_stage_short(c)) {
        c->last_short_t = 0;
        return;
    }
    if (c->last_short_t == 0) c->last_short_t = now;
    if (now - c->last_short_t > REOPEN_S) s_train_on(c, "the last stage counts");
}

/* The end of a run with evaluations, at a data stage: the run is complete by
 * the swarm's count of microbatches the last stage completed, which this
 * stage's version can run ahead of (a last-stage node restarted without its
 * count) or fall behind (microbatches skipped or given up).  So the final
 * evaluation also goes out once the count is complete, and when it went out
 * at --steps while the count stays short, or a last-stage node's own count
 * does (s_last_stage_short), training goes on until neither is. */
static void s_data_stage_end(compute_t *c, double now)
{
    if (c->stage != 0 || c->nstages == 1) return;
    if (c->o->eval_every <= 0) { s_data_stage_short(c, now); return; }
    int complete = c->reopened ? s_reopened_short(c) == 0 : s_run_complete(c);
    if (complete && c->count_done_t == 0) c->count_done_t = now;
    double lag = 2 * c->turn_mean > FINAL_LAG_S ? 2 * c->turn_mean : FINAL_LAG_S;
    if (c->final_due) s_send_final(c, now);
    if (!c->closing && complete && now - c->count_done_t >= lag) {
        s_issue_final_eval(c);
    } else if (c->closing && c->final_short && complete && now - c->count_done_t >= lag) {
        /* sent with the count short: once more now that it is complete (a last stage whose count completed
         * REOPEN_S after that first one came waits for another, which this stage had not reopened to send) */
        c->final_short = 0;
        s_send_final(c, now);
    } else if (c->closing && c->final_sent > 0 && now - c->final_sent > REOPEN_S && (!complete || s_last_stage_short(c))) {
        s_train_on(c, complete ? "the final evaluation went out, but the last stage counts"
                               : "the final evaluation went out, but the swarm has completed");
    }
}

/* A last-stage node of a complete run ends, or first waits for the final
 * evaluation (s_final_eval_coming; compute_tick ends the wait).  Checked
 * after each microbatch it completes and on each tick: the count that
 * completes the run may be another last-stage node's. */
static void s_last_stage_end(compute_t *c)
{
    if (!s_last(c) || c->phase != PH_RUN || c->final_wait_until > 0 || !s_run_complete(c)) return;
    double now = s_now(c);
    int had_final = c->final_early_t > 0 && now - c->final_early_t < REOPEN_S;
    if (s_final_eval_coming(c) && !had_final) {
        c->closing = 1;
        c->final_wait_from = now;
        c->final_wait_until = now + FINAL_EVAL_S;
        c->final_receiver = s_stage_lowest(c);
    } else {
        s_finish(c);
    }
}

/* The last stage finished a microbatch: count it (for the whole swarm's
 * progress), maybe update, and end the run when enough are done. */
static void s_completed_one(compute_t *c)
{
    c->completed++;
    s_after_backward(c);
    s_last_stage_end(c);
}

/* Fills slot's inputs with the data stage's current batch. */
static void s_load_batch(compute_t *c, int slot)
{
    acts_t *a = c->pool[slot];
    const model_config_t *cfg = &c->cfg;
    for (size_t i = 0; i < c->targets_n; i++) c->targets8[i] = (uint8_t)c->batch.targets[i];
    if (!a) return;
    if (cfg->kind == MODEL_GPT) memcpy(a->tokens, c->batch.tokens, sizeof(int) * (size_t)c->B * c->T);
    else memcpy(a->x, c->batch.x, sizeof(float) * (size_t)c->B * cfg->D);
}

static void s_retry_event(compute_t *c, const mbrec_t *old)
{
    char why[64];
    snprintf(why, sizeof why, "no gradient after %.1f s", s_now(c) - old->t);
    metrics_event(c->c.metrics, "retry", "\"mb\":%llu,\"why\":%s", (unsigned long long)old->mb, why);
}

/* The data stage starts a new microbatch (or re-issues `old`).  -1 when
 * no activation slot (or record) is free; a re-issue reuses its record's
 * slot, so it needs no free one. */
static int s_issue(compute_t *c, mbrec_t *old)
{
    /* the old attempt's slot is the new attempt's: taking another first
     * would stall re-issue for good once every slot is in flight */
    int slot = old && old->slot >= 0 ? old->slot : s_slot_get(c);
    if (slot < 0) return -1;
    mbrec_t *r = old ? old : s_rec_new(c);
    if (!r) { c->slot_used[slot] = 0; return -1; }
    uint64_t avoid = 0;
    if (old) {
        avoid = old->to;
        stash_unref(&c->stash, old->version, c->version);
        s_peer_returned(c, old->to, 0, 0);
        c->retries++;
        s_retry_event(c, old);
    } else {
        r->cursor = c->cursor;
    }
    r->slot = slot;
    r->from = 0;
    if (!old) {
        /* the id stays across re-issues: every node applies a microbatch at most once */
        r->mb = (c->mb_origin << APPLIED_SEQ_BITS) | (++c->mb_seq & ((1ULL << APPLIED_SEQ_BITS) - 1));
        s_trace(c, TRACE_ISSUE, r->mb, c->version);
    }
    r->tries++;
    r->attempt = r->tries;
    uint64_t cur = r->cursor;
    /* the first data-stage node reads the stream solo reads (shard 0 of 1: parity);
     * the k-th reads shard k of k+1, another random stream of the same data */
    if (c->data) data_next_train(c->data, &c->batch, c->c.shard, c->c.shard + 1, &cur);
    else cur++;
    if (!old) c->cursor = cur;
    s_load_batch(c, slot);
    acts_t *a = c->pool[slot];
    if (c->nstages == 1) {
        /* a single stage: forward, loss and backward here */
        if (a) memcpy(a->targets, c->batch.targets, sizeof(int) * c->targets_n);
        s_forward(c, r);
        c->loss_sum += a ? a->loss : 0;
        c->loss_n++;
        s_backward(c, r);
        s_rec_free(c, r);
        s_completed_one(c);
    } else {
        s_forward(c, r);
        if (s_send_act(c, r, c->targets8, avoid) == -2) {
            /* out of memory to hold its output: given up (the cursor has moved past it), counted as lost */
            c->lost++;
            s_trace(c, TRACE_LOST, r->mb, c->version);
            metrics_event(c->c.metrics, "retry", "\"mb\":%llu,\"why\":\"given up: no memory to hold its output\"",
                          (unsigned long long)r->mb);
            s_rec_free(c, r);
        }
    }
    return 0;
}

/* Sends the outputs held for want of a next-stage peer. */
static void s_send_held(compute_t *c)
{
    /* sending makes and frees no record: once the records in use are seen, none is left */
    for (int i = 0, left = c->inflight; i < REC_MAX && left > 0; i++) {
        mbrec_t *r = &c->rec[i];
        if (!r->used) continue;
        left--;
        if (!r->held) continue;
        if (s_send_act(c, r, r->targets, 0) < 0) return;
        r->t = s_now(c);
    }
}

/* ---- evaluation ---- */

/* Evaluation microbatch ids: round, batches in the round, index. */
#define EVAL_MB(round, nval, idx) (((uint64_t)(round) << 32) | ((uint64_t)(nval) << 16) | (uint64_t)(idx))

/* The data stage sends the validation batches through the pipeline, forward
 * only, with the weights of this moment (flags: ACT_FLAG_FINAL or 0), or
 * evaluates them here when it is the only stage (in EVAL_SLOT).  0, or -1
 * when out of memory (nothing sent). */
static int s_issue_eval(compute_t *c, uint32_t flags)
{
    if (!c->data) return 0;
    int nval = opts_eval_batches(c->o, data_val_batches(c->data, c->B));
    int slot = s_eval_slot(c);
    if (slot < 0) return -1;
    acts_t *a = c->pool[slot];
    uint32_t round = (uint32_t)c->version;
    for (int i = 0; i < nval; i++) {
        data_val_batch(c->data, &c->batch, i);
        s_load_batch(c, slot);
        if (a) stage_forward(&c->lay, s_params(c), a);
        c->flops += s_fwd_flops(c);
        if (c->nstages == 1) s_eval_batch(c, round, 0, nval, i, a);
        else s_send_out(c, slot, EVAL_MB(round, nval, i), ACT_FLAG_EVAL | flags, c->targets8, 0);
    }
    return 0;
}

static void s_emit_eval(compute_t *c, const evalsum_round_t *r)
{
    if (r->n == 0) return;
    double vl = r->loss / r->n;
    if (c->cfg.kind == MODEL_MLP)
        metrics_event(c->c.metrics, "eval", "\"version\":%u,\"val_loss\":%.9g,\"val_acc\":%.9g,\"batches\":%d", r->round,
                      vl, r->correct / ((double)r->n * c->B), r->n);
    else
        metrics_event(c->c.metrics, "eval", "\"version\":%u,\"val_loss\":%.9g,\"batches\":%d", r->round, vl, r->n);
}

/* Batch i of an evaluation round, evaluated in a: summed, and every round
 * it completes (or pushes out, partial) reported.  A final round complete
 * ends the run when its count is complete too (else notes it). */
static void s_eval_batch(compute_t *c, uint32_t round, int final, int nval, int i, const acts_t *a)
{
    evalsum_round_t out[2];
    int k = evalsum_add(&c->evals, round, final, nval, i, a ? a->loss : 0, a ? a->correct : 0, s_now(c), out);
    int final_whole = k > 0 && out[k - 1].final && out[k - 1].n == out[k - 1].nval;
    int ending = final_whole && s_run_complete(c);
    if (ending) s_eval_flush(c, INFINITY);   /* the rounds before it first */
    for (int j = 0; j < k; j++) s_emit_eval(c, &out[j]);
    if (ending) s_finish(c);
    else if (final_whole) c->final_early_t = out[k - 1].first_t;   /* its first batch: the nearest to its sending */
}

/* An activation m is for this stage and of its input's size. */
static int s_input_fits(const compute_t *c, const mail_t *m)
{
    return m->n == c->in_n && m->hdr.stage == c->stage;
}

/* Copies a tensor mail's values into slot's input (its length was checked by the network side for the stage it had). */
static int s_take_input(compute_t *c, int slot, const mail_t *m)
{
    if (!s_input_fits(c, m)) return -1;
    if (c->pool[slot] && m->x) memcpy(c->pool[slot]->in, m->x, sizeof(float) * c->in_n);
    return 0;
}

/* An evaluation microbatch: forward only; the last stage accumulates. */
static int s_on_eval_act(compute_t *c, const mail_t *m)
{
    uint32_t round = (uint32_t)(m->hdr.mb >> 32);
    int nval = (int)((m->hdr.mb >> 16) & 0xffff), i = (int)(m->hdr.mb & 0xffff);
    if (i >= nval) { s_drop(c, "evaluation batch out of its round's count", m->peer); return 0; }
    int slot = s_eval_slot(c);
    if (slot < 0) return -1;
    if (s_take_input(c, slot, m) < 0) { s_drop(c, "tensor for another stage or size", m->peer); return 0; }
    acts_t *a = c->pool[slot];
    c->flops += s_fwd_flops(c);
    if (s_last(c)) {
        if (a) {
            for (size_t i = 0; i < c->targets_n; i++) a->targets[i] = m->aux[i];
            stage_forward(&c->lay, s_params(c), a);
        }
        s_eval_batch(c, round, (m->hdr.flags & ACT_FLAG_FINAL) != 0, nval, i, a);
    } else {
        if (a) stage_forward(&c->lay, s_params(c), a);
        s_send_out(c, slot, m->hdr.mb, m->hdr.flags & (ACT_FLAG_EVAL | ACT_FLAG_FINAL), m->aux, 0);
    }
    return 0;
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
    s_out(c, m);
}

/* The run's final evaluation is passing by this stage (not the data
 * stage) with the run complete by the count here: the training queued ahead
 * of it is not wanted any more (once the gossip says the run is complete: a
 * peer's flag alone must not stop this stage's training). */
static void s_final_passing(compute_t *c)
{
    if (c->closing) return;
    c->closing = 1;
    c->passed_t = s_now(c);
}

/* Closing here since the final evaluation passed: a training activation is
 * not wanted, unless it comes CLOSED_HOLD_S later, when it is one of a data
 * stage that trains on after its final evaluation (its count or a
 * last-stage node's short): this stage then trains again (it once dropped
 * every one for good, and the run waited for it to the end). */
static int s_closed_to_training(compute_t *c)
{
    if (!c->closing) return 0;
    if (c->passed_t == 0 || c->final_wait_until > 0 || s_now(c) - c->passed_t < CLOSED_HOLD_S) return 1;
    c->closing = 0;
    c->passed_t = 0;
    s_say(c, "training again after the final evaluation passed: the data stage trains on");
    return 0;
}

/* An activation from the previous stage: forward (and, on the last stage,
 * loss and backward at once).  -1 when it must wait (no slot free). */
static int s_on_act(compute_t *c, const mail_t *m)
{
    if (m->hdr.flags & ACT_FLAG_EVAL) return s_on_eval_act(c, m);
    if (s_closed_to_training(c)) return 0;   /* the run is complete: only its final evaluation is still wanted */
    if (!s_input_fits(c, m)) {   /* before a held attempt of its microbatch is let go for it */
        s_drop(c, "tensor for another stage or size", m->peer);
        return 0;
    }
    if (s_applied(c, m->hdr.mb, m->hdr.flags)) { s_send_dup(c, m->peer, m->hdr.mb, m->hdr.flags); return 0; }
    mbrec_t *old = s_rec_find(c, m->hdr.mb);
    unsigned attempt = MB_ATTEMPT(m->hdr.flags);
    if (old && (attempt == (unsigned)old->attempt || s_attempt_older(attempt, (unsigned)old->attempt))) {
        /* a late copy of an attempt the data stage has re-issued since, or a second copy of the one held
         * here (a re-issue raises the attempt; taking a copy would send the gradient to whoever sent it):
         * the one held here stays */
        s_drop(c, "a copy of an attempt held here, or an older one", m->peer);
        return 0;
    }
    if (old) {
        /* a re-issue of a microbatch held here: the new attempt replaces the old one */
        s_peer_returned(c, old->to, 0, 0);
        s_rec_free(c, old);
    }
    int slot = s_slot_get(c);
    if (slot < 0) return -1;
    s_take_input(c, slot, m);   /* it fits */
    mbrec_t *r = s_rec_new(c);
    if (!r) { c->slot_used[slot] = 0; return -1; }
    r->mb = m->hdr.mb;
    r->slot = slot;
    r->from = m->peer;
    r->attempt = (int)attempt;
    acts_t *a = c->pool[slot];
    if (s_last(c)) {
        if (a) for (size_t i = 0; i < c->targets_n; i++) a->targets[i] = m->aux[i];
        s_forward(c, r);
        c->loss_sum += a ? a->loss : 0;
        c->loss_n++;
        s_backward(c, r);
        s_rec_free(c, r);
        s_completed_one(c);
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
    else { c->skipped++; s_trace(c, TRACE_SKIP, r->mb, c->version); }
    s_rec_free(c, r);
}

static void s_on_grad(compute_t *c, const mail_t *m)
{
    mbrec_t *r = s_rec_find(c, m->hdr.mb);
    if (!r || r->to != m->peer || r->held || (int)MB_ATTEMPT(m->hdr.flags) != (r->attempt & 0xff)) {
        s_drop(c, "gradient of an unknown microbatch", m->peer);   /* re-issued or forgotten */
        return;
    }
    int dup = (m->hdr.flags & GRAD_FLAG_DUP) != 0;   /* applied further on already: nothing to apply here */
    if (!dup && (m->n != c->out_n || m->hdr.stage != c->stage)) {   /* the record stays, its peer still owing it */
        s_drop(c, "tensor for another stage or size", m->peer);
        return;
    }
    /* work the peer held across a silence of its own (a pause) says little of its or the pipeline's
     * speed: the router and the window take it only when they have no measure yet */
    double turn = s_now(c) - r->t;
    int held_silent = r->t < m->silent_until;
    s_peer_returned(c, r->to, turn, held_silent);
    if (dup) {
        s_skip(c, r);
        return;
    }
    if (c->o->stash == STASH_2BW && !stash_holds(&c->stash, r->version, c->version)) {
        /* 2bw folded its forward's weights away (a later stage fed by several data-stage nodes, or peers of
         * different speeds, can see more delay than the budget): a backward on other weights would be wrong,
         * a third version is what 2bw does not keep */
        c->stash_refused++;
        s_skip(c, r);
        return;
    }
    if (c->stage == 0 && !(held_silent && c->turn_mean > 0)) {
        c->turn_mean = c->turn_mean > 0 ? 0.9 * c->turn_mean + 0.1 * turn : turn;
        c->turn_dev = 0.9 * c->turn_dev + 0.1 * fabs(turn - c->turn_mean);
        if (c->auto_window) window_on_turn(&c->win, s_now(c), turn, c->inflight, s_window_held(c));
    }
    if (c->pool[r->slot] && m->x) memcpy(c->pool[r->slot]->dout, m->x, sizeof(float) * c->out_n);
    s_backward(c, r);
    s_rec_free(c, r);
    s_after_backward(c);
}

/* A replica's weights (within-stage averaging): held until our next update,
 * a later one replacing it.  1 when m was kept (owned here now). */
static int s_on_avg(compute_t *c, mail_t *m)
{
    if (c->c.modelled || !c->st || m->n != c->lay.nparams || m->hdr.stage != c->stage || !m->x) return 0;
    mail_free(c->avg_pending);
    c->avg_pending = m;
    return 1;
}

/* Averages the held replica's weights into ours, just after an update (no
 * forward has used the new version yet); refuses weights far from ours
 * (replicas drift apart slowly; a far copy is a bad peer). */
static void s_apply_avg(compute_t *c)
{
    mail_t *m = c->avg_pending;
    if (!m) return;
    c->avg_pending = NULL;
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
            s_drop(c, why, m->peer);
        } else {
            for (size_t i = 0; i < m->n; i++) p[i] = 0.5f * (p[i] + m->x[i]);
        }
    }
    mail_free(m);
}

/* ---- state: snapshots out, fetches in ---- */

/* Sends this stage's state (params, m, v) to peer. */
static void s_send_state(compute_t *c, uint64_t peer, uint32_t flags)
{
    mail_t *m = mail_new(MAIL_STATE_OUT);
    size_t np = c->lay.nparams;
    if (!m || !(m->state = state_blob_new(c->stage, c->c.modelled ? 0 : np))) { mail_free(m); return; }
    m->state->nparams = np;
    m->state->version = c->version;
    if (c->st) {
        memcpy(m->state->data, c->st->params, np * sizeof(float));
        memcpy(m->state->data + np, c->st->m, 2 * np * sizeof(float));  /* m and v follow each other in one allocation */
    }
    m->hdr.flags = flags;
    m->peer = peer;
    s_out(c, m);
}

/* A stage served by this node alone pushes a snapshot of its state to a
 * node of another stage every BACKUP_EVERY updates, so that a replacement
 * can resume it if this node dies. */
static void s_backup(compute_t *c)
{
    uint64_t holder = 0;
    int alone = 1;
    for (int i = 0; c->view && i < c->view->n; i++) {
        const view_peer_t *p = &c->view->p[i];
        if (p->health == PEER_GONE) continue;
        if (p->stage == c->stage) alone = 0;
        /* the holder: a peer of the next stage, else of any other stage */
        int next = p->stage == (c->stage + 1) % c->nstages;
        if (p->stage != c->stage && (!holder || next)) holder = p->id;
    }
    if (alone && holder) s_send_state(c, holder, STATE_FLAG_BACKUP);
}

/* Asks the network side for stage `stage`'s state: from donor, or (0) a backup. */
static void s_fetch(compute_t *c, uint64_t donor)
{
    mail_t *m = mail_new(MAIL_FETCH);
    if (!m) return;
    c->fetch_donor = donor;
    c->fetch_tries++;
    m->hdr.stage = (uint16_t)c->stage;
    m->peer = donor;
    m->hdr.mb = (uint64_t)((donor ? FETCH_DOWNLOAD_S : FETCH_BACKUP_S) * 1000);
    c->fetch_kind = donor ? START_DOWNLOAD : START_BACKUP;
    c->phase = PH_FETCH;
    c->fetching = 1;
    s_out(c, m);
}

/* The live peer of this node's stage with the highest version, not `skip`,
 * at least at version `min`; 0 none. */
static uint64_t s_stage_donor(const compute_t *c, uint64_t skip, uint32_t min)
{
    uint64_t donor = 0;
    uint32_t best = 0;
    for (int i = 0; c->view && i < c->view->n; i++) {
        const view_peer_t *p = &c->view->p[i];
        if (p->stage == c->stage && p->health != PEER_GONE && p->id != skip && p->version >= min && (!donor || p->version >= best)) {
            donor = p->id;
            best = p->version;
        }
    }
    return donor;
}

/* The donor of a download did not deliver (why): another live peer of the
 * stage (three tries in all), else a backup, else the initial weights. */
static void s_fetch_elsewhere(compute_t *c, const char *why)
{
    uint64_t next = c->fetch_tries < 3 ? s_stage_donor(c, c->fetch_donor, 0) : 0;
    char line[256];
    snprintf(line, sizeof line, "%s; %s", why, next ? "asking another peer of the stage" : "looking for a backup");
    s_say(c, line);
    s_fetch(c, next);
}

/* While downloading: a donor the peer table has declared gone will not
 * deliver; ask elsewhere at once instead of waiting out the fetch. */
static void s_check_donor(compute_t *c)
{
    if (c->phase != PH_FETCH || c->fetch_kind != START_DOWNLOAD || !c->fetch_donor) return;
    const view_peer_t *p = peer_view_find(c->view, c->fetch_donor);
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
        size_t n = stage_num_params(&c->cfg, k, c->nstages);
        if (n > most) most = n;
    }
    return c->lay.nparams ? (double)most / (double)c->lay.nparams : 1.0;
}

/* The per-stage objects: made at start and again after a move. */
static int s_stage_setup(compute_t *c)
{
    c->busiest = s_busiest(c);
    c->in_n = stage_in_size(&c->lay, c->B, c->T);
    c->out_n = stage_out_size(&c->lay, c->B, c->T);
    if (!c->c.modelled && !(c->gs = grad_scratch_new(&c->lay, c->B, c->T))) return -1;
    stash_init(&c->stash, c->st ? c->lay.nparams : 1, c->o->stash == STASH_2BW);
    c->fwd_for = c->fwd_chosen = -1;
    c->delay_ewma = -1;
    c->bwd_count = 0;
    c->loss_sum = 0;
    c->loss_n = 0;
    c->busy_s = 0;
    c->fwd_done = 0;
    if (c->stage == 0 && c->data && !c->batch.targets && data_batch_alloc(c->data, &c->batch, c->B) < 0) return -1;
    if (c->stage == 0 && !c->targets8 && !(c->targets8 = calloc(c->targets_n, 1))) return -1;
    if (c->stage == 0 && !c->data && !c->batch.targets && !(c->batch.targets = calloc(c->targets_n, sizeof(int)))) return -1;
    return 0;
}

static void s_stage_teardown(compute_t *c)
{
    pending_clear(&c->acts);
    pending_clear(&c->grads);
    for (int i = 0; i < REC_MAX; i++)
        if (c->rec[i].used) {
            s_peer_returned(c, c->rec[i].to, 0, 0);
            free(c->rec[i].targets);   /* a record owns its targets */
        }
    memset(c->rec, 0, sizeof c->rec);
    c->inflight = 0;
    for (int i = 0; i < c->npool; i++) acts_destroy(&c->pool[i]);
    acts_destroy(&c->pool[EVAL_SLOT]);
    memset(c->slot_used, 0, sizeof c->slot_used);
    c->npool = 0;
    grad_scratch_destroy(&c->gs);
    stash_fini(&c->stash);
    free(c->fwd_w);
    c->fwd_w = NULL;
    mail_free(c->avg_pending);
    c->avg_pending = NULL;
}

/* A fetch ended (blob NULL: nothing came): serve the stage from what there is. */
static void s_on_state(compute_t *c, mail_t *m)
{
    if (c->phase != PH_FETCH || m->hdr.stage != c->stage || m->peer != c->fetch_donor) return;   /* late: a fetch given up */
    state_blob_t *b = m->state;
    /* a snapshot older than the state here (its checkpoint's: a backup can be older) is not taken */
    int got = b && b->nparams == c->lay.nparams && b->version >= c->version;
    /* no backup came, but a trained peer serves the stage by now (back from a partition, or just joined); one
     * at version 0 may be fetching it as this node did (two nodes that moved to it at once waited on each other) */
    uint64_t late = !got && !c->fetch_donor && c->fetch_tries < 3 ? s_stage_donor(c, 0, 1) : 0;
    if (late) {
        s_say(c, "no backup of the stage came, but a peer serves it now: downloading from it");
        s_fetch(c, late);
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
    if (c->fetch_kind == START_DOWNLOAD && !got) {   /* a joiner's or a mover's: another peer, else a backup */
        s_fetch_elsewhere(c, "no state from the stage's peer in time");
        return;
    }
    char line[256];
    const char *how = got ? (b->backup ? "backup" : "downloaded") : c->version > 0 ? "checkpoint" : "initial";
    if (c->fetch_from >= 0) {
        metrics_event(c->c.metrics, "move", "\"from\":%d,\"to\":%d,\"why\":%s,\"version\":%lld,\"state\":%s",
                      c->fetch_from, c->stage, c->fetch_why, (long long)c->version, how);
        snprintf(line, sizeof line, "moved from stage %d to stage %d (%s); its state %s at version %lld", c->fetch_from, c->stage,
                 c->fetch_why, got ? how : "not found, initial weights", (long long)c->version);
        s_say(c, line);
        c->last_move = s_now(c);
    } else {
        metrics_event(c->c.metrics, "resume", "\"version\":%lld,\"from\":%s", (long long)c->version, how);
        if (got) snprintf(line, sizeof line, "stage %d %s at version %lld", c->stage, b->backup ? "resumed from a backup" : "downloaded",
                          (long long)c->version);
        else if (c->version > 0)
            snprintf(line, sizeof line, "no newer state of stage %d came: it resumes from its checkpoint at version %lld", c->stage,
                     (long long)c->version);
        else snprintf(line, sizeof line, "no backup of stage %d found: it starts from its initial weights", c->stage);
        s_say(c, line);
    }
    c->phase = PH_RUN;
    c->fetching = 0;
    s_send_self(c, MAIL_SELF);
}

/* ---- re-issue, window, rate ---- */

/* Re-issues (data stage) or forgets (other stages) microbatches whose
 * gradient is overdue or whose next-stage peer is gone. */
static void s_timeouts(compute_t *c)
{
    double now = s_now(c);
    /* while a stage has no peer the swarm waits: nothing can complete, nothing is re-issued */
    if (c->stage == 0 && !s_all_stages_served(c)) return;
    /* the deadline comes from measured turnarounds; before the first, from the heartbeats' round trips */
    double rtt;
    s_rtt(c, &rtt, NULL);
    double deadline = c->turn_mean > 0 ? 4 * c->turn_mean + 8 * c->turn_dev
                      : rtt > 0 ? 5.0 + 8.0 * (c->nstages - 1) * rtt * 1e-3 : 30.0;
    if (deadline < 5.0) deadline = 5.0;
    /* records are only freed here, never made: once the used ones at the start are seen, none is left */
    for (int i = 0, left = c->inflight; i < REC_MAX && left > 0; i++) {
        mbrec_t *r = &c->rec[i];
        if (!r->used) continue;
        left--;
        int gone = 0;
        if (r->to) {
            const view_peer_t *p = peer_view_find(c->view, r->to);
            gone = !p || p->health == PEER_GONE || p->stage != c->stage + 1;
        }
        if (c->stage == 0) {
            if (r->held) continue;   /* waits for a route */
            if ((gone || now - r->t > deadline) && r->tries >= MAX_TRIES) {
                c->lost++;
                s_trace(c, TRACE_LOST, r->mb, c->version);
                metrics_event(c->c.metrics, "retry", "\"mb\":%llu,\"why\":\"given up after %d tries\"", (unsigned long long)r->mb, r->tries);
                s_peer_returned(c, r->to, 0, 0);
                s_rec_free(c, r);
            } else if (gone || now - r->t > deadline) {
                if (c->closing) {
                    continue;   /* beyond the run's last, not issued again: in flight until the node ends */
                } else if (s_issue(c, r) < 0) {
                    continue;   /* no slot: it is tried again later; the records after it may still be given up */
                }
            }
        } else if (gone && r->targets && !c->closing) {
            /* its output went to a peer now gone: to another peer of that stage (held when there is
             * none), so the microbatch goes on at once instead of after the data stage's deadline */
            uint64_t was = r->to;
            s_peer_returned(c, was, 0, 0);
            int rc = s_send_act(c, r, r->targets, was);
            if (rc == 0) {
                r->t = now;   /* the new peer's turnaround counts from here */
                c->retries++;
                metrics_event(c->c.metrics, "retry", "\"mb\":%llu,\"why\":\"its next-stage peer is gone: sent to another\"",
                              (unsigned long long)r->mb);
            } else if (rc == -2) {
                s_rec_free(c, r);
            }
        } else if (gone || now - r->t > STALE_S) {
            s_peer_returned(c, r->to, 0, 0);
            s_rec_free(c, r);
        }
    }
}

/* The microbatches in flight that keep K stages busy: one per stage plus
 * enough to cover the pipeline's propagation round trip (rtt_ms per link)
 * with compute (Little's law: latency / per_mb, the seconds per microbatch
 * of the busiest stage).  0 when either is unknown. */
static int s_inflight_need(int K, double rtt_ms, double per_mb)
{
    if (rtt_ms <= 0 || per_mb <= 0) return 0;
    /* forward and backward cross K-1 links each way: (K-1) round trips */
    return K + (int)ceil((K - 1) * rtt_ms * 1e-3 / per_mb);
}

/* s_inflight_need from what this data stage measured: the minimum round
 * trip, not the smoothed one (queueing the window itself causes must not
 * grow the window), and its compute per microbatch reckoned to the busiest
 * stage by parameters.  0 until both are measured. */
static int s_window_need(compute_t *c)
{
    double mean, rtt;
    s_rtt(c, &mean, &rtt);
    double per_mb = c->fwd_done ? c->busiest * c->busy_s / (double)c->fwd_done : 0;  /* the busiest stage's */
    return s_inflight_need(c->nstages, rtt, per_mb);
}

/* The data stage's window when --max-inflight is not given: what the round
 * trip needs, at least 2 per stage and at most s_window_cap; the delay
 * budget narrows it further at admission (s_may_issue).  Says when the
 * budget cannot hold the window at this micro: once, and again when the
 * micro needed moves by a quarter. */
static void s_auto_window(compute_t *c)
{
    int K = c->nstages, w = s_window_need(c), cap = s_window_cap(c);
    window_set_path(&c->win, w);
    if (w == 0) w = 2 * K;   /* not measured yet */
    c->window_need = w;
    if (w < 2 * K) w = 2 * K;
    if (w > cap) w = cap;
    int q = window_limit(&c->win);   /* no more than the queues along the pipeline allow */
    c->max_inflight = q < w ? q : w;
    int need = s_micro_needed(c), said = c->micro_said;
    int settled = c->fwd_done >= (uint64_t)(8 * K);   /* round trips and compute times measured a while */
    if (settled && need && (!said || 4 * abs(need - said) >= said + 4)) {   /* news: the first, or a change of a quarter */
        char line[384];
        snprintf(line, sizeof line, "the round trip asks for %d microbatches in flight; a delay budget of %d update%s "
                 "holds %d at --micro %d: --micro %d would keep every stage busy%s", c->window_need, s_max_delay(c),
                 s_max_delay(c) == 1 ? "" : "s", s_budget_holds(c), c->o->micro, need,
                 c->o->split == SPLIT_EVEN && s_late_split_helps(c, c->window_need, s_budget_holds(c)) ? "; on links this slow a run created with --split late trains faster and "
                                         "better per update" : "");
        metrics_event(c->c.metrics, "warning", "\"what\":\"window\",\"micro_needed\":%d,\"why\":%s", need, line);
        s_say(c, line);
        c->micro_said = need;
    }
}

/* ---- moves ---- */

/* Lays this node out as stage `stage` of the split of cfg, with that
 * stage's initial weights; the work it held is dropped (the data stage
 * re-issues it).  0; -1 when the new stage cannot be made (nothing changed);
 * -2 when its activations cannot be (the node has failed). */
static int s_relayout(compute_t *c, const model_config_t *cfg, int stage)
{
    char err[300];
    stage_state_t *st = NULL;
    stage_t lay;
    if (stage_init(&lay, cfg, stage, c->nstages, err, sizeof err) < 0) return -1;
    if (!c->c.modelled && !(st = stage_state_new(cfg, stage, c->nstages, c->o->seed, err, sizeof err))) return -1;
    s_stage_teardown(c);
    stage_state_destroy(&c->st);
    c->st = st;
    c->lay = lay;
    c->cfg = *cfg;
    c->lay.threads = c->o->threads;
    if (st) st->s.threads = c->o->threads;
    c->version = st ? st->version : 0;
    c->stage = stage;
    s_window_reset(c);   /* another path: measured again */
    metrics_set_stage(c->c.metrics, stage);
    if (s_stage_setup(c) < 0) {
        char w[96];
        snprintf(w, sizeof w, "out of memory for stage %d's activations", stage);
        s_fail(c, w);
        return -2;
    }
    return 0;
}

/* Moves this node to stage `to`: drops its work at the old stage (the data
 * stage re-issues it) and fetches the new stage's state from a peer of it
 * (or a backup); serving resumes when it arrives (s_on_state). */
static void s_move(compute_t *c, int to, const char *why)
{
    int from = c->stage;
    if (s_relayout(c, &c->cfg, to) < 0) return;
    /* what was applied at the old stage says nothing of the new one's microbatches: remembered, it
     * answered "applied already" (DUP) to microbatches this node applied only at its old stage */
    applied_clear(&c->applied);
    s_trace(c, TRACE_MOVE, (uint64_t)to, c->version);
    c->fetch_from = from;
    c->fetch_tries = 0;
    snprintf(c->fetch_why, sizeof c->fetch_why, "%s", why);
    s_send_self(c, MAIL_SELF);   /* the network side refuses the old stage's tensors from now on */
    s_fetch(c, s_stage_donor(c, 0, 0));
}

/* ---- --split auto: the run's split, chosen before its first update ---- */

/* This node's layout follows split `plan` from now on (chosen here, or
 * said by a peer's message or the network side): before any update, the
 * initial weights of that split (a download of the stage's state under
 * way starts again in it).  A split that differs from the layout of a node
 * that has trained already cannot be taken: the node fails (two data-stage
 * nodes that each chose, unheard of by the other). */
static void s_adopt_plan(compute_t *c, int plan, const char *how)
{
    if (c->plan >= 0 || plan < 0 || c->phase == PH_DONE) return;
    if (plan != (int)c->cfg.split) {
        if (c->version != 0 || c->inflight) {
            s_fail(c, "the run chose another split after this node had trained on the even one");
            return;
        }
        model_config_t cfg = c->cfg;
        cfg.split = (model_split_t)plan;
        if (s_relayout(c, &cfg, c->stage) < 0) {
            if (c->phase != PH_DONE) s_fail(c, "out of memory to lay out the run's split");
            return;
        }
    }
    c->plan = plan;
    metrics_event(c->c.metrics, "plan", "\"split\":%s,\"how\":%s", plan == SPLIT_LATE ? "late" : "even", how);
    s_send_self(c, MAIL_SELF);   /* the network side sizes state transfers by it */
    if (c->fetching && plan != SPLIT_EVEN) s_fetch(c, c->fetch_donor);   /* laid out anew: fetched anew */
}

/* A tensor says the run's split: taken when this node has none yet.  0
 * when it says another one than this node's (the tensor is dropped). */
static int s_tensor_split_ok(compute_t *c, const mail_t *m)
{
    int said = plan_of_flags(m->hdr.flags);
    if (c->plan < 0) s_adopt_plan(c, said, "said by a peer");
    return said < 0 || said == c->plan;
}

/* A forward of a validation batch, timed and not sent: what the data
 * stage reckons the pipeline's compute per microbatch from before the
 * first update.  -1 when there is no memory for it. */
static int s_probe(compute_t *c)
{
    int slot = s_eval_slot(c);
    if (slot < 0) return -1;
    acts_t *a = c->pool[slot];
    if (a && c->data) {
        data_val_batch(c->data, &c->batch, 0);
        s_load_batch(c, slot);
    }
    if (a) stage_forward(&c->lay, s_params(c), a);
    c->flops += s_fwd_flops(c);
    c->probing = 1;
    c->probes++;
    return 0;
}

/* The data stage's part of --split auto, until the split is chosen: once
 * every stage has a peer, the live data-stage node of the lowest id
 * chooses (the others wait to hear it; one that sees no lower one
 * chooses): late where the round trip asks for at least 1.75 times what the
 * delay budget holds (s_late_split_helps, reckoned as s_window_need does
 * from the smallest round trip to stage 1 and the best of PLAN_PROBES
 * timed forwards, a microbatch's compute taken as three forwards), else
 * even; even too when no round trip is measured PLAN_WAIT_S after it could
 * choose.  Returns 1 when it ran a forward. */
static int s_plan_step(compute_t *c)
{
    if (!s_all_stages_served(c) || s_stage_lowest(c) != c->c.id) {
        c->plan_wait_from = 0;   /* not this node's choice now: its wait starts again when it is */
        return 0;
    }
    double now = s_now(c), mean, rtt;
    if (c->plan_wait_from == 0) c->plan_wait_from = now;
    if (!s_late_split_may_pay(c)) { s_adopt_plan(c, SPLIT_EVEN, "chosen: the late split cannot pay"); return 0; }
    s_rtt(c, &mean, &rtt);
    if (rtt <= 0 && now - c->plan_wait_from < PLAN_WAIT_S) return 0;   /* the pings measure it soon */
    if (rtt > 0 && c->probes < PLAN_PROBES) {
        if (s_probe(c) == 0) return 1;
        rtt = 0;   /* no memory to time a forward: even */
    }
    int holds = s_budget_holds(c);   /* --max-delay's: no split chosen yet */
    int need = s_inflight_need(c->nstages, rtt, 3.0 * c->probe_best * c->busiest);
    int late = s_late_split_helps(c, need, holds);
    char how[200], line[300];
    snprintf(how, sizeof how, "chosen: the round trip asks for %d microbatches in flight, the delay budget holds %d", need, holds);
    s_adopt_plan(c, late ? SPLIT_LATE : SPLIT_EVEN, how);
    snprintf(line, sizeof line, "--split auto: the %s split (the round trip asks for %d microbatches in flight; a delay "
             "budget of %d update%s holds %d at --micro %d)%s", late ? "late" : "even", need, c->o->max_delay,
             c->o->max_delay == 1 ? "" : "s", holds, c->o->micro,
             s_max_delay(c) > c->o->max_delay ? "; stage 0 holds no block now: its budget is one update more" : "");
    s_say(c, line);
    return 0;
}

/* Rebalancing (every few seconds): a node of a stage served by several
 * peers moves to a stage with none, or to the slowest stage when that makes
 * the slowest stage MOVE_GAIN times faster.  Only the highest-id peer of a
 * stage moves, at most once per MOVE_COOLDOWN_S; the data stage (which
 * holds the data) neither gives nor takes nodes. */
static void s_consider_move(compute_t *c)
{
    double now = s_now(c);
    if (c->stage == 0 || c->nstages < 3 || now - c->t0 < MOVE_FIRST_S || now - c->last_move < MOVE_COOLDOWN_S) return;
    int count[MODEL_STAGES_MAX] = {0}, unknown = 0, highest = 1;
    double cap[MODEL_STAGES_MAX] = {0}, mine = c->busy_s >= 0.5 ? c->fwd_done / c->busy_s : 0;
    count[c->stage] = 1;
    cap[c->stage] = mine;
    for (int i = 0; c->view && i < c->view->n; i++) {
        const view_peer_t *p = &c->view->p[i];
        int s = p->stage;
        if (p->health == PEER_GONE || s < 0 || s >= c->nstages) continue;
        count[s]++;
        cap[s] += p->rate;
        if (s > 0 && p->rate <= 0) unknown = 1;
        if (s == c->stage && p->id > c->c.id) highest = 0;
    }
    if (count[c->stage] < 2 || !highest) return;
    for (int s = 1; s < c->nstages; s++)
        if (count[s] == 0) { s_move(c, s, "stage without peers"); return; }
    if (unknown || mine <= 0 || now - c->t0 < MOVE_BALANCE_S) return;
    int b = 1;
    for (int s = 2; s < c->nstages; s++)
        if (cap[s] < cap[b]) b = s;
    if (b == c->stage) return;
    double after_mine = cap[c->stage] - mine, after_b = cap[b] + mine;
    double new_min = after_mine < after_b ? after_mine : after_b;
    if (new_min >= MOVE_GAIN * cap[b]) {
        char why[96];
        snprintf(why, sizeof why, "stage %d is the slowest (%.1f vs %.1f microbatches/s here)", b, cap[b], cap[c->stage]);
        s_move(c, b, why);
    }
}

/* ---- the entry points ---- */

void compute_on_mail(compute_t *c, mail_t *m)
{
    switch (m->kind) {
    case MAIL_TENSOR:
        if (c->phase == PH_DONE) break;
        if (!s_tensor_split_ok(c, m)) { s_drop(c, "a tensor of another split of the run", m->peer); break; }
        if (m->hdr.type == WIRE_AVG) { if (s_on_avg(c, m)) return; break; }
        if (m->hdr.type == WIRE_ACT && (m->hdr.flags & ACT_FLAG_EVAL) && (m->hdr.flags & ACT_FLAG_FINAL) && s_run_complete(c))
            s_final_passing(c);
        if (pending_push(m->hdr.type == WIRE_GRAD ? &c->grads : &c->acts, m) == 0) return;  /* kept */
        s_drop(c, "compute queue full", m->peer);
        break;
    case MAIL_STATE_REQ:
        if (c->phase == PH_RUN && m->hdr.stage == c->stage) s_send_state(c, m->peer, STATE_FLAG_REPLY);
        break;
    case MAIL_VIEW:
        s_take_view(c, m->view);
        m->view = NULL;
        if (c->plan < 0 && c->view) s_adopt_plan(c, c->view->plan, "said by a peer");
        s_check_donor(c);
        break;
    case MAIL_STATE: s_on_state(c, m); break;
    case MAIL_STOP:
        if (c->phase != PH_DONE) s_finish(c);
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
    for (int i = 0; c->view && i < c->view->n && !live; i++) live = c->view->p[i].health != PEER_GONE;
    if (live) c->last_company = now;
    else if (c->last_company > 0 && now - c->last_company > ALONE_S) {
        char why[128];
        snprintf(why, sizeof why, "no live peer for %.0f s: the run has ended or the swarm is out of reach", ALONE_S);
        s_fail(c, why);
    }
}

/* The last stage's wait for the final evaluation ends (the run with it)
 * at FINAL_EVAL_S, when no data-stage node is left, when the node its batches
 * go to has left, or FINAL_GAP_S after the last batch of the awaited round
 * came (the rest was lost: what came is reported, its count with it);
 * s_eval_batch ends it when the round is in. */
static void s_final_wait_end(compute_t *c, double now)
{
    if (c->phase != PH_RUN || c->final_wait_until == 0) return;
    const evalsum_round_t *fin = evalsum_final(&c->evals);    /* some of a final evaluation's batches came, */
    int awaited = fin && fin->first_t >= c->final_wait_from;  /* of the one awaited */
    const view_peer_t *rp = c->final_receiver != c->c.id ? peer_view_find(c->view, c->final_receiver) : NULL;
    int receiver_gone = c->final_receiver != c->c.id && (!rp || rp->health == PEER_GONE);
    if (!(now >= c->final_wait_until || s_stage_live(c, 0) == 0 || receiver_gone || (awaited && now - fin->last_t > FINAL_GAP_S)))
        return;
    char line[128];
    if (fin) snprintf(line, sizeof line, "the run is complete; %d of its final evaluation's %d batches arrived", fin->n, fin->nval);
    else snprintf(line, sizeof line, "the run is complete; its final evaluation did not arrive%s",
                  receiver_gone ? " (the node it went to left)" : "");
    s_say(c, line);
    s_finish(c);   /* reports what came */
}

/* Evaluation rounds none of whose batches came for EVAL_STALE_S (the rest
 * were lost) are reported as they are. */
static void s_eval_stale(compute_t *c, double now)
{
    s_eval_flush(c, now - EVAL_STALE_S);
}

double compute_tick(compute_t *c)
{
    double now = s_now(c);
    if (c->phase != PH_DONE && c->nstages > 1) s_check_alone(c, now);
    if (c->phase == PH_RUN && now >= c->next_timeout) {
        s_timeouts(c);
        s_send_held(c);
        if (c->auto_window && c->stage == 0) s_auto_window(c);
        s_send_self(c, MAIL_SELF);
        c->next_timeout = now + 0.2;
    }
    if (c->phase == PH_RUN) s_data_stage_end(c, now);
    s_last_stage_end(c);
    s_final_wait_end(c, now);
    s_eval_stale(c, now);
    if (c->phase == PH_RUN && c->final_wait_until == 0 && now >= c->next_move) {
        s_consider_move(c);
        c->next_move = now + 5.0;
    }
    return c->next_timeout < c->next_move ? c->next_timeout : c->next_move;
}

/* The data stage holds what the run still needs: before its version
 * reaches --steps, what its own updates up to there need (the microbatches
 * of its version, those accumulated since and those in flight: more ran
 * past the run's end, and past its final evaluation, which goes out at
 * --steps); after that, or once it trained on after its final evaluation,
 * what the swarm's count still lacks. */
static int s_steps_covered(const compute_t *c)
{
    if (c->reopened) return (uint64_t)c->inflight >= s_reopened_short(c);
    if (c->version >= c->o->steps) return (uint64_t)c->inflight >= s_run_short(c);
    return c->version * c->o->micro + c->bwd_count + c->inflight >= (int64_t)c->o->steps * c->o->micro;
}

/* The data stage may start new microbatches now. */
static int s_may_issue(const compute_t *c)
{
    if (c->stage != 0 || !s_all_stages_served(c)) return 0;
    if (c->closing) return 0;
    if (s_steps_covered(c)) return 0;
    if (c->o->schedule == SCHED_GPIPE) return c->inflight == 0;
    return c->inflight < c->max_inflight && s_budget_room(c);
}

int compute_step(compute_t *c, double *flops)
{
    c->flops = 0;
    int did = 0;
    if (c->phase == PH_RUN) {
        mail_t *m;
        if ((m = pending_pop(&c->grads))) {
            s_on_grad(c, m);
            mail_free(m);
            did = 1;
        } else if ((m = pending_peek(&c->acts))) {
            if (s_on_act(c, m) == 0) {
                mail_free(pending_pop(&c->acts));
                did = 1;
            }
        } else if (c->plan < 0 && c->stage == 0) {
            did = s_plan_step(c);
        } else if (s_may_issue(c)) {
            /* gpipe: the rest of this update's microbatches at once (a round is cut by the POOL_MAX slots when
             * --micro is larger: the next round then completes the update, never runs past it) */
            int n = c->o->schedule == SCHED_GPIPE ? c->o->micro - c->bwd_count : 1;
            for (int k = 0; k < n; k++)
                if (s_issue(c, NULL) == 0) did = 1;
        }
    }
    if (flops) *flops = c->flops;
    return did;
}

void compute_account(compute_t *c, double seconds)
{
    if (c->probing) {   /* --split auto's timed forward: not the training's compute */
        c->probing = 0;
        if (seconds > 0 && (c->probe_best == 0 || seconds < c->probe_best)) c->probe_best = seconds;
    } else if (seconds > 0) {
        c->busy_s += seconds;
    }
}

void compute_stop(compute_t *c, int done)
{
    if (c->phase == PH_DONE) return;
    c->done = done;
    c->phase = PH_DONE;
}

int compute_finished(const compute_t *c)
{
    return c->phase == PH_DONE;
}

void compute_result(const compute_t *c, compute_result_t *out)
{
    memset(out, 0, sizeof *out);
    out->status = c->status;
    out->done = c->done;
    snprintf(out->why, sizeof out->why, "%s", c->status ? c->why : "completed");
    out->stage = c->stage;
    out->version = c->version;
    out->tokens = c->tokens;
    out->completed = c->completed;
    out->lost = c->lost;
    out->retries = c->retries;
    out->drops = c->drops;
    out->skipped = c->skipped;
    out->inflight = c->inflight;
    out->cursor = c->cursor;
    out->saved = c->saved_version == c->version && c->saved_stage == c->stage;
}

int compute_save_checkpoint(compute_t *c, char *err, size_t errlen)
{
    if (!c->st || !c->c.ckpt_path || !c->c.ckpt_path[0] || c->fetching) return 0;
    checkpoint_info_t info = {0};
    info.cfg = c->cfg;
    info.run = c->c.run;
    info.stage = c->stage;
    info.nstages = c->nstages;
    info.version = c->st->version;
    info.cursor = c->cursor;
    info.completed = c->completed;
    if (checkpoint_save(c->c.ckpt_path, &info, c->st->params, c->st->m, c->st->v, c->lay.nparams, err, errlen) < 0)
        return -1;
    c->saved_stage = c->stage;
    c->saved_version = c->st->version;
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

int compute_plan(const opts_t *o, int ck_split, int net_plan)
{
    if (o->split != SPLIT_AUTO) return o->split;
    return ck_split >= 0 ? ck_split : net_plan;
}

compute_t *compute_new(const compute_cfg_t *cfg, char *err, size_t errlen)
{
    compute_t *c = calloc(1, sizeof *c);
    if (!c) { snprintf(err, errlen, "out of memory"); return NULL; }
    c->rtt_for = -1;
    c->c = *cfg;
    c->o = cfg->o;
    c->st = cfg->st;
    c->data = cfg->data;
    c->c.st = NULL;
    c->c.data = NULL;
    c->c.view = NULL;
    router_init(&c->router);
    evalsum_init(&c->evals);
    applied_init(&c->applied);
    c->stage = cfg->stage;
    c->nstages = c->o->stages;
    if (cfg->view) s_take_view(c, cfg->view);
    c->B = c->o->batch;
    c->cfg = c->o->cfg;
    c->plan = cfg->plan;
    if (c->plan >= 0) c->cfg.split = (model_split_t)c->plan;
    c->T = c->cfg.kind == MODEL_GPT ? c->cfg.maxT : 1;
    c->targets_n = (size_t)c->B * c->T;
    c->cursor = cfg->cursor;
    /* microbatch ids: an origin of 32 bits drawn from the node id and the
     * start's wall clock (each start of a node its own, so a node restarted
     * with the same identity never reissues an id peers have seen, and never
     * looks older than its last start: applied.h), then a sequence from 1 */
    c->mb_origin = rng_mix(c->c.id ^ rng_mix((uint64_t)c->c.clock.wall_ms(c->c.clock.arg))) >> APPLIED_SEQ_BITS;
    c->mb_seq = 0;
    c->completed = cfg->completed;
    c->t0 = s_now(c);
    c->last_backup = c->t0;
    c->last_move = -1e9;
    c->fetch_from = -1;
    c->saved_version = -1;
    c->last_loss = NAN;
    if (c->st) { c->lay = c->st->s; c->version = c->st->version; }
    else if (stage_init(&c->lay, &c->cfg, c->stage, c->nstages, err, errlen) < 0) { compute_destroy(&c); return NULL; }
    c->lay.threads = c->o->threads;   /* threads of each engine call (--threads) */
    if (c->st) c->st->s.threads = c->o->threads;
    c->max_inflight = c->o->max_inflight > 0 ? c->o->max_inflight : 2 * c->nstages;
    if (c->o->schedule == SCHED_GPIPE) c->max_inflight = c->o->micro;
    c->auto_window = c->o->max_inflight == 0 && c->o->schedule != SCHED_GPIPE;
    s_window_reset(c);
    metrics_set_stage(c->c.metrics, c->stage);
    if (c->o->split == SPLIT_AUTO && c->plan >= 0)
        metrics_event(c->c.metrics, "plan", "\"split\":%s,\"how\":%s", c->plan == SPLIT_LATE ? "late" : "even",
                      "known at the start (the run's checkpoint here, or its WELCOME)");
    if (s_stage_setup(c) < 0) {
        snprintf(err, errlen, "out of memory for activations");
        compute_destroy(&c);
        return NULL;
    }
    c->phase = PH_RUN;
    if (cfg->start != START_AS_IS) s_fetch(c, cfg->start == START_DOWNLOAD ? cfg->donor : 0);
    else metrics_event(c->c.metrics, "resume", "\"version\":%lld,\"from\":%s", (long long)c->version,
                       c->version > 0 ? "checkpoint" : "initial");
    s_send_self(c, MAIL_SELF);
    return c;
}

void compute_destroy(compute_t **self_p)
{
    compute_t *c = *self_p;
    if (!c) return;
    s_stage_teardown(c);
    mail_t *m = c->out_head;
    while (m) { mail_t *next = (mail_t *)m->q.next; mail_free(m); m = next; }
    router_fini(&c->router);
    evalsum_fini(&c->evals);
    free(c->pick_rix);
    applied_fini(&c->applied);
    free(c->view);
    free(c->by_stage);
    stage_state_destroy(&c->st);
    data_close(&c->data);
    data_batch_free(&c->batch);
    free(c->targets8);
    free(c);
    *self_p = NULL;
}
