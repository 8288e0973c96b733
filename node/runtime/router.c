/* router.c: routing of microbatches (router.h). */
#include "node/runtime/router.h"
#include "node/runtime/invariant.h"
#include "node/runtime/peers.h"
#include <stdlib.h>
#include <string.h>

void router_init(router_t *rt)
{
    memset(rt, 0, sizeof *rt);
    idmap_init(&rt->ix);
}

void router_fini(router_t *rt)
{
    free(rt->r);
    idmap_fini(&rt->ix);
    memset(rt, 0, sizeof *rt);
}

route_t *router_get(router_t *rt, uint64_t peer, int make)
{
    int i = idmap_get(&rt->ix, peer);
    if (i >= 0) {
        INVARIANT(i < rt->n && rt->r[i].id == peer);
        return &rt->r[i];
    }
    if (!make) return NULL;
    if (rt->n == rt->cap) {
        int cap = rt->cap ? 2 * rt->cap : 16;
        route_t *r = realloc(rt->r, sizeof(route_t) * (size_t)cap);
        if (!r) return NULL;
        rt->r = r;
        rt->cap = cap;
    }
    if (idmap_put(&rt->ix, peer, rt->n) < 0) return NULL;
    route_t *r = &rt->r[rt->n++];
    *r = (route_t){ .id = peer };
    return r;
}

void router_prune(router_t *rt, const peer_view_t *v)
{
    int k = 0;
    for (int i = 0; i < rt->n; i++)
        if (rt->r[i].outstanding > 0 || peer_view_find(v, rt->r[i].id)) rt->r[k++] = rt->r[i];
    if (k == rt->n) return;
    rt->n = k;
    idmap_clear(&rt->ix);
    for (int i = 0; i < k; i++)
        if (idmap_put(&rt->ix, rt->r[i].id, i) < 0) { rt->n = i; break; }   /* out of memory: the rest start anew */
}

#define ROUTER_HOPE 0.5   /* an unmeasured peer is hoped twice as fast as the measured mean: tried early, without drawing all the work */

/* Sends elsewhere after which a route's turnaround is forgotten:
 * ROUTER_FORGET_TURNS per route (peers ever sent to), at most ROUTER_FORGET_SENDS. */
static uint64_t s_forget_after(const router_t *rt)
{
    uint64_t k = (uint64_t)ROUTER_FORGET_TURNS * (uint64_t)rt->n;
    return k < ROUTER_FORGET_SENDS ? k : ROUTER_FORGET_SENDS;
}

/* 1 when route r's turnaround is a measure to go by. */
static int s_known(const router_t *rt, const route_t *r)
{
    return r && r->turnaround > 0 && !r->stale && rt->sends - r->last_sent <= s_forget_after(rt);
}

/* The expected completion time of a microbatch sent to p (route r, NULL:
 * none yet).  A peer without a measured turnaround is expected to turn work
 * around in ROUTER_HOPE x `prior` (the mean of the candidates' measured
 * ones), or, while none is measured, in 0.05 s per microbatch outstanding
 * with it. */
static double s_cost(const router_t *rt, const view_peer_t *p, const route_t *r, double prior)
{
    int out = r ? r->outstanding : 0;
    double turn = s_known(rt, r) ? r->turnaround : ROUTER_HOPE * prior;
    double cost = (turn > 0 ? (out + 1) * turn : out * 0.05) + p->rtt_ms * 1e-3;
    if (p->reach > 0) cost += 0.5 * p->rtt_ms * 1e-3 + 0.002;   /* relayed: its extra hop */
    if (p->health == PEER_SLOW) cost = cost * 4 + 1.0;
    return cost;
}

/* Route i of ix[0..n): from rix (router_index) or, with rix NULL, looked up; NULL none. */
static const route_t *s_route(const router_t *rt, const peer_view_t *v, const int *ix, const int *rix, int i)
{
    int at = rix ? rix[i] : idmap_get(&rt->ix, v->p[ix[i]].id);
    return at >= 0 ? &rt->r[at] : NULL;
}

/* The cheapest of ix[0..n) by s_cost.  A peer not measured yet is priced
 * at the candidates' mean measured turnaround, not as free: priced at
 * nearly nothing, every new peer (and a departed one not yet known to be
 * gone, whose turnaround is never measured) drew the work of all the others
 * until its own came back. */
static uint64_t s_pick(const router_t *rt, const peer_view_t *v, const int *ix, const int *rix, int n, uint64_t avoid)
{
    double sum = 0;
    int known = 0;
    for (int i = 0; v && i < n; i++) {
        const route_t *r = s_route(rt, v, ix, rix, i);
        if (v->p[ix[i]].health != PEER_GONE && s_known(rt, r)) { sum += r->turnaround; known++; }
    }
    double prior = known ? sum / known : 0;
    uint64_t best = 0;
    double best_cost = 0;
    for (int i = 0; v && i < n; i++) {
        const view_peer_t *p = &v->p[ix[i]];
        if (p->id == avoid || p->health == PEER_GONE || p->reach < 0) continue;   /* no way to it yet */
        double cost = s_cost(rt, p, s_route(rt, v, ix, rix, i), prior);
        if (!best || cost < best_cost) { best = p->id; best_cost = cost; }
    }
    return best;
}

uint64_t router_pick(router_t *rt, const peer_view_t *v, const int *ix, int n, uint64_t avoid)
{
    return s_pick(rt, v, ix, NULL, n, avoid);
}

uint64_t router_pick_lowest(const peer_view_t *v, const int *ix, int n, uint64_t avoid)
{
    uint64_t best = 0;
    for (int i = 0; v && i < n; i++) {
        const view_peer_t *p = &v->p[ix[i]];
        if (p->id == avoid || p->health == PEER_GONE || p->reach < 0) continue;
        if (!best || p->id < best) best = p->id;
    }
    return best;
}

void router_index(router_t *rt, const peer_view_t *v, const int *ix, int n, int *rix)
{
    for (int i = 0; i < n; i++) rix[i] = v ? idmap_get(&rt->ix, v->p[ix[i]].id) : -1;
}

uint64_t router_pick_ix(const router_t *rt, const peer_view_t *v, const int *ix, const int *rix, int n, uint64_t avoid)
{
    return s_pick(rt, v, ix, rix, n, avoid);
}

void router_sent(router_t *rt, uint64_t peer)
{
    route_t *r = router_get(rt, peer, 1);
    if (!r) return;
    if (rt->sends - r->last_sent > s_forget_after(rt)) r->stale = 1;   /* measured anew */
    r->outstanding++;
    r->last_sent = ++rt->sends;
}

void router_returned(router_t *rt, uint64_t peer, double turnaround, int silent)
{
    route_t *r = peer ? router_get(rt, peer, 0) : NULL;
    if (!r) return;
    if (r->outstanding > 0) r->outstanding--;
    if (turnaround <= 0 || (silent && r->turnaround > 0)) return;
    if (r->turnaround > 0 && !r->stale) r->turnaround = 0.8 * r->turnaround + 0.2 * turnaround;
    else { r->turnaround = turnaround; r->stale = 0; }
}
