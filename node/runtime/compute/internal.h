/* internal.h: the compute side's object (compute.h), shared by its parts:
 * compute.c (entry points, mail out, reports), compute/view.c (the peer
 * table as seen here), compute/schedule.c (issue, forward, backward,
 * records), compute/closing.c (the end of a run), compute/eval.c
 * (evaluation), compute/state.c (state transfer, backups, moves),
 * compute/plan.c (--split auto) and compute/delay.c (weight delay).  Not
 * for use outside them. */
#ifndef BRIGADE_RUNTIME_COMPUTE_INTERNAL_H
#define BRIGADE_RUNTIME_COMPUTE_INTERNAL_H
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
#include "node/runtime/compute.h"

#define POOL_MAX 64          /* activation slots (microbatches held at once) */
#define EVAL_SLOT POOL_MAX   /* one more, evaluation's own: it never waits on training work in flight */
#define REC_MAX 256          /* microbatch records */
#define AVG_EVERY 20         /* updates between within-stage averaging (weights sent as fp16) */

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
    double rtt_mean, rtt_min;     /* view_rtt's result, kept until the view or the stage changes */
    batch_t batch;                /* data stage: the batch being issued */
    uint8_t *targets8;            /* its targets as sent (one byte each) */
    uint64_t cursor, mb_origin, mb_seq;   /* data stage: its position in the data; microbatch ids (schedule_issue) */
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
                                     after it stopped at --steps): closing.c's s_reopened_short says when it has done enough */
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

static inline double compute_now(const compute_t *c) { return rt_now(&c->c.clock); }

static inline int compute_last(const compute_t *c) { return c->stage == c->nstages - 1; }

static inline const float *compute_params(const compute_t *c) { return c->st ? c->st->params : &c->dummy; }

/* compute.c (each contract at its definition) */
void compute_fail(compute_t *c, const char *why);
void compute_out(compute_t *c, mail_t *m);
void compute_drop(compute_t *c, const char *why, uint64_t from);
void compute_trace(compute_t *c, int what, uint64_t mb, int64_t v);
mail_t *compute_tensor_mail(compute_t *c, int type, uint64_t peer, uint64_t mb, const float *x, size_t n, int codec);
void compute_send_self(compute_t *c, int kind);
void compute_emit_update(compute_t *c, double loss);
void compute_say(compute_t *c, const char *line);

/* compute/view.c (each contract at its definition) */
void view_take(compute_t *c, peer_view_t *v);
const int *view_stage_peers(const compute_t *c, int s, int *n);
int view_stage_live(const compute_t *c, int stage);
int view_all_stages_served(const compute_t *c);
void view_rtt(compute_t *c, double *mean, double *min);
uint64_t view_pick(compute_t *c, int stage, uint64_t avoid);
void view_peer_returned(compute_t *c, uint64_t peer, double turnaround, int silent);
double view_loss(const compute_t *c);
uint64_t view_stage_lowest(const compute_t *c);

/* compute/schedule.c (each contract at its definition) */
double schedule_fwd_flops(const compute_t *c);
uint64_t schedule_next_peer(compute_t *c, uint32_t flags, uint64_t avoid);
uint64_t schedule_send_out(compute_t *c, int slot, uint64_t mb, uint32_t flags, const uint8_t *targets, uint64_t avoid);
void schedule_load_batch(compute_t *c, int slot);
int schedule_issue(compute_t *c, mbrec_t *old);
void schedule_send_held(compute_t *c);
int schedule_take_input(compute_t *c, int slot, const mail_t *m);
int schedule_on_act(compute_t *c, const mail_t *m);
void schedule_on_grad(compute_t *c, const mail_t *m);
void schedule_timeouts(compute_t *c);
int schedule_may_issue(const compute_t *c);

/* compute/closing.c (each contract at its definition) */
int closing_run_complete(const compute_t *c);
void closing_finish(compute_t *c);
void closing_issue_final(compute_t *c);
void closing_data_stage_end(compute_t *c, double now);
void closing_last_stage_end(compute_t *c);
void closing_final_passing(compute_t *c);
int closing_closed_to_training(compute_t *c);
void closing_final_wait_end(compute_t *c, double now);
int closing_steps_covered(const compute_t *c);

/* compute/eval.c (each contract at its definition) */
int eval_slot(compute_t *c);
void eval_flush(compute_t *c, double before);
int eval_issue(compute_t *c, uint32_t flags);
void eval_batch(compute_t *c, uint32_t round, int final, int nval, int i, const acts_t *a);
int eval_on_act(compute_t *c, const mail_t *m);
void eval_stale(compute_t *c, double now);

/* compute/state.c (each contract at its definition) */
void state_save_periodic(compute_t *c);
void state_average(compute_t *c);
void state_maybe_backup(compute_t *c);
int state_on_avg(compute_t *c, mail_t *m);
void state_apply_avg(compute_t *c);
void state_send(compute_t *c, uint64_t peer, uint32_t flags);
void state_fetch(compute_t *c, uint64_t donor);
void state_check_donor(compute_t *c);
int state_stage_setup(compute_t *c);
void state_stage_teardown(compute_t *c);
void state_on_fetched(compute_t *c, mail_t *m);
int state_relayout(compute_t *c, const model_config_t *cfg, int stage);
void state_consider_move(compute_t *c);

/* compute/plan.c (each contract at its definition) */
int plan_late_split_helps(const compute_t *c, int need, int holds);
void plan_adopt(compute_t *c, int plan, const char *how);
int plan_tensor_split_ok(compute_t *c, const mail_t *m);
int plan_step(compute_t *c);

/* compute/delay.c (each contract at its definition) */
int delay_max_delay(const compute_t *c);
int delay_budget_room(const compute_t *c);
int delay_window_held(const compute_t *c);
void delay_window_reset(compute_t *c);
int delay_budget(const compute_t *c);
int delay_now(const compute_t *c);
const float *delay_version_weights(const compute_t *c);
void delay_choose_weights(compute_t *c);
int delay_budget_holds(const compute_t *c);
int delay_micro_needed(const compute_t *c);
void delay_note(compute_t *c, int64_t v);
int delay_inflight_need(int K, double rtt_ms, double per_mb);
int delay_window_need(compute_t *c);
void delay_auto_window(compute_t *c);
#endif
