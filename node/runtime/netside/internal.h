/* internal.h: what the parts of the network side (node/runtime/netside/)
 * share: its constants, its state (a struct per part inside netside_t)
 * and the functions one part calls in another (prefixed ns_).  Private to
 * those files; the public contract is netside.h.  The parts:
 *   core.c     life cycle, sends and links, dispatch of messages and mail, timers
 *   health.c   pings, partners, failure detection, drops, bans, admission
 *   gossip.c   the table's records, signed announcements, rumors, PEERS
 *   join.c     joining: the bootstrap's side (probes, WELCOME) and the joiner's
 *   tensors.c  ACT/GRAD/AVG checks, decoding, encoding, error feedback
 *   state.c    state downloads, backups held for other stages, serving them
 *   relay.c    relays between outward-only nodes, DIALs
 *   ixset.c    sorted sets of record indices (ixset.h) */
#ifndef BRIGADE_RUNTIME_NETSIDE_INTERNAL_H
#define BRIGADE_RUNTIME_NETSIDE_INTERNAL_H
#include "node/runtime/netside.h"
#include "compress/codec.h"
#include "net/relay.h"
#include "node/engine/model.h"
#include "node/engine/optim.h"
#include "node/runtime/invariant.h"
#include "node/runtime/netside/ixset.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JOIN_PER_S 20           /* JOINs (not introductions) answered per second, all keys together */
#define STATUS_PER_S 10         /* STATUS_REQs answered per second, all keys together (each answer holds the table) */
#define GOSSIP_RECORDS 24       /* records in a gossip PEERS besides the sender's own: changed ones first */
#define PING_EVERY_S 0.5
#define PARTNERS_MAX 32         /* partners tracked */
#define GONE_FORGET_S 600.0     /* a peer gone is pinged until silent this long: then its link is closed (a node cut off this long
                                   gives up, compute.c ALONE_S); its own word or a third party's brings it back */
#define GONE_MIN_S 3.0
#define FEEDBACK_STREAMS 64     /* gradient streams with error feedback (one per upstream peer) */
#define TABLE_MAX_BYTES (1u << 22)
#define PROBES_MAX 16           /* joiners probed at a time (more: taken as reachable) */

/* A state snapshot being received in STATE chunks. */
typedef struct {
    uint64_t donor;         /* the peer whose chunks are taken (0: the first that answers) */
    uint8_t *buf;           /* total bytes */
    size_t total;
    uint32_t nchunks, got;
    uint8_t *have;          /* chunk received flags */
    uint32_t checksum;
    int64_t version;
    int complete;
    double last_chunk;      /* when the last chunk of it came */
} state_rx_t;

/* The snapshot of a stage served by a single node, held here for it. */
typedef struct {
    uint8_t *buf;           /* complete snapshot, or NULL */
    size_t total;
    uint32_t checksum;
    int64_t version;
    state_rx_t rx;          /* a snapshot arriving */
} backup_t;

/* A state fetch asked for by the compute side. */
typedef struct {
    int active;
    int stage;              /* the stage whose state is wanted */
    uint64_t donor;         /* 0: a backup from whoever holds one */
    double deadline;        /* give up then: the first wait, moved on by each new chunk (s_fetch_progress) */
    double last_deadline;   /* the latest deadline a download of its size may get */
    double resend;          /* ask again then (donor fetches) */
    state_rx_t rx;          /* the download */
} fetch_t;

/* The gradient stream to one upstream peer, with its quantization residual. */
typedef struct {
    uint64_t peer;
    size_t n;
    float *residual;
    double used;            /* clock time of its last gradient */
} feedback_t;

typedef enum { JOIN_NONE = 0, JOIN_WAITING, JOIN_DONE, JOIN_FAILED } join_state_t;

/* The bootstrap's probe of a joiner's advertised address: a fresh link to
 * it with its key, a PING it must answer over that link. */
typedef struct {
    uint64_t id;            /* the joiner (0: slot free) */
    int link;               /* the probe link */
    uint64_t nonce;         /* carried by the PING and its PONG */
    double deadline;        /* unreachable when no PONG by then */
    int stage, shard;       /* what its WELCOME will say */
    transport_msg_t to;     /* its JOIN (routing fields only, no frames): the WELCOME answers it */
} probe_t;

/* Joining: the joiner's side (one join at a time), and the bootstrap's. */
typedef struct {
    join_state_t state;
    int link, want;
    uint64_t id;                /* the node joined through (the key in --join): only its WELCOME or BYE counts */
    double deadline, resend;
    char addr[ADDR_TEXT_MAX];
    char err[400];
    bucket_t bucket;            /* JOINs answered (JOIN_PER_S) */
    probe_t probe[PROBES_MAX];  /* reachability probes of joiners (bootstrap) */
    int nprobes;                /* of them under way (id set): each tick looks at them only then */
} ns_join_t;

/* Gossip and this node's own signed announcement. */
typedef struct {
    double next;                /* the next gossip round */
    ixset_t rumor_set;          /* the records with gossip rounds left as a rumor (peer_t.rumor > 0) */
    int at;                     /* round-robin position of the gossip fill */
    uint64_t rng;               /* gossip targets */
    int ann_stage;              /* the stage and address our own announcement says */
    char ann_addr[PEER_ADDR_MAX];
    int ann_flags;              /* the PEER_FLAG_* our own announcement says */
    int full_noted;             /* the peer table was found full with nothing to forget (warned once) */
    vcache_t *vcache;           /* c.vcache, or own_vcache */
    vcache_t *own_vcache;
    proto_peers_tail_t tail;    /* the end of the PEERS being read or written */
} ns_gossip_t;

/* Failure detection: pings, partners, the live set and its sweeps. */
typedef struct {
    double next_ping, next_health, next_probe;
    int probe_at;               /* round-robin position of the gone-peer probes */
    int ping_at;                /* round-robin position of the pings to non-partners */
    uint64_t partner[PARTNERS_MAX]; /* peers with tensor traffic lately (ids; 0 free) */
    double partner_t[PARTNERS_MAX]; /* their last_traffic (ns_traffic is the only writer of it) */
    int partner_ix[PARTNERS_MAX];   /* their records */
    int live;                   /* live peers at the last health round */
    int nlive;                  /* live peers now: records not taken for gone, self left out (ns_set_health) */
    ixset_t live_set;           /* their record indices */
    int health_at;              /* round-robin position of the health sweep */
    int *recent;                /* peers with tensor traffic lately (record indices, each once: peer_t.recent; pruned by
                                   ns_check_health): checked every round, as partners may go quiet in seconds */
    int nrecent, caprecent;
} ns_health_t;

/* Tensor codecs and the gradient streams' error feedback. */
typedef struct {
    codec_ctx_t *dec, *enc;
    double enc_s_per_value[2];  /* --codec auto: measured encode time per value of int8 and pca (0: none yet) */
    feedback_t fb[FEEDBACK_STREAMS];
    int nfb;
} ns_tensor_t;

/* State transfers. */
typedef struct {
    fetch_t fetch;              /* a state download for the compute side */
    backup_t *backups;          /* [nstages]: snapshots held for other stages */
} ns_xfer_t;

/* Relaying for others, and reaching outward-only peers. */
typedef struct {
    int relays;                 /* this node relays for outward-only nodes (reachable, --relay on) */
    bucket_t bucket;            /* bytes relayed (--relay-mbit) */
    int dial_at;                /* round-robin position of DIAL relays */
    int relayed;                /* the last link upkeep found a peer reached through a relay */
    int nout;                   /* records of outward-only peers */
} ns_relay_t;

struct netside {
    netside_cfg_t c;            /* configuration (o points at the node's options) */
    uint64_t id;                /* node_id_from_pubkey */
    uint64_t run;               /* run id (0 until a joiner is welcomed) */
    int nstages;
    int shard;                  /* data shard assigned at WELCOME */
    self_info_t me;             /* what the compute side last said about this node */
    int plan;                   /* the run's split (SPLIT_EVEN, _LATE, _FRONT), -1 not known yet (--split auto): from the
                                   compute side or any peer's message, whichever says it first, then the compute side's
                                   (its layout: what this node's tensors and state are in); sent on every message */
    int plan_heard;             /* --split auto: a split a peer's message said that takes precedence over plan (two
                                   data-stage nodes chose apart), -1 none: the view says it, the compute side lays it out */
    int left;                   /* the compute side has ended */
    int said_done;              /* the final PEERS/DONE went out */
    double linger_until;        /* a completed run: until every peer heard (or this time) */
    double next_linger;
    peers_t peers;              /* the swarm table (owned) */
    bucket_t status_bucket;     /* STATUS_REQs answered (STATUS_PER_S) */
    double next_view;
    int view_dirty;
    uint8_t done_proof[DONE_LEN];  /* the last stage's signed word that the run completed */
    int have_proof;
    int outward;                /* this node is reachable only over the links it opens */
    net_counters_t ctr;
    ns_join_t join;
    ns_gossip_t gossip;
    ns_health_t health;
    ns_tensor_t tensor;
    ns_xfer_t xfer;
    ns_relay_t relay;
};

/* ---- core.c: sending, links, dispatch ---- */
/* The clock (seconds) and the wall clock (unix seconds). */
double ns_now(const netside_t *ns);
uint64_t ns_unix_s(const netside_t *ns);
/* Mail to the compute side (ownership passes; NULL: nothing). */
void ns_post(netside_t *ns, mail_t *m);
/* This node's PEER_FLAG_*, and its own record. */
uint8_t ns_flags(const netside_t *ns);
void ns_self_info(const netside_t *ns, peer_info_t *p);
/* 1 when this node holds an admission ticket (closed swarm). */
int ns_has_ticket(const netside_t *ns);
/* Sends over link (or as a reply to `to`) and counts the bytes: raw with
 * tensors as raw fp32 (0: the wire size), virt the bytes modelled tensors
 * stand for.  The transport's result (0 sent). */
int ns_port_send(netside_t *ns, int link, const transport_msg_t *to, const wire_hdr_t *h,
                 const void *const *f, const size_t *l, int nf, uint64_t raw, uint64_t virt);
/* Floats of stage's parameters in the run's split (even while not chosen). */
size_t ns_stage_params(const netside_t *ns, int stage);
/* A header of this node's run, stage and version. */
void ns_hdr(const netside_t *ns, wire_hdr_t *h, int type);
/* The link to peer id, connected on first use; -1 none (unknown, or
 * outward-only and not linked yet: it is asked to link). */
int ns_link(netside_t *ns, uint64_t id);
/* A message to peer (over a link, or through its relay): 0 sent, -1 not. */
int ns_send(netside_t *ns, uint64_t peer, const wire_hdr_t *h, const void *const *frames,
            const size_t *lens, int nf, uint64_t raw, uint64_t virt);
/* A reply to message `to`, the way it came. */
int ns_reply(netside_t *ns, const transport_msg_t *to, const wire_hdr_t *h, const void *const *frames,
             const size_t *lens, int nf);
/* The ids of every live peer (self excluded) into ids (room for PEERS_CAP); their count. */
int ns_live_ids(const netside_t *ns, uint64_t *ids);
/* Closes the link to p (either kind). */
void ns_close_link(netside_t *ns, peer_t *p);
/* p is at another address now: link closed, unanswered pings forgotten. */
void ns_moved(netside_t *ns, peer_t *p);
/* What p says of its reachability (outward 1: only over links it opens). */
void ns_set_outward(netside_t *ns, peer_t *p, int outward);
/* Sends back to outward-only p over the link m came in on. */
void ns_adopt(netside_t *ns, peer_t *p, const transport_msg_t *m);
/* Tells the compute side the run ended. */
void ns_stop_compute(netside_t *ns);
/* A checked message of this run to its handler. */
void ns_dispatch(netside_t *ns, const transport_msg_t *m);

/* ---- health.c: failure detection, drops, bans, admission ---- */
/* Record ix became live (add 1) or gone (add -1). */
void ns_live_change(netside_t *ns, int ix, int add);
/* The one writer of a peer's health. */
void ns_set_health(netside_t *ns, peer_t *p, peer_health_t h);
/* A message not taken and counted, with no blame on `from`. */
void ns_count_drop(netside_t *ns, const char *why, uint64_t from);
/* A message refused as `from`'s offence: counted, and a strike (a ban after BAN_STRIKES). */
void ns_drop(netside_t *ns, const char *why, uint64_t from);
/* A message not taken that is no offence (late, after a move): counted. */
void ns_discard(netside_t *ns);
/* 1 when peer id is banned now. */
int ns_banned(netside_t *ns, uint64_t id);
/* Closed swarm: NULL when id's ticket was verified and has not expired, else why not. */
const char *ns_unadmitted(netside_t *ns, uint64_t id);
/* Admits p until `until` (unix s, 0: no expiry), or takes it back (admit 0). */
void ns_admit(peer_t *p, int admit, uint64_t until);
/* A peer taken for gone is alive again (logged with why). */
void ns_revive(netside_t *ns, peer_t *p, const char *why);
/* 1 when p has left our pings unanswered longer than `slow`. */
int ns_ignores_us(const peer_t *p, double now, double slow);
/* Peer id was heard from directly now. */
void ns_heard(netside_t *ns, uint64_t id);
/* Tensor traffic with p: a partner, pinged often. */
void ns_traffic(netside_t *ns, peer_t *p);
/* PONG (RTT), and the timed rounds: gone-peer probes, pings, health. */
void ns_on_pong(netside_t *ns, const transport_msg_t *m);
/* The PONG of a drain probe (tensors.c): a throughput sample of the link to its sender, and its codec under auto. */
void ns_on_drain_pong(netside_t *ns, const transport_msg_t *m);
void ns_probe_gone(netside_t *ns);
void ns_ping_round(netside_t *ns);
void ns_check_health(netside_t *ns);
/* Silence allowed before p is slow (live: live peers); the health round's period. */
double ns_slow_after(const peer_t *p, double now, int live);
double ns_health_every(const netside_t *ns);

/* ---- gossip.c: the table, announcements, PEERS ---- */
/* Room for the records a table (frame) says it holds, at most PEERS_MAX: *max; NULL out of memory. */
peer_info_t *ns_recs_for(const uint8_t *frame, size_t len, int *max);
/* p changed: its record goes out first for a few gossip rounds. */
void ns_rumor(netside_t *ns, peer_t *p);
/* A table (proto_put_table) of self and live peers: all (limit 0) or at most limit. */
void ns_put_table(netside_t *ns, wbuf_t *w, int limit);
/* Takes k decoded records with the announcements at r: 0, -1 malformed
 * (nothing taken), -2 a forged announcement (what came before stays). */
int ns_take_table(netside_t *ns, rbuf_t *r, const peer_info_t *recs, int k, uint64_t sender,
                  const uint8_t sender_pub[32], const char *why);
/* A PEERS (a share of limit records, 0: all) to peer. */
void ns_send_table(netside_t *ns, uint64_t peer, int limit);
/* Learns or updates a peer; a new one was last heard from at clock time heard. */
void ns_add_peer(netside_t *ns, const peer_info_t *info, double heard, const char *why);
/* PEERS received, and the timed gossip round. */
void ns_on_peers(netside_t *ns, const transport_msg_t *m);
void ns_gossip_round(netside_t *ns);

/* ---- join.c: both sides of joining ---- */
/* A JOIN body of this node wanting stage want (hint_run: its checkpoint's run, 0 none). */
void ns_put_join(const netside_t *ns, wbuf_t *w, int want, uint64_t hint_run);
/* The introduction (a JOIN with JOIN_FLAG_INTRO) a new link starts with. */
void ns_introduce(netside_t *ns, int link);
/* Checks an admission ticket of key pub: 0 (its expiry in *expires), or -1 with why. */
int ns_check_ticket(netside_t *ns, const uint8_t *tbytes, size_t tlen, const uint8_t pub[32],
                    uint64_t *expires, char *why, size_t whylen);
/* The bootstrap's side: a probe's PONG, the probes' deadlines, a JOIN. */
void ns_on_probe_pong(netside_t *ns, const transport_msg_t *m);
void ns_probe_tick(netside_t *ns, double now);
void ns_on_join(netside_t *ns, const transport_msg_t *m);
/* The joiner's side: the join failed (fmt with the join address and detail),
 * (re)send the JOIN, a refusal (BYE), the WELCOME. */
void ns_join_fail(netside_t *ns, const char *fmt, const char *detail);
void ns_join_send(netside_t *ns);
void ns_on_refused(netside_t *ns, const transport_msg_t *m);
void ns_on_welcome(netside_t *ns, const transport_msg_t *m);

/* ---- tensors.c: checks and codecs ---- */
/* ACT, GRAD or AVG received: checked, decoded, posted to the compute side (or dropped). */
void ns_on_tensor(netside_t *ns, const transport_msg_t *m);
/* Frees every gradient stream's residual. */
void ns_feedback_reset(netside_t *ns);
/* MAIL_SEND: encodes and sends (ownership of m stays with the caller). */
void ns_on_send(netside_t *ns, mail_t *m);

/* ---- state.c: transfers and backups ---- */
/* Frees an assembly; it is empty afterwards. */
void ns_rx_free(state_rx_t *x);
/* Ends the compute side's fetch with blob (NULL: none came). */
void ns_fetch_end(netside_t *ns, state_blob_t *blob);
/* Asks the fetch's donor (or the backup holders) again. */
void ns_fetch_ask(netside_t *ns);
/* The silence after which a fetch asks again. */
double ns_fetch_silence(const fetch_t *f);
/* MAIL_FETCH, MAIL_STATE_OUT, and STATE and STATE_REQ received. */
void ns_on_fetch(netside_t *ns, const mail_t *m);
void ns_on_state_out(netside_t *ns, mail_t *m);
void ns_on_state(netside_t *ns, const transport_msg_t *m);
void ns_on_state_req(netside_t *ns, const transport_msg_t *m);

/* ---- relay.c: relays and DIALs ---- */
/* A message to outward-only p sealed through its relay: 0 sent, -1 not. */
int ns_relay_send(netside_t *ns, peer_t *p, const wire_hdr_t *h, const void *const *frames,
                  const size_t *lens, int nf, uint64_t raw);
/* RELAY and DIAL received. */
void ns_on_relay(netside_t *ns, const transport_msg_t *m);
void ns_on_dial(netside_t *ns, const transport_msg_t *m);
/* Asks outward-only p for a link (through peers linked to it). */
void ns_dial(netside_t *ns, peer_t *p);
/* The timed upkeep of links to outward-only peers and relays. */
void ns_keep_links(netside_t *ns);

#endif
