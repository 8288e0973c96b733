/* join.c: joining, both the bootstrap's side (admission, reachability probes,
 * WELCOME) and the joiner's. */
#include "node/runtime/netside/internal.h"

#define JOIN_WAIT_S 15.0        /* a joiner gives up when its bootstrap is silent this long */
#define JOIN_RESEND_S 3.0       /* and asks again this often */
#define PROBE_S 2.5             /* the bootstrap waits this long for a joiner to answer on its advertised address */

/* The JOIN body: our address, the stage we want, our ticket (closed swarm),
 * and, when the wanted stage is that of a checkpoint rather than --stage,
 * that checkpoint's run id (u64, hint_run != 0): another run's stage is no
 * claim on this one. */
void ns_put_join(const netside_t *ns, wbuf_t *w, int want, uint64_t hint_run)
{
    proto_put_join(w, ns->c.adv, want, ns_has_ticket(ns) ? ns->c.ticket : NULL, hint_run);
}

/* A new link starts with an introduction: who we are, where we listen,
 * which stage we serve, and (closed swarm) our ticket, so the peer knows us
 * before our first real message even when gossip has not told it yet. */
void ns_introduce(netside_t *ns, int link)
{
    wbuf_t w;
    wbuf_init(&w, 1024);
    ns_put_join(ns, &w, ns->me.stage, 0);
    wire_hdr_t h;
    ns_hdr(ns, &h, WIRE_JOIN);
    h.flags = JOIN_FLAG_INTRO | (ns->outward ? JOIN_FLAG_OUTWARD : 0);
    const void *f[1] = { w.data };
    size_t l[1] = { w.len };
    if (!wbuf_error(&w)) ns_port_send(ns, link, NULL, &h, f, l, 1, 0, 0);
    wbuf_free(&w);
}

/* 1 when another JOIN may be answered now. */
static int s_join_allowed(netside_t *ns)
{
    return bucket_take(&ns->join.bucket, ns_now(ns), JOIN_PER_S, JOIN_PER_S, 1);
}

/* Closed swarm: checks the ticket of a JOIN; 0 admitted until *expires
 * (unix seconds, 0: no expiry; may be NULL), -1 refused (reason in why). */
int ns_check_ticket(netside_t *ns, const uint8_t *tbytes, size_t tlen, const uint8_t pub[32],
                    uint64_t *expires, char *why, size_t whylen)
{
    ticket_t t;
    if (tlen != TICKET_LEN) { snprintf(why, whylen, "no admission ticket"); return -1; }
    if (ticket_decode(&t, tbytes, tlen, why, whylen) < 0) return -1;
    if (ticket_verify(&t, ns->c.o->owner_pub, pub, ns_unix_s(ns), why, whylen) < 0) return -1;
    if (expires) *expires = t.expires;
    return 0;
}

/* The stage a newcomer takes (peers_pick_stage): by the stages' shares of a
 * microbatch's work under the front split, whose stage 0 holds most of it
 * (rebalancing would move the nodes there one by one), else alike. */
static int s_pick_stage(netside_t *ns, uint64_t salt)
{
    double work[MODEL_STAGES_MAX];
    int K = ns->nstages, by_work = ns->plan == SPLIT_FRONT && K <= MODEL_STAGES_MAX;
    model_config_t cfg = ns->c.o->cfg;
    cfg.split = SPLIT_FRONT;
    for (int s = 0; s < K && by_work; s++) by_work = (work[s] = (double)stage_num_params(&cfg, s, K)) > 0;
    return peers_pick_stage(&ns->peers, K, salt, by_work ? work : NULL);
}

/* A refused joiner learns why, so it can say so instead of waiting. */
static void s_refuse(netside_t *ns, const transport_msg_t *m, const char *why)
{
    char id[9];
    node_id_short(m->sender, id);
    metrics_event(ns->c.metrics, "peer", "\"peer\":%s,\"what\":\"refused\",\"why\":%s", id, why);
    ns_drop(ns, why, m->sender);
    if (m->hdr.flags & JOIN_FLAG_INTRO) return;
    wire_hdr_t h;
    ns_hdr(ns, &h, WIRE_BYE);
    const void *f[1] = { why };
    size_t l[1] = { strlen(why) };
    ns_reply(ns, m, &h, f, l, 1);
}

/* A member opening a link to us: learn it, admit it, nothing to answer. */
static void s_on_intro(netside_t *ns, const transport_msg_t *m, const char *adv, int want, uint64_t until)
{
    int outward = (m->hdr.flags & JOIN_FLAG_OUTWARD) != 0;
    peer_info_t info = {0};
    info.id = m->sender;
    memcpy(info.addr, adv, sizeof info.addr);
    memcpy(info.pubkey, m->sender_pub, 32);
    info.stage = (int16_t)want;
    ns_add_peer(ns, &info, ns_now(ns), "introduction");
    ns_heard(ns, m->sender);
    peer_t *p = peers_find(&ns->peers, m->sender);
    if (!p) return;
    ns_admit(p, 1, until);
    if (outward) ns_set_outward(ns, p, 1);
    ns_adopt(ns, p, m);
}

static void s_welcome(netside_t *ns, const transport_msg_t *m, int stage, int shard, int reachable)
{
    wbuf_t cfg, asg, tab;
    wbuf_init(&cfg, 1 << 16);
    wbuf_init(&asg, 64);
    wbuf_init(&tab, TABLE_MAX_BYTES);
    proto_put_runcfg(&cfg, ns->c.o);
    proto_put_welcome(&asg, &(proto_welcome_t){ .stage = stage, .shard = shard, .done = ns->me.done != 0,
                                               .reachable = reachable != 0 });
    ns_put_table(ns, &tab, 0);
    if (!wbuf_error(&cfg) && !wbuf_error(&asg) && !wbuf_error(&tab)) {
        wire_hdr_t h;
        ns_hdr(ns, &h, WIRE_WELCOME);
        const void *f[3] = { cfg.data, asg.data, tab.data };
        size_t l[3] = { cfg.len, asg.len, tab.len };
        ns_reply(ns, m, &h, f, l, 3);
    }
    wbuf_free(&cfg);
    wbuf_free(&asg);
    wbuf_free(&tab);
}

/* Reachability of a joiner: a fresh link to the address it advertised,
 * with its key, and a PING that it answers over that link.  0 probing (the
 * WELCOME waits for the answer, at most PROBE_S), -1 no probe (no slot, or
 * this port cannot send back over a joiner's own link). */
static int s_probe_start(netside_t *ns, const transport_msg_t *m, const char *adv, int stage, int shard)
{
    if (!ns->c.port.adopt) return -1;
    int free_slot = -1;
    for (int i = 0; i < PROBES_MAX; i++) {
        if (ns->join.probe[i].id == m->sender) return 0;   /* a repeated JOIN: the probe is under way */
        if (!ns->join.probe[i].id && free_slot < 0) free_slot = i;
    }
    if (free_slot < 0) return -1;
    char err[256];
    int link = ns->c.port.connect(ns->c.port.arg, adv, m->sender_pub, err, sizeof err);
    if (link < 0) return -1;
    probe_t *pr = &ns->join.probe[free_slot];
    memset(pr, 0, sizeof *pr);
    pr->id = m->sender;
    ns->join.nprobes++;
    INVARIANT(ns->join.nprobes <= PROBES_MAX);
    pr->link = link;
    ns->gossip.rng = ns->gossip.rng * 6364136223846793005ULL + 1442695040888963407ULL;
    pr->nonce = ns->gossip.rng | 1;
    pr->deadline = ns_now(ns) + PROBE_S;
    pr->stage = stage;
    pr->shard = shard;
    pr->to = *m;
    pr->to.parts_ = NULL;   /* routing fields only */
    pr->to.nframes = 0;
    wire_hdr_t h;
    ns_hdr(ns, &h, WIRE_PING);
    h.flags = PING_FLAG_PROBE;
    h.mb = pr->nonce;
    ns_port_send(ns, link, NULL, &h, NULL, NULL, 0, 0, 0);
    return 0;
}

/* A probe ended: the joiner is told whether the swarm reached it. */
static void s_probe_end(netside_t *ns, probe_t *pr, int reachable)
{
    ns->c.port.disconnect(ns->c.port.arg, pr->link);
    peer_t *p = peers_find(&ns->peers, pr->id);
    if (p) {
        ns_set_outward(ns, p, !reachable);
        ns_adopt(ns, p, &pr->to);
    }
    char id[9];
    node_id_short(pr->id, id);
    if (reachable)
        metrics_event(ns->c.metrics, "peer", "\"peer\":%s,\"what\":\"probed\",\"why\":%s,\"reachable\":true", id,
                      "answered on its address");
    else
        metrics_event(ns->c.metrics, "peer", "\"peer\":%s,\"what\":\"probed\",\"why\":%s,\"reachable\":false", id,
                      "no answer on its address: reachable only outward");
    s_welcome(ns, &pr->to, pr->stage, pr->shard, reachable);
    memset(pr, 0, sizeof *pr);
    ns->join.nprobes--;
    INVARIANT(ns->join.nprobes >= 0);
}

void ns_on_probe_pong(netside_t *ns, const transport_msg_t *m)
{
    for (int i = 0; i < PROBES_MAX; i++)
        if (ns->join.probe[i].id && ns->join.probe[i].id == m->sender && ns->join.probe[i].nonce == m->hdr.mb) {
            s_probe_end(ns, &ns->join.probe[i], 1);
            return;
        }
    ns_discard(ns);   /* late, or not ours */
}

void ns_probe_tick(netside_t *ns, double now)
{
    for (int i = 0; ns->join.nprobes && i < PROBES_MAX; i++)
        if (ns->join.probe[i].id && now >= ns->join.probe[i].deadline) s_probe_end(ns, &ns->join.probe[i], 0);
}

/* The joiner of JOIN m, at adv, serving stage, admitted until `until`:
 * its record, alive (NULL when the table has no room for it). */
static peer_t *s_take_joiner(netside_t *ns, const transport_msg_t *m, const char *adv, int stage, uint64_t until)
{
    peer_info_t info = {0};
    info.id = m->sender;
    snprintf(info.addr, sizeof info.addr, "%s", adv);
    memcpy(info.pubkey, m->sender_pub, 32);
    info.stage = (int16_t)stage;
    ns_add_peer(ns, &info, ns_now(ns), "join");
    /* a re-join after a restart: alive again (ns_add_peer took its stage and its possibly new address, and
     * closed a link to the old one) */
    peer_t *p = peers_find(&ns->peers, m->sender);
    if (p) {   /* its own word: pings it left unanswered before its restart count no more */
        ns_set_health(ns, p, PEER_ALIVE);
        p->last_heard = p->last_direct = ns_now(ns);
        p->unanswered = 0;
        ns_admit(p, 1, until);
    }
    return p;
}

void ns_on_join(netside_t *ns, const transport_msg_t *m)
{
    int intro = (m->hdr.flags & JOIN_FLAG_INTRO) != 0;
    if (!intro && !s_join_allowed(ns)) { ns_discard(ns); return; }  /* a flood of joiners: they retry every 3 s */
    if (m->nframes < 1) { ns_drop(ns, "JOIN without body", m->sender); return; }
    proto_join_t j;
    /* the address goes into every table this node sends: one that peers_decode
     * refuses (the wildcard "*", say) would get the whole table refused */
    if (proto_get_join(&j, m->frame[0], m->len[0]) < 0 || !peer_addr_valid(j.adv) || j.want < -1) {
        ns_drop(ns, "malformed JOIN", m->sender);
        return;
    }
    const char *adv = j.adv;
    int other_run = j.has_hint && j.hint_run != ns->run;   /* want: another run's checkpoint's stage */
    int want = other_run && !intro ? -1 : j.want;
    char why[240];
    if (want >= ns->nstages) {   /* the joiner cannot know the run's stages before it is welcomed */
        snprintf(why, sizeof why, "--stage %d: the run has %d stage%s (0 to %d)", (int)want, ns->nstages,
                 ns->nstages == 1 ? "" : "s", ns->nstages - 1);
        s_refuse(ns, m, why);
        return;
    }
    uint64_t until = 0;
    peer_t *known = peers_find(&ns->peers, m->sender);
    if (ns->c.o->closed && ns_check_ticket(ns, j.ticket, j.tlen, m->sender_pub, &until, why, sizeof why) < 0) {
        size_t n = strlen(why);
        snprintf(why + n, sizeof why - n, " (a closed swarm needs --ticket from its owner)");
        if (known) ns_admit(known, 0, 0);   /* admitted before: no longer, on a ticket refused now */
        s_refuse(ns, m, why);
        return;
    }
    if (intro) { s_on_intro(ns, m, adv, want, until); return; }
    int stage = want;
    if (known && want < 0) stage = known->info.stage;  /* a repeated JOIN keeps its stage */
    if (stage < 0 || stage >= ns->nstages) stage = s_pick_stage(ns, m->sender);
    int counts[MODEL_STAGES_MAX];
    peers_stage_counts(&ns->peers, ns->nstages, counts);
    peer_t *p = s_take_joiner(ns, m, adv, stage, until);
    int shard = stage == 0 ? counts[0] : 0;
    if (!p || (m->hdr.flags & JOIN_FLAG_OUTWARD)) {
        if (p) ns_set_outward(ns, p, 1);
        ns_adopt(ns, p, m);
        s_welcome(ns, m, stage, shard, 0);
        return;
    }
    if (s_probe_start(ns, m, adv, stage, shard) < 0) s_welcome(ns, m, stage, shard, 1);
}

void ns_join_fail(netside_t *ns, const char *fmt, const char *detail)
{
    snprintf(ns->join.err, sizeof ns->join.err, fmt, ns->join.addr, detail);
    ns->join.state = JOIN_FAILED;
}

void ns_join_send(netside_t *ns)
{
    wbuf_t w;
    wbuf_init(&w, 1024);
    ns_put_join(ns, &w, ns->join.want, ns->c.o->stage_run);
    wire_hdr_t h;
    wire_hdr_init(&h, WIRE_JOIN);
    h.flags = ns->c.no_listen ? JOIN_FLAG_OUTWARD : 0;
    const void *f[1] = { w.data };
    size_t l[1] = { w.len };
    if (!wbuf_error(&w)) ns_port_send(ns, ns->join.link, NULL, &h, f, l, 1, 0, 0);
    wbuf_free(&w);
    ns->join.resend = ns_now(ns) + JOIN_RESEND_S;
}

int netside_join(netside_t *ns, const char *join_addr, int want, char *err, size_t errlen)
{
    char host[ADDR_HOST_MAX], why[300], hp[PEER_ADDR_MAX];
    int port;
    uint8_t key[32];
    if (addr_parse(join_addr, host, sizeof host, &port, key, why, sizeof why) < 0) {
        snprintf(err, errlen, "--join %s", why);
        return -1;
    }
    hostport_format(hp, sizeof hp, host, port);
    ns->join.link = ns->c.port.connect(ns->c.port.arg, hp, key, why, sizeof why);
    if (ns->join.link < 0) { snprintf(err, errlen, "--join %s: %s", join_addr, why); return -1; }
    snprintf(ns->join.addr, sizeof ns->join.addr, "%s", join_addr);
    ns->join.id = node_id_from_pubkey(key);
    ns->join.want = want;
    ns->join.state = JOIN_WAITING;
    ns->join.deadline = ns_now(ns) + JOIN_WAIT_S;
    ns_join_send(ns);
    return 0;
}

int netside_join_state(netside_t *ns, char *err, size_t errlen)
{
    if (ns->join.state == JOIN_FAILED) { snprintf(err, errlen, "%s", ns->join.err); return -1; }
    return ns->join.state == JOIN_DONE || ns->join.state == JOIN_NONE ? 1 : 0;
}

void ns_on_refused(netside_t *ns, const transport_msg_t *m)
{
    char why[240];
    size_t n = m->len[0] < sizeof why - 1 ? m->len[0] : sizeof why - 1;
    memcpy(why, m->frame[0], n);
    why[n] = 0;
    for (char *q = why; *q; q++) if (*q < 32 || *q > 126) *q = '?';
    ns_join_fail(ns, "--join %s: refused by the swarm: %s", why);
}

void ns_on_welcome(netside_t *ns, const transport_msg_t *m)
{
    if (m->nframes < 3) { ns_join_fail(ns, "--join %s: malformed WELCOME%s", ""); return; }
    opts_t o = *ns->c.o;
    rbuf_t rc, rt;
    rbuf_init(&rc, m->frame[0], m->len[0]);
    rbuf_init(&rt, m->frame[2], m->len[2]);
    char e2[256];
    if (proto_get_runcfg(&rc, &o, e2, sizeof e2) < 0) { ns_join_fail(ns, "--join %s: the swarm's %s", e2); return; }
    proto_welcome_t a;
    int bad_asg = proto_get_welcome(&a, m->frame[1], m->len[1]);
    int stage = a.stage, shard = a.shard, done = a.done, reachable = a.reachable;
    int max;
    peer_info_t *recs = ns_recs_for(m->frame[2], m->len[2], &max);
    int k = 0;
    if (!recs || bad_asg || stage < 0 || stage >= o.stages
        || shard < 0 || shard > PEERS_CAP   /* one shard per data-stage peer */
        || peers_decode(&rt, recs, max, &k, e2, sizeof e2) < 0) {
        free(recs);
        ns_join_fail(ns, "--join %s: malformed WELCOME%s", "");
        return;
    }
    if (done) { free(recs); ns_join_fail(ns, "--join %s: that run has already finished%s", ""); return; }
    *ns->c.o = o;
    ns->plan = o.split == SPLIT_AUTO ? plan_of_flags(m->hdr.flags) : o.split;
    ns->run = m->hdr.run;
    ns->nstages = o.stages;
    ns->shard = shard;
    ns->me.stage = stage;
    free(ns->xfer.backups);
    ns->xfer.backups = calloc((size_t)ns->nstages, sizeof(backup_t));
    int bad = !ns->xfer.backups || ns_take_table(ns, &rt, recs, k, m->sender, m->sender_pub, "welcome") < 0;
    free(recs);
    if (bad) { ns_join_fail(ns, "--join %s: malformed WELCOME%s", ""); return; }
    /* the bootstrap's link is the one we opened; it is the node we chose to join */
    peer_t *p = peers_find(&ns->peers, m->sender);
    if (p && p->link < 0) { p->link = ns->join.link; peers_touch(&ns->peers, p); }
    if (p) ns_admit(p, 1, 0);   /* the node we chose to join: no ticket of its own to show */
    ns->outward = ns->c.no_listen || !reachable;
    ns->join.state = JOIN_DONE;
}
