/* swarm.h: the stage runtime of `brigade node`.  Internal to node/: the
 * node's shared state, the messages between its I/O thread (swarm_io.c:
 * transport, join, gossip, heartbeats, decoding) and its compute thread
 * (swarm_compute.c: the 1F1B schedule with weight stashing, routing,
 * updates, averaging). */
#ifndef BRIGADE_SWARM_H
#define BRIGADE_SWARM_H
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include "compress/codec.h"
#include "net/keys.h"
#include "net/ticket.h"
#include "net/transport.h"
#include "node/engine/data.h"
#include "node/runtime/metrics.h"
#include "node/runtime/options.h"
#include "node/runtime/peers.h"
#include "node/runtime/queue.h"
#include "node/engine/train.h"

#define ACT_FLAG_EVAL 0x1u     /* an evaluation microbatch: forward only */
#define JOIN_FLAG_INTRO 0x1u   /* JOIN: an introduction (ticket) to a peer, no WELCOME wanted */
#define STATE_CHUNK (1u << 20) /* bytes per STATE message */
#define STATE_FLAG_BACKUP 0x1u /* STATE/STATE_REQ: a backup snapshot (held for a stage by another node) */
#define STATE_FLAG_REPLY 0x2u  /* STATE: an answer to a STATE_REQ (not a backup push) */
#define BACKUP_EVERY 20        /* backup snapshots of a stage served by one node: at most every 20 updates, */
#define BACKUP_MIN_S 60.0      /* at most once a minute, */
#define BACKUP_BUDGET 0.05     /* and only when they stay within 5% of the bytes this node sends */

/* A message between the threads.  Inbox: a decoded ACT/GRAD/AVG, a
 * STATE_REQ or a DONE for the compute thread.  Outbox: a message for the
 * I/O thread to send to peer `peer`. */
typedef struct {
    queue_item_t q;        /* queue link */
    wire_hdr_t hdr;        /* header (outbox: sender is filled by the transport) */
    uint64_t peer;         /* inbox: sender id; outbox: destination id */
    float *tensor;         /* inbox: decoded tensor */
    size_t n;              /* its values */
    int nframes;           /* outbox: frames after the header */
    uint8_t *frame[3];     /* owned frames */
    size_t len[3];
    uint64_t raw_bytes;    /* outbox: the message's size with tensors as raw fp32 */
} item_t;

item_t *item_new(void);
void item_free(item_t *it);
void item_free_q(queue_item_t *q);

typedef struct node {
    opts_t o;                  /* run config (+ this node's local options) */
    keypair_t keys;            /* identity */
    uint64_t id;               /* node_id_from_pubkey */
    char idshort[9];           /* for logs and metrics */
    uint64_t run;              /* run id */
    int stage, nstages;        /* the stage served */
    int shard;                 /* data shard rank among data-stage nodes */
    char listen_host[ADDR_HOST_MAX];
    int listen_port;
    char adv[PEER_ADDR_MAX];   /* HOST:PORT others use to reach us */
    char join_addr[ADDR_TEXT_MAX];
    transport_t *tr;           /* used by the I/O thread only (after start-up) */
    peers_t peers;             /* the swarm table */
    queue_t inbox, outbox;     /* compute <- I/O, compute -> I/O */
    metrics_t *metrics;
    codec_ctx_t *dcodec;       /* the I/O thread's decoder */
    stage_state_t *st;         /* this stage's training state */
    data_t *data;              /* data-stage nodes */
    size_t in_n, out_n;        /* floats of the tensors crossing into/out of this stage */
    size_t targets_n;          /* targets per microbatch */
    size_t nparams;            /* floats in this stage's parameters (read by the I/O thread) */
    atomic_int done;           /* the run has finished (or this node must stop) */
    atomic_int io_stop;        /* the I/O thread must exit */
    atomic_uint_fast64_t bytes_sent, bytes_sent_raw, bytes_recv, drops;
    atomic_uint_fast64_t bytes_sent_state;  /* of bytes_sent: stage state (downloads served, backups) */
    atomic_uint_fast64_t completed;      /* last stage: microbatches finished here */
    _Atomic double last_loss;            /* last stage: last update's loss */
    atomic_int_fast64_t version;         /* for gossip */
    atomic_uint_fast64_t tokens;
    uint64_t target;           /* microbatches the run needs at the last stage */
    int status;                /* exit status */
    char why[256];             /* reason when status != 0 */
    double t0;                 /* metrics_now() at start */
    char ckpt_path[OPT_PATH + 16];  /* DIR/stage.ckpt, or "" */
    uint64_t start_cursor;     /* data position to start from (checkpoint) */
    uint64_t lost;             /* microbatches given up (could not be re-issued) */
    uint8_t ticket[TICKET_LEN];   /* closed swarm: this node's admission ticket */
    void (*on_loss)(void *arg, int64_t update, double loss);  /* observer of each update's loss (any thread), or NULL */
    void *on_loss_arg;
} node_t;

/* Sends an outbox item from any thread (ownership passes). */
void node_send(node_t *n, item_t *it);
/* Sends a header-only message to peer. */
void node_send_simple(node_t *n, uint64_t peer, int type, uint64_t mb, uint32_t flags);

/* I/O thread (swarm_io.c). */
int swarm_io_start(node_t *n, char *err, size_t errlen);  /* transport + join; before threads */
void *swarm_io_thread(void *arg);
void swarm_io_bye(node_t *n);   /* after the I/O thread ended: BYE to everyone, flush */
/* Compute loop (swarm_compute.c), on the calling thread until done. */
void swarm_compute(node_t *n);
/* Writes this stage's checkpoint (compute thread, or after it ended). */
int swarm_save_checkpoint(node_t *n, uint64_t cursor, char *err, size_t errlen);
/* Loads this stage's state from a peer (STATE_REQ/STATE) during start-up. */
int swarm_fetch_state(node_t *n, uint64_t donor, char *err, size_t errlen);
/* A state download while the I/O thread runs (a stage move): begin sets up
 * the receiving buffer for a stage of nparams floats (chunks from the first
 * peer that answers are taken); poll copies a complete download into st and
 * returns 1, else 0; end releases the buffer.  Any thread. */
int swarm_rx_begin(node_t *n, size_t nparams);
int swarm_rx_poll(node_t *n, stage_state_t *st);
void swarm_rx_end(void);
/* Loads the backup of `stage` this node holds into st: 1, or 0 when none. */
int swarm_own_backup(node_t *n, int stage, stage_state_t *st);
/* Asks every peer for a backup snapshot of this node's stage (its only peer
 * died) and loads the first that arrives whole within wait_s.  0 loaded, -1 none. */
int swarm_fetch_backup(node_t *n, double wait_s, char *err, size_t errlen);
#endif
