/* statuspage.h: what `--http PORT` shows.  The node copies its state into a
 * plain status_snapshot_t (under its own locks); the functions here render
 * that snapshot, and nothing else, as JSON (/status.json) or as one
 * self-contained HTML page (/): the swarm map (stages x peers with rate, RTT
 * and health), the loss curve as inline SVG, reloaded every 2 s.  No
 * scripts, no external assets. */
#ifndef BRIGADE_STATUSPAGE_H
#define BRIGADE_STATUSPAGE_H
#include <stdint.h>
#include "node/cli/http.h"

#define STATUS_PEERS_MAX 256    /* peers in a snapshot (PEERS_CAP) */
#define STATUS_LOSS_MAX  2000   /* loss history points in a snapshot */

typedef struct {
    char id[24];            /* short hex id */
    int stage;              /* stage it serves, -1 unknown */
    char addr[128];         /* HOST:PORT it listens on */
    double rate;            /* microbatches per second it completes (gossip), < 0 or non-finite: unknown */
    double rtt_ms;          /* round trip, ms (non-finite or <= 0: unknown) */
    char health[8];         /* "alive", "slow", "gone" */
    uint64_t version;       /* its weight version */
    int self;               /* 1 for this node's own row */
} status_peer_t;

typedef struct {
    double update;          /* optimizer update (x axis) */
    double loss;            /* training loss at that update (may be NaN) */
} status_point_t;

typedef struct {
    char node[24];          /* this node's short id */
    char role[8];           /* "node" or "solo" */
    int stage;              /* this node's stage, -1 before it has one */
    int nstages;            /* stages of the run */
    char model[32];         /* model name */
    char run[72];           /* run id (hex) */
    char join_addr[192];    /* HOST:PORT/KEY */
    double uptime_s;        /* seconds since start */
    uint64_t updates;       /* optimizer updates of this node */
    uint64_t version;       /* current weight version */
    uint64_t steps_done;    /* run progress: microbatches the last stage has completed, 0 unknown */
    uint64_t steps_total;   /* microbatches the run needs (--steps x --micro), 0 unknown */
    uint64_t tokens;        /* tokens processed by this node (the metrics' count, exact) */
    double tokens_per_s;    /* tokens / uptime_s: the average since start */
    double loss;            /* last training loss (NaN: none yet) */
    uint64_t bytes_sent;    /* on the wire, cumulative */
    uint64_t bytes_sent_raw;/* the same tensors as raw fp32 */
    uint64_t bytes_recv;    /* received, cumulative */
    uint64_t drops;         /* refused messages */
    int inflight;           /* microbatches in flight */
    int npeers;             /* rows used in peers[] (self included) */
    status_peer_t peers[STATUS_PEERS_MAX];
    int nloss;              /* points used in loss[], oldest first */
    status_point_t loss_hist[STATUS_LOSS_MAX];
} status_snapshot_t;

/* The node's loss history: keeps the whole run in at most STATUS_LOSS_MAX
 * points.  When full, neighbouring points are merged pairwise (mean loss,
 * later update) and each later point stands for twice as many updates.
 * Plain data: zero it (or status_history_init) to start; not thread-safe. */
typedef struct {
    status_point_t p[STATUS_LOSS_MAX];  /* the points, oldest first */
    int n;                              /* points used */
    uint64_t stride;                    /* updates per point (power of two) */
    double acc;                         /* sum of the finite losses of the pending bucket */
    uint64_t acc_finite;                /* finite losses in the pending bucket */
    uint64_t acc_n;                     /* updates in the pending bucket */
    uint64_t last_update;               /* update of the last add */
} status_history_t;

/* Empties the history. */
void status_history_init(status_history_t *h);
/* Adds the loss of one update (updates in increasing order).  A point's loss
 * is the mean of the finite losses it stands for, NaN (a gap in the curve)
 * when there are none. */
void status_history_add(status_history_t *h, uint64_t update, double loss);
/* Copies the history into the snapshot's loss_hist / nloss (a bucket still
 * filling is included as the last point, so the curve reaches the present). */
void status_history_copy(status_snapshot_t *out, const status_history_t *h);

/* Appends the snapshot as one JSON object: always valid JSON (strings
 * escaped, bytes >= 0x80 as \u00XX, non-finite numbers as null).  Keys:
 * node, role, stage, nstages, model, run, join_addr, uptime_s, updates,
 * version, steps_done and steps_total (microbatches), tokens, tokens_per_s
 * (the average since start), loss, bytes_sent,
 * bytes_sent_raw, bytes_recv, compression (raw/sent or null), drops,
 * inflight, stages [{stage, peers, alive}], peers [{id, stage, addr, rate
 * (microbatches/s), rtt_ms, health, version, self}], loss_history
 * [[update, loss], ...].  Returns 0 or -1 (reply->failed). */
int status_render_json(http_reply_t *out, const status_snapshot_t *s);
/* Appends the HTML page (text escaped, meta refresh 2 s, inline SVG loss
 * curve).  Returns 0 or -1. */
int status_render_html(http_reply_t *out, const status_snapshot_t *s);
/* Routes one request: "/" and "/index.html" -> HTML, "/status.json" -> JSON,
 * anything else -> 404.  Sets status and content type.  Returns 0 or -1.
 * The node's http handler fills a snapshot and calls this. */
int status_serve(const status_snapshot_t *s, const char *path, http_reply_t *reply);
#endif
