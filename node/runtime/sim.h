/* sim.h: `brigade sim`: whole swarms of the real runtime (the network
 * sides and compute sides of netside/ and compute.c, unchanged) in one
 * process, on a virtual clock and a virtual network, driven by one
 * discrete-event loop.  Simulated time runs as fast as the CPU allows.
 *
 * The network: every node has an uplink of its own bandwidth (messages
 * serialize one after another), every directed link its own latency
 * (asymmetric) plus jitter, order kept per link (TCP), random loss, and
 * partitions from a plan.  Compute: real (the engine runs; tiny models, real
 * losses) or modelled (no math: a step takes its FLOPs / the node's speed,
 * tensors travel as their sizes only).  A fault plan and churn kill, restart,
 * slow down, partition and add nodes; rogue nodes send garbage and replays.
 *
 * Determinism: the same options and seed give the same event trace (its
 * hash is printed) and, with real compute, the same final weights.
 *
 * Invariants checked in every run: no microbatch lost without being counted,
 * none applied twice by a node, weight versions only go forward, every live
 * node ends when the run completes, losses finite, bytes sent = bytes
 * received + dropped + in flight. */
#ifndef BRIGADE_RUNTIME_SIM_H
#define BRIGADE_RUNTIME_SIM_H
#include <stdint.h>
#include <stdio.h>
#include "node/runtime/options.h"

typedef struct {
    opts_t o;                  /* the run, as `brigade node` takes it */
    int nodes;                 /* N nodes at the start */
    int real;                  /* 1: real compute, 0: modelled */
    int steps_given;           /* --steps was given (else the run is bounded by sim_seconds) */
    double sim_seconds;        /* bound on simulated time */
    double wall_seconds;       /* bound on wall time */
    double lat_lo, lat_hi;     /* one-way latency range per directed link, ms */
    double bw_lo, bw_hi;       /* uplink range per node, Mbit/s (0: unlimited) */
    double speed_lo, speed_hi; /* compute speed factor range per node */
    double jitter_ms;          /* per message, uniform in [0, jitter] */
    double loss;               /* per message */
    double churn_per_hour;     /* nodes leaving per node-hour (as many new ones join) */
    double gflops;             /* modelled compute: GFLOP/s of a speed-1 node */
    char plan[OPT_PATH];       /* fault plan file, or "" */
    int faults;                /* random fault events drawn from the seed (each kill restarted later) */
    int quiet;                 /* no progress lines */
} sim_opts_t;

/* Defaults: 8 nodes, modelled compute, 600 simulated s, 600 wall s, 20..50 ms,
 * 100 Mbit/s, speed 1, no jitter/loss/churn, 50 GFLOP/s. */
void sim_opts_defaults(sim_opts_t *so);

/* Plan events (one per line: AT_SECONDS kill NODE | restart NODE |
 * slow NODE FACTOR | pause NODE SECONDS | partition A,B,.. | heal |
 * rogue NODE; # comments).  A pause stops the node's process as SIGSTOP
 * does: its compute and network wake-ups and the messages to it wait
 * until it resumes (a step under way is not stretched), and its clock
 * jumps; overlapping pauses last until the later end. */
typedef enum { PLAN_KILL = 1, PLAN_RESTART, PLAN_SLOW, PLAN_PARTITION, PLAN_HEAL, PLAN_ROGUE, PLAN_PAUSE } plan_kind_t;
typedef struct {
    double at;                 /* simulated seconds */
    int line;                  /* its line in the plan */
    int kind;                  /* plan_kind_t */
    int node;                  /* kill, restart, slow, rogue */
    double factor;             /* slow: compute this many times slower; pause: seconds */
    int nset;                  /* partition: nodes on one side */
    int set[64];
} plan_ev_t;

/* Draws `count` random fault events for a swarm of `nodes` nodes from
 * seed, within the first `horizon` simulated seconds: kills (each followed
 * by a restart 1..20 s later), slowdowns, pauses of 0.5..10 s,
 * partitions (healed 1..10 s later) and rogues.  Returns the number of
 * events (into *out, malloc'd, sorted by time), -1 when out of memory. */
int sim_plan_random(uint64_t seed, int nodes, int count, double horizon, plan_ev_t **out);

/* Parses a plan's text for a swarm of `nodes` nodes.  Returns the number of
 * events (into *out, malloc'd, sorted by time), or -1 with a one-line reason
 * naming the line and the field. */
int sim_plan_parse(const char *text, int nodes, plan_ev_t **out, char *err, size_t errlen);

/* What a node's time goes to (sim_steady_t.t): computing; waiting for
 * input; held by the delay budget or a gpipe flush; held by the window
 * (data stage); idle while its uplink sends averaging weights; idle while
 * its uplink sends anything else; the rest (joining, fetching state). */
enum { SIM_T_COMPUTE = 0, SIM_T_INPUT, SIM_T_HELD, SIM_T_WINDOW, SIM_T_AVG, SIM_T_LINK, SIM_T_OTHER, SIM_T_N };

/* The steady state: from when every initial node has started its stage to
 * when the last stage's count reaches --steps (or the end of the run). */
typedef struct {
    int reached;               /* every initial node started its stage */
    double from, to;           /* simulated seconds */
    uint64_t mb;               /* microbatches applied at the last stage within it */
    double bound_mb;           /* the compute bound within it (as bound_mb) */
    double t[MODEL_STAGES_MAX][SIM_T_N];   /* node-seconds within it, by stage and SIM_T_* */
} sim_steady_t;

typedef struct {
    uint64_t completed;        /* microbatches completed at the last stage */
    uint64_t target;           /* what the run needed (0: time-bounded) */
    uint64_t lost;             /* given up and counted */
    uint64_t uncounted;        /* issued, never completed, not counted lost (must be 0) */
    uint64_t duplicated;       /* applied twice by one node (must be 0) */
    uint64_t skipped;          /* applied further on but not at the data stage */
    int run_complete;          /* the run reached its target (or its time bound) */
    double sim_s, wall_s;      /* simulated and wall seconds */
    double cpu_s;              /* CPU seconds of this process (the machine may be shared: the fair speed measure) */
    uint64_t applied_last;     /* microbatches applied by last-stage nodes (a re-issued one may count twice) */
    double bound_mb;           /* the compute bound: microbatches the nodes' compute could have done in sim_s (every
                                  node busy all the time it was alive, work perfectly balanced; modelled FLOPs) */
    uint64_t trace;            /* hash of the event trace */
    uint64_t weights;          /* hash of the live nodes' final weights (real compute), 0 otherwise */
    uint64_t bytes_sent, bytes_delivered, bytes_dropped, bytes_inflight;
    uint64_t control_bytes;    /* gossip, heartbeats, joins (all nodes) */
    uint64_t type_msgs[16], type_bytes[16];  /* messages put on the network and their bytes, by wire type */
    double node_seconds;       /* sum over nodes of their time alive */
    double first_loss, last_loss;  /* the last stage's training loss, first and last update */
    double learn_all_s;        /* mean time a node took to know a live peer of every stage */
    int learn_n;               /* nodes that did */
    int nodes_total;           /* nodes that ever ran */
    int violations;            /* invariants broken */
    char why[512];             /* the first broken invariant */
    sim_steady_t steady;
} sim_result_t;

/* Runs a simulation; progress to `log` (NULL: none); metrics to so->o.metrics.
 * Returns 0 when it ran (see res->violations and res->run_complete), -1
 * with a reason when it could not start (bad plan, bad model, ...). */
int sim_run(const sim_opts_t *so, FILE *log, sim_result_t *res, char *err, size_t errlen);
#endif
