/* node_cmd.c: `brigade node` (one pipeline stage of a swarm), `brigade
 * keygen` and `brigade status`. */
#include "node/cli/cli.h"
#include "node/engine/modelfile.h"
#include "node/runtime/progress.h"
#include "node/runtime/swarm.h"
#include "node/cli/statuspage.h"
#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static node_t *s_node;

static void s_on_signal(int sig)
{
    (void)sig;
    if (s_node) atomic_store(&s_node->done, 2);
}

static void s_node_help(void)
{
    printf("usage: brigade node [--listen HOST:PORT] [--join HOST:PORT/KEY] [--stage auto|N] [options]\n\n"
           "Serves one pipeline stage of a swarm.  Without --join it starts a new run whose\n"
           "model, data and training options are its own; with --join it receives them from\n"
           "the swarm.  It prints its address (join with: --join HOST:PORT/KEY) at start.\n\n"
           "options:\n");
    opts_help(stdout, OPTS_NODE);
}

/* Picks a donor: the alive peer of our stage with the highest version. */
static uint64_t s_donor(node_t *n)
{
    uint64_t best = 0;
    uint32_t bv = 0;
    pthread_mutex_lock(&n->peers.lock);
    for (int i = 0; i < n->peers.n; i++) {
        peer_t *p = &n->peers.p[i];
        if (p->info.id != n->id && p->info.stage == n->stage && p->health != PEER_GONE && (!best || p->info.version >= bv)) {
            best = p->info.id;
            bv = p->info.version;
        }
    }
    pthread_mutex_unlock(&n->peers.lock);
    return best;
}

/* The --http status page of a node: its loss history and the snapshot it renders. */
typedef struct {
    node_t *n;                 /* the node shown */
    pthread_mutex_t lock;      /* guards hist */
    status_history_t hist;     /* loss curve */
    status_snapshot_t *snap;   /* the page's snapshot, filled under the locks */
    http_server_t *http;       /* the server, or NULL */
} page_t;

/* Records the loss of an update in the page's history (any thread). */
static void s_note_loss(void *arg, int64_t update, double loss)
{
    page_t *pg = arg;
    pthread_mutex_lock(&pg->lock);
    status_history_add(&pg->hist, (uint64_t)update, loss);
    pthread_mutex_unlock(&pg->lock);
}

/* The status page: a snapshot of the node and its peer table. */
static int s_http(void *arg, const char *path, http_reply_t *r)
{
    page_t *pg = arg;
    node_t *n = pg->n;
    status_snapshot_t *s = pg->snap;
    memset(s, 0, sizeof *s);
    snprintf(s->node, sizeof s->node, "%s", n->idshort);
    snprintf(s->role, sizeof s->role, "node");
    s->stage = n->stage;
    s->nstages = n->nstages;
    snprintf(s->model, sizeof s->model, "%s", n->o.cfg.name);
    snprintf(s->run, sizeof s->run, "%016llx", (unsigned long long)n->run);
    snprintf(s->join_addr, sizeof s->join_addr, "%s", n->join_addr);
    s->uptime_s = metrics_now() - n->t0;
    s->version = s->updates = (uint64_t)atomic_load(&n->version);
    s->steps_total = n->target;
    s->tokens = (double)atomic_load(&n->tokens);
    s->tokens_per_s = s->uptime_s > 0 ? s->tokens / s->uptime_s : 0;
    s->loss = atomic_load(&n->last_loss);
    s->bytes_sent = atomic_load(&n->bytes_sent);
    s->bytes_sent_raw = atomic_load(&n->bytes_sent_raw);
    s->bytes_recv = atomic_load(&n->bytes_recv);
    s->drops = atomic_load(&n->drops);
    s->steps_done = peers_completed(&n->peers);
    pthread_mutex_lock(&n->peers.lock);
    for (int i = 0; i < n->peers.n && s->npeers < STATUS_PEERS_MAX; i++) {
        const peer_t *p = &n->peers.p[i];
        status_peer_t *q = &s->peers[s->npeers++];
        node_id_short(p->info.id, q->id);
        q->stage = p->info.stage;
        snprintf(q->addr, sizeof q->addr, "%s", p->info.addr);
        q->rate = p->info.rate;
        q->rtt_ms = p->rtt_ms;
        snprintf(q->health, sizeof q->health, "%s", p->health == PEER_GONE ? "gone" : p->health == PEER_SLOW ? "slow" : "alive");
        q->version = p->info.version;
        q->self = p->info.id == n->id;
        if (q->self) q->version = s->version;
        if (q->self && n->stage == n->nstages - 1 && !isfinite(s->loss)) s->loss = NAN;
        if (!q->self && p->info.stage == n->nstages - 1 && n->stage != n->nstages - 1 && p->last_loss > 0) s->loss = p->last_loss;
    }
    pthread_mutex_unlock(&n->peers.lock);
    pthread_mutex_lock(&pg->lock);
    status_history_copy(s, &pg->hist);
    pthread_mutex_unlock(&pg->lock);
    return status_serve(s, path, r);
}

int swarm_save_checkpoint(node_t *n, uint64_t cursor, char *err, size_t errlen)
{
    checkpoint_info_t info = {0};
    info.cfg = n->o.cfg;
    info.run = n->run;
    info.stage = n->stage;
    info.nstages = n->nstages;
    info.version = n->st->version;
    info.cursor = cursor;
    info.completed = atomic_load(&n->completed);
    return checkpoint_save(n->ckpt_path, &info, n->st->params, n->st->m, n->st->v, n->st->s.nparams, err, errlen);
}

/* A checkpoint left by an earlier run of this node, if any: 1 and filled, 0 none, -1 unreadable. */
static int s_peek_checkpoint(node_t *n, checkpoint_info_t *info, float **state, char *err, size_t errlen)
{
    struct stat sb;
    if (!n->ckpt_path[0] || stat(n->ckpt_path, &sb) < 0) return 0;
    size_t np;
    *state = checkpoint_load(n->ckpt_path, info, &np, err, errlen);
    return *state ? 1 : -1;
}

/* A ticket given as text or @FILE, into its bytes.  0, or -1 with a reason. */
static int s_read_ticket(const char *arg, uint8_t out[TICKET_LEN], char *err, size_t errlen)
{
    char text[TICKET_TEXT_LEN + 64] = {0};
    const char *src = arg;
    if (src[0] == '@') {
        FILE *f = fopen(src + 1, "r");
        if (!f) { snprintf(err, errlen, "--ticket %s: %s", src, strerror(errno)); return -1; }
        size_t got = fread(text, 1, sizeof text - 1, f);
        fclose(f);
        while (got && (text[got - 1] == '\n' || text[got - 1] == '\r' || text[got - 1] == ' ')) text[--got] = 0;
        src = text;
    }
    ticket_t t;
    char why[256];
    if (ticket_decode_text(&t, src, why, sizeof why) < 0) {
        snprintf(err, errlen, "--ticket: %s", why);
        return -1;
    }
    ticket_encode(out, &t);
    return 0;
}

int cmd_node(int argc, char **argv)
{
    static node_t N;
    node_t *n = &N;
    char err[512];
    opts_defaults(&n->o, OPTS_NODE);
    snprintf(n->o.listen, sizeof n->o.listen, "0.0.0.0:7700");
    int r = opts_parse(&n->o, OPTS_NODE, argc, argv, 2, err, sizeof err);
    if (r == 1) { s_node_help(); return 0; }
    if (r < 0 || opts_resolve(&n->o, err, sizeof err) < 0) return cli_fail(err);
    if (hostport_parse(n->o.listen, n->listen_host, sizeof n->listen_host, &n->listen_port, 1, err, sizeof err) < 0) {
        char e2[600];
        snprintf(e2, sizeof e2, "--listen %s", err);
        return cli_fail(e2);
    }
    if (n->o.join[0]) {
        char host[ADDR_HOST_MAX];
        int port;
        uint8_t key[32];
        if (addr_parse(n->o.join, host, sizeof host, &port, key, err, sizeof err) < 0) {
            char e2[600];
            snprintf(e2, sizeof e2, "--join %s", err);
            return cli_fail(e2);
        }
    }
    if (n->o.keys[0]) {
        if (keypair_load(&n->keys, n->o.keys, err, sizeof err) < 0) return cli_fail(err);
    } else {
        if (keypair_generate(&n->keys, err, sizeof err) < 0) return cli_fail(err);
    }
    if (n->o.owner[0] && n->o.join[0]) return cli_fail("--owner starts a closed swarm; a joiner passes --ticket instead");
    if (n->o.owner[0]) {
        /* a closed swarm: the run carries the owner's public key; this node admits itself */
        owner_keys_t ok;
        ticket_t t;
        if (owner_keys_load(&ok, n->o.owner, err, sizeof err) < 0) return cli_fail(err);
        n->o.closed = 1;
        memcpy(n->o.owner_pub, ok.pub, 32);
        int r2 = ticket_issue(&t, &ok, n->keys.pub, 0, err, sizeof err);
        owner_keys_wipe(&ok);
        if (r2 < 0) return cli_fail(err);
        ticket_encode(n->ticket, &t);
    } else if (n->o.ticket[0]) {
        if (s_read_ticket(n->o.ticket, n->ticket, err, sizeof err) < 0) return cli_fail(err);
    }
    n->id = node_id_from_pubkey(n->keys.pub);
    node_id_short(n->id, n->idshort);
    n->stage = n->o.stage;
    n->nstages = n->o.stages;
    peers_init(&n->peers, n->id);
    queue_init(&n->inbox);
    queue_init(&n->outbox);
    atomic_store(&n->last_loss, (double)NAN);
    n->metrics = metrics_open(n->o.metrics, n->idshort, err, sizeof err);
    if (!n->metrics) return cli_fail(err);
    checkpoint_info_t ck;
    float *ck_state = NULL;
    int have_ck = 0;
    if (n->o.checkpoint[0]) {
        if (mkdir(n->o.checkpoint, 0755) < 0 && errno != EEXIST) {
            snprintf(err, sizeof err, "--checkpoint %s: %s", n->o.checkpoint, strerror(errno));
            return cli_fail(err);
        }
        snprintf(n->ckpt_path, sizeof n->ckpt_path, "%s/stage.ckpt", n->o.checkpoint);
        have_ck = s_peek_checkpoint(n, &ck, &ck_state, err, sizeof err);
        if (have_ck < 0) return cli_fail(err);
        if (have_ck && n->stage < 0) n->o.stage = n->stage = ck.stage;
    }
    if (!n->o.join[0]) {
        /* this node creates the run */
        stage_t probe;
        if (stage_init(&probe, &n->o.cfg, 0, n->o.stages, err, sizeof err) < 0) return cli_fail(err);
        if (n->stage < 0) n->stage = 0;
        if (n->stage >= n->nstages) { snprintf(err, sizeof err, "--stage %d: the run has %d stages", n->stage, n->nstages); return cli_fail(err); }
        n->run = opts_run_id(&n->o);
        if (have_ck && (ck.run != n->run || ck.stage != n->stage)) {
            snprintf(err, sizeof err, "--checkpoint %s: holds stage %d of another run or stage; use another folder or the same options", n->o.checkpoint, ck.stage);
            return cli_fail(err);
        }
    }
    char local_data[OPT_PATH];
    int local_data_given = opts_given(&n->o, "data");
    snprintf(local_data, sizeof local_data, "%s", n->o.data);
    if (swarm_io_start(n, err, sizeof err) < 0) return cli_fail(err);
    if (n->o.join[0] && n->stage == 0) {
        /* the data path comes from whoever started the run: a joiner reads files only when it names them itself */
        if (local_data_given) {
            snprintf(n->o.data, sizeof n->o.data, "%s", local_data);
        } else if (strncmp(n->o.data, "synthetic", 9) != 0 && strcmp(n->o.data, "fmnist") != 0) {
            snprintf(err, sizeof err, "this run reads '%s' on its data stage (0); to serve it, pass --data with your own copy "
                     "of that data, or --stage N for another stage", n->o.data);
            return cli_fail(err);
        }
    }
    openblas_set_num_threads(n->o.threads);
    n->target = (uint64_t)n->o.steps * n->o.micro;
    metrics_set_stage(n->metrics, n->stage);

    /* the stage's state: fresh from the seed, or downloaded from a peer of the stage */
    n->st = stage_state_new(&n->o.cfg, n->stage, n->nstages, n->o.seed, err, sizeof err);
    if (!n->st) return cli_fail(err);
    int T = n->o.cfg.kind == MODEL_GPT ? n->o.cfg.maxT : 1;
    n->in_n = stage_in_size(&n->st->s, n->o.batch, T);
    n->out_n = stage_out_size(&n->st->s, n->o.batch, T);
    n->targets_n = (size_t)n->o.batch * T;
    n->nparams = n->st->s.nparams;
    peer_info_t self = {0};
    self.id = n->id;
    memcpy(self.addr, n->adv, sizeof self.addr);
    memcpy(self.pubkey, n->keys.pub, 32);
    self.stage = (int16_t)n->stage;
    peers_upsert(&n->peers, &self, metrics_now());
    uint64_t donor = s_donor(n);
    int use_ck = have_ck && ck.run == n->run && ck.stage == n->stage && ck.nstages == n->nstages;
    if (use_ck && donor) {
        /* resume from our own checkpoint unless a peer of the stage is ahead of it */
        pthread_mutex_lock(&n->peers.lock);
        int i = peers_find_locked(&n->peers, donor);
        if (i >= 0 && (int64_t)n->peers.p[i].info.version <= ck.version) donor = 0;
        pthread_mutex_unlock(&n->peers.lock);
    }
    if (use_ck && !donor) {
        size_t np = n->st->s.nparams;
        memcpy(n->st->params, ck_state, sizeof(float) * np);
        memcpy(n->st->m, ck_state + np, sizeof(float) * np);
        memcpy(n->st->v, ck_state + 2 * np, sizeof(float) * np);
        n->st->version = ck.version;
        atomic_store(&n->version, ck.version);
        n->start_cursor = ck.cursor;
        atomic_store(&n->completed, ck.completed);
        fprintf(stderr, "brigade node: resumed stage %d at version %lld from %s\n", n->stage, (long long)ck.version, n->ckpt_path);
    }
    free(ck_state);
    if (!donor && !use_ck && n->o.join[0]) {
        /* the stage has no live peer: if the run is under way, resume it from a backup */
        uint32_t maxv = 0;
        pthread_mutex_lock(&n->peers.lock);
        for (int i = 0; i < n->peers.n; i++)
            if (n->peers.p[i].info.version > maxv) maxv = n->peers.p[i].info.version;
        pthread_mutex_unlock(&n->peers.lock);
        if (maxv > 0) {
            if (swarm_fetch_backup(n, 5.0, err, sizeof err) == 0)
                fprintf(stderr, "brigade node: stage %d resumed from a backup at version %lld\n", n->stage, (long long)n->st->version);
            else
                fprintf(stderr, "brigade node: %s; stage %d starts from its initial weights\n", err, n->stage);
        }
    }
    if (donor) {
        fprintf(stderr, "brigade node: downloading stage %d's state from a peer...\n", n->stage);
        if (swarm_fetch_state(n, donor, err, sizeof err) < 0) return cli_fail(err);
        fprintf(stderr, "brigade node: stage %d at version %lld\n", n->stage, (long long)n->st->version);
    }
    if (n->stage == 0) {
        n->data = data_open(n->o.data, model_data_kind(&n->o.cfg), n->o.cfg.maxT, n->o.seed, err, sizeof err);
        if (!n->data) return cli_fail(err);
    }
    size_t nparams = n->st->s.nparams;
    fprintf(stderr, "brigade node %s: stage %d of %d, %s, %zu parameters here\n", n->idshort, n->stage, n->nstages,
            n->o.cfg.name, nparams);
    if (!n->o.keys[0])
        fprintf(stderr, "brigade node: a fresh identity for this run (brigade keygen --out DIR, then --keys DIR, keeps one)\n");
    fprintf(stderr, "join with: --join %s\n", n->join_addr);
    metrics_event(n->metrics, "start", "\"role\":\"node\",\"run\":\"%016llx\",\"model\":%s,\"params\":%zu,"
                  "\"join_addr\":%s,\"stages\":%d,\"codec\":%s,\"grad_codec\":%s,\"version\":%lld",
                  (unsigned long long)n->run, n->o.cfg.name, nparams, n->join_addr, n->nstages, n->o.codec,
                  n->o.grad_codec, (long long)n->st->version);
    n->t0 = metrics_now();
    static page_t PG;
    page_t *pg = &PG;
    pg->n = n;
    pthread_mutex_init(&pg->lock, NULL);
    status_history_init(&pg->hist);
    n->on_loss = s_note_loss;
    n->on_loss_arg = pg;
    if (n->o.http) {
        pg->snap = malloc(sizeof *pg->snap);
        pg->http = pg->snap ? http_start(NULL, n->o.http, s_http, pg, err, sizeof err) : NULL;
        if (!pg->http) return cli_fail(pg->snap ? err : "out of memory");
        fprintf(stderr, "status page: http://127.0.0.1:%d/ (and /status.json)\n", http_port(pg->http));
    }
    s_node = n;
    signal(SIGINT, s_on_signal);
    signal(SIGTERM, s_on_signal);

    pthread_t io;
    if (pthread_create(&io, NULL, swarm_io_thread, n) != 0) return cli_fail("cannot start the I/O thread");
    swarm_compute(n);
    /* give the I/O thread a moment to tell the swarm, then stop it */
    for (int i = 0; i < 20 && queue_len(&n->outbox) > 0; i++) {
        struct timespec ts = { 0, 10 * 1000000L };
        nanosleep(&ts, NULL);
    }
    struct timespec ts = { 0, 200 * 1000000L };
    nanosleep(&ts, NULL);
    atomic_store(&n->io_stop, 1);
    transport_wake(n->tr);
    pthread_join(io, NULL);
    int interrupted = atomic_load(&n->done) == 2;
    if (!n->status && interrupted) { n->status = 1; snprintf(n->why, sizeof n->why, "interrupted"); }
    if (!interrupted) swarm_io_bye(n);
    if (n->ckpt_path[0]) {
        if (swarm_save_checkpoint(n, n->start_cursor, err, sizeof err) < 0) fprintf(stderr, "brigade: %s\n", err);
        else fprintf(stderr, "brigade node: checkpoint written to %s\n", n->ckpt_path);
    }
    double wall = metrics_now() - n->t0;
    metrics_event(n->metrics, "end", "\"status\":%s,\"updates\":%lld,\"tokens\":%llu,\"wall_s\":%.3f,"
                  "\"lost_microbatches\":%llu,\"bytes_sent\":%llu,\"bytes_sent_raw\":%llu,\"bytes_sent_state\":%llu,\"drops\":%llu,\"why\":%s",
                  n->status ? "error" : "ok", (long long)n->st->version, (unsigned long long)atomic_load(&n->tokens), wall,
                  (unsigned long long)n->lost,
                  (unsigned long long)atomic_load(&n->bytes_sent), (unsigned long long)atomic_load(&n->bytes_sent_raw),
                  (unsigned long long)atomic_load(&n->bytes_sent_state),
                  (unsigned long long)atomic_load(&n->drops), n->status ? n->why : "completed");
    fprintf(stderr, "brigade node %s: %s after %.1f s, %lld updates\n", n->idshort, n->status ? n->why : "run complete",
            wall, (long long)n->st->version);
    if (interrupted) {
        /* say goodbye so peers route around at once */
        atomic_store(&n->done, 1);
        swarm_io_bye(n);
    }
    http_stop(&pg->http);
    free(pg->snap);
    transport_destroy(&n->tr);
    codec_ctx_destroy(&n->dcodec);
    data_close(&n->data);
    stage_state_destroy(&n->st);
    queue_fini(&n->inbox, item_free_q);
    queue_fini(&n->outbox, item_free_q);
    peers_fini(&n->peers);
    metrics_close(&n->metrics);
    keypair_wipe(&n->keys);
    return n->status ? 1 : 0;
}

int cmd_keygen(int argc, char **argv)
{
    const char *dir = NULL;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: brigade keygen --out DIR\n"
                   "  writes DIR/node.key (secret, mode 0600) and DIR/node.pub: a node identity (--keys DIR),\n"
                   "  and DIR/owner.sign (secret, 0600) and DIR/owner.pub: a run owner's signing key\n"
                   "  (brigade node --owner DIR starts a closed swarm; brigade ticket --owner DIR admits peers)\n");
            return 0;
        }
        if (!strcmp(argv[i], "--out") && i + 1 < argc) dir = argv[++i];
        else { char e[300]; snprintf(e, sizeof e, "keygen: unknown option '%s' (usage: brigade keygen --out DIR)", argv[i]); return cli_fail(e); }
    }
    if (!dir) return cli_fail("keygen: --out DIR is required");
    keypair_t kp;
    char err[512];
    if (keypair_generate(&kp, err, sizeof err) < 0 || keypair_save(&kp, dir, err, sizeof err) < 0) {
        keypair_wipe(&kp);
        return cli_fail(err);
    }
    if (owner_keys_ensure(dir, err, sizeof err) < 0) {
        keypair_wipe(&kp);
        return cli_fail(err);
    }
    printf("public key: %s\nwritten: %s/node.key (secret, 0600) and %s/node.pub,\n"
           "         %s/owner.sign (run-owner signing key, 0600) and %s/owner.pub\n", kp.pub_z85, dir, dir, dir, dir);
    keypair_wipe(&kp);
    return 0;
}

int cmd_status(int argc, char **argv)
{
    if (argc < 3 || !strcmp(argv[2], "--help") || !strcmp(argv[2], "-h")) {
        printf("usage: brigade status HOST:PORT/KEY [--keys DIR --ticket T|@FILE]\n"
               "  prints the swarm map as that node sees it; a closed swarm answers only\n"
               "  a key with a ticket (--keys DIR of that key and its --ticket)\n");
        return argc < 3 ? 2 : 0;
    }
    char host[ADDR_HOST_MAX], err[512];
    const char *keys = NULL, *tk = NULL;
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "--keys") && i + 1 < argc) keys = argv[++i];
        else if (!strcmp(argv[i], "--ticket") && i + 1 < argc) tk = argv[++i];
        else { snprintf(err, sizeof err, "status: unknown option '%s' (see brigade status --help)", argv[i]); return cli_fail(err); }
    }
    int port;
    uint8_t key[32];
    if (addr_parse(argv[2], host, sizeof host, &port, key, err, sizeof err) < 0) return cli_fail(err);
    keypair_t kp;
    if (keys ? keypair_load(&kp, keys, err, sizeof err) < 0 : keypair_generate(&kp, err, sizeof err) < 0) return cli_fail(err);
    uint8_t tbytes[TICKET_LEN];
    int have_ticket = 0;
    if (tk) {
        if (s_read_ticket(tk, tbytes, err, sizeof err) < 0) { keypair_wipe(&kp); return cli_fail(err); }
        have_ticket = 1;
    }
    transport_opts_t to = {0};
    to.listen_host = "127.0.0.1";
    to.keys = &kp;
    transport_t *tr = transport_new(&to, err, sizeof err);
    if (!tr) return cli_fail(err);
    int link = transport_connect(tr, host, port, key, err, sizeof err);
    if (link < 0) { transport_destroy(&tr); return cli_fail(err); }
    wire_hdr_t h;
    wire_hdr_init(&h, WIRE_STATUS_REQ);
    const void *f[1] = { tbytes };
    size_t l[1] = { TICKET_LEN };
    transport_send(tr, link, &h, f, l, have_ticket ? 1 : 0);
    double deadline = metrics_now() + 10.0;
    int rc = 1;
    while (metrics_now() < deadline) {
        transport_msg_t m;
        if (transport_poll(tr, 100, &m) != 1) continue;
        if (m.hdr.type == WIRE_STATUS && m.nframes >= 1) {
            rbuf_t r;
            rbuf_init(&r, m.frame[0], m.len[0]);
            uint32_t nst = rbuf_get_u32(&r);
            uint64_t target = rbuf_get_u64(&r), done = rbuf_get_u64(&r);
            float loss = rbuf_get_f32(&r);
            char model[64];
            rbuf_get_str(&r, model, sizeof model);
            static peer_info_t recs[PEERS_CAP];
            int k = 0;
            if (rbuf_error(&r) || peers_decode(&r, recs, PEERS_CAP, &k, err, sizeof err) < 0) {
                transport_msg_close(&m);
                break;
            }
            printf("run %016llx: %s, %u stages, %llu/%llu microbatches done, last loss %.4f\n",
                   (unsigned long long)m.hdr.run, model, nst, (unsigned long long)done, (unsigned long long)target, loss);
            printf("%-6s %-9s %-24s %10s %9s %8s\n", "stage", "peer", "address", "ubatch/s", "rtt ms", "version");
            for (uint32_t s = 0; s < nst; s++) {
                int any = 0;
                for (int i = 0; i < k; i++) {
                    if (recs[i].stage != (int)s) continue;
                    char id[9];
                    node_id_short(recs[i].id, id);
                    printf("%-6u %-9s %-24s %10.2f %9.1f %8u\n", s, id, recs[i].addr, recs[i].rate, recs[i].rtt_ms, recs[i].version);
                    any = 1;
                }
                if (!any) printf("%-6u (no peer: the swarm waits for one)\n", s);
            }
            rc = 0;
            transport_msg_close(&m);
            break;
        }
        transport_msg_close(&m);
    }
    transport_destroy(&tr);
    keypair_wipe(&kp);
    if (rc) {
        snprintf(err, sizeof err, "status: no answer from %s:%d in 10 s", host, port);
        return cli_fail(err);
    }
    return 0;
}
