/* swarm_io.c: the I/O side of a node: the transport, joining a swarm,
 * gossip, heartbeats and failure detection, and checking and decoding
 * everything that arrives before the compute thread sees it. */
#include "node/runtime/swarm.h"
#include "node/runtime/progress.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define JOIN_WAIT_S 15.0
#define GOSSIP_EVERY_S 1.0
#define PING_EVERY_S 0.5
#define GONE_MIN_S 3.0
#define DROP_LOG_FIRST 50
#define BAN_STRIKES 20          /* refused messages that get a peer banned */
#define BAN_S 60.0              /* for this long */
#define STATE_REQ_EVERY_S 2.0   /* at most one state download per peer this often */
#define NORM_FACTOR 1000.0        /* a tensor this many times its stream's usual RMS is refused */
#define NORM_WARMUP 16          /* tensors seen before the norm check applies */

item_t *item_new(void)
{
    return calloc(1, sizeof(item_t));
}

void item_free(item_t *it)
{
    if (!it) return;
    free(it->tensor);
    for (int i = 0; i < 3; i++) free(it->frame[i]);
    free(it);
}

void item_free_q(queue_item_t *q)
{
    item_free((item_t *)q);
}

void node_send(node_t *n, item_t *it)
{
    queue_push(&n->outbox, &it->q);
    transport_wake(n->tr);
}

void node_send_simple(node_t *n, uint64_t peer, int type, uint64_t mb, uint32_t flags)
{
    item_t *it = item_new();
    if (!it) return;
    wire_hdr_init(&it->hdr, (wire_type_t)type);
    it->hdr.run = n->run;
    it->hdr.mb = mb;
    it->hdr.flags = flags;
    it->hdr.stage = (uint16_t)n->stage;
    it->peer = peer;
    it->raw_bytes = WIRE_HDR_LEN;
    node_send(n, it);
}

/* ---- helpers used by the I/O thread only ---- */

static void s_drop(node_t *n, const char *why, uint64_t from)
{
    uint64_t k = atomic_fetch_add(&n->drops, 1) + 1;
    char id[9];
    node_id_short(from, id);
    if (k <= DROP_LOG_FIRST || k % 100 == 0)
        metrics_event(n->metrics, "drop", "\"why\":%s,\"from\":%s,\"drops\":%llu", why, id, (unsigned long long)k);
    /* a repeat offender is ignored for a while */
    pthread_mutex_lock(&n->peers.lock);
    int i = peers_find_locked(&n->peers, from);
    if (i >= 0 && from != n->id) {
        peer_t *p = &n->peers.p[i];
        if (++p->strikes >= BAN_STRIKES) {
            p->strikes = 0;
            p->banned_until = metrics_now() + BAN_S;
            p->health = PEER_GONE;
            char ban[300];
            snprintf(ban, sizeof ban, "%d refused messages, last: %s", BAN_STRIKES, why);
            metrics_event(n->metrics, "peer", "\"peer\":%s,\"what\":\"banned\",\"why\":%s,\"for_s\":%.0f", id, ban, BAN_S);
        }
    }
    pthread_mutex_unlock(&n->peers.lock);
}

/* 1 when messages of peer id are ignored now (banned). */
static int s_banned(node_t *n, uint64_t id)
{
    pthread_mutex_lock(&n->peers.lock);
    int i = peers_find_locked(&n->peers, id);
    int b = i >= 0 && n->peers.p[i].banned_until > metrics_now();
    pthread_mutex_unlock(&n->peers.lock);
    return b;
}

/* Closed swarm: 1 when peer id showed a valid ticket here. */
static int s_admitted(node_t *n, uint64_t id)
{
    pthread_mutex_lock(&n->peers.lock);
    int i = peers_find_locked(&n->peers, id);
    int a = i >= 0 && n->peers.p[i].admitted;
    pthread_mutex_unlock(&n->peers.lock);
    return a;
}

/* Checks a tensor's scale against the usual scale of its sender's stream:
 * 0 when plausible (and learns from it), -1 when far outside. */
static int s_norm_ok(node_t *n, uint64_t from, const float *t, size_t len)
{
    double ss = 0;
    for (size_t i = 0; i < len; i++) ss += (double)t[i] * t[i];
    double rms = sqrt(ss / (double)(len ? len : 1));
    int ok = 1;
    pthread_mutex_lock(&n->peers.lock);
    int i = peers_find_locked(&n->peers, from);
    if (i >= 0) {
        peer_t *p = &n->peers.p[i];
        if (p->norm_n >= NORM_WARMUP && rms > NORM_FACTOR * p->norm_mean + 1e-6) ok = 0;
        else {
            p->norm_n++;
            double w = p->norm_n < 20 ? 1.0 / p->norm_n : 0.05;
            p->norm_mean += w * (rms - p->norm_mean);
        }
    }
    pthread_mutex_unlock(&n->peers.lock);
    return ok ? 0 : -1;
}

static void s_on_transport_drop(void *arg, const char *why, const uint8_t *pubkey)
{
    node_t *n = arg;
    s_drop(n, why, pubkey ? node_id_from_pubkey(pubkey) : 0);
}

static void s_self_info(node_t *n, peer_info_t *p)
{
    memset(p, 0, sizeof *p);
    p->id = n->id;
    snprintf(p->addr, sizeof p->addr, "%s", n->adv);
    memcpy(p->pubkey, n->keys.pub, 32);
    p->stage = (int16_t)n->stage;
    p->version = (uint32_t)atomic_load(&n->version);
    pthread_mutex_lock(&n->peers.lock);
    int i = peers_find_locked(&n->peers, n->id);
    if (i >= 0) p->rate = n->peers.p[i].info.rate;
    pthread_mutex_unlock(&n->peers.lock);
}

/* The JOIN body: our address, the stage we want, our ticket (closed swarm). */
static void s_put_join(node_t *n, wbuf_t *w, int want)
{
    wbuf_put_str(w, n->adv);
    wbuf_put_u32(w, (uint32_t)(int32_t)want);
    wbuf_put_bytes(w, n->ticket, n->o.ticket[0] || n->o.owner[0] ? TICKET_LEN : 0);
}

/* A new link starts with an introduction: who we are, where we listen,
 * which stage we serve, and (closed swarm) our ticket, so the peer knows us
 * before our first real message even when gossip has not told it yet. */
static void s_introduce(node_t *n, int link)
{
    wbuf_t w;
    wbuf_init(&w, 1024);
    s_put_join(n, &w, n->stage);
    wire_hdr_t h;
    wire_hdr_init(&h, WIRE_JOIN);
    h.run = n->run;
    h.flags = JOIN_FLAG_INTRO;
    h.stage = n->stage < 0 ? WIRE_STAGE_NONE : (uint16_t)n->stage;
    const void *f[1] = { w.data };
    size_t l[1] = { w.len };
    if (!wbuf_error(&w)) transport_send(n->tr, link, &h, f, l, 1);
    wbuf_free(&w);
}

/* The link to peer id, connecting on first use; -1 when unknown. */
static int s_link(node_t *n, uint64_t id)
{
    int fresh = 0;
    pthread_mutex_lock(&n->peers.lock);
    int i = peers_find_locked(&n->peers, id), link = -1;
    if (i >= 0 && id != n->id) {
        peer_t *p = &n->peers.p[i];
        if (p->link < 0) {
            char host[ADDR_HOST_MAX], err[256];
            int port;
            if (hostport_parse(p->info.addr, host, sizeof host, &port, 0, err, sizeof err) == 0)
                p->link = transport_connect(n->tr, host, port, p->info.pubkey, err, sizeof err);
            fresh = p->link >= 0;
        }
        link = p->link;
    }
    pthread_mutex_unlock(&n->peers.lock);
    if (fresh) s_introduce(n, link);
    return link;
}

static void s_account(node_t *n, const size_t *lens, int nf, uint64_t raw)
{
    uint64_t b = WIRE_HDR_LEN;
    for (int i = 0; i < nf; i++) b += lens[i];
    atomic_fetch_add(&n->bytes_sent, b);
    atomic_fetch_add(&n->bytes_sent_raw, raw ? raw : b);
}

static int s_send(node_t *n, uint64_t peer, const wire_hdr_t *h, const void *const *frames,
                  const size_t *lens, int nf, uint64_t raw)
{
    int link = s_link(n, peer);
    if (link < 0) return -1;
    int r = transport_send(n->tr, link, h, frames, lens, nf);
    if (r == 0) s_account(n, lens, nf, raw);
    return r;
}

static void s_hdr(node_t *n, wire_hdr_t *h, int type)
{
    wire_hdr_init(h, (wire_type_t)type);
    h->run = n->run;
    h->stage = n->stage < 0 ? WIRE_STAGE_NONE : (uint16_t)n->stage;
    h->wversion = (uint32_t)atomic_load(&n->version);
}

static void s_add_peer(node_t *n, const peer_info_t *info, const char *why);

/* Signs this node's own announcement again when its address or stage
 * changed since the last one (the seq is the wall clock in ms, so it only
 * grows, across restarts too).  Call with the peers lock held. */
static void s_self_announce_locked(node_t *n, peer_t *self)
{
    announce_t a;
    char err[160];
    if (self->announce_seq && announce_verify(&a, self->announce, ANNOUNCE_LEN, err, sizeof err) == 0
        && a.stage == self->info.stage && strcmp(a.addr, self->info.addr) == 0)
        return;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t seq = (uint64_t)ts.tv_sec * 1000 + (uint64_t)(ts.tv_nsec / 1000000);
    if (seq <= self->announce_seq) seq = self->announce_seq + 1;
    if (announce_sign(&a, &self->info, seq, &n->keys, err, sizeof err) == 0) {
        announce_encode(self->announce, &a);
        self->announce_seq = seq;
    }
}

/* The table (alive peers and self) for WELCOME, PEERS and STATUS: the
 * records, then a u32 count and each record's signed announcement (empty
 * when we hold none for it), forwarded as received. */
static void s_put_table(node_t *n, wbuf_t *w)
{
    peer_info_t *recs = malloc(sizeof(peer_info_t) * PEERS_CAP);
    uint8_t (*blobs)[ANNOUNCE_LEN] = malloc((size_t)ANNOUNCE_LEN * PEERS_CAP);
    int *has = malloc(sizeof(int) * PEERS_CAP);
    if (!recs || !blobs || !has) { free(recs); free(blobs); free(has); w->err = 1; return; }
    int k = 0;
    s_self_info(n, &recs[k]);
    pthread_mutex_lock(&n->peers.lock);
    int si = peers_find_locked(&n->peers, n->id);
    has[k] = 0;
    if (si >= 0) {
        peer_t *self = &n->peers.p[si];
        self->info.stage = (int16_t)n->stage;
        memcpy(self->info.addr, n->adv, sizeof self->info.addr);
        s_self_announce_locked(n, self);
        memcpy(blobs[k], self->announce, ANNOUNCE_LEN);
        has[k] = self->announce_seq != 0;
    }
    k++;
    double now = metrics_now();
    for (int i = 0; i < n->peers.n && k < PEERS_CAP; i++) {
        peer_t *p = &n->peers.p[i];
        if (p->info.id == n->id || p->health == PEER_GONE) continue;
        recs[k] = p->info;
        recs[k].rtt_ms = (float)p->rtt_ms;
        recs[k].seen_ms = (uint64_t)((now - p->last_heard) * 1000.0);
        memcpy(blobs[k], p->announce, ANNOUNCE_LEN);
        has[k] = p->announce_seq != 0;
        k++;
    }
    pthread_mutex_unlock(&n->peers.lock);
    peers_encode(w, recs, k);
    wbuf_put_u32(w, (uint32_t)k);
    for (int i = 0; i < k; i++) wbuf_put_bytes(w, blobs[i], has[i] ? ANNOUNCE_LEN : 0);
    free(recs);
    free(blobs);
    free(has);
}

/* Takes the records of a table sent by `sender`: its own record on its word
 * (the link authenticated it), anyone else's only with that peer's valid
 * signed announcement, newer than the one held, vouching for the record's
 * address and stage.  Returns -1 when the announcement part is malformed. */
static int s_take_table(node_t *n, rbuf_t *r, const peer_info_t *recs, int k, uint64_t sender,
                        const uint8_t sender_pub[32], const char *why)
{
    uint32_t nb = rbuf_get_u32(r);
    if (rbuf_error(r) || nb != (uint32_t)k) return -1;
    for (int i = 0; i < k; i++) {
        size_t len = 0;
        const uint8_t *blob = rbuf_get_bytes(r, ANNOUNCE_LEN, &len);
        if (rbuf_error(r)) return -1;
        const peer_info_t *rec = &recs[i];
        if (rec->id == n->id) continue;
        announce_t a;
        char err[160];
        int valid = len == ANNOUNCE_LEN && announce_verify(&a, blob, len, err, sizeof err) == 0 && announce_matches(&a, rec);
        if (rec->id == sender) {
            if (memcmp(rec->pubkey, sender_pub, 32) != 0) continue;
            s_add_peer(n, rec, why);
        } else if (!valid) {
            continue;  /* a third party's word alone is not enough */
        }
        pthread_mutex_lock(&n->peers.lock);
        int j = peers_find_locked(&n->peers, rec->id);
        pthread_mutex_unlock(&n->peers.lock);
        if (j < 0) {
            s_add_peer(n, rec, why);
        }
        pthread_mutex_lock(&n->peers.lock);
        j = peers_find_locked(&n->peers, rec->id);
        if (j >= 0 && valid && a.seq >= n->peers.p[j].announce_seq) {
            peer_t *p = &n->peers.p[j];
            if (strcmp(p->info.addr, a.addr) != 0 && p->link >= 0) { transport_disconnect(n->tr, p->link); p->link = -1; }
            memcpy(p->info.addr, a.addr, sizeof p->info.addr);
            p->info.stage = a.stage;
            memcpy(p->announce, blob, ANNOUNCE_LEN);
            p->announce_seq = a.seq;
        }
        pthread_mutex_unlock(&n->peers.lock);
    }
    return 0;
}

static void s_send_table(node_t *n, uint64_t peer)
{
    wbuf_t w;
    wbuf_init(&w, 1 << 22);
    s_put_table(n, &w);
    wbuf_put_u64(&w, atomic_load(&n->completed));
    wbuf_put_f32(&w, (float)atomic_load(&n->last_loss));
    wbuf_put_u8(&w, (uint8_t)(atomic_load(&n->done) == 1 && n->status == 0));  /* completed, not interrupted */
    if (!wbuf_error(&w)) {
        wire_hdr_t h;
        s_hdr(n, &h, WIRE_PEERS);
        const void *f[1] = { w.data };
        size_t l[1] = { w.len };
        s_send(n, peer, &h, f, l, 1, 0);
    }
    wbuf_free(&w);
}

/* Marks peer id heard from now; logs a (re)join. */
static void s_heard(node_t *n, uint64_t id)
{
    pthread_mutex_lock(&n->peers.lock);
    int i = peers_find_locked(&n->peers, id);
    if (i >= 0) {
        peer_t *p = &n->peers.p[i];
        p->last_heard = metrics_now();
        if (p->health == PEER_GONE) {
            p->health = PEER_ALIVE;
            char s[9];
            node_id_short(id, s);
            metrics_event(n->metrics, "peer", "\"peer\":%s,\"what\":\"joined\",\"why\":\"heard again\",\"peer_stage\":%d", s, p->info.stage);
        }
    }
    pthread_mutex_unlock(&n->peers.lock);
}

static int s_known(node_t *n, uint64_t id, int *stage)
{
    pthread_mutex_lock(&n->peers.lock);
    int i = peers_find_locked(&n->peers, id);
    if (i >= 0) *stage = n->peers.p[i].info.stage;
    pthread_mutex_unlock(&n->peers.lock);
    return i >= 0;
}

static void s_add_peer(node_t *n, const peer_info_t *info, const char *why)
{
    if (info->id == n->id) return;
    if (peers_upsert(&n->peers, info, metrics_now()) == 1) {
        char s[9];
        node_id_short(info->id, s);
        metrics_event(n->metrics, "peer", "\"peer\":%s,\"what\":\"joined\",\"why\":%s,\"peer_stage\":%d,\"addr\":%s",
                      s, why, info->stage, info->addr);
    }
}

/* ---- message handlers ---- */

#define JOIN_PER_S 20   /* JOINs (not introductions) answered per second, all keys together */

/* 1 when another JOIN may be answered now (a token bucket refilled at JOIN_PER_S). */
static int s_join_allowed(void)
{
    static double tokens = JOIN_PER_S, last = 0;
    double now = metrics_now();
    tokens += (now - last) * JOIN_PER_S;
    if (tokens > JOIN_PER_S) tokens = JOIN_PER_S;
    last = now;
    if (tokens < 1) return 0;
    tokens -= 1;
    return 1;
}

static void s_on_join(node_t *n, transport_msg_t *m)
{
    if (!(m->hdr.flags & JOIN_FLAG_INTRO) && !s_join_allowed()) {
        /* a flood of joiners: drop, they retry every 3 s */
        atomic_fetch_add(&n->drops, 1);
        return;
    }
    if (m->nframes < 1) { s_drop(n, "JOIN without body", m->sender); return; }
    rbuf_t r;
    rbuf_init(&r, m->frame[0], m->len[0]);
    char adv[PEER_ADDR_MAX];
    rbuf_get_str(&r, adv, sizeof adv);
    int32_t want = (int32_t)rbuf_get_u32(&r);
    size_t tlen = 0;
    const uint8_t *tbytes = rbuf_get_bytes(&r, TICKET_LEN, &tlen);
    char host[ADDR_HOST_MAX], err[256];
    int port;
    if (rbuf_error(&r) || hostport_parse(adv, host, sizeof host, &port, 0, err, sizeof err) < 0
        || want < -1 || want >= n->nstages) {
        s_drop(n, "malformed JOIN", m->sender);
        return;
    }
    if (n->o.closed) {
        ticket_t t;
        char why[200];
        if (tlen != TICKET_LEN) snprintf(why, sizeof why, "no admission ticket");
        else if (ticket_decode(&t, tbytes, tlen, why, sizeof why) == 0 &&
                 ticket_verify(&t, n->o.owner_pub, m->sender_pub, (uint64_t)time(NULL), why, sizeof why) == 0)
            why[0] = 0;
        if (why[0]) {
            char id[9];
            node_id_short(m->sender, id);
            metrics_event(n->metrics, "peer", "\"peer\":%s,\"what\":\"refused\",\"why\":%s", id, why);
            s_drop(n, why, m->sender);
            if (!(m->hdr.flags & JOIN_FLAG_INTRO)) {
                /* tell the joiner why, so it can say so instead of waiting */
                wire_hdr_t h;
                s_hdr(n, &h, WIRE_BYE);
                const void *f[1] = { why };
                size_t l[1] = { strlen(why) };
                transport_reply(n->tr, m, &h, f, l, 1);
            }
            return;
        }
    }
    if (m->hdr.flags & JOIN_FLAG_INTRO) {
        /* a member opening a link to us: learn it, admit it, nothing to answer */
        peer_info_t info = {0};
        info.id = m->sender;
        memcpy(info.addr, adv, sizeof info.addr);
        memcpy(info.pubkey, m->sender_pub, 32);
        info.stage = (int16_t)want;
        s_add_peer(n, &info, "introduction");
        s_heard(n, m->sender);
        pthread_mutex_lock(&n->peers.lock);
        int k = peers_find_locked(&n->peers, m->sender);
        if (k >= 0) n->peers.p[k].admitted = 1;
        pthread_mutex_unlock(&n->peers.lock);
        return;
    }
    int stage = want;
    pthread_mutex_lock(&n->peers.lock);
    int known = peers_find_locked(&n->peers, m->sender);
    if (known >= 0 && want < 0) stage = n->peers.p[known].info.stage;  /* a repeated JOIN keeps its stage */
    pthread_mutex_unlock(&n->peers.lock);
    if (stage < 0) stage = peers_pick_stage(&n->peers, n->nstages);
    int counts[MODEL_STAGES_MAX];
    peers_stage_counts(&n->peers, n->nstages, counts);
    peer_info_t info = {0};
    info.id = m->sender;
    snprintf(info.addr, sizeof info.addr, "%s", adv);
    memcpy(info.pubkey, m->sender_pub, 32);
    info.stage = (int16_t)stage;
    s_add_peer(n, &info, "join");
    /* a re-join after a restart: mark it alive, and reconnect to its (possibly new) address */
    pthread_mutex_lock(&n->peers.lock);
    int i = peers_find_locked(&n->peers, m->sender);
    if (i >= 0) {
        peer_t *p = &n->peers.p[i];
        p->info.stage = (int16_t)stage;
        if (strcmp(p->info.addr, adv) != 0 && p->link >= 0) { transport_disconnect(n->tr, p->link); p->link = -1; }
        snprintf(p->info.addr, sizeof p->info.addr, "%s", adv);
        p->health = PEER_ALIVE;
        p->last_heard = metrics_now();
        p->admitted = 1;
    }
    pthread_mutex_unlock(&n->peers.lock);

    wbuf_t cfg, asg, tab;
    wbuf_init(&cfg, 1 << 16);
    wbuf_init(&asg, 64);
    wbuf_init(&tab, 1 << 22);
    opts_encode_run(&cfg, &n->o);
    wbuf_put_u32(&asg, (uint32_t)stage);
    wbuf_put_u32(&asg, (uint32_t)(stage == 0 ? counts[0] : 0));
    wbuf_put_u8(&asg, (uint8_t)atomic_load(&n->done));
    s_put_table(n, &tab);
    if (!wbuf_error(&cfg) && !wbuf_error(&asg) && !wbuf_error(&tab)) {
        wire_hdr_t h;
        s_hdr(n, &h, WIRE_WELCOME);
        const void *f[3] = { cfg.data, asg.data, tab.data };
        size_t l[3] = { cfg.len, asg.len, tab.len };
        if (transport_reply(n->tr, m, &h, f, l, 3) == 0) s_account(n, l, 3, 0);
    }
    wbuf_free(&cfg);
    wbuf_free(&asg);
    wbuf_free(&tab);
}

static void s_on_peers(node_t *n, transport_msg_t *m)
{
    if (m->nframes < 1) { s_drop(n, "PEERS without body", m->sender); return; }
    rbuf_t r;
    rbuf_init(&r, m->frame[0], m->len[0]);
    static peer_info_t recs[PEERS_CAP];
    int k = 0;
    char err[200];
    if (peers_decode(&r, recs, PEERS_CAP, &k, err, sizeof err) < 0
        || s_take_table(n, &r, recs, k, m->sender, m->sender_pub, "gossip") < 0) {
        s_drop(n, "malformed PEERS", m->sender);
        return;
    }
    uint64_t completed = rbuf_get_u64(&r);
    float loss = rbuf_get_f32(&r);
    int done = rbuf_get_u8(&r);
    if (rbuf_error(&r)) { s_drop(n, "malformed PEERS", m->sender); return; }
    /* the run's progress and its end are the last stage's to tell */
    int last = 0;
    pthread_mutex_lock(&n->peers.lock);
    int i = peers_find_locked(&n->peers, m->sender);
    if (i >= 0 && n->peers.p[i].info.stage == n->nstages - 1) {
        last = 1;
        if (completed > n->peers.p[i].completed) n->peers.p[i].completed = completed;
        if (isfinite(loss)) n->peers.p[i].last_loss = loss;
    }
    pthread_mutex_unlock(&n->peers.lock);
    if (done && last && !atomic_load(&n->done)) atomic_store(&n->done, 1);
}

static void s_on_pong(node_t *n, transport_msg_t *m)
{
    double sent = (double)m->hdr.mb * 1e-6, rtt = (metrics_now() - sent) * 1000.0;
    if (!(rtt >= 0 && rtt < 600000)) return;
    pthread_mutex_lock(&n->peers.lock);
    int i = peers_find_locked(&n->peers, m->sender);
    if (i >= 0) {
        peer_t *p = &n->peers.p[i];
        if (p->rtt_ms == 0) { p->rtt_ms = rtt; p->rtt_dev_ms = rtt / 2; }
        else {
            p->rtt_dev_ms = 0.75 * p->rtt_dev_ms + 0.25 * fabs(rtt - p->rtt_ms);
            p->rtt_ms = 0.875 * p->rtt_ms + 0.125 * rtt;
        }
    }
    pthread_mutex_unlock(&n->peers.lock);
}

/* Checks and decodes the tensor of an ACT/GRAD/AVG into a new inbox item. */
static void s_on_tensor(node_t *n, transport_msg_t *m)
{
    int type = m->hdr.type, from_stage = -1;
    if (!s_known(n, m->sender, &from_stage)) { s_drop(n, "tensor from an unknown peer", m->sender); return; }
    size_t expect;
    int want_stage;
    if (type == WIRE_ACT) { expect = n->in_n; want_stage = n->stage - 1; }
    else if (type == WIRE_GRAD) { expect = n->out_n; want_stage = n->stage + 1; }
    else { expect = n->nparams; want_stage = n->stage; }
    if (m->hdr.stage != n->stage) {
        /* in flight while a peer (or this node) moved to another stage: not an offence */
        atomic_fetch_add(&n->drops, 1);
        return;
    }
    if (from_stage != want_stage) { s_drop(n, "tensor from a peer of the wrong stage", m->sender); return; }
    if (m->nframes < 1 || expect == 0) { s_drop(n, "tensor message without tensor", m->sender); return; }
    frame_info_t fi;
    char err[200];
    if (frame_peek(&fi, m->frame[0], m->len[0], err, sizeof err) < 0) { s_drop(n, "bad tensor frame", m->sender); return; }
    if (fi.n_values != expect) { s_drop(n, "tensor shape does not match the run", m->sender); return; }
    size_t ntarg = type == WIRE_ACT ? n->targets_n : 0;
    if (type == WIRE_ACT && (m->nframes < 2 || m->len[1] != ntarg)) { s_drop(n, "ACT without valid targets", m->sender); return; }
    item_t *it = item_new();
    float *t = it ? malloc(sizeof(float) * expect) : NULL;
    uint8_t *tg = ntarg ? malloc(ntarg) : NULL;
    if (!t || (ntarg && !tg)) { item_free(it); free(t); free(tg); s_drop(n, "out of memory", m->sender); return; }
    if (frame_decode(n->dcodec, t, expect, NULL, NULL, m->frame[0], m->len[0], err, sizeof err) != (long)expect) {
        item_free(it); free(t); free(tg);
        s_drop(n, "tensor frame refused", m->sender);
        return;
    }
    for (size_t i = 0; i < expect; i++)
        if (!isfinite(t[i])) { item_free(it); free(t); free(tg); s_drop(n, "non-finite tensor", m->sender); return; }
    if (type != WIRE_AVG && s_norm_ok(n, m->sender, t, expect) < 0) {
        item_free(it); free(t); free(tg);
        s_drop(n, "tensor norm far outside its stream's range", m->sender);
        return;
    }
    if (ntarg) {
        memcpy(tg, m->frame[1], ntarg);
        for (size_t i = 0; i < ntarg; i++)
            if (tg[i] >= n->o.cfg.V) { item_free(it); free(t); free(tg); s_drop(n, "target out of range", m->sender); return; }
    }
    it->hdr = m->hdr;
    it->peer = m->sender;
    it->tensor = t;
    it->n = expect;
    it->frame[0] = tg;
    it->len[0] = ntarg;
    queue_push(&n->inbox, &it->q);
}

/* ---- STATE assembly (start-up) ---- */

typedef struct {
    uint64_t donor;
    uint8_t *buf;
    size_t total;
    uint32_t nchunks, got;
    uint8_t *have;
    uint32_t checksum;
    int64_t version;
    int complete;
} state_rx_t;

static state_rx_t s_rx;
static pthread_mutex_t s_rx_lock = PTHREAD_MUTEX_INITIALIZER;  /* s_rx is shared with a moving compute thread */

/* Backups this node holds for stages served by a single node (pushed
 * every BACKUP_EVERY updates), and the one being received. */
#define BACKUP_STAGES MODEL_STAGES_MAX
typedef struct {
    uint8_t *buf;          /* complete snapshot, or NULL */
    size_t total;
    uint32_t checksum;
    int64_t version;
    state_rx_t rx;         /* a snapshot arriving */
} backup_t;

static backup_t s_backups[BACKUP_STAGES];
static pthread_mutex_t s_backup_lock = PTHREAD_MUTEX_INITIALIZER;  /* a moving compute thread may read them */

int swarm_own_backup(node_t *n, int stage, stage_state_t *st)
{
    (void)n;
    int ok = 0;
    pthread_mutex_lock(&s_backup_lock);
    backup_t *b = stage >= 0 && stage < BACKUP_STAGES ? &s_backups[stage] : NULL;
    size_t np = st->s.nparams;
    if (b && b->buf && b->total == 3 * np * sizeof(float)) {
        memcpy(st->params, b->buf, sizeof(float) * np);
        memcpy(st->m, b->buf + sizeof(float) * np, sizeof(float) * np);
        memcpy(st->v, b->buf + 2 * sizeof(float) * np, sizeof(float) * np);
        st->version = b->version;
        ok = 1;
    }
    pthread_mutex_unlock(&s_backup_lock);
    return ok;
}

/* Checks a STATE chunk's preamble against an assembly; returns the chunk
 * index, or -1 (dropped). */
static int s_state_chunk(node_t *n, state_rx_t *x, transport_msg_t *m)
{
    rbuf_t r;
    rbuf_init(&r, m->frame[0], m->len[0]);
    uint64_t total = rbuf_get_u64(&r);
    uint32_t sum = rbuf_get_u32(&r);
    int64_t version = (int64_t)rbuf_get_u64(&r);
    uint32_t nchunks = rbuf_get_u32(&r);
    uint64_t idx = m->hdr.mb;
    if (rbuf_error(&r) || total != x->total || nchunks != x->nchunks || idx >= nchunks) { s_drop(n, "malformed STATE", m->sender); return -1; }
    size_t off = (size_t)idx * STATE_CHUNK, want = total - off < STATE_CHUNK ? total - off : STATE_CHUNK;
    if (m->len[1] != want) { s_drop(n, "STATE chunk of the wrong size", m->sender); return -1; }
    if (x->got == 0) { x->checksum = sum; x->version = version; }
    else if (sum != x->checksum || version != x->version) {
        /* a newer snapshot started: begin again with it */
        memset(x->have, 0, x->nchunks);
        x->got = 0;
        x->checksum = sum;
        x->version = version;
    }
    if (!x->have[idx]) {
        memcpy(x->buf + off, m->frame[1], want);
        x->have[idx] = 1;
        x->got++;
    }
    if (x->got == x->nchunks) {
        if (frame_checksum(x->buf, x->total, 0) != x->checksum) {
            s_drop(n, "STATE checksum mismatch", m->sender);
            memset(x->have, 0, x->nchunks);
            x->got = 0;
            return -1;
        }
        x->complete = 1;
    }
    return (int)idx;
}

/* Floats of stage s's parameters (for checking backup sizes). */
static size_t s_stage_params(node_t *n, int s)
{
    stage_t st;
    char err[200];
    return stage_init(&st, &n->o.cfg, s, n->nstages, err, sizeof err) < 0 ? 0 : st.nparams;
}

static void s_on_backup_push(node_t *n, transport_msg_t *m)
{
    int st = -1;
    int s = m->hdr.stage;
    if (!s_known(n, m->sender, &st) || st != s || s >= BACKUP_STAGES || s >= n->nstages || m->nframes < 2) {
        s_drop(n, "unexpected backup", m->sender);
        return;
    }
    backup_t *b = &s_backups[s];
    state_rx_t *x = &b->rx;
    size_t total = 3 * s_stage_params(n, s) * sizeof(float);
    if (!x->buf || x->total != total) {
        free(x->buf);
        free(x->have);
        memset(x, 0, sizeof *x);
        x->total = total;
        x->nchunks = (uint32_t)((total + STATE_CHUNK - 1) / STATE_CHUNK);
        x->buf = malloc(total);
        x->have = calloc(x->nchunks, 1);
        if (!x->buf || !x->have) { free(x->buf); free(x->have); memset(x, 0, sizeof *x); return; }
    }
    if (s_state_chunk(n, x, m) < 0 || !x->complete) return;
    /* keep the complete snapshot; the assembly buffer becomes the held copy */
    pthread_mutex_lock(&s_backup_lock);
    free(b->buf);
    b->buf = x->buf;
    b->total = x->total;
    b->checksum = x->checksum;
    b->version = x->version;
    pthread_mutex_unlock(&s_backup_lock);
    free(x->have);
    memset(x, 0, sizeof *x);
    char id[9];
    node_id_short(m->sender, id);
    metrics_event(n->metrics, "backup", "\"held_stage\":%d,\"version\":%lld,\"from\":%s,\"bytes\":%zu",
                  s, (long long)b->version, id, b->total);
}

/* Serves a held backup to a replacement node of that stage. */
static void s_serve_backup(node_t *n, transport_msg_t *m)
{
    int s = m->hdr.stage;
    if (s >= BACKUP_STAGES || s >= n->nstages || !s_backups[s].buf) return;  /* nothing held: silence */
    backup_t *b = &s_backups[s];
    uint32_t nchunks = (uint32_t)((b->total + STATE_CHUNK - 1) / STATE_CHUNK);
    for (uint32_t k = 0; k < nchunks; k++) {
        size_t off = (size_t)k * STATE_CHUNK, len = b->total - off < STATE_CHUNK ? b->total - off : STATE_CHUNK;
        uint8_t pre[32];
        wbuf_t w;
        wbuf_init_fixed(&w, pre, sizeof pre);
        wbuf_put_u64(&w, b->total);
        wbuf_put_u32(&w, b->checksum);
        wbuf_put_u64(&w, (uint64_t)b->version);
        wbuf_put_u32(&w, nchunks);
        wire_hdr_t h;
        s_hdr(n, &h, WIRE_STATE);
        h.stage = (uint16_t)s;
        h.mb = k;
        h.flags = STATE_FLAG_BACKUP | STATE_FLAG_REPLY;
        h.wversion = (uint32_t)b->version;
        const void *f[2] = { pre, b->buf + off };
        size_t l[2] = { w.len, len };
        /* the replacement may not be in our table yet: answer on the connection it used */
        if (transport_reply(n->tr, m, &h, f, l, 2) == 0) {
            s_account(n, l, 2, 0);
            atomic_fetch_add(&n->bytes_sent_state, WIRE_HDR_LEN + l[0] + l[1]);
        }
    }
    char id[9];
    node_id_short(m->sender, id);
    metrics_event(n->metrics, "backup", "\"served_stage\":%d,\"version\":%lld,\"to\":%s", s, (long long)b->version, id);
}

static void s_on_state(node_t *n, transport_msg_t *m)
{
    if (m->nframes < 2) { s_drop(n, "STATE without body", m->sender); return; }
    if ((m->hdr.flags & STATE_FLAG_BACKUP) && !(m->hdr.flags & STATE_FLAG_REPLY)) { s_on_backup_push(n, m); return; }
    state_rx_t *x = &s_rx;
    pthread_mutex_lock(&s_rx_lock);
    if (x->buf && !x->complete && m->hdr.stage == n->stage) {   /* else a late chunk of a download already done */
        if (x->donor == 0) x->donor = m->sender;  /* a backup fetch takes the first holder that answers */
        if (m->sender == x->donor) s_state_chunk(n, x, m);
    }
    pthread_mutex_unlock(&s_rx_lock);
}

int swarm_rx_begin(node_t *n, size_t nparams)
{
    (void)n;
    state_rx_t *x = &s_rx;
    pthread_mutex_lock(&s_rx_lock);
    free(x->buf);
    free(x->have);
    memset(x, 0, sizeof *x);
    x->total = 3 * nparams * sizeof(float);
    x->nchunks = (uint32_t)((x->total + STATE_CHUNK - 1) / STATE_CHUNK);
    x->buf = malloc(x->total);
    x->have = calloc(x->nchunks, 1);
    int ok = x->buf && x->have;
    if (!ok) { free(x->buf); free(x->have); memset(x, 0, sizeof *x); }
    pthread_mutex_unlock(&s_rx_lock);
    return ok ? 0 : -1;
}

int swarm_rx_poll(node_t *n, stage_state_t *st)
{
    (void)n;
    state_rx_t *x = &s_rx;
    pthread_mutex_lock(&s_rx_lock);
    int done = x->buf && x->complete;
    if (done) {
        size_t np = st->s.nparams;
        memcpy(st->params, x->buf, sizeof(float) * np);
        memcpy(st->m, x->buf + sizeof(float) * np, sizeof(float) * np);
        memcpy(st->v, x->buf + 2 * sizeof(float) * np, sizeof(float) * np);
        st->version = x->version;
    }
    pthread_mutex_unlock(&s_rx_lock);
    return done;
}

void swarm_rx_end(void)
{
    pthread_mutex_lock(&s_rx_lock);
    free(s_rx.buf);
    free(s_rx.have);
    memset(&s_rx, 0, sizeof s_rx);
    pthread_mutex_unlock(&s_rx_lock);
}

/* ---- dispatch ---- */

static void s_dispatch(node_t *n, transport_msg_t *m)
{
    atomic_fetch_add(&n->bytes_recv, WIRE_HDR_LEN);
    for (int i = 0; i < m->nframes; i++) atomic_fetch_add(&n->bytes_recv, m->len[i]);
    int type = m->hdr.type;
    if (type == WIRE_STATUS_REQ && n->o.closed && !s_admitted(n, m->sender)) {
        /* `brigade status --keys DIR --ticket T` shows its ticket with the request */
        ticket_t t;
        char why[200] = "no admission ticket";
        if (m->nframes < 1 || ticket_decode(&t, m->frame[0], m->len[0], why, sizeof why) < 0
            || ticket_verify(&t, n->o.owner_pub, m->sender_pub, (uint64_t)time(NULL), why, sizeof why) < 0) {
            s_drop(n, "STATUS_REQ without a valid ticket (closed swarm)", m->sender);
            return;
        }
    }
    if (type == WIRE_STATUS_REQ) {
        wbuf_t w;
        wbuf_init(&w, 1 << 22);
        wbuf_put_u32(&w, (uint32_t)n->nstages);
        wbuf_put_u64(&w, n->target);
        wbuf_put_u64(&w, peers_completed(&n->peers) + atomic_load(&n->completed));
        float best_loss = NAN;
        pthread_mutex_lock(&n->peers.lock);
        for (int i = 0; i < n->peers.n; i++)
            if (n->peers.p[i].info.stage == n->nstages - 1 && n->peers.p[i].last_loss > 0) best_loss = (float)n->peers.p[i].last_loss;
        pthread_mutex_unlock(&n->peers.lock);
        if (n->stage == n->nstages - 1) best_loss = (float)atomic_load(&n->last_loss);
        wbuf_put_f32(&w, best_loss);
        wbuf_put_str(&w, n->o.cfg.name);
        s_put_table(n, &w);
        if (!wbuf_error(&w)) {
            wire_hdr_t h;
            s_hdr(n, &h, WIRE_STATUS);
            const void *f[1] = { w.data };
            size_t l[1] = { w.len };
            if (transport_reply(n->tr, m, &h, f, l, 1) == 0) s_account(n, l, 1, 0);
        }
        wbuf_free(&w);
        return;
    }
    if (s_banned(n, m->sender)) { atomic_fetch_add(&n->drops, 1); return; }  /* not even counted as a strike */
    if (type == WIRE_JOIN) {
        if (m->hdr.run != 0 && m->hdr.run != n->run) { s_drop(n, "JOIN for another run", m->sender); return; }
        s_on_join(n, m);
        return;
    }
    if (m->hdr.run != n->run) { s_drop(n, "message of another run", m->sender); return; }
    if (n->o.closed && !s_admitted(n, m->sender)) { s_drop(n, "no admission ticket", m->sender); return; }
    s_heard(n, m->sender);
    switch (type) {
    case WIRE_PEERS: s_on_peers(n, m); break;
    case WIRE_PING: {
        wire_hdr_t h;
        s_hdr(n, &h, WIRE_PONG);
        h.mb = m->hdr.mb;
        if (m->link >= 0 || s_link(n, m->sender) >= 0) s_send(n, m->sender, &h, NULL, NULL, 0, 0);
        break;
    }
    case WIRE_PONG: s_on_pong(n, m); break;
    case WIRE_ACT: case WIRE_GRAD: case WIRE_AVG:
        if (!n->st) { s_drop(n, "tensor before this node serves", m->sender); break; }
        s_on_tensor(n, m);
        break;
    case WIRE_STATE_REQ: {
        int st;
        if (m->hdr.flags & STATE_FLAG_BACKUP) { s_serve_backup(n, m); break; }
        if (!n->st || !s_known(n, m->sender, &st) || m->hdr.stage != n->stage) { s_drop(n, "STATE_REQ this node cannot serve", m->sender); break; }
        pthread_mutex_lock(&n->peers.lock);
        int pi = peers_find_locked(&n->peers, m->sender), limited = 0;
        if (pi >= 0) {
            limited = n->peers.p[pi].last_state_req > 0 && metrics_now() - n->peers.p[pi].last_state_req < STATE_REQ_EVERY_S;
            if (!limited) n->peers.p[pi].last_state_req = metrics_now();
        }
        pthread_mutex_unlock(&n->peers.lock);
        if (limited) { s_drop(n, "STATE_REQ rate limit", m->sender); break; }
        item_t *it = item_new();
        if (!it) break;
        it->hdr = m->hdr;
        it->peer = m->sender;
        queue_push(&n->inbox, &it->q);
        break;
    }
    case WIRE_STATE: s_on_state(n, m); break;
    case WIRE_BYE: {
        pthread_mutex_lock(&n->peers.lock);
        int i = peers_find_locked(&n->peers, m->sender);
        if (i >= 0 && n->peers.p[i].health != PEER_GONE) {
            n->peers.p[i].health = PEER_GONE;
            char s[9];
            node_id_short(m->sender, s);
            metrics_event(n->metrics, "peer", "\"peer\":%s,\"what\":\"gone\",\"why\":\"bye\",\"peer_stage\":%d", s, n->peers.p[i].info.stage);
        }
        pthread_mutex_unlock(&n->peers.lock);
        break;
    }
    case WIRE_DONE: {
        int st = -1;
        if (s_known(n, m->sender, &st) && st == n->nstages - 1) atomic_store(&n->done, 1);
        else s_drop(n, "DONE from a peer that is not of the last stage", m->sender);
        break;
    }
    default:
        s_drop(n, "unexpected message type", m->sender);
    }
}

/* ---- periodic work ---- */

static void s_broadcast(node_t *n, int type)
{
    uint64_t ids[PEERS_CAP];
    int k = 0;
    pthread_mutex_lock(&n->peers.lock);
    for (int i = 0; i < n->peers.n; i++)
        if (n->peers.p[i].info.id != n->id && n->peers.p[i].health != PEER_GONE) ids[k++] = n->peers.p[i].info.id;
    pthread_mutex_unlock(&n->peers.lock);
    for (int i = 0; i < k; i++) {
        if (type == WIRE_PEERS) { s_send_table(n, ids[i]); continue; }
        wire_hdr_t h;
        s_hdr(n, &h, type);
        h.mb = (uint64_t)(metrics_now() * 1e6);
        s_send(n, ids[i], &h, NULL, NULL, 0, 0);
    }
}

static void s_check_health(node_t *n)
{
    double now = metrics_now();
    pthread_mutex_lock(&n->peers.lock);
    for (int i = 0; i < n->peers.n; i++) {
        peer_t *p = &n->peers.p[i];
        if (p->info.id == n->id || p->health == PEER_GONE) continue;
        /* silence allowed: a few heartbeats, stretched by the measured RTT and its spread */
        double gone = GONE_MIN_S + (p->rtt_ms * 8 + p->rtt_dev_ms * 8) * 1e-3;
        double slow = gone / 2;
        double quiet = now - p->last_heard;
        char s[9];
        node_id_short(p->info.id, s);
        if (quiet > gone) {
            p->health = PEER_GONE;
            metrics_event(n->metrics, "peer", "\"peer\":%s,\"what\":\"gone\",\"why\":\"silent %.1f s\",\"peer_stage\":%d", s, quiet, p->info.stage);
        } else if (quiet > slow && p->health == PEER_ALIVE) {
            p->health = PEER_SLOW;
            metrics_event(n->metrics, "peer", "\"peer\":%s,\"what\":\"slow\",\"why\":\"silent %.1f s\",\"peer_stage\":%d", s, quiet, p->info.stage);
        } else if (quiet <= slow && p->health == PEER_SLOW) {
            p->health = PEER_ALIVE;
        }
    }
    pthread_mutex_unlock(&n->peers.lock);
}

static void s_drain_outbox(node_t *n)
{
    queue_item_t *q;
    while ((q = queue_pop(&n->outbox, 0))) {
        item_t *it = (item_t *)q;
        if (it->peer == 0) {
            /* to every live peer, header as given */
            uint64_t ids[PEERS_CAP];
            int k = 0;
            pthread_mutex_lock(&n->peers.lock);
            for (int i = 0; i < n->peers.n; i++)
                if (n->peers.p[i].info.id != n->id && n->peers.p[i].health != PEER_GONE) ids[k++] = n->peers.p[i].info.id;
            pthread_mutex_unlock(&n->peers.lock);
            const void *f[3] = { it->frame[0], it->frame[1], it->frame[2] };
            for (int i = 0; i < k; i++) s_send(n, ids[i], &it->hdr, f, it->len, it->nframes, it->raw_bytes);
        } else {
            const void *f[3] = { it->frame[0], it->frame[1], it->frame[2] };
            if (s_send(n, it->peer, &it->hdr, f, it->len, it->nframes, it->raw_bytes) != 0)
                s_drop(n, "send failed (peer unknown or its queue full)", it->peer);
        }
        item_free(it);
    }
}

static int s_poll_once(node_t *n, int timeout_ms)
{
    transport_msg_t m;
    int r = transport_poll(n->tr, timeout_ms, &m);
    if (r == 1) {
        s_dispatch(n, &m);
        transport_msg_close(&m);
    }
    return r;
}

void *swarm_io_thread(void *arg)
{
    node_t *n = arg;
    double next_ping = 0, next_gossip = 0, next_health = 0;
    int done_sent = 0;
    while (!atomic_load(&n->io_stop)) {
        s_drain_outbox(n);
        double now = metrics_now();
        if (now >= next_ping) { s_broadcast(n, WIRE_PING); next_ping = now + PING_EVERY_S; }
        if (now >= next_gossip) { s_broadcast(n, WIRE_PEERS); next_gossip = now + GOSSIP_EVERY_S; }
        if (now >= next_health) { s_check_health(n); next_health = now + 0.25; }
        if (atomic_load(&n->done) && !done_sent) {
            /* only a run that completed ends the swarm; an interrupted or failed node just leaves */
            if (n->stage == n->nstages - 1 && atomic_load(&n->done) == 1 && n->status == 0) s_broadcast(n, WIRE_DONE);
            s_broadcast(n, WIRE_PEERS);
            done_sent = 1;
        }
        s_poll_once(n, 20);
    }
    s_drain_outbox(n);
    return NULL;
}

void swarm_io_bye(node_t *n)
{
    if (!atomic_load(&n->done)) return;
    if (n->stage == n->nstages - 1 && n->status == 0) s_broadcast(n, WIRE_DONE);
    s_broadcast(n, WIRE_BYE);
    /* let the emulated links and ZeroMQ deliver what is queued */
    for (int i = 0; i < 10; i++) s_poll_once(n, 20);
}

/* ---- start-up ---- */

static int s_join(node_t *n, char *err, size_t errlen)
{
    char host[ADDR_HOST_MAX];
    int port;
    uint8_t key[32];
    char why[300];
    if (addr_parse(n->o.join, host, sizeof host, &port, key, why, sizeof why) < 0) {
        snprintf(err, errlen, "--join %s", why);
        return -1;
    }
    int link = transport_connect(n->tr, host, port, key, why, sizeof why);
    if (link < 0) { snprintf(err, errlen, "--join %s: %s", n->o.join, why); return -1; }
    wbuf_t w;
    wbuf_init(&w, 1024);
    s_put_join(n, &w, n->o.stage);
    wire_hdr_t h;
    wire_hdr_init(&h, WIRE_JOIN);
    const void *f[1] = { w.data };
    size_t l[1] = { w.len };
    transport_send(n->tr, link, &h, f, l, 1);
    double deadline = metrics_now() + JOIN_WAIT_S, resend = metrics_now() + 3.0;
    int ok = 0;
    while (!ok && metrics_now() < deadline) {
        transport_msg_t m;
        int r = transport_poll(n->tr, 100, &m);
        if (metrics_now() > resend) { transport_send(n->tr, link, &h, f, l, 1); resend = metrics_now() + 3.0; }
        if (r != 1) continue;
        if (m.hdr.type == WIRE_BYE && m.nframes >= 1 && m.len[0] < 200) {
            char why[200];
            memcpy(why, m.frame[0], m.len[0]);
            why[m.len[0]] = 0;
            for (char *q = why; *q; q++) if (*q < 32 || *q > 126) *q = '?';
            snprintf(err, errlen, "--join %s: refused by the swarm: %s (a closed swarm needs --ticket from its owner)", n->o.join, why);
            transport_msg_close(&m);
            wbuf_free(&w);
            return -1;
        }
        if (m.hdr.type == WIRE_WELCOME && m.nframes >= 3) {
            opts_t o = n->o;
            rbuf_t rc, ra, rt;
            rbuf_init(&rc, m.frame[0], m.len[0]);
            rbuf_init(&ra, m.frame[1], m.len[1]);
            rbuf_init(&rt, m.frame[2], m.len[2]);
            char e2[256];
            if (opts_decode_run(&rc, &o, e2, sizeof e2) < 0) {
                snprintf(err, errlen, "--join %s: the swarm's %s", n->o.join, e2);
                transport_msg_close(&m);
                wbuf_free(&w);
                return -1;
            }
            int stage = (int)rbuf_get_u32(&ra);
            int shard = (int)rbuf_get_u32(&ra);
            int done = rbuf_get_u8(&ra);
            static peer_info_t recs[PEERS_CAP];
            int k = 0;
            if (rbuf_error(&ra) || stage < 0 || stage >= o.stages || peers_decode(&rt, recs, PEERS_CAP, &k, e2, sizeof e2) < 0) {
                snprintf(err, errlen, "--join %s: malformed WELCOME", n->o.join);
                transport_msg_close(&m);
                wbuf_free(&w);
                return -1;
            }
            if (done) {
                snprintf(err, errlen, "--join %s: that run has already finished", n->o.join);
                transport_msg_close(&m);
                wbuf_free(&w);
                return -1;
            }
            n->o = o;
            n->run = m.hdr.run;
            n->stage = stage;
            n->nstages = o.stages;
            n->shard = shard;
            if (s_take_table(n, &rt, recs, k, m.sender, m.sender_pub, "welcome") < 0) {
                snprintf(err, errlen, "--join %s: malformed WELCOME", n->o.join);
                transport_msg_close(&m);
                wbuf_free(&w);
                return -1;
            }
            /* the bootstrap's link is the one we opened */
            pthread_mutex_lock(&n->peers.lock);
            int i = peers_find_locked(&n->peers, m.sender);
            if (i >= 0 && n->peers.p[i].link < 0) n->peers.p[i].link = link;
            if (i >= 0) n->peers.p[i].admitted = 1;  /* the node we chose to join */
            pthread_mutex_unlock(&n->peers.lock);
            ok = 1;
        }
        transport_msg_close(&m);
    }
    wbuf_free(&w);
    if (!ok) {
        snprintf(err, errlen, "--join %s: no answer from %s:%d in %.0f s (is a brigade node running there, is the port reachable, is the key its current one?)",
                 n->o.join, host, port, JOIN_WAIT_S);
        return -1;
    }
    return 0;
}

int swarm_io_start(node_t *n, char *err, size_t errlen)
{
    transport_opts_t to = {0};
    to.listen_host = n->listen_host;
    to.listen_port = n->listen_port;
    to.keys = &n->keys;
    to.on_drop = s_on_transport_drop;
    to.drop_arg = n;
    to.sndhwm = 1000;
    to.emu_latency_ms = n->o.emu_latency_ms;
    to.emu_jitter_ms = n->o.emu_jitter_ms;
    to.emu_bandwidth_mbit = n->o.emu_bandwidth_mbit;
    to.emu_loss = n->o.emu_loss;
    to.emu_seed = n->id;
    n->tr = transport_new(&to, err, errlen);
    if (!n->tr) return -1;
    n->listen_port = transport_port(n->tr);
    if (n->o.advertise[0]) {
        if (strlen(n->o.advertise) >= sizeof n->adv) { snprintf(err, errlen, "--advertise: too long"); return -1; }
        memcpy(n->adv, n->o.advertise, strlen(n->o.advertise) + 1);
    } else {
        const char *h = n->listen_host;
        if (!strcmp(h, "0.0.0.0") || !strcmp(h, "*") || !strcmp(h, "::")) {
            h = "127.0.0.1";
            if (n->o.join[0] || 1)
                fprintf(stderr, "brigade node: listening on all interfaces without --advertise: peers are told 127.0.0.1, "
                                "which only works on this machine (pass --advertise PUBLIC_HOST:PORT)\n");
        }
        hostport_format(n->adv, sizeof n->adv, h, n->listen_port);
    }
    char ah[ADDR_HOST_MAX];
    int ap;
    if (hostport_parse(n->adv, ah, sizeof ah, &ap, 0, err, errlen) < 0) return -1;
    addr_format(n->join_addr, sizeof n->join_addr, ah, ap, n->keys.pub);
    n->dcodec = codec_ctx_new(1);
    if (!n->dcodec) { snprintf(err, errlen, "out of memory"); return -1; }
    if (n->o.join[0]) return s_join(n, err, errlen);
    return 0;
}

/* Start-up downloads (before the I/O thread runs): sends req to `to` (0:
 * every live peer) every resend_s and polls the transport until the state
 * is complete or wait_s passed.  0 loaded into n->st, -1 not. */
static int s_fetch(node_t *n, uint64_t to, uint32_t flags, double wait_s, double resend_s)
{
    if (swarm_rx_begin(n, n->st->s.nparams) < 0) return -1;
    if (to) {
        pthread_mutex_lock(&s_rx_lock);
        s_rx.donor = to;
        pthread_mutex_unlock(&s_rx_lock);
    }
    double deadline = metrics_now() + wait_s, resend = 0;
    int ok = 0;
    while (!ok && metrics_now() < deadline && !atomic_load(&n->done)) {
        if (metrics_now() >= resend) {
            wire_hdr_t h;
            s_hdr(n, &h, WIRE_STATE_REQ);
            h.flags = flags;
            if (to) {
                s_send(n, to, &h, NULL, NULL, 0, 0);
            } else {
                uint64_t ids[PEERS_CAP];
                int k = 0;
                pthread_mutex_lock(&n->peers.lock);
                for (int i = 0; i < n->peers.n; i++)
                    if (n->peers.p[i].info.id != n->id && n->peers.p[i].health != PEER_GONE) ids[k++] = n->peers.p[i].info.id;
                pthread_mutex_unlock(&n->peers.lock);
                for (int i = 0; i < k; i++) s_send(n, ids[i], &h, NULL, NULL, 0, 0);
            }
            resend = metrics_now() + resend_s;
        }
        s_poll_once(n, 50);
        s_drain_outbox(n);
        ok = swarm_rx_poll(n, n->st);
    }
    swarm_rx_end();
    if (ok) atomic_store(&n->version, n->st->version);
    return ok ? 0 : -1;
}

int swarm_fetch_backup(node_t *n, double wait_s, char *err, size_t errlen)
{
    if (s_fetch(n, 0, STATE_FLAG_BACKUP, wait_s, wait_s) == 0) return 0;
    snprintf(err, errlen, "no peer holds a backup of stage %d", n->stage);
    return -1;
}

int swarm_fetch_state(node_t *n, uint64_t donor, char *err, size_t errlen)
{
    double t0 = metrics_now();
    if (s_fetch(n, donor, 0, 60.0, 3.0) == 0) return 0;
    char s[9];
    node_id_short(donor, s);
    snprintf(err, errlen, "could not download stage %d's state from peer %s in %.0f s", n->stage, s, metrics_now() - t0);
    return -1;
}
