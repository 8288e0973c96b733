/* core.c: the network side's life cycle, its sends and replies, the dispatch of
 * messages and mail, and the timed work that drives the rest (netside.h). */
#include "node/runtime/netside/internal.h"

#define GOSSIP_EVERY_S 1.0
#define LINGER_S 15.0           /* after a completed run, a node waits at most this long for every peer to hear of it */
#define LINGER_RECENT_S 30.0    /* (peers heard from this recently: a partition may hide them) */
#define LINGER_EVERY_S 1.0      /* and tells the silent ones again this often */
#define GONE_PROBE_S 5.0        /* peers taken for gone are pinged again this often (a partition heals) */
#define VIEW_EVERY_S 0.2        /* the compute side's snapshot is refreshed at most this often */
#define VCACHE_OWN 1024         /* verified announcements a node remembers (without a shared cache) */

static void s_broadcast(netside_t *ns, int type);
static int s_unaware(netside_t *ns, int tell);

double ns_now(const netside_t *ns) { return rt_now(&ns->c.clock); }

uint64_t ns_unix_s(const netside_t *ns) { return ns->c.clock.wall_ms(ns->c.clock.arg) / 1000; }

void ns_post(netside_t *ns, mail_t *m)
{
    if (m) ns->c.post(ns->c.post_arg, m);
}

/* PEER_FLAG_* of this node. */
uint8_t ns_flags(const netside_t *ns)
{
    return (uint8_t)((ns->outward ? PEER_FLAG_OUTWARD : 0) | (ns->relay.relays && !ns->outward ? PEER_FLAG_RELAY : 0));
}

void ns_self_info(const netside_t *ns, peer_info_t *p)
{
    memset(p, 0, sizeof *p);
    p->id = ns->id;
    snprintf(p->addr, sizeof p->addr, "%s", ns->c.adv);
    memcpy(p->pubkey, ns->c.keys->pub, 32);
    p->stage = (int16_t)ns->me.stage;
    p->version = (uint32_t)ns->me.version;
    p->rate = ns->me.rate;
    p->flags = ns_flags(ns);
}

int ns_has_ticket(const netside_t *ns)
{
    return ns->c.ticket != NULL;
}

/* Every message leaves here, and is counted here: raw is its size with
 * tensors as raw fp32 (0: its wire size), virt the bytes its modelled
 * tensors stand for (simulator). */
int ns_port_send(netside_t *ns, int link, const transport_msg_t *to, const wire_hdr_t *h,
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
size_t ns_stage_params(const netside_t *ns, int stage)
{
    model_config_t cfg = ns->c.o->cfg;
    cfg.split = ns->plan < 0 ? SPLIT_EVEN : (model_split_t)ns->plan;
    return stage_num_params(&cfg, stage, ns->nstages);
}

/* The run's split as a message of this run from peer `from` says it: the
 * run's when not known yet; under --split auto, one that takes precedence
 * over the run's here is kept apart (plan_heard) until the compute side
 * lays it out and says so (s_on_self); and the peer's own, for the view.
 * -1 when it says a split that cannot lay this run's model out in its
 * stages (the message is dropped). */
static int s_learn_plan(netside_t *ns, uint64_t from, uint32_t flags)
{
    int plan = plan_of_flags(flags);
    if (plan < 0) return 0;
    peer_t *p = peers_find(&ns->peers, from);
    int outranks = ns->c.o->split == SPLIT_AUTO && plan_outranks(plan, ns->plan) && plan_outranks(plan, ns->plan_heard);
    if (!(p && p->plan != plan) && ns->plan >= 0 && !outranks) return 0;   /* nothing new */
    model_config_t cfg = ns->c.o->cfg;
    cfg.split = (model_split_t)plan;
    if (ns->nstages > 0 && stage_num_params(&cfg, 0, ns->nstages) == 0) return -1;
    if (p && p->plan != plan) {   /* the view says it from its next refresh (no refresh of its own) */
        p->plan = plan;
        peers_touch(&ns->peers, p);
    }
    if (ns->plan < 0) {
        ns->plan = plan;
        ns->view_dirty = 1;
    } else if (outranks) {
        ns->plan_heard = plan;
        ns->view_dirty = 1;
    }
    return 0;
}

void ns_hdr(const netside_t *ns, wire_hdr_t *h, int type)
{
    wire_hdr_init(h, (wire_type_t)type);
    h->run = ns->run;
    h->stage = ns->me.stage < 0 ? WIRE_STAGE_NONE : (uint16_t)ns->me.stage;
    h->wversion = (uint32_t)ns->me.version;
}

/* The link to peer id, connecting on first use; -1 when unknown, or when it
 * is reachable only outward and has opened no link to us yet (it is asked to). */
int ns_link(netside_t *ns, uint64_t id)
{
    peer_t *p = id != ns->id ? peers_find(&ns->peers, id) : NULL;
    if (!p) return -1;
    if (p->link < 0 && p->outward) { ns_dial(ns, p); return -1; }
    if (p->link < 0) {
        char err[256];
        p->link = ns->c.port.connect(ns->c.port.arg, p->info.addr, p->info.pubkey, err, sizeof err);
        peers_touch(&ns->peers, p);
        if (p->link >= 0) ns_introduce(ns, p->link);
    }
    return p->link;
}

/* A message to peer: over our link to it, or the one it opened to us, or
 * (both reachable only outward) sealed through its relay. */
int ns_send(netside_t *ns, uint64_t peer, const wire_hdr_t *h, const void *const *frames,
            const size_t *lens, int nf, uint64_t raw, uint64_t virt)
{
    int link = ns_link(ns, peer);
    if (link < 0) {
        peer_t *p = peers_find(&ns->peers, peer);
        wire_hdr_t hp = *h;   /* the sealed header says the plan too (ns_port_send's for the envelope) */
        hp.flags |= plan_flags(ns->plan);
        if (p && p->via && !virt) return ns_relay_send(ns, p, &hp, frames, lens, nf, raw);
        return -1;
    }
    return ns_port_send(ns, link, NULL, h, frames, lens, nf, raw, virt);
}

int ns_reply(netside_t *ns, const transport_msg_t *to, const wire_hdr_t *h, const void *const *frames,
             const size_t *lens, int nf)
{
    if (to->link == RELAYED_LINK) return ns_send(ns, to->sender, h, frames, lens, nf, 0, 0);
    return ns_port_send(ns, to->link >= 0 ? to->link : -1, to, h, frames, lens, nf, 0, 0);
}

/* The ids of every live peer (self excluded) into ids (room for PEERS_CAP). */
int ns_live_ids(const netside_t *ns, uint64_t *ids)
{
    int k = 0;
    for (int i = 0; i < ns->peers.n; i++)
        if (ns->peers.p[i].info.id != ns->id && ns->peers.p[i].health != PEER_GONE) ids[k++] = ns->peers.p[i].info.id;
    return k;
}

/* Closes the link to p, whichever kind it is (one we opened, or the one it
 * opened to us and we adopted): the next link to p starts from nothing. */
void ns_close_link(netside_t *ns, peer_t *p)
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
void ns_moved(netside_t *ns, peer_t *p)
{
    ns_close_link(ns, p);
    p->unanswered = 0;
}

/* What a peer says of its reachability.  A link we opened to a peer that
 * turns out to be reachable only outward leads nowhere: closed. */
void ns_set_outward(netside_t *ns, peer_t *p, int outward)
{
    if (p->outward == outward) return;
    p->outward = outward;
    ns->relay.nout += outward ? 1 : -1;
    INVARIANT(ns->relay.nout >= 0 && ns->relay.nout <= ns->peers.n);
    ns->view_dirty = 1;
    peers_touch(&ns->peers, p);
    if (outward && !p->adopted) ns_close_link(ns, p);
}

/* A message from an outward-only peer that came in over the connection it
 * opened to us: what we send it goes back that way. */
void ns_adopt(netside_t *ns, peer_t *p, const transport_msg_t *m)
{
    if (!p || !p->outward || m->link != -1 || !ns->c.port.adopt) return;
    if (!p->adopted) ns_close_link(ns, p);
    peers_touch(&ns->peers, p);
    int l = ns->c.port.adopt(ns->c.port.arg, p->link, m);
    if (l < 0) return;
    int fresh = p->link != l;
    p->link = l;
    p->adopted = 1;
    if (!fresh) return;
    ns->view_dirty = 1;
    ns_introduce(ns, l);   /* as on a link we open: it learns our ticket (closed swarm) before our first message */
}

void ns_stop_compute(netside_t *ns)
{
    ns_post(ns, mail_new(MAIL_STOP));
}

/* After a full table (ns_put_table, limit 0): how this node reaches each of
 * its records, in the same order (STATUS_LINK_*; added later: older
 * readers stop before it). */
static void s_put_links(netside_t *ns, wbuf_t *w)
{
    uint8_t *links = malloc((size_t)ns->peers.n + 1);
    if (!links) { w->err = 1; return; }
    uint32_t k = 0;
    links[k++] = STATUS_LINK_SELF;
    for (int i = 0; i < ns->peers.n; i++) {
        const peer_t *p = &ns->peers.p[i];
        if (p->info.id == ns->id || p->health == PEER_GONE) continue;
        links[k++] = p->link >= 0 ? (p->adopted ? STATUS_LINK_REVERSE : STATUS_LINK_DIRECT)
                     : p->via ? STATUS_LINK_RELAY : STATUS_LINK_NONE;
    }
    proto_put_links(w, links, k);
    free(links);
}

static void s_on_status_req(netside_t *ns, const transport_msg_t *m)
{
    if (!bucket_take(&ns->status_bucket, ns_now(ns), STATUS_PER_S, STATUS_PER_S, 1)) {
        ns_drop(ns, "STATUS_REQ over the rate limit", m->sender);
        return;
    }
    if (ns->c.o->closed && ns_unadmitted(ns, m->sender)) {
        /* `brigade status --keys DIR --ticket T` shows its ticket with the request */
        char why[200];
        if (m->nframes < 1 || ns_check_ticket(ns, m->frame[0], m->len[0], m->sender_pub, NULL, why, sizeof why) < 0) {
            ns_drop(ns, "STATUS_REQ without a valid ticket (closed swarm)", m->sender);
            return;
        }
    }
    wbuf_t w;
    wbuf_init(&w, TABLE_MAX_BYTES);
    proto_status_t st = { .nstages = (uint32_t)ns->nstages, .target = (uint64_t)ns->c.o->steps * (uint64_t)ns->c.o->micro };
    double loss;
    netside_progress(ns, &st.completed, &loss);
    st.loss = (float)loss;
    snprintf(st.model, sizeof st.model, "%s", ns->c.o->cfg.name);
    proto_put_status(&w, &st);
    ns_put_table(ns, &w, 0);
    s_put_links(ns, &w);
    if (!wbuf_error(&w)) {
        wire_hdr_t h;
        ns_hdr(ns, &h, WIRE_STATUS);
        const void *f[1] = { w.data };
        size_t l[1] = { w.len };
        ns_reply(ns, m, &h, f, l, 1);
    }
    wbuf_free(&w);
}

static void s_on_bye(netside_t *ns, const transport_msg_t *m)
{
    peer_t *p = peers_find(&ns->peers, m->sender);
    if (p) p->done_seen = 1;
    if (!p || p->health == PEER_GONE) return;
    ns_set_health(ns, p, PEER_GONE);
    ns->view_dirty = 1;
    char s[9];
    node_id_short(m->sender, s);
    metrics_event(ns->c.metrics, "peer", "\"peer\":%s,\"what\":\"gone\",\"why\":\"bye\",\"peer_stage\":%d", s, p->info.stage);
}

static void s_on_ping(netside_t *ns, const transport_msg_t *m)
{
    wire_hdr_t h;
    ns_hdr(ns, &h, WIRE_PONG);
    h.mb = m->hdr.mb;
    h.flags |= m->hdr.flags & PING_FLAG_DRAIN;
    if (m->link >= 0 || m->link == RELAYED_LINK || ns_link(ns, m->sender) >= 0) ns_send(ns, m->sender, &h, NULL, NULL, 0, 0, 0);
}

/* The run completed: believed from a last-stage node's signed proof, relayed by anyone. */
static void s_on_done(netside_t *ns, const transport_msg_t *m)
{
    uint64_t signer = 0;
    char err[160];
    if (m->nframes < 1 || done_verify(m->frame[0], m->len[0], ns->run, &signer, err, sizeof err) < 0) {
        ns_drop(ns, "DONE without a valid completion proof", m->sender);
        return;
    }
    peer_t *p = peers_find(&ns->peers, signer);
    if (!p || p->info.stage != ns->nstages - 1) { ns_drop(ns, "DONE signed by a node that is not of the last stage", m->sender); return; }
    if (!ns->have_proof) {
        memcpy(ns->done_proof, m->frame[0], DONE_LEN);
        ns->have_proof = 1;
    }
    peer_t *from = peers_find(&ns->peers, m->sender);
    if (from) from->done_seen = 1;
    ns_stop_compute(ns);
}

/* A joiner's messages before its WELCOME: only the bootstrap's answer
 * counts (its key is the one in --join: the transport authenticated the
 * sender), and only while the join is under way. */
static void s_on_msg_joining(netside_t *ns, const transport_msg_t *m)
{
    if (m->hdr.type == WIRE_BYE || m->hdr.type == WIRE_WELCOME) {
        if (ns->join.state == JOIN_FAILED) { ns_discard(ns); return; }   /* late: the outcome is told already */
        if (m->sender != ns->join.id) { ns_drop(ns, "WELCOME or BYE from a node the join did not go through", m->sender); return; }
    }
    if (m->hdr.type == WIRE_BYE && m->nframes >= 1) ns_on_refused(ns, m);
    else if (m->hdr.type == WIRE_WELCOME) ns_on_welcome(ns, m);
    else if (m->hdr.type == WIRE_PING && (m->hdr.flags & PING_FLAG_PROBE) && m->link < 0) {
        /* the bootstrap checks that our address reaches us: answer over that connection */
        wire_hdr_t h;
        wire_hdr_init(&h, WIRE_PONG);
        h.flags = PING_FLAG_PROBE;
        h.mb = m->hdr.mb;
        ns_reply(ns, m, &h, NULL, NULL, 0);
    }
}

void netside_on_msg(netside_t *ns, const transport_msg_t *m, uint64_t virt_bytes)
{
    uint64_t b = WIRE_HDR_LEN + virt_bytes;
    for (int i = 0; i < m->nframes; i++) b += m->len[i];
    atomic_fetch_add(&ns->ctr.bytes_recv, b);
    if (ns->join.state == JOIN_WAITING || ns->join.state == JOIN_FAILED) { s_on_msg_joining(ns, m); return; }
    ns_dispatch(ns, m);
}

void netside_on_drop(netside_t *ns, const char *why, const uint8_t *pubkey)
{
    uint64_t from = pubkey ? node_id_from_pubkey(pubkey) : 0;
    if (pubkey && ns_banned(ns, from)) { ns_discard(ns); return; }   /* as in ns_dispatch: no strike */
    ns_drop(ns, why, from);
}

/* A message from an authenticated sender (directly, or opened from a relay's envelope). */
void ns_dispatch(netside_t *ns, const transport_msg_t *m)
{
    int type = m->hdr.type;
    if (type == WIRE_PONG && (m->hdr.flags & PING_FLAG_PROBE)) { ns_on_probe_pong(ns, m); return; }
    if (ns_banned(ns, m->sender)) { ns_discard(ns); return; }  /* not even counted as a strike */
    if (type == WIRE_STATUS_REQ) { s_on_status_req(ns, m); return; }   /* any run: `brigade status` knows none */
    if (type == WIRE_JOIN) {
        if (m->hdr.run != 0 && m->hdr.run != ns->run) { ns_drop(ns, "JOIN for another run", m->sender); return; }
        ns_on_join(ns, m);
        return;
    }
    if (m->hdr.run != ns->run) { ns_drop(ns, "message of another run", m->sender); return; }
    const char *unadmitted = ns->c.o->closed ? ns_unadmitted(ns, m->sender) : NULL;
    if (unadmitted) { ns_drop(ns, unadmitted, m->sender); return; }
    ns_heard(ns, m->sender);
    if (s_learn_plan(ns, m->sender, m->hdr.flags) < 0) { ns_drop(ns, "a split the run's model cannot take", m->sender); return; }
    ns_adopt(ns, peers_find(&ns->peers, m->sender), m);
    switch (type) {
    case WIRE_PEERS: ns_on_peers(ns, m); break;
    case WIRE_PING: s_on_ping(ns, m); break;
    case WIRE_PONG:
        if (m->hdr.flags & PING_FLAG_DRAIN) ns_on_drain_pong(ns, m);
        else ns_on_pong(ns, m);
        break;
    case WIRE_ACT: case WIRE_GRAD: case WIRE_AVG: ns_on_tensor(ns, m); break;
    case WIRE_STATE_REQ: ns_on_state_req(ns, m); break;
    case WIRE_STATE: ns_on_state(ns, m); break;
    case WIRE_BYE: s_on_bye(ns, m); break;
    case WIRE_DONE: s_on_done(ns, m); break;
    case WIRE_DIAL: ns_on_dial(ns, m); break;
    case WIRE_RELAY: ns_on_relay(ns, m); break;
    case WIRE_WELCOME:
        /* the answer to a JOIN sent again before the first answer came: nothing wrong with its sender */
        if (m->sender == ns->join.id) { ns_discard(ns); break; }
        ns_drop(ns, "unexpected message type", m->sender);
        break;
    default:
        ns_drop(ns, "unexpected message type", m->sender);
    }
}

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
    if (moved) ns_feedback_reset(ns);
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
        ns->linger_until = ns_now(ns) + LINGER_S;
        ns->next_linger = ns_now(ns) + LINGER_EVERY_S;
    }
}

void netside_on_mail(netside_t *ns, mail_t *m)
{
    switch (m->kind) {
    case MAIL_SEND: ns_on_send(ns, m); break;
    case MAIL_SELF: s_on_self(ns, &m->self); break;
    case MAIL_FETCH: ns_on_fetch(ns, m); break;
    case MAIL_STATE_OUT: ns_on_state_out(ns, m); break;
    case MAIL_LEAVE: s_on_leave(ns, &m->self); break;
    case MAIL_TENSOR: case MAIL_STATE_REQ: case MAIL_VIEW: case MAIL_STATE: case MAIL_STOP: case MAIL_SAY:
        INVARIANT(!"mail for the compute side posted to the network side");
    }
    mail_free(m);
}

static void s_broadcast(netside_t *ns, int type)
{
    uint64_t *ids = malloc(sizeof(uint64_t) * (size_t)(ns->peers.n + 1));
    int k = ids ? ns_live_ids(ns, ids) : 0;
    for (int i = 0; i < k; i++) {
        if (type == WIRE_PEERS) { ns_send_table(ns, ids[i], GOSSIP_RECORDS); continue; }
        wire_hdr_t h;
        ns_hdr(ns, &h, type);
        h.mb = (uint64_t)(ns_now(ns) * 1e6);
        /* DONE carries the proof that the last stage completed the run */
        const void *f[1] = { ns->done_proof };
        size_t l[1] = { DONE_LEN };
        int nf = type == WIRE_DONE && ns->have_proof ? 1 : 0;
        ns_send(ns, ids[i], &h, f, l, nf, 0, 0);
    }
    free(ids);
}

static void s_publish_view(netside_t *ns)
{
    mail_t *m = mail_new(MAIL_VIEW);
    if (!m) return;
    m->view = netside_view(ns);
    if (!m->view) { mail_free(m); return; }
    ns->view_dirty = 0;
    ns_post(ns, m);
}

double netside_tick(netside_t *ns)
{
    double now = ns_now(ns);
    if (ns->join.state == JOIN_WAITING) {
        if (now > ns->join.deadline) {
            char host[ADDR_HOST_MAX], why[300];
            int port;
            uint8_t key[32];
            addr_parse(ns->join.addr, host, sizeof host, &port, key, why, sizeof why);
            char detail[ADDR_HOST_MAX + 32];
            snprintf(detail, sizeof detail, "%s:%d", host, port);
            ns_join_fail(ns, "--join %s: no answer from %s in 15 s (is a brigade node running there, is the port reachable, is the key its current one?)", detail);
        } else if (now >= ns->join.resend) {
            ns_join_send(ns);
        }
        return ns->join.resend < ns->join.deadline ? ns->join.resend : ns->join.deadline;
    }
    if (ns->join.state == JOIN_FAILED) return now + 1.0;
    ns_probe_tick(ns, now);
    if (now >= ns->health.next_ping) { ns_keep_links(ns); ns_ping_round(ns); ns->health.next_ping = now + PING_EVERY_S; }
    if (now >= ns->gossip.next) { ns_gossip_round(ns); ns->gossip.next = now + GOSSIP_EVERY_S; }
    if (now >= ns->health.next_health) {
        ns_check_health(ns);
        ns->health.next_health = now + ns_health_every(ns);
    }
    if (now >= ns->health.next_probe) { ns_probe_gone(ns); ns->health.next_probe = now + GONE_PROBE_S; }
    if (ns->left && ns->have_proof && now < ns->linger_until && now >= ns->next_linger) {
        s_unaware(ns, 1);
        ns->next_linger = now + LINGER_EVERY_S;
    }
    if (ns->xfer.fetch.active) {
        if (now >= ns->xfer.fetch.deadline) ns_fetch_end(ns, NULL);
        else if (now >= ns->xfer.fetch.resend && now - ns->xfer.fetch.rx.last_chunk >= ns_fetch_silence(&ns->xfer.fetch)) ns_fetch_ask(ns);
    }
    if (ns->view_dirty && now >= ns->next_view) {
        s_publish_view(ns);
        ns->next_view = now + (ns->peers.n > 64 ? 1.0 : VIEW_EVERY_S);   /* large tables: at most once a second */
    }
    double next = ns->health.next_ping;
    if (ns->gossip.next < next) next = ns->gossip.next;
    if (ns->health.next_health < next) next = ns->health.next_health;
    if (ns->health.next_probe < next) next = ns->health.next_probe;
    if (ns->left && ns->have_proof && now < ns->linger_until && ns->next_linger < next) next = ns->next_linger;
    if (ns->view_dirty && ns->next_view < next) next = ns->next_view;
    if (ns->xfer.fetch.active) {
        if (ns->xfer.fetch.deadline < next) next = ns->xfer.fetch.deadline;
        if (ns->xfer.fetch.resend < next) next = ns->xfer.fetch.resend;
    }
    for (int i = 0; i < PROBES_MAX; i++)
        if (ns->join.nprobes && ns->join.probe[i].id && ns->join.probe[i].deadline < next) next = ns->join.probe[i].deadline;
    return next;
}

/* After a completed run: peers that may not know yet (heard from lately, not said they ended).
 * tell: send them DONE again.  Returns how many there are. */
static int s_unaware(netside_t *ns, int tell)
{
    double now = ns_now(ns);
    int k = 0;
    for (int i = 0; i < ns->peers.n; i++) {
        peer_t *p = &ns->peers.p[i];
        if (p->info.id == ns->id || p->done_seen || now - p->last_heard > LINGER_RECENT_S || p->banned_until > now) continue;
        if (p->outward && p->link < 0 && !p->via) continue;   /* no way to it: it hears the end from its own links */
        k++;
        if (!tell) continue;
        wire_hdr_t h;
        ns_hdr(ns, &h, WIRE_DONE);
        const void *f[1] = { ns->done_proof };
        size_t l[1] = { DONE_LEN };
        ns_send(ns, p->info.id, &h, f, l, 1, 0, 0);
    }
    return k;
}

int netside_finished(netside_t *ns)
{
    if (!ns->left || !ns->said_done) return 0;
    if (!ns->have_proof || ns_now(ns) >= ns->linger_until) return 1;
    return s_unaware(ns, 0) == 0;
}

void netside_bye(netside_t *ns)
{
    s_sign_done(ns);
    if (ns->have_proof) s_broadcast(ns, WIRE_DONE);
    s_broadcast(ns, WIRE_BYE);
}

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
    ns->plan_heard = -1;
    ns->outward = cfg->no_listen;
    ns->relay.relays = cfg->relay;
    ns->relay.bucket = bucket_full(ns_now(ns));
    ns->status_bucket = bucket_full(ns_now(ns));
    ns->join.bucket = bucket_full(ns_now(ns));
    ns->join.link = -1;
    ns->health.live_set.ok = 1;
    ns->gossip.rumor_set.ok = 1;
    ns->gossip.rng = ns->id ^ 0x9e3779b97f4a7c15ULL;
    if (!cfg->o->join[0]) ns->run = opts_run_id(cfg->o);
    ns->tensor.dec = codec_ctx_new(1);
    ns->tensor.enc = codec_ctx_new(1);
    ns->xfer.backups = calloc((size_t)(ns->nstages > 0 ? ns->nstages : 1), sizeof(backup_t));
    if (!cfg->vcache) ns->gossip.own_vcache = vcache_new(VCACHE_OWN);
    ns->gossip.vcache = cfg->vcache ? cfg->vcache : ns->gossip.own_vcache;
    if (peers_init(&ns->peers, ns->id) < 0 || !ns->tensor.dec || !ns->tensor.enc || !ns->xfer.backups || !ns->gossip.vcache) {
        netside_destroy(&ns);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    peer_info_t self;
    ns_self_info(ns, &self);
    peers_upsert(&ns->peers, &self, ns_now(ns));
    return ns;
}

void netside_destroy(netside_t **self_p)
{
    netside_t *ns = *self_p;
    if (!ns) return;
    ns_feedback_reset(ns);
    ns_rx_free(&ns->xfer.fetch.rx);
    for (int s = 0; ns->xfer.backups && s < ns->nstages; s++) {
        free(ns->xfer.backups[s].buf);
        ns_rx_free(&ns->xfer.backups[s].rx);
    }
    free(ns->xfer.backups);
    codec_ctx_destroy(&ns->tensor.dec);
    codec_ctx_destroy(&ns->tensor.enc);
    vcache_destroy(&ns->gossip.own_vcache);
    peers_fini(&ns->peers);
    free(ns->health.recent);
    ixset_free(&ns->health.live_set);
    ixset_free(&ns->gossip.rumor_set);
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
    if (v) v->plan = plan_outranks(ns->plan_heard, ns->plan) ? ns->plan_heard : ns->plan;
    return v;
}

int netside_plan(const netside_t *ns) { return ns->plan; }

const net_counters_t *netside_counters(const netside_t *ns) { return &ns->ctr; }

const peers_t *netside_peers(const netside_t *ns) { return &ns->peers; }
