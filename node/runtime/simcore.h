/* simcore.h: the inside of `brigade sim` (sim.h), shared by its parts:
 * the driver (sim.c: nodes, events, the loop), the virtual network
 * (simnet.c), fault plans and churn (simplan.c) and the invariants and
 * results (siminv.c).  Not for use outside them. */
#ifndef BRIGADE_RUNTIME_SIMCORE_H
#define BRIGADE_RUNTIME_SIMCORE_H
#include "node/runtime/sim.h"
#include "net/keys.h"
#include "net/vcache.h"
#include "node/runtime/compute.h"
#include "node/runtime/idmap.h"
#include "node/runtime/netside.h"

#define SIM_PORT 7700
#define SIM_EPOCH_MS 1800000000000ull   /* the virtual wall clock starts here */
#define STOP_AFTER_S 0.5                /* a node whose compute ended stays on the network this long */
#define END_GRACE_S 700.0               /* after the run completes, live nodes must end within this (a node cut off gives up after 600 s) */
#define REJOIN_S 5.0                    /* a failed join is tried again (through another node) after this */
#define ROGUE_EVERY_S 0.2               /* a rogue sends a bad message this often */
#define PROGRESS_EVERY_S 60.0           /* simulated seconds between progress lines (and liveness checks) */
#define LIVE_BOUND_S 300.0              /* a swarm with a live node at every stage makes progress within this */

enum { EV_START = 1, EV_DELIVER, EV_NET, EV_COMP, EV_COMP_DONE, EV_STOP, EV_PLAN, EV_CHURN, EV_ROGUE, EV_PROGRESS };

/* A message on the virtual network. */
typedef struct {
    int src, dst;              /* node indices */
    int dst_inc;               /* the destination's incarnation when it was sent */
    uint8_t hdr[WIRE_HDR_LEN]; /* the header as encoded on the wire */
    int nframes;
    size_t len[TRANSPORT_MAX_FRAMES];
    uint64_t virt;             /* bytes its modelled tensors stand for */
    uint64_t bytes;            /* its size on the wire */
    int type;                  /* header type (for byte classes) */
    uint8_t data[];            /* the frames, one after another (one allocation with the message) */
} simmsg_t;

typedef struct {
    double t;
    uint64_t seq;              /* ties broken by order of scheduling */
    int type;
    int node;
    uint64_t gen;              /* EV_NET/EV_COMP: stale when not the node's current generation */
    simmsg_t *msg;             /* EV_DELIVER */
} ev_t;

typedef struct sim sim_t;

/* Where one node's time goes (simtime.c): what it is doing since when. */
typedef struct {
    int what;                  /* SIM_T_*, -1: not counted (not alive) */
    int stage;                 /* the stage it serves then (-1: none yet) */
    double since;
    double link_until;         /* idle: its uplink was busy until then when it fell idle, */
    double avg_until;          /* the averaging weights among what it sent until then */
    double avg_end;            /* when the last averaging message it sent leaves its uplink */
    int prepared;              /* it started a stage once (an initial node: the steady state waits for it) */
} simtime_t;

/* What the invariants follow of one node. */
typedef struct {
    idmap_t applied;           /* microbatches its compute side applied (this incarnation's stage tenure: a restarted
                                  node starts with no memory and no state of its earlier life, as a fresh process) */
    int64_t last_v;            /* last weight version of its stage tenure */
    int last_vstage;
    uint64_t issued, resolved; /* data stage: microbatches issued; applied here, lost or skipped */
} simcheck_t;

typedef struct {
    sim_t *sim;
    int idx;
    int alive;                 /* running now */
    int inc;                   /* incarnation (restarts) */
    keypair_t keys;
    uint64_t id;
    char idshort[9];
    char addr[64];             /* HOST:PORT */
    opts_t o;                  /* its options (a joiner's get the run config at WELCOME) */
    netside_t *net;
    compute_t *comp;
    metrics_t *metrics;
    mail_t *mhead, *mtail;     /* mail waiting for the compute side */
    int busy;                  /* a compute step is running */
    uint64_t cgen, ngen;       /* generations of its compute and network wake-ups */
    double cwake;              /* when its compute wake-up is scheduled (INFINITY: none) */
    double nwake;              /* when its network wake-up is scheduled */
    double speed, slow;        /* compute speed factor; plan slowdown */
    double paused_until;       /* plan pause: its events wait until then (0: never paused) */
    double bps;                /* uplink, bits per second (0: unlimited) */
    double egress_free;        /* when its uplink is free again */
    int rogue;                 /* plan rogue: it sends garbage every ROGUE_EVERY_S while alive, restarts too */
    int killed_early;          /* plan kill before its first start: it does not start (a restart starts it) */
    int joiner, joined;        /* it joins through another node; it has been welcomed */
    int finished;              /* its compute ended (or its join failed for good) */
    int closed;                /* its compute side's outcome was counted */
    double started_at, left_at;
    int learned;               /* it knew a live peer of every stage */
    int *links;                /* link -> destination node */
    int nlinks, caplinks;
    simmsg_t *last_in;         /* a rogue's last received message (replays) */
    simcheck_t chk;            /* what the invariants follow */
    simtime_t tm;              /* where its time goes */
} snode_t;

struct sim {
    sim_opts_t so;
    FILE *log;
    sim_result_t *res;
    double now;
    uint64_t rng;
    uint64_t seq;
    ev_t *heap;
    int nheap, capheap;
    snode_t **node;
    int nnodes, capnodes;
    metrics_t *metrics;        /* the shared file */
    plan_ev_t *plan;
    int nplan;
    int part_active;           /* a partition is in force */
    unsigned char *part;       /* per node: side 1 or 0 */
    idmap_t pair_ix;           /* (src, dst) -> index in pair_last */
    double *pair_last;         /* last arrival on each directed link (order kept) */
    int npairs, cappairs;
    uint64_t trace;
    double done_at;            /* when the run completed (INFINITY: not yet) */
    double pause_end;          /* the latest end of a plan pause (nodes paused then may end only after it) */
    uint64_t sent_dead, recv_dead;  /* counters of nodes that are gone */
    double wall0, cpu0;        /* wall and CPU clocks at the start */
    uint64_t best_done;        /* the run's progress as the last node that left saw it */
    uint64_t rogue_sent;       /* bytes rogues put on the network beside their network sides */
    double capacity;           /* FLOPs the nodes could have done while alive (speed x --gflops x time) */
    int prepared;              /* initial nodes that started their stage (the steady state begins when all did) */
    double last_progress;      /* when the swarm last made progress (sim_progressed) */
    double live_since;         /* since when every stage has had a live node, no pause or partition in force */
    double cap0;               /* capacity at the start of the steady state */
    uint64_t mb0;              /* the last stage's count then */
    vcache_t *vcache;          /* announcements verified already (all nodes: verification is a pure function) */
};


/* ---- the driver (sim.c) ---- */

/* Deterministic randomness: a mixer; the run's stream; an exponential
 * waiting time of `rate` per second; a number in [lo, hi] for a key. */
uint64_t sim_mix(uint64_t x);
double sim_uniform(sim_t *s);
double sim_exponential(sim_t *s, double rate);
double sim_range(const sim_t *s, uint64_t key, double lo, double hi);
/* Folds x into the event trace's hash. */
void sim_fold(sim_t *s, uint64_t x);
/* The process's monotonic wall clock, seconds. */
double sim_wall(void);
/* Counts a broken invariant (the first one's reason is kept). */
void sim_violation(sim_t *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Schedules an event (ties run in the order scheduled). */
void sim_push(sim_t *s, double t, int type, int node, uint64_t gen, simmsg_t *msg);
/* A new node (not started), NULL when out of memory. */
snode_t *sim_node_new(sim_t *s);
/* Starts (or restarts) a node: the creator serves at once, others join. */
void sim_node_start(snode_t *n);
/* The node leaves: crash (gone at once) or after its compute side ended. */
void sim_node_stop(snode_t *n, int crash);
/* Wakes the node's compute side by `at` (unless it is busy or due sooner). */
void sim_comp_wake(snode_t *n, double at);
/* Runs what is due on the node's network side now. */
void sim_net_kick(snode_t *n);
/* A joiner's state after something happened to it. */
void sim_check_join(snode_t *n);

/* ---- the virtual network (simnet.c) ---- */

void sim_msg_free(simmsg_t *m);
/* The port a node's network side sends through (rt_port_t's callbacks). */
int sim_port_connect(void *arg, const char *addr, const uint8_t pub[32], char *err, size_t errlen);
void sim_port_disconnect(void *arg, int link);
int sim_port_send(void *arg, int link, const transport_msg_t *to, const wire_hdr_t *h,
                  const void *const *f, const size_t *l, int nf, uint64_t virt);
/* A message event arrives at its destination (or is dropped). */
void sim_deliver(sim_t *s, simmsg_t *m);
/* A rogue node sends something bad to a random live node. */
void sim_rogue_send(sim_t *s, snode_t *n);

/* ---- fault plans and churn (simplan.c) ---- */

/* --plan's events, then --faults random ones, into s->plan / s->nplan.
 * 0, or -1 with a one-line reason (s->plan may be set: the caller frees it). */
int sim_load_plan(sim_t *s, char *err, size_t errlen);
void sim_apply_plan(sim_t *s, const plan_ev_t *p);
/* A random live node leaves, a new one joins a little later. */
void sim_churn(sim_t *s);

/* ---- invariants and results (siminv.c) ---- */

/* The compute side's observer hooks (node_observer_t). */
void sim_trace(void *arg, int what, uint64_t mb, int64_t v);
void sim_report(void *arg, const node_report_t *r);
/* The outcome of a node's compute side, once, when it ends. */
void sim_close_compute(snode_t *n, int died);
/* A node that has not yet learnt every stage: does it now? */
void sim_check_learned(snode_t *n);
/* Modelled FLOPs of one microbatch through every stage. */
double sim_mb_flops(const sim_opts_t *so);
/* The swarm made progress now: a microbatch applied at the last stage, an
 * update, a compute side that ended. */
void sim_progressed(sim_t *s);
/* Liveness, checked every PROGRESS_EVERY_S: a run in which every stage has
 * had a live, serving node (none paused, no partition) for LIVE_BOUND_S
 * makes progress within it. */
void sim_check_live(sim_t *s);
/* By when every node must have ended once the run completed. */
double sim_end_deadline(const sim_t *s);
/* The results and the end-of-run invariants into s->res. */
void sim_finish(sim_t *s);

/* ---- where the time goes, the steady state (simtime.c) ---- */

/* Node n is now doing `what` (SIM_T_*; -1: it is gone). */
void simtime_set(snode_t *n, int what);
/* Node n started its stage: the steady state may begin. */
void simtime_prepared(snode_t *n);
/* The last stage applied a microbatch: the steady state may end. */
void simtime_applied(sim_t *s);
/* The end of the run: the steady state ends if it has not. */
void simtime_finish(sim_t *s);
/* FLOPs the nodes could have done until now (speed x --gflops x time alive). */
double simtime_capacity(const sim_t *s);
#endif
