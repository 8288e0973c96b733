/* peers.c: the swarm table (peers.h). */
#include "node/runtime/peers.h"
#include "node/engine/model.h"
#include "node/runtime/invariant.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The mirror entry of record i (self has none; the records after it move up one). */
static int s_mirror_pos(const peers_t *t, int i)
{
    return t->selfix >= 0 && i > t->selfix ? i - 1 : i;
}

/* Makes room for one more mirror entry. */
static int s_grow_mirror(peers_t *t)
{
    if (t->n < t->cap_mirror) return 0;
    int cap = t->cap_mirror ? 2 * t->cap_mirror : 16;
    view_peer_t *m = realloc(t->mirror, sizeof(view_peer_t) * (size_t)cap);
    if (!m) return -1;
    t->mirror = m;
    t->cap_mirror = cap;
    return 0;
}

/* Makes room for one more record. */
static int s_grow(peers_t *t)
{
    if (t->n < t->cap) return 0;
    if (t->cap >= PEERS_CAP) return -1;
    int cap = t->cap ? 2 * t->cap : 16;
    if (cap > PEERS_CAP) cap = PEERS_CAP;
    peer_t *p = realloc(t->p, sizeof(peer_t) * (size_t)cap);
    if (!p) return -1;
    t->p = p;
    t->cap = cap;
    return 0;
}

int peers_init(peers_t *t, uint64_t self)
{
    memset(t, 0, sizeof *t);
    t->self = self;
    t->selfix = -1;
    return s_grow(t);
}

void peers_fini(peers_t *t)
{
    for (int i = 0; i < t->n; i++) free(t->p[i].announce);
    free(t->p);
    free(t->mirror);
    free(t->stale);
    free(t->mirror_ix);
    idmap_fini(&t->index);
    memset(t, 0, sizeof *t);
}

peer_t *peers_find(peers_t *t, uint64_t id)
{
    int i = idmap_get(&t->index, id);
    INVARIANT(i < t->n && (i < 0 || t->p[i].info.id == id));   /* the index follows the records */
    return i >= 0 ? &t->p[i] : NULL;
}

/* Record p as new: info, heard at clock time heard, nothing measured yet. */
static void s_fresh(peer_t *p, const peer_info_t *info, double heard)
{
    memset(p, 0, sizeof *p);
    p->info = *info;
    p->link = -1;
    p->last_heard = heard;
    p->last_loss = NAN;
    p->plan = -1;   /* none said yet */
    codecpick_init(&p->pick);
}

int peers_upsert(peers_t *t, const peer_info_t *info, double heard)
{
    peer_t *p = peers_find(t, info->id);
    if (!p) {
        int self = info->id == t->self;
        if (s_grow(t) < 0 || (!self && s_grow_mirror(t) < 0) || idmap_put(&t->index, info->id, t->n) < 0) return -1;
        p = &t->p[t->n];
        s_fresh(p, info, heard);
        if (self) t->selfix = t->n;
        else memset(&t->mirror[s_mirror_pos(t, t->n)], 0, sizeof(view_peer_t));   /* completed 0: the sum holds */
        t->n++;
        INVARIANT(t->n <= t->cap && t->n <= PEERS_CAP);
        if (!self) peers_touch(t, p);
        return 1;
    }
    if (info->id != t->self) {
        /* the address, stage, rate and version come from the record; our own measurements stay */
        memcpy(p->info.addr, info->addr, sizeof p->info.addr);
        p->info.stage = info->stage;
        p->info.rate = info->rate;
        p->info.version = info->version;
        peers_touch(t, p);
    }
    return 0;
}

int peers_replace(peers_t *t, int i, const peer_info_t *info, double heard)
{
    if (i < 0 || i >= t->n || i == t->selfix || info->id == t->self || peers_find(t, info->id)) return -1;
    peer_t *p = &t->p[i];
    view_peer_t *q = &t->mirror[s_mirror_pos(t, i)];
    /* its microbatches move from the record (and its view entry, if refreshed since) to the retired sum */
    t->retired_completed += p->completed;
    t->mirror_completed -= q->completed;
    q->completed = 0;
    free(p->announce);
    s_fresh(p, info, heard);
    /* the id index is rebuilt without the old id (entries are not removed one by one: as many as before,
     * in the room it has, so no put fails) and so is the view's index over the mirror, which takes the
     * ids at each place for fixed */
    idmap_clear(&t->index);
    for (int k = 0; k < t->n; k++) (void)idmap_put(&t->index, t->p[k].info.id, k);
    free(t->mirror_ix);
    t->mirror_ix = NULL;
    t->mirror_slots = 0;
    t->mirror_ixn = 0;
    p->stale = 0;   /* it may be listed already: listed again, refreshed twice */
    peers_touch(t, p);
    return 0;
}

int peers_set_announce(peer_t *p, const uint8_t *blob, uint64_t seq)
{
    INVARIANT(seq >= p->announce_seq);   /* a peer's announcements only grow newer */
    if (!p->announce && !(p->announce = malloc(ANNOUNCE_LEN))) return -1;
    memcpy(p->announce, blob, ANNOUNCE_LEN);
    p->announce_seq = seq;
    return 0;
}

void peers_stage_counts(const peers_t *t, int nstages, int *count)
{
    memset(count, 0, sizeof(int) * (size_t)nstages);
    for (int i = 0; i < t->n; i++) {
        const peer_t *p = &t->p[i];
        if (p->health != PEER_GONE && p->info.stage >= 0 && p->info.stage < nstages) count[p->info.stage]++;
    }
}

int peers_pick_stage(const peers_t *t, int nstages, uint64_t salt, const double *work)
{
    int count[MODEL_STAGES_MAX];
    if (nstages > MODEL_STAGES_MAX) nstages = MODEL_STAGES_MAX;
    peers_stage_counts(t, nstages, count);
    int even = 1;
    for (int s = 0; s < nstages; s++) {
        if (count[s] == 0) return s;
        even &= count[s] == count[0];
    }
    if (even) return 0;   /* all alike: another data stage, as the first newcomers of a run take */
    /* two stages drawn by the salt (distinct when there are two), the less served of them */
    uint64_t h = (salt + 1) * 0x9e3779b97f4a7c15ULL;
    h ^= h >> 29;
    int a = (int)((h >> 8) % (uint64_t)nstages), b = nstages > 1 ? (a + 1 + (int)((h >> 40) % (uint64_t)(nstages - 1))) % nstages : a;
    double wa = work ? work[a] : 1.0, wb = work ? work[b] : 1.0;   /* count[b] / wb < count[a] / wa, both > 0 */
    double lb = count[b] * wa, la = count[a] * wb;
    return lb < la || (lb == la && b < a) ? b : a;
}

uint64_t peers_completed(const peers_t *t)
{
    uint64_t s = t->retired_completed;
    for (int i = 0; i < t->n; i++) s += t->p[i].completed;
    return s;
}

void peers_touch(peers_t *t, peer_t *p)
{
    if (p->stale || t->all_stale) return;
    if (t->nstale == t->cap_stale) {
        int cap = t->cap_stale ? 2 * t->cap_stale : 64;
        int *l = realloc(t->stale, sizeof(int) * (size_t)cap);
        if (!l) { t->all_stale = 1; return; }
        t->stale = l;
        t->cap_stale = cap;
    }
    p->stale = 1;
    t->stale[t->nstale++] = (int)(p - t->p);
}

/* Record i's view entry from the record as it is now. */
static void s_refresh(peers_t *t, int i)
{
    peer_t *p = &t->p[i];
    p->stale = 0;
    if (i == t->selfix) return;
    view_peer_t *q = &t->mirror[s_mirror_pos(t, i)];
    t->mirror_completed += p->completed - q->completed;
    q->id = p->info.id;
    q->stage = p->info.stage;
    q->health = p->health;
    q->rate = p->info.rate;
    q->rtt_ms = (float)p->rtt_ms;
    q->rtt_dev_ms = (float)p->rtt_dev_ms;
    q->rtt_min_ms = (float)p->rtt_min_ms;
    q->version = p->info.version;
    q->completed = p->completed;
    q->progress = p->progress;
    q->progress_said = p->progress_said;
    q->loss = (float)p->last_loss;
    q->plan = p->plan;
    q->reach = p->link >= 0 ? 0 : p->outward && p->via ? 1 : p->outward ? -1 : 0;
}

peer_view_t *peers_view(peers_t *t)
{
    if (t->all_stale) {
        for (int i = 0; i < t->n; i++) s_refresh(t, i);
        t->all_stale = 0;
    } else {
        for (int k = 0; k < t->nstale; k++) s_refresh(t, t->stale[k]);
    }
    t->nstale = 0;
    int n = t->n - (t->selfix >= 0);
    peer_view_t *v = peer_view_alloc(n);
    if (!v) return NULL;
    if (n > 0) memcpy(v->p, t->mirror, sizeof(view_peer_t) * (size_t)n);
    v->completed = t->mirror_completed + t->retired_completed;
    /* the ids at each place never change (records stay, self has none): the index is grown, then copied */
    if (peer_view_index_grow(&t->mirror_ix, &t->mirror_slots, &t->mirror_ixn, t->mirror, n) == 0)
        peer_view_index_copy(v, t->mirror_ix, t->mirror_slots);
    else
        peer_view_index(v);
    return v;
}
