/* internal.h: the compute side's object (compute.h), shared by its parts:
 * compute.c (entry points, mail out, reports), compute/view.c (the peer
 * table as seen here), compute/schedule.c (issue, forward, backward,
 * records), compute/closing.c (the end of a run), compute/eval.c
 * (evaluation), compute/state.c (state transfer, backups, moves),
 * compute/plan.c (--split auto) and compute/delay.c (weight delay).  Not
 * for use outside them. */
#ifndef BRIGADE_RUNTIME_COMPUTE_INTERNAL_H
#define BRIGADE_RUNTIME_COMPUTE_INTERNAL_H
#include "node/runtime/compute.h"
#include "node/runtime/compute/balance.h"
#include "node/runtime/compute/closing.h"
#include "node/runtime/compute/delay.h"
#include "node/runtime/compute/eval.h"
#include "node/runtime/compute/plan.h"
#include "node/runtime/compute/schedule.h"
#include "node/runtime/compute/state.h"
#include "node/runtime/compute/view.h"
#include "node/runtime/codecpick.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Where the compute side is: fetching its stage's state, serving it, or ended. */
typedef enum { PH_FETCH = 0, PH_RUN, PH_DONE } compute_phase_t;

/* The sizes of the stage's tensors. */
typedef struct {
    int B, T;                     /* sequences per microbatch, positions per sequence (1: mlp) */
    size_t in_n, out_n, targets_n;
    size_t targets_len;           /* the targets' bytes on the wire (targets_n x proto_target_width) */
} compute_shape_t;

struct compute {
    compute_cfg_t cfg;            /* configuration (view, st, data moved out) */
    const opts_t *o;              /* == cfg.o */
    model_config_t model;         /* the model as this node splits it: o->cfg with the split of the plan */
    int stage, nstages;
    compute_shape_t shape;
    stage_t lay;                  /* the stage's layout */
    stage_state_t *st;            /* its training state (NULL when modelled) */
    int64_t version;              /* weight version (== st->version when not modelled) */
    float dummy;                  /* modelled: the "weights" the stash tracks */
    compute_phase_t phase;
    view_cache_t seen;            /* the peer table as seen here (view.h) */
    schedule_work_t work;         /* microbatches held, tensors waiting (schedule.h) */
    schedule_issue_t issue;       /* data stage: the microbatches it issues (schedule.h) */
    schedule_update_t upd;        /* the update under way (schedule.h) */
    schedule_counts_t count;      /* what was done here (schedule.h) */
    delay_t delay;                /* weight versions and delay (delay.h) */
    plan_choice_t plan;           /* the run's split (plan.h) */
    closing_t closing;            /* the end of the run (closing.h) */
    state_moves_t state;          /* fetches, snapshots, moves (state.h) */
    balance_t balance;            /* rebalancing across the stages (balance.h) */
    evalsum_t evals;              /* evaluation rounds being summed (last stage, or a single stage) */
    double t0;                    /* when this node started */
    double last_company;          /* when the view last held a live peer (0: never yet) */
    struct { mail_t *head, *tail; } outbox;   /* mail produced, not yet flushed */
    struct {
        int status;               /* 0 ok */
        compute_done_t done;
        char why[256];            /* reason when status != 0 */
    } end;
};

/* The clock's time. */
static inline double compute_now(const compute_t *c) { return rt_now(&c->cfg.clock); }

/* This node serves the last stage. */
static inline int compute_last(const compute_t *c) { return c->stage == c->nstages - 1; }

/* The live weights (modelled: the stand-in the stash tracks). */
static inline const float *compute_params(const compute_t *c) { return c->st ? c->st->params : &c->dummy; }

/* compute.c (each contract at its definition) */
void compute_fail(compute_t *c, const char *why);
void compute_out(compute_t *c, mail_t *m);
void compute_drop(compute_t *c, const char *why, uint64_t from);
void compute_trace(compute_t *c, int what, uint64_t mb, int64_t v);
mail_t *compute_tensor_mail(compute_t *c, int type, uint64_t peer, uint64_t mb, const float *x, size_t n, int codec);
void compute_send_self(compute_t *c, int kind);
double compute_rate(const compute_t *c);
void compute_emit_update(compute_t *c, double loss);
void compute_say(compute_t *c, const char *line);
#endif
