/* compute.h: the compute side of a node.  It owns the stage's training
 * state, the weight stash, the activations of the microbatches it holds,
 * the schedule (asynchronous 1F1B, or the gpipe baseline), the routing
 * decisions (which peer of the next stage gets each microbatch), the
 * optimizer, evaluation, checkpoints, backups of its stage and moves to
 * other stages.  It reacts to mail from the network side
 * (compute_on_mail), to time (compute_tick) and runs one piece of work at a
 * time (compute_step); what it sends goes out as mail (compute_flush).
 *
 * Production runs it on the node's compute thread; the simulator on its
 * one thread, with the duration of each step modelled from its FLOPs. */
#ifndef BRIGADE_RUNTIME_COMPUTE_H
#define BRIGADE_RUNTIME_COMPUTE_H
#include <stdint.h>
#include "node/engine/data.h"
#include "node/engine/train.h"
#include "node/runtime/env.h"
#include "node/runtime/mail.h"
#include "node/runtime/metrics.h"
#include "node/runtime/netside.h"
#include "node/runtime/options.h"

/* What the node's owner sees after each update (progress line, status page). */
typedef struct {
    int stage, nstages;     /* the stage served */
    int peers;              /* live nodes in the swarm, this one included */
    int64_t version;        /* weight version */
    uint64_t tokens;        /* tokens processed here */
    double loss;            /* the last stage's loss (here or by gossip), NaN unknown */
    int last;               /* 1 when this node is on the last stage */
    double elapsed_s;       /* since the node started */
    uint64_t bytes_sent, bytes_sent_raw, bytes_recv;
    uint64_t drops;         /* messages refused (both sides) */
    int stash;              /* weight versions held */
    int inflight;           /* microbatches held */
    double rtt_ms;          /* mean round trip to live peers, 0 unknown */
} node_report_t;

/* What the trace hook is told (the simulator checks its invariants with it). */
enum {
    TRACE_ISSUE = 1,   /* the data stage issued microbatch mb (a re-issue keeps its id) */
    TRACE_APPLY,       /* this node accumulated mb's gradient (at most once per node and stage it serves) */
    TRACE_LOST,        /* the data stage gave mb up */
    TRACE_SKIP,        /* the data stage learnt mb was applied further on already (DUP) */
    TRACE_UPDATE,      /* an optimizer update made version v (mb: the stage) */
    TRACE_MOVE,        /* this node moved to stage mb: what it applies from now on is that stage's */
    TRACE_RELAYOUT,    /* this node took another split of the run at stage mb (--split auto chosen apart):
                          its weights and version start again from what it takes (v: its version now) */
};

typedef struct {
    void *arg;
    void (*report)(void *arg, const node_report_t *r);  /* after each update (compute thread) */
    void (*say)(void *arg, const char *line);           /* a line for the user: moves, resumes */
    void (*trace)(void *arg, int what, uint64_t mb, int64_t v);  /* optional: TRACE_* */
} node_observer_t;

/* How the stage's state is obtained before serving. */
enum { START_AS_IS = 0, START_DOWNLOAD, START_BACKUP };

typedef struct {
    const opts_t *o;             /* run config (immutable while running) */
    uint64_t id;                 /* this node's id */
    uint64_t run;                /* run id */
    int stage, shard;            /* stage served; data shard (stage 0) */
    plan_t plan;                 /* the run's split st is laid out in (options.h): compute_plan */
    stage_state_t *st;           /* the stage's state (ownership passes; NULL when modelled) */
    data_t *data;                /* the data (stage 0; ownership passes), NULL elsewhere */
    int start;                   /* START_*: serve st as it is, or fetch it first */
    uint64_t donor;              /* START_DOWNLOAD: the peer to download from */
    uint64_t cursor;             /* data position to start from (checkpoint) */
    uint64_t completed;          /* microbatches completed here before (checkpoint) */
    const char *ckpt_path;       /* DIR/stage.ckpt, or NULL */
    metrics_t *metrics;          /* events (thread-safe) */
    rt_clock_t clock;            /* time */
    void (*post)(void *arg, mail_t *m);  /* mail to the network side (ownership passes) */
    void *post_arg;
    const net_counters_t *net;   /* the network side's counters (read only) */
    peer_view_t *view;           /* the first snapshot of the peer table (ownership passes) */
    node_observer_t obs;         /* optional */
    int modelled;                /* simulator: no math, tensors modelled by their sizes */
} compute_cfg_t;

typedef struct compute compute_t;

/* How a node about to serve `stage` gets its state, from a snapshot of the
 * peer table: a download from the alive peer of the stage with the highest
 * version (*donor), unless a checkpoint of the stage at ck_version (-1:
 * none) is not behind it; else the checkpoint; else, for a joiner of a run
 * under way whose stage has no peer, a backup; else the initial weights.
 * Returns START_*; START_AS_IS with *use_ck 1 means "resume the checkpoint". */
int compute_choose_start(const peer_view_t *v, int stage, int64_t ck_version, int joiner, uint64_t *donor, int *use_ck);

/* The split a node about to start lays its stage out in: the run's
 * (o->split), or under --split auto the one its checkpoint of this run was
 * written in (ck_split), else the one the network side has heard of
 * (net_plan); each of them may be PLAN_UNCHOSEN. */
plan_t compute_plan(const opts_t *o, plan_t ck_split, plan_t net_plan);

/* A compute side.  NULL with a reason when out of memory. */
compute_t *compute_new(const compute_cfg_t *cfg, char *err, size_t errlen);
void compute_destroy(compute_t **self_p);

/* Mail from the network side (ownership passes). */
void compute_on_mail(compute_t *self, mail_t *m);
/* Timed work: re-issues, the window, rate reports, moves.  Returns the
 * clock time it wants to be called again by. */
double compute_tick(compute_t *self);
/* Runs the next piece of work (a backward, a forward, a new microbatch, an
 * evaluation): 1 when it did something, 0 when there was nothing to do.
 * *flops: the floating-point work it did (for modelled durations). */
int compute_step(compute_t *self, double *flops);
/* Why the compute side has nothing to run (after compute_step gave 0):
 * waiting for input (a tensor, or the swarm); held by the delay budget or a
 * gpipe flush (data stage); held by the window, the microbatches the round
 * trip and the queues along the pipeline allow (data stage); anything else
 * (fetching its state, choosing the split, draining before a move, finished). */
enum { COMPUTE_IDLE_INPUT = 1, COMPUTE_IDLE_HELD, COMPUTE_IDLE_WINDOW, COMPUTE_IDLE_OTHER };
int compute_idle(const compute_t *self);
/* The time the last step took (production: measured; the simulator:
 * modelled from its FLOPs): the node's capacity and window come from it. */
void compute_account(compute_t *self, double seconds);
/* Posts the mail the last steps produced (the simulator holds it until the
 * modelled end of the step; production flushes at once). */
void compute_flush(compute_t *self);
/* How the compute side ended (compute_result_t.done, self_info_t.done). */
typedef enum {
    COMPUTE_RUNNING = 0,     /* not ended */
    COMPUTE_ENDED = 1,       /* completed, or failed (the status says which) */
    COMPUTE_STOPPED = 2,     /* stopped from outside: interrupted */
} compute_done_t;
/* Asks the compute side to stop, ending as `done` says. */
void compute_stop(compute_t *self, compute_done_t done);
/* 1 when the compute side has finished (completed, failed or stopped). */
int compute_finished(const compute_t *self);

/* The end of a run, for the `end` event. */
typedef struct {
    int status;              /* 0 ok */
    compute_done_t done;     /* COMPUTE_ENDED or COMPUTE_STOPPED */
    char why[256];           /* reason when status != 0 */
    int stage;
    int64_t version;
    uint64_t tokens, completed, lost, retries, drops, skipped;
    int inflight;            /* microbatches still held */
    uint64_t cursor;         /* data position reached */
    int saved;               /* 1: the checkpoint file holds this stage at this version (written here) */
} compute_result_t;
void compute_result(const compute_t *self, compute_result_t *out);
/* Writes this stage's checkpoint now (after the compute side ended, too);
 * nothing while the stage's state is still being fetched (a download, a
 * backup, a move): the weights held then are initial ones, and the file may
 * hold a good earlier state.  0, or -1 with a reason. */
int compute_save_checkpoint(compute_t *self, char *err, size_t errlen);
/* The stage's parameters and version (NULL when modelled). */
const stage_state_t *compute_state(const compute_t *self);
#endif
