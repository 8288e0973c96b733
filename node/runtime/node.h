/* node.h: one `brigade node` in production: its network side and compute
 * side (netside.h, compute.h) wired to the ZeroMQ/CurveZMQ transport, the
 * monotonic clock and two threads: the I/O thread drives the network side,
 * the caller's thread the compute side.  They share nothing but their two
 * mailboxes (and the network side's read-only counters).
 *
 *   node_new      transport, identity, network side (no thread yet)
 *   node_join     --join: the WELCOME (the run config) from the bootstrap
 *   node_prepare  the stage's state (checkpoint, download, backup), the data
 *   node_run      both threads until the run ends or node_interrupt
 *   node_result   what the `end` event says
 */
#ifndef BRIGADE_RUNTIME_NODE_H
#define BRIGADE_RUNTIME_NODE_H
#include <stdint.h>
#include "net/keys.h"
#include "net/ticket.h"
#include "node/engine/modelfile.h"
#include "node/runtime/compute.h"
#include "node/runtime/metrics.h"
#include "node/runtime/options.h"

typedef struct node node_t;

typedef struct {
    const opts_t *o;            /* resolved options (copied) */
    const keypair_t *keys;      /* identity (copied; wiped at destroy) */
    const uint8_t *ticket;      /* closed swarm: TICKET_LEN bytes, or NULL */
    const char *listen_host;    /* where to listen */
    int listen_port;            /* 0: any free port */
    const char *local_data;     /* --data given on this node's command line (a joiner of stage 0 reads only that), or NULL */
    metrics_t *metrics;         /* events (borrowed) */
    node_observer_t obs;        /* progress reports (optional) */
    int no_listen;              /* reachable only over the links it opens (--no-listen) */
    int relay;                  /* relay for nodes behind NAT when reachable (--relay on) */
} node_cfg_t;

/* Opens the transport and makes the network side.  NULL with a one-line
 * reason (e.g. the port is in use). */
node_t *node_new(const node_cfg_t *cfg, char *err, size_t errlen);
/* Stops everything and frees; the keys are wiped.  NULL-safe. */
void node_destroy(node_t **self_p);

/* This node's address (HOST:PORT/KEY), id and short id. */
const char *node_join_addr(const node_t *self);
uint64_t node_id(const node_t *self);
const char *node_idshort(const node_t *self);
/* The options in force: a joiner's run config comes from the swarm. */
const opts_t *node_opts(const node_t *self);
uint64_t node_run_id(const node_t *self);
/* 1 when this node is reachable only over the links it opens (after node_join). */
int node_outward(const node_t *self);
/* The stage served (before node_run, or after it). */
int node_stage(const node_t *self);

/* The model as this node starts laid out (after node_join): the run's
 * config with the split it starts in (compute_plan: a --split auto run's
 * checkpoint ck of this stage, when given and past version 0, else what
 * the network side has heard; even while not chosen).  *plan: that split,
 * -1 not chosen yet. */
model_config_t node_start_cfg(const node_t *self, const checkpoint_info_t *ck, int *plan);

/* Joins the swarm of o->join (blocking until the WELCOME, a refusal, 15 s
 * of silence or node_interrupt).  A joiner given stage 0 reads only data it named itself
 * (cfg.local_data) or data that needs no file.  0, or -1 with a one-line reason. */
int node_join(node_t *self, char *err, size_t errlen);

/* Gets the stage ready: its state from the checkpoint ck (may be NULL; used
 * unless a peer of the stage is ahead of it), a download from a peer of the
 * stage, or a backup when the run is under way and the stage has no peer;
 * opens the data on stage 0.  0, or -1 with a one-line reason. */
int node_prepare(node_t *self, const checkpoint_info_t *ck, const float *ck_state,
                 const char *ckpt_path, char *err, size_t errlen);

/* Runs until the run ends, fails or node_interrupt was called.  Returns the
 * exit status (0 completed). */
int node_run(node_t *self);
/* Asks a running node to stop (async-signal-safe); after a completed run,
 * it ends the wait for every peer to hear of it. */
void node_interrupt(node_t *self);

/* The outcome and counters, for the `end` event. */
typedef struct {
    compute_result_t c;
    uint64_t bytes_sent, bytes_sent_raw, bytes_sent_state, bytes_recv, drops;
    uint64_t relay_bytes, relay_msgs, relay_refused;  /* relayed for others */
    double cpu_compute_s;       /* CPU seconds of the compute thread in node_run (the team's helpers not counted) */
    double cpu_io_s;            /* CPU seconds of the I/O thread: codecs, protocol, transport */
} node_result_t;
void node_result(const node_t *self, node_result_t *out);

/* A copy of the peer table for a status page (any thread): up to max
 * records into out; returns the number written. */
typedef struct {
    uint64_t id;
    int stage;
    char addr[96];
    float rate, rtt_ms;
    int health;               /* peer_health_t */
    uint32_t version;
    int self;
    float loss;               /* last stage: its last loss, NaN unknown */
} node_peer_row_t;
int node_peer_rows(node_t *self, node_peer_row_t *out, int max);
/* The run's progress (last-stage microbatches completed, swarm-wide) and the last stage's loss. */
void node_progress(node_t *self, uint64_t *completed, double *loss);
#endif
