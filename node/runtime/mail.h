/* mail.h: the typed messages between a node's network side (netside.h)
 * and its compute side (compute.c), and the peer-table snapshot the
 * network side publishes to the compute side.
 *
 * The two sides share no mutable state: each owns its data and tells the
 * other what changed by mail.  A mail is owned by whoever holds it: the
 * sender gives it up when posting, the receiver frees it with mail_free().
 *
 *   network -> compute                     compute -> network
 *   MAIL_TENSOR    a checked ACT/GRAD/AVG  MAIL_SEND      a message to send
 *   MAIL_STATE_REQ a peer wants our state  MAIL_SELF      our stage, sizes, progress
 *   MAIL_VIEW      the peer table changed  MAIL_FETCH     fetch a stage's state
 *   MAIL_STATE     a state fetch ended     MAIL_STATE_OUT send our state to a peer
 *   MAIL_STOP      the run ended           MAIL_LEAVE     the compute side ended
 */
#ifndef BRIGADE_RUNTIME_MAIL_H
#define BRIGADE_RUNTIME_MAIL_H
#include <stddef.h>
#include <stdint.h>
#include "net/wire.h"
#include "node/runtime/queue.h"

typedef enum {
    MAIL_TENSOR = 1,  /* net -> compute: hdr, peer, x[n] decoded and checked, aux = targets (ACT) */
    MAIL_STATE_REQ,   /* net -> compute: hdr, peer asks for this stage's state (rate-limited already) */
    MAIL_VIEW,        /* net -> compute: view, a new snapshot of the peer table */
    MAIL_STATE,       /* net -> compute: state (params|m|v, version) of stage hdr.stage; NULL: none came */
    MAIL_STOP,        /* net -> compute: the run ended (the last stage said so) or the node must stop */
    MAIL_SAY,         /* net -> compute: aux, a line for the user (NUL-terminated) */
    MAIL_SEND,        /* compute -> net: hdr to peer (0: every live peer); x[n] encoded with codec; aux after it */
    MAIL_SELF,        /* compute -> net: self, this node's stage, sizes and progress */
    MAIL_FETCH,       /* compute -> net: fetch stage hdr.stage's state from peer (0: any backup holder) */
    MAIL_STATE_OUT,   /* compute -> net: send state to peer in STATE chunks, hdr.flags STATE_FLAG_* */
    MAIL_LEAVE,       /* compute -> net: the compute side ended: self.status, self.done */
} mail_kind_t;

/* What the compute side tells the network side about this node. */
typedef struct {
    int stage;              /* the stage served */
    int plan;               /* the run's split this node's layout follows (a plan_t, options.h) */
    size_t in_n, out_n;     /* floats of the tensors crossing into / out of the stage */
    size_t nparams;         /* floats of the stage's parameters */
    int64_t version;        /* weight version */
    float rate;             /* capacity: microbatches per compute-second, 0 unknown */
    uint64_t completed;     /* last stage: microbatches completed here */
    double loss;            /* last stage: last update's mean loss (NaN: none) */
    int done;               /* 0 running, 1 completed or failed, 2 interrupted */
    int status;             /* exit status (0 ok) */
} self_info_t;

/* A snapshot of one peer as the network side sees it. */
typedef struct {
    uint64_t id;            /* node id */
    int stage;              /* stage it serves, -1 unknown */
    int health;             /* peer_health_t */
    float rate;             /* its capacity (gossip) */
    float rtt_ms;           /* smoothed round trip, 0 unknown */
    float rtt_dev_ms;       /* its mean deviation */
    float rtt_min_ms;       /* the smallest round trip seen (propagation), 0 unknown */
    uint32_t version;       /* its weight version (gossip) */
    uint64_t completed;     /* last stage: microbatches it reported done */
    uint64_t progress;      /* last stage: the run's progress as it counts it (with progress_said) */
    int progress_said;      /* 1 when it said it (a last-stage node restarted without a count may say 0) */
    float loss;             /* last stage: its last loss, NaN unknown */
    int plan;               /* the run's split its last message said (a plan_t, options.h; -1 none) */
    int reach;              /* 0: a link to it (ours, or one it opened to us); 1: through a relay (an extra
                               hop); -1: none yet (it is reachable only outward) */
} view_peer_t;

/* The peer table as published to the compute side (self not included). */
typedef struct {
    uint64_t completed;     /* the run's progress: last-stage microbatches of every other node ever known */
    int plan;               /* the run's split as the network side learnt it (a plan_t, options.h) */
    int n;                  /* entries of p */
    uint32_t ixmask;        /* slots of ix - 1 (a power of two minus one) */
    int32_t *ix;            /* id -> index + 1 (0 empty), in the same allocation; NULL: not indexed */
    view_peer_t p[];        /* the peers, gone ones included (health PEER_GONE) */
} peer_view_t;

/* A stage's state as fetched: params, then AdamW m and v (3 x nparams floats). */
typedef struct {
    int stage;              /* stage it belongs to */
    int64_t version;        /* its weight version */
    int backup;             /* 1: from a backup holder, 0: from a serving peer */
    size_t nparams;         /* floats per part */
    float *data;            /* 3 x nparams floats, owned */
} state_blob_t;

typedef struct mail {
    queue_item_t q;         /* queue link (first) */
    mail_kind_t kind;
    wire_hdr_t hdr;         /* see the kinds */
    uint64_t peer;          /* sender (in) or destination (SEND, FETCH) */
    double silent_until;    /* TENSOR: its sender's silent_until (peers.h): work it held across that
                               silence came back late for that reason (0: never silent) */
    float *x;               /* TENSOR: decoded values; SEND: values to encode (owned) */
    size_t n;               /* floats in x (SEND without x: a modelled tensor of n floats) */
    int codec;              /* SEND: codec id of x (-1: no tensor) */
    int block;              /* SEND: the codec's block size (0: its default; codec_block_for_rows) */
    int feedback;           /* SEND: carry this destination stream's quantization error forward */
    uint8_t *aux;           /* ACT targets (as sent: proto_put_targets), or a ready-made frame (owned) */
    size_t aux_len;         /* its bytes */
    uint64_t raw_bytes;     /* SEND: the message's size with tensors as raw fp32 */
    int state_bytes;        /* SEND: counts as stage-state traffic (bytes_sent_state) */
    peer_view_t *view;      /* VIEW (owned) */
    state_blob_t *state;    /* STATE (owned; NULL when the fetch failed), STATE_OUT (owned) */
    self_info_t self;       /* SELF, LEAVE */
} mail_t;

/* A zeroed mail of the given kind (codec -1); NULL when out of memory. */
mail_t *mail_new(mail_kind_t kind);
/* Frees a mail and everything it owns; NULL-safe. */
void mail_free(mail_t *m);
/* mail_free for queue_fini. */
void mail_free_q(queue_item_t *q);
/* The memory a mail's tensor stands for: n floats and aux_len bytes (a
 * modelled tensor, without x, counted as if it were there). */
size_t mail_bytes(const mail_t *m);

/* A view with room for n peers (n set, entries zeroed, not indexed); NULL when out of memory. */
peer_view_t *peer_view_new(int n);
/* The same with the entries left unset: for a caller that fills every one
 * (a thousand-peer view each second: zeroing it first was a pass of its own). */
peer_view_t *peer_view_alloc(int n);
/* Builds v's id index once its entries are filled (then finds take O(1)). */
void peer_view_index(peer_view_t *v);
/* The index peer_view_index would build over p[0..n), kept between views
 * whose first entries stay (ids only appended): *ix holds *slots slots,
 * entries before *done are in it; a size that needs more slots starts it
 * anew.  0, or -1 when out of memory (nothing changed). */
int peer_view_index_grow(int32_t **ix, size_t *slots, int *done, const view_peer_t *p, int n);
/* Gives v (its entries filled, n set) a copy of such an index built over them. */
void peer_view_index_copy(peer_view_t *v, const int32_t *ix, size_t slots);
/* The peer of id in v, or NULL (through the index when built, else a scan). */
const view_peer_t *peer_view_find(const peer_view_t *v, uint64_t id);

/* A blob for nparams floats per part (data allocated, not zeroed). */
state_blob_t *state_blob_new(int stage, size_t nparams);
void state_blob_destroy(state_blob_t **self_p);
#endif
