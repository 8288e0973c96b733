/* sim.c: `brigade sim`'s driver (sim.h): the nodes' lives, their compute
 * and network sides' wake-ups, the event heap and loop.  The virtual
 * network is simnet.c's, the fault plans simplan.c's, the invariants and
 * results siminv.c's. */
#include "node/runtime/simcore.h"
#include "node/engine/data.h"
#include <cblas.h>
#include <math.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- small helpers ---- */

uint64_t sim_mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

double sim_uniform(sim_t *s)
{
    s->rng = sim_mix(s->rng);
    return (double)(s->rng >> 11) * (1.0 / 9007199254740992.0);
}

/* An exponential waiting time of the given rate (events per second). */
double sim_exponential(sim_t *s, double rate)
{
    return -log(1.0 - sim_uniform(s)) / rate;
}

/* A deterministic number in [lo, hi] for a key (per node or per link). */
double sim_range(const sim_t *s, uint64_t key, double lo, double hi)
{
    double u = (double)(sim_mix(s->so.o.seed ^ sim_mix(key)) >> 11) * (1.0 / 9007199254740992.0);
    return lo + (hi - lo) * u;
}

void sim_fold(sim_t *s, uint64_t x)
{
    s->trace = sim_mix(s->trace ^ x);
}

double sim_wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

void sim_violation(sim_t *s, const char *fmt, ...)
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

void sim_push(sim_t *s, double t, int type, int node, uint64_t gen, simmsg_t *msg)
{
    if (s->nheap == s->capheap) {
        int cap = s->capheap ? 2 * s->capheap : 1024;
        ev_t *h = realloc(s->heap, sizeof(ev_t) * (size_t)cap);
        if (!h) { sim_violation(s, "out of memory for events"); free(msg); return; }
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

/* ---- nodes ---- */


/* Mail from a node's network side to its compute side: queued until the compute side is free. */
static void s_post_comp(void *arg, mail_t *m)
{
    snode_t *n = arg;
    m->q.next = NULL;
    if (n->mtail) n->mtail->q.next = &m->q;
    else n->mhead = m;
    n->mtail = m;
    if (!n->busy) sim_comp_wake(n, n->sim->now);
}

/* Mail from the compute side: the network side takes it at once. */
static void s_post_net(void *arg, mail_t *m)
{
    snode_t *n = arg;
    if (!n->net) { mail_free(m); return; }
    netside_on_mail(n->net, m);
    sim_net_kick(n);
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
    cc.obs = (node_observer_t){ .arg = n, .report = sim_report, .say = s_say, .trace = sim_trace };
    cc.modelled = !s->so.real;
    n->comp = compute_new(&cc, err, errlen);
    if (!n->comp) return -1;
    n->chk.last_vstage = -1;
    n->chk.last_v = -1;
    compute_flush(n->comp);
    simtime_prepared(n);
    sim_comp_wake(n, s->now);
    return 0;
}

static void s_net_wake(snode_t *n, double at)
{
    n->ngen++;
    n->nwake = at;
    sim_push(n->sim, at, EV_NET, n->idx, n->ngen, NULL);
}

/* Runs what is due on a node's network side now and moves its next wake-up
 * earlier when something new asks for it (as the I/O thread's short polls do). */
void sim_net_kick(snode_t *n)
{
    if (!n->alive || !n->net) return;
    double next = netside_tick(n->net);
    if (next < n->sim->now + 1e-3) next = n->sim->now + 1e-3;
    if (next < n->nwake) s_net_wake(n, next);
}

void sim_comp_wake(snode_t *n, double at)
{
    if (n->busy) return;          /* the end of its step runs it (a new generation would orphan that event) */
    if (n->cwake <= at) return;   /* already due by then */
    n->cwake = at;
    n->cgen++;
    sim_push(n->sim, at, EV_COMP, n->idx, n->cgen, NULL);
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
    int k = (int)(sim_uniform(s) * cand);
    for (int i = 0; i < s->nnodes; i++) {
        snode_t *n = s->node[i];
        if (i != except && n->alive && !n->finished && (n->joined || !n->joiner) && k-- == 0) return i;
    }
    return -1;
}

snode_t *sim_node_new(sim_t *s)
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
    n->speed = sim_range(s, 0x5eedULL << 32 | (uint64_t)n->idx, s->so.speed_lo, s->so.speed_hi);
    double mbit = sim_range(s, 0xb0bULL << 32 | (uint64_t)n->idx, s->so.bw_lo, s->so.bw_hi);
    n->bps = mbit > 0 ? mbit * 1e6 : 0;
    n->slow = 1.0;
    n->cwake = INFINITY;
    n->tm.what = -1;
    idmap_init(&n->chk.applied);
    s->node[s->nnodes++] = n;
    return n;
}

/* Starts (or restarts) node n: the creator serves at once, others join. */
void sim_node_start(snode_t *n)
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
    simtime_set(n, SIM_T_OTHER);
    if (n->inc > 1) n->paused_until = 0;   /* a pause planned before its first start holds */
    n->closed = 0;
    n->chk.issued = n->chk.resolved = 0;
    if (n->inc > 1) {
        /* a restarted process: its weights come anew (downloaded, a backup or
         * initial), without what the dead one applied, so a re-issued
         * microbatch it had applied is applied once to these; its versions
         * start over with them */
        idmap_clear(&n->chk.applied);
        n->chk.last_vstage = -1;
    }
    n->o = s->so.o;
    n->joiner = n->idx != 0 || n->inc > 1;
    n->o.stage = 0;
    int via = -1;
    if (n->rogue) sim_push(s, s->now + ROGUE_EVERY_S, EV_ROGUE, n->idx, (uint64_t)n->inc, NULL);
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
    nc.port = (rt_port_t){ .arg = n, .connect = sim_port_connect, .disconnect = sim_port_disconnect, .send = sim_port_send };
    nc.metrics = n->metrics;
    nc.post = s_post_comp;
    nc.post_arg = n;
    nc.modelled = !s->so.real;
    nc.vcache = s->vcache;
    n->net = netside_new(&nc, err, sizeof err);
    if (!n->net) { sim_violation(s, "node %d: %s", n->idx, err); n->alive = 0; return; }
    /* every node of a sim runs node 0's config, so the run id is known before a joiner's WELCOME */
    metrics_event(n->metrics, "start", "\"role\":\"sim\",\"run\":\"%016llx\",\"model\":%s,\"join_addr\":%s,\"incarnation\":%d",
                  (unsigned long long)opts_run_id(&s->so.o), n->o.cfg.name, n->addr, n->inc);
    if (n->joiner) {
        if (netside_join(n->net, n->o.join, -1, err, sizeof err) < 0) sim_violation(s, "node %d join: %s", n->idx, err);
    } else if (s_node_prepare(n, err, sizeof err) < 0) {
        sim_violation(s, "node %d could not start its stage: %s", n->idx, err);
    }
    s_net_wake(n, s->now);
}

/* Frees a node's sides (its counters go to the totals). */
static void s_node_free_sides(snode_t *n)
{
    sim_t *s = n->sim;
    sim_close_compute(n, 1);
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
    sim_msg_free(n->last_in);
    n->last_in = NULL;
    n->busy = 0;
    n->cgen++;
    n->ngen++;
    n->cwake = INFINITY;
}

/* The node leaves: crash (gone at once) or after its compute side ended (BYE/DONE said). */
void sim_node_stop(snode_t *n, int crash)
{
    if (!n->alive) return;
    if (n->net) {
        uint64_t c;
        double l;
        netside_progress(n->net, &c, &l);
        if (c > n->sim->best_done) n->sim->best_done = c;
    }
    if (!crash && n->net) netside_bye(n->net);
    simtime_set(n, -1);
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
    sim_progressed(s);
    simtime_set(n, SIM_T_OTHER);
    compute_result_t r;
    compute_result(n->comp, &r);
    if (r.status == 0 && r.done == 1 && r.stage == n->o.stages - 1 && !isfinite(s->done_at) && s->so.steps_given) s->done_at = s->now;
    if (r.status && !isfinite(s->done_at)) sim_violation(s, "node %d failed: %s", n->idx, r.why);
    sim_close_compute(n, 0);
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
    sim_push(s, s->now + STOP_AFTER_S, EV_STOP, n->idx, (uint64_t)n->inc, NULL);
}

/* What an idle compute side's time goes to (compute_idle's reason). */
static int s_idle_what(int idle)
{
    switch (idle) {
    case COMPUTE_IDLE_INPUT: return SIM_T_INPUT;
    case COMPUTE_IDLE_HELD: return SIM_T_HELD;
    case COMPUTE_IDLE_WINDOW: return SIM_T_WINDOW;
    default: return SIM_T_OTHER;
    }
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
        simtime_set(n, SIM_T_COMPUTE);
        n->busy = 1;
        n->cgen++;
        sim_push(s, s->now + dur, EV_COMP_DONE, n->idx, n->cgen, NULL);
        return;
    }
    compute_flush(n->comp);
    if (compute_finished(n->comp)) { s_comp_ended(n); return; }
    simtime_set(n, s_idle_what(compute_idle(n->comp)));
    sim_comp_wake(n, next > s->now ? next : s->now + 1e-3);
}

/* A joiner's state after something happened to it. */
void sim_check_join(snode_t *n)
{
    if (!n->joiner || n->joined || !n->net || !n->alive) return;
    char err[320];
    int r = netside_join_state(n->net, err, sizeof err);
    if (r == 1) {
        n->joined = 1;
        if (s_node_prepare(n, err, sizeof err) < 0) sim_violation(n->sim, "node %d could not start its stage after joining: %s", n->idx, err);
    } else if (r < 0) {
        /* refused, silent bootstrap or a finished run: try again elsewhere, unless the run is over */
        if (n->sim->log && !n->sim->so.quiet) fprintf(n->sim->log, "sim %8.1f s: node %d: %s\n", n->sim->now, n->idx, err);
        sim_node_stop(n, 1);
        n->finished = 1;
        if (!isfinite(n->sim->done_at) && !strstr(err, "already finished")) sim_push(n->sim, n->sim->now + REJOIN_S, EV_START, n->idx, 0, NULL);
    }
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
            s->now, sim_wall() - s->wall0, metrics_cpu_process() - s->cpu0, alive, serving, (unsigned long long)done,
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
    sim_push(s, n->paused_until, e->type, e->node, e->gen, e->msg);
    return 1;
}

static void s_step(sim_t *s, ev_t *e)
{
    snode_t *n = e->node >= 0 && e->node < s->nnodes ? s->node[e->node] : NULL;
    if (s_held(s, e, n)) return;
    sim_fold(s, ((uint64_t)e->type << 32) ^ (uint64_t)(e->node + 1) ^ (uint64_t)(s->now * 1e6));
    switch (e->type) {
    case EV_START: if (n && !n->alive && !(n->inc == 0 && n->killed_early)) sim_node_start(n); break;
    case EV_DELIVER: sim_deliver(s, e->msg); break;
    case EV_NET:
        if (n && n->alive && n->net && e->gen == n->ngen) {
            double next = netside_tick(n->net);
            sim_check_join(n);
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
            if (n->net && !netside_finished(n->net)) sim_push(s, s->now + 0.25, EV_STOP, n->idx, e->gen, NULL);
            else sim_node_stop(n, 0);
        }
        break;
    case EV_PLAN: sim_apply_plan(s, &s->plan[e->node]); break;
    case EV_CHURN: sim_churn(s); break;
    case EV_ROGUE:   /* one chain per incarnation */
        if (n && n->alive && n->rogue && (int)e->gen == n->inc) {
            sim_rogue_send(s, n);
            sim_push(s, s->now + ROGUE_EVERY_S, EV_ROGUE, n->idx, e->gen, NULL);
        }
        break;
    case EV_PROGRESS:
        s_progress(s);
        sim_check_live(s);
        sim_push(s, s->now + PROGRESS_EVERY_S, EV_PROGRESS, -1, 0, NULL);
        break;
    default: break;
    }
}

static void s_free(sim_t *s)
{
    while (s->nheap) {
        ev_t e = s_pop(s);
        sim_msg_free(e.msg);
    }
    free(s->heap);
    for (int i = 0; i < s->nnodes; i++) {
        snode_t *n = s->node[i];
        s_node_free_sides(n);
        metrics_close(&n->metrics);
        idmap_fini(&n->chk.applied);
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
        if (isfinite(s->done_at) && s->heap[0].t > sim_end_deadline(s)) { s->now = sim_end_deadline(s); break; }
        ev_t e = s_pop(s);
        s->now = e.t;
        s_step(s, &e);
        if (s_all_done(s)) break;
        if ((++steps & 1023) == 0 && sim_wall() - s->wall0 > so->wall_seconds) {
            sim_violation(s, "wall-clock bound of %.0f s reached at simulated %.1f s", so->wall_seconds, s->now);
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
    s->rng = sim_mix(so->o.seed ^ 0x51u);
    s->trace = 0xcbf29ce484222325ULL;
    s->done_at = INFINITY;
    s->wall0 = sim_wall();
    s->cpu0 = metrics_cpu_process();
    idmap_init(&s->pair_ix);
    if (!so->steps_given) s->so.o.steps = 100000000;
    s->so.o.optim.total = s->so.o.steps;
    openblas_set_num_threads(1);
    if (sim_load_plan(s, err, errlen)) { free(s->plan); free(s); return -1; }
    s->vcache = vcache_new(so->nodes > 128 ? 8 * so->nodes : 1024);
    s->metrics = s->vcache ? metrics_open(so->o.metrics, "sim", err, errlen) : NULL;
    if (!s->metrics) { if (!s->vcache) snprintf(err, errlen, "out of memory"); vcache_destroy(&s->vcache); free(s->plan); free(s); return -1; }
    if (log) fprintf(log, "brigade sim: %d nodes, %d stages, %s, %s compute, latency %g..%g ms, uplink %g..%g Mbit/s, speed %g..%g, seed %llu\n",
                     so->nodes, so->o.stages, so->o.cfg.name, so->real ? "real" : "modelled", so->lat_lo, so->lat_hi, so->bw_lo,
                     so->bw_hi, so->speed_lo, so->speed_hi, (unsigned long long)so->o.seed);
    metrics_set_clock(s->metrics, s_clock_now, s);
    for (int i = 0; i < so->nodes; i++) {
        snode_t *n = sim_node_new(s);
        if (!n) { snprintf(err, errlen, "out of memory for %d nodes", so->nodes); s_free(s); free(s); return -1; }
        sim_push(s, i == 0 ? 0.0 : 0.5 + 0.05 * i, EV_START, i, 0, NULL);
    }
    for (int i = 0; i < s->nplan; i++) sim_push(s, s->plan[i].at, EV_PLAN, i, 0, NULL);
    if (so->churn_per_hour > 0)   /* the first leave after a 10 s start, then a Poisson process (sim_churn) */
        sim_push(s, 10.0 + sim_exponential(s, so->nodes * so->churn_per_hour / 3600.0), EV_CHURN, -1, 0, NULL);
    sim_push(s, PROGRESS_EVERY_S, EV_PROGRESS, -1, 0, NULL);
    s_event_loop(s);
    if (!so->steps_given) {
        /* a time-bounded run: what is still running has run its course */
        for (int i = 0; i < s->nnodes; i++)
            if (s->node[i]->alive && s->node[i]->comp && !s->node[i]->finished) compute_stop(s->node[i]->comp, 1);
    }
    sim_finish(s);
    s_free(s);
    free(s);
    return 0;
}
