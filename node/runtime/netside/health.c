/* health.c: failure detection (pings, partners, the health sweep), bans and
 * strikes, counted drops and closed-swarm admission. */
#include "node/runtime/netside/internal.h"

#define PING_PARTNERS 6         /* each round pings up to this many partners (tensor traffic in the last PARTNER_S) */
#define PARTNER_PING_S 2.0      /* not pinged in this long, */
#define PARTNER_RTT_S 10.0      /* (a partner that spoke to us lately: its RTT is refreshed this often) */
#define PING_OTHERS 2           /* and this many other peers, round-robin */
#define PARTNER_S 10.0
#define HEALTH_EVERY_S 0.25
#define HEALTH_SWEEPS 16        /* the whole table is checked this many times within a non-partner's allowed silence */
#define GONE_PROBES 4           /* peers taken for gone pinged at a time (until GONE_FORGET_S) */
#define DROP_LOG_FIRST 50
#define BAN_STRIKES 20          /* refused messages that get a peer banned */
#define BAN_S 60.0              /* a banned peer is ignored this long */
#define STRIKE_FORGIVE_S 10.0   /* one strike is forgiven per this long */

/* Record ix became live (add 1) or gone (add -1): the count and the set follow. */
void ns_live_change(netside_t *ns, int ix, int add)
{
    INVARIANT(ix >= 0 && ix < ns->peers.n && (add == 1 || add == -1));
    if (add > 0) ixset_add(&ns->health.live_set, ix);
    else ixset_del(&ns->health.live_set, ix);
    ns->health.nlive += add;
    /* every record but this node's own counted at most once; the set (while complete) holds just them */
    INVARIANT(ns->health.nlive >= 0 && ns->health.nlive < ns->peers.n);
    INVARIANT(!ns->health.live_set.ok || ns->health.live_set.n == ns->health.nlive);
}

/* Every change of a peer's health goes through here: it keeps the live count and list. */
void ns_set_health(netside_t *ns, peer_t *p, peer_health_t h)
{
    if (p->info.id != ns->id && (p->health == PEER_GONE) != (h == PEER_GONE))
        ns_live_change(ns, (int)(p - ns->peers.p), h == PEER_GONE ? -1 : 1);
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
void ns_count_drop(netside_t *ns, const char *why, uint64_t from)
{
    uint64_t k = atomic_fetch_add(&ns->ctr.drops, 1) + 1;
    char id[9];
    node_id_short(from, id);
    if (k <= DROP_LOG_FIRST || k % 100 == 0)
        metrics_event(ns->c.metrics, "drop", "\"why\":%s,\"from\":%s,\"drops\":%llu", why, from ? id : NULL,
                      (unsigned long long)k);
}

/* A message refused as an offence of `from`: counted, and a strike on it. */
void ns_drop(netside_t *ns, const char *why, uint64_t from)
{
    ns_count_drop(ns, why, from);
    /* a repeat offender is ignored for a while */
    char id[9];
    node_id_short(from, id);
    peer_t *p = from != ns->id ? peers_find(&ns->peers, from) : NULL;
    if (p) s_forgive(p, ns_now(ns));
    if (p && ++p->strikes >= BAN_STRIKES) {
        p->strikes = 0;
        p->banned_until = ns_now(ns) + BAN_S;
        ns_set_health(ns, p, PEER_GONE);
        ns->view_dirty = 1;
        char ban[300];
        snprintf(ban, sizeof ban, "%d refused messages, last: %s", BAN_STRIKES, why);
        metrics_event(ns->c.metrics, "peer", "\"peer\":%s,\"what\":\"banned\",\"why\":%s,\"for_s\":%.0f", id, ban, BAN_S);
    }
}

/* A message that is not an offence but is not taken either (late, after a move). */
void ns_discard(netside_t *ns)
{
    atomic_fetch_add(&ns->ctr.drops, 1);
}

int ns_banned(netside_t *ns, uint64_t id)
{
    peer_t *p = peers_find(&ns->peers, id);
    return p && p->banned_until > ns_now(ns);
}

/* Closed swarm: NULL when peer id's ticket was verified here and has not
 * expired since, else why its messages are refused. */
const char *ns_unadmitted(netside_t *ns, uint64_t id)
{
    peer_t *p = peers_find(&ns->peers, id);
    if (!p || !p->admitted) return "no admission ticket";
    if (p->admitted_until && ns_unix_s(ns) >= p->admitted_until) return "admission ticket expired";
    return NULL;
}

/* Admits p until `until` (unix seconds, 0: no expiry), or takes its
 * admission back (admit 0: a ticket it showed was refused). */
void ns_admit(peer_t *p, int admit, uint64_t until)
{
    p->admitted = admit;
    p->admitted_until = admit ? until : 0;
}

void ns_revive(netside_t *ns, peer_t *p, const char *why)
{
    ns_set_health(ns, p, PEER_ALIVE);
    ns_rumor(ns, p);
    ns->view_dirty = 1;
    char s[9];
    node_id_short(p->info.id, s);
    metrics_event(ns->c.metrics, "peer", "\"peer\":%s,\"what\":\"joined\",\"why\":%s,\"peer_stage\":%d", s, why, p->info.stage);
}

/* A peer pinged by us that has answered nothing for longer than makes it
 * slow: its silence to us is what counts, whatever third parties say (a
 * member's word "heard from it just now" kept a dead peer alive here, and
 * drawing work, for as long as it said so). */
int ns_ignores_us(const peer_t *p, double now, double slow)
{
    return p->unanswered > 0 && now - p->unanswered > slow;
}

/* Marks peer id heard from now; logs a return.  After a silence between
 * us longer than makes a peer slow (it, or this node, was paused), what
 * was sent to it before now came back late for that (silent_until).  A
 * peer never heard from itself yet has been silent since we heard of it (a
 * peer paused right after its introduction). */
void ns_heard(netside_t *ns, uint64_t id)
{
    peer_t *p = peers_find(&ns->peers, id);
    if (!p) return;
    double now = ns_now(ns), since = p->last_direct > 0 ? p->last_direct : p->last_heard;
    if (since > 0 && now - since > ns_slow_after(p, now, ns->health.live)) p->silent_until = now;
    p->last_heard = p->last_direct = now;
    p->unanswered = 0;
    if (p->health == PEER_GONE) ns_revive(ns, p, "heard again");
}

/* Tensor traffic with p: it is a partner (pinged often: routing needs its RTT). */
/* Room for one more in ns->health.recent.  0, or -1 when out of memory. */
static int s_grow_recent(netside_t *ns)
{
    int cap = ns->health.caprecent ? 2 * ns->health.caprecent : 64;
    int *r = realloc(ns->health.recent, sizeof(int) * (size_t)cap);
    if (!r) return -1;
    ns->health.recent = r;
    ns->health.caprecent = cap;
    return 0;
}

void ns_traffic(netside_t *ns, peer_t *p)
{
    double now = ns_now(ns);
    p->last_traffic = now;
    if (!p->recent && (ns->health.nrecent < ns->health.caprecent || s_grow_recent(ns) == 0)) {
        INVARIANT(ns->health.nrecent < ns->health.caprecent);
        ns->health.recent[ns->health.nrecent++] = (int)(p - ns->peers.p);
        p->recent = 1;
    }
    int slot = -1;
    for (int i = 0; i < PARTNERS_MAX; i++) {
        if (ns->health.partner[i] == p->info.id) { ns->health.partner_t[i] = now; return; }
        if (slot < 0 && !ns->health.partner[i]) slot = i;
    }
    if (slot < 0) {
        /* full: replace the one with the oldest traffic */
        double oldest = now;
        for (int i = 0; i < PARTNERS_MAX; i++) {
            double t = ns->health.partner_t[i];
            if (slot < 0 || t < oldest) { slot = i; oldest = t; }
        }
    }
    ns->health.partner[slot] = p->info.id;
    ns->health.partner_t[slot] = now;
    ns->health.partner_ix[slot] = (int)(p - ns->peers.p);
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
void ns_on_pong(netside_t *ns, const transport_msg_t *m)
{
    double now = ns_now(ns), sent = (double)m->hdr.mb * 1e-6, rtt = (now - sent) * 1000.0;
    peer_t *p = peers_find(&ns->peers, m->sender);
    if (!p) return;   /* a late answer from a peer forgotten since */
    if (!(rtt >= 0 && rtt < 600000)) { ns_drop(ns, "PONG with an impossible round trip", m->sender); return; }
    if (sent < p->silent_until || (p->rtt_ms > 0 && rtt * 1e-3 > ns_slow_after(p, now, ns->health.live))) return;
    if (p->rtt_ms == 0) { p->rtt_ms = rtt; p->rtt_dev_ms = rtt / 2; }
    else {
        p->rtt_dev_ms = 0.75 * p->rtt_dev_ms + 0.25 * fabs(rtt - p->rtt_ms);
        p->rtt_ms = 0.875 * p->rtt_ms + 0.125 * rtt;
    }
    if (p->rtt_min_ms == 0 || rtt < p->rtt_min_ms) p->rtt_min_ms = rtt;
    ns->view_dirty = 1;
    peers_touch(&ns->peers, p);
}

/* Pings a few peers taken for gone: after a partition heals, either side's
 * PING brings the other back (a message from a gone peer revives it).  A
 * peer gone for GONE_FORGET_S is pinged no more, its link is closed and
 * the residual of our gradient stream to it is freed. */
void ns_probe_gone(netside_t *ns)
{
    double now = ns_now(ns);
    int sent = 0, gone = ns->peers.n - ns->health.nlive - (ns->peers.selfix >= 0);
    for (int i = 0; gone > 0 && i < ns->peers.n; i++) {
        /* a link per peer ever seen was a socket and a file descriptor each, reconnecting to a dead address */
        peer_t *p = &ns->peers.p[i];
        if (p->health != PEER_GONE || p->link < 0 || p->info.id == ns->id || now - p->last_heard <= GONE_FORGET_S) continue;
        ns_close_link(ns, p);
        peers_touch(&ns->peers, p);
    }
    for (int i = 0; i < ns->tensor.nfb; i++) {   /* and the residuals of gradient streams to them */
        peer_t *p = peers_find(&ns->peers, ns->tensor.fb[i].peer);
        if (p && (p->health != PEER_GONE || now - p->last_heard <= GONE_FORGET_S)) continue;
        free(ns->tensor.fb[i].residual);
        ns->tensor.fb[i] = ns->tensor.fb[--ns->tensor.nfb];   /* the last one takes its place, and is looked at next */
        i--;
    }
    for (int k = 0; gone > 0 && k < ns->peers.n && sent < GONE_PROBES; k++) {
        peer_t *p = &ns->peers.p[(ns->health.probe_at + k) % ns->peers.n];
        if (p->info.id == ns->id || p->health != PEER_GONE || p->banned_until > now || now - p->last_heard > GONE_FORGET_S)
            continue;
        wire_hdr_t h;
        ns_hdr(ns, &h, WIRE_PING);
        h.mb = (uint64_t)(now * 1e6);
        ns_send(ns, p->info.id, &h, NULL, NULL, 0, 0, 0);
        sent++;
    }
    if (ns->peers.n) ns->health.probe_at = (ns->health.probe_at + GONE_PROBES) % ns->peers.n;
}

static void s_ping(netside_t *ns, peer_t *p, double now)
{
    wire_hdr_t h;
    ns_hdr(ns, &h, WIRE_PING);
    h.mb = (uint64_t)(now * 1e6);
    p->last_ping = now;
    if (ns_send(ns, p->info.id, &h, NULL, NULL, 0, 0, 0) == 0 && p->unanswered == 0) p->unanswered = now;
}

static int s_partner(const peer_t *p, double now)
{
    return p->last_traffic > 0 && now - p->last_traffic < PARTNER_S;
}

/* Heartbeats, bounded whatever the swarm's size: every peer every round
 * when there are few; else the partners not pinged lately (routing needs
 * their RTT) and a few others round-robin. */
void ns_ping_round(netside_t *ns)
{
    double now = ns_now(ns);
    int n = ns->peers.n;
    if (ns->health.live <= PING_PARTNERS + PING_OTHERS) {
        for (int i = 0; i < n; i++) {
            peer_t *p = &ns->peers.p[i];
            if (p->info.id != ns->id && p->health != PEER_GONE) s_ping(ns, p, now);
        }
        return;
    }
    for (int i = 0, sent = 0; i < PARTNERS_MAX && sent < PING_PARTNERS; i++) {
        peer_t *p = ns->health.partner[i] ? &ns->peers.p[ns->health.partner_ix[i]] : NULL;
        if (!p || !s_partner(p, now)) { ns->health.partner[i] = 0; continue; }
        if (p->health == PEER_GONE || now - p->last_ping < PARTNER_PING_S) continue;
        if (now - p->last_direct < PARTNER_PING_S && p->rtt_ms > 0 && now - p->last_ping < PARTNER_RTT_S) continue;
        s_ping(ns, p, now);
        sent++;
    }
    for (int k = 0, sent = 0; k < n && sent < PING_OTHERS; k++) {
        peer_t *p = &ns->peers.p[(ns->health.ping_at + k) % n];
        if (p->info.id == ns->id || p->health == PEER_GONE || s_partner(p, now)) continue;
        s_ping(ns, p, now);
        sent++;
        ns->health.ping_at = (ns->health.ping_at + k + 1) % n;
    }
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
double ns_slow_after(const peer_t *p, double now, int live)
{
    return s_gone_after(p, now, live) / 2;
}

/* One live peer's health against its silence: slow, then gone. */
static void s_health_of(netside_t *ns, peer_t *p, double now, int live)
{
    double gone = s_gone_after(p, now, live);
    double slow = ns_slow_after(p, now, live);
    double quiet = now - p->last_heard;
    if (ns_ignores_us(p, now, slow)) quiet = fmax(quiet, now - (p->last_direct > 0 ? p->last_direct : p->unanswered));
    char s[9] = "";
    if (quiet > slow && p->health != PEER_SLOW) node_id_short(p->info.id, s);
    if (quiet > gone) {
        node_id_short(p->info.id, s);
        ns_set_health(ns, p, PEER_GONE);
        if (p->rumor > 0) ixset_del(&ns->gossip.rumor_set, (int)(p - ns->peers.p));
        p->rumor = 0;
        ns->view_dirty = 1;
        metrics_event(ns->c.metrics, "peer", "\"peer\":%s,\"what\":\"gone\",\"why\":\"silent %.1f s\",\"peer_stage\":%d", s, quiet, p->info.stage);
    } else if (quiet > slow && p->health == PEER_ALIVE) {
        ns_set_health(ns, p, PEER_SLOW);
        node_id_short(p->info.id, s);
        ns->view_dirty = 1;
        metrics_event(ns->c.metrics, "peer", "\"peer\":%s,\"what\":\"slow\",\"why\":\"silent %.1f s\",\"peer_stage\":%d", s, quiet, p->info.stage);
    } else if (quiet <= slow && p->health == PEER_SLOW) {
        ns_set_health(ns, p, PEER_ALIVE);
        ns->view_dirty = 1;
    }
}

/* Time between health rounds: longer with a large table. */
double ns_health_every(const netside_t *ns)
{
    return ns->peers.n > 256 ? HEALTH_EVERY_S * ns->peers.n / 256 : HEALTH_EVERY_S;
}

/* How long one sweep of the whole table may take: a share of the least
 * silence allowed to a peer that is not a partner (partners are checked
 * every round).  Few peers: every round. */
static double s_sweep_s(const netside_t *ns)
{
    if (ns->health.live <= PING_PARTNERS + PING_OTHERS) return ns_health_every(ns);
    double sweep = 4 * ceil((double)ns->health.live / PING_OTHERS) * PING_EVERY_S / HEALTH_SWEEPS;
    return sweep > ns_health_every(ns) ? sweep : ns_health_every(ns);
}

/* The peers with tensor traffic lately, each round: they are given
 * seconds of silence.  One whose traffic ended leaves the list and is
 * checked once more with the allowance of the others. */
static void s_check_recent(netside_t *ns, double now, int live)
{
    for (int i = 0; i < ns->health.nrecent;) {
        peer_t *p = &ns->peers.p[ns->health.recent[i]];   /* records stay where they are */
        int keep = s_partner(p, now);
        if (p->info.id != ns->id && p->health != PEER_GONE) s_health_of(ns, p, now, live);
        if (keep) { i++; continue; }
        p->recent = 0;
        ns->health.recent[i] = ns->health.recent[--ns->health.nrecent];
    }
}

/* Each round: the peers with traffic lately, and a slice of the table
 * such that all of it is seen once per s_sweep_s (with a thousand peers, a
 * non-partner may be silent for minutes: checking each of them every
 * round was most of a node's periodic work).  Few peers: all of them. */
void ns_check_health(netside_t *ns)
{
    double now = ns_now(ns);
    int live = ns->health.live, n = ns->peers.n;
    ns->health.live = ns->health.nlive;
    int per = (int)ceil(n * ns_health_every(ns) / s_sweep_s(ns));
    if (per >= n) {
        for (int i = 0; i < n; i++) {
            peer_t *p = &ns->peers.p[i];
            if (p->info.id != ns->id && p->health != PEER_GONE) s_health_of(ns, p, now, live);
        }
        return;
    }
    s_check_recent(ns, now, live);
    for (int k = 0; k < per; k++) {
        if (ns->health.health_at >= n) ns->health.health_at = 0;
        peer_t *p = &ns->peers.p[ns->health.health_at++];
        if (p->info.id != ns->id && p->health != PEER_GONE && !p->recent) s_health_of(ns, p, now, live);
    }
}
