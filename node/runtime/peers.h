/* peers.h: a node's view of the swarm: who serves which stage, where they
 * listen, how fast they are, and which of them are alive.  Owned by the
 * network side alone (no lock): the compute side sees read-only snapshots
 * (peer_view_t, mail.h).  Lookups by id go through a hash index; the table
 * grows up to PEERS_CAP records. */
#ifndef BRIGADE_PEERS_H
#define BRIGADE_PEERS_H
#include <stdint.h>
#include "net/ticket.h"
#include "net/wire.h"
#include "node/runtime/bucket.h"
#include "node/runtime/codecpick.h"
#include "node/runtime/idmap.h"
#include "node/runtime/mail.h"

#define PEERS_CAP 4096

typedef enum { PEER_ALIVE = 0, PEER_SLOW, PEER_GONE } peer_health_t;

/* The usual scale of a peer's ACT/GRAD tensors (the norm check). */
typedef struct {
    double mean;            /* running mean of the per-value RMS of its tensors */
    int n;                  /* tensors in that mean */
} peer_norm_t;

/* Sealed traffic with a peer through a relay (both reachable only outward). */
typedef struct {
    uint8_t box[32];        /* crypto_box key of us and it (relayed messages), when has_box */
    int has_box;
    uint64_t seq_out;       /* relayed messages sealed for it */
    uint64_t seq_in;        /* the highest counter opened from it (older ones are replays) */
    int noted;              /* we relayed for it (the `relay` metrics event was written) */
    double intro_next;      /* when our introduction goes through the relay to it again */
} peer_sealed_t;

typedef struct {
    /* (what the table's scans and each message read comes first, in few cache lines: every node holds
       and scans a record per peer) */
    peer_health_t health;   /* alive / slow / gone */
    int link;               /* transport link, -1 until connected */
    int rumor;              /* gossip rounds left in which its record goes out first (it changed) */
    int recent;             /* listed among the peers with traffic lately (netside's health rounds) */
    int outward;            /* reachable only over the links it opens (its JOIN, or its signed announcement) */
    int done_seen;          /* it said it ended (DONE, BYE, or a finished gossip) */
    int stale;              /* changed since its view entry was last refreshed (peers_touch) */
    double last_heard;      /* clock time of the last message from it (or of a third party's word of it) */
    double last_direct;     /* clock time of the last message from it itself */
    double last_traffic;    /* clock time of the last tensor to or from it (a partner: pinged every round) */
    double last_ping;       /* clock time of our last PING to it */
    double unanswered;      /* clock time of our first PING it has not answered (0: none; any word from it answers) */
    double banned_until;    /* clock time before which it is ignored */
    double rtt_ms;          /* EWMA of our PING round trips, 0 unknown */
    double rtt_dev_ms;      /* EWMA of |rtt - mean| */
    double rtt_min_ms;      /* the smallest round trip seen, 0 unknown */
    double silent_until;    /* clock time it was heard from again after a silence longer than makes a
                               peer slow: the replies to what was sent before then measured the
                               silence, not the link (0: never) */
    uint64_t completed;     /* last-stage microbatches it reported */
    uint64_t progress;      /* last stage: the run's progress as it counts it (PEERS; 0 may be a count) */
    int progress_said;      /* progress came in its last PEERS */
    double last_loss;       /* its last reported loss (last stage), NaN unknown */
    int plan;               /* the run's split its last message said (a plan_t, options.h; -1 none) */
    uint64_t via;           /* both outward-only: the relay we reach it through (0: none) */
    uint64_t announce_seq;  /* the seq of its announcement (announce, below); 0: none */
    peer_info_t info;       /* gossip record (id, addr, key, stage, rate, version) */
    int strikes;            /* messages of it refused since the last ban, less those forgiven */
    double strike_t;        /* when its strikes were last counted down (netside/health.c s_forgive) */
    int admitted;           /* closed swarm: its ticket was verified here */
    uint64_t admitted_until; /* ... and holds until then (unix seconds; 0: no expiry) */
    uint8_t *announce;      /* its own signed announcement (addr, stage), as received: ANNOUNCE_LEN bytes
                               owned by the table (peers_set_announce), NULL none (kept out of the record:
                               the table is scanned often and held by every node) */
    double last_state_req;  /* rate limit of its STATE_REQs */
    peer_norm_t norm;       /* the usual scale of its tensors */
    codecpick_t pick;       /* --codec auto: the codec of our tensors to it, and its drain probes */
    int adopted;            /* link is the connection it opened to us (transport_adopt) */
    double last_dial;       /* when we last asked for a link from it (DIAL) */
    int relays;             /* it relays for outward-only nodes (its signed announcement) */
    peer_sealed_t sealed;   /* relayed traffic with it */
    bucket_t learn;         /* the new peers its gossip may still introduce (GOSSIP_LEARN_*) */
} peer_t;

typedef struct {
    uint64_t self;          /* this node's id (kept in the table too) */
    int n, cap;             /* records used, allocated */
    peer_t *p;              /* the records */
    idmap_t index;          /* id -> record index */
    int selfix;             /* self's record, -1 not in the table */
    view_peer_t *mirror;    /* each record's view entry but self's, in table order, as last refreshed */
    int cap_mirror;
    uint64_t mirror_completed; /* the sum of the mirror's `completed` */
    int *stale;             /* records touched since (each once: peer_t.stale) */
    int nstale, cap_stale;
    int all_stale;          /* refresh every entry (a touch found no room) */
    int32_t *mirror_ix;     /* the id index over the mirror (peer_view_index_grow) */
    size_t mirror_slots;
    int mirror_ixn;         /* mirror entries in it */
    uint64_t retired_completed; /* the `completed` of records replaced (peers_replace): the progress sums keep it */
} peers_t;

/* An empty table of a node whose id is self.  0, or -1 when out of memory. */
int peers_init(peers_t *t, uint64_t self);
void peers_fini(peers_t *t);
/* The record of id, or NULL. */
peer_t *peers_find(peers_t *t, uint64_t id);
/* Adds or refreshes a record (address, stage, rate, version from info; our
 * own measurements stay); a record about self is taken only the first time.
 * A new record was last heard from at clock time heard.  Returns 1 when the
 * peer is new, 0 when known, -1 when the table is full (or out of memory). */
int peers_upsert(peers_t *t, const peer_info_t *info, double heard);
/* Record i (not self's) becomes a new record for info, last heard from at
 * clock time heard, in the same place: the peer it held is forgotten (its
 * id no longer found) but the microbatches it completed still count in
 * peers_completed() and the view's sum.  For a full table: the caller
 * chooses a record nothing refers to by index any more (no link, no
 * rumor, not recent, not outward-only).  0; -1 (nothing changed) when i is
 * out of range or self's, or info is self or already known. */
int peers_replace(peers_t *t, int i, const peer_info_t *info, double heard);
/* Keeps blob (ANNOUNCE_LEN bytes) as p's announcement with its seq.  0, or -1 when out of memory (nothing changed). */
int peers_set_announce(peer_t *p, const uint8_t *blob, uint64_t seq);
/* Peers (alive, self included) serving each stage, into count[nstages]. */
void peers_stage_counts(const peers_t *t, int nstages, int *count);
/* The stage a newcomer should take: the lowest one nobody alive serves;
 * stage 0 when every stage has as many; else, of two stages drawn by `salt` (the newcomer's id: the same for
 * the same table), the one with fewer alive peers per unit of its work (work[nstages], each stage's share of a
 * microbatch's compute; NULL: alike), the lower on a tie.
 * Two choices, not the least served: many nodes welcome newcomers at once,
 * each from a table that lacks the others' latest, and the least served
 * in every table would get them all; two choices keep the stages within a
 * few peers of each other even so (moves even out the rest). */
int peers_pick_stage(const peers_t *t, int nstages, uint64_t salt, const double *work);
/* Sum of `completed` over every record and the records replaced (self's stays 0: the run's progress is this plus our
 * own). */
uint64_t peers_completed(const peers_t *t);
/* Says that p's fields seen by the compute side (stage, rate, version,
 * health, RTTs, completed, loss, link, outward, via) changed: whoever writes
 * them calls it (peers_upsert does for what it writes).  The view keeps an
 * entry per record and refreshes only the touched ones: a thousand records
 * read each second, mostly unchanged, were much of a large swarm's work. */
void peers_touch(peers_t *t, peer_t *p);
/* A snapshot for the compute side (self left out); NULL when out of memory. */
peer_view_t *peers_view(peers_t *t);
#endif
