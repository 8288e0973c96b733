/* node.c: a node in production (node.h): the network and compute sides on
 * two threads, the ZeroMQ transport as their network port, the monotonic
 * clock as their clock. */
#include "node/runtime/node.h"
#include "net/transport.h"
#include "node/engine/gpt2file.h"
#include "node/runtime/netside.h"
#include "node/runtime/pending.h"
#include "node/runtime/queue.h"
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAILBOX_TENSORS 4096   /* tensor mail waiting for the compute side before more is dropped (or
                                  PENDING_BYTES of it, as in the compute side's own queues: pending.h) */
#define BOARD_EVERY_S 1.0      /* the status board is refreshed this often */
#define BOARD_MAX 4096         /* rows on it */

struct node {
    opts_t o;                  /* options; a joiner's run config is filled in at WELCOME */
    keypair_t keys;            /* identity */
    uint64_t id;
    char idshort[9];
    uint8_t ticket[TICKET_LEN];
    int has_ticket;
    char adv[PEER_ADDR_MAX];   /* HOST:PORT others reach us at */
    char join_addr[ADDR_TEXT_MAX];
    char ckpt_path[OPT_PATH + 16];
    char local_data[OPT_PATH]; /* --data as given on this node's command line, or "" */
    metrics_t *metrics;        /* borrowed */
    node_observer_t obs;
    transport_t *tr;           /* the I/O thread's (the caller's outside node_run) */
    netside_t *net;            /* driven by the I/O thread */
    compute_t *comp;           /* driven by the caller's thread */
    queue_t to_net, to_comp;   /* the two mailboxes */
    atomic_int interrupt;      /* node_interrupt calls so far */
    atomic_int io_stop;        /* the I/O thread must end */
    atomic_int net_done;       /* the network side has said what it must at the end (set by the I/O thread) */
    atomic_uint_fast64_t mail_drops;  /* tensor mail refused because the compute side's mailbox was full */
    atomic_size_t mail_bytes;         /* mail_bytes() of the tensor mail in to_comp */
    atomic_uint_fast64_t cpu_compute_us, cpu_io_us;  /* CPU time of each thread, written by it as it ends */
    pthread_mutex_t board_lock;       /* guards the board */
    node_peer_row_t *board;    /* the peer table as last published by the I/O thread */
    int nboard;
    uint64_t board_completed;
    double board_loss;
    node_result_t final;       /* filled when node_run ends */
    char ckpt_failed[300];     /* why the final checkpoint was not written ("": it was, or none was due) */
};

/* ---- clock and port ---- */

static double s_clock_now(void *arg) { (void)arg; return metrics_now(); }

static uint64_t s_clock_wall_ms(void *arg)
{
    (void)arg;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)(ts.tv_nsec / 1000000);
}

static int s_port_connect(void *arg, const char *addr, const uint8_t pub[32], char *err, size_t errlen)
{
    node_t *n = arg;
    char host[ADDR_HOST_MAX];
    int port;
    if (hostport_parse(addr, host, sizeof host, &port, 0, err, errlen) < 0) return -1;
    return transport_connect(n->tr, host, port, pub, err, errlen);
}

static void s_port_disconnect(void *arg, int link)
{
    node_t *n = arg;
    transport_disconnect(n->tr, link);
}

static int s_port_send(void *arg, int link, const transport_msg_t *to, const wire_hdr_t *h,
                       const void *const *f, const size_t *l, int nf, uint64_t virt)
{
    node_t *n = arg;
    (void)virt;
    if (link >= 0) return transport_send(n->tr, link, h, f, l, nf);
    return to ? transport_reply(n->tr, to, h, f, l, nf) : -1;
}

static int s_port_adopt(void *arg, int link, const transport_msg_t *from)
{
    node_t *n = arg;
    return transport_adopt(n->tr, link, from);
}

/* A message or client the transport refused: the network side counts it,
 * logs it and strikes the sender.  The transport calls this inside
 * transport_poll(), on the thread that drives the network side at that
 * moment (s_net_round), so netside is touched by its one owner. */
static void s_transport_drop(void *arg, const char *why, const uint8_t *pubkey)
{
    node_t *n = arg;
    if (n->net) netside_on_drop(n->net, why, pubkey);
}

/* ---- mailboxes ---- */

static void s_post_comp(void *arg, mail_t *m)
{
    node_t *n = arg;
    if (m->kind == MAIL_TENSOR) {
        size_t b = mail_bytes(m);
        if (!pending_fits(queue_len(&n->to_comp), atomic_load(&n->mail_bytes), b, MAILBOX_TENSORS)) {
            /* the compute side is far behind: the sender's data stage re-issues this work */
            atomic_fetch_add(&n->mail_drops, 1);
            mail_free(m);
            return;
        }
        atomic_fetch_add(&n->mail_bytes, b);
    }
    queue_push(&n->to_comp, &m->q);
}

static void s_post_net(void *arg, mail_t *m)
{
    node_t *n = arg;
    queue_push(&n->to_net, &m->q);
    transport_wake(n->tr);
}

/* ---- the status board ---- */

static void s_board_publish(node_t *n)
{
    const peers_t *t = netside_peers(n->net);
    uint64_t completed;
    double loss;
    netside_progress(n->net, &completed, &loss);
    pthread_mutex_lock(&n->board_lock);
    int k = 0;
    for (int i = 0; i < t->n && k < BOARD_MAX; i++) {
        const peer_t *p = &t->p[i];
        node_peer_row_t *r = &n->board[k++];
        r->id = p->info.id;
        r->stage = p->info.stage;
        snprintf(r->addr, sizeof r->addr, "%s", p->info.addr);
        r->rate = p->info.rate;
        r->rtt_ms = (float)p->rtt_ms;
        r->health = p->health;
        r->version = p->info.version;
        r->self = p->info.id == n->id;
        r->loss = (float)p->last_loss;
    }
    n->nboard = k;
    n->board_completed = completed;
    n->board_loss = loss;
    pthread_mutex_unlock(&n->board_lock);
}

int node_peer_rows(node_t *n, node_peer_row_t *out, int max)
{
    pthread_mutex_lock(&n->board_lock);
    int k = n->nboard < max ? n->nboard : max;
    memcpy(out, n->board, sizeof(node_peer_row_t) * (size_t)k);
    pthread_mutex_unlock(&n->board_lock);
    return k;
}

void node_progress(node_t *n, uint64_t *completed, double *loss)
{
    pthread_mutex_lock(&n->board_lock);
    *completed = n->board_completed;
    *loss = n->board_loss;
    pthread_mutex_unlock(&n->board_lock);
}

/* ---- the I/O thread ---- */

static void s_net_mail(node_t *n)
{
    queue_item_t *q;
    while ((q = queue_pop(&n->to_net, 0))) netside_on_mail(n->net, (mail_t *)q);
}

/* One round of the network side: mail, timers, at most one message. */
static void s_net_round(node_t *n, int max_wait_ms)
{
    s_net_mail(n);
    double next = netside_tick(n->net), wait = (next - metrics_now()) * 1000.0;
    int ms = wait < 0 ? 0 : wait > max_wait_ms ? max_wait_ms : (int)wait;
    transport_msg_t m;
    if (transport_poll(n->tr, ms, &m) == 1) {
        netside_on_msg(n->net, &m, 0);
        transport_msg_close(&m);
    }
}

/* The calling thread's CPU time since `since` (its CPU seconds then), in microseconds. */
static uint64_t s_cpu_us(double since)
{
    double d = metrics_cpu_thread() - since;
    return d > 0 ? (uint64_t)(d * 1e6) : 0;
}

static void *s_io_thread(void *arg)
{
    node_t *n = arg;
    double next_board = 0, cpu0 = metrics_cpu_thread();
    while (!atomic_load(&n->io_stop)) {
        s_net_round(n, 20);
        if (!atomic_load(&n->net_done) && netside_finished(n->net)) atomic_store(&n->net_done, 1);
        if (metrics_now() >= next_board) { s_board_publish(n); next_board = metrics_now() + BOARD_EVERY_S; }
    }
    s_net_mail(n);
    s_board_publish(n);
    atomic_store(&n->cpu_io_us, s_cpu_us(cpu0));
    return NULL;
}

/* ---- the compute thread (the caller's) ---- */

static void s_comp_mail(node_t *n)
{
    queue_item_t *q;
    while ((q = queue_pop(&n->to_comp, 0))) {
        mail_t *m = (mail_t *)q;
        if (m->kind == MAIL_TENSOR) atomic_fetch_sub(&n->mail_bytes, mail_bytes(m));
        compute_on_mail(n->comp, m);
    }
}

/* --emu-slowdown F: compute F times slower than it is (test-only). */
static void s_slowdown(const node_t *n, double t_start)
{
    if (n->o.emu_slowdown <= 1.0) return;
    double dt = (metrics_now() - t_start) * (n->o.emu_slowdown - 1.0);
    if (dt > 0) usleep((useconds_t)(dt * 1e6));
}

static void s_compute_loop(node_t *n)
{
    while (!compute_finished(n->comp)) {
        s_comp_mail(n);
        if (atomic_load(&n->interrupt)) compute_stop(n->comp, COMPUTE_STOPPED);
        double next = compute_tick(n->comp);
        double t = metrics_now();
        int did = compute_step(n->comp, NULL);
        if (did) {
            s_slowdown(n, t);
            compute_account(n->comp, metrics_now() - t);
        }
        compute_flush(n->comp);
        if (did) continue;
        double wait = (next - metrics_now()) * 1000.0;
        queue_wait(&n->to_comp, wait < 1 ? 1 : wait > 5 ? 5 : (int)wait);
    }
    compute_flush(n->comp);
}

/* A completed run leaves its final state in --checkpoint DIR: the periodic
 * checkpoints come only every --save-every updates, so without this the
 * stages of a finished swarm would be assembled from different versions.
 * A node stopped by a signal saves too, so that it resumes where it was.
 * Skipped only when the file already holds this stage at this version: a
 * version that is a multiple of --save-every may have come by a download or
 * a move, which writes nothing. */
static void s_final_checkpoint(node_t *n, const compute_result_t *r)
{
    if ((r->done != COMPUTE_ENDED && r->done != COMPUTE_STOPPED) || r->status != 0 || !n->ckpt_path[0] || r->saved)
        return;
    char err[300];
    if (compute_save_checkpoint(n->comp, err, sizeof err) < 0) {
        metrics_event(n->metrics, "checkpoint", "\"ok\":false,\"why\":%s", err);
        snprintf(n->ckpt_failed, sizeof n->ckpt_failed, "%s, but its final checkpoint was not written (%s)",
                 r->done == COMPUTE_ENDED ? "run complete" : "stopped", err);
    }
}

int node_run(node_t *n)
{
    pthread_t io;
    if (pthread_create(&io, NULL, s_io_thread, n) != 0) {
        snprintf(n->final.c.why, sizeof n->final.c.why, "cannot start the I/O thread");
        n->final.c.status = 1;
        return 1;
    }
    double cpu0 = metrics_cpu_thread();
    s_compute_loop(n);
    atomic_store(&n->cpu_compute_us, s_cpu_us(cpu0));
    compute_result_t r;
    compute_result(n->comp, &r);
    s_final_checkpoint(n, &r);
    mail_t *leave = mail_new(MAIL_LEAVE);
    if (leave) {
        leave->self.stage = r.stage;
        leave->self.version = r.version;
        leave->self.completed = r.completed;
        leave->self.loss = NAN;
        leave->self.done = r.done;
        leave->self.status = r.status;
        s_post_net(n, leave);
    }
    /* let the I/O thread say what must be said (after a completed run: until
     * every peer heard, at most the network side's linger), then stop it; a
     * signal meanwhile cuts the wait short (it was 15 s of Ctrl-C unheard) */
    double until = metrics_now() + 20.0;
    int asked = atomic_load(&n->interrupt);
    while (metrics_now() < until && (queue_len(&n->to_net) > 0 || !atomic_load(&n->net_done))
           && atomic_load(&n->interrupt) == asked) {
        struct timespec ts = { 0, 10 * 1000000L };
        nanosleep(&ts, NULL);
    }
    struct timespec ts = { 0, 100 * 1000000L };
    nanosleep(&ts, NULL);
    atomic_store(&n->io_stop, 1);
    transport_wake(n->tr);
    pthread_join(io, NULL);
    if (r.done == COMPUTE_STOPPED) {
        /* interrupted: say goodbye so peers route around at once; let the links deliver it */
        netside_bye(n->net);
        for (int i = 0; i < 10; i++) s_net_round(n, 20);
    }
    node_result(n, &n->final);
    return r.status || n->ckpt_failed[0] ? 1 : 0;
}

void node_interrupt(node_t *n)
{
    atomic_fetch_add(&n->interrupt, 1);
}

void node_result(const node_t *n, node_result_t *out)
{
    memset(out, 0, sizeof *out);
    if (n->comp) compute_result(n->comp, &out->c);
    else out->c = n->final.c;
    if (n->ckpt_failed[0] && out->c.status == 0) {   /* the run went well, its end did not */
        out->c.status = 1;
        snprintf(out->c.why, sizeof out->c.why, "%s", n->ckpt_failed);
    }
    const net_counters_t *k = netside_counters(n->net);
    out->bytes_sent = atomic_load(&k->bytes_sent);
    out->bytes_sent_raw = atomic_load(&k->bytes_sent_raw);
    out->bytes_sent_state = atomic_load(&k->bytes_sent_state);
    out->bytes_recv = atomic_load(&k->bytes_recv);
    out->drops = atomic_load(&k->drops) + out->c.drops + atomic_load(&n->mail_drops);
    out->relay_bytes = atomic_load(&k->relay_bytes);
    out->relay_msgs = atomic_load(&k->relay_msgs);
    out->relay_refused = atomic_load(&k->relay_refused);
    out->cpu_compute_s = atomic_load(&n->cpu_compute_us) * 1e-6;
    out->cpu_io_s = atomic_load(&n->cpu_io_us) * 1e-6;
}

/* ---- start-up ---- */

int node_join(node_t *n, char *err, size_t errlen)
{
    if (!n->o.join[0]) return 0;
    if (netside_join(n->net, n->o.join, n->o.stage, err, errlen) < 0) return -1;
    int r;
    while ((r = netside_join_state(n->net, err, errlen)) == 0) {
        if (atomic_load(&n->interrupt)) { snprintf(err, errlen, "interrupted while joining"); return -1; }
        s_net_round(n, 100);
    }
    if (r < 0) return -1;
    if (netside_stage(n->net) == 0) {
        /* the data path comes from whoever started the run: a joiner reads files only when it names them itself */
        if (n->local_data[0]) {
            size_t kr = strcspn(n->o.data, ":"), kl = strcspn(n->local_data, ":");
            if (kr != kl || strncmp(n->o.data, n->local_data, kr) != 0) {   /* synthetic, text or fmnist */
                snprintf(err, errlen, "--data %s: this run reads '%s' on its data stage (0); pass your own copy of the same "
                         "kind of data, or --stage N for another stage", n->local_data, n->o.data);
                return -1;
            }
            snprintf(n->o.data, sizeof n->o.data, "%s", n->local_data);
        } else if (strncmp(n->o.data, "synthetic", 9) != 0 && strcmp(n->o.data, "fmnist") != 0) {
            snprintf(err, errlen, "this run reads '%s' on its data stage (0); to serve it, pass --data with your own copy "
                     "of that data, or --stage N for another stage", n->o.data);
            return -1;
        }
    }
    return 0;
}

/* Tells the network side this node's stage and tensor sizes before anything else runs. */
static void s_announce_stage(node_t *n, const stage_t *lay, int plan)
{
    int T = n->o.cfg.kind == MODEL_GPT ? n->o.cfg.maxT : 1;
    self_info_t s = {0};
    s.stage = netside_stage(n->net);
    s.plan = plan;
    s.in_n = stage_in_size(lay, n->o.batch, T);
    s.out_n = stage_out_size(lay, n->o.batch, T);
    s.nparams = lay->nparams;
    s.version = 0;
    s.loss = NAN;
    netside_set_self(n->net, &s);
}

/* 1 when ck is a checkpoint of this run and this node's stage. */
static int s_ck_ours(const node_t *n, const checkpoint_info_t *ck)
{
    return ck && ck->run == netside_run(n->net) && ck->stage == netside_stage(n->net) && ck->nstages == n->o.stages;
}

model_config_t node_start_cfg(const node_t *n, const checkpoint_info_t *ck, int *plan)
{
    model_config_t cfg = n->o.cfg;
    *plan = compute_plan(&n->o, s_ck_ours(n, ck) && ck->version > 0 ? (int)ck->cfg.split : -1, netside_plan(n->net));
    if (*plan >= 0) cfg.split = (model_split_t)*plan;
    return cfg;
}

/* A run started from a checkpoint (--init): this stage's slice of it from
 * this node's copy, when its hash is the run's; a node without a copy needs
 * the state of a checkpoint of its own or of a peer (have_state).  0, or -1
 * with a one-line reason. */
static int s_init_from_file(const node_t *n, const model_config_t *cfg, int stage, float *params, int have_state,
                            char *err, size_t errlen)
{
    const opts_t *o = &n->o;
    char why[400];
    if (o->init_size == 0 && o->init[0]) {
        snprintf(err, errlen, "--init %s: this run does not start from a checkpoint (its creator gave no --init)", o->init);
        return -1;
    }
    if (o->init_size == 0 || (!o->init[0] && have_state)) return 0;
    if (!o->init[0]) {
        snprintf(err, errlen, "--init: this run starts from a checkpoint of %llu bytes, and no peer holds stage %d's "
                 "state yet: give this node a copy with --init FILE", (unsigned long long)o->init_size, stage);
        return -1;
    }
    if (opts_check_init(o, why, sizeof why) < 0 || gpt2file_load_stage(o->init, cfg, stage, o->stages, params, why,
                                                                       sizeof why) < 0) {
        snprintf(err, errlen, "--init %s", why);
        return -1;
    }
    return 0;
}

int node_prepare(node_t *n, const checkpoint_info_t *ck, const float *ck_state, const char *ckpt_path,
                 char *err, size_t errlen)
{
    int stage = netside_stage(n->net);
    uint64_t run = netside_run(n->net);
    snprintf(n->ckpt_path, sizeof n->ckpt_path, "%s", ckpt_path ? ckpt_path : "");
    compute_cfg_t cc = {0};
    int ck_ours = s_ck_ours(n, ck), use_ck;
    model_config_t cfg = node_start_cfg(n, ck, &cc.plan);
    if (ck_ours && ck->cfg.split != cfg.split) ck_ours = 0;   /* written before --split auto chose: initial weights */
    cc.st = stage_state_new(&cfg, stage, n->o.stages, n->o.seed, err, errlen);
    if (!cc.st) return -1;
    s_announce_stage(n, &cc.st->s, cc.plan);
    cc.view = netside_view(n->net);
    uint64_t donor;
    cc.start = compute_choose_start(cc.view, stage, ck_ours ? ck->version : -1, n->o.join[0] != 0, &donor, &use_ck);
    if (s_init_from_file(n, &cfg, stage, cc.st->params, ck_ours || donor, err, errlen) < 0) {
        stage_state_destroy(&cc.st);
        free(cc.view);
        return -1;
    }
    if (ck_ours) {
        /* also when a peer is further ahead: a download that fails leaves the checkpoint's state (it
         * once left the initial weights, which the next save wrote over the checkpoint), and the data
         * position and count of completed microbatches are this node's own either way */
        size_t np = cc.st->s.nparams;
        memcpy(cc.st->params, ck_state, sizeof(float) * np);
        memcpy(cc.st->m, ck_state + np, sizeof(float) * np);
        memcpy(cc.st->v, ck_state + 2 * np, sizeof(float) * np);
        cc.st->version = ck->version;
        cc.cursor = ck->cursor;
        cc.completed = ck->completed;
        if (use_ck)
            fprintf(stderr, "brigade node: resumed stage %d at version %lld from %s\n", stage, (long long)ck->version, ckpt_path);
        else
            fprintf(stderr, "brigade node: %s holds stage %d at version %lld; a peer is further ahead\n", ckpt_path, stage,
                    (long long)ck->version);
    }
    cc.donor = donor;
    if (donor) fprintf(stderr, "brigade node: downloading stage %d's state from a peer...\n", stage);
    if (stage == 0) {
        char why[400];
        cc.data = data_open(n->o.data, model_data_kind(&n->o.cfg), n->o.cfg.maxT, n->o.seed, why, sizeof why);
        if (!cc.data) snprintf(err, errlen, "--data: %s", why);
        if (cc.data && model_check_data(&n->o.cfg, cc.data, n->o.data, err, errlen) < 0) data_close(&cc.data);
        if (!cc.data) { stage_state_destroy(&cc.st); free(cc.view); return -1; }
    }
    cc.o = &n->o;
    cc.id = n->id;
    cc.run = run;
    cc.stage = stage;
    cc.shard = netside_shard(n->net);
    cc.ckpt_path = n->ckpt_path;
    cc.metrics = n->metrics;
    cc.clock = (rt_clock_t){ .arg = n, .now = s_clock_now, .wall_ms = s_clock_wall_ms };
    cc.post = s_post_net;
    cc.post_arg = n;
    cc.net = netside_counters(n->net);
    cc.obs = n->obs;
    n->comp = compute_new(&cc, err, errlen);
    if (!n->comp) return -1;
    compute_flush(n->comp);
    s_net_mail(n);   /* the compute side's first words (its stage, a fetch) before any thread runs */
    return 0;
}

/* ---- life cycle ---- */

static int s_advertise(node_t *n, const char *listen_host, char *err, size_t errlen)
{
    if (n->o.advertise[0]) {
        if (strlen(n->o.advertise) >= sizeof n->adv) { snprintf(err, errlen, "--advertise: too long"); return -1; }
        memcpy(n->adv, n->o.advertise, strlen(n->o.advertise) + 1);
    } else {
        const char *h = listen_host;
        if (!strcmp(h, "0.0.0.0") || !strcmp(h, "*") || !strcmp(h, "::")) {
            h = "127.0.0.1";
            fprintf(stderr, "brigade node: listening on all interfaces without --advertise: peers are told 127.0.0.1, "
                            "which only works on this machine (pass --advertise PUBLIC_HOST:PORT)\n");
        }
        hostport_format(n->adv, sizeof n->adv, h, transport_port(n->tr));
    }
    char ah[ADDR_HOST_MAX];
    int ap;
    if (hostport_parse(n->adv, ah, sizeof ah, &ap, 0, err, errlen) < 0) return -1;
    addr_format(n->join_addr, sizeof n->join_addr, ah, ap, n->keys.pub);
    return 0;
}

node_t *node_new(const node_cfg_t *cfg, char *err, size_t errlen)
{
    node_t *n = calloc(1, sizeof *n);
    if (!n) { snprintf(err, errlen, "out of memory"); return NULL; }
    n->o = *cfg->o;
    n->keys = *cfg->keys;
    n->id = node_id_from_pubkey(n->keys.pub);
    node_id_short(n->id, n->idshort);
    n->metrics = cfg->metrics;
    n->obs = cfg->obs;
    if (cfg->ticket) { memcpy(n->ticket, cfg->ticket, TICKET_LEN); n->has_ticket = 1; }
    if (cfg->local_data) snprintf(n->local_data, sizeof n->local_data, "%s", cfg->local_data);
    queue_init(&n->to_net);
    queue_init(&n->to_comp);
    pthread_mutex_init(&n->board_lock, NULL);
    n->board = calloc(BOARD_MAX, sizeof *n->board);
    transport_opts_t to = {0};
    to.listen_host = cfg->listen_host;
    to.listen_port = cfg->listen_port;
    to.keys = &n->keys;
    to.sndhwm = 1000;
    to.on_drop = s_transport_drop;
    to.drop_arg = n;
    to.emu_latency_ms = n->o.emu_latency_ms;
    to.emu_jitter_ms = n->o.emu_jitter_ms;
    to.emu_bandwidth_mbit = n->o.emu_bandwidth_mbit;
    to.emu_downlink_mbit = n->o.emu_downlink_mbit;
    to.emu_loss = n->o.emu_loss;
    to.emu_seed = n->id;
    if (!n->board) { snprintf(err, errlen, "out of memory"); node_destroy(&n); return NULL; }
    n->tr = transport_new(&to, err, errlen);
    if (!n->tr || s_advertise(n, cfg->listen_host, err, errlen) < 0) { node_destroy(&n); return NULL; }
    netside_cfg_t nc = {0};
    nc.o = &n->o;
    nc.keys = &n->keys;
    nc.ticket = n->has_ticket ? n->ticket : NULL;
    nc.adv = n->adv;
    nc.clock = (rt_clock_t){ .arg = n, .now = s_clock_now, .wall_ms = s_clock_wall_ms };
    nc.port = (rt_port_t){ .arg = n, .connect = s_port_connect, .disconnect = s_port_disconnect, .send = s_port_send,
                           .adopt = s_port_adopt };
    nc.metrics = n->metrics;
    nc.post = s_post_comp;
    nc.post_arg = n;
    nc.no_listen = cfg->no_listen;
    nc.relay = cfg->relay;
    nc.relay_mbit = n->o.relay_mbit;
    nc.emu_relay_tamper = n->o.emu_relay_tamper;
    n->net = netside_new(&nc, err, errlen);
    if (!n->net) { node_destroy(&n); return NULL; }
    return n;
}

void node_destroy(node_t **self_p)
{
    node_t *n = *self_p;
    if (!n) return;
    compute_destroy(&n->comp);
    netside_destroy(&n->net);
    transport_destroy(&n->tr);
    queue_fini(&n->to_net, mail_free_q);
    queue_fini(&n->to_comp, mail_free_q);
    pthread_mutex_destroy(&n->board_lock);
    free(n->board);
    keypair_wipe(&n->keys);
    free(n);
    *self_p = NULL;
}

const char *node_join_addr(const node_t *n) { return n->join_addr; }
uint64_t node_id(const node_t *n) { return n->id; }
const char *node_idshort(const node_t *n) { return n->idshort; }
const opts_t *node_opts(const node_t *n) { return &n->o; }
uint64_t node_run_id(const node_t *n) { return netside_run(n->net); }
int node_stage(const node_t *n) { return netside_stage(n->net); }
int node_outward(const node_t *n) { return netside_outward(n->net); }
