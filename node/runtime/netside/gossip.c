/* gossip.c: the peer table's records, signed announcements, rumors and the
 * PEERS exchange. */
#include "node/runtime/netside/internal.h"

#define GOSSIP_FANOUT 3         /* PEERS go to this many random live peers each round */
#define GOSSIP_LEARN_BURST 64   /* new peers one member's gossip may introduce at once (self-signed announcements */
#define GOSSIP_LEARN_PER_S 4.0  /* cost nothing to make: one PEERS filled the table), and per second after */

/* Room for the records a PEERS/WELCOME table says it holds (its leading
 * u32 count; peers_decode checks the rest), at least one and at most
 * PEERS_MAX: a share of the table is small, and a buffer of PEERS_MAX
 * records per message was most of the work of a busy node's allocator.
 * Sets *max to the room.  NULL when out of memory. */
peer_info_t *ns_recs_for(const uint8_t *frame, size_t len, int *max)
{
    uint32_t count = proto_table_count(frame, len);   /* 0 when truncated: peers_decode says so */
    if (count < 1) count = 1;
    if (count > PEERS_MAX) count = PEERS_MAX;
    *max = (int)count;
    return malloc(sizeof(peer_info_t) * count);
}

/* Signs this node's own announcement again when its address or stage
 * changed since the last one (the seq is the wall clock in ms, so it only
 * grows, across restarts too). */
static void s_self_announce(netside_t *ns, peer_t *self)
{
    announce_t a;
    char err[160];
    self->info.flags = ns_flags(ns);
    if (self->announce_seq && ns->gossip.ann_stage == self->info.stage && strcmp(ns->gossip.ann_addr, self->info.addr) == 0
        && ns->gossip.ann_flags == self->info.flags) return;
    ns->gossip.ann_stage = self->info.stage;
    ns->gossip.ann_flags = self->info.flags;
    snprintf(ns->gossip.ann_addr, sizeof ns->gossip.ann_addr, "%s", self->info.addr);
    uint64_t seq = ns->c.clock.wall_ms(ns->c.clock.arg);
    if (seq <= self->announce_seq) seq = self->announce_seq + 1;
    if (announce_sign(&a, &self->info, seq, ns->c.keys, err, sizeof err) == 0) {
        uint8_t blob[ANNOUNCE_LEN];
        announce_encode(blob, &a);
        peers_set_announce(self, blob, seq);
    }
}

/* Times a changed record goes out first in gossip: enough rounds for the
 * news to reach every node with high probability (~3 log2 N). */
static int s_rumor_rounds(const netside_t *ns)
{
    int r = 3;
    for (int n = ns->peers.n; n > 1; n >>= 1) r += 3;
    return r;
}

/* p changed: its record goes out first for a few gossip rounds. */
void ns_rumor(netside_t *ns, peer_t *p)
{
    if (p->rumor <= 0) ixset_add(&ns->gossip.rumor_set, (int)(p - ns->peers.p));
    p->rumor = s_rumor_rounds(ns);
}

/* Appends record i of the table (with its announcement) to recs/blobs. */
static void s_table_entry(const netside_t *ns, const peer_t *p, double now, peer_info_t *rec, const uint8_t **blob)
{
    (void)ns;
    *rec = p->info;
    rec->rtt_ms = (float)p->rtt_ms;
    rec->seen_ms = (uint64_t)((now - p->last_heard) * 1000.0);
    *blob = p->announce_seq ? p->announce : NULL;
}

/* A table for WELCOME, PEERS and STATUS: self, then alive peers: all of
 * them (limit 0), or at most `limit`, changed records first, then a
 * round-robin share of the rest (gossip).  The records, then a u32 count
 * and each record's signed announcement (empty when we hold none for it),
 * forwarded as received.  Only gossip (limit > 0) spends a changed record's
 * rounds: a WELCOME or a STATUS answer goes to a joiner or an outsider. */
void ns_put_table(netside_t *ns, wbuf_t *w, int limit)
{
    int cap = (limit > 0 && limit < ns->peers.n ? limit : ns->peers.n) + 1;
    peer_info_t *recs = malloc(sizeof(peer_info_t) * (size_t)cap);
    const uint8_t **blobs = malloc(sizeof(uint8_t *) * (size_t)cap);
    if (!recs || !blobs) { free(recs); free(blobs); w->err = 1; return; }
    int k = 0;
    ns_self_info(ns, &recs[k]);
    blobs[k] = NULL;
    peer_t *self = peers_find(&ns->peers, ns->id);
    if (self) {
        self->info.stage = (int16_t)ns->me.stage;
        memcpy(self->info.addr, recs[0].addr, sizeof self->info.addr);
        s_self_announce(ns, self);
        if (self->announce_seq) blobs[k] = self->announce;
    }
    k++;
    double now = ns_now(ns);
    int n = ns->peers.n;
    if (limit <= 0 || n <= limit) {
        for (int i = 0; i < n && k < cap; i++) {
            peer_t *p = &ns->peers.p[i];
            if (p->info.id == ns->id || p->health == PEER_GONE) continue;
            if (limit > 0 && p->rumor > 0 && --p->rumor == 0) ixset_del(&ns->gossip.rumor_set, i);
            s_table_entry(ns, p, now, &recs[k], &blobs[k]);
            k++;
        }
    } else {
        /* changed records first (each goes out a few rounds), then the next share of the rest */
        ixset_t *rs = &ns->gossip.rumor_set;
        for (int j = 0, i = 0; rs->ok ? j < rs->n : i < n; ) {
            if (k >= cap) break;
            int at = rs->ok ? rs->ix[j] : i++;
            peer_t *p = &ns->peers.p[at];
            if (p->info.id == ns->id || p->health == PEER_GONE || p->rumor <= 0) { j++; continue; }
            p->rumor--;
            s_table_entry(ns, p, now, &recs[k], &blobs[k]);
            k++;
            if (rs->ok && p->rumor == 0) ixset_del_at(rs, j);
            else j++;
        }
        for (int j = 0; j < n && k < cap; j++) {
            peer_t *p = &ns->peers.p[(ns->gossip.at + j) % n];
            if (p->info.id == ns->id || p->health == PEER_GONE || p->rumor > 0) continue;
            s_table_entry(ns, p, now, &recs[k], &blobs[k]);
            k++;
            ns->gossip.at = (ns->gossip.at + j + 1) % n;
        }
    }
    proto_put_table(w, recs, blobs, k);
    free(recs);
    free(blobs);
}

/* What a third party says of a peer's freshness: heard from seen_ms ago.
 * Recent word brings a peer taken for gone back (a partition healed there),
 * unless it answers our pings nothing (ns_ignores_us). */
static int s_fresh(netside_t *ns, peer_t *p, uint64_t seen_ms)
{
    double now = ns_now(ns), at = now - (double)seen_ms * 1e-3;
    if (at <= p->last_heard || p->banned_until > now) return 0;
    p->last_heard = at;
    if (p->health == PEER_GONE && now - at < GONE_MIN_S && !ns_ignores_us(p, now, ns_slow_after(p, now, ns->health.live)))
        ns_revive(ns, p, "heard of again");
    return 1;
}

/* 1 when blob is a valid announcement (into *a): checked once, then found
 * in the verified cache; 0 when there is none (len 0) or it says another
 * thing than rec; -1 when its signature does not check (a node passes on
 * only announcements it checked: the sender's doing). */
static int s_announce_ok(netside_t *ns, announce_t *a, const uint8_t *blob, size_t len, const peer_info_t *rec)
{
    char err[160];
    if (len != ANNOUNCE_LEN || announce_decode(a, blob, len, err, sizeof err) != 0)
        return 0;   /* not a form this node reads (a newer node's?): passed over, as before */
    if (vcache_has(ns->gossip.vcache, blob, len)) return announce_matches(a, rec);
    if (announce_verify(a, blob, len, err, sizeof err) != 0) return -1;
    vcache_add(ns->gossip.vcache, blob, len);
    return announce_matches(a, rec);
}

/* 1 when sender's gossip may introduce one more new peer now (taken from its learn bucket). */
static int s_may_learn(netside_t *ns, uint64_t sender)
{
    peer_t *p = peers_find(&ns->peers, sender);
    if (p && p->learn.last == 0) p->learn = bucket_full(ns_now(ns));   /* a record's bucket starts full */
    return p && bucket_take(&p->learn, ns_now(ns), GOSSIP_LEARN_PER_S, GOSSIP_LEARN_BURST, 1);
}

/* Takes a's address, stage and flags for p (a, in blob, is p's valid
 * announcement, as new as the one held or newer). */
static void s_take_announce(netside_t *ns, peer_t *p, const announce_t *a, const uint8_t *blob)
{
    int moved = strcmp(p->info.addr, a->addr) != 0;
    if (moved) ns_moved(ns, p);
    if (moved || p->info.stage != a->stage) { ns->view_dirty = 1; ns_rumor(ns, p); }
    memcpy(p->info.addr, a->addr, sizeof p->info.addr);
    p->info.stage = a->stage;
    peers_touch(&ns->peers, p);
    ns_set_outward(ns, p, (a->flags & PEER_FLAG_OUTWARD) != 0);
    if (p->relays != ((a->flags & PEER_FLAG_RELAY) != 0)) ns->view_dirty = 1;
    p->relays = (a->flags & PEER_FLAG_RELAY) != 0;
    peers_set_announce(p, blob, a->seq);
}

/* Takes record rec (with its announcement blob of len bytes) of a table
 * sent by `sender` (ns_take_table).  0, or -2 when the announcement's
 * signature does not check; *refused counts new peers over the sender's
 * learn bucket. */
static int s_take_record(netside_t *ns, const peer_info_t *rec, const uint8_t *blob, size_t len, uint64_t sender,
                         const uint8_t sender_pub[32], const char *why, int gossip, int *refused)
{
    if (rec->id == ns->id) return 0;
    peer_t *p = peers_find(&ns->peers, rec->id);
    announce_t a;
    int valid = 0;
    if (len == ANNOUNCE_LEN && p && p->announce_seq && announce_seq_of(blob) <= p->announce_seq)
        valid = 0;  /* not newer than the one we hold (seqs only grow): nothing new, no signature to check */
    else if ((valid = s_announce_ok(ns, &a, blob, len, rec)) < 0)
        return -2;
    if (rec->id == sender) {
        if (memcmp(rec->pubkey, sender_pub, 32) != 0) return 0;
        ns_add_peer(ns, rec, ns_now(ns), why);
    } else if (!p && !valid) {
        return 0;   /* a third party's word alone is not enough */
    } else if (!p && gossip && !s_may_learn(ns, sender)) {
        (*refused)++;
        return 0;
    } else if (!p) {
        /* as fresh as the sender's word of it, not as this moment: a peer that died a while ago
         * would otherwise look alive here for a whole silence allowance, and draw work */
        ns_add_peer(ns, rec, ns_now(ns) - (double)rec->seen_ms * 1e-3, why);
    }
    peer_t *q = peers_find(&ns->peers, rec->id);
    if (q && valid && a.seq >= q->announce_seq) s_take_announce(ns, q, &a, blob);
    if (p && rec->id != sender && s_fresh(ns, q, rec->seen_ms)) {
        /* (after its announcement: word of a peer at a new address is word of the new one) the sender
         * heard from it more lately than we did: its rate and version are newer hints */
        if (q->info.rate != rec->rate) ns->view_dirty = 1;
        q->info.rate = rec->rate;
        q->info.version = rec->version;
        peers_touch(&ns->peers, q);
    }
    return 0;
}

/* Takes the records of a table sent by `sender`: its own record on its word
 * (the link authenticated it), anyone else's only with that peer's valid
 * signed announcement, newer than the one held, vouching for the record's
 * address and stage; new peers in gossip (why "gossip") within the
 * sender's learn bucket.  Returns -1 when the announcement part (at r) is
 * malformed (nothing taken), -2 at the first announcement whose signature
 * does not check (what came before it stays taken). */
int ns_take_table(netside_t *ns, rbuf_t *r, const peer_info_t *recs, int k, uint64_t sender,
                  const uint8_t sender_pub[32], const char *why)
{
    int gossip = strcmp(why, "gossip") == 0, refused = 0, rc = 0;
    const uint8_t **blobs = malloc(sizeof *blobs * (size_t)(k + 1));
    size_t *lens = malloc(sizeof *lens * (size_t)(k + 1));
    if (!blobs || !lens || proto_get_announces(r, k, blobs, lens) < 0) rc = -1;
    for (int i = 0; rc == 0 && i < k; i++)
        rc = s_take_record(ns, &recs[i], blobs[i], lens[i], sender, sender_pub, why, gossip, &refused);
    free(blobs);
    free(lens);
    if (rc < 0) return rc;
    if (refused) ns_count_drop(ns, "gossip of more new peers than a member may introduce (the rest not taken)", sender);
    return 0;
}

/* PEERS: a share of the table, this node's progress and whether it ended,
 * (last stage) the progress of the last-stage peers it knows, and the run's
 * progress as it counts it. */
void ns_send_table(netside_t *ns, uint64_t peer, int limit)
{
    wbuf_t w;
    wbuf_init(&w, TABLE_MAX_BYTES);
    if (limit > 0)   /* a share of the table, its announcements, the last stage's progress: about this much */
        wbuf_reserve(&w, (size_t)(limit + 1) * (sizeof(peer_info_t) + ANNOUNCE_LEN + 4) + PROTO_PROGRESS_MAX * 16 + 72);
    ns_put_table(ns, &w, limit);
    proto_peers_tail_t *t = &ns->gossip.tail;
    t->completed = ns->me.completed;
    t->loss = (float)ns->me.loss;
    t->done = ns->me.done == 1 && ns->me.status == 0;  /* completed, not interrupted */
    t->np = 0;
    for (int i = 0; ns->me.stage == ns->nstages - 1 && i < ns->peers.n && t->np < PROTO_PROGRESS_MAX; i++) {
        const peer_t *p = &ns->peers.p[i];
        if (p->info.id == ns->id || p->info.stage != ns->nstages - 1 || !p->completed) continue;
        t->id[t->np] = p->info.id;
        t->done_by[t->np++] = p->completed;
    }
    /* the run's progress as this node counts it (read from the last stage: a data stage trains on while it is short) */
    t->said = 1;
    t->progress = peers_completed(&ns->peers) + ns->me.completed;
    proto_put_peers_tail(&w, t);
    if (!wbuf_error(&w)) {
        wire_hdr_t h;
        ns_hdr(ns, &h, WIRE_PEERS);
        const void *f[1] = { w.data };
        size_t l[1] = { w.len };
        ns_send(ns, peer, &h, f, l, 1, 0, 0);
    }
    wbuf_free(&w);
}

/* A full table's record that a new peer may take: the peer silent longest,
 * taken for gone and silent for more than GONE_FORGET_S (its link closed,
 * pinged no more, not banned) and held by no index list (rumor, recent).
 * -1 when none: the new peer stays unknown.  Peers alive or lately heard
 * from keep their records. */
static int s_forgettable(netside_t *ns)
{
    double now = ns_now(ns);
    int best = -1;
    for (int i = 0; i < ns->peers.n; i++) {
        const peer_t *p = &ns->peers.p[i];
        if (p->info.id == ns->id || p->health != PEER_GONE || p->link >= 0 || now - p->last_heard <= GONE_FORGET_S
            || p->banned_until > now || p->rumor > 0 || p->recent)
            continue;
        if (best < 0 || p->last_heard < ns->peers.p[best].last_heard) best = i;
    }
    return best;
}

/* A new peer in a full table takes the place of a forgettable one: its
 * index, or -1 when there is none. */
static int s_replace_peer(netside_t *ns, const peer_info_t *info, double heard)
{
    int i = s_forgettable(ns);
    if (i < 0) {
        if (!ns->gossip.full_noted) {
            ns->gossip.full_noted = 1;
            metrics_event(ns->c.metrics, "warning", "\"what\":\"peer_table_full\",\"why\":%s",
                          "the peer table is full and none of its peers is gone and silent for 10 minutes: new peers stay unknown");
        }
        return -1;
    }
    peer_t *old = &ns->peers.p[i];
    ns_set_outward(ns, old, 0);   /* (the count of outward-only records follows) */
    for (int k = 0; k < PARTNERS_MAX; k++)   /* (a partner silent this long is dropped at the next ping round anyway) */
        if (ns->health.partner[k] == old->info.id) ns->health.partner[k] = 0;
    return peers_replace(&ns->peers, i, info, heard) == 0 ? i : -1;
}

/* Learns or updates a peer; a new one was last heard from at clock time heard. */
void ns_add_peer(netside_t *ns, const peer_info_t *info, double heard, const char *why)
{
    if (info->id == ns->id) return;
    peer_t *was = peers_find(&ns->peers, info->id);
    if (was && (was->info.stage != info->stage || strcmp(was->info.addr, info->addr) != 0)) {
        /* back at another address (a restart with its keys) or at another stage: its peers hear of it */
        if (strcmp(was->info.addr, info->addr) != 0) ns_moved(ns, was);
        ns_rumor(ns, was);
    }
    int r = peers_upsert(&ns->peers, info, heard);
    int ix = ns->peers.n - 1;   /* where a new record is: the last, */
    if (r < 0 && ns->peers.n == PEERS_CAP && (ix = s_replace_peer(ns, info, heard)) >= 0) r = 1;   /* or a forgotten one's */
    ns->view_dirty = 1;
    if (r == 1) {
        ns_live_change(ns, ix, 1);   /* a new record is alive */
        peer_t *p = &ns->peers.p[ix];
        ns_rumor(ns, p);
        char s[9];
        node_id_short(info->id, s);
        metrics_event(ns->c.metrics, "peer", "\"peer\":%s,\"what\":\"joined\",\"why\":%s,\"peer_stage\":%d,\"addr\":%s",
                      s, why, info->stage, info->addr);
    }
}

/* The rest of a PEERS after its k records (r at them) is whole: k
 * announcements, the sender's progress and end, the progress records.
 * Checked before any of it is taken (a PEERS cut short was counted as
 * malformed after its table had been taken). */
static int s_peers_rest_ok(netside_t *ns, const rbuf_t *at, int k)
{
    rbuf_t r = *at;
    return proto_get_announces(&r, k, NULL, NULL) == 0 && proto_get_peers_tail(&r, &ns->gossip.tail) == 0;
}

void ns_on_peers(netside_t *ns, const transport_msg_t *m)
{
    if (m->nframes < 1) { ns_drop(ns, "PEERS without body", m->sender); return; }
    rbuf_t r;
    rbuf_init(&r, m->frame[0], m->len[0]);
    int max;
    peer_info_t *recs = ns_recs_for(m->frame[0], m->len[0], &max);
    int k = 0;
    char err[200];
    int bad = !recs || peers_decode(&r, recs, max, &k, err, sizeof err) < 0 || !s_peers_rest_ok(ns, &r, k) ? -1
              : ns_take_table(ns, &r, recs, k, m->sender, m->sender_pub, "gossip");
    free(recs);
    if (bad < 0) { ns_drop(ns, bad == -2 ? "PEERS with a forged announcement" : "malformed PEERS", m->sender); return; }
    const proto_peers_tail_t *t = &ns->gossip.tail;
    if (proto_get_peers_tail(&r, &ns->gossip.tail) < 0) { ns_drop(ns, "malformed PEERS", m->sender); return; }
    uint64_t completed = t->completed;
    float loss = t->loss;
    int done = t->done;
    /* the run's progress and its end are the last stage's to tell: its own, and what it knows of its stage's other peers */
    peer_t *p = peers_find(&ns->peers, m->sender);
    if (p && done) p->done_seen = 1;
    int last = p && p->info.stage == ns->nstages - 1;
    for (uint32_t i = 0; i < t->np; i++) {
        uint64_t id = t->id[i], c = t->done_by[i];
        peer_t *q = last && id != ns->id ? peers_find(&ns->peers, id) : NULL;
        if (q && q->info.stage == ns->nstages - 1 && c > q->completed) { q->completed = c; ns->view_dirty = 1; peers_touch(&ns->peers, q); }
    }
    int said = t->said;
    uint64_t progress = t->progress;
    if (!last) return;
    if (completed > p->completed) { p->completed = completed; ns->view_dirty = 1; }
    if (progress != p->progress || said != p->progress_said) {
        p->progress = progress;
        p->progress_said = said;
        ns->view_dirty = 1;
    }
    if (isfinite(loss)) p->last_loss = loss;
    peers_touch(&ns->peers, p);
    if (done) ns_stop_compute(ns);
}

/* Gossip, bounded: a share of the table to a few random live peers (a
 * last-stage node also to one of its stage, whose progress it carries). */
static void s_gossip_round_list(netside_t *ns)
{
    uint64_t *ids = malloc(sizeof(uint64_t) * (size_t)(ns->peers.n + 1));
    int k = ids ? ns_live_ids(ns, ids) : 0;
    int fan = k < GOSSIP_FANOUT ? k : GOSSIP_FANOUT;
    for (int i = 0; i < fan; i++) {
        /* a partial Fisher-Yates shuffle: fan distinct targets */
        ns->gossip.rng = ns->gossip.rng * 6364136223846793005ULL + 1442695040888963407ULL;
        int j = i + (int)((ns->gossip.rng >> 33) % (uint64_t)(k - i));
        uint64_t t = ids[i]; ids[i] = ids[j]; ids[j] = t;
        ns_send_table(ns, ids[i], GOSSIP_RECORDS);
    }
    if (ns->me.stage == ns->nstages - 1) {
        int m = 0;
        for (int i = fan; i < k; i++) {
            peer_t *p = peers_find(&ns->peers, ids[i]);
            if (p && p->info.stage == ns->nstages - 1) ids[m++] = ids[i];
        }
        if (m) {
            ns->gossip.rng = ns->gossip.rng * 6364136223846793005ULL + 1442695040888963407ULL;
            ns_send_table(ns, ids[(ns->gossip.rng >> 33) % (uint64_t)m], GOSSIP_RECORDS);
        }
    }
    free(ids);
}

/* The live list as a partial shuffle left it: the record index at pos,
 * or the one a swap (the latest of sw) put there. */
typedef struct { int pos, ix; } swap_t;

static int s_shuffled(const netside_t *ns, const swap_t *sw, int nsw, int pos)
{
    for (int i = nsw - 1; i >= 0; i--)
        if (sw[i].pos == pos) return sw[i].ix;
    return ns->health.live_set.ix[pos];
}

/* Gossip, bounded: a share of the table to a few random live peers (a
 * last-stage node also to one of its stage, whose progress it carries).
 * The targets are those of a partial Fisher-Yates shuffle of the live
 * peers in table order (s_gossip_round_list, which it replaces), drawn on
 * the live list without copying it: only the swapped places are kept. */
void ns_gossip_round(netside_t *ns)
{
    if (!ns->health.live_set.ok) { s_gossip_round_list(ns); return; }
    int k = ns->health.nlive, fan = k < GOSSIP_FANOUT ? k : GOSSIP_FANOUT, nsw = 0;
    swap_t sw[2 * GOSSIP_FANOUT];
    uint64_t to[GOSSIP_FANOUT];
    for (int i = 0; i < fan; i++) {
        ns->gossip.rng = ns->gossip.rng * 6364136223846793005ULL + 1442695040888963407ULL;
        int j = i + (int)((ns->gossip.rng >> 33) % (uint64_t)(k - i));
        int a = s_shuffled(ns, sw, nsw, i), b = s_shuffled(ns, sw, nsw, j);
        sw[nsw++] = (swap_t){ i, b };
        sw[nsw++] = (swap_t){ j, a };
        to[i] = ns->peers.p[b].info.id;
    }
    int last = ns->nstages - 1, m = 0, pick = -1;
    for (int pass = 0; ns->me.stage == last && pass < 2; pass++) {
        /* the last stage's peers among the rest, in shuffled order: count them, then take the drawn one */
        if (pass && m) {
            ns->gossip.rng = ns->gossip.rng * 6364136223846793005ULL + 1442695040888963407ULL;
            pick = (int)((ns->gossip.rng >> 33) % (uint64_t)m);
        }
        if (pass && pick < 0) break;
        int c = 0;
        for (int i = fan; i < k; i++) {
            int ix = s_shuffled(ns, sw, nsw, i);
            if (ns->peers.p[ix].info.stage != last) continue;
            if (pass && c == pick) { pick = ix; break; }
            c++;
        }
        if (!pass) m = c;
    }
    for (int i = 0; i < fan; i++) ns_send_table(ns, to[i], GOSSIP_RECORDS);
    if (pick >= 0) ns_send_table(ns, ns->peers.p[pick].info.id, GOSSIP_RECORDS);
}
