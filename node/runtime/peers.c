/* peers.c: the swarm table (peers.h). */
#include "node/runtime/peers.h"
#include "node/engine/model.h"
#include <string.h>

void peers_init(peers_t *t, uint64_t self)
{
    memset(t, 0, sizeof *t);
    pthread_mutex_init(&t->lock, NULL);
    t->self = self;
}

void peers_fini(peers_t *t)
{
    pthread_mutex_destroy(&t->lock);
}

int peers_find_locked(peers_t *t, uint64_t id)
{
    for (int i = 0; i < t->n; i++)
        if (t->p[i].info.id == id) return i;
    return -1;
}

int peers_upsert(peers_t *t, const peer_info_t *info, double now)
{
    pthread_mutex_lock(&t->lock);
    int i = peers_find_locked(t, info->id), r = 0;
    if (i < 0) {
        if (t->n == PEERS_CAP) { pthread_mutex_unlock(&t->lock); return -1; }
        i = t->n++;
        memset(&t->p[i], 0, sizeof t->p[i]);
        t->p[i].info = *info;
        t->p[i].link = -1;
        t->p[i].last_heard = now;
        t->p[i].turnaround = 0.0;
        r = 1;
    } else if (info->id != t->self) {
        peer_t *p = &t->p[i];
        /* the address, key and stage come from the record; our own measurements stay */
        memcpy(p->info.addr, info->addr, sizeof p->info.addr);
        p->info.stage = info->stage;
        p->info.rate = info->rate;
        p->info.version = info->version;
    }
    pthread_mutex_unlock(&t->lock);
    return r;
}

void peers_stage_counts(peers_t *t, int nstages, int *count)
{
    memset(count, 0, sizeof(int) * nstages);
    pthread_mutex_lock(&t->lock);
    for (int i = 0; i < t->n; i++) {
        const peer_t *p = &t->p[i];
        if (p->health != PEER_GONE && p->info.stage >= 0 && p->info.stage < nstages)
            count[p->info.stage]++;
    }
    pthread_mutex_unlock(&t->lock);
}

int peers_pick_stage(peers_t *t, int nstages)
{
    int count[MODEL_STAGES_MAX];
    double rate[MODEL_STAGES_MAX] = {0};
    if (nstages > MODEL_STAGES_MAX) nstages = MODEL_STAGES_MAX;
    peers_stage_counts(t, nstages, count);
    pthread_mutex_lock(&t->lock);
    for (int i = 0; i < t->n; i++) {
        const peer_t *p = &t->p[i];
        if (p->health != PEER_GONE && p->info.stage >= 0 && p->info.stage < nstages)
            rate[p->info.stage] += p->info.rate;
    }
    pthread_mutex_unlock(&t->lock);
    int best = 0;
    for (int s = 1; s < nstages; s++)
        if (count[s] < count[best] || (count[s] == count[best] && rate[s] < rate[best]))
            best = s;
    return best;
}

uint64_t peers_route(peers_t *t, int stage, uint64_t avoid, int *link)
{
    pthread_mutex_lock(&t->lock);
    int best = -1;
    double best_cost = 0;
    for (int i = 0; i < t->n; i++) {
        const peer_t *p = &t->p[i];
        if (p->info.id == t->self || p->info.id == avoid || p->info.stage != stage || p->health == PEER_GONE)
            continue;
        double turn = p->turnaround > 0 ? p->turnaround : 0.05;
        double cost = (p->outstanding + 1) * turn + p->rtt_ms * 1e-3;
        if (p->health == PEER_SLOW) cost = cost * 4 + 1.0;
        if (best < 0 || cost < best_cost) { best = i; best_cost = cost; }
    }
    uint64_t id = 0;
    if (best >= 0) {
        id = t->p[best].info.id;
        *link = t->p[best].link;
    }
    pthread_mutex_unlock(&t->lock);
    return id;
}

uint64_t peers_completed(peers_t *t)
{
    pthread_mutex_lock(&t->lock);
    uint64_t s = 0;
    for (int i = 0; i < t->n; i++) s += t->p[i].completed;
    pthread_mutex_unlock(&t->lock);
    return s;
}
