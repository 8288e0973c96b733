/* transport.c: ROUTER + DEALER links over CurveZMQ, a ZAP handler served in
 * transport_poll(), and link emulation of outgoing messages. */
#include "net/transport.h"
#include "net/linkemu.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#define ZAP_ENDPOINT "inproc://zeromq.zap.01"
#define MON_ENDPOINT "inproc://brigade.monitor"   /* handshake failures of the router */
#define INBOX_MAX_BYTES (8ll << 20)   /* emulated downlink: stop reading past this backlog */

/* A message waiting in a link's emulation queue: all frames in one block. */
typedef struct s_pending {
    struct s_pending *next;   /* next in the link's queue */
    double wire;              /* its bytes on the emulated wire (linkemu_wire_bytes) */
    int serialized;           /* its last byte has left the emulated uplink: due_us is set */
    int64_t due_us;           /* release time, monotonic µs */
    int nparts;               /* frames incl. route (replies) and header */
    size_t total;             /* bytes of all frames (route excluded) */
    int has_route;            /* parts[0] is a routing id */
    size_t lens[TRANSPORT_MAX_FRAMES + 2];
    uint8_t *parts[TRANSPORT_MAX_FRAMES + 2];
} s_pending_t;

typedef struct {
    void *sock;               /* DEALER (ROUTER for the reply queue); NULL when closed */
    uint8_t server_pub[32];   /* the server's key (links) */
    uint64_t server_id;       /* node_id_from_pubkey(server_pub) */
    s_pending_t *head, *tail; /* emulation queue */
    s_pending_t *ser;         /* first message still being serialized; NULL: none */
    double left;              /* its bytes still to serialize */
    int64_t queued_bytes;     /* bytes in the queue */
    int64_t last_due_us;      /* keeps order under jitter */
    uint8_t route[256];       /* adopted link: the peer's routing id on our router */
    size_t route_len;         /* 0: a link we opened (a DEALER of ours) */
} s_link_t;

/* A received message waiting for the emulated downlink. */
typedef struct s_inbox {
    struct s_inbox *next;     /* next in arrival order */
    int64_t due_us;           /* delivery time, monotonic µs */
    int64_t bytes;            /* header and frames */
    transport_msg_t msg;      /* owns its zmq parts */
} s_inbox_t;

struct transport_t {
    void *ctx;                /* one ZeroMQ context per transport */
    void *router;             /* listening socket */
    void *zap;                /* ZAP handler (REP) */
    void *mon;                /* PAIR receiving the router's handshake-failure events */
    int wakefd;               /* eventfd for transport_wake */
    int port;                 /* bound port */
    keypair_t keys;           /* our identity */
    uint64_t id;              /* our node id */
    transport_opts_t o;       /* options with defaults filled in */
    s_link_t *links;          /* outgoing links, by index */
    int nlinks, caplinks;
    s_link_t reply;           /* emulation queue of replies on the router */
    zmq_pollitem_t *items;    /* poll set scratch */
    int *item_link;           /* items[i] -> link index, -1 router */
    int capitems;
    int rr;                   /* round-robin start among readable sockets */
    uint64_t rng;             /* emulation randomness */
    int emulate;              /* any emulation option of outgoing messages set */
    int64_t up_clock_us;      /* the emulated uplink has been run up to this time */
    double ack_left;          /* bytes of TCP acknowledgements it still has to send */
    s_link_t **flow;          /* scratch: the uplink's busy flows (NULL: the acknowledgements) */
    double *flow_left;        /* scratch: their bytes still to serialize */
    linkemu_queue_t down;     /* emulated downlink (mbit 0: off) */
    s_inbox_t *in_head, *in_tail; /* received messages waiting for the downlink */
    int64_t in_bytes;         /* their bytes */
    int retry_soon;           /* a due message met a full queue */
    transport_stats_t st;     /* counters */
};

static int64_t s_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static double s_uniform(transport_t *self)
{
    /* splitmix64 */
    uint64_t z = (self->rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double)(z >> 11) * (1.0 / 9007199254740992.0);
}

static void s_drop(transport_t *self, const char *why, const uint8_t *pub)
{
    size_t n = strlen(why);
    if (n >= sizeof self->st.last_drop) n = sizeof self->st.last_drop - 1;
    memcpy(self->st.last_drop, why, n);
    self->st.last_drop[n] = '\0';
    if (self->o.on_drop) self->o.on_drop(self->o.drop_arg, why, pub);
}

static void s_hex(char *out, const uint8_t *p, size_t n)
{
    static const char hx[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = hx[p[i] >> 4];
        out[2 * i + 1] = hx[p[i] & 15];
    }
    out[2 * n] = '\0';
}

static int s_unhex(uint8_t *out, const char *s, size_t n)
{
    if (strlen(s) != 2 * n) return -1;
    for (size_t i = 0; i < 2 * n; i++) {
        int c = s[i], v;
        if (c >= '0' && c <= '9') v = c - '0';
        else if (c >= 'a' && c <= 'f') v = c - 'a' + 10;
        else return -1;
        if (i & 1) out[i / 2] = (uint8_t)(out[i / 2] | v);
        else out[i / 2] = (uint8_t)(v << 4);
    }
    return 0;
}

/* Options common to the ROUTER and DEALERs. */
static int s_setup_socket(transport_t *self, void *sock, int ipv6)
{
    int rc = 0;
    rc |= zmq_setsockopt(sock, ZMQ_LINGER, &self->o.linger_ms, sizeof(int));
    rc |= zmq_setsockopt(sock, ZMQ_SNDHWM, &self->o.sndhwm, sizeof(int));
    rc |= zmq_setsockopt(sock, ZMQ_RCVHWM, &self->o.rcvhwm, sizeof(int));
    rc |= zmq_setsockopt(sock, ZMQ_MAXMSGSIZE, &self->o.max_msg_bytes, sizeof(int64_t));
    rc |= zmq_setsockopt(sock, ZMQ_HEARTBEAT_IVL, &self->o.heartbeat_ivl_ms, sizeof(int));
    rc |= zmq_setsockopt(sock, ZMQ_HEARTBEAT_TIMEOUT, &self->o.heartbeat_timeout_ms, sizeof(int));
    rc |= zmq_setsockopt(sock, ZMQ_HEARTBEAT_TTL, &self->o.heartbeat_timeout_ms, sizeof(int));
    rc |= zmq_setsockopt(sock, ZMQ_IPV6, &ipv6, sizeof ipv6);
    return rc ? -1 : 0;
}

static void s_endpoint(char *out, size_t outlen, const char *host, int port)
{
    int v6 = strchr(host, ':') != NULL;
    if (port == 0) snprintf(out, outlen, v6 ? "tcp://[%s]:*" : "tcp://%s:*", host);
    else snprintf(out, outlen, v6 ? "tcp://[%s]:%d" : "tcp://%s:%d", host, port);
}

/* Fills in the defaults of the options left 0 (transport.h). */
static void s_apply_defaults(transport_opts_t *o)
{
    if (!o->listen_host) o->listen_host = "127.0.0.1";
    if (o->max_msg_bytes <= 0) o->max_msg_bytes = WIRE_FRAME_BYTES_MAX;
    if (o->sndhwm <= 0) o->sndhwm = 100;
    if (o->rcvhwm <= 0) o->rcvhwm = 1000;
    if (o->linger_ms <= 0) o->linger_ms = 200;
    if (o->heartbeat_ivl_ms <= 0) o->heartbeat_ivl_ms = 1000;
    if (o->heartbeat_timeout_ms <= 0) o->heartbeat_timeout_ms = 10000;
    if (o->reconnect_ivl_ms <= 0) o->reconnect_ivl_ms = 100;
    if (o->emu_max_queue_bytes == 0) o->emu_max_queue_bytes = (size_t)256 << 20;
    if (o->emu_loss < 0) o->emu_loss = 0;
}

/* Opens the ZAP handler (first, so no client is handled without it), the
 * listening ROUTER socket with its monitor, binds it and notes the port it
 * got.  0, or -1 with a one-line reason (the caller destroys self). */
static int s_open_listener(transport_t *self, char *err, size_t errlen)
{
    const transport_opts_t *o = &self->o;
    char ep[400];
    int zero = 0, one = 1, ipv6 = strchr(o->listen_host, ':') != NULL;
    self->ctx = zmq_ctx_new();
    if (!self->ctx) { net_errf(err, errlen, "cannot create a ZeroMQ context: %s", zmq_strerror(errno)); return -1; }
    zmq_ctx_set(self->ctx, ZMQ_IO_THREADS, 1);

    /* the ZAP handler first, so no client can be handled without it */
    self->zap = zmq_socket(self->ctx, ZMQ_REP);
    if (!self->zap || zmq_setsockopt(self->zap, ZMQ_LINGER, &zero, sizeof zero) ||
        zmq_bind(self->zap, ZAP_ENDPOINT)) {
        net_errf(err, errlen, "cannot start the ZAP handler: %s", zmq_strerror(errno));
        return -1;
    }

    self->router = zmq_socket(self->ctx, ZMQ_ROUTER);
    if (!self->router || s_setup_socket(self, self->router, ipv6) ||
        zmq_setsockopt(self->router, ZMQ_ROUTER_MANDATORY, &one, sizeof one) ||
        zmq_setsockopt(self->router, ZMQ_CURVE_SERVER, &one, sizeof one) ||
        zmq_setsockopt(self->router, ZMQ_CURVE_SECRETKEY, self->keys.sec, 32) ||
        zmq_setsockopt(self->router, ZMQ_ZAP_DOMAIN, "brigade", 7)) {
        net_errf(err, errlen, "cannot set up the listening socket: %s", zmq_strerror(errno));
        return -1;
    }
    int events = ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL;
    self->mon = zmq_socket(self->ctx, ZMQ_PAIR);
    if (zmq_socket_monitor(self->router, MON_ENDPOINT, events) != 0 || !self->mon ||
        zmq_setsockopt(self->mon, ZMQ_LINGER, &zero, sizeof zero) ||
        zmq_connect(self->mon, MON_ENDPOINT) != 0) {
        net_errf(err, errlen, "cannot monitor the listening socket: %s", zmq_strerror(errno));
        return -1;
    }
    s_endpoint(ep, sizeof ep, o->listen_host, o->listen_port);
    if (zmq_bind(self->router, ep) != 0) {
        char hp[300];
        hostport_format(hp, sizeof hp, o->listen_host, o->listen_port);
        net_errf(err, errlen, "cannot listen on %s: %s", hp, zmq_strerror(errno));
        return -1;
    }
    char last[400];
    size_t lastlen = sizeof last;
    if (zmq_getsockopt(self->router, ZMQ_LAST_ENDPOINT, last, &lastlen) == 0) {
        last[sizeof last - 1] = '\0';
        const char *c = strrchr(last, ':');
        self->port = c ? atoi(c + 1) : o->listen_port;
    } else {
        self->port = o->listen_port;
    }
    return 0;
}

transport_t *transport_new(const transport_opts_t *opts, char *err, size_t errlen)
{
    assert(opts && opts->keys);
    if (!zmq_has("curve")) {
        net_errf(err, errlen, "this libzmq was built without CURVE security");
        return NULL;
    }
    transport_t *self = calloc(1, sizeof *self);
    if (!self) { net_errf(err, errlen, "out of memory"); return NULL; }
    self->wakefd = -1;
    self->o = *opts;
    transport_opts_t *o = &self->o;
    s_apply_defaults(o);
    self->emulate = o->emu_latency_ms > 0 || o->emu_jitter_ms > 0 ||
                    o->emu_bandwidth_mbit > 0 || o->emu_loss > 0;
    self->down = linkemu_queue(o->emu_downlink_mbit);
    self->flow = calloc(2, sizeof *self->flow);            /* the replies and the acknowledgements */
    self->flow_left = calloc(2, sizeof *self->flow_left);
    if (!self->flow || !self->flow_left) { net_errf(err, errlen, "out of memory"); goto fail; }
    self->rng = o->emu_seed ^ 0x5DEECE66Dull;
    self->keys = *opts->keys;
    self->id = node_id_from_pubkey(self->keys.pub);
    self->reply.last_due_us = 0;

    if (s_open_listener(self, err, errlen)) goto fail;
    self->reply.sock = self->router;

    self->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (self->wakefd < 0) { net_errf(err, errlen, "eventfd: %s", strerror(errno)); goto fail; }
    return self;
fail:
    transport_destroy(&self);
    return NULL;
}

static void s_free_queue(s_link_t *l)
{
    while (l->head) {
        s_pending_t *p = l->head;
        l->head = p->next;
        free(p);
    }
    l->tail = NULL;
    l->ser = NULL;
    l->left = 0;
    l->queued_bytes = 0;
}

void transport_destroy(transport_t **self_p)
{
    assert(self_p);
    transport_t *self = *self_p;
    if (!self) return;
    for (int i = 0; i < self->nlinks; i++) {
        s_free_queue(&self->links[i]);
        if (self->links[i].sock && !self->links[i].route_len) zmq_close(self->links[i].sock);
    }
    s_free_queue(&self->reply);
    while (self->in_head) {
        s_inbox_t *b = self->in_head;
        self->in_head = b->next;
        transport_msg_close(&b->msg);
        free(b);
    }
    if (self->mon) zmq_close(self->mon);
    if (self->router) zmq_close(self->router);
    if (self->zap) zmq_close(self->zap);
    if (self->ctx) zmq_ctx_term(self->ctx);
    if (self->wakefd >= 0) close(self->wakefd);
    free(self->links);
    free(self->flow);
    free(self->flow_left);
    free(self->items);
    free(self->item_link);
    keypair_wipe(&self->keys);
    free(self);
    *self_p = NULL;
}

int transport_port(const transport_t *self) { return self->port; }
uint64_t transport_id(const transport_t *self) { return self->id; }

/* Room for one more link.  0, or -1 when out of memory. */
static int s_grow_links(transport_t *self)
{
    if (self->nlinks < self->caplinks) return 0;
    int cap = self->caplinks ? 2 * self->caplinks : 8;
    s_link_t *l = realloc(self->links, sizeof *l * (size_t)cap);
    if (!l) return -1;
    self->links = l;
    s_link_t **fl = realloc(self->flow, sizeof *fl * (size_t)(cap + 2));
    if (fl) self->flow = fl;
    double *fleft = realloc(self->flow_left, sizeof *fleft * (size_t)(cap + 2));
    if (fleft) self->flow_left = fleft;
    if (!fl || !fleft) return -1;
    self->caplinks = cap;
    return 0;
}

/* The slot of a new link: the lowest one closed by transport_disconnect,
 * else a new one at the end, zeroed (a closed slot until the caller fills
 * it in).  Its index, or -1 when out of memory. */
static int s_claim_link(transport_t *self)
{
    int i = 0;
    while (i < self->nlinks && self->links[i].sock) i++;
    if (i == self->nlinks) {
        if (s_grow_links(self) < 0) return -1;
        self->nlinks++;
    }
    memset(&self->links[i], 0, sizeof self->links[i]);
    return i;
}

int transport_connect(transport_t *self, const char *host, int port,
                      const uint8_t server_pub[32], char *err, size_t errlen)
{
    if (port <= 0 || port > 65535) { net_errf(err, errlen, "%s:%d: port out of range", host, port); return -1; }
    int link = s_claim_link(self);   /* stays closed (reusable) if anything below fails */
    if (link < 0) { net_errf(err, errlen, "out of memory"); return -1; }
    int ipv6 = strchr(host, ':') != NULL;
    int rmax = self->o.reconnect_ivl_ms * 20;
    void *sock = zmq_socket(self->ctx, ZMQ_DEALER);
    if (!sock || s_setup_socket(self, sock, ipv6) ||
        zmq_setsockopt(sock, ZMQ_RECONNECT_IVL, &self->o.reconnect_ivl_ms, sizeof(int)) ||
        zmq_setsockopt(sock, ZMQ_RECONNECT_IVL_MAX, &rmax, sizeof rmax) ||
        zmq_setsockopt(sock, ZMQ_CURVE_SERVERKEY, server_pub, 32) ||
        zmq_setsockopt(sock, ZMQ_CURVE_PUBLICKEY, self->keys.pub, 32) ||
        zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, self->keys.sec, 32)) {
        net_errf(err, errlen, "cannot set up a link socket: %s", zmq_strerror(errno));
        if (sock) zmq_close(sock);
        return -1;
    }
    char ep[400];
    s_endpoint(ep, sizeof ep, host, port);
    if (zmq_connect(sock, ep) != 0) {
        net_errf(err, errlen, "cannot connect to %s: %s", ep + 6, zmq_strerror(errno));
        zmq_close(sock);
        return -1;
    }
    s_link_t *l = &self->links[link];
    l->sock = sock;
    memcpy(l->server_pub, server_pub, 32);
    l->server_id = node_id_from_pubkey(server_pub);
    return link;
}

/* Discards the messages received on link that wait for the emulated
 * downlink: once it is closed, its index may name another link. */
static void s_inbox_forget(transport_t *self, int link)
{
    s_inbox_t **pp = &self->in_head, *last = NULL;
    while (*pp) {
        s_inbox_t *b = *pp;
        if (b->msg.link != link) {
            last = b;
            pp = &b->next;
            continue;
        }
        *pp = b->next;
        self->in_bytes -= b->bytes;
        transport_msg_close(&b->msg);
        free(b);
    }
    self->in_tail = last;
}

void transport_disconnect(transport_t *self, int link)
{
    if (link < 0 || link >= self->nlinks || !self->links[link].sock) return;
    s_link_t *l = &self->links[link];
    s_free_queue(l);
    s_inbox_forget(self, link);
    if (!l->route_len) zmq_close(l->sock);
    l->sock = NULL;
}

int transport_adopt(transport_t *self, int link, const transport_msg_t *from)
{
    if (!from || from->link != -1 || from->route_len == 0 || from->route_len > sizeof from->route) return -1;
    if (link >= 0 && link < self->nlinks && self->links[link].sock && self->links[link].route_len
        && memcmp(self->links[link].server_pub, from->sender_pub, 32) == 0) {
        s_link_t *l = &self->links[link];
        if (l->route_len != from->route_len || memcmp(l->route, from->route, from->route_len) != 0) {
            /* the peer connected again (a new routing id); what is queued already fails (send_fails) */
            memcpy(l->route, from->route, from->route_len);
            l->route_len = from->route_len;
        }
        return link;
    }
    int fresh = s_claim_link(self);
    if (fresh < 0) return -1;
    s_link_t *l = &self->links[fresh];
    l->sock = self->router;
    memcpy(l->server_pub, from->sender_pub, 32);
    l->server_id = node_id_from_pubkey(from->sender_pub);
    memcpy(l->route, from->route, from->route_len);
    l->route_len = from->route_len;
    return fresh;
}

int64_t transport_pending(const transport_t *self, int link)
{
    if (link < 0 || link >= self->nlinks || !self->links[link].sock) return -1;
    return self->links[link].queued_bytes;
}

/* Sends parts (non-blocking).  0 sent, 1 full (nothing sent), -1 error. */
static int s_send_parts(transport_t *self, void *sock, uint8_t *const *parts,
                        const size_t *lens, int nparts, size_t counted)
{
    for (int i = 0; i < nparts; i++) {
        int flags = ZMQ_DONTWAIT | (i + 1 < nparts ? ZMQ_SNDMORE : 0);
        if (zmq_send(sock, parts[i], lens[i], flags) < 0) {
            if (i == 0 && errno == EAGAIN) return 1;
            return -1;   /* later parts of an accepted message do not block */
        }
    }
    self->st.msgs_sent++;
    self->st.bytes_sent += counted;
    return 0;
}

/* l's message in serialization has left the emulated uplink at t: it is
 * due after latency and jitter (order kept per link); the next one starts. */
static void s_serialized(transport_t *self, s_link_t *l, int64_t t)
{
    s_pending_t *p = l->ser;
    double delay_us = self->o.emu_latency_ms * 1000.0 + self->o.emu_jitter_ms * 1000.0 * s_uniform(self);
    int64_t due = t + (int64_t)ceil(delay_us);
    if (due < l->last_due_us) due = l->last_due_us;
    l->last_due_us = due;
    p->due_us = due;
    p->serialized = 1;
    l->ser = p->next;
    l->left = l->ser ? l->ser->wire : 0;
}

/* The uplink's busy flows into self->flow / flow_left: every link and the
 * reply queue with a message in serialization, and the acknowledgements. */
static int s_flows(transport_t *self)
{
    int n = 0;
    for (int i = 0; i < self->nlinks; i++)
        if (self->links[i].ser) {
            self->flow[n] = &self->links[i];
            self->flow_left[n++] = self->links[i].left;
        }
    if (self->reply.ser) {
        self->flow[n] = &self->reply;
        self->flow_left[n++] = self->reply.left;
    }
    if (self->ack_left > 0) {
        self->flow[n] = NULL;
        self->flow_left[n++] = self->ack_left;
    }
    return n;
}

/* Runs the emulated uplink up to now: the busy flows share its rate
 * (linkemu_share), and each message whose last byte has left gets its due
 * time. */
static void s_uplink_run(transport_t *self, int64_t now)
{
    while (self->up_clock_us < now) {
        int n = s_flows(self);
        if (!n) { self->up_clock_us = now; return; }
        int64_t t = linkemu_share(self->o.emu_bandwidth_mbit, self->flow_left, n, self->up_clock_us, now);
        for (int i = 0; i < n; i++) {
            s_link_t *l = self->flow[i];
            if (!l) { self->ack_left = self->flow_left[i]; continue; }
            l->left = self->flow_left[i];
            if (l->left <= 0) s_serialized(self, l, t);
        }
        if (t == self->up_clock_us && self->o.emu_bandwidth_mbit > 0) t++;   /* always progress */
        self->up_clock_us = t;
    }
}

/* Builds the part list of one message and either sends it now or queues it
 * on l's emulation queue. */
static int s_submit(transport_t *self, s_link_t *l, const uint8_t *route, size_t route_len,
                    const wire_hdr_t *h, const void *const *frames, const size_t *lens,
                    int nframes)
{
    if (nframes < 0 || nframes > TRANSPORT_MAX_FRAMES) return -1;
    assert(nframes == 0 || (frames && lens));
    wire_hdr_t hh = *h;
    hh.magic = WIRE_MAGIC;
    hh.version = WIRE_VERSION;
    hh.sender = self->id;
    uint8_t hdr[WIRE_HDR_LEN];
    wire_hdr_encode(hdr, &hh);

    uint8_t *parts[TRANSPORT_MAX_FRAMES + 2];
    size_t plen[TRANSPORT_MAX_FRAMES + 2];
    int np = 0;
    if (route) { parts[np] = (uint8_t *)route; plen[np++] = route_len; }
    parts[np] = hdr; plen[np++] = WIRE_HDR_LEN;
    size_t total = WIRE_HDR_LEN;
    for (int i = 0; i < nframes; i++) {
        parts[np] = (uint8_t *)frames[i];
        plen[np++] = lens[i];
        total += lens[i];
    }

    if (!self->emulate) {
        int rc = s_send_parts(self, l->sock, parts, plen, np, total);
        if (rc < 0 && route) {           /* the client is gone: like a lost reply */
            self->st.send_fails++;
            return 0;
        }
        return rc;
    }

    if (self->o.emu_loss > 0 && s_uniform(self) < self->o.emu_loss) {
        self->st.emu_lost++;
        return 0;
    }
    if (l->head && (size_t)l->queued_bytes + total > self->o.emu_max_queue_bytes) return 1;
    s_uplink_run(self, s_now_us());      /* a new message shares the uplink from now on */
    size_t all = 0;
    for (int i = 0; i < np; i++) all += plen[i];
    s_pending_t *p = malloc(sizeof *p + all);
    if (!p) return 1;
    p->next = NULL;
    p->wire = linkemu_wire_bytes(total, nframes + 1);
    p->serialized = 0;
    p->due_us = INT64_MAX;
    p->nparts = np;
    p->total = total;
    p->has_route = route != NULL;
    uint8_t *d = (uint8_t *)(p + 1);
    for (int i = 0; i < np; i++) {
        if (plen[i]) memcpy(d, parts[i], plen[i]);
        p->parts[i] = d;
        p->lens[i] = plen[i];
        d += plen[i];
    }
    if (l->tail) l->tail->next = p;
    else l->head = p;
    l->tail = p;
    if (!l->ser) {
        l->ser = p;
        l->left = p->wire;
    }
    l->queued_bytes += (int64_t)total;
    return 0;
}

int transport_send(transport_t *self, int link, const wire_hdr_t *h,
                   const void *const *frames, const size_t *lens, int nframes)
{
    if (link < 0 || link >= self->nlinks || !self->links[link].sock) return -1;
    s_link_t *l = &self->links[link];
    return s_submit(self, l, l->route_len ? l->route : NULL, l->route_len, h, frames, lens, nframes);
}

int transport_reply(transport_t *self, const transport_msg_t *to, const wire_hdr_t *h,
                    const void *const *frames, const size_t *lens, int nframes)
{
    if (to->link != -1 || to->route_len == 0) return -1;
    return s_submit(self, &self->reply, to->route, to->route_len, h, frames, lens, nframes);
}

/* Sends the due messages of one queue; returns the next due time or
 * INT64_MAX. */
static int64_t s_flush_link(transport_t *self, s_link_t *l, int64_t now)
{
    while (l->head && l->head->serialized && l->head->due_us <= now) {
        s_pending_t *p = l->head;
        int rc = s_send_parts(self, l->sock, p->parts, p->lens, p->nparts, p->total);
        if (rc == 1) { self->retry_soon = 1; return INT64_MAX; }
        if (rc < 0) self->st.send_fails++;
        l->head = p->next;
        if (!l->head) l->tail = NULL;
        l->queued_bytes -= (int64_t)p->total;
        free(p);
    }
    return l->head && l->head->serialized ? l->head->due_us : INT64_MAX;
}

static int64_t s_flush(transport_t *self)
{
    int64_t now = s_now_us(), next = INT64_MAX;
    self->retry_soon = 0;
    if (!self->emulate) return next;
    s_uplink_run(self, now);
    for (int i = 0; i < self->nlinks; i++) {
        if (!self->links[i].sock || !self->links[i].head) continue;
        int64_t d = s_flush_link(self, &self->links[i], now);
        if (d < next) next = d;
    }
    int64_t d = s_flush_link(self, &self->reply, now);
    if (d < next) next = d;
    d = linkemu_next_finish(self->o.emu_bandwidth_mbit, self->flow_left, s_flows(self), self->up_clock_us);
    if (d < next) next = d;
    return next;
}

/* Answers one ZAP request (RFC 27). */
static void s_serve_zap(transport_t *self)
{
    zmq_msg_t part[8];
    int n = 0, more = 1;
    while (more) {
        zmq_msg_t tmp, *m = n < 8 ? &part[n] : &tmp;
        zmq_msg_init(m);
        if (zmq_msg_recv(m, self->zap, ZMQ_DONTWAIT) < 0) { zmq_msg_close(m); break; }
        more = zmq_msg_more(m);
        if (m == &tmp) zmq_msg_close(m);
        else n++;
    }
    if (n == 0) return;
    /* frames: version, request id, domain, address, routing id, mechanism, credentials... */
    const char *status = "400";
    char text[128] = "refused";
    char user[65] = "";
    char addr[64] = "?";
    uint8_t key[32];
    const uint8_t *keyp = NULL;
    if (n >= 4) {
        size_t al = zmq_msg_size(&part[3]);
        if (al >= sizeof addr) al = sizeof addr - 1;
        memcpy(addr, zmq_msg_data(&part[3]), al);
        addr[al] = '\0';
    }
    if (zmq_msg_size(&part[0]) != 3 || memcmp(zmq_msg_data(&part[0]), "1.0", 3) != 0 || n < 6) {
        snprintf(text, sizeof text, "bad ZAP request");
    } else if (zmq_msg_size(&part[5]) != 5 || memcmp(zmq_msg_data(&part[5]), "CURVE", 5) != 0) {
        snprintf(text, sizeof text, "CURVE security required");
    } else if (n < 7 || zmq_msg_size(&part[6]) != 32) {
        snprintf(text, sizeof text, "bad CURVE credentials");
    } else {
        memcpy(key, zmq_msg_data(&part[6]), 32);
        keyp = key;
        char why[96] = "not admitted";
        if (!self->o.admit || self->o.admit(self->o.admit_arg, key, why, sizeof why)) {
            status = "200";
            snprintf(text, sizeof text, "OK");
            s_hex(user, key, 32);
        } else {
            snprintf(text, sizeof text, "%s", why);
        }
    }
    if (status[0] == '2') {
        self->st.zap_admitted++;
    } else {
        self->st.zap_refused++;
        char why[256];
        snprintf(why, sizeof why, "client %s refused: %s", addr, text);
        s_drop(self, why, keyp);
    }
    zmq_send(self->zap, "1.0", 3, ZMQ_SNDMORE);
    /* a REP socket must answer every request, even one without a request id */
    if (n >= 2) zmq_send(self->zap, zmq_msg_data(&part[1]), zmq_msg_size(&part[1]), ZMQ_SNDMORE);
    else zmq_send(self->zap, "", 0, ZMQ_SNDMORE);
    zmq_send(self->zap, status, 3, ZMQ_SNDMORE);
    zmq_send(self->zap, text, strlen(text), ZMQ_SNDMORE);
    zmq_send(self->zap, user, strlen(user), ZMQ_SNDMORE);
    zmq_send(self->zap, "", 0, 0);
    for (int i = 0; i < n; i++) zmq_msg_close(&part[i]);
}

/* Reads one monitor event: a client whose handshake failed. */
static void s_serve_monitor(transport_t *self)
{
    zmq_msg_t ev, ep;
    zmq_msg_init(&ev);
    zmq_msg_init(&ep);
    if (zmq_msg_recv(&ev, self->mon, ZMQ_DONTWAIT) < 0) goto out;
    if (zmq_msg_more(&ev)) zmq_msg_recv(&ep, self->mon, ZMQ_DONTWAIT);
    if (zmq_msg_size(&ev) != 6) goto out;
    uint16_t event;
    uint32_t value;
    memcpy(&event, zmq_msg_data(&ev), 2);       /* native endian, same process */
    memcpy(&value, (uint8_t *)zmq_msg_data(&ev) + 2, 4);
    const char *why = "handshake failed";
    if (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL) {
        if (value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH)
            why = "handshake failed: client without CURVE security";
        else if (value == ZMQ_PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC)
            why = "handshake failed: cryptographic error (client holds a wrong key for us?)";
        else
            why = "handshake failed: protocol error";
    }
    self->st.handshake_failed++;
    s_drop(self, why, NULL);
out:
    zmq_msg_close(&ev);
    zmq_msg_close(&ep);
}

static void s_close_parts(zmq_msg_t *parts, int n)
{
    for (int i = 0; i < n; i++) zmq_msg_close(&parts[i]);
    free(parts);
}

/* Receives one message from sock (link index, -1 router).  Returns 1 with
 * *out filled, 0 when nothing was there or the message was dropped. */
static int s_recv(transport_t *self, void *sock, int link, transport_msg_t *out)
{
    enum { MAXP = TRANSPORT_MAX_FRAMES + 2 };
    zmq_msg_t *parts = malloc(sizeof(zmq_msg_t) * MAXP);
    if (!parts) return 0;
    int n = 0, more = 1, extra = 0;
    while (more) {
        zmq_msg_t tmp, *m = n < MAXP ? &parts[n] : &tmp;
        zmq_msg_init(m);
        if (zmq_msg_recv(m, sock, ZMQ_DONTWAIT) < 0) { zmq_msg_close(m); break; }
        more = zmq_msg_more(m);
        if (m == &tmp) { zmq_msg_close(m); extra++; }
        else n++;
    }
    if (n == 0) { free(parts); return 0; }

    int h = link < 0 ? 1 : 0;   /* index of the header part */
    char why[160];
    uint8_t pub[32];
    const uint8_t *pubp = NULL;
    if (link < 0) {
        const char *uid = n > 1 ? zmq_msg_gets(&parts[1], "User-Id") : NULL;
        if (uid && s_unhex(pub, uid, 32) == 0) pubp = pub;
    } else {
        memcpy(pub, self->links[link].server_pub, 32);
        pubp = pub;
    }
    size_t bytes = 0;
    for (int i = h; i < n; i++) bytes += zmq_msg_size(&parts[i]);

    why[0] = '\0';
    wire_hdr_t hdr;
    char herr[96];
    if (!pubp) snprintf(why, sizeof why, "message without an authenticated key");
    else if (extra || n - h - 1 > TRANSPORT_MAX_FRAMES)
        snprintf(why, sizeof why, "more than %d frames", TRANSPORT_MAX_FRAMES);
    else if (n <= h) snprintf(why, sizeof why, "empty message");
    else if (wire_hdr_decode(&hdr, zmq_msg_data(&parts[h]), zmq_msg_size(&parts[h]), herr, sizeof herr))
        snprintf(why, sizeof why, "bad header: %s", herr);
    else if (hdr.sender != (link < 0 ? node_id_from_pubkey(pub) : self->links[link].server_id))
        snprintf(why, sizeof why, "%s: sender id does not match its key", wire_type_name(hdr.type));
    if (why[0]) {
        self->st.drops++;
        s_drop(self, why, pubp);
        s_close_parts(parts, n);
        return 0;
    }

    memset(out, 0, sizeof *out);
    out->hdr = hdr;
    memcpy(out->sender_pub, pub, 32);
    out->sender = hdr.sender;
    out->link = link;
    if (link < 0) {
        size_t rl = zmq_msg_size(&parts[0]);
        if (rl > sizeof out->route) rl = sizeof out->route;   /* ZeroMQ caps ids at 255 */
        memcpy(out->route, zmq_msg_data(&parts[0]), rl);
        out->route_len = rl;
    }
    out->nframes = n - h - 1;
    for (int i = 0; i < out->nframes; i++) {
        out->frame[i] = zmq_msg_data(&parts[h + 1 + i]);
        out->len[i] = zmq_msg_size(&parts[h + 1 + i]);
    }
    /* parts live on the heap: frame pointers stay valid if *out is copied */
    out->parts_ = parts;
    self->st.msgs_recv++;
    self->st.bytes_recv += bytes;
    return 1;
}

void transport_msg_close(transport_msg_t *msg)
{
    if (!msg || !msg->parts_) return;
    zmq_msg_t *parts = msg->parts_;
    int n = (msg->link < 0 ? 2 : 1) + msg->nframes;   /* [route] header frames... */
    s_close_parts(parts, n);
    msg->parts_ = NULL;
    msg->nframes = 0;
}

void transport_wake(transport_t *self)
{
    uint64_t one = 1;
    ssize_t rc = write(self->wakefd, &one, sizeof one);
    (void)rc;   /* EAGAIN: the counter is already non-zero, a wake is pending */
}

static int s_grow_items(transport_t *self, int need)
{
    if (need <= self->capitems) return 0;
    int cap = need * 2;
    zmq_pollitem_t *it = realloc(self->items, sizeof *it * (size_t)cap);
    if (!it) return -1;
    self->items = it;
    int *il = realloc(self->item_link, sizeof *il * (size_t)cap);
    if (!il) return -1;
    self->item_link = il;
    self->capitems = cap;
    return 0;
}

/* The emulated uplink carries the TCP acknowledgements of what arrives. */
static void s_acknowledge(transport_t *self, const transport_msg_t *m)
{
    if (!self->emulate || self->o.emu_bandwidth_mbit <= 0) return;
    size_t bytes = WIRE_HDR_LEN;
    for (int i = 0; i < m->nframes; i++) bytes += m->len[i];
    s_uplink_run(self, s_now_us());
    self->ack_left += linkemu_ack_bytes(linkemu_wire_bytes(bytes, m->nframes + 1));
}

/* Emulated downlink: queues a received message (moved out of *m) until
 * its serialization at the downlink rate has finished. */
static void s_inbox_put(transport_t *self, transport_msg_t *m)
{
    int64_t bytes = WIRE_HDR_LEN;
    for (int i = 0; i < m->nframes; i++) bytes += (int64_t)m->len[i];
    s_inbox_t *b = malloc(sizeof *b);
    if (!b) {
        self->st.drops++;
        s_drop(self, "out of memory for the emulated downlink", m->sender_pub);
        transport_msg_close(m);
        return;
    }
    b->next = NULL;
    b->bytes = bytes;
    b->msg = *m;
    b->due_us = linkemu_serialize(&self->down, s_now_us(), linkemu_wire_bytes((size_t)bytes, m->nframes + 1));
    m->parts_ = NULL;
    m->nframes = 0;
    if (self->in_tail) self->in_tail->next = b;
    else self->in_head = b;
    self->in_tail = b;
    self->in_bytes += bytes;
}

/* Moves the oldest received message into *out if the emulated downlink
 * has delivered it.  Returns 1 when it did. */
static int s_inbox_take(transport_t *self, transport_msg_t *out)
{
    s_inbox_t *b = self->in_head;
    if (!b || b->due_us > s_now_us()) return 0;
    self->in_head = b->next;
    if (!self->in_head) self->in_tail = NULL;
    self->in_bytes -= b->bytes;
    *out = b->msg;
    free(b);
    return 1;
}

/* Fills self->items with what transport_poll waits on: the ZAP handler,
 * the wake fd and the monitor (items 0-2), then, while the inbox has room,
 * the router and every link socket not adopted by the router.  Returns the
 * number of items, or -1 when out of memory. */
static int s_poll_items(transport_t *self)
{
    if (s_grow_items(self, self->nlinks + 4)) return -1;
    int readable = self->in_bytes < INBOX_MAX_BYTES;   /* else leave them in ZeroMQ */
    zmq_pollitem_t *it = self->items;
    int n = 0;
    it[n] = (zmq_pollitem_t){.socket = self->zap, .events = ZMQ_POLLIN};
    self->item_link[n++] = -2;
    it[n] = (zmq_pollitem_t){.fd = self->wakefd, .events = ZMQ_POLLIN};
    self->item_link[n++] = -3;
    it[n] = (zmq_pollitem_t){.socket = self->mon, .events = ZMQ_POLLIN};
    self->item_link[n++] = -4;
    if (!readable) return n;
    it[n] = (zmq_pollitem_t){.socket = self->router, .events = ZMQ_POLLIN};
    self->item_link[n++] = -1;
    for (int i = 0; i < self->nlinks; i++) {
        if (!self->links[i].sock || self->links[i].route_len) continue;   /* adopted: read on the router */
        it[n] = (zmq_pollitem_t){.socket = self->links[i].sock, .events = ZMQ_POLLIN};
        self->item_link[n++] = i;
    }
    return n;
}

/* The zmq_poll timeout in ms until `until` (INT64_MAX: none, -1), 0 on the
 * first look; at most 2 ms while a send waits to be retried. */
static long s_wait_ms(const transport_t *self, int64_t until, int first)
{
    int64_t now = s_now_us();
    if (self->retry_soon && until > now + 2000) until = now + 2000;
    if (first) return 0;   /* first look at what is already there */
    if (until == INT64_MAX) return -1;
    long wait_ms = until <= now ? 0 : (long)((until - now + 999) / 1000);
    return wait_ms > 1000000 ? 1000000 : wait_ms;
}

/* Runs serve(self) for each request pending on sock, at most 64 of them. */
static void s_drain(transport_t *self, void *sock, void (*serve)(transport_t *))
{
    for (int k = 0; k < 64; k++) {
        serve(self);
        int ev = 0;
        size_t evl = sizeof ev;
        if (zmq_getsockopt(sock, ZMQ_EVENTS, &ev, &evl) || !(ev & ZMQ_POLLIN)) break;
    }
}

/* After a zmq_poll over the n items of s_poll_items that returned events:
 * serves handshakes and the monitor, notes a wake-up in *woken, and reads
 * the data sockets round robin until one message is ready for the caller
 * (returns 1, *out filled) or none is (0). */
static int s_serve_ready(transport_t *self, int n, int *woken, transport_msg_t *out)
{
    zmq_pollitem_t *it = self->items;
    if (it[0].revents & ZMQ_POLLIN) s_drain(self, self->zap, s_serve_zap);   /* all pending handshakes */
    if (it[1].revents & ZMQ_POLLIN) {
        uint64_t v;
        ssize_t r = read(self->wakefd, &v, sizeof v);
        (void)r;
        *woken = 1;
        self->st.wakeups++;
    }
    if (it[2].revents & ZMQ_POLLIN) s_drain(self, self->mon, s_serve_monitor);
    int ns = n - 3;   /* sockets from items[3] on, round robin */
    for (int k = 0; k < ns; k++) {
        int idx = 3 + (self->rr + k) % ns;
        if (!(it[idx].revents & ZMQ_POLLIN)) continue;
        int link = self->item_link[idx];
        void *sock = link < 0 ? self->router : self->links[link].sock;
        if (!s_recv(self, sock, link, out)) continue;
        self->rr = (self->rr + k + 1) % ns;
        s_acknowledge(self, out);
        if (self->down.mbit <= 0) return 1;
        s_inbox_put(self, out);      /* delivered when the downlink has carried it */
        if (s_inbox_take(self, out)) return 1;
    }
    return 0;
}

int transport_poll(transport_t *self, int timeout_ms, transport_msg_t *out)
{
    out->parts_ = NULL;   /* closing *out is safe whatever we return */
    out->nframes = 0;
    int64_t deadline = timeout_ms < 0 ? INT64_MAX : s_now_us() + (int64_t)timeout_ms * 1000;
    for (int first = 1;; first = 0) {
        int64_t next_due = s_flush(self);
        if (s_inbox_take(self, out)) return 1;
        if (self->in_head && self->in_head->due_us < next_due) next_due = self->in_head->due_us;
        int n = s_poll_items(self);
        if (n < 0) return -1;
        int rc = zmq_poll(self->items, n, s_wait_ms(self, deadline < next_due ? deadline : next_due, first));
        if (rc < 0) return errno == EINTR ? 0 : -1;
        int woken = 0;
        if (rc > 0 && s_serve_ready(self, n, &woken, out)) return 1;
        if (woken) return 0;
        if (!first && s_now_us() >= deadline) return 0;
        if (first && timeout_ms == 0) {
            s_flush(self);
            return 0;
        }
    }
}

void transport_stats(const transport_t *self, transport_stats_t *out) { *out = self->st; }
