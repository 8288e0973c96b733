/* node_cmd.c: `brigade node`: one pipeline stage of a swarm.  (keygen and
 * status: keygen_cmd.c, status_cmd.c.) */
#include "node/cli/cli.h"
#include "node/cli/progress.h"
#include "node/cli/statuspage.h"
#include "node/cli/stopsig.h"
#include "node/engine/gemm.h"
#include "node/engine/gpt2file.h"
#include "node/engine/modelfile.h"
#include "node/runtime/netside.h"
#include "node/runtime/node.h"
#include "compress/cpu.h"
#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sodium.h>

static void s_node_help(void)
{
    printf("usage: brigade node [--listen HOST:PORT] [--join HOST:PORT/KEY] [--stage auto|N] [options]\n\n"
           "Serves one pipeline stage of a swarm.  Without --join it starts a new run whose\n"
           "model, data and training options are its own; with --join it receives them from\n"
           "the swarm.  It prints its address (join with: --join HOST:PORT/KEY) at start.\n\n"
           "options:\n");
    opts_help(stdout, OPTS_NODE);
}

/* What the user sees of a running node: the progress line and the --http
 * status page, fed by the node's reports (compute thread) and read by the
 * page's server thread. */
typedef struct {
    node_t *n;                 /* the node shown */
    double t0;                 /* when it started */
    int stage0;                /* its stage at start: shown until the first report (node_stage is
                                  the network side's, not to be read while the node runs) */
    pthread_mutex_t lock;      /* guards hist and last */
    status_history_t hist;     /* loss curve */
    node_report_t last;        /* the latest report */
    status_snapshot_t *snap;   /* the page's snapshot (server thread) */
    node_peer_row_t *rows;     /* scratch for the peer table (server thread) */
    http_server_t *http;       /* the server, or NULL */
    progress_t prog;           /* the progress lines (compute thread, then the main thread after node_run) */
} view_t;

/* After each update: the progress line (every 5 s, and at the last update) and the page's history. */
static void s_on_report(void *arg, const node_report_t *r)
{
    view_t *v = arg;
    pthread_mutex_lock(&v->lock);
    status_history_add(&v->hist, (uint64_t)r->version, r->loss);
    v->last = *r;
    pthread_mutex_unlock(&v->lock);
    char lossbuf[32] = "-";
    if (r->last && isfinite(r->loss)) snprintf(lossbuf, sizeof lossbuf, "%.4f", r->loss);
    double el = r->elapsed_s;
    int final = v->n && r->version >= node_opts(v->n)->steps;   /* the run's last update is always shown */
    progress_line(&v->prog, final, 5.0, "stage %d/%d | peers %d | update %lld | loss %s | %.0f tok/s | out %.1f kB/s x%.2f | stash %d | rtt %.1f ms",
                  r->stage, r->nstages, r->peers, (long long)r->version, lossbuf, el > 0 ? r->tokens / el : 0.0,
                  el > 0 ? r->bytes_sent / el / 1e3 : 0.0, r->bytes_sent ? (double)r->bytes_sent_raw / r->bytes_sent : 0.0,
                  r->stash, r->rtt_ms);
}

static void s_on_say(void *arg, const char *line)
{
    view_t *v = arg;
    progress_line(&v->prog, 1, 0, "%s", line);
    progress_done(&v->prog);
}

/* The status page: a snapshot of the node and its peer table (503 while
 * the node is still joining and getting its stage's state). */
static int s_http(void *arg, const char *path, http_reply_t *r)
{
    view_t *v = arg;
    pthread_mutex_lock(&v->lock);
    node_t *n = v->n;
    if (!n) {
        pthread_mutex_unlock(&v->lock);
        r->status = 503;
        http_reply_type(r, "text/plain; charset=utf-8");
        return http_reply_printf(r, "503 the node is starting: joining its swarm, getting its stage's state\n");
    }
    const opts_t *o = node_opts(n);
    status_snapshot_t *s = v->snap;
    memset(s, 0, sizeof *s);
    node_report_t last = v->last;
    status_history_copy(s, &v->hist);
    pthread_mutex_unlock(&v->lock);
    snprintf(s->node, sizeof s->node, "%s", node_idshort(n));
    snprintf(s->role, sizeof s->role, "node");
    s->stage = last.nstages ? last.stage : v->stage0;
    s->nstages = o->stages;
    snprintf(s->model, sizeof s->model, "%s", o->cfg.name);
    snprintf(s->run, sizeof s->run, "%016llx", (unsigned long long)node_run_id(n));
    snprintf(s->join_addr, sizeof s->join_addr, "%s", node_join_addr(n));
    s->uptime_s = metrics_now() - v->t0;
    s->version = s->updates = (uint64_t)last.version;
    s->steps_total = (uint64_t)o->steps * (uint64_t)o->micro;
    s->tokens = last.tokens;
    s->tokens_per_s = s->uptime_s > 0 ? (double)s->tokens / s->uptime_s : 0;
    s->bytes_sent = last.bytes_sent;
    s->bytes_sent_raw = last.bytes_sent_raw;
    s->bytes_recv = last.bytes_recv;
    s->drops = last.drops;
    s->inflight = last.inflight;
    double loss;
    node_progress(n, &s->steps_done, &loss);
    s->loss = loss;
    int k = node_peer_rows(n, v->rows, STATUS_PEERS_MAX);
    for (int i = 0; i < k; i++) {
        const node_peer_row_t *p = &v->rows[i];
        status_peer_t *q = &s->peers[s->npeers++];
        node_id_short(p->id, q->id);
        q->stage = p->stage;
        snprintf(q->addr, sizeof q->addr, "%s", p->addr);
        q->rate = p->rate;
        q->rtt_ms = p->rtt_ms;
        snprintf(q->health, sizeof q->health, "%s", p->health == PEER_GONE ? "gone" : p->health == PEER_SLOW ? "slow" : "alive");
        q->version = p->self ? s->version : p->version;
        q->self = p->self;
    }
    return status_serve(s, path, r);
}

/* Everything `brigade node` holds, released in one place. */
typedef struct {
    opts_t o;                  /* options as given */
    keypair_t keys;            /* identity */
    uint8_t ticket[TICKET_LEN];
    int has_ticket;
    char listen_host[ADDR_HOST_MAX];
    int listen_port;
    char ckpt_path[OPT_PATH + 16];  /* DIR/stage.ckpt, or "" */
    checkpoint_info_t ck;      /* a checkpoint found there */
    float *ck_state;           /* its params|m|v, or NULL */
    int ckpt_lock;             /* the folder's lock (checkpoint_find), or -1: held to the process's end */
    metrics_t *metrics;
    node_t *node;
    view_t view;
    stopsig_target_t stop;     /* what a signal calls: node_interrupt(node) */
    double t0;
} node_cmd_t;

/* A signal's call (async-signal-safe, as node_interrupt is). */
static void s_interrupt(void *node)
{
    node_interrupt(node);
}

/* Parses and checks the command line, loads keys and tickets.  0, or -1 with a reason. */
static int s_setup(node_cmd_t *x, int argc, char **argv, char *err, size_t errlen)
{
    opts_t *o = &x->o;
    if (hostport_parse(o->listen, x->listen_host, sizeof x->listen_host, &x->listen_port, 1, err, errlen) < 0) {
        char e2[600];
        snprintf(e2, sizeof e2, "--listen %s", err);
        snprintf(err, errlen, "%s", e2);
        return -1;
    }
    (void)argc; (void)argv;
    if (o->no_listen) {
        if (!o->join[0]) {
            snprintf(err, errlen, "--no-listen: the node that starts a run must be reachable (use --no-listen with --join)");
            return -1;
        }
        snprintf(x->listen_host, sizeof x->listen_host, "127.0.0.1");   /* a socket nobody is told of */
        x->listen_port = 0;
    }
    if (o->relay[0] && strcmp(o->relay, "on") && strcmp(o->relay, "off")) {
        snprintf(err, errlen, "--relay %s: want on or off", o->relay);
        return -1;
    }
    if (o->join[0]) {
        char host[ADDR_HOST_MAX], e2[400];
        int port;
        uint8_t key[32];
        if (addr_parse(o->join, host, sizeof host, &port, key, e2, sizeof e2) < 0) { snprintf(err, errlen, "--join %s", e2); return -1; }
    }
    char why[400];
    if (o->keys[0] && keypair_load(&x->keys, o->keys, why, sizeof why) < 0) { snprintf(err, errlen, "--keys: %s", why); return -1; }
    if (!o->keys[0] && keypair_generate(&x->keys, err, errlen) < 0) return -1;
    if (o->owner[0] && o->join[0]) { snprintf(err, errlen, "--owner starts a closed swarm; a joiner passes --ticket instead"); return -1; }
    if (o->owner[0] && o->ticket[0]) { snprintf(err, errlen, "--owner admits this node itself; leave out --ticket"); return -1; }
    if (o->ticket[0] && !o->join[0]) { snprintf(err, errlen, "--ticket admits a joiner: pass it with --join"); return -1; }
    if (o->owner[0]) {
        /* a closed swarm: the run carries the owner's public key; this node admits itself */
        owner_keys_t ok;
        ticket_t t;
        if (owner_keys_load(&ok, o->owner, why, sizeof why) < 0) { snprintf(err, errlen, "--owner: %s", why); return -1; }
        o->closed = 1;
        memcpy(o->owner_pub, ok.pub, 32);
        int r2 = ticket_issue(&t, &ok, x->keys.pub, 0, err, errlen);
        owner_keys_wipe(&ok);
        if (r2 < 0) return -1;
        ticket_encode(x->ticket, &t);
        x->has_ticket = 1;
    } else if (o->ticket[0]) {
        if (cli_read_ticket(o->ticket, x->ticket, err, errlen) < 0) return -1;
        x->has_ticket = 1;
    }
    if (!o->join[0]) {
        /* this node creates the run */
        stage_t probe;
        if (stage_init(&probe, &o->cfg, 0, o->stages, err, errlen) < 0) return -1;
        if (o->stage >= o->stages) { snprintf(err, errlen, "--stage %d: the run has %d stages", o->stage, o->stages); return -1; }
    }
    return 0;
}

/* --init FILE: its size and hash into the run config; the node that creates
 * the run checks that the file is of its model before it starts (a joiner
 * checks its copy against the run's at its stage's start).  0, or -1 with a
 * one-line reason. */
static int s_init_check(opts_t *o, char *err, size_t errlen)
{
    char why[400];
    float *p = NULL;
    if (opts_set_init(o, why, sizeof why) < 0
        || (!o->join[0] && !(p = gpt2file_load(o->init, 0, &o->cfg, 1, NULL, why, sizeof why)))) {
        snprintf(err, errlen, "--init %s", why);
        return -1;
    }
    free(p);
    return 0;
}

/* A checkpoint left by an earlier run of this node, if any (its stage becomes the wanted one). */
static int s_checkpoint(node_cmd_t *x, char *err, size_t errlen)
{
    opts_t *o = &x->o;
    if (!o->checkpoint[0]) return 0;
    size_t np;
    int found = checkpoint_find(o->checkpoint, x->ckpt_path, sizeof x->ckpt_path, &x->ck, &x->ck_state, &np, &x->ckpt_lock,
                                err, errlen);
    if (found <= 0) return found;
    if (o->stage < 0) { o->stage = x->ck.stage; o->stage_run = x->ck.run; }
    if (!o->join[0]) {
        uint64_t run = opts_run_id(o);
        int stage = o->stage < 0 ? 0 : o->stage;
        if (x->ck.run != run || x->ck.stage != stage) {
            snprintf(err, errlen, "--checkpoint %s: holds stage %d of another run or stage; use another folder or the same options",
                     o->checkpoint, x->ck.stage);
            return -1;
        }
    }
    return 0;
}

/* A joiner whose --checkpoint folder holds another run's stage, or another
 * stage of this run than the one it serves (--stage N): that file is renamed
 * to DIR/stage.RUN.ckpt (RUN its run id), or DIR/stage.RUN.sK.ckpt (K its
 * stage), or where a file of that name was kept before, to the first free
 * DIR/stage.RUN[.sK].N.ckpt (N from 2), before this node's first save would
 * overwrite it, and the node says so; -1 if it cannot be kept. */
static int s_keep_aside(node_cmd_t *x, char *err, size_t errlen)
{
    int same_run = x->ck.run == node_run_id(x->node);
    char kept[sizeof x->ckpt_path + 48], what[64], stage[16] = "";
    if (same_run) {
        snprintf(stage, sizeof stage, ".s%d", x->ck.stage);
        snprintf(what, sizeof what, "stage %d of this run", x->ck.stage);
    } else {
        snprintf(what, sizeof what, "stage %d of run %016llx", x->ck.stage, (unsigned long long)x->ck.run);
    }
    struct stat sb;
    for (int k = 1; k < 1000; k++) {   /* the folder's lock is ours: no one else names files here */
        char nth[16] = "";
        if (k > 1) snprintf(nth, sizeof nth, ".%d", k);
        snprintf(kept, sizeof kept, "%s/stage.%016llx%s%s.ckpt", x->o.checkpoint, (unsigned long long)x->ck.run, stage, nth);
        if (lstat(kept, &sb) < 0 && errno == ENOENT) break;
    }
    if (rename(x->ckpt_path, kept) < 0) {
        snprintf(err, errlen, "--checkpoint %s: holds %s and it could not be kept as %s (%s); use another folder",
                 x->o.checkpoint, what, kept, strerror(errno));
        return -1;
    }
    fprintf(stderr, "brigade node: --checkpoint %s held %s (version %lld), kept as %s\n", x->o.checkpoint, what,
            (long long)x->ck.version, kept);
    free(x->ck_state);
    x->ck_state = NULL;
    return 0;
}

/* Starts the node: transport, join, the stage's state, the status page. */
static int s_start(node_cmd_t *x, char *err, size_t errlen)
{
    opts_t *o = &x->o;
    if (!o->join[0] && o->stage < 0) o->stage = 0;
    x->view.t0 = metrics_now();
    progress_init(&x->view.prog);
    pthread_mutex_init(&x->view.lock, NULL);
    status_history_init(&x->view.hist);
    node_cfg_t nc = {0};
    nc.o = o;
    nc.keys = &x->keys;
    nc.ticket = x->has_ticket ? x->ticket : NULL;
    nc.listen_host = x->listen_host;
    nc.listen_port = x->listen_port;
    nc.no_listen = o->no_listen;
    nc.relay = strcmp(o->relay, "off") != 0;
    nc.local_data = opts_given(o, "data") ? o->data : NULL;
    nc.metrics = x->metrics;
    nc.obs = (node_observer_t){ .arg = &x->view, .report = s_on_report, .say = s_on_say };
    if (opts_given(o, "http")) {   /* bound before joining: a port in use is a bad option, not a node that joins and leaves */
        x->view.snap = malloc(sizeof *x->view.snap);
        x->view.rows = malloc(sizeof(node_peer_row_t) * STATUS_PEERS_MAX);
        if (!x->view.snap || !x->view.rows) { snprintf(err, errlen, "out of memory"); return -1; }
        x->view.http = http_start(NULL, o->http, s_http, &x->view, err, errlen);
        if (!x->view.http) return -1;
    }
    x->node = node_new(&nc, err, errlen);
    if (x->node) {   /* a signal from now on stops it (while it joins too) */
        x->stop = (stopsig_target_t){ .fn = s_interrupt, .arg = x->node };
        stopsig_watch(&x->stop);
    }
    if (x->view.http)   /* known now: it answers 503 while the node joins */
        fprintf(stderr, "status page: http://127.0.0.1:%d/ (and /status.json)\n", http_port(x->view.http));
    if (x->node && o->join[0] && isatty(STDERR_FILENO))   /* a wait of up to 15 s; a failed start stays one line in a log */
        fprintf(stderr, "brigade node: joining the swarm at %.*s ...\n", (int)strcspn(o->join, "/"), o->join);
    if (!x->node || node_join(x->node, err, errlen) < 0) return -1;
    if (x->ck_state && (x->ck.run != node_run_id(x->node) || x->ck.stage != node_stage(x->node))
        && s_keep_aside(x, err, errlen) < 0) return -1;
    const opts_t *run = node_opts(x->node);
    openblas_set_num_threads(1);   /* the engine's own threads (--threads) each run single-threaded BLAS */
    metrics_set_stage(x->metrics, node_stage(x->node));
    /* the start event precedes everything the node's sides write */
    stage_t lay;
    int plan;
    model_config_t cfg = node_start_cfg(x->node, x->ck_state ? &x->ck : NULL, &plan);   /* its split (--split auto) */
    if (stage_init(&lay, &cfg, node_stage(x->node), run->stages, err, errlen) < 0) return -1;
    int64_t version = x->ck_state && x->ck.stage == node_stage(x->node) && x->ck.run == node_run_id(x->node) ? x->ck.version : 0;
#define START_FMT(reach) "\"role\":\"node\",\"run\":\"%016llx\",\"model\":%s,\"params\":%zu," \
        "\"join_addr\":%s,\"stages\":%d,\"codec\":%s,\"grad_codec\":%s,\"optim\":%s,\"version\":%lld,\"cpu\":%s,\"gemm\":%s," \
        "\"reachable\":" reach
    metrics_event(x->metrics, "start", node_outward(x->node) ? START_FMT("false") : START_FMT("true"),
                  (unsigned long long)node_run_id(x->node), run->cfg.name, lay.nparams, node_join_addr(x->node), run->stages,
                  run->codec, run->grad_codec, optim_kind_name(run->optim.kind), (long long)version,
                  cpu_level_name(cpu_level()), gemm_name());
#undef START_FMT
    if (node_outward(x->node))
        fprintf(stderr, "brigade node: %s: peers send to this node over the links it opens\n",
                o->no_listen ? "--no-listen" : "the swarm could not reach this node's address (behind NAT?)");
    if (node_prepare(x->node, x->ck_state ? &x->ck : NULL, x->ck_state, x->ckpt_path, err, errlen) < 0) return -1;
    free(x->ck_state);
    x->ck_state = NULL;
    fprintf(stderr, "brigade node %s: stage %d of %d, %s, %zu parameters here\n", node_idshort(x->node), node_stage(x->node),
            run->stages, run->cfg.name, lay.nparams);
    if (!o->keys[0])
        fprintf(stderr, "brigade node: a fresh identity for this run (brigade keygen --out DIR, then --keys DIR, keeps one)\n");
    if (!o->no_listen) fprintf(stderr, "join with: --join %s\n", node_join_addr(x->node));
    pthread_mutex_lock(&x->view.lock);
    x->view.stage0 = node_stage(x->node);
    x->view.n = x->node;   /* the page shows it from now on */
    pthread_mutex_unlock(&x->view.lock);
    return 0;
}

/* The `end` event and the last line: written on every path once metrics are open. */
static void s_end(node_cmd_t *x, int status, const char *why)
{
    const char *word = stopsig_end_status(status);
    node_result_t r = {0};
    if (x->node) node_result(x->node, &r);
    double wall = metrics_now() - x->t0;
    metrics_event(x->metrics, "end", "\"status\":%s,\"updates\":%lld,\"tokens\":%llu,\"wall_s\":%.3f,"
                  "\"lost_microbatches\":%llu,\"bytes_sent\":%llu,\"bytes_sent_raw\":%llu,\"bytes_sent_state\":%llu,\"drops\":%llu,"
                  "\"relay_bytes\":%llu,\"relay_msgs\":%llu,\"relay_refused\":%llu,\"cpu_s\":%.3f,\"cpu_compute_s\":%.3f,"
                  "\"cpu_io_s\":%.3f,\"why\":%s",
                  word, (long long)r.c.version, (unsigned long long)r.c.tokens, wall,
                  (unsigned long long)r.c.lost, (unsigned long long)r.bytes_sent, (unsigned long long)r.bytes_sent_raw,
                  (unsigned long long)r.bytes_sent_state, (unsigned long long)r.drops, (unsigned long long)r.relay_bytes,
                  (unsigned long long)r.relay_msgs, (unsigned long long)r.relay_refused, metrics_cpu_process(),
                  r.cpu_compute_s, r.cpu_io_s, status ? why : "completed");
    if (x->node && (r.c.tokens + r.c.version > 0 || status > 128))   /* a signal's reason even before any work */
        fprintf(stderr, "brigade node %s: %s after %.1f s, %lld updates\n", node_idshort(x->node), status ? why : "run complete",
                wall, (long long)r.c.version);
}

static void s_cleanup(node_cmd_t *x)
{
    stopsig_watch(NULL);
    http_stop(&x->view.http);
    free(x->view.snap);
    free(x->view.rows);
    node_destroy(&x->node);
    metrics_close(&x->metrics);
    free(x->ck_state);
    keypair_wipe(&x->keys);
    sodium_memzero(x->ticket, sizeof x->ticket);
}

int cmd_node(int argc, char **argv)
{
    node_cmd_t *x = calloc(1, sizeof *x);
    if (!x) return cli_fail("out of memory");
    char err[512] = "";
    opts_t *o = &x->o;
    opts_defaults(o, OPTS_NODE);
    snprintf(o->listen, sizeof o->listen, "0.0.0.0:7700");
    int r = opts_parse(o, OPTS_NODE, argc, argv, 2, err, sizeof err);
    if (r == 1) { s_node_help(); free(x); return 0; }
    if (r < 0 || opts_resolve(o, err, sizeof err) < 0
        || (o->init[0] && s_init_check(o, err, sizeof err) < 0)) {
        free(x);
        return cli_fail(err);
    }
    int status = 2;
    x->t0 = metrics_now();
    /* output whose reader went (`| head`, a closed pipe) is lost, not the run: without this the
     * next progress line killed the node, with no checkpoint, goodbye or end event */
    signal(SIGPIPE, SIG_IGN);
    if (s_setup(x, argc, argv, err, sizeof err) == 0) {
        char idshort[9];
        node_id_short(node_id_from_pubkey(x->keys.pub), idshort);
        x->metrics = metrics_open(o->metrics, idshort, err, sizeof err);
    }
    if (!x->metrics) {
        s_cleanup(x);
        free(x);
        return cli_fail(err);
    }
    /* from here on every path ends with the `end` event (a signal while joining too) */
    stopsig_install();   /* SIGINT, SIGTERM, SIGHUP (its terminal closed: an ssh session dropped) */
    if (s_checkpoint(x, err, sizeof err) == 0 && s_start(x, err, sizeof err) == 0) {
        status = node_run(x->node);
        progress_done(&x->view.prog);
        node_result_t res;
        node_result(x->node, &res);
        snprintf(err, sizeof err, "%s", res.c.why);
        int sig = stopsig_caught();
        if (res.c.done == COMPUTE_STOPPED && status == 0) {   /* stopped early on purpose: 128 + the signal, as a shell says */
            stopsig_reason(sig, err, sizeof err);
            status = stopsig_status(sig);
        }
        s_end(x, status, err);
        if (status && status < 128) fprintf(stderr, "brigade node: %s\n", err);
    } else if (stopsig_caught()) {   /* stopped while starting (joining) */
        int sig = stopsig_caught();
        stopsig_reason(sig, err, sizeof err);
        status = stopsig_status(sig);
        s_end(x, status, err);   /* its line, once the node exists */
        if (!x->node) fprintf(stderr, "brigade node: %s while starting\n", err);
    } else {
        s_end(x, status, err);
        cli_fail(err);
    }
    s_cleanup(x);
    free(x);
    return status;
}
