/* schedule.h: the schedule of the compute side (schedule.c): the
 * microbatches held (records, activation slots, tensors waiting), the data
 * stage's issue, and the update under way. */
#ifndef BRIGADE_RUNTIME_COMPUTE_SCHEDULE_H
#define BRIGADE_RUNTIME_COMPUTE_SCHEDULE_H
#include "node/engine/data.h"
#include "node/engine/train.h"
#include "node/runtime/applied.h"
#include "node/runtime/compute.h"
#include "node/runtime/pending.h"
#include "node/runtime/window.h"

#define POOL_MAX 64          /* activation slots (microbatches held at once) */
#define EVAL_SLOT POOL_MAX   /* one more, evaluation's own: it never waits on training work in flight */
#define REC_MAX 256          /* microbatch records */

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
    uint8_t *targets;     /* the targets its output carries, as sent (owned; NULL until it first goes out or waits),
                             kept to send it again when its next-stage peer is gone */
    int held;             /* its output waits for a route */
    int ahead;            /* its data stage's update under way does not wait for it (ACT_FLAG_AHEAD) */
    int last;             /* among the last its data stage's update under way waits for (ACT_FLAG_LAST) */
} mbrec_t;

/* The microbatches held here and the tensors waiting. */
typedef struct {
    mbrec_t rec[REC_MAX];
    int inflight;                 /* records in use */
    acts_t *pool[POOL_MAX + 1];   /* training's, then EVAL_SLOT */
    int npool, slot_used[POOL_MAX];   /* training's slots only: EVAL_SLOT is never held */
    grad_scratch_t *gs;
    int recompute;                /* --recompute here: the slots hold inputs alone (acts_new_inputs), the passes run in redo */
    acts_t *redo;                 /* --recompute: the one set of full activations training's passes run in */
    int redo_slot;                /* the slot whose forward redo holds (-1: none) */
    pending_t last, acts, ahead, grads; /* tensors waiting: activations (ACT_FLAG_LAST's and ACT_FLAG_AHEAD's apart), gradients */
    applied_t applied;            /* microbatches whose gradient this node accumulated */
} schedule_work_t;

/* A data-stage microbatch in flight, kept across a relayout of the stage
 * (schedule_issued_save / _restore): what issues it again. */
typedef struct {
    uint64_t mb, cursor;          /* its id and data position */
    int tries;                    /* times issued */
} issued_t;

/* The data stage's issue of microbatches. */
typedef struct {
    data_t *data;                 /* the data (stage 0), NULL elsewhere */
    batch_t batch;                /* the batch being issued */
    uint8_t *targets_wire;        /* its targets as sent (proto_put_targets) */
    uint64_t cursor, mb_origin, mb_seq;   /* its position in the data; microbatch ids (schedule_issue) */
    double turn_mean, turn_dev;   /* round-trip time of a microbatch */
    window_t win;                 /* the window the queueing along the pipeline allows */
    int window_need;              /* microbatches in flight the round trip asks for */
    int max_inflight, auto_window;
    int micro_said;               /* the micro last named in a warning (0: none) */
    double busiest;               /* the split's largest stage in parameters over this one's (>= 1) */
    double next_timeout;          /* when re-issues, the window and the rate are looked at next (any stage) */
    issued_t carried[REC_MAX];    /* microbatches in flight when the stage was laid out anew, issued again before new
                                     ones (schedule_issued_restore), the next last */
    int ncarried;
} schedule_issue_t;

/* The update under way and the step just run. */
typedef struct {
    int bwd_count;                /* backward passes since the last update */
    double loss_sum;
    int loss_n;
    double last_loss;             /* last stage: the last update's mean loss, NaN none */
    double flops;                 /* work of the current step */
} schedule_update_t;

/* What this node did, for reports and the end of the run. */
typedef struct {
    uint64_t retries, lost, drops, tokens, completed, skipped;
    uint64_t fwd_done;
    double busy_s;                /* compute seconds (rate) */
    double held_s, held_from;     /* data stage: seconds held by the delay budget (rate); since when now (0: not) */
} schedule_counts_t;

/* Each contract at its definition in schedule.c. */
double schedule_fwd_flops(const compute_t *c);
int schedule_setup_recompute(compute_t *c);
uint64_t schedule_next_peer(compute_t *c, uint32_t flags, uint64_t avoid);
uint64_t schedule_send_out(compute_t *c, int slot, uint64_t mb, uint32_t flags, const uint8_t *targets, uint64_t avoid);
void schedule_load_batch(compute_t *c, int slot);
int schedule_issue(compute_t *c, mbrec_t *old);
void schedule_send_held(compute_t *c);
int schedule_take_input(compute_t *c, int slot, const mail_t *m);
void schedule_take_targets(compute_t *c, acts_t *a, const mail_t *m);
int schedule_on_act(compute_t *c, const mail_t *m);
void schedule_on_grad(compute_t *c, const mail_t *m);
void schedule_timeouts(compute_t *c);
int schedule_may_issue(const compute_t *c);
void schedule_check(const compute_t *c);
int schedule_issued_save(const compute_t *c, issued_t *out);
void schedule_issued_restore(compute_t *c, const issued_t *in, int n);
#endif
