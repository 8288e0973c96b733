/* sim.c: whole swarms on a virtual clock and network (sim.h). */
#include "node/runtime/sim.h"
#include "compress/codec.h"
#include "net/keys.h"
#include "net/vcache.h"
#include "node/engine/data.h"
#include "node/runtime/compute.h"
#include "node/runtime/idmap.h"
#include "node/runtime/netside.h"
#include <cblas.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SIM_PORT 7700
#define SIM_EPOCH_MS 1800000000000ull   /* the virtual wall clock starts here */
#define STOP_AFTER_S 0.5                /* a node whose compute ended stays on the network this long */
#define END_GRACE_S 700.0               /* after the run completes, live nodes must end within this (a node cut off gives up after 600 s) */
#define REJOIN_S 5.0                    /* a failed join is tried again (through another node) after this */
#define ROGUE_EVERY_S 0.2               /* a rogue sends a bad message this often */
#define PROGRESS_EVERY_S 60.0           /* simulated seconds between progress lines */

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
    /* invariants */
    idmap_t applied;           /* microbatches its compute side applied (this incarnation's stage tenure: a restarted
                                  node starts with no memory and no state of its earlier life, as a fresh process) */
    int64_t last_v;            /* last weight version of its stage tenure */
    int last_vstage;
    uint64_t issued, resolved; /* data stage: microbatches issued; applied here, lost or skipped */
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
    vcache_t *vcache;          /* announcements verified already (all nodes: verification is a pure function) */
};

static int s_plan_cmp(const void *a, const void *b);

/* ---- small helpers ---- */

static uint64_t s_mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static double s_uniform(sim_t *s)
{
    s->rng = s_mix(s->rng);
    return (double)(s->rng >> 11) * (1.0 / 9007199254740992.0);
}

/* A deterministic number in [lo, hi] for a key (per node or per link). */
/* An exponential waiting time of the given rate (events per second). */
static double s_exponential(sim_t *s, double rate)
{
    return -log(1.0 - s_uniform(s)) / rate;
}

static double s_range(const sim_t *s, uint64_t key, double lo, double hi)
{
    double u = (double)(s_mix(s->so.o.seed ^ s_mix(key)) >> 11) * (1.0 / 9007199254740992.0);
    return lo + (hi - lo) * u;
}

static void s_fold(sim_t *s, uint64_t x)
{
    s->trace = s_mix(s->trace ^ x);
}

static double s_wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void s_violation(sim_t *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void s_violation(sim_t *s, const char *fmt, ...)
{
    if (s->res->violations++ == 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(s->res->why, sizeof s->res->why, fmt, ap);
        va_end(ap);
    }
}

/* ---- the event heap ---- */

static int s_before(const ev_t *a, const ev_t *b)
{
    return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

static void s_push(sim_t *s, double t, int type, int node, uint64_t gen, simmsg_t *msg)
{
    if (s->nheap == s->capheap) {
        int cap = s->capheap ? 2 * s->capheap : 1024;
        ev_t *h = realloc(s->heap, sizeof(ev_t) * (size_t)cap);
        if (!h) { s_violation(s, "out of memory for events"); free(msg); return; }
        s->heap = h;
        s->capheap = cap;
    }
    int i = s->nheap++;
    ev_t e = { .t = t, .seq = s->seq++, .type = type, .node = node, .gen = gen, .msg = msg };
    while (i > 0 && s_before(&e, &s->heap[(i - 1) / 2])) {
        s->heap[i] = s->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    s->heap[i] = e;
}

static ev_t s_pop(sim_t *s)
{
    ev_t top = s->heap[0], last = s->heap[--s->nheap];
    int i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= s->nheap) break;
        if (c + 1 < s->nheap && s_before(&s->heap[c + 1], &s->heap[c])) c++;
        if (!s_before(&s->heap[c], &last)) break;
        s->heap[i] = s->heap[c];
        i = c;
    }
    if (s->nheap) s->heap[i] = last;
    return top;
}

/* ---- clock ---- */

static double s_clock_now(void *arg) { return ((sim_t *)arg)->now; }
static uint64_t s_clock_wall(void *arg) { return SIM_EPOCH_MS + (uint64_t)(((sim_t *)arg)->now * 1000.0); }
static double s_node_now(void *arg) { return ((snode_t *)arg)->sim->now; }
static uint64_t s_node_wall(void *arg) { return s_clock_wall(((snode_t *)arg)->sim); }

/* ---- the virtual network ---- */

static void s_msg_free(simmsg_t *m)
{
    free(m);
}

static int s_addr_node(const sim_t *s, const char *addr)
{
    int idx, port;
    if (sscanf(addr, "n%d.sim:%d", &idx, &port) != 2 || idx < 0 || idx >= s->nnodes || port != SIM_PORT) return -1;
    return idx;
}

static int s_port_connect(void *arg, const char *addr, const uint8_t pub[32], char *err, size_t errlen)
{
    snode_t *n = arg;
    int dst = s_addr_node(n->sim, addr);
    if (dst < 0 || memcmp(n->sim->node[dst]->keys.pub, pub, 32) != 0) {
        snprintf(err, errlen, "no such node: %s", addr);
        return -1;
    }
    if (n->nlinks == n->caplinks) {
        int cap = n->caplinks ? 2 * n->caplinks : 16;
        int *l = realloc(n->links, sizeof(int) * (size_t)cap);
        if (!l) { snprintf(err, errlen, "out of memory"); return -1; }
        n->links = l;
        n->caplinks = cap;
    }
    n->links[n->nlinks] = dst;
    return n->nlinks++;
}

static void s_port_disconnect(void *arg, int link)
{
    snode_t *n = arg;
    if (link >= 0 && link < n->nlinks) n->links[link] = -1;
}

/* The last arrival time on the directed link src -> dst (its slot, made on first use). */
static double *s_pair_last(sim_t *s, int src, int dst)
{
    uint64_t key = ((uint64_t)(uint32_t)src << 32) | (uint32_t)dst;
    int i = idmap_get(&s->pair_ix, key);
    if (i >= 0) return &s->pair_last[i];
    if (s->npairs == s->cappairs) {
        int cap = s->cappairs ? 2 * s->cappairs : 1024;
        double *p = realloc(s->pair_last, sizeof(double) * (size_t)cap);
        if (!p) return NULL;
        s->pair_last = p;
        s->cappairs = cap;
    }
    if (idmap_put(&s->pair_ix, key, s->npairs) < 0) return NULL;
    s->pair_last[s->npairs] = 0;
    return &s->pair_last[s->npairs++];
}

static int s_control(int type)
{
    return type == WIRE_PEERS || type == WIRE_PING || type == WIRE_PONG || type == WIRE_JOIN || type == WIRE_WELCOME
           || type == WIRE_BYE || type == WIRE_DONE;
}

/* Puts a message on the wire from src to dst: uplink serialization, latency, jitter, loss. */
static void s_transmit(sim_t *s, simmsg_t *m)
{
    snode_t *src = s->node[m->src];
    s->res->bytes_sent += m->bytes;
    if (s_control(m->type)) s->res->control_bytes += m->bytes;
    s->res->type_msgs[m->type & 15]++;
    s->res->type_bytes[m->type & 15] += m->bytes;
    double start = src->egress_free > s->now ? src->egress_free : s->now;
    double ser = src->bps > 0 ? (double)m->bytes * 8.0 / src->bps : 0;
    src->egress_free = start + ser;
    double lat = s_range(s, ((uint64_t)(uint32_t)m->src << 32) | (uint32_t)m->dst, s->so.lat_lo, s->so.lat_hi) * 1e-3;
    double at = src->egress_free + lat + (s->so.jitter_ms > 0 ? s_uniform(s) * s->so.jitter_ms * 1e-3 : 0);
    double *last = s_pair_last(s, m->src, m->dst);
    if (last) {
        if (at < *last) at = *last;   /* TCP keeps order on a link */
        *last = at;
    }
    if (s->so.loss > 0 && s_uniform(s) < s->so.loss) {
        s->res->bytes_dropped += m->bytes;
        s_msg_free(m);
        return;
    }
    s->res->bytes_inflight += m->bytes;
    s_push(s, at, EV_DELIVER, m->dst, 0, m);
}

/* A message from node src to dst with the given header and frames (copied). */
static simmsg_t *s_msg_new(sim_t *s, int src, int dst, const wire_hdr_t *h, const void *const *f, const size_t *l,
                           int nf, uint64_t virt)
{
    if (nf < 0 || nf > TRANSPORT_MAX_FRAMES) return NULL;
    size_t total = 0;
    for (int i = 0; i < nf; i++) total += l[i];
    simmsg_t *m = malloc(sizeof *m + total);
    if (!m) return NULL;
    memset(m, 0, sizeof *m);
    m->src = src;
    m->dst = dst;
    m->dst_inc = s->node[dst]->inc;
    wire_hdr_t hh = *h;
    hh.magic = WIRE_MAGIC;
    hh.version = WIRE_VERSION;
    hh.sender = s->node[src]->id;
    wire_hdr_encode(m->hdr, &hh);
    m->type = h->type;
    m->nframes = nf;
    size_t off = 0;
    for (int i = 0; i < nf; i++) {
        m->len[i] = l[i];
        if (l[i]) memcpy(m->data + off, f[i], l[i]);
        off += l[i];
    }
    m->virt = virt;
    m->bytes = WIRE_HDR_LEN + total + virt;
    return m;
}

static int s_port_send(void *arg, int link, const transport_msg_t *to, const wire_hdr_t *h,
                       const void *const *f, const size_t *l, int nf, uint64_t virt)
{
    snode_t *n = arg;
    sim_t *s = n->sim;
    int dst = -1;
    if (link >= 0) dst = link < n->nlinks ? n->links[link] : -1;
    else if (to && to->route_len == sizeof(int)) memcpy(&dst, to->route, sizeof(int));
    if (dst < 0 || dst >= s->nnodes) return -1;
    simmsg_t *m = s_msg_new(s, n->idx, dst, h, f, l, nf, virt);
    if (!m) return -1;
    s_transmit(s, m);
    return 0;
}

/* ---- nodes ---- */

static void s_comp_wake(snode_t *n, double at);
static void s_node_stop(snode_t *n, int crash);
static void s_net_kick(snode_t *n);

/* Mail from a node's network side to its compute side: queued until the compute side is free. */
static void s_post_comp(void *arg, mail_t *m)
{
    snode_t *n = arg;
    m->q.next = NULL;
    if (n->mtail) n->mtail->q.next = &m->q;
    else n->mhead = m;
    n->mtail = m;
    if (!n->busy) s_comp_wake(n, n->sim->now);
}

/* Mail from the compute side: the network side takes it at once. */
static void s_post_net(void *arg, mail_t *m)
{
    snode_t *n = arg;
    if (!n->net) { mail_free(m); return; }
    netside_on_mail(n->net, m);
    s_net_kick(n);
}

static void s_trace(void *arg, int what, uint64_t mb, int64_t v)
{
    snode_t *n = arg;
    sim_t *s = n->sim;
    s_fold(s, ((uint64_t)what << 56) ^ mb ^ ((uint64_t)n->idx << 40));
    switch (what) {
    case TRACE_ISSUE: n->issued++; break;
    case TRACE_APPLY:
        if (idmap_get(&n->applied, mb) >= 0) {
            s->res->duplicated++;
            s_violation(s, "node %d applied microbatch %016llx twice", n->idx, (unsigned long long)mb);
        } else {
            idmap_put(&n->applied, mb, 0);
        }
        if (netside_stage(n->net) == 0) n->resolved++;
        if (netside_stage(n->net) == n->o.stages - 1) s->res->applied_last++;
        break;
    case TRACE_LOST: n->resolved++; break;
    case TRACE_SKIP: n->resolved++; break;
    case TRACE_UPDATE:
        if ((int)mb == n->last_vstage && v <= n->last_v)
            s_violation(s, "node %d: weight version went from %lld to %lld", n->idx, (long long)n->last_v, (long long)v);
        n->last_vstage = (int)mb;
        n->last_v = v;
        break;
    case TRACE_MOVE: idmap_clear(&n->applied); break;   /* a new stage: its microbatches are new */
    default: break;
    }
}

static void s_report(void *arg, const node_report_t *r)
{
    snode_t *n = arg;
    sim_t *s = n->sim;
    if (!r->last) return;
    if (!isfinite(r->loss)) s_violation(s, "node %d: loss not finite at version %lld", n->idx, (long long)r->version);
    if (isnan(s->res->first_loss)) s->res->first_loss = r->loss;
    s->res->last_loss = r->loss;
}

static void s_say(void *arg, const char *line)
{
    snode_t *n = arg;
    if (n->sim->log && !n->sim->so.quiet) fprintf(n->sim->log, "sim %8.1f s: node %d: %s\n", n->sim->now, n->idx, line);
}

/* The stage's compute side, once the node knows its run and stage. */
static int s_node_prepare(snode_t *n, char *err, size_t errlen)
{
    sim_t *s = n->sim;
    int stage = netside_stage(n->net);
    compute_cfg_t cc = {0};
    stage_t lay;
    model_config_t cfg = n->o.cfg;
    cc.plan = compute_plan(&n->o, -1, netside_plan(n->net));
    if (cc.plan >= 0) cfg.split = (model_split_t)cc.plan;
    if (stage_init(&lay, &cfg, stage, n->o.stages, err, errlen) < 0) return -1;
    if (s->so.real && !(cc.st = stage_state_new(&cfg, stage, n->o.stages, n->o.seed, err, errlen))) return -1;
    int T = n->o.cfg.kind == MODEL_GPT ? n->o.cfg.maxT : 1;
    self_info_t si = { .stage = stage, .plan = cc.plan, .in_n = stage_in_size(&lay, n->o.batch, T), .out_n = stage_out_size(&lay, n->o.batch, T),
                       .nparams = lay.nparams, .loss = NAN };
    netside_set_self(n->net, &si);
    cc.view = netside_view(n->net);
    int use_ck;
    cc.start = compute_choose_start(cc.view, stage, -1, n->joiner, &cc.donor, &use_ck);
    if (stage == 0 && s->so.real) {
        cc.data = data_open(n->o.data, model_data_kind(&n->o.cfg), n->o.cfg.maxT, n->o.seed, err, errlen);
        if (cc.data && model_check_data(&n->o.cfg, cc.data, n->o.data, err, errlen) < 0) data_close(&cc.data);
        if (!cc.data) { stage_state_destroy(&cc.st); free(cc.view); return -1; }
    }
    cc.o = &n->o;
    cc.id = n->id;
    cc.run = netside_run(n->net);
    cc.stage = stage;
    cc.shard = netside_shard(n->net);
    cc.metrics = n->metrics;
    cc.clock = (rt_clock_t){ .arg = n, .now = s_node_now, .wall_ms = s_node_wall };
    cc.post = s_post_net;
    cc.post_arg = n;
    cc.net = netside_counters(n->net);
    cc.obs = (node_observer_t){ .arg = n, .report = s_report, .say = s_say, .trace = s_trace };
    cc.modelled = !s->so.real;
    n->comp = compute_new(&cc, err, errlen);
    if (!n->comp) return -1;
    n->last_vstage = -1;
    n->last_v = -1;
    compute_flush(n->comp);
    s_comp_wake(n, s->now);
    return 0;
}

static void s_net_wake(snode_t *n, double at)
{
    n->ngen++;
    n->nwake = at;
    s_push(n->sim, at, EV_NET, n->idx, n->ngen, NULL);
}

/* Runs what is due on a node's network side now and moves its next wake-up
 * earlier when something new asks for it (as the I/O thread's short polls do). */
static void s_net_kick(snode_t *n)
{
    if (!n->alive || !n->net) return;
    double next = netside_tick(n->net);
    if (next < n->sim->now + 1e-3) next = n->sim->now + 1e-3;
    if (next < n->nwake) s_net_wake(n, next);
}

static void s_comp_wake(snode_t *n, double at)
{
    if (n->busy) return;          /* the end of its step runs it (a new generation would orphan that event) */
    if (n->cwake <= at) return;   /* already due by then */
    n->cwake = at;
    n->cgen++;
    s_push(n->sim, at, EV_COMP, n->idx, n->cgen, NULL);
}

/* The join address of node i. */
static void s_join_addr(const sim_t *s, int i, char *out, size_t len)
{
    char host[32];
    snprintf(host, sizeof host, "n%d.sim", i);
    addr_format(out, len, host, SIM_PORT, s->node[i]->keys.pub);
}

/* A live node to join through: node 0 for the first few, then a random live welcomed one (-1: none). */
static int s_bootstrap(sim_t *s, int except)
{
    if (except != 0 && except < 8 && s->node[0]->alive && s->node[0]->net && !s->node[0]->finished)
        return 0;
    int cand = 0;
    for (int i = 0; i < s->nnodes; i++) {
        snode_t *n = s->node[i];
        if (i != except && n->alive && !n->finished && (n->joined || !n->joiner)) cand++;
    }
    if (!cand) return -1;
    int k = (int)(s_uniform(s) * cand);
    for (int i = 0; i < s->nnodes; i++) {
        snode_t *n = s->node[i];
        if (i != except && n->alive && !n->finished && (n->joined || !n->joiner) && k-- == 0) return i;
    }
    return -1;
}

static snode_t *s_node_new(sim_t *s)
{
    if (s->nnodes == s->capnodes) {
        int cap = s->capnodes ? 2 * s->capnodes : 64;
        snode_t **a = realloc(s->node, sizeof(snode_t *) * (size_t)cap);
        unsigned char *p = realloc(s->part, (size_t)cap);
        if (!a || !p) { if (a) s->node = a; if (p) s->part = p; return NULL; }
        s->node = a;
        s->part = p;
        s->capnodes = cap;
    }
    snode_t *n = calloc(1, sizeof *n);
    if (!n) return NULL;
    n->sim = s;
    n->idx = s->nnodes;
    s->part[n->idx] = 0;
    uint8_t seed[32];
    uint64_t words[2] = { s->so.o.seed, (uint64_t)n->idx };
    crypto_generichash(seed, sizeof seed, (const uint8_t *)words, sizeof words, NULL, 0);
    char err[200];
    if (keypair_from_seed(&n->keys, seed, err, sizeof err) < 0) { free(n); return NULL; }
    n->id = node_id_from_pubkey(n->keys.pub);
    node_id_short(n->id, n->idshort);
    snprintf(n->addr, sizeof n->addr, "n%d.sim:%d", n->idx, SIM_PORT);
    n->speed = s_range(s, 0x5eedULL << 32 | (uint64_t)n->idx, s->so.speed_lo, s->so.speed_hi);
    double mbit = s_range(s, 0xb0bULL << 32 | (uint64_t)n->idx, s->so.bw_lo, s->so.bw_hi);
    n->bps = mbit > 0 ? mbit * 1e6 : 0;
    n->slow = 1.0;
    n->cwake = INFINITY;
    idmap_init(&n->applied);
    s->node[s->nnodes++] = n;
    return n;
}

/* Starts (or restarts) node n: the creator serves at once, others join. */
static void s_node_start(snode_t *n)
{
    sim_t *s = n->sim;
    char err[300];
    n->inc++;
    n->alive = 1;
    n->finished = 0;
    n->joined = 0;
    n->learned = 0;
    n->busy = 0;
    n->cwake = INFINITY;
    n->nlinks = 0;
    n->started_at = s->now;
    if (n->inc > 1) n->paused_until = 0;   /* a pause planned before its first start holds */
    n->closed = 0;
    n->issued = n->resolved = 0;
    if (n->inc > 1) {
        /* a restarted process: its weights come anew (downloaded, a backup or
         * initial), without what the dead one applied, so a re-issued
         * microbatch it had applied is applied once to these; its versions
         * start over with them */
        idmap_clear(&n->applied);
        n->last_vstage = -1;
    }
    n->o = s->so.o;
    n->joiner = n->idx != 0 || n->inc > 1;
    n->o.stage = 0;
    int via = -1;
    if (n->rogue) s_push(s, s->now + ROGUE_EVERY_S, EV_ROGUE, n->idx, (uint64_t)n->inc, NULL);
    if (n->joiner) {
        via = s_bootstrap(s, n->idx);
        if (via < 0) { n->alive = 0; n->finished = 1; return; }   /* nobody left to join */
        s_join_addr(s, via, n->o.join, sizeof n->o.join);
        n->o.stage = -1;
    }
    if (!n->metrics) {
        n->metrics = metrics_share(s->metrics, n->idshort);
        if (n->metrics) metrics_set_clock(n->metrics, s_clock_now, s);
    }
    netside_cfg_t nc = {0};
    nc.o = &n->o;
    nc.keys = &n->keys;
    nc.adv = n->addr;
    nc.clock = (rt_clock_t){ .arg = n, .now = s_node_now, .wall_ms = s_node_wall };
    nc.port = (rt_port_t){ .arg = n, .connect = s_port_connect, .disconnect = s_port_disconnect, .send = s_port_send };
    nc.metrics = n->metrics;
    nc.post = s_post_comp;
    nc.post_arg = n;
    nc.modelled = !s->so.real;
    nc.vcache = s->vcache;
    n->net = netside_new(&nc, err, sizeof err);
    if (!n->net) { s_violation(s, "node %d: %s", n->idx, err); n->alive = 0; return; }
    /* every node of a sim runs node 0's config, so the run id is known before a joiner's WELCOME */
    metrics_event(n->metrics, "start", "\"role\":\"sim\",\"run\":\"%016llx\",\"model\":%s,\"join_addr\":%s,\"incarnation\":%d",
                  (unsigned long long)opts_run_id(&s->so.o), n->o.cfg.name, n->addr, n->inc);
    if (n->joiner) {
        if (netside_join(n->net, n->o.join, -1, err, sizeof err) < 0) s_violation(s, "node %d join: %s", n->idx, err);
    } else if (s_node_prepare(n, err, sizeof err) < 0) {
        s_violation(s, "node %d could not start its stage: %s", n->idx, err);
    }
    s_net_wake(n, s->now);
}

/* The outcome of a node's compute side, once, when it ends (finished,
 * died with its node, or still running at the end of the simulation). */
static void s_close_compute(snode_t *n, int died)
{
    sim_t *s = n->sim;
    if (!n->comp || n->closed) return;
    n->closed = 1;
    compute_result_t r;
    compute_result(n->comp, &r);
    s->res->lost += r.lost;
    s->res->skipped += r.skipped;
    /* a data-stage node's microbatches are completed, counted lost, or still held; those of a node that died go with it */
    if (!died && r.stage == 0 && n->issued > n->resolved + (uint64_t)r.inflight) {
        uint64_t k = n->issued - n->resolved - (uint64_t)r.inflight;
        s->res->uncounted += k;
        s_violation(s, "node %d: %llu microbatches issued, never completed, not counted lost", n->idx, (unsigned long long)k);
    }
    if (s->so.real && !died) {
        const stage_state_t *st = compute_state(n->comp);
        uint64_t h = 0;
        if (st) crypto_generichash((uint8_t *)&h, sizeof h, (const uint8_t *)st->params, st->s.nparams * sizeof(float), NULL, 0);
        s->res->weights = s_mix(s->res->weights ^ h ^ (uint64_t)n->idx);
    }
}

/* Frees a node's sides (its counters go to the totals). */
static void s_node_free_sides(snode_t *n)
{
    sim_t *s = n->sim;
    s_close_compute(n, 1);
    if (n->net) {
        const net_counters_t *k = netside_counters(n->net);
        s->sent_dead += atomic_load(&k->bytes_sent);
        s->recv_dead += atomic_load(&k->bytes_recv);
    }
    compute_destroy(&n->comp);
    netside_destroy(&n->net);
    while (n->mhead) {
        mail_t *m = n->mhead;
        n->mhead = (mail_t *)m->q.next;
        mail_free(m);
    }
    n->mtail = NULL;
    s_msg_free(n->last_in);
    n->last_in = NULL;
    n->busy = 0;
    n->cgen++;
    n->ngen++;
    n->cwake = INFINITY;
}

/* The node leaves: crash (gone at once) or after its compute side ended (BYE/DONE said). */
static void s_node_stop(snode_t *n, int crash)
{
    if (!n->alive) return;
    if (n->net) {
        uint64_t c;
        double l;
        netside_progress(n->net, &c, &l);
        if (c > n->sim->best_done) n->sim->best_done = c;
    }
    if (!crash && n->net) netside_bye(n->net);
    n->alive = 0;
    n->left_at = n->sim->now;
    n->sim->res->node_seconds += n->sim->now - n->started_at;
    n->sim->capacity += (n->sim->now - n->started_at) * n->sim->so.gflops * 1e9 * n->speed;
    s_node_free_sides(n);
}

/* The compute side ended: tell the network side, leave a moment later. */
static void s_comp_ended(snode_t *n)
{
    sim_t *s = n->sim;
    if (n->finished) return;
    n->finished = 1;
    compute_result_t r;
    compute_result(n->comp, &r);
    if (r.status == 0 && r.done == 1 && r.stage == n->o.stages - 1 && !isfinite(s->done_at) && s->so.steps_given) s->done_at = s->now;
    if (r.status && !isfinite(s->done_at)) s_violation(s, "node %d failed: %s", n->idx, r.why);
    s_close_compute(n, 0);
    mail_t *leave = mail_new(MAIL_LEAVE);
    if (leave) {
        leave->self.stage = r.stage;
        leave->self.version = r.version;
        leave->self.completed = r.completed;
        leave->self.loss = NAN;
        leave->self.done = r.done;
        leave->self.status = r.status;
        netside_on_mail(n->net, leave);
    }
    s_push(s, s->now + STOP_AFTER_S, EV_STOP, n->idx, (uint64_t)n->inc, NULL);
}

/* Runs the node's compute side if it is free: its mail, its timers, one step. */
static void s_comp_run(snode_t *n)
{
    sim_t *s = n->sim;
    if (!n->alive || !n->comp || n->busy || n->finished) return;
    n->cwake = INFINITY;
    while (n->mhead) {
        mail_t *m = n->mhead;
        n->mhead = (mail_t *)m->q.next;
        if (!n->mhead) n->mtail = NULL;
        m->q.next = NULL;
        compute_on_mail(n->comp, m);
    }
    double next = compute_tick(n->comp);
    double flops = 0;
    if (compute_step(n->comp, &flops)) {
        double rate = s->so.gflops * 1e9 * n->speed / n->slow;
        double dur = flops / rate;
        if (dur < 1e-6) dur = 1e-6;
        compute_account(n->comp, dur);
        n->busy = 1;
        n->cgen++;
        s_push(s, s->now + dur, EV_COMP_DONE, n->idx, n->cgen, NULL);
        return;
    }
    compute_flush(n->comp);
    if (compute_finished(n->comp)) { s_comp_ended(n); return; }
    s_comp_wake(n, next > s->now ? next : s->now + 1e-3);
}

/* A node that has not yet learnt every stage: does it now? */
static void s_check_learned(snode_t *n)
{
    if (n->learned || !n->net) return;
    const peers_t *t = netside_peers(n->net);
    int K = n->o.stages, have = 0;
    unsigned char seen[MODEL_STAGES_MAX] = {0};
    for (int i = 0; i < t->n; i++) {
        int st = t->p[i].info.stage;
        if (t->p[i].health != PEER_GONE && st >= 0 && st < K && !seen[st]) { seen[st] = 1; have++; }
    }
    if (have == K) {
        n->learned = 1;
        n->sim->res->learn_all_s += n->sim->now - n->started_at;
        n->sim->res->learn_n++;
    }
}

/* A joiner's state after something happened to it. */
static void s_check_join(snode_t *n)
{
    if (!n->joiner || n->joined || !n->net || !n->alive) return;
    char err[320];
    int r = netside_join_state(n->net, err, sizeof err);
    if (r == 1) {
        n->joined = 1;
        if (s_node_prepare(n, err, sizeof err) < 0) s_violation(n->sim, "node %d could not start its stage after joining: %s", n->idx, err);
    } else if (r < 0) {
        /* refused, silent bootstrap or a finished run: try again elsewhere, unless the run is over */
        if (n->sim->log && !n->sim->so.quiet) fprintf(n->sim->log, "sim %8.1f s: node %d: %s\n", n->sim->now, n->idx, err);
        s_node_stop(n, 1);
        n->finished = 1;
        if (!isfinite(n->sim->done_at) && !strstr(err, "already finished")) s_push(n->sim, n->sim->now + REJOIN_S, EV_START, n->idx, 0, NULL);
    }
}

/* ---- events ---- */

static void s_deliver(sim_t *s, simmsg_t *m)
{
    snode_t *n = s->node[m->dst];
    s->res->bytes_inflight -= m->bytes;
    int cut = s->part_active && s->part[m->src] != s->part[m->dst];
    transport_msg_t tm;
    memset(&tm, 0, sizeof tm);
    char err[160];
    if (!n->alive || !n->net || n->inc != m->dst_inc || cut || wire_hdr_decode(&tm.hdr, m->hdr, WIRE_HDR_LEN, err, sizeof err) < 0) {
        s->res->bytes_dropped += m->bytes;
        s_msg_free(m);
        return;
    }
    s->res->bytes_delivered += m->bytes;
    memcpy(tm.sender_pub, s->node[m->src]->keys.pub, 32);
    tm.sender = s->node[m->src]->id;
    tm.link = -1;
    tm.nframes = m->nframes;
    size_t off = 0;
    for (int i = 0; i < m->nframes; i++) {
        tm.frame[i] = m->data + off;
        tm.len[i] = m->len[i];
        off += m->len[i];
    }
    memcpy(tm.route, &m->src, sizeof(int));
    tm.route_len = sizeof(int);
    s_fold(s, ((uint64_t)m->type << 48) ^ tm.hdr.mb ^ ((uint64_t)m->src << 24) ^ (uint64_t)m->dst ^ m->bytes);
    netside_on_msg(n->net, &tm, m->virt);
    if (n->rogue) { s_msg_free(n->last_in); n->last_in = m; }
    else s_msg_free(m);
    s_check_join(n);
    s_check_learned(n);
    s_net_kick(n);
}

/* A rogue node sends something bad to a random live node: garbage or a replay. */
static void s_rogue_send(sim_t *s, snode_t *n)
{
    int dst = (int)(s_uniform(s) * s->nnodes);
    if (dst == n->idx || !s->node[dst]->alive) return;
    simmsg_t *m = NULL;
    if (n->last_in && s_uniform(s) < 0.5) {
        /* a replay of what it received, as its own */
        wire_hdr_t h;
        char err[120];
        if (wire_hdr_decode(&h, n->last_in->hdr, WIRE_HDR_LEN, err, sizeof err) < 0) return;
        const void *f[TRANSPORT_MAX_FRAMES];
        size_t off = 0;
        for (int i = 0; i < n->last_in->nframes; i++) { f[i] = n->last_in->data + off; off += n->last_in->len[i]; }
        m = s_msg_new(s, n->idx, dst, &h, f, n->last_in->len, n->last_in->nframes, n->last_in->virt);
    } else {
        /* garbage: any type of this run, frames of random bytes */
        uint8_t junk[512];
        for (size_t i = 0; i < sizeof junk; i++) junk[i] = (uint8_t)(s_uniform(s) * 256);
        wire_hdr_t h;
        wire_hdr_init(&h, (wire_type_t)(1 + (int)(s_uniform(s) * (WIRE_TYPE_END - 1))));
        h.run = netside_run(n->net);
        h.stage = (uint16_t)(s_uniform(s) * n->o.stages);
        h.mb = s_mix(s->rng);
        const void *f[2] = { junk, junk + 256 };
        size_t l[2] = { (size_t)(s_uniform(s) * 256), (size_t)(s_uniform(s) * 256) };
        m = s_msg_new(s, n->idx, dst, &h, f, l, 1 + (s_uniform(s) < 0.5), 0);
    }
    if (m) {
        s->rogue_sent += m->bytes;
        s_transmit(s, m);
    }
}

static void s_apply_plan(sim_t *s, const plan_ev_t *p)
{
    snode_t *n = p->node >= 0 && p->node < s->nnodes ? s->node[p->node] : NULL;
    if (s->log && !s->so.quiet) {
        static const char *names[] = { "?", "kill", "restart", "slow", "partition", "heal", "rogue", "pause" };
        fprintf(s->log, "sim %8.1f s: plan: %s", s->now, names[p->kind]);
        if (p->kind == PLAN_PARTITION) for (int i = 0; i < p->nset; i++) fprintf(s->log, "%s%d", i ? "," : " ", p->set[i]);
        else if (p->kind != PLAN_HEAL) fprintf(s->log, " node %d", p->node);
        if (p->kind == PLAN_SLOW) fprintf(s->log, " x%.1f", p->factor);
        if (p->kind == PLAN_PAUSE) fprintf(s->log, " for %.1f s", p->factor);
        fputc('\n', s->log);
    }
    switch (p->kind) {
    case PLAN_KILL:
        if (n && n->inc == 0) n->killed_early = 1;   /* not started yet */
        if (n) s_node_stop(n, 1);
        break;
    case PLAN_RESTART: if (n && !n->alive && !isfinite(s->done_at)) s_node_start(n); break;
    case PLAN_SLOW: if (n) n->slow = p->factor; break;
    case PLAN_PAUSE:   /* a node not started yet is paused from its start */
        if (n && (n->alive || n->inc == 0)) n->paused_until = fmax(n->paused_until, s->now + p->factor);
        if (n) s->pause_end = fmax(s->pause_end, n->paused_until);
        break;
    case PLAN_PARTITION:
        memset(s->part, 0, (size_t)s->nnodes);
        for (int i = 0; i < p->nset; i++) if (p->set[i] < s->nnodes) s->part[p->set[i]] = 1;
        s->part_active = 1;
        break;
    case PLAN_HEAL: s->part_active = 0; break;
    case PLAN_ROGUE:   /* a node not alive now starts sending at its (re)start */
        if (n && !n->rogue) {
            n->rogue = 1;
            if (n->alive) s_push(s, s->now + ROGUE_EVERY_S, EV_ROGUE, n->idx, (uint64_t)n->inc, NULL);
        }
        break;
    default: break;
    }
}

/* Churn: a random live node leaves (crash or goodbye), a new one joins a little later. */
static void s_churn(sim_t *s)
{
    int alive = 0;
    for (int i = 0; i < s->nnodes; i++) alive += s->node[i]->alive;
    if (alive > 1 && !isfinite(s->done_at)) {
        int k = (int)(s_uniform(s) * alive);
        for (int i = 0; i < s->nnodes; i++) {
            snode_t *n = s->node[i];
            if (n->alive && k-- == 0) {
                int crash = s_uniform(s) < 0.5 || !n->comp;
                if (s->log && !s->so.quiet) fprintf(s->log, "sim %8.1f s: churn: node %d leaves (%s)\n", s->now, i, crash ? "crash" : "goodbye");
                if (crash) s_node_stop(n, 1);
                else compute_stop(n->comp, 2), s_comp_wake(n, s->now);
                break;
            }
        }
        snode_t *fresh = s_node_new(s);
        if (fresh) s_push(s, s->now - 10.0 * log(1.0 - s_uniform(s)), EV_START, fresh->idx, 0, NULL);
    }
    double rate = alive * s->so.churn_per_hour / 3600.0;
    if (rate > 0) s_push(s, s->now - log(1.0 - s_uniform(s)) / rate, EV_CHURN, -1, 0, NULL);
}

static void s_progress(sim_t *s)
{
    if (!s->log || s->so.quiet) return;
    int alive = 0, serving = 0;
    uint64_t done = 0;
    for (int i = 0; i < s->nnodes; i++) {
        snode_t *n = s->node[i];
        alive += n->alive;
        serving += n->alive && n->comp && !n->finished;
        if (n->alive && n->net) {
            uint64_t c;
            double l;
            netside_progress(n->net, &c, &l);
            if (c > done) done = c;
        }
    }
    fprintf(s->log, "sim %8.1f s (%.1f s wall, %.1f s cpu): %d nodes alive, %d serving, %llu microbatches done (%llu applied at the last stage), %d events queued\n",
            s->now, s_wall() - s->wall0, metrics_cpu_process() - s->cpu0, alive, serving, (unsigned long long)done,
            (unsigned long long)s->res->applied_last, s->nheap);
}

/* 1 when nothing is left to do: the run completed and every live node ended. */
static int s_all_done(const sim_t *s)
{
    if (!isfinite(s->done_at)) return 0;
    for (int i = 0; i < s->nnodes; i++)
        if (s->node[i]->alive) return 0;
    return 1;
}

/* Whether event e is for a node that a plan pause holds: it waits, in order. */
static int s_held(sim_t *s, const ev_t *e, const snode_t *n)
{
    int mine = e->type == EV_DELIVER || e->type == EV_NET || e->type == EV_COMP || e->type == EV_COMP_DONE ||
               e->type == EV_STOP || e->type == EV_ROGUE;
    if (!mine || !n || !n->alive || s->now >= n->paused_until) return 0;
    s_push(s, n->paused_until, e->type, e->node, e->gen, e->msg);
    return 1;
}

static void s_step(sim_t *s, ev_t *e)
{
    snode_t *n = e->node >= 0 && e->node < s->nnodes ? s->node[e->node] : NULL;
    if (s_held(s, e, n)) return;
    s_fold(s, ((uint64_t)e->type << 32) ^ (uint64_t)(e->node + 1) ^ (uint64_t)(s->now * 1e6));
    switch (e->type) {
    case EV_START: if (n && !n->alive && !(n->inc == 0 && n->killed_early)) s_node_start(n); break;
    case EV_DELIVER: s_deliver(s, e->msg); break;
    case EV_NET:
        if (n && n->alive && n->net && e->gen == n->ngen) {
            double next = netside_tick(n->net);
            s_check_join(n);
            if (n->alive && n->net) s_net_wake(n, next > s->now ? next : s->now + 1e-3);
        }
        break;
    case EV_COMP: if (n && e->gen == n->cgen) s_comp_run(n); break;
    case EV_COMP_DONE:
        if (n && n->alive && n->comp && e->gen == n->cgen) {
            n->busy = 0;
            compute_flush(n->comp);
            if (compute_finished(n->comp)) s_comp_ended(n);
            else s_comp_run(n);
        }
        break;
    case EV_STOP:
        if (n && n->alive && (int)e->gen == n->inc) {
            if (n->net && !netside_finished(n->net)) s_push(s, s->now + 0.25, EV_STOP, n->idx, e->gen, NULL);
            else s_node_stop(n, 0);
        }
        break;
    case EV_PLAN: s_apply_plan(s, &s->plan[e->node]); break;
    case EV_CHURN: s_churn(s); break;
    case EV_ROGUE:   /* one chain per incarnation */
        if (n && n->alive && n->rogue && (int)e->gen == n->inc) {
            s_rogue_send(s, n);
            s_push(s, s->now + ROGUE_EVERY_S, EV_ROGUE, n->idx, e->gen, NULL);
        }
        break;
    case EV_PROGRESS:
        s_progress(s);
        s_push(s, s->now + PROGRESS_EVERY_S, EV_PROGRESS, -1, 0, NULL);
        break;
    default: break;
    }
}

/* ---- the end ---- */

/* Modelled FLOPs of one microbatch through every stage: forward 2, backward
 * 4 per parameter and sample position (compute.c's model of the work). */
static double s_mb_flops(const sim_opts_t *so)
{
    double P = 0;
    char err[200];
    for (int st = 0; st < so->o.stages; st++) {
        stage_t lay;
        if (stage_init(&lay, &so->o.cfg, st, so->o.stages, err, sizeof err) < 0) return 0;
        P += (double)lay.nparams;
    }
    int T = so->o.cfg.kind == MODEL_GPT ? so->o.cfg.maxT : 1;
    return 6.0 * P * so->o.batch * T;
}

/* By when every node must have ended once the run completed: a grace
 * after the completion, or after the end of the last plan pause (a paused
 * node ends only after it resumes). */
static double s_end_deadline(const sim_t *s)
{
    return fmax(s->done_at, s->pause_end) + END_GRACE_S;
}

static void s_finish(sim_t *s)
{
    sim_result_t *r = s->res;
    uint64_t best = 0, sent = s->sent_dead + s->rogue_sent, recv = s->recv_dead;
    int complete = s->so.steps_given && isfinite(s->done_at);
    for (int i = 0; i < s->nnodes; i++) {
        snode_t *n = s->node[i];
        if (!n->alive) continue;
        if (complete && s->now >= s_end_deadline(s))
            s_violation(s, "node %d still running %.0f s after the run completed", i, s->now - s->done_at);
        if (n->net) {
            uint64_t c;
            double l;
            netside_progress(n->net, &c, &l);
            if (c > best) best = c;
            const net_counters_t *k = netside_counters(n->net);
            sent += atomic_load(&k->bytes_sent);
            recv += atomic_load(&k->bytes_recv);
        }
        s_close_compute(n, 0);
        r->node_seconds += s->now - n->started_at;
        s->capacity += (s->now - n->started_at) * s->so.gflops * 1e9 * n->speed;
    }
    double per_mb = s_mb_flops(&s->so);
    r->bound_mb = per_mb > 0 ? s->capacity / per_mb : 0;
    r->completed = best;
    r->target = s->so.steps_given ? (uint64_t)s->so.o.steps * (uint64_t)s->so.o.micro : 0;
    if (r->completed < s->best_done) r->completed = s->best_done;
    r->run_complete = s->so.steps_given ? complete : s->now >= s->so.sim_seconds - 1e-9;
    if (sent != r->bytes_sent) s_violation(s, "bytes sent by the nodes (%llu) differ from bytes put on the network (%llu)",
                                           (unsigned long long)sent, (unsigned long long)r->bytes_sent);
    if (r->bytes_sent != r->bytes_delivered + r->bytes_dropped + r->bytes_inflight)
        s_violation(s, "bytes sent %llu != delivered %llu + dropped %llu + in flight %llu", (unsigned long long)r->bytes_sent,
                    (unsigned long long)r->bytes_delivered, (unsigned long long)r->bytes_dropped, (unsigned long long)r->bytes_inflight);
    if (recv != r->bytes_delivered) s_violation(s, "bytes received by the nodes (%llu) differ from bytes delivered (%llu)",
                                                (unsigned long long)recv, (unsigned long long)r->bytes_delivered);
    r->sim_s = s->now;
    r->wall_s = s_wall() - s->wall0;
    r->cpu_s = metrics_cpu_process() - s->cpu0;
    r->trace = s->trace;
    r->nodes_total = s->nnodes;
    if (r->learn_n) r->learn_all_s /= r->learn_n;
}

static void s_free(sim_t *s)
{
    while (s->nheap) {
        ev_t e = s_pop(s);
        s_msg_free(e.msg);
    }
    free(s->heap);
    for (int i = 0; i < s->nnodes; i++) {
        snode_t *n = s->node[i];
        s_node_free_sides(n);
        metrics_close(&n->metrics);
        idmap_fini(&n->applied);
        free(n->links);
        keypair_wipe(&n->keys);
        free(n);
    }
    free(s->node);
    free(s->part);
    free(s->plan);
    free(s->pair_last);
    idmap_fini(&s->pair_ix);
    metrics_close(&s->metrics);
    vcache_destroy(&s->vcache);
}

/* ---- entry points ---- */

void sim_opts_defaults(sim_opts_t *so)
{
    memset(so, 0, sizeof *so);
    opts_defaults(&so->o, OPTS_SIM);
    so->nodes = 8;
    so->sim_seconds = 600;
    so->wall_seconds = 600;
    so->lat_lo = 20;
    so->lat_hi = 50;
    so->bw_lo = so->bw_hi = 100;
    so->speed_lo = so->speed_hi = 1;
    so->gflops = 50;
}

/* The fault plan of the run: --plan's events, then --faults random ones
 * (sim_plan_random) merged in by time, into s->plan / s->nplan.  0, or -1
 * with a one-line reason (s->plan may be set: the caller frees it). */
static int s_load_plan(sim_t *s, char *err, size_t errlen)
{
    const sim_opts_t *so = &s->so;
    if (so->plan[0]) {
        FILE *f = fopen(so->plan, "r");
        if (!f) { snprintf(err, errlen, "--plan %s: cannot read it", so->plan); return -1; }
        char *text = calloc(1, 1 << 20);
        char e2[256] = "out of memory";
        if (text) {   /* all of it or nothing: a folder, a read error or a cut last line is no plan */
            size_t got = fread(text, 1, (1 << 20) - 1, f);
            int more = got == (1 << 20) - 1 && fgetc(f) != EOF;
            const char *nul = memchr(text, 0, got);
            if (ferror(f)) snprintf(e2, sizeof e2, "cannot read it: %s", strerror(errno));
            else if (more) snprintf(e2, sizeof e2, "longer than 1 MiB");
            else if (nul) snprintf(e2, sizeof e2, "a NUL byte at offset %zu: not a text file", (size_t)(nul - text));
            if (ferror(f) || more || nul) { free(text); text = NULL; }
        }
        fclose(f);
        s->nplan = text ? sim_plan_parse(text, so->nodes, &s->plan, e2, sizeof e2) : -1;
        free(text);
        if (s->nplan < 0) { snprintf(err, errlen, "--plan %s: %s", so->plan, e2); return -1; }
    }
    if (so->faults > 0) {
        plan_ev_t *rnd = NULL;   /* left unset when sim_plan_random fails */
        double horizon = so->sim_seconds > 120 ? 60.0 : so->sim_seconds / 2;
        int k = sim_plan_random(so->o.seed, so->nodes, so->faults, horizon, &rnd);
        plan_ev_t *all = k < 0 ? NULL : realloc(s->plan, sizeof(plan_ev_t) * (size_t)(s->nplan + k));
        if (!all) { free(rnd); snprintf(err, errlen, "out of memory"); return -1; }
        for (int i = 0; i < k; i++) { all[s->nplan + i] = rnd[i]; all[s->nplan + i].line += 100000; }
        s->plan = all;
        s->nplan += k;
        free(rnd);
        qsort(s->plan, (size_t)s->nplan, sizeof *s->plan, s_plan_cmp);
    }
    return 0;
}

/* Runs the events in time order until none is left, the simulated end
 * (--sim-seconds, or a grace after every node is done) or the wall-clock
 * bound (a violation). */
static void s_event_loop(sim_t *s)
{
    const sim_opts_t *so = &s->so;
    double end = so->sim_seconds > 0 ? so->sim_seconds : 86400.0;
    uint64_t steps = 0;
    while (s->nheap) {
        if (s->heap[0].t > end) { s->now = end; break; }   /* nodes still leaving then are no fault */
        if (isfinite(s->done_at) && s->heap[0].t > s_end_deadline(s)) { s->now = s_end_deadline(s); break; }
        ev_t e = s_pop(s);
        s->now = e.t;
        s_step(s, &e);
        if (s_all_done(s)) break;
        if ((++steps & 1023) == 0 && s_wall() - s->wall0 > so->wall_seconds) {
            s_violation(s, "wall-clock bound of %.0f s reached at simulated %.1f s", so->wall_seconds, s->now);
            break;
        }
    }
}

int sim_run(const sim_opts_t *so, FILE *log, sim_result_t *res, char *err, size_t errlen)
{
    memset(res, 0, sizeof *res);
    res->first_loss = res->last_loss = NAN;
    sim_t *s = calloc(1, sizeof *s);
    if (!s) { snprintf(err, errlen, "out of memory"); return -1; }
    s->so = *so;
    s->log = log;
    s->res = res;
    s->rng = s_mix(so->o.seed ^ 0x51u);
    s->trace = 0xcbf29ce484222325ULL;
    s->done_at = INFINITY;
    s->wall0 = s_wall();
    s->cpu0 = metrics_cpu_process();
    idmap_init(&s->pair_ix);
    if (!so->steps_given) s->so.o.steps = 100000000;
    s->so.o.optim.total = s->so.o.steps;
    openblas_set_num_threads(1);
    if (s_load_plan(s, err, errlen)) { free(s->plan); free(s); return -1; }
    s->vcache = vcache_new(so->nodes > 128 ? 8 * so->nodes : 1024);
    s->metrics = s->vcache ? metrics_open(so->o.metrics, "sim", err, errlen) : NULL;
    if (!s->metrics) { if (!s->vcache) snprintf(err, errlen, "out of memory"); vcache_destroy(&s->vcache); free(s->plan); free(s); return -1; }
    if (log) fprintf(log, "brigade sim: %d nodes, %d stages, %s, %s compute, latency %g..%g ms, uplink %g..%g Mbit/s, speed %g..%g, seed %llu\n",
                     so->nodes, so->o.stages, so->o.cfg.name, so->real ? "real" : "modelled", so->lat_lo, so->lat_hi, so->bw_lo,
                     so->bw_hi, so->speed_lo, so->speed_hi, (unsigned long long)so->o.seed);
    metrics_set_clock(s->metrics, s_clock_now, s);
    for (int i = 0; i < so->nodes; i++) {
        snode_t *n = s_node_new(s);
        if (!n) { snprintf(err, errlen, "out of memory for %d nodes", so->nodes); s_free(s); free(s); return -1; }
        s_push(s, i == 0 ? 0.0 : 0.5 + 0.05 * i, EV_START, i, 0, NULL);
    }
    for (int i = 0; i < s->nplan; i++) s_push(s, s->plan[i].at, EV_PLAN, i, 0, NULL);
    if (so->churn_per_hour > 0)   /* the first leave after a 10 s start, then a Poisson process (s_churn) */
        s_push(s, 10.0 + s_exponential(s, so->nodes * so->churn_per_hour / 3600.0), EV_CHURN, -1, 0, NULL);
    s_push(s, PROGRESS_EVERY_S, EV_PROGRESS, -1, 0, NULL);
    s_event_loop(s);
    if (!so->steps_given) {
        /* a time-bounded run: what is still running has run its course */
        for (int i = 0; i < s->nnodes; i++)
            if (s->node[i]->alive && s->node[i]->comp && !s->node[i]->finished) compute_stop(s->node[i]->comp, 1);
    }
    s_finish(s);
    s_free(s);
    free(s);
    return 0;
}

/* ---- the plan ---- */

static int s_plan_node(const char *tok, int nodes, int line, const char *what, char *err, size_t errlen)
{
    char *end;
    long v = strtol(tok, &end, 10);
    if (!*tok || *end || v < 0 || v >= nodes) {
        snprintf(err, errlen, "line %d: %s: node '%.40s' is not a number in 0..%d", line, what, tok, nodes - 1);
        return -1;
    }
    return (int)v;
}

static int s_plan_cmp(const void *a, const void *b)
{
    const plan_ev_t *x = a, *y = b;
    if (x->at != y->at) return x->at < y->at ? -1 : 1;
    return x->line - y->line;   /* same time: file order */
}

/* One line of a plan into *p: 1 an event, 0 blank or comment, -1 error. */
static int s_plan_line(char *text, int nodes, int line, plan_ev_t *p, char *err, size_t errlen)
{
    char *hash = strchr(text, '#');
    if (hash) *hash = 0;
    char *tok[4] = {0}, *save = NULL;
    int nt = 0;
    for (char *t = strtok_r(text, " \t\r", &save); t; t = strtok_r(NULL, " \t\r", &save)) {
        if (nt == 4) { snprintf(err, errlen, "line %d: too many fields", line); return -1; }
        tok[nt++] = t;
    }
    if (nt == 0) return 0;
    memset(p, 0, sizeof *p);
    p->line = line;
    char *end;
    p->at = strtod(tok[0], &end);
    if (*end || !isfinite(p->at) || p->at < 0) { snprintf(err, errlen, "line %d: time '%.40s' is not a number of seconds >= 0", line, tok[0]); return -1; }
    if (nt < 2) { snprintf(err, errlen, "line %d: an event is missing after the time", line); return -1; }
    const char *w = tok[1];
    int need = 3;
    if (!strcmp(w, "kill")) p->kind = PLAN_KILL;
    else if (!strcmp(w, "restart")) p->kind = PLAN_RESTART;
    else if (!strcmp(w, "rogue")) p->kind = PLAN_ROGUE;
    else if (!strcmp(w, "slow")) { p->kind = PLAN_SLOW; need = 4; }
    else if (!strcmp(w, "pause")) { p->kind = PLAN_PAUSE; need = 4; }
    else if (!strcmp(w, "partition")) p->kind = PLAN_PARTITION;
    else if (!strcmp(w, "heal")) { p->kind = PLAN_HEAL; need = 2; }
    else { snprintf(err, errlen, "line %d: unknown event '%.40s' (kill, restart, slow, pause, partition, heal, rogue)", line, w); return -1; }
    if (nt != need) { snprintf(err, errlen, "line %d: %s takes %d field%s after the time", line, w, need - 2, need == 3 ? "" : "s"); return -1; }
    if (p->kind == PLAN_PARTITION) {
        char *s2 = NULL;
        for (char *t = strtok_r(tok[2], ",", &s2); t; t = strtok_r(NULL, ",", &s2)) {
            if (p->nset == (int)(sizeof p->set / sizeof p->set[0])) { snprintf(err, errlen, "line %d: partition: at most 64 nodes", line); return -1; }
            if ((p->set[p->nset++] = s_plan_node(t, nodes, line, "partition", err, errlen)) < 0) return -1;
        }
        if (!p->nset) { snprintf(err, errlen, "line %d: partition: no nodes", line); return -1; }
    } else if (p->kind != PLAN_HEAL) {
        if ((p->node = s_plan_node(tok[2], nodes, line, w, err, errlen)) < 0) return -1;
    }
    if (p->kind == PLAN_SLOW) {
        p->factor = strtod(tok[3], &end);
        if (*end || !isfinite(p->factor) || p->factor < 1.0 || p->factor > 1000.0) {
            snprintf(err, errlen, "line %d: slow: factor '%.40s' is not a number in 1..1000", line, tok[3]);
            return -1;
        }
    }
    if (p->kind == PLAN_PAUSE) {
        p->factor = strtod(tok[3], &end);
        if (*end || !isfinite(p->factor) || p->factor <= 0 || p->factor > 3600.0) {
            snprintf(err, errlen, "line %d: pause: '%.40s' is not a number of seconds in (0, 3600]", line, tok[3]);
            return -1;
        }
    }
    return 1;
}

int sim_plan_random(uint64_t seed, int nodes, int count, double horizon, plan_ev_t **out)
{
    plan_ev_t *ev = calloc((size_t)(2 * count + 1), sizeof *ev);
    if (!ev) return -1;
    uint64_t r = s_mix(seed ^ 0xfa17ULL);
    int n = 0;
#define U() ((double)((r = s_mix(r)) >> 11) * (1.0 / 9007199254740992.0))
    for (int k = 0; k < count; k++) {
        plan_ev_t *p = &ev[n++];
        p->at = 2.0 + U() * horizon;
        p->line = n;
        p->node = (int)(U() * nodes);
        double what = U();
        if (what < 0.45) {
            p->kind = PLAN_KILL;
            plan_ev_t *q = &ev[n++];
            *q = *p;
            q->kind = PLAN_RESTART;
            q->at = p->at + 1.0 + U() * 19.0;
            q->line = n;
        } else if (what < 0.6) {
            p->kind = PLAN_SLOW;
            p->factor = 2.0 + U() * 6.0;
        } else if (what < 0.7) {
            p->kind = PLAN_PAUSE;
            p->factor = 0.5 + U() * 9.5;
        } else if (what < 0.9) {
            p->kind = PLAN_PARTITION;
            p->nset = 1 + (int)(U() * (nodes / 2));
            int most = (int)(sizeof p->set / sizeof p->set[0]);   /* a side holds at most 64 nodes, as in a plan file */
            if (p->nset > most) p->nset = most;
            for (int i = 0; i < p->nset; i++) {   /* distinct nodes: nset <= max(1, nodes / 2), so a free one is drawn soon */
                int x, dup;
                do {
                    x = (int)(U() * nodes);
                    dup = 0;
                    for (int j = 0; j < i; j++) dup |= p->set[j] == x;
                } while (dup);
                p->set[i] = x;
            }
            plan_ev_t *q = &ev[n++];
            memset(q, 0, sizeof *q);
            q->kind = PLAN_HEAL;
            q->at = p->at + 1.0 + U() * 9.0;
            q->line = n;
        } else {
            p->kind = PLAN_ROGUE;
        }
    }
#undef U
    qsort(ev, (size_t)n, sizeof *ev, s_plan_cmp);
    *out = ev;
    return n;
}

int sim_plan_parse(const char *text, int nodes, plan_ev_t **out, char *err, size_t errlen)
{
    *out = NULL;
    char *copy = strdup(text);
    if (!copy) { snprintf(err, errlen, "out of memory"); return -1; }
    int n = 0, cap = 0, line = 0;
    plan_ev_t *ev = NULL;
    for (char *l = copy, *nl; l; l = nl) {
        nl = strchr(l, '\n');
        if (nl) *nl++ = 0;
        line++;
        plan_ev_t p;
        int r = s_plan_line(l, nodes, line, &p, err, errlen);
        if (r < 0) { free(ev); free(copy); return -1; }
        if (r == 0) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            plan_ev_t *e2 = realloc(ev, sizeof(plan_ev_t) * (size_t)cap);
            if (!e2) { free(ev); free(copy); snprintf(err, errlen, "out of memory"); return -1; }
            ev = e2;
        }
        ev[n++] = p;
    }
    free(copy);
    if (n) qsort(ev, (size_t)n, sizeof *ev, s_plan_cmp);
    *out = ev;
    return n;
}
