/* test_router: which peer of the next stage gets a microbatch
 * (node/runtime/router.h): turnaround, RTT, health and reach priced, new and
 * forgotten peers explored, routes pruned with the table. */
#include "tests/check.h"
#include "node/runtime/peers.h"
#include "node/runtime/router.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

/* Sets a peer's RTT and health in a view. */
static void s_view_set(peer_view_t *v, uint64_t id, double rtt_ms, int health)
{
    for (int i = 0; i < v->n; i++)
        if (v->p[i].id == id) { v->p[i].rtt_ms = (float)rtt_ms; v->p[i].health = health; }
}

/* Sets what the router knows of a peer. */
static void s_route_set(router_t *rt, uint64_t id, int outstanding, double turnaround)
{
    route_t *r = router_get(rt, id, 1);
    if (r) { r->outstanding = outstanding; r->turnaround = turnaround; }
}

/* router_pick over the view's peers of one stage */
static uint64_t s_pick(router_t *rt, const peer_view_t *v, int stage, uint64_t avoid)
{
    int ix[8], n = 0;
    for (int i = 0; i < v->n; i++)
        if (v->p[i].stage == stage) ix[n++] = i;
    return router_pick(rt, v, ix, n, avoid);
}

static void test_router_pick(void)
{
    peer_view_t *v = peer_view_new(3);
    v->p[0] = (view_peer_t){ .id = 2, .stage = 1 };
    v->p[1] = (view_peer_t){ .id = 3, .stage = 1 };
    v->p[2] = (view_peer_t){ .id = 4, .stage = 2 };
    router_t rt;
    router_init(&rt);
    CHECK(s_pick(&rt, v, 3, 0) == 0);  /* nobody serves stage 3 */
    /* outstanding counts with +1: 2 costs (0+1)*0.1 = 0.1, 3 costs (1+1)*0.06 = 0.12 */
    s_route_set(&rt, 2, 0, 0.10);
    s_route_set(&rt, 3, 1, 0.06);
    CHECK(s_pick(&rt, v, 1, 0) == 2);
    /* 3 idle: 0.06 < 0.1 */
    router_returned(&rt, 3, 0, 0);
    CHECK(router_get(&rt, 3, 0)->outstanding == 0);
    CHECK(s_pick(&rt, v, 1, 0) == 3);
    /* the RTT (ms) adds: 2 costs 0.1 + 0.02 = 0.12, 3 costs 0.06 + 0.1 = 0.16 */
    s_view_set(v, 2, 20.0, PEER_ALIVE);
    s_view_set(v, 3, 100.0, PEER_ALIVE);
    CHECK(s_pick(&rt, v, 1, 0) == 2);
    /* a 0.2 s turnaround with 0 RTT beats 0.1 s with 150 ms */
    s_view_set(v, 2, 150.0, PEER_ALIVE);
    s_view_set(v, 3, 0.0, PEER_ALIVE);
    s_route_set(&rt, 3, 0, 0.20);
    CHECK(s_pick(&rt, v, 1, 0) == 3);
    /* sending makes a peer busier; a measured turnaround moves the mean 20% of the way */
    router_sent(&rt, 3);
    router_sent(&rt, 3);
    CHECK(router_get(&rt, 3, 0)->outstanding == 2);
    CHECK(s_pick(&rt, v, 1, 0) == 2);   /* 3: 3 x 0.2 = 0.6 > 0.1 + 0.15 */
    router_returned(&rt, 3, 0.7, 0);
    CHECK(fabs(router_get(&rt, 3, 0)->turnaround - 0.3) < 1e-12);
    /* avoid */
    CHECK(s_pick(&rt, v, 1, 2) == 3);
    /* a slow peer costs 4x + 1 s */
    s_route_set(&rt, 3, 0, 0.01);
    s_view_set(v, 3, 0.0, PEER_SLOW);
    CHECK(s_pick(&rt, v, 1, 0) == 2);
    /* gone peers are skipped */
    s_view_set(v, 3, 0.0, PEER_GONE);
    CHECK(s_pick(&rt, v, 1, 0) == 2);
    CHECK(s_pick(&rt, v, 1, 2) == 0);
    s_view_set(v, 2, 0.0, PEER_GONE);
    CHECK(s_pick(&rt, v, 1, 0) == 0);
    CHECK(s_pick(&rt, v, 2, 0) == 4);
    router_fini(&rt);
    free(v);
}

/* Routes of peers a snapshot no longer holds are forgotten, unless they
 * hold our microbatches; the others keep what was measured. */
static void test_router_prune(void)
{
    router_t rt;
    router_init(&rt);
    for (uint64_t id = 1; id <= 200; id++) s_route_set(&rt, id, 0, 0.01 * (double)id);
    router_get(&rt, 150, 0)->outstanding = 2;   /* forgotten by the table, still holding work */
    peer_view_t *v = peer_view_new(3);
    v->p[0] = (view_peer_t){ .id = 7, .stage = 1 };
    v->p[1] = (view_peer_t){ .id = 199, .stage = 1 };
    v->p[2] = (view_peer_t){ .id = 500, .stage = 2 };
    router_prune(&rt, v);
    CHECKF(rt.n == 3, "%d routes left, want 3 (7, 150, 199)", rt.n);
    const route_t *a = router_get(&rt, 7, 0), *b = router_get(&rt, 150, 0), *c = router_get(&rt, 199, 0);
    CHECK(a && b && c && fabs(a->turnaround - 0.07) < 1e-12 && b->outstanding == 2 && fabs(c->turnaround - 1.99) < 1e-12);
    CHECK(router_get(&rt, 8, 0) == NULL && router_get(&rt, 500, 0) == NULL);
    CHECK(router_get(&rt, 8, 1) != NULL && rt.n == 4);   /* a forgotten peer starts anew */
    router_fini(&rt);
    free(v);
}

/* router_pick_lowest: the live peer of the lowest id that has a link, not `avoid`. */
static void test_router_pick_lowest(void)
{
    peer_view_t *v = peer_view_new(4);
    v->p[0] = (view_peer_t){ .id = 9, .stage = 2 };
    v->p[1] = (view_peer_t){ .id = 3, .stage = 2, .health = PEER_GONE };
    v->p[2] = (view_peer_t){ .id = 5, .stage = 2, .reach = -1 };   /* no link yet */
    v->p[3] = (view_peer_t){ .id = 7, .stage = 2, .health = PEER_SLOW };
    int ix[4] = { 0, 1, 2, 3 };
    CHECK(router_pick_lowest(v, ix, 4, 0) == 7);
    CHECK(router_pick_lowest(v, ix, 4, 7) == 9);
    CHECK(router_pick_lowest(v, ix, 1, 0) == 9);
    CHECK(router_pick_lowest(v, ix + 1, 2, 0) == 0);
    free(v);
}

/* A new peer is tried while idle; a peer measured slow once is tried again
 * after ROUTER_FORGET_TURNS sends elsewhere per route (two here: a stage of
 * two peers), and its new time replaces the old.  With many routes the
 * horizon stays at ROUTER_FORGET_SENDS. */
static void test_router_explores(void)
{
    peer_view_t *v = peer_view_new(2);
    v->p[0] = (view_peer_t){ .id = 2, .stage = 1, .rtt_ms = 1 };
    v->p[1] = (view_peer_t){ .id = 3, .stage = 1, .rtt_ms = 1 };
    router_t rt;
    router_init(&rt);
    s_route_set(&rt, 2, 0, 0.02);               /* known and fast; 3 never tried */
    CHECK(s_pick(&rt, v, 1, 0) == 3);          /* 3 costs its RTT only */
    router_sent(&rt, 3);
    router_returned(&rt, 3, 0.5, 0);              /* 3 was slow that once */
    int to3 = 0;
    for (int i = 0; i < 2 * ROUTER_FORGET_TURNS + 2; i++) {
        uint64_t p = s_pick(&rt, v, 1, 0);
        router_sent(&rt, p);
        router_returned(&rt, p, p == 3 ? 0.01 : 0.02, 0);
        to3 += p == 3;
    }
    CHECKF(to3 == 1, "the peer measured slow once got %d of %d microbatches", to3, 2 * ROUTER_FORGET_TURNS + 2);
    CHECK(fabs(router_get(&rt, 3, 0)->turnaround - 0.01) < 1e-12);   /* the new time, not blended */
    CHECK(s_pick(&rt, v, 1, 0) == 3);          /* and now it is the fast one */
    router_fini(&rt);
    /* ten routes: forgotten after ROUTER_FORGET_SENDS sends elsewhere, not 10 x ROUTER_FORGET_TURNS */
    router_init(&rt);
    for (uint64_t id = 2; id < 12; id++) s_route_set(&rt, id, 0, 0.02);
    router_sent(&rt, 3);
    router_returned(&rt, 3, 0.5, 0);
    for (int i = 0; i < ROUTER_FORGET_SENDS; i++) router_sent(&rt, 2);
    router_sent(&rt, 3);
    CHECK(!router_get(&rt, 3, 0)->stale);      /* still known */
    router_returned(&rt, 3, 0.5, 0);
    for (int i = 0; i < ROUTER_FORGET_SENDS + 1; i++) router_sent(&rt, 2);
    router_sent(&rt, 3);
    CHECK(router_get(&rt, 3, 0)->stale);       /* forgotten */
    router_fini(&rt);
    free(v);
}

/* A peer not measured yet is priced at about the measured peers' mean
 * turnaround, not as nearly free: it gets its share of the work before its
 * first answer, not all of it (a departed peer not yet known to be gone
 * answers never, and drew every microbatch until found out). */
static void test_router_unknown_priced(void)
{
    peer_view_t *v = peer_view_new(3);
    v->p[0] = (view_peer_t){ .id = 2, .stage = 1, .rtt_ms = 1 };
    v->p[1] = (view_peer_t){ .id = 3, .stage = 1, .rtt_ms = 1 };
    v->p[2] = (view_peer_t){ .id = 4, .stage = 1, .rtt_ms = 1 };
    router_t rt;
    router_init(&rt);
    s_route_set(&rt, 2, 0, 0.5);   /* two measured peers, idle; 3 never tried */
    s_route_set(&rt, 4, 0, 0.5);
    int to3 = 0;
    for (int i = 0; i < 9; i++) {   /* nothing comes back meanwhile */
        uint64_t p = s_pick(&rt, v, 1, 0);
        router_sent(&rt, p);
        to3 += p == 3;
    }
    CHECKF(to3 >= 1 && to3 <= 6, "the unmeasured peer got %d of 9 microbatches", to3);   /* its hoped-for share, not all */
    CHECK(s_pick(&rt, v, 1, 0) != 0);
    router_fini(&rt);
    free(v);
}

/* A time the peer held a microbatch across a silence of its own (a pause)
 * counts only while none is known: a first measure, or once forgotten. */
static void test_router_silent(void)
{
    router_t rt;
    router_init(&rt);
    router_sent(&rt, 3);
    router_returned(&rt, 3, 4.0, 1);           /* none known: even this counts */
    CHECK(fabs(router_get(&rt, 3, 0)->turnaround - 4.0) < 1e-12);
    router_sent(&rt, 3);
    router_returned(&rt, 3, 0.1, 0);
    CHECK(fabs(router_get(&rt, 3, 0)->turnaround - 3.22) < 1e-12);
    router_sent(&rt, 3);
    router_returned(&rt, 3, 4.0, 1);           /* known: the pause is not its speed */
    CHECK(fabs(router_get(&rt, 3, 0)->turnaround - 3.22) < 1e-12);
    CHECK(router_get(&rt, 3, 0)->outstanding == 0);
    for (int i = 0; i < ROUTER_FORGET_SENDS + 1; i++) router_sent(&rt, 2);
    router_sent(&rt, 3);                       /* forgotten: measured anew, but not by a pause */
    router_returned(&rt, 3, 4.0, 1);
    CHECK(router_get(&rt, 3, 0)->stale);
    router_sent(&rt, 3);
    router_returned(&rt, 3, 0.05, 0);          /* the new time, not blended */
    CHECK(fabs(router_get(&rt, 3, 0)->turnaround - 0.05) < 1e-12 && !router_get(&rt, 3, 0)->stale);
    router_fini(&rt);
}

/* Reachability: a peer we have no link to yet (outward-only, asked for
 * one) is never picked; a relayed one costs its extra hop. */
static void test_router_reach(void)
{
    peer_view_t *v = peer_view_new(2);
    v->p[0] = (view_peer_t){ .id = 2, .stage = 1, .rtt_ms = 10 };
    v->p[1] = (view_peer_t){ .id = 3, .stage = 1, .rtt_ms = 10 };
    router_t rt;
    router_init(&rt);
    s_route_set(&rt, 2, 0, 0.10);
    s_route_set(&rt, 3, 0, 0.05);
    CHECK(s_pick(&rt, v, 1, 0) == 3);
    v->p[1].reach = -1;                 /* no link to 3 yet */
    CHECK(s_pick(&rt, v, 1, 0) == 2);
    v->p[0].reach = -1;
    CHECK(s_pick(&rt, v, 1, 0) == 0);   /* the work waits */
    /* equal peers: the direct one wins over the relayed one */
    v->p[0].reach = 0;
    v->p[1].reach = 1;
    s_route_set(&rt, 3, 0, 0.10);
    CHECK(s_pick(&rt, v, 1, 0) == 2);
    /* a relayed peer still wins when it is much faster */
    s_route_set(&rt, 3, 0, 0.02);
    CHECK(s_pick(&rt, v, 1, 0) == 3);
    router_fini(&rt);
    free(v);
}

int main(void)
{
    RUN(test_router_pick);
    RUN(test_router_prune);
    RUN(test_router_pick_lowest);
    RUN(test_router_explores);
    RUN(test_router_unknown_priced);
    RUN(test_router_silent);
    RUN(test_router_reach);
    CHECK_EXIT();
}
