/* relay.c: relays between two outward-only nodes through a reachable one,
 * and DIALs that ask an outward-only peer for a link. */
#include "node/runtime/netside/internal.h"

#define DIAL_EVERY_S 2.0        /* asking an outward-only peer for a link, at most this often */
#define DIAL_VIA 3              /* through this many peers at a time */
#define RELAY_MBIT_DEFAULT 100.0 /* cap on what a node relays for others, Mbit/s */
#define RELAY_INTRO_S 10.0      /* a relayed pair introduces itself again this often (each 1 s until it hears back) */
#define RELAY_BURST_S 0.5       /* the cap's bucket holds this long at the cap (at least 2 MiB: a state chunk) */

/* A relay request we do not carry out: counted, logged, no strike (the
 * sender may not know yet). */
static void s_refuse_relay(netside_t *ns, const char *why, uint64_t from)
{
    atomic_fetch_add(&ns->ctr.relay_refused, 1);
    ns_count_drop(ns, why, from);
}

/* The relay both ends of an outward-only pair pick: the live relaying peer
 * with the lowest id (each end computes the same from its table). */
static peer_t *s_pick_relay(netside_t *ns)
{
    peer_t *best = NULL;
    double now = ns_now(ns);
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
    if (p->sealed.has_box) return 0;
    if (relay_key(p->sealed.box, p->info.pubkey, ns->c.keys->sec) < 0) return -1;
    p->sealed.has_box = 1;
    uint64_t wall = ns->c.clock.wall_ms(ns->c.clock.arg) * 1000;   /* counters grow across restarts too */
    if (p->sealed.seq_out < wall) p->sealed.seq_out = wall;
    return 1;
}

int ns_relay_send(netside_t *ns, peer_t *p, const wire_hdr_t *h, const void *const *frames,
                  const size_t *lens, int nf, uint64_t raw)
{
    peer_t *r = peers_find(&ns->peers, p->via);
    int link = r && r->health != PEER_GONE ? ns_link(ns, r->info.id) : -1;
    if (link < 0) return -1;
    if (s_box(ns, p) < 0) return -1;
    double now = ns_now(ns);
    if (h->type != WIRE_JOIN && now >= p->sealed.intro_next) {
        /* our introduction (ticket) goes first, again now and then: an envelope may be refused on the way */
        p->sealed.intro_next = now + (p->sealed.seq_in ? RELAY_INTRO_S : 1.0);
        wbuf_t w;
        wbuf_init(&w, 1024);
        ns_put_join(ns, &w, ns->me.stage, 0);
        wire_hdr_t ih;
        ns_hdr(ns, &ih, WIRE_JOIN);
        ih.flags = JOIN_FLAG_INTRO | JOIN_FLAG_OUTWARD;
        const void *f[1] = { w.data };
        size_t l[1] = { w.len };
        if (!wbuf_error(&w)) ns_relay_send(ns, p, &ih, f, l, 1, 0);
        wbuf_free(&w);
    }
    wire_hdr_t hh = *h;
    hh.magic = WIRE_MAGIC;
    hh.version = WIRE_VERSION;
    hh.sender = ns->id;
    size_t cap = relay_sealed_len(lens, nf);
    uint8_t *env = malloc(cap);
    if (!env) return -1;
    long n = relay_seal(env, cap, p->sealed.box, ++p->sealed.seq_out, &hh, frames, lens, nf);
    int rc = -1;
    if (n > 0) {
        wire_hdr_t oh;
        ns_hdr(ns, &oh, WIRE_RELAY);
        oh.mb = p->info.id;
        const void *f[1] = { env };
        size_t l[1] = { (size_t)n };
        rc = ns_port_send(ns, link, NULL, &oh, f, l, 1, raw ? raw + WIRE_HDR_LEN + (uint64_t)n - (cap - RELAY_OVERHEAD) : 0, 0);
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
    return bucket_take(&ns->relay.bucket, ns_now(ns), rate, cap, (double)bytes) ? 0 : -1;
}

/* At the relay: passes a sealed envelope on to its receiver (which opened
 * a link to us), as it is (test-only: altered with --emu-relay-tamper). */
static void s_relay_forward(netside_t *ns, const transport_msg_t *m)
{
    if (!ns->relay.relays || ns->outward) { s_refuse_relay(ns, "relay request to a node that does not relay", m->sender); return; }
    peer_t *to = peers_find(&ns->peers, m->hdr.mb);
    if (!to || to->info.id == ns->id || to->info.id == m->sender) { ns_drop(ns, "relay request for an unknown peer", m->sender); return; }
    if (to->link < 0) {
        ns_link(ns, to->info.id);   /* asks it for a link (DIAL) */
        s_refuse_relay(ns, "relay: no link to the receiver yet", m->sender);
        return;
    }
    size_t bytes = WIRE_HDR_LEN + m->len[0];
    if (s_relay_budget(ns, bytes) < 0) { s_refuse_relay(ns, "relay over its cap (--relay-mbit)", m->sender); return; }
    uint8_t *alt = NULL;
    const void *f[1] = { m->frame[0] };
    size_t l[1] = { m->len[0] };
    ns->gossip.rng = ns->gossip.rng * 6364136223846793005ULL + 1442695040888963407ULL;
    if (ns->c.emu_relay_tamper > 0 && (double)(ns->gossip.rng >> 11) * (1.0 / 9007199254740992.0) < ns->c.emu_relay_tamper
        && m->len[0] > 0 && (alt = malloc(m->len[0]))) {
        memcpy(alt, m->frame[0], m->len[0]);
        alt[m->len[0] / 2] ^= 0x20;
        f[0] = alt;
    }
    wire_hdr_t h;
    ns_hdr(ns, &h, WIRE_RELAY);
    h.mb = m->sender;
    h.flags = RELAY_FLAG_FWD;
    if (ns_port_send(ns, to->link, NULL, &h, f, l, 1, 0, 0) == 0) {
        atomic_fetch_add(&ns->ctr.relay_bytes, bytes);
        atomic_fetch_add(&ns->ctr.relay_msgs, 1);
        peer_t *from = peers_find(&ns->peers, m->sender);
        if (from && !from->sealed.noted) {
            from->sealed.noted = 1;
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
    if (!src || src->info.id == ns->id) { ns_count_drop(ns, "relayed message from an unknown peer", m->sender); return; }
    if (s_box(ns, src) < 0) { ns_count_drop(ns, "relayed message from a peer with a bad key", m->sender); return; }
    uint8_t *plain = malloc(m->len[0] ? m->len[0] : 1);
    if (!plain) { ns_discard(ns); return; }
    relay_msg_t r;
    char err[160];
    const char *bad = NULL, *unopened = NULL;
    if (relay_open(&r, plain, m->frame[0], m->len[0], src->sealed.box, err, sizeof err) < 0) unopened = err;
    else if (r.seq <= src->sealed.seq_in) unopened = "relayed message replayed (an old counter)";
    else if (r.hdr.sender != src->info.id) bad = "relayed message whose header names another sender";
    else if (r.hdr.type == WIRE_RELAY || r.hdr.type == WIRE_STATUS_REQ || r.hdr.type == WIRE_DIAL
             || (r.hdr.type == WIRE_JOIN && !(r.hdr.flags & JOIN_FLAG_INTRO)))
        bad = "relayed message of a type that is not relayed";
    if (unopened) ns_count_drop(ns, unopened, m->sender);
    else if (bad) ns_drop(ns, bad, src->info.id);
    if (unopened || bad) { free(plain); return; }
    src->sealed.seq_in = r.seq;
    transport_msg_t in;
    memset(&in, 0, sizeof in);
    in.hdr = r.hdr;
    memcpy(in.sender_pub, src->info.pubkey, 32);
    in.sender = src->info.id;
    in.link = RELAYED_LINK;
    in.nframes = r.nframes;
    for (int i = 0; i < r.nframes; i++) { in.frame[i] = r.frame[i]; in.len[i] = r.len[i]; }
    ns_dispatch(ns, &in);
    free(plain);
}

void ns_on_relay(netside_t *ns, const transport_msg_t *m)
{
    if (m->link == RELAYED_LINK || m->nframes != 1) { ns_drop(ns, "RELAY without one envelope", m->sender); return; }
    if (m->hdr.flags & RELAY_FLAG_FWD) s_relay_receive(ns, m);
    else s_relay_forward(ns, m);
}

/* We need to send to outward-only peer p and it has opened no link to us:
 * ask it to, through a few peers that may have its link (rate-limited). */
void ns_dial(netside_t *ns, peer_t *p)
{
    double now = ns_now(ns);
    if (ns->outward || p->health == PEER_GONE || (p->last_dial > 0 && now - p->last_dial < DIAL_EVERY_S)) return;
    p->last_dial = now;
    uint64_t target = p->info.id;
    int n = ns->peers.n, sent = 0;
    for (int k = 0; k < n && sent < DIAL_VIA; k++) {
        peer_t *q = &ns->peers.p[(ns->relay.dial_at + k) % n];
        if (q->info.id == ns->id || q->info.id == target || q->outward || q->health == PEER_GONE) continue;
        wire_hdr_t h;
        ns_hdr(ns, &h, WIRE_DIAL);
        h.mb = target;
        if (ns_send(ns, q->info.id, &h, NULL, NULL, 0, 0, 0) == 0) sent++;
    }
    if (n) ns->relay.dial_at = (ns->relay.dial_at + 1) % n;
}

/* DIAL: someone wants a link from an outward-only peer.  In the middle:
 * passed on to it when it has a link to us.  At the peer itself: it opens a
 * link to the one who asked (a peer it knows, reachable). */
void ns_on_dial(netside_t *ns, const transport_msg_t *m)
{
    peer_t *p = peers_find(&ns->peers, m->hdr.mb);
    if (!(m->hdr.flags & DIAL_FLAG_FWD)) {
        if (!p || !p->outward || p->link < 0 || p->info.id == m->sender) { ns_discard(ns); return; }
        wire_hdr_t h;
        ns_hdr(ns, &h, WIRE_DIAL);
        h.flags = DIAL_FLAG_FWD;
        h.mb = m->sender;
        ns_send(ns, p->info.id, &h, NULL, NULL, 0, 0, 0);
        return;
    }
    if (!ns->outward || !p || p->outward || p->info.id == ns->id || p->health == PEER_GONE) { ns_discard(ns); return; }
    if (p->link < 0) ns_link(ns, p->info.id);   /* connects, introduces us: it sends back over this link */
}

/* An outward-only node keeps a link open to every reachable peer that may
 * have to send to it (its neighbouring stages and its own), and a reachable
 * node asks its outward-only neighbours for one. */
void ns_keep_links(netside_t *ns)
{
    if (ns->me.stage < 0) return;
    /* a reachable node among reachable peers, no record reached through a relay: nothing to keep
       (the scan below would change nothing; it was most of a large swarm's periodic work) */
    if (!ns->outward && !ns->relay.nout && !ns->relay.relayed) return;
    peer_t *relay = ns->outward ? s_pick_relay(ns) : NULL;
    int relayed = 0;
    for (int i = 0; i < ns->peers.n; i++) {
        peer_t *p = &ns->peers.p[i];
        int near = p->info.stage >= ns->me.stage - 1 && p->info.stage <= ns->me.stage + 1;
        uint64_t via = ns->outward && p->outward && near && relay ? relay->info.id : 0;
        if (p->via != via) { p->via = via; ns->view_dirty = 1; peers_touch(&ns->peers, p); }
        relayed |= via != 0;
        if (p->info.id == ns->id || p->health == PEER_GONE || p->link >= 0 || p->banned_until > ns_now(ns) || !near) continue;
        if (ns->outward && !p->outward) ns_link(ns, p->info.id);
        else if (!ns->outward && p->outward) ns_dial(ns, p);
    }
    ns->relay.relayed = relayed;
    if (relayed && relay->link < 0) ns_link(ns, relay->info.id);   /* the relay needs our link to reach us */
}
