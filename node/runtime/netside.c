/* netside.c: the network side of a node (netside.h): joining, gossip,
 * heartbeats and failure detection, admission, checking and decoding what
 * arrives, encoding what leaves, state transfers and held backups. */
#include "node/runtime/netside.h"
#include "compress/codec.h"
#include "net/relay.h"
#include "node/engine/model.h"
#include "node/engine/optim.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JOIN_WAIT_S 15.0        /* a joiner gives up when its bootstrap is silent this long */
#define JOIN_RESEND_S 3.0       /* and asks again this often */
#define JOIN_PER_S 20           /* JOINs (not introductions) answered per second, all keys together */
#define STATUS_PER_S 10         /* STATUS_REQs answered per second, all keys together (each answer holds the table) */
#define GOSSIP_EVERY_S 1.0
#define GOSSIP_FANOUT 3         /* PEERS go to this many random live peers each round, */
#define GOSSIP_RECORDS 24       /* with this many records besides the sender's own: changed ones first */
#define GOSSIP_LEARN_BURST 64   /* new peers one member's gossip may introduce at once (self-signed announcements */
#define GOSSIP_LEARN_PER_S 4.0  /* cost nothing to make: one PEERS filled the table), and per second after */
#define PROGRESS_MAX 256        /* last-stage progress entries in one PEERS */
#define PING_EVERY_S 0.5
#define PING_PARTNERS 6         /* each round pings up to this many partners (tensor traffic in the last PARTNER_S) */
#define PARTNER_PING_S 2.0      /* not pinged in this long, */
#define PARTNER_RTT_S 10.0      /* (a partner that spoke to us lately: its RTT is refreshed this often) */
#define PING_OTHERS 2           /* and this many other peers, round-robin */
#define PARTNER_S 10.0
#define PARTNERS_MAX 32         /* partners tracked */
#define HEALTH_EVERY_S 0.25
#define HEALTH_SWEEPS 16        /* the whole table is checked this many times within a non-partner's allowed silence */
#define LINGER_S 15.0           /* after a completed run, a node waits at most this long for every peer to hear of it */
#define LINGER_RECENT_S 30.0    /* (peers heard from this recently: a partition may hide them) */
#define LINGER_EVERY_S 1.0      /* and tells the silent ones again this often */
#define GONE_PROBE_S 5.0        /* peers taken for gone are pinged again this often (a partition heals), */
#define GONE_PROBES 4           /* this many at a time, */
#define GONE_FORGET_S 600.0     /* until it has been silent this long: then its link is closed (a node cut off this long
                                   gives up, compute.c ALONE_S); its own word or a third party's brings it back */
#define VIEW_EVERY_S 0.2        /* the compute side's snapshot is refreshed at most this often */
#define GONE_MIN_S 3.0
#define DROP_LOG_FIRST 50
#define BAN_STRIKES 20          /* refused messages that get a peer banned */
#define BAN_S 60.0              /* for this long; */
#define STRIKE_FORGIVE_S 10.0   /* one strike is forgiven per this long */
#define STATE_REQ_EVERY_S 2.0   /* at most one state download per peer this often */
#define FETCH_RESEND_S 3.0      /* a state download none of which came this long asks its donor again */
#define STATE_STALL_S 5.0       /* an assembly with no new chunk this long gives way to another snapshot */
#define FETCH_QUIET_S 10.0      /* a state download that is arriving ends when no new chunk came for this long, */
#define FETCH_MIN_BPS 1e6       /* or when it would have come whole at this many bits/s after its first wait */
#define STATE_VERSION_MAX ((int64_t)INT32_MAX - 1)   /* a snapshot's version: the optimizer counts its steps in an int */
#define NORM_FACTOR 1000.0      /* a tensor this many times its stream's usual RMS is refused */
#define NORM_WARMUP 16          /* tensors seen before the norm check applies */
#define FEEDBACK_STREAMS 64     /* gradient streams with error feedback (one per upstream peer) */
#define TABLE_MAX_BYTES (1u << 22)
#define PROBE_S 2.5             /* the bootstrap waits this long for a joiner to answer on its advertised address */
#define PROBES_MAX 16           /* joiners probed at a time (more: taken as reachable) */
#define DIAL_EVERY_S 2.0        /* asking an outward-only peer for a link, at most this often */
#define DIAL_VIA 3              /* through this many peers at a time */
#define RELAY_MBIT_DEFAULT 100.0 /* cap on what a node relays for others, Mbit/s */
#define RELAY_INTRO_S 10.0      /* a relayed pair introduces itself again this often (each 1 s until it hears back) */
#define RELAY_BURST_S 0.5       /* the cap's bucket holds this long at the cap (at least 2 MiB: a state chunk) */
#define VCACHE_OWN 1024         /* verified announcements a node remembers (without a shared cache) */

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

/* Record indices kept ascending, so that a pass over them goes in table
 * order as a scan of the table would, touching only these records. */
typedef struct {
    int *ix;
    int n, cap;
    int ok;                 /* complete (0 once an allocation failed: the table is scanned instead) */
} ixset_t;

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

struct netside {
    netside_cfg_t c;            /* configuration (o points at the node's options) */
    uint64_t id;                /* node_id_from_pubkey */
    uint64_t run;               /* run id (0 until a joiner is welcomed) */
    int nstages;
    int shard;                  /* data shard assigned at WELCOME */
    self_info_t me;             /* what the compute side last said about this node */
    int plan;                   /* the run's split (SPLIT_EVEN, SPLIT_LATE), -1 not known yet (--split auto): from the
                                   compute side or any peer's message, whichever says it first; sent on every message */
    int left;                   /* the compute side has ended */
    int said_done;              /* the final PEERS/DONE went out */
    double linger_until;        /* a completed run: until every peer heard (or this time) */
    double next_linger;
    peers_t peers;              /* the swarm table (owned) */
    codec_ctx_t *dec, *enc;     /* tensor codecs */
    feedback_t fb[FEEDBACK_STREAMS];
    int nfb;
    fetch_t fetch;              /* a state download for the compute side */
    backup_t *backups;          /* [nstages]: snapshots held for other stages */
    bucket_t join_bucket;       /* JOINs answered (JOIN_PER_S) */
    bucket_t status_bucket;     /* STATUS_REQs answered (STATUS_PER_S) */
    /* joining */
    join_state_t join;
    int join_link, join_want;
    uint64_t join_id;           /* the node joined through (the key in --join): only its WELCOME or BYE counts */
    double join_deadline, join_resend;
    char join_addr[ADDR_TEXT_MAX];
    char join_err[400];
    /* timers */
    double next_ping, next_gossip, next_health, next_view, next_probe;
    int probe_at;               /* round-robin position of the gone-peer probes */
    int ping_at;                /* round-robin position of the pings to non-partners */
    uint64_t partner[PARTNERS_MAX]; /* peers with tensor traffic lately (ids; 0 free) */
    double partner_t[PARTNERS_MAX]; /* their last_traffic (s_traffic is the only writer of it) */
    int partner_ix[PARTNERS_MAX];   /* their records */
    int live;                   /* live peers at the last health round */
    int nlive;                  /* live peers now: records not taken for gone, self left out (s_set_health) */
    ixset_t live_set;           /* their record indices */
    int health_at;              /* round-robin position of the health sweep */
    int *recent;                /* peers with tensor traffic lately (record indices, each once: peer_t.recent; pruned by
                                   s_check_health): checked every round, as partners may go quiet in seconds */
    int nrecent, caprecent;
    int nout;                   /* records of outward-only peers */
    int relayed;                /* the last link upkeep found a peer reached through a relay */
    ixset_t rumor_set;          /* the records with gossip rounds left as a rumor (peer_t.rumor > 0) */
    int gossip_at;              /* round-robin position of the gossip fill */
    uint64_t rng;               /* gossip targets */
    int ann_stage;              /* the stage and address our own announcement says */
    char ann_addr[PEER_ADDR_MAX];
    int view_dirty;
    uint64_t drop_logged;
    uint8_t done_proof[DONE_LEN];  /* the last stage's signed word that the run completed */
    int have_proof;
    int outward;                /* this node is reachable only over the links it opens */
    int ann_flags;              /* the PEER_FLAG_* our own announcement says */
    int relays;                 /* this node relays for outward-only nodes (reachable, --relay on) */
    bucket_t relay_bucket;      /* bytes relayed (--relay-mbit) */
    probe_t probe[PROBES_MAX];  /* reachability probes of joiners (bootstrap) */
    int nprobes;                /* of them under way (id set): each tick looks at them only then */
    int dial_at;                /* round-robin position of DIAL relays */
    int full_noted;             /* the peer table was found full with nothing to forget (warned once) */
    net_counters_t ctr;
    vcache_t *vcache;           /* c.vcache, or own_vcache */
    vcache_t *own_vcache;
};

/* ---- helpers ---- */

static double s_now(const netside_t *ns) { return rt_now(&ns->c.clock); }

static uint64_t s_unix_s(const netside_t *ns) { return ns->c.clock.wall_ms(ns->c.clock.arg) / 1000; }

static void s_post(netside_t *ns, mail_t *m)
{
    if (m) ns->c.post(ns->c.post_arg, m);
}

/* Where ix is, or would go, in set. */
static int s_ixset_pos(const ixset_t *set, int ix)
{
    int lo = 0, hi = set->n;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (set->ix[mid] < ix) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

static void s_ixset_add(ixset_t *set, int ix)
{
    if (!set->ok) return;
    if (set->n == set->cap) {
        int cap = set->cap ? 2 * set->cap : 64;
        int *l = realloc(set->ix, sizeof(int) * (size_t)cap);
        if (!l) { set->ok = 0; return; }
        set->ix = l;
        set->cap = cap;
    }
    int at = s_ixset_pos(set, ix);
    if (at < set->n && set->ix[at] == ix) return;
    memmove(&set->ix[at + 1], &set->ix[at], sizeof(int) * (size_t)(set->n - at));
    set->ix[at] = ix;
    set->n++;
}

static void s_ixset_del_at(ixset_t *set, int at)
{
    memmove(&set->ix[at], &set->ix[at + 1], sizeof(int) * (size_t)(set->n - at - 1));
    set->n--;
}

static void s_ixset_del(ixset_t *set, int ix)
{
    if (!set->ok) return;
    int at = s_ixset_pos(set, ix);
    if (at < set->n && set->ix[at] == ix) s_ixset_del_at(set, at);
}

/* Record ix became live (add 1) or gone (add -1): the count and the set follow. */
static void s_live_change(netside_t *ns, int ix, int add)
{
    if (add > 0) s_ixset_add(&ns->live_set, ix);
    else s_ixset_del(&ns->live_set, ix);
    ns->nlive += add;
}

/* Every change of a peer's health goes through here: it keeps the live count and list. */
static void s_set_health(netside_t *ns, peer_t *p, peer_health_t h)
{
    if (p->info.id != ns->id && (p->health == PEER_GONE) != (h == PEER_GONE))
        s_live_change(ns, (int)(p - ns->peers.p), h == PEER_GONE ? -1 : 1);
    p->health = h;
    peers_touch(&ns->peers, p);
}

/* p's strikes less one per STRIKE_FORGIVE_S since they were last counted
 * down: refusals spread over a long run (an honest peer's, now and then: a
 * late chunk, a rate limit crossed after a move) never add up to a ban,
 * where a flood does within seconds. */
static void s_forgive(peer_t *p, double now)
{
    if (p->strikes == 0) { p->strike_t = now; return; }
    double k = floor((now - p->strike_t) / STRIKE_FORGIVE_S);
    if (k < 1) return;
    p->strikes = k >= p->strikes ? 0 : p->strikes - (int)k;
    p->strike_t += k * STRIKE_FORGIVE_S;
}

/* A message not taken, counted (and the first ones and every 100th a
 * metrics event), with no blame on `from`: what it could not have known or
 * helped (a relay forwards envelopes it cannot open; our own send failed). */
static void s_count_drop(netside_t *ns, const char *why, uint64_t from)
{
    uint64_t k = atomic_fetch_add(&ns->ctr.drops, 1) + 1;
    char id[9];
    node_id_short(from, id);
    if (k <= DROP_LOG_FIRST || k % 100 == 0)
        metrics_event(ns->c.metrics, "drop", "\"why\":%s,\"from\":%s,\"drops\":%llu", why, from ? id : NULL,
                      (unsigned long long)k);
}

/* A message refused as an offence of `from`: counted, and a strike on it. */
static void s_drop(netside_t *ns, const char *why, uint64_t from)
{
    s_count_drop(ns, why, from);
    /* a repeat offender is ignored for a while */
    char id[9];
    node_id_short(from, id);
    peer_t *p = from != ns->id ? peers_find(&ns->peers, from) : NULL;
    if (p) s_forgive(p, s_now(ns));
    if (p && ++p->strikes >= BAN_STRIKES) {
        p->strikes = 0;
        p->banned_until = s_now(ns) + BAN_S;
        s_set_health(ns, p, PEER_GONE);
        ns->view_dirty = 1;
        char ban[300];
        snprintf(ban, sizeof ban, "%d refused messages, last: %s", BAN_STRIKES, why);
        metrics_event(ns->c.metrics, "peer", "\"peer\":%s,\"what\":\"banned\",\"why\":%s,\"for_s\":%.0f", id, ban, BAN_S);
    }
}

/* A message that is not an offence but is not taken either (late, after a move). */
static void s_discard(netside_t *ns)
{
    atomic_fetch_add(&ns->ctr.drops, 1);
}

static int s_banned(netside_t *ns, uint64_t id)
{
    peer_t *p = peers_find(&ns->peers, id);
    return p && p->banned_until > s_now(ns);
}

/* Closed swarm: NULL when peer id's ticket was verified here and has not
 * expired since, else why its messages are refused. */
static const char *s_unadmitted(netside_t *ns, uint64_t id)
{
    peer_t *p = peers_find(&ns->peers, id);
    if (!p || !p->admitted) return "no admission ticket";
    if (p->admitted_until && s_unix_s(ns) >= p->admitted_until) return "admission ticket expired";
    return NULL;
}

/* Admits p until `until` (unix seconds, 0: no expiry), or takes its
 * admission back (admit 0: a ticket it showed was refused). */
static void s_admit(peer_t *p, int admit, uint64_t until)
{
    p->admitted = admit;
    p->admitted_until = admit ? until : 0;
}

/* Checks a tensor's scale against the usual scale of its sender's stream:
 * 0 when plausible (and learns from it), -1 when far outside. */
static int s_norm_ok(netside_t *ns, uint64_t from, const float *t, size_t len)
{
    peer_t *p = peers_find(&ns->peers, from);
    if (!p || !t) return 0;
    double ss = 0;
    for (size_t i = 0; i < len; i++) ss += (double)t[i] * t[i];
    double rms = sqrt(ss / (double)(len ? len : 1));
    if (p->norm_n >= NORM_WARMUP && rms > NORM_FACTOR * p->norm_mean + 1e-6) return -1;
    p->norm_n++;
    double w = p->norm_n < 20 ? 1.0 / p->norm_n : 0.05;
    p->norm_mean += w * (rms - p->norm_mean);
    return 0;
}

/* PEER_FLAG_* of this node. */
static uint8_t s_flags(const netside_t *ns)
{
    return (uint8_t)((ns->outward ? PEER_FLAG_OUTWARD : 0) | (ns->relays && !ns->outward ? PEER_FLAG_RELAY : 0));
}

static void s_self_info(const netside_t *ns, peer_info_t *p)
{
    memset(p, 0, sizeof *p);
    p->id = ns->id;
    snprintf(p->addr, sizeof p->addr, "%s", ns->c.adv);
    memcpy(p->pubkey, ns->c.keys->pub, 32);
    p->stage = (int16_t)ns->me.stage;
    p->version = (uint32_t)ns->me.version;
    p->rate = ns->me.rate;
    p->flags = s_flags(ns);
}

static int s_has_ticket(const netside_t *ns)
{
    return ns->c.ticket != NULL;
}

/* The JOIN body: our address, the stage we want, our ticket (closed swarm),
 * and, when the wanted stage is that of a checkpoint rather than --stage,
 * that checkpoint's run id (u64, hint_run != 0): another run's stage is no
 * claim on this one. */
static void s_put_join(const netside_t *ns, wbuf_t *w, int want, uint64_t hint_run)
{
    wbuf_put_str(w, ns->c.adv);
    wbuf_put_u32(w, (uint32_t)(int32_t)want);
    wbuf_put_bytes(w, ns->c.ticket, s_has_ticket(ns) ? TICKET_LEN : 0);
    if (hint_run && want >= 0) wbuf_put_u64(w, hint_run);
}

/* Every message leaves here, and is counted here: raw is its size with
 * tensors as raw fp32 (0: its wire size), virt the bytes its modelled
 * tensors stand for (simulator). */
static int s_port_send(netside_t *ns, int link, const transport_msg_t *to, const wire_hdr_t *h,
                       const void *const *f, const size_t *l, int nf, uint64_t raw, uint64_t virt)
{
    wire_hdr_t hp = *h;
    hp.flags |= plan_flags(ns->plan);
    int r = ns->c.port.send(ns->c.port.arg, link, to, &hp, f, l, nf, virt);
    if (r != 0) return r;
    uint64_t b = WIRE_HDR_LEN + virt;
    for (int i = 0; i < nf; i++) b += l[i];
    atomic_fetch_add(&ns->ctr.bytes_sent, b);
    atomic_fetch_add(&ns->ctr.bytes_sent_raw, raw ? raw : b);
    return 0;
}

/* Floats of stage's parameters in the run's split (even while --split auto
 * has not chosen: every node is laid out even until then). */
static size_t s_stage_params(const netside_t *ns, int stage)
{
    model_config_t cfg = ns->c.o->cfg;
    cfg.split = ns->plan < 0 ? SPLIT_EVEN : (model_split_t)ns->plan;
    return stage_num_params(&cfg, stage, ns->nstages);
}

/* The run's split as a message of this run says it, when not known yet. */
static void s_learn_plan(netside_t *ns, uint32_t flags)
{
    int plan = plan_of_flags(flags);
    if (ns->plan >= 0 || plan < 0) return;
    ns->plan = plan;
    ns->view_dirty = 1;
}

static void s_hdr(const netside_t *ns, wire_hdr_t *h, int type)
{
    wire_hdr_init(h, (wire_type_t)type);
    h->run = ns->run;
    h->stage = ns->me.stage < 0 ? WIRE_STAGE_NONE : (uint16_t)ns->me.stage;
    h->wversion = (uint32_t)ns->me.version;
}

/* A new link starts with an introduction: who we are, where we listen,
 * which stage we serve, and (closed swarm) our ticket, so the peer knows us
 * before our first real message even when gossip has not told it yet. */
static void s_introduce(netside_t *ns, int link)
{
    wbuf_t w;
    wbuf_init(&w, 1024);
    s_put_join(ns, &w, ns->me.stage, 0);
    wire_hdr_t h;
    s_hdr(ns, &h, WIRE_JOIN);
    h.flags = JOIN_FLAG_INTRO | (ns->outward ? JOIN_FLAG_OUTWARD : 0);
    const void *f[1] = { w.data };
    size_t l[1] = { w.len };
    if (!wbuf_error(&w)) s_port_send(ns, link, NULL, &h, f, l, 1, 0, 0);
    wbuf_free(&w);
}

static void s_dial(netside_t *ns, peer_t *p);
static double s_slow_after(const peer_t *p, double now, int live);

/* The link to peer id, connecting on first use; -1 when unknown, or when it
 * is reachable only outward and has opened no link to us yet (it is asked to). */
static int s_link(netside_t *ns, uint64_t id)
{
    peer_t *p = id != ns->id ? peers_find(&ns->peers, id) : NULL;
    if (!p) return -1;
    if (p->link < 0 && p->outward) { s_dial(ns, p); return -1; }
    if (p->link < 0) {
        char err[256];
        p->link = ns->c.port.connect(ns->c.port.arg, p->info.addr, p->info.pubkey, err, sizeof err);
        peers_touch(&ns->peers, p);
        if (p->link >= 0) s_introduce(ns, p->link);
    }
    return p->link;
}

static int s_relay_send(netside_t *ns, peer_t *p, const wire_hdr_t *h, const void *const *frames,
                        const size_t *lens, int nf, uint64_t raw);

/* A message to peer: over our link to it, or the one it opened to us, or
 * (both reachable only outward) sealed through its relay. */
static int s_send(netside_t *ns, uint64_t peer, const wire_hdr_t *h, const void *const *frames,
                  const size_t *lens, int nf, uint64_t raw, uint64_t virt)
{
    int link = s_link(ns, peer);
    if (link < 0) {
        peer_t *p = peers_find(&ns->peers, peer);
        wire_hdr_t hp = *h;   /* the sealed header says the plan too (s_port_send's for the envelope) */
        hp.flags |= plan_flags(ns->plan);
        if (p && p->via && !virt) return s_relay_send(ns, p, &hp, frames, lens, nf, raw);
        return -1;
    }
    return s_port_send(ns, link, NULL, h, frames, lens, nf, raw, virt);
}

static int s_reply(netside_t *ns, const transport_msg_t *to, const wire_hdr_t *h, const void *const *frames,
                   const size_t *lens, int nf)
{
    if (to->link == RELAYED_LINK) return s_send(ns, to->sender, h, frames, lens, nf, 0, 0);
    return s_port_send(ns, to->link >= 0 ? to->link : -1, to, h, frames, lens, nf, 0, 0);
}

/* The ids of every live peer (self excluded) into ids (room for PEERS_CAP). */
/* Room for the records a PEERS/WELCOME table says it holds (its leading
 * u32 count; peers_decode checks the rest), at least one and at most
 * PEERS_MAX: a share of the table is small, and a buffer of PEERS_MAX
 * records per message was most of the work of a busy node's allocator.
 * Sets *max to the room.  NULL when out of memory. */
static peer_info_t *s_recs_for(const uint8_t *frame, size_t len, int *max)
{
    rbuf_t r;
    rbuf_init(&r, frame, len);
    uint32_t count = rbuf_get_u32(&r);   /* 0 when truncated: peers_decode says so */
    if (count < 1) count = 1;
    if (count > PEERS_MAX) count = PEERS_MAX;
    *max = (int)count;
    return malloc(sizeof(peer_info_t) * count);
}

static int s_live_ids(const netside_t *ns, uint64_t *ids)
{
    int k = 0;
    for (int i = 0; i < ns->peers.n; i++)
        if (ns->peers.p[i].info.id != ns->id && ns->peers.p[i].health != PEER_GONE) ids[k++] = ns->peers.p[i].info.id;
    return k;
}

static void s_add_peer(netside_t *ns, const peer_info_t *info, double heard, const char *why);

/* Signs this node's own announcement again when its address or stage
 * changed since the last one (the seq is the wall clock in ms, so it only
 * grows, across restarts too). */
static void s_self_announce(netside_t *ns, peer_t *self)
{
    announce_t a;
    char err[160];
    self->info.flags = s_flags(ns);
    if (self->announce_seq && ns->ann_stage == self->info.stage && strcmp(ns->ann_addr, self->info.addr) == 0
        && ns->ann_flags == self->info.flags) return;
    ns->ann_stage = self->info.stage;
    ns->ann_flags = self->info.flags;
    snprintf(ns->ann_addr, sizeof ns->ann_addr, "%s", self->info.addr);
    uint64_t seq = ns->c.clock.wall_ms(ns->c.clock.arg);
    if (seq <= self->announce_seq) seq = self->announce_seq + 1;
    if (announce_sign(&a, &self->info, seq, ns->c.keys, err, sizeof err) == 0) {
        uint8_t blob[ANNOUNCE_LEN];
        announce_encode(blob, &a);
        peers_set_announce(self, blob, seq);
    }
}

/* Times a changed record goes out first in gossip: enough rounds for the
 * news to reach every node with high probability (~3 log2 N). */
static int s_rumor_rounds(const netside_t *ns)
{
    int r = 3;
    for (int n = ns->peers.n; n > 1; n >>= 1) r += 3;
    return r;
}

/* p changed: its record goes out first for a few gossip rounds. */
static void s_rumor(netside_t *ns, peer_t *p)
{
    if (p->rumor <= 0) s_ixset_add(&ns->rumor_set, (int)(p - ns->peers.p));
    p->rumor = s_rumor_rounds(ns);
}

/* Appends record i of the table (with its announcement) to recs/blobs. */
static void s_table_entry(const netside_t *ns, const peer_t *p, double now, peer_info_t *rec, const uint8_t **blob)
{
    (void)ns;
    *rec = p->info;
    rec->rtt_ms = (float)p->rtt_ms;
    rec->seen_ms = (uint64_t)((now - p->last_heard) * 1000.0);
    *blob = p->announce_seq ? p->announce : NULL;
}

/* A table for WELCOME, PEERS and STATUS: self, then alive peers: all of
 * them (limit 0), or at most `limit`, changed records first, then a
 * round-robin share of the rest (gossip).  The records, then a u32 count
 * and each record's signed announcement (empty when we hold none for it),
 * forwarded as received.  Only gossip (limit > 0) spends a changed record's
 * rounds: a WELCOME or a STATUS answer goes to a joiner or an outsider. */
static void s_put_table(netside_t *ns, wbuf_t *w, int limit)
{
    int cap = (limit > 0 && limit < ns->peers.n ? limit : ns->peers.n) + 1;
    peer_info_t *recs = malloc(sizeof(peer_info_t) * (size_t)cap);
    const uint8_t **blobs = malloc(sizeof(uint8_t *) * (size_t)cap);
    if (!recs || !blobs) { free(recs); free(blobs); w->err = 1; return; }
    int k = 0;
    s_self_info(ns, &recs[k]);
    blobs[k] = NULL;
    peer_t *self = peers_find(&ns->peers, ns->id);
    if (self) {
        self->info.stage = (int16_t)ns->me.stage;
        memcpy(self->info.addr, recs[0].addr, sizeof self->info.addr);
        s_self_announce(ns, self);
        if (self->announce_seq) blobs[k] = self->announce;
    }
    k++;
    double now = s_now(ns);
    int n = ns->peers.n;
    if (limit <= 0 || n <= limit) {
        for (int i = 0; i < n && k < cap; i++) {
            peer_t *p = &ns->peers.p[i];
            if (p->info.id == ns->id || p->health == PEER_GONE) continue;
            if (limit > 0 && p->rumor > 0 && --p->rumor == 0) s_ixset_del(&ns->rumor_set, i);
            s_table_entry(ns, p, now, &recs[k], &blobs[k]);
            k++;
        }
    } else {
        /* changed records first (each goes out a few rounds), then the next share of the rest */
        ixset_t *rs = &ns->rumor_set;
        for (int j = 0, i = 0; rs->ok ? j < rs->n : i < n; ) {
            if (k >= cap) break;
            int at = rs->ok ? rs->ix[j] : i++;
            peer_t *p = &ns->peers.p[at];
            if (p->info.id == ns->id || p->health == PEER_GONE || p->rumor <= 0) { j++; continue; }
            p->rumor--;
            s_table_entry(ns, p, now, &recs[k], &blobs[k]);
            k++;
            if (rs->ok && p->rumor == 0) s_ixset_del_at(rs, j);
            else j++;
        }
        for (int j = 0; j < n && k < cap; j++) {
            peer_t *p = &ns->peers.p[(ns->gossip_at + j) % n];
            if (p->info.id == ns->id || p->health == PEER_GONE || p->rumor > 0) continue;
            s_table_entry(ns, p, now, &recs[k], &blobs[k]);
            k++;
            ns->gossip_at = (ns->gossip_at + j + 1) % n;
        }
    }
    peers_encode(w, recs, k);
    wbuf_put_u32(w, (uint32_t)k);
    for (int i = 0; i < k; i++) wbuf_put_bytes(w, blobs[i], blobs[i] ? ANNOUNCE_LEN : 0);
    free(recs);
    free(blobs);
}

static void s_revive(netside_t *ns, peer_t *p, const char *why)
{
    s_set_health(ns, p, PEER_ALIVE);
    s_rumor(ns, p);
    ns->view_dirty = 1;
    char s[9];
    node_id_short(p->info.id, s);
    metrics_event(ns->c.metrics, "peer", "\"peer\":%s,\"what\":\"joined\",\"why\":%s,\"peer_stage\":%d", s, why, p->info.stage);
}

/* A peer pinged by us that has answered nothing for longer than makes it
 * slow: its silence to us is what counts, whatever third parties say (a
 * member's word "heard from it just now" kept a dead peer alive here, and
 * drawing work, for as long as it said so). */
static int s_ignores_us(const peer_t *p, double now, double slow)
{
    return p->unanswered > 0 && now - p->unanswered > slow;
}

static double s_slow_after(const peer_t *p, double now, int live);

/* What a third party says of a peer's freshness: heard from seen_ms ago.
 * Recent word brings a peer taken for gone back (a partition healed there),
 * unless it answers our pings nothing (s_ignores_us). */
static int s_fresh(netside_t *ns, peer_t *p, uint64_t seen_ms)
{
    double now = s_now(ns), at = now - (double)seen_ms * 1e-3;
    if (at <= p->last_heard || p->banned_until > now) return 0;
    p->last_heard = at;
    if (p->health == PEER_GONE && now - at < GONE_MIN_S && !s_ignores_us(p, now, s_slow_after(p, now, ns->live)))
        s_revive(ns, p, "heard of again");
    return 1;
}

/* 1 when blob is a valid announcement (into *a): checked once, then found
 * in the verified cache; 0 when there is none (len 0) or it says another
 * thing than rec; -1 when its signature does not check (a node passes on
 * only announcements it checked: the sender's doing). */
static int s_announce_ok(netside_t *ns, announce_t *a, const uint8_t *blob, size_t len, const peer_info_t *rec)
{
    char err[160];
    if (len != ANNOUNCE_LEN || announce_decode(a, blob, len, err, sizeof err) != 0)
        return 0;   /* not a form this node reads (a newer node's?): passed over, as before */
    if (vcache_has(ns->vcache, blob, len)) return announce_matches(a, rec);
    if (announce_verify(a, blob, len, err, sizeof err) != 0) return -1;
    vcache_add(ns->vcache, blob, len);
    return announce_matches(a, rec);
}

/* Closes the link to p, whichever kind it is (one we opened, or the one it
 * opened to us and we adopted): the next link to p starts from nothing. */
static void s_close_link(netside_t *ns, peer_t *p)
{
    if (p->link < 0) return;
    ns->c.port.disconnect(ns->c.port.arg, p->link);
    p->link = -1;
    p->adopted = 0;
}

/* p is at another address now: its link is closed (one we opened goes to
 * the old address; one it opened to us is adopted again with its next
 * message), and the pings the old address left unanswered say nothing of
 * the new one. */
static void s_moved(netside_t *ns, peer_t *p)
{
    s_close_link(ns, p);
    p->unanswered = 0;
}

/* What a peer says of its reachability.  A link we opened to a peer that
 * turns out to be reachable only outward leads nowhere: closed. */
static void s_set_outward(netside_t *ns, peer_t *p, int outward)
{
    if (p->outward == outward) return;
    p->outward = outward;
    ns->nout += outward ? 1 : -1;
    ns->view_dirty = 1;
    peers_touch(&ns->peers, p);
    if (outward && !p->adopted) s_close_link(ns, p);
}

/* A message from an outward-only peer that came in over the connection it
 * opened to us: what we send it goes back that way. */
static void s_adopt(netside_t *ns, peer_t *p, const transport_msg_t *m)
{
    if (!p || !p->outward || m->link != -1 || !ns->c.port.adopt) return;
    if (!p->adopted) s_close_link(ns, p);
    peers_touch(&ns->peers, p);
    int l = ns->c.port.adopt(ns->c.port.arg, p->link, m);
    if (l < 0) return;
    int fresh = p->link != l;
    p->link = l;
    p->adopted = 1;
    if (!fresh) return;
    ns->view_dirty = 1;
    s_introduce(ns, l);   /* as on a link we open: it learns our ticket (closed swarm) before our first message */
}

/* 1 when sender's gossip may introduce one more new peer now (taken from its learn bucket). */
static int s_may_learn(netside_t *ns, uint64_t sender)
{
    peer_t *p = peers_find(&ns->peers, sender);
    if (p && p->learn.last == 0) p->learn = bucket_full(s_now(ns));   /* a record's bucket starts full */
    return p && bucket_take(&p->learn, s_now(ns), GOSSIP_LEARN_PER_S, GOSSIP_LEARN_BURST, 1);
}

/* Takes a's address, stage and flags for p (a, in blob, is p's valid
 * announcement, as new as the one held or newer). */
static void s_take_announce(netside_t *ns, peer_t *p, const announce_t *a, const uint8_t *blob)
{
    int moved = strcmp(p->info.addr, a->addr) != 0;
    if (moved) s_moved(ns, p);
    if (moved || p->info.stage != a->stage) { ns->view_dirty = 1; s_rumor(ns, p); }
    memcpy(p->info.addr, a->addr, sizeof p->info.addr);
    p->info.stage = a->stage;
    peers_touch(&ns->peers, p);
    s_set_outward(ns, p, (a->flags & PEER_FLAG_OUTWARD) != 0);
    if (p->relays != ((a->flags & PEER_FLAG_RELAY) != 0)) ns->view_dirty = 1;
    p->relays = (a->flags & PEER_FLAG_RELAY) != 0;
    peers_set_announce(p, blob, a->seq);
}

/* Takes the records of a table sent by `sender`: its own record on its word
 * (the link authenticated it), anyone else's only with that peer's valid
 * signed announcement, newer than the one held, vouching for the record's
 * address and stage; new peers in gossip (why "gossip") within the
 * sender's learn bucket.  Returns -1 when the announcement part is
 * malformed, -2 at the first announcement whose signature does not check
 * (what came before it stays taken). */
static int s_take_table(netside_t *ns, rbuf_t *r, const peer_info_t *recs, int k, uint64_t sender,
                        const uint8_t sender_pub[32], const char *why)
{
    int gossip = strcmp(why, "gossip") == 0, refused = 0;
    uint32_t nb = rbuf_get_u32(r);
    if (rbuf_error(r) || nb != (uint32_t)k) return -1;
    for (int i = 0; i < k; i++) {
        size_t len = 0;
        const uint8_t *blob = rbuf_get_bytes(r, ANNOUNCE_LEN, &len);
        if (rbuf_error(r)) return -1;
        const peer_info_t *rec = &recs[i];
        if (rec->id == ns->id) continue;
        peer_t *p = peers_find(&ns->peers, rec->id);
        announce_t a;
        int valid = 0;
        if (len == ANNOUNCE_LEN && p && p->announce_seq && announce_seq_of(blob) <= p->announce_seq)
            valid = 0;  /* not newer than the one we hold (seqs only grow): nothing new, no signature to check */
        else if ((valid = s_announce_ok(ns, &a, blob, len, rec)) < 0)
            return -2;
        if (rec->id == sender) {
            if (memcmp(rec->pubkey, sender_pub, 32) != 0) continue;
            s_add_peer(ns, rec, s_now(ns), why);
        } else if (!p && !valid) {
            continue;   /* a third party's word alone is not enough */
        } else if (!p && gossip && !s_may_learn(ns, sender)) {
            refused++;
            continue;
        } else if (!p) {
            /* as fresh as the sender's word of it, not as this moment: a peer that died a while ago
             * would otherwise look alive here for a whole silence allowance, and draw work */
            s_add_peer(ns, rec, s_now(ns) - (double)rec->seen_ms * 1e-3, why);
        }
        peer_t *q = peers_find(&ns->peers, rec->id);
        if (q && valid && a.seq >= q->announce_seq) s_take_announce(ns, q, &a, blob);
        if (p && rec->id != sender && s_fresh(ns, q, rec->seen_ms)) {
            /* (after its announcement: word of a peer at a new address is word of the new one) the sender
             * heard from it more lately than we did: its rate and version are newer hints */
            if (q->info.rate != rec->rate) ns->view_dirty = 1;
            q->info.rate = rec->rate;
            q->info.version = rec->version;
            peers_touch(&ns->peers, q);
        }
    }
    if (refused) s_count_drop(ns, "gossip of more new peers than a member may introduce (the rest not taken)", sender);
    return 0;
}

/* PEERS: a share of the table, this node's progress and whether it ended,
 * (last stage) the progress of the last-stage peers it knows, and the run's
 * progress as it counts it. */
static void s_send_table(netside_t *ns, uint64_t peer, int limit)
{
    wbuf_t w;
    wbuf_init(&w, TABLE_MAX_BYTES);
    if (limit > 0)   /* a share of the table, its announcements, the last stage's progress: about this much */
        wbuf_reserve(&w, (size_t)(limit + 1) * (sizeof(peer_info_t) + ANNOUNCE_LEN + 4) + PROGRESS_MAX * 16 + 72);
    s_put_table(ns, &w, limit);
    wbuf_put_u64(&w, ns->me.completed);
    wbuf_put_f32(&w, (float)ns->me.loss);
    wbuf_put_u8(&w, (uint8_t)(ns->me.done == 1 && ns->me.status == 0));  /* completed, not interrupted */
    uint32_t np = 0;
    for (int pass = 0; pass < 2; pass++) {
        if (pass) wbuf_put_u32(&w, np);
        np = 0;
        for (int i = 0; ns->me.stage == ns->nstages - 1 && i < ns->peers.n && np < PROGRESS_MAX; i++) {
            const peer_t *p = &ns->peers.p[i];
            if (p->info.id == ns->id || p->info.stage != ns->nstages - 1 || !p->completed) continue;
            if (pass) { wbuf_put_u64(&w, p->info.id); wbuf_put_u64(&w, p->completed); }
            np++;
        }
    }
    /* the run's progress as this node counts it (read from the last stage: a data stage trains on while it is short) */
    wbuf_put_u64(&w, peers_completed(&ns->peers) + ns->me.completed);
    if (!wbuf_error(&w)) {
        wire_hdr_t h;
        s_hdr(ns, &h, WIRE_PEERS);
        const void *f[1] = { w.data };
        size_t l[1] = { w.len };
        s_send(ns, peer, &h, f, l, 1, 0, 0);
    }
    wbuf_free(&w);
}

/* Marks peer id heard from now; logs a return.  After a silence between
 * us longer than makes a peer slow (it, or this node, was paused), what
 * was sent to it before now came back late for that (silent_until).  A
 * peer never heard from itself yet has been silent since we heard of it (a
 * peer paused right after its introduction). */
static void s_heard(netside_t *ns, uint64_t id)
{
    peer_t *p = peers_find(&ns->peers, id);
    if (!p) return;
    double now = s_now(ns), since = p->last_direct > 0 ? p->last_direct : p->last_heard;
    if (since > 0 && now - since > s_slow_after(p, now, ns->live)) p->silent_until = now;
    p->last_heard = p->last_direct = now;
    p->unanswered = 0;
    if (p->health == PEER_GONE) s_revive(ns, p, "heard again");
}

/* A full table's record that a new peer may take: the peer silent longest,
 * taken for gone and silent for more than GONE_FORGET_S (its link closed,
 * pinged no more, not banned) and held by no index list (rumor, recent).
 * -1 when none: the new peer stays unknown.  Peers alive or lately heard
 * from keep their records. */
static int s_forgettable(netside_t *ns)
{
    double now = s_now(ns);
    int best = -1;
    for (int i = 0; i < ns->peers.n; i++) {
        const peer_t *p = &ns->peers.p[i];
        if (p->info.id == ns->id || p->health != PEER_GONE || p->link >= 0 || now - p->last_heard <= GONE_FORGET_S
            || p->banned_until > now || p->rumor > 0 || p->recent)
            continue;
        if (best < 0 || p->last_heard < ns->peers.p[best].last_heard) best = i;
    }
    return best;
}

/* A new peer in a full table takes the place of a forgettable one: its
 * index, or -1 when there is none. */
static int s_replace_peer(netside_t *ns, const peer_info_t *info, double heard)
{
    int i = s_forgettable(ns);
    if (i < 0) {
        if (!ns->full_noted) {
            ns->full_noted = 1;
            metrics_event(ns->c.metrics, "warning", "\"what\":\"peer_table_full\",\"why\":%s",
                          "the peer table is full and none of its peers is gone and silent for 10 minutes: new peers stay unknown");
        }
        return -1;
    }
    peer_t *old = &ns->peers.p[i];
    s_set_outward(ns, old, 0);   /* (the count of outward-only records follows) */
    for (int k = 0; k < PARTNERS_MAX; k++)   /* (a partner silent this long is dropped at the next ping round anyway) */
        if (ns->partner[k] == old->info.id) ns->partner[k] = 0;
    return peers_replace(&ns->peers, i, info, heard) == 0 ? i : -1;
}

/* Learns or updates a peer; a new one was last heard from at clock time heard. */
static void s_add_peer(netside_t *ns, const peer_info_t *info, double heard, const char *why)
{
    if (info->id == ns->id) return;
    peer_t *was = peers_find(&ns->peers, info->id);
    if (was && (was->info.stage != info->stage || strcmp(was->info.addr, info->addr) != 0)) {
        /* back at another address (a restart with its keys) or at another stage: its peers hear of it */
        if (strcmp(was->info.addr, info->addr) != 0) s_moved(ns, was);
        s_rumor(ns, was);
    }
    int r = peers_upsert(&ns->peers, info, heard);
    int ix = ns->peers.n - 1;   /* where a new record is: the last, */
    if (r < 0 && ns->peers.n == PEERS_CAP && (ix = s_replace_peer(ns, info, heard)) >= 0) r = 1;   /* or a forgotten one's */
    ns->view_dirty = 1;
    if (r == 1) {
        s_live_change(ns, ix, 1);   /* a new record is alive */
        peer_t *p = &ns->peers.p[ix];
        s_rumor(ns, p);
        char s[9];
        node_id_short(info->id, s);
        metrics_event(ns->c.metrics, "peer", "\"peer\":%s,\"what\":\"joined\",\"why\":%s,\"peer_stage\":%d,\"addr\":%s",
                      s, why, info->stage, info->addr);
    }
}

/* ---- joining (the bootstrap's side) ---- */

/* 1 when another JOIN may be answered now. */
static int s_join_allowed(netside_t *ns)
{
    return bucket_take(&ns->join_bucket, s_now(ns), JOIN_PER_S, JOIN_PER_S, 1);
}

/* Closed swarm: checks the ticket of a JOIN; 0 admitted until *expires
 * (unix seconds, 0: no expiry; may be NULL), -1 refused (reason in why). */
static int s_check_ticket(netside_t *ns, const uint8_t *tbytes, size_t tlen, const uint8_t pub[32],
                          uint64_t *expires, char *why, size_t whylen)
{
    ticket_t t;
    if (tlen != TICKET_LEN) { snprintf(why, whylen, "no admission ticket"); return -1; }
    if (ticket_decode(&t, tbytes, tlen, why, whylen) < 0) return -1;
    if (ticket_verify(&t, ns->c.o->owner_pub, pub, s_unix_s(ns), why, whylen) < 0) return -1;
    if (expires) *expires = t.expires;
    return 0;
}

/* A refused joiner learns why, so it can say so instead of waiting. */
static void s_refuse(netside_t *ns, const transport_msg_t *m, const char *why)
{
    char id[9];
    node_id_short(m->sender, id);
    metrics_event(ns->c.metrics, "peer", "\"peer\":%s,\"what\":\"refused\",\"why\":%s", id, why);
    s_drop(ns, why, m->sender);
    if (m->hdr.flags & JOIN_FLAG_INTRO) return;
    wire_hdr_t h;
    s_hdr(ns, &h, WIRE_BYE);
    const void *f[1] = { why };
    size_t l[1] = { strlen(why) };
    s_reply(ns, m, &h, f, l, 1);
}

/* A member opening a link to us: learn it, admit it, nothing to answer. */
static void s_on_intro(netside_t *ns, const transport_msg_t *m, const char *adv, int want, uint64_t until)
{
    int outward = (m->hdr.flags & JOIN_FLAG_OUTWARD) != 0;
    peer_info_t info = {0};
    info.id = m->sender;
    memcpy(info.addr, adv, sizeof info.addr);
    memcpy(info.pubkey, m->sender_pub, 32);
    info.stage = (int16_t)want;
    s_add_peer(ns, &info, s_now(ns), "introduction");
    s_heard(ns, m->sender);
    peer_t *p = peers_find(&ns->peers, m->sender);
    if (!p) return;
    s_admit(p, 1, until);
    if (outward) s_set_outward(ns, p, 1);
    s_adopt(ns, p, m);
}

static void s_welcome(netside_t *ns, const transport_msg_t *m, int stage, int shard, int reachable)
{
    wbuf_t cfg, asg, tab;
    wbuf_init(&cfg, 1 << 16);
    wbuf_init(&asg, 64);
    wbuf_init(&tab, TABLE_MAX_BYTES);
    opts_encode_run(&cfg, ns->c.o);
    wbuf_put_u32(&asg, (uint32_t)stage);
    wbuf_put_u32(&asg, (uint32_t)shard);
    wbuf_put_u8(&asg, (uint8_t)(ns->me.done != 0));
    wbuf_put_u8(&asg, (uint8_t)(reachable != 0));   /* added later: older joiners read no further */
    s_put_table(ns, &tab, 0);
    if (!wbuf_error(&cfg) && !wbuf_error(&asg) && !wbuf_error(&tab)) {
        wire_hdr_t h;
        s_hdr(ns, &h, WIRE_WELCOME);
        const void *f[3] = { cfg.data, asg.data, tab.data };
        size_t l[3] = { cfg.len, asg.len, tab.len };
        s_reply(ns, m, &h, f, l, 3);
    }
    wbuf_free(&cfg);
    wbuf_free(&asg);
    wbuf_free(&tab);
}

/* Reachability of a joiner: a fresh link to the address it advertised,
 * with its key, and a PING that it answers over that link.  0 probing (the
 * WELCOME waits for the answer, at most PROBE_S), -1 no probe (no slot, or
 * this port cannot send back over a joiner's own link). */
static int s_probe_start(netside_t *ns, const transport_msg_t *m, const char *adv, int stage, int shard)
{
    if (!ns->c.port.adopt) return -1;
    int free_slot = -1;
    for (int i = 0; i < PROBES_MAX; i++) {
        if (ns->probe[i].id == m->sender) return 0;   /* a repeated JOIN: the probe is under way */
        if (!ns->probe[i].id && free_slot < 0) free_slot = i;
    }
    if (free_slot < 0) return -1;
    char err[256];
    int link = ns->c.port.connect(ns->c.port.arg, adv, m->sender_pub, err, sizeof err);
    if (link < 0) return -1;
    probe_t *pr = &ns->probe[free_slot];
    memset(pr, 0, sizeof *pr);
    pr->id = m->sender;
    ns->nprobes++;
    pr->link = link;
    ns->rng = ns->rng * 6364136223846793005ULL + 1442695040888963407ULL;
    pr->nonce = ns->rng | 1;
    pr->deadline = s_now(ns) + PROBE_S;
    pr->stage = stage;
    pr->shard = shard;
    pr->to = *m;
    pr->to.parts_ = NULL;   /* routing fields only */
    pr->to.nframes = 0;
    wire_hdr_t h;
    s_hdr(ns, &h, WIRE_PING);
    h.flags = PING_FLAG_PROBE;
    h.mb = pr->nonce;
    s_port_send(ns, link, NULL, &h, NULL, NULL, 0, 0, 0);
    return 0;
}

/* A probe ended: the joiner is told whether the swarm reached it. */
static void s_probe_end(netside_t *ns, probe_t *pr, int reachable)
{
    ns->c.port.disconnect(ns->c.port.arg, pr->link);
    peer_t *p = peers_find(&ns->peers, pr->id);
    if (p) {
        s_set_outward(ns, p, !reachable);
        s_adopt(ns, p, &pr->to);
    }
    char id[9];
    node_id_short(pr->id, id);
    if (reachable)
        metrics_event(ns->c.metrics, "peer", "\"peer\":%s,\"what\":\"probed\",\"why\":%s,\"reachable\":true", id,
                      "answered on its address");
    else
        metrics_event(ns->c.metrics, "peer", "\"peer\":%s,\"what\":\"probed\",\"why\":%s,\"reachable\":false", id,
                      "no answer on its address: reachable only outward");
    s_welcome(ns, &pr->to, pr->stage, pr->shard, reachable);
    memset(pr, 0, sizeof *pr);
    ns->nprobes--;
}

static void s_on_probe_pong(netside_t *ns, const transport_msg_t *m)
{
    for (int i = 0; i < PROBES_MAX; i++)
        if (ns->probe[i].id && ns->probe[i].id == m->sender && ns->probe[i].nonce == m->hdr.mb) {
            s_probe_end(ns, &ns->probe[i], 1);
            return;
        }
    s_discard(ns);   /* late, or not ours */
}

static void s_probe_tick(netside_t *ns, double now)
{
    for (int i = 0; ns->nprobes && i < PROBES_MAX; i++)
        if (ns->probe[i].id && now >= ns->probe[i].deadline) s_probe_end(ns, &ns->probe[i], 0);
}

static void s_on_join(netside_t *ns, const transport_msg_t *m)
{
    int intro = (m->hdr.flags & JOIN_FLAG_INTRO) != 0;
    if (!intro && !s_join_allowed(ns)) { s_discard(ns); return; }  /* a flood of joiners: they retry every 3 s */
    if (m->nframes < 1) { s_drop(ns, "JOIN without body", m->sender); return; }
    rbuf_t r;
    rbuf_init(&r, m->frame[0], m->len[0]);
    char adv[PEER_ADDR_MAX];
    rbuf_get_str(&r, adv, sizeof adv);
    int32_t want = (int32_t)rbuf_get_u32(&r);
    size_t tlen = 0;
    const uint8_t *tbytes = rbuf_get_bytes(&r, TICKET_LEN, &tlen);
    int other_run = rbuf_remaining(&r) >= 8 && rbuf_get_u64(&r) != ns->run;   /* want: another run's checkpoint's stage */
    /* the address goes into every table this node sends: one that peers_decode
     * refuses (the wildcard "*", say) would get the whole table refused */
    if (rbuf_error(&r) || !peer_addr_valid(adv) || want < -1) {
        s_drop(ns, "malformed JOIN", m->sender);
        return;
    }
    if (other_run && !intro) want = -1;
    char why[240];
    if (want >= ns->nstages) {   /* the joiner cannot know the run's stages before it is welcomed */
        snprintf(why, sizeof why, "--stage %d: the run has %d stage%s (0 to %d)", (int)want, ns->nstages,
                 ns->nstages == 1 ? "" : "s", ns->nstages - 1);
        s_refuse(ns, m, why);
        return;
    }
    uint64_t until = 0;
    peer_t *known = peers_find(&ns->peers, m->sender);
    if (ns->c.o->closed && s_check_ticket(ns, tbytes, tlen, m->sender_pub, &until, why, sizeof why) < 0) {
        size_t n = strlen(why);
        snprintf(why + n, sizeof why - n, " (a closed swarm needs --ticket from its owner)");
        if (known) s_admit(known, 0, 0);   /* admitted before: no longer, on a ticket refused now */
        s_refuse(ns, m, why);
        return;
    }
    if (intro) { s_on_intro(ns, m, adv, want, until); return; }
    int stage = want;
    if (known && want < 0) stage = known->info.stage;  /* a repeated JOIN keeps its stage */
    if (stage < 0 || stage >= ns->nstages) stage = peers_pick_stage(&ns->peers, ns->nstages);
    int counts[MODEL_STAGES_MAX];
    peers_stage_counts(&ns->peers, ns->nstages, counts);
    peer_info_t info = {0};
    info.id = m->sender;
    snprintf(info.addr, sizeof info.addr, "%s", adv);
    memcpy(info.pubkey, m->sender_pub, 32);
    info.stage = (int16_t)stage;
    s_add_peer(ns, &info, s_now(ns), "join");
    /* a re-join after a restart: alive again (s_add_peer took its stage and its possibly new address, and
     * closed a link to the old one) */
    peer_t *p = peers_find(&ns->peers, m->sender);
    if (p) {   /* its own word: pings it left unanswered before its restart count no more */
        s_set_health(ns, p, PEER_ALIVE);
        p->last_heard = p->last_direct = s_now(ns);
        p->unanswered = 0;
        s_admit(p, 1, until);
    }
    int shard = stage == 0 ? counts[0] : 0;
    if (!p || (m->hdr.flags & JOIN_FLAG_OUTWARD)) {
        if (p) s_set_outward(ns, p, 1);
        s_adopt(ns, p, m);
        s_welcome(ns, m, stage, shard, 0);
        return;
    }
    if (s_probe_start(ns, m, adv, stage, shard) < 0) s_welcome(ns, m, stage, shard, 1);
}

/* ---- joining (the joiner's side) ---- */

static void s_join_fail(netside_t *ns, const char *fmt, const char *detail)
{
    snprintf(ns->join_err, sizeof ns->join_err, fmt, ns->join_addr, detail);
    ns->join = JOIN_FAILED;
}

static void s_join_send(netside_t *ns)
{
    wbuf_t w;
    wbuf_init(&w, 1024);
    s_put_join(ns, &w, ns->join_want, ns->c.o->stage_run);
    wire_hdr_t h;
    wire_hdr_init(&h, WIRE_JOIN);
    h.flags = ns->c.no_listen ? JOIN_FLAG_OUTWARD : 0;
    const void *f[1] = { w.data };
    size_t l[1] = { w.len };
    if (!wbuf_error(&w)) s_port_send(ns, ns->join_link, NULL, &h, f, l, 1, 0, 0);
    wbuf_free(&w);
    ns->join_resend = s_now(ns) + JOIN_RESEND_S;
}

int netside_join(netside_t *ns, const char *join_addr, int want, char *err, size_t errlen)
{
    char host[ADDR_HOST_MAX], why[300], hp[PEER_ADDR_MAX];
    int port;
    uint8_t key[32];
    if (addr_parse(join_addr, host, sizeof host, &port, key, why, sizeof why) < 0) {
        snprintf(err, errlen, "--join %s", why);
        return -1;
    }
    hostport_format(hp, sizeof hp, host, port);
    ns->join_link = ns->c.port.connect(ns->c.port.arg, hp, key, why, sizeof why);
    if (ns->join_link < 0) { snprintf(err, errlen, "--join %s: %s", join_addr, why); return -1; }
    snprintf(ns->join_addr, sizeof ns->join_addr, "%s", join_addr);
    ns->join_id = node_id_from_pubkey(key);
    ns->join_want = want;
    ns->join = JOIN_WAITING;
    ns->join_deadline = s_now(ns) + JOIN_WAIT_S;
    s_join_send(ns);
    return 0;
}

int netside_join_state(netside_t *ns, char *err, size_t errlen)
{
    if (ns->join == JOIN_FAILED) { snprintf(err, errlen, "%s", ns->join_err); return -1; }
    return ns->join == JOIN_DONE || ns->join == JOIN_NONE ? 1 : 0;
}

static void s_on_refused(netside_t *ns, const transport_msg_t *m)
{
    char why[240];
    size_t n = m->len[0] < sizeof why - 1 ? m->len[0] : sizeof why - 1;
    memcpy(why, m->frame[0], n);
    why[n] = 0;
    for (char *q = why; *q; q++) if (*q < 32 || *q > 126) *q = '?';
    s_join_fail(ns, "--join %s: refused by the swarm: %s", why);
}

static void s_on_welcome(netside_t *ns, const transport_msg_t *m)
{
    if (m->nframes < 3) { s_join_fail(ns, "--join %s: malformed WELCOME%s", ""); return; }
    opts_t o = *ns->c.o;
    rbuf_t rc, ra, rt;
    rbuf_init(&rc, m->frame[0], m->len[0]);
    rbuf_init(&ra, m->frame[1], m->len[1]);
    rbuf_init(&rt, m->frame[2], m->len[2]);
    char e2[256];
    if (opts_decode_run(&rc, &o, e2, sizeof e2) < 0) { s_join_fail(ns, "--join %s: the swarm's %s", e2); return; }
    int stage = (int)rbuf_get_u32(&ra);
    int shard = (int)rbuf_get_u32(&ra);
    int done = rbuf_get_u8(&ra);
    int reachable = rbuf_remaining(&ra) >= 1 ? rbuf_get_u8(&ra) : 1;   /* an older bootstrap probes nobody */
    int max;
    peer_info_t *recs = s_recs_for(m->frame[2], m->len[2], &max);
    int k = 0;
    if (!recs || rbuf_error(&ra) || stage < 0 || stage >= o.stages
        || shard < 0 || shard > PEERS_CAP   /* one shard per data-stage peer */
        || peers_decode(&rt, recs, max, &k, e2, sizeof e2) < 0) {
        free(recs);
        s_join_fail(ns, "--join %s: malformed WELCOME%s", "");
        return;
    }
    if (done) { free(recs); s_join_fail(ns, "--join %s: that run has already finished%s", ""); return; }
    *ns->c.o = o;
    ns->plan = o.split == SPLIT_AUTO ? plan_of_flags(m->hdr.flags) : o.split;
    ns->run = m->hdr.run;
    ns->nstages = o.stages;
    ns->shard = shard;
    ns->me.stage = stage;
    free(ns->backups);
    ns->backups = calloc((size_t)ns->nstages, sizeof(backup_t));
    int bad = !ns->backups || s_take_table(ns, &rt, recs, k, m->sender, m->sender_pub, "welcome") < 0;
    free(recs);
    if (bad) { s_join_fail(ns, "--join %s: malformed WELCOME%s", ""); return; }
    /* the bootstrap's link is the one we opened; it is the node we chose to join */
    peer_t *p = peers_find(&ns->peers, m->sender);
    if (p && p->link < 0) { p->link = ns->join_link; peers_touch(&ns->peers, p); }
    if (p) s_admit(p, 1, 0);   /* the node we chose to join: no ticket of its own to show */
    ns->outward = ns->c.no_listen || !reachable;
    ns->join = JOIN_DONE;
}

/* ---- tensors ---- */

/* Tensor traffic with p: it is a partner (pinged often: routing needs its RTT). */
/* Room for one more in ns->recent.  0, or -1 when out of memory. */
static int s_grow_recent(netside_t *ns)
{
    int cap = ns->caprecent ? 2 * ns->caprecent : 64;
    int *r = realloc(ns->recent, sizeof(int) * (size_t)cap);
    if (!r) return -1;
    ns->recent = r;
    ns->caprecent = cap;
    return 0;
}

static void s_traffic(netside_t *ns, peer_t *p)
{
    double now = s_now(ns);
    p->last_traffic = now;
    if (!p->recent && (ns->nrecent < ns->caprecent || s_grow_recent(ns) == 0)) {
        ns->recent[ns->nrecent++] = (int)(p - ns->peers.p);
        p->recent = 1;
    }
    int slot = -1;
    for (int i = 0; i < PARTNERS_MAX; i++) {
        if (ns->partner[i] == p->info.id) { ns->partner_t[i] = now; return; }
        if (slot < 0 && !ns->partner[i]) slot = i;
    }
    if (slot < 0) {
        /* full: replace the one with the oldest traffic */
        double oldest = now;
        for (int i = 0; i < PARTNERS_MAX; i++) {
            double t = ns->partner_t[i];
            if (slot < 0 || t < oldest) { slot = i; oldest = t; }
        }
    }
    ns->partner[slot] = p->info.id;
    ns->partner_t[slot] = now;
    ns->partner_ix[slot] = (int)(p - ns->peers.p);
}

/* The floats a tensor of this type must have, and the stage its sender must serve. */
static size_t s_expect(const netside_t *ns, int type, int *want_stage)
{
    if (type == WIRE_ACT) { *want_stage = ns->me.stage - 1; return ns->me.in_n; }
    if (type == WIRE_GRAD) { *want_stage = ns->me.stage + 1; return ns->me.out_n; }
    *want_stage = ns->me.stage;
    return ns->me.nparams;
}

/* A modelled tensor (simulator): one u64, the number of values it stands for. */
static long s_decode_modelled(const transport_msg_t *m, size_t expect)
{
    rbuf_t r;
    rbuf_init(&r, m->frame[0], m->len[0]);
    uint64_t n = rbuf_get_u64(&r);
    return rbuf_error(&r) || n != expect ? -1 : (long)n;
}

/* The checks of a tensor frame that need no buffer of its size: its header
 * (modelled: its count) says expect values.  NULL when they pass, else why not. */
static const char *s_tensor_shape(const netside_t *ns, const transport_msg_t *m, size_t expect)
{
    if (ns->c.modelled) return s_decode_modelled(m, expect) < 0 ? "modelled tensor of the wrong size" : NULL;
    frame_info_t fi;
    char err[200];
    if (frame_peek(&fi, m->frame[0], m->len[0], err, sizeof err) < 0) return "bad tensor frame";
    return fi.n_values != expect ? "tensor shape does not match the run" : NULL;
}

/* Decodes a frame that passed s_tensor_shape into t (expect floats) and
 * checks its values.  NULL when they pass, else why not. */
static const char *s_tensor_values(netside_t *ns, const transport_msg_t *m, float *t, size_t expect)
{
    char err[200];
    if (frame_decode(ns->dec, t, expect, NULL, NULL, m->frame[0], m->len[0], err, sizeof err) != (long)expect)
        return "tensor frame refused";
    for (size_t i = 0; i < expect; i++)
        if (!isfinite(t[i])) return "non-finite tensor";
    if (m->hdr.type != WIRE_AVG && s_norm_ok(ns, m->sender, t, expect) < 0) return "tensor norm far outside its stream's range";
    return NULL;
}

/* Checks and decodes the tensor of an ACT/GRAD/AVG into a mail for the
 * compute side.  Nothing of the tensor's size is allocated before its
 * frame header has been found to match the run. */
static void s_on_tensor(netside_t *ns, const transport_msg_t *m)
{
    int type = m->hdr.type, want_stage;
    peer_t *p = peers_find(&ns->peers, m->sender);
    if (!p) { s_drop(ns, "tensor from an unknown peer", m->sender); return; }
    if (ns->left) return;   /* this node's compute side has ended; its peers have not all heard yet */
    if (ns->me.stage < 0 || m->hdr.stage != ns->me.stage) { s_discard(ns); return; }  /* in flight across a move */
    size_t expect = s_expect(ns, type, &want_stage);
    if (p->info.stage != want_stage) { s_drop(ns, "tensor from a peer of the wrong stage", m->sender); return; }
    s_traffic(ns, p);
    if (type == WIRE_GRAD && (m->hdr.flags & GRAD_FLAG_DUP) && m->nframes == 0) {
        /* no tensor: the microbatch was applied further on already */
        mail_t *mail = mail_new(MAIL_TENSOR);
        if (!mail) return;
        mail->hdr = m->hdr;
        mail->peer = m->sender;
        mail->silent_until = p->silent_until;
        s_post(ns, mail);
        return;
    }
    if (m->nframes < 1 || expect == 0) { s_drop(ns, "tensor message without tensor", m->sender); return; }
    size_t ntarg = type == WIRE_ACT ? (size_t)ns->c.o->batch * (size_t)(ns->c.o->cfg.kind == MODEL_GPT ? ns->c.o->cfg.maxT : 1) : 0;
    if (type == WIRE_ACT && (m->nframes < 2 || m->len[1] != ntarg)) { s_drop(ns, "ACT without valid targets", m->sender); return; }
    const char *bad = s_tensor_shape(ns, m, expect);
    if (bad) { s_drop(ns, bad, m->sender); return; }
    mail_t *mail = mail_new(MAIL_TENSOR);
    float *t = NULL;
    if (!ns->c.modelled) t = malloc(sizeof(float) * expect);
    uint8_t *tg = ntarg ? malloc(ntarg) : NULL;
    if (!mail || (!ns->c.modelled && !t) || (ntarg && !tg)) {
        mail_free(mail); free(t); free(tg);
        s_drop(ns, "out of memory", m->sender);
        return;
    }
    if (!ns->c.modelled) bad = s_tensor_values(ns, m, t, expect);
    if (!bad && ntarg) {
        memcpy(tg, m->frame[1], ntarg);
        for (size_t i = 0; i < ntarg; i++)
            if (tg[i] >= ns->c.o->cfg.V) { bad = "target out of range"; break; }
    }
    if (bad) {
        mail_free(mail); free(t); free(tg);
        s_drop(ns, bad, m->sender);
        return;
    }
    mail->hdr = m->hdr;
    mail->peer = m->sender;
    mail->silent_until = p->silent_until;
    mail->x = t;
    mail->n = expect;
    mail->aux = tg;
    mail->aux_len = ntarg;
    s_post(ns, mail);
}

/* The residual of the gradient stream to peer (n floats), made on first use
 * (all streams taken: in place of the one unused longest, a peer gone
 * most likely; the 64 first upstream peers of a churning swarm held them
 * all for good and every later one went without error feedback); NULL when
 * out of memory. */
static float *s_residual(netside_t *ns, uint64_t peer, size_t n)
{
    double now = s_now(ns);
    int old = 0;
    for (int i = 0; i < ns->nfb; i++) {
        if (ns->fb[i].peer == peer) {
            ns->fb[i].used = now;
            return ns->fb[i].n == n ? ns->fb[i].residual : NULL;
        }
        if (ns->fb[i].used < ns->fb[old].used) old = i;
    }
    float *r = calloc(n, sizeof(float));
    if (!r) return NULL;
    if (ns->nfb == FEEDBACK_STREAMS) free(ns->fb[old].residual);
    else old = ns->nfb++;
    ns->fb[old] = (feedback_t){ .peer = peer, .n = n, .residual = r, .used = now };
    return r;
}

/* Forgets every gradient stream (this node moved to another stage). */
static void s_feedback_reset(netside_t *ns)
{
    for (int i = 0; i < ns->nfb; i++) free(ns->fb[i].residual);
    ns->nfb = 0;
}

/* Encodes mail m's tensor into frame (returns its length, -1 on failure);
 * *virt: the bytes a modelled tensor stands for. */
static long s_encode(netside_t *ns, const mail_t *m, uint8_t **frame, uint64_t *virt)
{
    *virt = 0;
    if (ns->c.modelled || !m->x) {
        /* a modelled tensor: its size only; on the wire as its codec would make it */
        wbuf_t w;
        wbuf_init(&w, 16);
        wbuf_put_u64(&w, m->n);
        *frame = w.data;
        *virt = frame_bound(m->n, m->codec);
        return wbuf_error(&w) ? -1 : (long)w.len;
    }
    size_t cap = frame_bound(m->n, m->codec);
    *frame = malloc(cap);
    if (!*frame) return -1;
    uint32_t shape[1] = { (uint32_t)m->n };
    encode_opts_t eo = { .residual = m->feedback ? s_residual(ns, m->peer, m->n) : NULL };
    char err[200];
    return frame_encode(ns->enc, *frame, cap, m->x, shape, 1, m->codec, &eo, err, sizeof err);
}

/* Sends the message of a MAIL_SEND: header, the tensor (encoded here), the aux frame. */
static void s_on_send(netside_t *ns, mail_t *m)
{
    const void *f[2];
    size_t l[2];
    int nf = 0;
    uint8_t *frame = NULL;
    uint64_t virt = 0;
    if (m->codec >= 0) {
        long len = s_encode(ns, m, &frame, &virt);
        if (len < 0) { free(frame); s_drop(ns, "tensor could not be encoded", ns->id); return; }
        f[nf] = frame;
        l[nf++] = (size_t)len;
    }
    if (m->aux) { f[nf] = m->aux; l[nf++] = m->aux_len; }
    wire_hdr_t h = m->hdr;
    h.run = ns->run;
    if (m->peer) {
        peer_t *to = peers_find(&ns->peers, m->peer);
        if (to && (h.type == WIRE_ACT || h.type == WIRE_GRAD)) s_traffic(ns, to);
        if (s_send(ns, m->peer, &h, f, l, nf, m->raw_bytes, virt) != 0)   /* not the peer's offence */
            s_count_drop(ns, "send failed (peer unknown or its queue full)", m->peer);
        else if (m->state_bytes) atomic_fetch_add(&ns->ctr.bytes_sent_state, WIRE_HDR_LEN + l[0] + (nf > 1 ? l[1] : 0));
    } else {
        uint64_t *ids = malloc(sizeof(uint64_t) * (size_t)(ns->peers.n + 1));
        int k = ids ? s_live_ids(ns, ids) : 0;
        for (int i = 0; i < k; i++) s_send(ns, ids[i], &h, f, l, nf, m->raw_bytes, virt);
        free(ids);
    }
    free(frame);
}

/* ---- state transfer ---- */

static void s_rx_free(state_rx_t *x)
{
    free(x->buf);
    free(x->have);
    memset(x, 0, sizeof *x);
}

static int s_rx_begin(state_rx_t *x, size_t total)
{
    s_rx_free(x);
    x->total = total;
    x->nchunks = (uint32_t)((total + STATE_CHUNK - 1) / STATE_CHUNK);
    x->buf = malloc(total ? total : 1);
    x->have = calloc(x->nchunks ? x->nchunks : 1, 1);
    if (!x->buf || !x->have) { s_rx_free(x); return -1; }
    return 0;
}

/* The values of a snapshot (params|m|v, total bytes at buf) can be trained from (optim_state_ok). */
static int s_state_values_ok(const uint8_t *buf, size_t total)
{
    size_t n = total / (3 * sizeof(float));
    const float *f = (const float *)(const void *)buf;   /* malloc'd: aligned */
    return optim_state_ok(f, f + n, f + 2 * n, n);
}

/* Checks a STATE chunk's preamble against an assembly and stores it.
 * Returns the chunk index, or -1 (dropped). */
static int s_state_chunk(netside_t *ns, state_rx_t *x, const transport_msg_t *m)
{
    rbuf_t r;
    rbuf_init(&r, m->frame[0], m->len[0]);
    uint64_t total = rbuf_get_u64(&r);
    uint32_t sum = rbuf_get_u32(&r);
    int64_t version = (int64_t)rbuf_get_u64(&r);
    uint32_t nchunks = rbuf_get_u32(&r);
    uint64_t idx = m->hdr.mb;
    if (rbuf_error(&r) || total != x->total || nchunks != x->nchunks || idx >= nchunks || version < 0 || version > STATE_VERSION_MAX) {
        s_drop(ns, "malformed STATE", m->sender);
        return -1;
    }
    size_t off = (size_t)idx * STATE_CHUNK, want = total - off < STATE_CHUNK ? total - off : STATE_CHUNK;
    if (m->len[1] != (ns->c.modelled ? 0 : want)) { s_drop(ns, "STATE chunk of the wrong size", m->sender); return -1; }
    double now = s_now(ns);
    if (x->got == 0) { x->checksum = sum; x->version = version; }
    else if (sum != x->checksum || version != x->version) {
        /* another snapshot: the one being assembled is finished first, unless it stalled */
        if (now - x->last_chunk < STATE_STALL_S) { s_discard(ns); return -1; }
        memset(x->have, 0, x->nchunks);
        x->got = 0;
        x->checksum = sum;
        x->version = version;
    }
    x->last_chunk = now;
    if (!x->have[idx]) {
        if (!ns->c.modelled) memcpy(x->buf + off, m->frame[1], want);
        x->have[idx] = 1;
        x->got++;
    }
    if (x->got == x->nchunks) {
        const char *bad = NULL;
        if (!ns->c.modelled && frame_checksum(x->buf, x->total, 0) != x->checksum) bad = "STATE checksum mismatch";
        else if (!ns->c.modelled && !s_state_values_ok(x->buf, x->total)) bad = "STATE with a non-finite value or a negative moment";
        if (bad) {
            s_drop(ns, bad, m->sender);
            memset(x->have, 0, x->nchunks);
            x->got = 0;
            return -1;
        }
        x->complete = 1;
    }
    return (int)idx;
}

/* A snapshot (params|m|v as bytes) into a blob for the compute side. */
static state_blob_t *s_blob(const netside_t *ns, int stage, const uint8_t *buf, size_t total, int64_t version, int backup)
{
    size_t np = total / (3 * sizeof(float));
    state_blob_t *b = state_blob_new(stage, ns->c.modelled ? 0 : np);
    if (!b) return NULL;
    b->nparams = np;
    b->version = version;
    b->backup = backup;
    if (!ns->c.modelled) memcpy(b->data, buf, total);
    return b;
}

/* Ends the compute side's fetch: the blob (NULL: nothing came) goes to it. */
static void s_fetch_end(netside_t *ns, state_blob_t *blob)
{
    mail_t *m = mail_new(MAIL_STATE);
    if (!m) { state_blob_destroy(&blob); return; }
    m->hdr.stage = (uint16_t)ns->fetch.stage;
    m->peer = ns->fetch.donor;   /* which fetch ended: the compute side may have moved on */
    m->state = blob;
    s_rx_free(&ns->fetch.rx);
    ns->fetch.active = 0;
    s_post(ns, m);
}

static void s_fetch_ask(netside_t *ns)
{
    wire_hdr_t h;
    s_hdr(ns, &h, WIRE_STATE_REQ);
    h.stage = (uint16_t)ns->fetch.stage;
    h.flags = ns->fetch.donor ? 0 : STATE_FLAG_BACKUP;
    if (ns->fetch.donor) {
        s_send(ns, ns->fetch.donor, &h, NULL, NULL, 0, 0, 0);
        ns->fetch.resend = s_now(ns) + FETCH_RESEND_S;
    } else {
        uint64_t *ids = malloc(sizeof(uint64_t) * (size_t)(ns->peers.n + 1));
        int k = ids ? s_live_ids(ns, ids) : 0;
        for (int i = 0; i < k; i++) s_send(ns, ids[i], &h, NULL, NULL, 0, 0, 0);
        free(ids);
        ns->fetch.resend = ns->fetch.deadline;  /* backups are asked for once */
    }
}

/* MAIL_FETCH: the compute side wants stage hdr.stage's state from peer (0: a backup). */
static void s_on_fetch(netside_t *ns, const mail_t *m)
{
    int stage = m->hdr.stage;
    if (ns->fetch.active) s_rx_free(&ns->fetch.rx);
    memset(&ns->fetch, 0, sizeof ns->fetch);
    ns->fetch.active = 1;
    ns->fetch.stage = stage;
    ns->fetch.donor = m->peer;
    ns->fetch.deadline = s_now(ns) + (double)m->hdr.mb * 1e-3;   /* hdr.mb: the wait in ms */
    if (!m->peer && stage >= 0 && stage < ns->nstages && ns->backups[stage].buf) {
        /* a backup of that stage is held here */
        backup_t *b = &ns->backups[stage];
        s_fetch_end(ns, s_blob(ns, stage, b->buf, b->total, b->version, 1));
        return;
    }
    size_t bytes = 3 * s_stage_params(ns, stage) * sizeof(float);
    ns->fetch.last_deadline = ns->fetch.deadline + 8.0 * (double)bytes / FETCH_MIN_BPS;
    if (s_rx_begin(&ns->fetch.rx, bytes) < 0) { s_fetch_end(ns, NULL); return; }
    ns->fetch.rx.donor = m->peer;
    s_fetch_ask(ns);
}

static void s_on_backup_push(netside_t *ns, const transport_msg_t *m)
{
    peer_t *p = peers_find(&ns->peers, m->sender);
    int s = m->hdr.stage;
    if (!p || p->info.stage != s || s >= ns->nstages || m->nframes < 2) {
        s_drop(ns, "unexpected backup", m->sender);
        return;
    }
    backup_t *b = &ns->backups[s];
    state_rx_t *x = &b->rx;
    size_t total = 3 * s_stage_params(ns, s) * sizeof(float);
    if ((!x->buf || x->total != total) && s_rx_begin(x, total) < 0) { s_drop(ns, "out of memory", m->sender); return; }
    if (s_state_chunk(ns, x, m) < 0 || !x->complete) return;
    /* keep the complete snapshot; the assembly buffer becomes the held copy */
    free(b->buf);
    b->buf = x->buf;
    b->total = x->total;
    b->checksum = x->checksum;
    b->version = x->version;
    x->buf = NULL;
    s_rx_free(x);
    char id[9];
    node_id_short(m->sender, id);
    metrics_event(ns->c.metrics, "backup", "\"held_stage\":%d,\"version\":%lld,\"from\":%s,\"bytes\":%zu",
                  s, (long long)b->version, id, b->total);
}

/* Sends a snapshot (total bytes at buf) in STATE chunks, to peer or as a reply to m. */
static void s_send_chunks(netside_t *ns, uint64_t peer, const transport_msg_t *m, int stage, uint32_t flags,
                          const uint8_t *buf, size_t total, int64_t version)
{
    uint32_t sum = ns->c.modelled ? 0 : frame_checksum(buf, total, 0);
    uint32_t nchunks = (uint32_t)((total + STATE_CHUNK - 1) / STATE_CHUNK);
    for (uint32_t k = 0; k < nchunks; k++) {
        size_t off = (size_t)k * STATE_CHUNK, len = total - off < STATE_CHUNK ? total - off : STATE_CHUNK;
        uint8_t pre[32];
        wbuf_t w;
        wbuf_init_fixed(&w, pre, sizeof pre);
        wbuf_put_u64(&w, total);
        wbuf_put_u32(&w, sum);
        wbuf_put_u64(&w, (uint64_t)version);
        wbuf_put_u32(&w, nchunks);
        wire_hdr_t h;
        s_hdr(ns, &h, WIRE_STATE);
        h.stage = (uint16_t)stage;
        h.mb = k;
        h.flags = flags;
        h.wversion = (uint32_t)version;
        const void *f[2] = { pre, ns->c.modelled ? NULL : buf + off };
        size_t l[2] = { w.len, ns->c.modelled ? 0 : len };
        uint64_t virt = ns->c.modelled ? len : 0;
        int r;
        if (peer) {
            r = s_send(ns, peer, &h, f, l, 2, 0, virt);
        } else if (m->link == RELAYED_LINK) {
            r = s_send(ns, m->sender, &h, f, l, 2, 0, virt);
        } else {
            r = s_port_send(ns, m->link >= 0 ? m->link : -1, m, &h, f, l, 2, 0, virt);
        }
        if (r == 0) {
            atomic_fetch_add(&ns->ctr.bytes_sent_state, WIRE_HDR_LEN + l[0] + l[1] + virt);
        }
    }
}

/* 1 when the sender of a STATE_REQ may have a state download now: a peer
 * in the table (a node introduces itself on every link it opens, before
 * its first request), at most one download of either kind per
 * STATE_REQ_EVERY_S.  Each answer queues a whole snapshot in STATE chunks
 * on the link.  0 (dropped, counted) otherwise. */
static int s_state_req_allowed(netside_t *ns, const transport_msg_t *m)
{
    peer_t *p = peers_find(&ns->peers, m->sender);
    if (!p || p->info.id == ns->id) { s_drop(ns, "STATE_REQ from an unknown peer", m->sender); return 0; }
    double now = s_now(ns);
    if (p->last_state_req > 0 && now - p->last_state_req < STATE_REQ_EVERY_S) { s_drop(ns, "STATE_REQ rate limit", m->sender); return 0; }
    p->last_state_req = now;
    return 1;
}

/* Serves a held backup to a replacement node of that stage. */
static void s_serve_backup(netside_t *ns, const transport_msg_t *m)
{
    int s = m->hdr.stage;
    if (s >= ns->nstages || !ns->backups[s].buf) return;  /* nothing held: silence (every live peer is asked) */
    if (!s_state_req_allowed(ns, m)) return;
    backup_t *b = &ns->backups[s];
    /* answer on the connection it used (it may be reachable only outward) */
    s_send_chunks(ns, 0, m, s, STATE_FLAG_BACKUP | STATE_FLAG_REPLY, b->buf, b->total, b->version);
    char id[9];
    node_id_short(m->sender, id);
    metrics_event(ns->c.metrics, "backup", "\"served_stage\":%d,\"version\":%lld,\"to\":%s", s, (long long)b->version, id);
}

/* How long a download may be silent before its donor is asked again:
 * FETCH_RESEND_S before its first chunk (the request may have been lost),
 * half of FETCH_QUIET_S after (each ask queues the whole snapshot again at
 * the donor, and on a slow link a 1 MiB chunk takes seconds). */
static double s_fetch_silence(const fetch_t *f)
{
    return f->rx.got == 0 ? FETCH_RESEND_S : FETCH_QUIET_S / 2;
}

/* A new chunk of the download came: it ends FETCH_QUIET_S after the last
 * one at the earliest (a stage's state is tens of MB or more, which no
 * fixed wait suits on every link), at last_deadline at the latest. */
static void s_fetch_progress(netside_t *ns, fetch_t *f)
{
    double d = s_now(ns) + FETCH_QUIET_S;
    if (d > f->last_deadline) d = f->last_deadline;
    if (d > f->deadline) f->deadline = d;
}

static void s_on_state(netside_t *ns, const transport_msg_t *m)
{
    if (m->nframes < 2) { s_drop(ns, "STATE without body", m->sender); return; }
    if ((m->hdr.flags & STATE_FLAG_BACKUP) && !(m->hdr.flags & STATE_FLAG_REPLY)) { s_on_backup_push(ns, m); return; }
    fetch_t *f = &ns->fetch;
    if (!f->active || m->hdr.stage != f->stage) { s_discard(ns); return; }  /* a late chunk of a download already done */
    state_rx_t *x = &f->rx;
    if (x->donor ? m->sender != x->donor : !peers_find(&ns->peers, m->sender)) { s_discard(ns); return; }
    uint32_t got = x->got;
    if (s_state_chunk(ns, x, m) < 0) return;
    /* a backup fetch takes the first known holder whose chunk is taken (a malformed reply of anyone took it over) */
    if (x->donor == 0) x->donor = m->sender;
    if (x->got > got) s_fetch_progress(ns, f);
    if (!x->complete) return;
    s_fetch_end(ns, s_blob(ns, f->stage, x->buf, x->total, x->version, f->donor == 0));
}

/* MAIL_STATE_OUT: sends the compute side's snapshot to a peer. */
static void s_on_state_out(netside_t *ns, mail_t *m)
{
    state_blob_t *b = m->state;
    size_t total = 3 * b->nparams * sizeof(float);
    s_send_chunks(ns, m->peer, NULL, b->stage, m->hdr.flags, (const uint8_t *)b->data, total, b->version);
    char s[9];
    node_id_short(m->peer, s);
    metrics_event(ns->c.metrics, m->hdr.flags & STATE_FLAG_BACKUP ? "backup" : "state", "\"to\":%s,\"version\":%lld,\"bytes\":%zu",
                  s, (long long)b->version, total);
}

static void s_on_state_req(netside_t *ns, const transport_msg_t *m)
{
    if (m->hdr.flags & STATE_FLAG_BACKUP) { s_serve_backup(ns, m); return; }
    if (ns->me.stage < 0 || m->hdr.stage != ns->me.stage) { s_drop(ns, "STATE_REQ this node cannot serve", m->sender); return; }
    if (!s_state_req_allowed(ns, m)) return;
    mail_t *mail = mail_new(MAIL_STATE_REQ);
    if (!mail) return;
    mail->hdr = m->hdr;
    mail->peer = m->sender;
    s_post(ns, mail);
}

/* ---- other messages ---- */

static void s_stop_compute(netside_t *ns)
{
    s_post(ns, mail_new(MAIL_STOP));
}

/* The rest of a PEERS after its k records (r at them) is whole: k
 * announcements, the sender's progress and end, the progress records.
 * Checked before any of it is taken (a PEERS cut short was counted as
 * malformed after its table had been taken). */
static int s_peers_rest_ok(const rbuf_t *at, int k)
{
    rbuf_t r = *at;
    size_t len;
    if (rbuf_get_u32(&r) != (uint32_t)k) return 0;
    for (int i = 0; i < k && !rbuf_error(&r); i++) rbuf_get_bytes(&r, ANNOUNCE_LEN, &len);
    rbuf_get_u64(&r);   /* completed */
    rbuf_get_f32(&r);   /* loss */
    rbuf_get_u8(&r);    /* done */
    uint32_t np = rbuf_get_u32(&r);
    if (rbuf_error(&r) || np > PROGRESS_MAX) return 0;
    for (uint32_t i = 0; i < np; i++) { rbuf_get_u64(&r); rbuf_get_u64(&r); }
    if (rbuf_remaining(&r) >= 8) rbuf_get_u64(&r);   /* the run's progress (older senders end before it) */
    return !rbuf_error(&r);
}

static void s_on_peers(netside_t *ns, const transport_msg_t *m)
{
    if (m->nframes < 1) { s_drop(ns, "PEERS without body", m->sender); return; }
    rbuf_t r;
    rbuf_init(&r, m->frame[0], m->len[0]);
    int max;
    peer_info_t *recs = s_recs_for(m->frame[0], m->len[0], &max);
    int k = 0;
    char err[200];
    int bad = !recs || peers_decode(&r, recs, max, &k, err, sizeof err) < 0 || !s_peers_rest_ok(&r, k) ? -1
              : s_take_table(ns, &r, recs, k, m->sender, m->sender_pub, "gossip");
    free(recs);
    if (bad < 0) { s_drop(ns, bad == -2 ? "PEERS with a forged announcement" : "malformed PEERS", m->sender); return; }
    uint64_t completed = rbuf_get_u64(&r);
    float loss = rbuf_get_f32(&r);
    int done = rbuf_get_u8(&r);
    uint32_t np = rbuf_get_u32(&r);
    if (rbuf_error(&r) || np > PROGRESS_MAX) { s_drop(ns, "malformed PEERS", m->sender); return; }
    /* the run's progress and its end are the last stage's to tell: its own, and what it knows of its stage's other peers */
    peer_t *p = peers_find(&ns->peers, m->sender);
    if (p && done) p->done_seen = 1;
    int last = p && p->info.stage == ns->nstages - 1;
    for (uint32_t i = 0; i < np; i++) {
        uint64_t id = rbuf_get_u64(&r), c = rbuf_get_u64(&r);
        peer_t *q = last && !rbuf_error(&r) && id != ns->id ? peers_find(&ns->peers, id) : NULL;
        if (q && q->info.stage == ns->nstages - 1 && c > q->completed) { q->completed = c; ns->view_dirty = 1; peers_touch(&ns->peers, q); }
    }
    int said = rbuf_remaining(&r) >= 8;   /* older senders end before it */
    uint64_t progress = said ? rbuf_get_u64(&r) : 0;
    if (rbuf_error(&r)) { s_drop(ns, "malformed PEERS", m->sender); return; }
    if (!last) return;
    if (completed > p->completed) { p->completed = completed; ns->view_dirty = 1; }
    if (progress != p->progress || said != p->progress_said) {
        p->progress = progress;
        p->progress_said = said;
        ns->view_dirty = 1;
    }
    if (isfinite(loss)) p->last_loss = loss;
    peers_touch(&ns->peers, p);
    if (done) s_stop_compute(ns);
}

/* A PONG: the round trip since its PING feeds the peer's RTT estimate.
 * Not a round trip that spans a silence: the PING went out before the peer
 * was heard from again after a silence (silent_until), or, once there is
 * an estimate, the answer took longer than the silence that makes a peer
 * slow.  Such a round trip measures a pause, and the estimate would take a
 * minute to forget it while the router priced a link that is fast again at
 * the pause (a node back from a 4 s SIGSTOP was sent no work for the rest
 * of a run; so was one paused before its first answer, whose first round
 * trip was the pause: 3.7 s, 12% less per PONG after).  The health checks
 * cover pauses.  The first round trip that spans no silence counts however
 * long it is, so that a link slower than that silence still gets an
 * estimate (which then widens the silence). */
static void s_on_pong(netside_t *ns, const transport_msg_t *m)
{
    double now = s_now(ns), sent = (double)m->hdr.mb * 1e-6, rtt = (now - sent) * 1000.0;
    peer_t *p = peers_find(&ns->peers, m->sender);
    if (!p) return;   /* a late answer from a peer forgotten since */
    if (!(rtt >= 0 && rtt < 600000)) { s_drop(ns, "PONG with an impossible round trip", m->sender); return; }
    if (sent < p->silent_until || (p->rtt_ms > 0 && rtt * 1e-3 > s_slow_after(p, now, ns->live))) return;
    if (p->rtt_ms == 0) { p->rtt_ms = rtt; p->rtt_dev_ms = rtt / 2; }
    else {
        p->rtt_dev_ms = 0.75 * p->rtt_dev_ms + 0.25 * fabs(rtt - p->rtt_ms);
        p->rtt_ms = 0.875 * p->rtt_ms + 0.125 * rtt;
    }
    if (p->rtt_min_ms == 0 || rtt < p->rtt_min_ms) p->rtt_min_ms = rtt;
    ns->view_dirty = 1;
    peers_touch(&ns->peers, p);
}

/* After a full table (s_put_table, limit 0): how this node reaches each of
 * its records, in the same order: a u32 count, then a u8 each
 * (STATUS_LINK_*; added later: older readers stop before it). */
static void s_put_links(netside_t *ns, wbuf_t *w)
{
    uint32_t k = 1;
    for (int i = 0; i < ns->peers.n; i++)
        if (ns->peers.p[i].info.id != ns->id && ns->peers.p[i].health != PEER_GONE) k++;
    wbuf_put_u32(w, k);
    wbuf_put_u8(w, STATUS_LINK_SELF);
    for (int i = 0; i < ns->peers.n; i++) {
        const peer_t *p = &ns->peers.p[i];
        if (p->info.id == ns->id || p->health == PEER_GONE) continue;
        wbuf_put_u8(w, p->link >= 0 ? (p->adopted ? STATUS_LINK_REVERSE : STATUS_LINK_DIRECT)
                       : p->via ? STATUS_LINK_RELAY : STATUS_LINK_NONE);
    }
}

static void s_on_status_req(netside_t *ns, const transport_msg_t *m)
{
    if (!bucket_take(&ns->status_bucket, s_now(ns), STATUS_PER_S, STATUS_PER_S, 1)) {
        s_drop(ns, "STATUS_REQ over the rate limit", m->sender);
        return;
    }
    if (ns->c.o->closed && s_unadmitted(ns, m->sender)) {
        /* `brigade status --keys DIR --ticket T` shows its ticket with the request */
        char why[200];
        if (m->nframes < 1 || s_check_ticket(ns, m->frame[0], m->len[0], m->sender_pub, NULL, why, sizeof why) < 0) {
            s_drop(ns, "STATUS_REQ without a valid ticket (closed swarm)", m->sender);
            return;
        }
    }
    wbuf_t w;
    wbuf_init(&w, TABLE_MAX_BYTES);
    wbuf_put_u32(&w, (uint32_t)ns->nstages);
    wbuf_put_u64(&w, (uint64_t)ns->c.o->steps * (uint64_t)ns->c.o->micro);
    uint64_t completed;
    double loss;
    netside_progress(ns, &completed, &loss);
    wbuf_put_u64(&w, completed);
    wbuf_put_f32(&w, (float)loss);
    wbuf_put_str(&w, ns->c.o->cfg.name);
    s_put_table(ns, &w, 0);
    s_put_links(ns, &w);
    if (!wbuf_error(&w)) {
        wire_hdr_t h;
        s_hdr(ns, &h, WIRE_STATUS);
        const void *f[1] = { w.data };
        size_t l[1] = { w.len };
        s_reply(ns, m, &h, f, l, 1);
    }
    wbuf_free(&w);
}

static void s_on_bye(netside_t *ns, const transport_msg_t *m)
{
    peer_t *p = peers_find(&ns->peers, m->sender);
    if (p) p->done_seen = 1;
    if (!p || p->health == PEER_GONE) return;
    s_set_health(ns, p, PEER_GONE);
    ns->view_dirty = 1;
    char s[9];
    node_id_short(m->sender, s);
    metrics_event(ns->c.metrics, "peer", "\"peer\":%s,\"what\":\"gone\",\"why\":\"bye\",\"peer_stage\":%d", s, p->info.stage);
}

static void s_on_ping(netside_t *ns, const transport_msg_t *m)
{
    wire_hdr_t h;
    s_hdr(ns, &h, WIRE_PONG);
    h.mb = m->hdr.mb;
    if (m->link >= 0 || m->link == RELAYED_LINK || s_link(ns, m->sender) >= 0) s_send(ns, m->sender, &h, NULL, NULL, 0, 0, 0);
}

/* The run completed: believed from a last-stage node's signed proof, relayed by anyone. */
static void s_on_done(netside_t *ns, const transport_msg_t *m)
{
    uint64_t signer = 0;
    char err[160];
    if (m->nframes < 1 || done_verify(m->frame[0], m->len[0], ns->run, &signer, err, sizeof err) < 0) {
        s_drop(ns, "DONE without a valid completion proof", m->sender);
        return;
    }
    peer_t *p = peers_find(&ns->peers, signer);
    if (!p || p->info.stage != ns->nstages - 1) { s_drop(ns, "DONE signed by a node that is not of the last stage", m->sender); return; }
    if (!ns->have_proof) {
        memcpy(ns->done_proof, m->frame[0], DONE_LEN);
        ns->have_proof = 1;
    }
    peer_t *from = peers_find(&ns->peers, m->sender);
    if (from) from->done_seen = 1;
    s_stop_compute(ns);
}

/* ---- relays: two outward-only nodes, through a reachable one ---- */

static void s_dispatch(netside_t *ns, const transport_msg_t *m);

/* A relay request we do not carry out: counted, logged, no strike (the
 * sender may not know yet). */
static void s_refuse_relay(netside_t *ns, const char *why, uint64_t from)
{
    atomic_fetch_add(&ns->ctr.relay_refused, 1);
    s_count_drop(ns, why, from);
}

/* The relay both ends of an outward-only pair pick: the live relaying peer
 * with the lowest id (each end computes the same from its table). */
static peer_t *s_pick_relay(netside_t *ns)
{
    peer_t *best = NULL;
    double now = s_now(ns);
    for (int i = 0; i < ns->peers.n; i++) {
        peer_t *p = &ns->peers.p[i];
        if (p->info.id == ns->id || !p->relays || p->outward || p->health == PEER_GONE || p->banned_until > now) continue;
        if (!best || p->info.id < best->info.id) best = p;
    }
    return best;
}

/* The crypto_box key of us and p (0 made, 1 made now, -1 a bad key). */
static int s_box(netside_t *ns, peer_t *p)
{
    if (p->has_box) return 0;
    if (relay_key(p->box, p->info.pubkey, ns->c.keys->sec) < 0) return -1;
    p->has_box = 1;
    uint64_t wall = ns->c.clock.wall_ms(ns->c.clock.arg) * 1000;   /* counters grow across restarts too */
    if (p->seq_out < wall) p->seq_out = wall;
    return 1;
}

static int s_relay_send(netside_t *ns, peer_t *p, const wire_hdr_t *h, const void *const *frames,
                        const size_t *lens, int nf, uint64_t raw)
{
    peer_t *r = peers_find(&ns->peers, p->via);
    int link = r && r->health != PEER_GONE ? s_link(ns, r->info.id) : -1;
    if (link < 0) return -1;
    if (s_box(ns, p) < 0) return -1;
    double now = s_now(ns);
    if (h->type != WIRE_JOIN && now >= p->relay_intro_next) {
        /* our introduction (ticket) goes first, again now and then: an envelope may be refused on the way */
        p->relay_intro_next = now + (p->seq_in ? RELAY_INTRO_S : 1.0);
        wbuf_t w;
        wbuf_init(&w, 1024);
        s_put_join(ns, &w, ns->me.stage, 0);
        wire_hdr_t ih;
        s_hdr(ns, &ih, WIRE_JOIN);
        ih.flags = JOIN_FLAG_INTRO | JOIN_FLAG_OUTWARD;
        const void *f[1] = { w.data };
        size_t l[1] = { w.len };
        if (!wbuf_error(&w)) s_relay_send(ns, p, &ih, f, l, 1, 0);
        wbuf_free(&w);
    }
    wire_hdr_t hh = *h;
    hh.magic = WIRE_MAGIC;
    hh.version = WIRE_VERSION;
    hh.sender = ns->id;
    size_t cap = relay_sealed_len(lens, nf);
    uint8_t *env = malloc(cap);
    if (!env) return -1;
    long n = relay_seal(env, cap, p->box, ++p->seq_out, &hh, frames, lens, nf);
    int rc = -1;
    if (n > 0) {
        wire_hdr_t oh;
        s_hdr(ns, &oh, WIRE_RELAY);
        oh.mb = p->info.id;
        const void *f[1] = { env };
        size_t l[1] = { (size_t)n };
        rc = s_port_send(ns, link, NULL, &oh, f, l, 1, raw ? raw + WIRE_HDR_LEN + (uint64_t)n - (cap - RELAY_OVERHEAD) : 0, 0);
    }
    free(env);
    return rc;
}

/* The relay's bucket: 0 when `bytes` more fit under --relay-mbit now. */
static int s_relay_budget(netside_t *ns, size_t bytes)
{
    double rate = (ns->c.relay_mbit > 0 ? ns->c.relay_mbit : RELAY_MBIT_DEFAULT) * 1e6 / 8;
    double cap = rate * RELAY_BURST_S;
    if (cap < 2.5 * (1 << 20)) cap = 2.5 * (1 << 20);
    return bucket_take(&ns->relay_bucket, s_now(ns), rate, cap, (double)bytes) ? 0 : -1;
}

/* At the relay: passes a sealed envelope on to its receiver (which opened
 * a link to us), as it is (test-only: altered with --emu-relay-tamper). */
static void s_relay_forward(netside_t *ns, const transport_msg_t *m)
{
    if (!ns->relays || ns->outward) { s_refuse_relay(ns, "relay request to a node that does not relay", m->sender); return; }
    peer_t *to = peers_find(&ns->peers, m->hdr.mb);
    if (!to || to->info.id == ns->id || to->info.id == m->sender) { s_drop(ns, "relay request for an unknown peer", m->sender); return; }
    if (to->link < 0) {
        s_link(ns, to->info.id);   /* asks it for a link (DIAL) */
        s_refuse_relay(ns, "relay: no link to the receiver yet", m->sender);
        return;
    }
    size_t bytes = WIRE_HDR_LEN + m->len[0];
    if (s_relay_budget(ns, bytes) < 0) { s_refuse_relay(ns, "relay over its cap (--relay-mbit)", m->sender); return; }
    uint8_t *alt = NULL;
    const void *f[1] = { m->frame[0] };
    size_t l[1] = { m->len[0] };
    ns->rng = ns->rng * 6364136223846793005ULL + 1442695040888963407ULL;
    if (ns->c.emu_relay_tamper > 0 && (double)(ns->rng >> 11) * (1.0 / 9007199254740992.0) < ns->c.emu_relay_tamper
        && m->len[0] > 0 && (alt = malloc(m->len[0]))) {
        memcpy(alt, m->frame[0], m->len[0]);
        alt[m->len[0] / 2] ^= 0x20;
        f[0] = alt;
    }
    wire_hdr_t h;
    s_hdr(ns, &h, WIRE_RELAY);
    h.mb = m->sender;
    h.flags = RELAY_FLAG_FWD;
    if (s_port_send(ns, to->link, NULL, &h, f, l, 1, 0, 0) == 0) {
        atomic_fetch_add(&ns->ctr.relay_bytes, bytes);
        atomic_fetch_add(&ns->ctr.relay_msgs, 1);
        peer_t *from = peers_find(&ns->peers, m->sender);
        if (from && !from->relay_noted) {
            from->relay_noted = 1;
            char a[9], b[9];
            node_id_short(m->sender, a);
            node_id_short(to->info.id, b);
            metrics_event(ns->c.metrics, "relay", "\"from\":%s,\"to\":%s", a, b);
        }
    } else {
        s_refuse_relay(ns, "relay: the receiver's queue is full", m->sender);
    }
    free(alt);
}

/* At the receiver: opens an envelope its sealer sent through relay
 * m->sender and handles what was inside as the sealer's own message.  An
 * envelope that does not open, a replayed one or one of a sealer unknown
 * here is counted, with no strike: the receiver cannot tell a relay that
 * altered it from a sealer that sent garbage (whose envelopes got honest
 * relays banned); one that opens and is wrong inside is its sealer's
 * offence. */
static void s_relay_receive(netside_t *ns, const transport_msg_t *m)
{
    peer_t *src = peers_find(&ns->peers, m->hdr.mb);
    if (!src || src->info.id == ns->id) { s_count_drop(ns, "relayed message from an unknown peer", m->sender); return; }
    if (s_box(ns, src) < 0) { s_count_drop(ns, "relayed message from a peer with a bad key", m->sender); return; }
    uint8_t *plain = malloc(m->len[0] ? m->len[0] : 1);
    if (!plain) { s_discard(ns); return; }
    relay_msg_t r;
    char err[160];
    const char *bad = NULL, *unopened = NULL;
    if (relay_open(&r, plain, m->frame[0], m->len[0], src->box, err, sizeof err) < 0) unopened = err;
    else if (r.seq <= src->seq_in) unopened = "relayed message replayed (an old counter)";
    else if (r.hdr.sender != src->info.id) bad = "relayed message whose header names another sender";
    else if (r.hdr.type == WIRE_RELAY || r.hdr.type == WIRE_STATUS_REQ || r.hdr.type == WIRE_DIAL
             || (r.hdr.type == WIRE_JOIN && !(r.hdr.flags & JOIN_FLAG_INTRO)))
        bad = "relayed message of a type that is not relayed";
    if (unopened) s_count_drop(ns, unopened, m->sender);
    else if (bad) s_drop(ns, bad, src->info.id);
    if (unopened || bad) { free(plain); return; }
    src->seq_in = r.seq;
    transport_msg_t in;
    memset(&in, 0, sizeof in);
    in.hdr = r.hdr;
    memcpy(in.sender_pub, src->info.pubkey, 32);
    in.sender = src->info.id;
    in.link = RELAYED_LINK;
    in.nframes = r.nframes;
    for (int i = 0; i < r.nframes; i++) { in.frame[i] = r.frame[i]; in.len[i] = r.len[i]; }
    s_dispatch(ns, &in);
    free(plain);
}

static void s_on_relay(netside_t *ns, const transport_msg_t *m)
{
    if (m->link == RELAYED_LINK || m->nframes != 1) { s_drop(ns, "RELAY without one envelope", m->sender); return; }
    if (m->hdr.flags & RELAY_FLAG_FWD) s_relay_receive(ns, m);
    else s_relay_forward(ns, m);
}

/* We need to send to outward-only peer p and it has opened no link to us:
 * ask it to, through a few peers that may have its link (rate-limited). */
static void s_dial(netside_t *ns, peer_t *p)
{
    double now = s_now(ns);
    if (ns->outward || p->health == PEER_GONE || (p->last_dial > 0 && now - p->last_dial < DIAL_EVERY_S)) return;
    p->last_dial = now;
    uint64_t target = p->info.id;
    int n = ns->peers.n, sent = 0;
    for (int k = 0; k < n && sent < DIAL_VIA; k++) {
        peer_t *q = &ns->peers.p[(ns->dial_at + k) % n];
        if (q->info.id == ns->id || q->info.id == target || q->outward || q->health == PEER_GONE) continue;
        wire_hdr_t h;
        s_hdr(ns, &h, WIRE_DIAL);
        h.mb = target;
        if (s_send(ns, q->info.id, &h, NULL, NULL, 0, 0, 0) == 0) sent++;
    }
    if (n) ns->dial_at = (ns->dial_at + 1) % n;
}

/* DIAL: someone wants a link from an outward-only peer.  In the middle:
 * passed on to it when it has a link to us.  At the peer itself: it opens a
 * link to the one who asked (a peer it knows, reachable). */
static void s_on_dial(netside_t *ns, const transport_msg_t *m)
{
    peer_t *p = peers_find(&ns->peers, m->hdr.mb);
    if (!(m->hdr.flags & DIAL_FLAG_FWD)) {
        if (!p || !p->outward || p->link < 0 || p->info.id == m->sender) { s_discard(ns); return; }
        wire_hdr_t h;
        s_hdr(ns, &h, WIRE_DIAL);
        h.flags = DIAL_FLAG_FWD;
        h.mb = m->sender;
        s_send(ns, p->info.id, &h, NULL, NULL, 0, 0, 0);
        return;
    }
    if (!ns->outward || !p || p->outward || p->info.id == ns->id || p->health == PEER_GONE) { s_discard(ns); return; }
    if (p->link < 0) s_link(ns, p->info.id);   /* connects, introduces us: it sends back over this link */
}

/* An outward-only node keeps a link open to every reachable peer that may
 * have to send to it (its neighbouring stages and its own), and a reachable
 * node asks its outward-only neighbours for one. */
static void s_keep_links(netside_t *ns)
{
    if (ns->me.stage < 0) return;
    /* a reachable node among reachable peers, no record reached through a relay: nothing to keep
       (the scan below would change nothing; it was most of a large swarm's periodic work) */
    if (!ns->outward && !ns->nout && !ns->relayed) return;
    peer_t *relay = ns->outward ? s_pick_relay(ns) : NULL;
    int relayed = 0;
    for (int i = 0; i < ns->peers.n; i++) {
        peer_t *p = &ns->peers.p[i];
        int near = p->info.stage >= ns->me.stage - 1 && p->info.stage <= ns->me.stage + 1;
        uint64_t via = ns->outward && p->outward && near && relay ? relay->info.id : 0;
        if (p->via != via) { p->via = via; ns->view_dirty = 1; peers_touch(&ns->peers, p); }
        relayed |= via != 0;
        if (p->info.id == ns->id || p->health == PEER_GONE || p->link >= 0 || p->banned_until > s_now(ns) || !near) continue;
        if (ns->outward && !p->outward) s_link(ns, p->info.id);
        else if (!ns->outward && p->outward) s_dial(ns, p);
    }
    ns->relayed = relayed;
    if (relayed && relay->link < 0) s_link(ns, relay->info.id);   /* the relay needs our link to reach us */
}

/* A joiner's messages before its WELCOME: only the bootstrap's answer
 * counts (its key is the one in --join: the transport authenticated the
 * sender), and only while the join is under way. */
static void s_on_msg_joining(netside_t *ns, const transport_msg_t *m)
{
    if (m->hdr.type == WIRE_BYE || m->hdr.type == WIRE_WELCOME) {
        if (ns->join == JOIN_FAILED) { s_discard(ns); return; }   /* late: the outcome is told already */
        if (m->sender != ns->join_id) { s_drop(ns, "WELCOME or BYE from a node the join did not go through", m->sender); return; }
    }
    if (m->hdr.type == WIRE_BYE && m->nframes >= 1) s_on_refused(ns, m);
    else if (m->hdr.type == WIRE_WELCOME) s_on_welcome(ns, m);
    else if (m->hdr.type == WIRE_PING && (m->hdr.flags & PING_FLAG_PROBE) && m->link < 0) {
        /* the bootstrap checks that our address reaches us: answer over that connection */
        wire_hdr_t h;
        wire_hdr_init(&h, WIRE_PONG);
        h.flags = PING_FLAG_PROBE;
        h.mb = m->hdr.mb;
        s_reply(ns, m, &h, NULL, NULL, 0);
    }
}

void netside_on_msg(netside_t *ns, const transport_msg_t *m, uint64_t virt_bytes)
{
    uint64_t b = WIRE_HDR_LEN + virt_bytes;
    for (int i = 0; i < m->nframes; i++) b += m->len[i];
    atomic_fetch_add(&ns->ctr.bytes_recv, b);
    if (ns->join == JOIN_WAITING || ns->join == JOIN_FAILED) { s_on_msg_joining(ns, m); return; }
    s_dispatch(ns, m);
}

void netside_on_drop(netside_t *ns, const char *why, const uint8_t *pubkey)
{
    uint64_t from = pubkey ? node_id_from_pubkey(pubkey) : 0;
    if (pubkey && s_banned(ns, from)) { s_discard(ns); return; }   /* as in s_dispatch: no strike */
    s_drop(ns, why, from);
}

/* A message from an authenticated sender (directly, or opened from a relay's envelope). */
static void s_dispatch(netside_t *ns, const transport_msg_t *m)
{
    int type = m->hdr.type;
    if (type == WIRE_PONG && (m->hdr.flags & PING_FLAG_PROBE)) { s_on_probe_pong(ns, m); return; }
    if (s_banned(ns, m->sender)) { s_discard(ns); return; }  /* not even counted as a strike */
    if (type == WIRE_STATUS_REQ) { s_on_status_req(ns, m); return; }   /* any run: `brigade status` knows none */
    if (type == WIRE_JOIN) {
        if (m->hdr.run != 0 && m->hdr.run != ns->run) { s_drop(ns, "JOIN for another run", m->sender); return; }
        s_on_join(ns, m);
        return;
    }
    if (m->hdr.run != ns->run) { s_drop(ns, "message of another run", m->sender); return; }
    const char *unadmitted = ns->c.o->closed ? s_unadmitted(ns, m->sender) : NULL;
    if (unadmitted) { s_drop(ns, unadmitted, m->sender); return; }
    s_heard(ns, m->sender);
    s_learn_plan(ns, m->hdr.flags);
    s_adopt(ns, peers_find(&ns->peers, m->sender), m);
    switch (type) {
    case WIRE_PEERS: s_on_peers(ns, m); break;
    case WIRE_PING: s_on_ping(ns, m); break;
    case WIRE_PONG: s_on_pong(ns, m); break;
    case WIRE_ACT: case WIRE_GRAD: case WIRE_AVG: s_on_tensor(ns, m); break;
    case WIRE_STATE_REQ: s_on_state_req(ns, m); break;
    case WIRE_STATE: s_on_state(ns, m); break;
    case WIRE_BYE: s_on_bye(ns, m); break;
    case WIRE_DONE: s_on_done(ns, m); break;
    case WIRE_DIAL: s_on_dial(ns, m); break;
    case WIRE_RELAY: s_on_relay(ns, m); break;
    case WIRE_WELCOME:
        /* the answer to a JOIN sent again before the first answer came: nothing wrong with its sender */
        if (m->sender == ns->join_id) { s_discard(ns); break; }
        s_drop(ns, "unexpected message type", m->sender);
        break;
    default:
        s_drop(ns, "unexpected message type", m->sender);
    }
}

/* ---- mail from the compute side ---- */

static void s_broadcast(netside_t *ns, int type);
static int s_unaware(netside_t *ns, int tell);

/* The compute side says what changed about this node. */
static void s_on_self(netside_t *ns, const self_info_t *s)
{
    int moved = s->stage != ns->me.stage;
    ns->me = *s;
    /* the compute side's layout is what this node's tensors and state are in: its word over a peer's */
    if (s->plan >= 0 && s->plan != ns->plan) { ns->plan = s->plan; ns->view_dirty = 1; }
    peer_t *self = peers_find(&ns->peers, ns->id);
    if (self) {
        if (self->info.stage != s->stage || self->info.rate != s->rate) ns->view_dirty = 1;
        self->info.stage = (int16_t)s->stage;
        self->info.rate = s->rate;
        self->info.version = (uint32_t)s->version;
        self->last_loss = s->loss;
    }
    if (moved) s_feedback_reset(ns);
}

/* A last-stage node that completed the run signs the proof of it. */
static void s_sign_done(netside_t *ns)
{
    char err[160];
    if (ns->have_proof || ns->me.stage != ns->nstages - 1 || ns->me.done != 1 || ns->me.status != 0) return;
    if (done_sign(ns->done_proof, ns->run, ns->me.completed, ns->c.keys, err, sizeof err) == 0) ns->have_proof = 1;
}

/* The compute side ended: the last word to the swarm. */
static void s_on_leave(netside_t *ns, const self_info_t *s)
{
    self_info_t t = *s;
    t.plan = ns->me.plan;   /* the leaving side's last word on it (the driver's LEAVE does not say) */
    s_on_self(ns, &t);
    ns->left = 1;
    /* only a run that completed ends the swarm; an interrupted or failed node just leaves.
     * Whoever knows it completed tells everyone it knows, with the last stage's proof */
    s_sign_done(ns);
    if (ns->have_proof) s_broadcast(ns, WIRE_DONE);
    s_broadcast(ns, WIRE_PEERS);
    ns->said_done = 1;
    if (ns->have_proof) {
        ns->linger_until = s_now(ns) + LINGER_S;
        ns->next_linger = s_now(ns) + LINGER_EVERY_S;
    }
}

void netside_on_mail(netside_t *ns, mail_t *m)
{
    switch (m->kind) {
    case MAIL_SEND: s_on_send(ns, m); break;
    case MAIL_SELF: s_on_self(ns, &m->self); break;
    case MAIL_FETCH: s_on_fetch(ns, m); break;
    case MAIL_STATE_OUT: s_on_state_out(ns, m); break;
    case MAIL_LEAVE: s_on_leave(ns, &m->self); break;
    default: break;
    }
    mail_free(m);
}

/* ---- periodic work ---- */

static void s_broadcast(netside_t *ns, int type)
{
    uint64_t *ids = malloc(sizeof(uint64_t) * (size_t)(ns->peers.n + 1));
    int k = ids ? s_live_ids(ns, ids) : 0;
    for (int i = 0; i < k; i++) {
        if (type == WIRE_PEERS) { s_send_table(ns, ids[i], GOSSIP_RECORDS); continue; }
        wire_hdr_t h;
        s_hdr(ns, &h, type);
        h.mb = (uint64_t)(s_now(ns) * 1e6);
        /* DONE carries the proof that the last stage completed the run */
        const void *f[1] = { ns->done_proof };
        size_t l[1] = { DONE_LEN };
        int nf = type == WIRE_DONE && ns->have_proof ? 1 : 0;
        s_send(ns, ids[i], &h, f, l, nf, 0, 0);
    }
    free(ids);
}

/* Pings a few peers taken for gone: after a partition heals, either side's
 * PING brings the other back (a message from a gone peer revives it).  A
 * peer gone for GONE_FORGET_S is pinged no more, its link is closed and
 * the residual of our gradient stream to it is freed. */
static void s_probe_gone(netside_t *ns)
{
    double now = s_now(ns);
    int sent = 0, gone = ns->peers.n - ns->nlive - (ns->peers.selfix >= 0);
    for (int i = 0; gone > 0 && i < ns->peers.n; i++) {
        /* a link per peer ever seen was a socket and a file descriptor each, reconnecting to a dead address */
        peer_t *p = &ns->peers.p[i];
        if (p->health != PEER_GONE || p->link < 0 || p->info.id == ns->id || now - p->last_heard <= GONE_FORGET_S) continue;
        s_close_link(ns, p);
        peers_touch(&ns->peers, p);
    }
    for (int i = 0; i < ns->nfb; i++) {   /* and the residuals of gradient streams to them */
        peer_t *p = peers_find(&ns->peers, ns->fb[i].peer);
        if (p && (p->health != PEER_GONE || now - p->last_heard <= GONE_FORGET_S)) continue;
        free(ns->fb[i].residual);
        ns->fb[i] = ns->fb[--ns->nfb];   /* the last one takes its place, and is looked at next */
        i--;
    }
    for (int k = 0; gone > 0 && k < ns->peers.n && sent < GONE_PROBES; k++) {
        peer_t *p = &ns->peers.p[(ns->probe_at + k) % ns->peers.n];
        if (p->info.id == ns->id || p->health != PEER_GONE || p->banned_until > now || now - p->last_heard > GONE_FORGET_S)
            continue;
        wire_hdr_t h;
        s_hdr(ns, &h, WIRE_PING);
        h.mb = (uint64_t)(now * 1e6);
        s_send(ns, p->info.id, &h, NULL, NULL, 0, 0, 0);
        sent++;
    }
    if (ns->peers.n) ns->probe_at = (ns->probe_at + GONE_PROBES) % ns->peers.n;
}

static void s_ping(netside_t *ns, peer_t *p, double now)
{
    wire_hdr_t h;
    s_hdr(ns, &h, WIRE_PING);
    h.mb = (uint64_t)(now * 1e6);
    p->last_ping = now;
    if (s_send(ns, p->info.id, &h, NULL, NULL, 0, 0, 0) == 0 && p->unanswered == 0) p->unanswered = now;
}

static int s_partner(const peer_t *p, double now)
{
    return p->last_traffic > 0 && now - p->last_traffic < PARTNER_S;
}

/* Heartbeats, bounded whatever the swarm's size: every peer every round
 * when there are few; else the partners not pinged lately (routing needs
 * their RTT) and a few others round-robin. */
static void s_ping_round(netside_t *ns)
{
    double now = s_now(ns);
    int n = ns->peers.n;
    if (ns->live <= PING_PARTNERS + PING_OTHERS) {
        for (int i = 0; i < n; i++) {
            peer_t *p = &ns->peers.p[i];
            if (p->info.id != ns->id && p->health != PEER_GONE) s_ping(ns, p, now);
        }
        return;
    }
    for (int i = 0, sent = 0; i < PARTNERS_MAX && sent < PING_PARTNERS; i++) {
        peer_t *p = ns->partner[i] ? &ns->peers.p[ns->partner_ix[i]] : NULL;
        if (!p || !s_partner(p, now)) { ns->partner[i] = 0; continue; }
        if (p->health == PEER_GONE || now - p->last_ping < PARTNER_PING_S) continue;
        if (now - p->last_direct < PARTNER_PING_S && p->rtt_ms > 0 && now - p->last_ping < PARTNER_RTT_S) continue;
        s_ping(ns, p, now);
        sent++;
    }
    for (int k = 0, sent = 0; k < n && sent < PING_OTHERS; k++) {
        peer_t *p = &ns->peers.p[(ns->ping_at + k) % n];
        if (p->info.id == ns->id || p->health == PEER_GONE || s_partner(p, now)) continue;
        s_ping(ns, p, now);
        sent++;
        ns->ping_at = (ns->ping_at + k + 1) % n;
    }
}

/* Gossip, bounded: a share of the table to a few random live peers (a
 * last-stage node also to one of its stage, whose progress it carries). */
static void s_gossip_round_list(netside_t *ns)
{
    uint64_t *ids = malloc(sizeof(uint64_t) * (size_t)(ns->peers.n + 1));
    int k = ids ? s_live_ids(ns, ids) : 0;
    int fan = k < GOSSIP_FANOUT ? k : GOSSIP_FANOUT;
    for (int i = 0; i < fan; i++) {
        /* a partial Fisher-Yates shuffle: fan distinct targets */
        ns->rng = ns->rng * 6364136223846793005ULL + 1442695040888963407ULL;
        int j = i + (int)((ns->rng >> 33) % (uint64_t)(k - i));
        uint64_t t = ids[i]; ids[i] = ids[j]; ids[j] = t;
        s_send_table(ns, ids[i], GOSSIP_RECORDS);
    }
    if (ns->me.stage == ns->nstages - 1) {
        int m = 0;
        for (int i = fan; i < k; i++) {
            peer_t *p = peers_find(&ns->peers, ids[i]);
            if (p && p->info.stage == ns->nstages - 1) ids[m++] = ids[i];
        }
        if (m) {
            ns->rng = ns->rng * 6364136223846793005ULL + 1442695040888963407ULL;
            s_send_table(ns, ids[(ns->rng >> 33) % (uint64_t)m], GOSSIP_RECORDS);
        }
    }
    free(ids);
}

/* The live list as a partial shuffle left it: the record index at pos,
 * or the one a swap (the latest of sw) put there. */
typedef struct { int pos, ix; } swap_t;

static int s_shuffled(const netside_t *ns, const swap_t *sw, int nsw, int pos)
{
    for (int i = nsw - 1; i >= 0; i--)
        if (sw[i].pos == pos) return sw[i].ix;
    return ns->live_set.ix[pos];
}

/* Gossip, bounded: a share of the table to a few random live peers (a
 * last-stage node also to one of its stage, whose progress it carries).
 * The targets are those of a partial Fisher-Yates shuffle of the live
 * peers in table order (s_gossip_round_list, which it replaces), drawn on
 * the live list without copying it: only the swapped places are kept. */
static void s_gossip_round(netside_t *ns)
{
    if (!ns->live_set.ok) { s_gossip_round_list(ns); return; }
    int k = ns->nlive, fan = k < GOSSIP_FANOUT ? k : GOSSIP_FANOUT, nsw = 0;
    swap_t sw[2 * GOSSIP_FANOUT];
    uint64_t to[GOSSIP_FANOUT];
    for (int i = 0; i < fan; i++) {
        ns->rng = ns->rng * 6364136223846793005ULL + 1442695040888963407ULL;
        int j = i + (int)((ns->rng >> 33) % (uint64_t)(k - i));
        int a = s_shuffled(ns, sw, nsw, i), b = s_shuffled(ns, sw, nsw, j);
        sw[nsw++] = (swap_t){ i, b };
        sw[nsw++] = (swap_t){ j, a };
        to[i] = ns->peers.p[b].info.id;
    }
    int last = ns->nstages - 1, m = 0, pick = -1;
    for (int pass = 0; ns->me.stage == last && pass < 2; pass++) {
        /* the last stage's peers among the rest, in shuffled order: count them, then take the drawn one */
        if (pass && m) {
            ns->rng = ns->rng * 6364136223846793005ULL + 1442695040888963407ULL;
            pick = (int)((ns->rng >> 33) % (uint64_t)m);
        }
        if (pass && pick < 0) break;
        int c = 0;
        for (int i = fan; i < k; i++) {
            int ix = s_shuffled(ns, sw, nsw, i);
            if (ns->peers.p[ix].info.stage != last) continue;
            if (pass && c == pick) { pick = ix; break; }
            c++;
        }
        if (!pass) m = c;
    }
    for (int i = 0; i < fan; i++) s_send_table(ns, to[i], GOSSIP_RECORDS);
    if (pick >= 0) s_send_table(ns, ns->peers.p[pick].info.id, GOSSIP_RECORDS);
}

/* Silence allowed before a peer is taken for slow, then gone: a few
 * heartbeats, stretched by the measured RTT and its spread, and by how
 * seldom we ping it (peers pinged round-robin among many are heard of
 * mostly through gossip). */
static double s_gone_after(const peer_t *p, double now, int live)
{
    double gone = GONE_MIN_S + (p->rtt_ms * 8 + p->rtt_dev_ms * 8) * 1e-3;
    if (live > PING_PARTNERS + PING_OTHERS) {
        double every = s_partner(p, now) ? PARTNER_PING_S : ceil((double)live / PING_OTHERS) * PING_EVERY_S;
        if (4 * every > gone) gone = 4 * every;
    }
    return gone;
}

/* Silence allowed before a peer is taken for slow: half of s_gone_after. */
static double s_slow_after(const peer_t *p, double now, int live)
{
    return s_gone_after(p, now, live) / 2;
}

/* One live peer's health against its silence: slow, then gone. */
static void s_health_of(netside_t *ns, peer_t *p, double now, int live)
{
    double gone = s_gone_after(p, now, live);
    double slow = s_slow_after(p, now, live);
    double quiet = now - p->last_heard;
    if (s_ignores_us(p, now, slow)) quiet = fmax(quiet, now - (p->last_direct > 0 ? p->last_direct : p->unanswered));
    char s[9] = "";
    if (quiet > slow && p->health != PEER_SLOW) node_id_short(p->info.id, s);
    if (quiet > gone) {
        node_id_short(p->info.id, s);
        s_set_health(ns, p, PEER_GONE);
        if (p->rumor > 0) s_ixset_del(&ns->rumor_set, (int)(p - ns->peers.p));
        p->rumor = 0;
        ns->view_dirty = 1;
        metrics_event(ns->c.metrics, "peer", "\"peer\":%s,\"what\":\"gone\",\"why\":\"silent %.1f s\",\"peer_stage\":%d", s, quiet, p->info.stage);
    } else if (quiet > slow && p->health == PEER_ALIVE) {
        s_set_health(ns, p, PEER_SLOW);
        node_id_short(p->info.id, s);
        ns->view_dirty = 1;
        metrics_event(ns->c.metrics, "peer", "\"peer\":%s,\"what\":\"slow\",\"why\":\"silent %.1f s\",\"peer_stage\":%d", s, quiet, p->info.stage);
    } else if (quiet <= slow && p->health == PEER_SLOW) {
        s_set_health(ns, p, PEER_ALIVE);
        ns->view_dirty = 1;
    }
}

/* Time between health rounds: longer with a large table. */
static double s_health_every(const netside_t *ns)
{
    return ns->peers.n > 256 ? HEALTH_EVERY_S * ns->peers.n / 256 : HEALTH_EVERY_S;
}

/* How long one sweep of the whole table may take: a share of the least
 * silence allowed to a peer that is not a partner (partners are checked
 * every round).  Few peers: every round. */
static double s_sweep_s(const netside_t *ns)
{
    if (ns->live <= PING_PARTNERS + PING_OTHERS) return s_health_every(ns);
    double sweep = 4 * ceil((double)ns->live / PING_OTHERS) * PING_EVERY_S / HEALTH_SWEEPS;
    return sweep > s_health_every(ns) ? sweep : s_health_every(ns);
}

/* The peers with tensor traffic lately, each round: they are given
 * seconds of silence.  One whose traffic ended leaves the list and is
 * checked once more with the allowance of the others. */
static void s_check_recent(netside_t *ns, double now, int live)
{
    for (int i = 0; i < ns->nrecent;) {
        peer_t *p = &ns->peers.p[ns->recent[i]];   /* records stay where they are */
        int keep = s_partner(p, now);
        if (p->info.id != ns->id && p->health != PEER_GONE) s_health_of(ns, p, now, live);
        if (keep) { i++; continue; }
        p->recent = 0;
        ns->recent[i] = ns->recent[--ns->nrecent];
    }
}

/* Each round: the peers with traffic lately, and a slice of the table
 * such that all of it is seen once per s_sweep_s (with a thousand peers, a
 * non-partner may be silent for minutes: checking each of them every
 * round was most of a node's periodic work).  Few peers: all of them. */
static void s_check_health(netside_t *ns)
{
    double now = s_now(ns);
    int live = ns->live, n = ns->peers.n;
    ns->live = ns->nlive;
    int per = (int)ceil(n * s_health_every(ns) / s_sweep_s(ns));
    if (per >= n) {
        for (int i = 0; i < n; i++) {
            peer_t *p = &ns->peers.p[i];
            if (p->info.id != ns->id && p->health != PEER_GONE) s_health_of(ns, p, now, live);
        }
        return;
    }
    s_check_recent(ns, now, live);
    for (int k = 0; k < per; k++) {
        if (ns->health_at >= n) ns->health_at = 0;
        peer_t *p = &ns->peers.p[ns->health_at++];
        if (p->info.id != ns->id && p->health != PEER_GONE && !p->recent) s_health_of(ns, p, now, live);
    }
}

static void s_publish_view(netside_t *ns)
{
    mail_t *m = mail_new(MAIL_VIEW);
    if (!m) return;
    m->view = netside_view(ns);
    if (!m->view) { mail_free(m); return; }
    ns->view_dirty = 0;
    s_post(ns, m);
}

double netside_tick(netside_t *ns)
{
    double now = s_now(ns);
    if (ns->join == JOIN_WAITING) {
        if (now > ns->join_deadline) {
            char host[ADDR_HOST_MAX], why[300];
            int port;
            uint8_t key[32];
            addr_parse(ns->join_addr, host, sizeof host, &port, key, why, sizeof why);
            char detail[ADDR_HOST_MAX + 32];
            snprintf(detail, sizeof detail, "%s:%d", host, port);
            s_join_fail(ns, "--join %s: no answer from %s in 15 s (is a brigade node running there, is the port reachable, is the key its current one?)", detail);
        } else if (now >= ns->join_resend) {
            s_join_send(ns);
        }
        return ns->join_resend < ns->join_deadline ? ns->join_resend : ns->join_deadline;
    }
    if (ns->join == JOIN_FAILED) return now + 1.0;
    s_probe_tick(ns, now);
    if (now >= ns->next_ping) { s_keep_links(ns); s_ping_round(ns); ns->next_ping = now + PING_EVERY_S; }
    if (now >= ns->next_gossip) { s_gossip_round(ns); ns->next_gossip = now + GOSSIP_EVERY_S; }
    if (now >= ns->next_health) {
        s_check_health(ns);
        ns->next_health = now + s_health_every(ns);
    }
    if (now >= ns->next_probe) { s_probe_gone(ns); ns->next_probe = now + GONE_PROBE_S; }
    if (ns->left && ns->have_proof && now < ns->linger_until && now >= ns->next_linger) {
        s_unaware(ns, 1);
        ns->next_linger = now + LINGER_EVERY_S;
    }
    if (ns->fetch.active) {
        if (now >= ns->fetch.deadline) s_fetch_end(ns, NULL);
        else if (now >= ns->fetch.resend && now - ns->fetch.rx.last_chunk >= s_fetch_silence(&ns->fetch)) s_fetch_ask(ns);
    }
    if (ns->view_dirty && now >= ns->next_view) {
        s_publish_view(ns);
        ns->next_view = now + (ns->peers.n > 64 ? 1.0 : VIEW_EVERY_S);   /* large tables: at most once a second */
    }
    double next = ns->next_ping;
    if (ns->next_gossip < next) next = ns->next_gossip;
    if (ns->next_health < next) next = ns->next_health;
    if (ns->next_probe < next) next = ns->next_probe;
    if (ns->left && ns->have_proof && now < ns->linger_until && ns->next_linger < next) next = ns->next_linger;
    if (ns->view_dirty && ns->next_view < next) next = ns->next_view;
    if (ns->fetch.active) {
        if (ns->fetch.deadline < next) next = ns->fetch.deadline;
        if (ns->fetch.resend < next) next = ns->fetch.resend;
    }
    for (int i = 0; i < PROBES_MAX; i++)
        if (ns->nprobes && ns->probe[i].id && ns->probe[i].deadline < next) next = ns->probe[i].deadline;
    return next;
}

/* After a completed run: peers that may not know yet (heard from lately, not said they ended).
 * tell: send them DONE again.  Returns how many there are. */
static int s_unaware(netside_t *ns, int tell)
{
    double now = s_now(ns);
    int k = 0;
    for (int i = 0; i < ns->peers.n; i++) {
        peer_t *p = &ns->peers.p[i];
        if (p->info.id == ns->id || p->done_seen || now - p->last_heard > LINGER_RECENT_S || p->banned_until > now) continue;
        if (p->outward && p->link < 0 && !p->via) continue;   /* no way to it: it hears the end from its own links */
        k++;
        if (!tell) continue;
        wire_hdr_t h;
        s_hdr(ns, &h, WIRE_DONE);
        const void *f[1] = { ns->done_proof };
        size_t l[1] = { DONE_LEN };
        s_send(ns, p->info.id, &h, f, l, 1, 0, 0);
    }
    return k;
}

int netside_finished(netside_t *ns)
{
    if (!ns->left || !ns->said_done) return 0;
    if (!ns->have_proof || s_now(ns) >= ns->linger_until) return 1;
    return s_unaware(ns, 0) == 0;
}

void netside_bye(netside_t *ns)
{
    s_sign_done(ns);
    if (ns->have_proof) s_broadcast(ns, WIRE_DONE);
    s_broadcast(ns, WIRE_BYE);
}

/* ---- life cycle and accessors ---- */

netside_t *netside_new(const netside_cfg_t *cfg, char *err, size_t errlen)
{
    netside_t *ns = calloc(1, sizeof *ns);
    if (!ns) { snprintf(err, errlen, "out of memory"); return NULL; }
    ns->c = *cfg;
    ns->id = node_id_from_pubkey(cfg->keys->pub);
    ns->nstages = cfg->o->stages;
    ns->me.stage = cfg->o->stage;
    ns->me.loss = NAN;
    ns->plan = ns->me.plan = cfg->o->split == SPLIT_AUTO ? -1 : cfg->o->split;
    ns->outward = cfg->no_listen;
    ns->relays = cfg->relay;
    ns->relay_bucket = bucket_full(s_now(ns));
    ns->status_bucket = bucket_full(s_now(ns));
    ns->join_bucket = bucket_full(s_now(ns));
    ns->join_link = -1;
    ns->live_set.ok = 1;
    ns->rumor_set.ok = 1;
    ns->rng = ns->id ^ 0x9e3779b97f4a7c15ULL;
    if (!cfg->o->join[0]) ns->run = opts_run_id(cfg->o);
    ns->dec = codec_ctx_new(1);
    ns->enc = codec_ctx_new(1);
    ns->backups = calloc((size_t)(ns->nstages > 0 ? ns->nstages : 1), sizeof(backup_t));
    if (!cfg->vcache) ns->own_vcache = vcache_new(VCACHE_OWN);
    ns->vcache = cfg->vcache ? cfg->vcache : ns->own_vcache;
    if (peers_init(&ns->peers, ns->id) < 0 || !ns->dec || !ns->enc || !ns->backups || !ns->vcache) {
        netside_destroy(&ns);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    peer_info_t self;
    s_self_info(ns, &self);
    peers_upsert(&ns->peers, &self, s_now(ns));
    return ns;
}

void netside_destroy(netside_t **self_p)
{
    netside_t *ns = *self_p;
    if (!ns) return;
    s_feedback_reset(ns);
    s_rx_free(&ns->fetch.rx);
    for (int s = 0; ns->backups && s < ns->nstages; s++) {
        free(ns->backups[s].buf);
        s_rx_free(&ns->backups[s].rx);
    }
    free(ns->backups);
    codec_ctx_destroy(&ns->dec);
    codec_ctx_destroy(&ns->enc);
    vcache_destroy(&ns->own_vcache);
    peers_fini(&ns->peers);
    free(ns->recent);
    free(ns->live_set.ix);
    free(ns->rumor_set.ix);
    free(ns);
    *self_p = NULL;
}

uint64_t netside_run(const netside_t *ns) { return ns->run; }
int netside_outward(const netside_t *ns) { return ns->outward; }
int netside_stage(const netside_t *ns) { return ns->me.stage; }
int netside_shard(const netside_t *ns) { return ns->shard; }

void netside_set_self(netside_t *ns, const self_info_t *s)
{
    s_on_self(ns, s);
}

void netside_progress(const netside_t *ns, uint64_t *completed, double *loss)
{
    *completed = peers_completed(&ns->peers) + ns->me.completed;
    *loss = NAN;
    for (int i = 0; i < ns->peers.n; i++) {
        const peer_t *p = &ns->peers.p[i];
        if (p->info.id != ns->id && p->info.stage == ns->nstages - 1 && isfinite(p->last_loss)) *loss = p->last_loss;
    }
    if (ns->me.stage == ns->nstages - 1 && isfinite(ns->me.loss)) *loss = ns->me.loss;
}

peer_view_t *netside_view(netside_t *ns)
{
    peer_view_t *v = peers_view(&ns->peers);
    if (v) v->plan = ns->plan;
    return v;
}

int netside_plan(const netside_t *ns) { return ns->plan; }
const net_counters_t *netside_counters(const netside_t *ns) { return &ns->ctr; }
const peers_t *netside_peers(const netside_t *ns) { return &ns->peers; }
