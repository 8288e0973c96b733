/* peers.c: the swarm table (peers.h). */
#include "node/runtime/peers.h"
#include "node/engine/model.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

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
    return s_grow(t);
}

void peers_fini(peers_t *t)
{
    free(t->p);
    idmap_fini(&t->index);
    memset(t, 0, sizeof *t);
}

peer_t *peers_find(peers_t *t, uint64_t id)
{
    int i = idmap_get(&t->index, id);
    return i >= 0 ? &t->p[i] : NULL;
}

int peers_upsert(peers_t *t, const peer_info_t *info, double now)
{
    peer_t *p = peers_find(t, info->id);
    if (!p) {
        if (s_grow(t) < 0 || idmap_put(&t->index, info->id, t->n) < 0) return -1;
        p = &t->p[t->n];
        memset(p, 0, sizeof *p);
        p->info = *info;
        p->link = -1;
        p->last_heard = now;
        p->last_loss = NAN;
        t->n++;
        return 1;
    }
    if (info->id != t->self) {
        /* the address, stage, rate and version come from the record; our own measurements stay */
        memcpy(p->info.addr, info->addr, sizeof p->info.addr);
        p->info.stage = info->stage;
        p->info.rate = info->rate;
        p->info.version = info->version;
    }
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

int peers_pick_stage(const peers_t *t, int nstages)
{
    int count[MODEL_STAGES_MAX];
    double rate[MODEL_STAGES_MAX] = {0};
    if (nstages > MODEL_STAGES_MAX) nstages = MODEL_STAGES_MAX;
    peers_stage_counts(t, nstages, count);
    for (int i = 0; i < t->n; i++) {
        const peer_t *p = &t->p[i];
        if (p->health != PEER_GONE && p->info.stage >= 0 && p->info.stage < nstages) rate[p->info.stage] += p->info.rate;
    }
    int best = 0;
    for (int s = 1; s < nstages; s++)
        if (count[s] < count[best] || (count[s] == count[best] && rate[s] < rate[best])) best = s;
    return best;
}

uint64_t peers_completed(const peers_t *t)
{
    uint64_t s = 0;
    for (int i = 0; i < t->n; i++) s += t->p[i].completed;
    return s;
}

peer_view_t *peers_view(const peers_t *t)
{
    peer_view_t *v = peer_view_new(t->n);
    if (!v) return NULL;
    int k = 0;
    for (int i = 0; i < t->n; i++) {
        const peer_t *p = &t->p[i];
        if (p->info.id == t->self) continue;
        v->completed += p->completed;
        view_peer_t *q = &v->p[k++];
        q->id = p->info.id;
        q->stage = p->info.stage;
        q->health = p->health;
        q->rate = p->info.rate;
        q->rtt_ms = (float)p->rtt_ms;
        q->rtt_dev_ms = (float)p->rtt_dev_ms;
        q->rtt_min_ms = (float)p->rtt_min_ms;
        q->version = p->info.version;
        q->completed = p->completed;
        q->loss = (float)p->last_loss;
        q->reach = p->link >= 0 ? 0 : p->outward && p->via ? 1 : p->outward ? -1 : 0;
    }
    v->n = k;
    return v;
}
