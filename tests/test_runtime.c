/* test_runtime: the stage runtime's building blocks: weight stash, peer
 * table and routing, the thread-safe queue, the option table with the run
 * config codec and run id, stage checkpoints, and the metrics writer. */
#include "tests/check.h"
#include "tests/json_valid.h"
#include "net/wire.h"
#include "node/engine/modelfile.h"
#include "node/runtime/json.h"
#include "node/runtime/metrics.h"
#include "node/runtime/options.h"
#include "node/runtime/proto.h"
#include "node/runtime/pending.h"
#include "node/runtime/peers.h"
#include "node/runtime/router.h"
#include "node/runtime/applied.h"
#include "node/runtime/evalsum.h"
#include "node/runtime/sim.h"
#include "node/runtime/queue.h"
#include "node/runtime/stash.h"
#include "node/runtime/compute.h"
#include "node/engine/staleness.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- stash ------------------------------------------------------------- */

#define SN 1000  /* floats per weight copy */

/* Weights of version v: a pattern no other version shares. */
static void s_fill(float *w, int64_t v)
{
    for (int i = 0; i < SN; i++) w[i] = (float)v * 1000.0f + (float)i * 0.001f + 0.5f;
}

static int s_is_version(const float *w, int64_t v)
{
    float want[SN];
    s_fill(want, v);
    return w && memcmp(w, want, sizeof want) == 0;
}

/* One optimizer update of the live weights: stash, then overwrite in place. */
static int s_update(stash_t *s, float *live, int64_t *live_v)
{
    int rc = stash_before_update(s, *live_v, live);
    (*live_v)++;
    s_fill(live, *live_v);
    return rc;
}

static void test_stash_full_keeps_versions_in_use(void)
{
    stash_t s;
    float live[SN];
    int64_t lv = 0;
    stash_init(&s, SN, 0);
    s_fill(live, 0);
    CHECK(stash_versions(&s, lv) == 1);
    /* microbatches a (v0), b (v1), c and d (v2) start; the stage updates after each */
    stash_ref(&s, 0);
    CHECK(s_update(&s, live, &lv) == 0);
    stash_ref(&s, 1);
    CHECK(s_update(&s, live, &lv) == 0);
    stash_ref(&s, 2);
    stash_ref(&s, 2);
    CHECK(s_update(&s, live, &lv) == 0);
    CHECK(lv == 3);
    CHECK(stash_versions(&s, lv) == 4);
    /* two more updates with nothing in flight at the live version: no copies */
    CHECK(s_update(&s, live, &lv) == 0);
    CHECK(s_update(&s, live, &lv) == 0);
    CHECK(stash_versions(&s, lv) == 4);
    CHECK(s_is_version(live, 5));
    CHECK(s_is_version(stash_params(&s, 0, lv, live), 0));
    CHECK(s_is_version(stash_params(&s, 1, lv, live), 1));
    CHECK(s_is_version(stash_params(&s, 2, lv, live), 2));
    CHECK(stash_params(&s, 5, lv, live) == live);
    CHECK(stash_params(&s, 0, lv, live) != live);
    /* the live version in flight: returns the live pointer, no copy */
    stash_ref(&s, 5);
    CHECK(stash_params(&s, 5, lv, live) == live);
    CHECK(stash_versions(&s, lv) == 4);
    /* backward passes finish: each unref frees its version */
    stash_unref(&s, 1, lv);
    CHECK(stash_versions(&s, lv) == 3);
    CHECK(s_is_version(stash_params(&s, 0, lv, live), 0));
    CHECK(s_is_version(stash_params(&s, 2, lv, live), 2));
    stash_unref(&s, 2, lv);  /* one of two microbatches of v2 */
    CHECK(stash_versions(&s, lv) == 3);
    CHECK(s_is_version(stash_params(&s, 2, lv, live), 2));
    stash_unref(&s, 2, lv);
    CHECK(stash_versions(&s, lv) == 2);
    stash_unref(&s, 0, lv);
    CHECK(stash_versions(&s, lv) == 1);
    stash_unref(&s, 5, lv);
    CHECK(stash_versions(&s, lv) == 1);
    CHECK(s.peak == 4);
    /* the live version's microbatch is gone: the next update copies nothing */
    CHECK(s_update(&s, live, &lv) == 0);
    CHECK(stash_versions(&s, lv) == 1);
    stash_fini(&s);
}

static void test_stash_full_many_rounds(void)
{
    /* a steady pipeline: 3 microbatches in flight, one update per microbatch;
     * every backward must see exactly its forward's weights */
    stash_t s;
    float live[SN];
    int64_t lv = 0;
    int64_t ring[3];
    int head = 0, bad = 0;
    stash_init(&s, SN, 0);
    s_fill(live, 0);
    for (int k = 0; k < 3; k++) { stash_ref(&s, lv); ring[k] = lv; }
    for (int step = 0; step < 40; step++) {
        int64_t v = ring[head];
        if (!s_is_version(stash_params(&s, v, lv, live), v)) bad++;
        stash_unref(&s, v, lv);
        if (s_update(&s, live, &lv) < 0) bad++;
        stash_ref(&s, lv);
        ring[head] = lv;
        head = (head + 1) % 3;
        if (stash_versions(&s, lv) > 4) bad++;
    }
    CHECKF(bad == 0, "%d wrong backward weights or excess versions", bad);
    for (int k = 0; k < 3; k++) stash_unref(&s, ring[k], lv);
    CHECK(stash_versions(&s, lv) == 1);
    stash_fini(&s);
}

static void test_stash_2bw_keeps_two(void)
{
    stash_t s;
    float live[SN];
    int64_t lv = 0;
    stash_init(&s, SN, 1);
    s_fill(live, 0);
    stash_ref(&s, 0);                   /* a at v0 */
    CHECK(s_update(&s, live, &lv) == 0);
    CHECK(stash_versions(&s, lv) == 2);
    CHECK(s_is_version(stash_params(&s, 0, lv, live), 0));
    stash_ref(&s, 1);                   /* b at v1 */
    CHECK(s_update(&s, live, &lv) == 0);
    CHECK(stash_versions(&s, lv) == 2);
    /* a's v0 was dropped: it runs with the oldest kept copy, v1 */
    CHECK(s_is_version(stash_params(&s, 1, lv, live), 1));
    CHECKF(s_is_version(stash_params(&s, 0, lv, live), 1), "v0 microbatch should get the v1 copy, got %s",
           stash_params(&s, 0, lv, live) == live ? "the live weights" : "something else");
    stash_ref(&s, 2);                   /* c at v2 */
    CHECK(s_update(&s, live, &lv) == 0);
    CHECK(stash_versions(&s, lv) == 2);
    CHECK(s_is_version(stash_params(&s, 2, lv, live), 2));
    CHECK(s_is_version(stash_params(&s, 1, lv, live), 2));
    CHECK(s_is_version(stash_params(&s, 0, lv, live), 2));
    CHECK(stash_params(&s, lv, lv, live) == live);
    CHECK(s.peak <= 2);
    stash_unref(&s, 0, lv);
    stash_unref(&s, 1, lv);
    CHECK(stash_versions(&s, lv) == 2);
    CHECK(s_is_version(stash_params(&s, 2, lv, live), 2));
    stash_unref(&s, 2, lv);
    CHECK(stash_versions(&s, lv) == 1);
    stash_fini(&s);
}

static void test_stash_2bw_many_rounds(void)
{
    stash_t s;
    float live[SN];
    int64_t lv = 0, ring[4];
    int head = 0, over = 0, wrong = 0;
    stash_init(&s, SN, 1);
    s_fill(live, 0);
    for (int k = 0; k < 4; k++) { stash_ref(&s, lv); ring[k] = lv; }
    for (int step = 0; step < 30; step++) {
        int64_t v = ring[head];
        const float *w = stash_params(&s, v, lv, live);
        /* the weights of v itself, or of a newer version that is not live */
        int ok = 0;
        for (int64_t u = v; u < lv; u++) ok |= s_is_version(w, u);
        if (v == lv) ok = w == live;
        if (!ok) wrong++;
        stash_unref(&s, v, lv);
        s_update(&s, live, &lv);
        stash_ref(&s, lv);
        ring[head] = lv;
        head = (head + 1) % 4;
        if (stash_versions(&s, lv) > 2) over++;
    }
    CHECKF(over == 0, "%d times more than 2 versions held", over);
    CHECKF(wrong == 0, "%d backward passes got the live or unrelated weights", wrong);
    CHECK(s.peak <= 2);
    for (int k = 0; k < 4; k++) stash_unref(&s, ring[k], lv);
    CHECK(stash_versions(&s, lv) == 1);
    stash_fini(&s);
}

/* ---- peers ------------------------------------------------------------- */

static peer_info_t s_info(uint64_t id, int stage, float rate)
{
    peer_info_t p;
    memset(&p, 0, sizeof p);
    p.id = id;
    snprintf(p.addr, sizeof p.addr, "127.0.0.1:%d", 30000 + (int)(id % 1000));
    p.stage = (int16_t)stage;
    p.rate = rate;
    return p;
}

static void s_health(peers_t *t, uint64_t id, peer_health_t h)
{
    peer_t *p = peers_find(t, id);
    if (p) { p->health = h; peers_touch(t, p); }
}

static void test_peers_upsert(void)
{
    peers_t t;
    CHECK(peers_init(&t, 100) == 0);
    peer_info_t me = s_info(100, 0, 1.0f);
    CHECK(peers_upsert(&t, &me, 1.0) == 1);
    peer_info_t a = s_info(7, 1, 2.0f);
    CHECK(peers_upsert(&t, &a, 1.0) == 1);
    CHECK(t.n == 2);
    /* a known peer: refreshed record, our own measurements kept */
    peer_t *p = peers_find(&t, 7);
    CHECK(p != NULL);
    if (p) { p->rtt_ms = 42.0; p->link = 5; }
    a.stage = 2;
    a.rate = 9.0f;
    snprintf(a.addr, sizeof a.addr, "127.0.0.1:31999");
    CHECK(peers_upsert(&t, &a, 2.0) == 0);
    CHECK(t.n == 2);
    p = peers_find(&t, 7);
    CHECK(p != NULL);
    if (p) {
        CHECK(p->info.stage == 2);
        CHECK(p->info.rate == 9.0f);
        CHECK(strcmp(p->info.addr, "127.0.0.1:31999") == 0);
        CHECK(p->rtt_ms == 42.0);
        CHECK(p->link == 5);
    }
    CHECK(peers_find(&t, 12345) == NULL);
    /* a record about self from someone else is ignored */
    peer_info_t fake = s_info(100, 3, 50.0f);
    CHECK(peers_upsert(&t, &fake, 3.0) == 0);
    p = peers_find(&t, 100);
    CHECK(p && p->info.stage == 0 && p->info.rate == 1.0f);
    /* the table grows (records move) and stays bounded; every record stays findable */
    int full = 0, added = 0;
    for (uint64_t id = 1000; id < 1000 + PEERS_CAP; id++) {
        peer_info_t q = s_info(id, 0, 1.0f);
        int r = peers_upsert(&t, &q, 4.0);
        if (r == 1) added++;
        if (r == -1) full++;
    }
    CHECK(added == PEERS_CAP - 2);
    CHECK(full == 2);
    CHECK(t.n == PEERS_CAP);
    int found = 0;
    for (uint64_t id = 1000; id < 1000 + PEERS_CAP - 2; id++) {
        p = peers_find(&t, id);
        found += p && p->info.id == id;
    }
    CHECK(found == PEERS_CAP - 2);
    p = peers_find(&t, 7);
    CHECK(p && p->rtt_ms == 42.0);
    peers_fini(&t);
}

static void test_peers_pick_stage(void)
{
    peers_t t;
    peers_init(&t, 1);
    CHECK(peers_pick_stage(&t, 3) == 0);   /* empty: the first */
    peer_info_t p;
    p = s_info(10, 0, 5.0f); peers_upsert(&t, &p, 0);
    p = s_info(11, 1, 2.0f); peers_upsert(&t, &p, 0);
    p = s_info(12, 2, 1.0f); peers_upsert(&t, &p, 0);
    p = s_info(13, 2, 1.0f); peers_upsert(&t, &p, 0);
    /* counts 1,1,2: stage 0 and 1 tie on count, stage 1 has the lower rate */
    CHECK(peers_pick_stage(&t, 3) == 1);
    int count[3];
    peers_stage_counts(&t, 3, count);
    CHECK(count[0] == 1 && count[1] == 1 && count[2] == 2);
    /* one more on stage 1: stage 0 is now the least served */
    p = s_info(14, 1, 0.1f); peers_upsert(&t, &p, 0);
    CHECK(peers_pick_stage(&t, 3) == 0);
    /* a stage nobody serves beats everything */
    CHECK(peers_pick_stage(&t, 4) == 3);
    /* gone peers do not count: stage 2 drops to one peer (rate 1) */
    s_health(&t, 12, PEER_GONE);
    CHECK(peers_pick_stage(&t, 3) == 2);
    peers_stage_counts(&t, 3, count);
    CHECK(count[2] == 1);
    /* full tie on count and rate: the lowest index */
    peers_t u;
    peers_init(&u, 1);
    p = s_info(20, 2, 1.0f); peers_upsert(&u, &p, 0);
    p = s_info(21, 1, 1.0f); peers_upsert(&u, &p, 0);
    p = s_info(22, 0, 3.0f); peers_upsert(&u, &p, 0);
    CHECK(peers_pick_stage(&u, 3) == 1);
    p = s_info(22, 0, 1.0f); peers_upsert(&u, &p, 0);
    CHECK(peers_pick_stage(&u, 3) == 0);
    peers_fini(&u);
    peers_fini(&t);
}

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

/* applied: ids remembered exactly for two generations, older ones by their
 * origin's floor (serial order of the 32-bit sequence numbers), which
 * re-issues (R) consult and first attempts (F) do not. */
static void test_applied_floor(void)
{
    enum { F = 0, R = 1 };
    applied_t a;
    applied_init(&a);
    const uint64_t A = (uint64_t)0x123456 << APPLIED_SEQ_BITS, C = (uint64_t)0xabcdef << APPLIED_SEQ_BITS;
    const uint64_t top = (UINT64_C(1) << APPLIED_SEQ_BITS) - 1;
    for (uint64_t i = 0; i < 3 * APPLIED_GEN; i++) CHECK(applied_mark(&a, A | (1000 + 2 * i)) == 0);   /* even seqs */
    int all = 1;
    for (uint64_t i = 0; i < 3 * APPLIED_GEN; i++) all &= applied_has(&a, A | (1000 + 2 * i), R);
    CHECKF(all, "an applied id was forgotten");
    CHECK(applied_has(&a, A | 1001, R));                       /* old, never applied: below the floor, refused */
    CHECK(!applied_has(&a, A | 1001, F));                      /* ... unless a first attempt */
    CHECK(applied_has(&a, A | (1000 + 2 * (3 * APPLIED_GEN - 1)), F));  /* recent: remembered exactly */
    CHECK(!applied_has(&a, A | (1001 + 2 * (3 * APPLIED_GEN - 1)), R));   /* recent, never applied: still in the exact sets' time */
    CHECK(!applied_has(&a, A | (1000 + 2 * 3 * APPLIED_GEN), R));  /* newer than every applied one */
    CHECK(!applied_has(&a, C | 1000, R));                      /* another origin */
    /* an origin whose sequence wraps past 2^32: newer ids after the wrap are new */
    for (uint64_t i = 0; i < 3 * APPLIED_GEN; i++) CHECK(applied_mark(&a, C | ((top - 2 * APPLIED_GEN + i) & top)) == 0);
    CHECK(applied_has(&a, C | (top - 2 * APPLIED_GEN), R));
    CHECK(!applied_has(&a, C | (APPLIED_GEN + 5), R));
    CHECK(applied_has(&a, C | (top - 4 * APPLIED_GEN), R));   /* before the first applied: refused (below the floor) */
    /* the same node started again draws another origin: none of its ids is below a floor */
    const uint64_t A2 = (uint64_t)0x123457 << APPLIED_SEQ_BITS;
    CHECK(!applied_has(&a, A2 | 1, R) && !applied_has(&a, A2 | 1000, R));
    /* one forged id of A2 far ahead of its sequence, forgotten after a few
     * thousand others: A2's next first attempts still count as new */
    CHECK(applied_mark(&a, A2 | (1000 + (UINT64_C(1) << 30))) == 0);
    for (uint64_t i = 0; i < 2 * APPLIED_GEN + 2; i++) CHECK(applied_mark(&a, C | (APPLIED_GEN + 100 + i)) == 0);
    CHECK(!applied_has(&a, A2 | (1000 + (UINT64_C(1) << 30)), F));   /* forgotten exactly */
    CHECK(applied_has(&a, A2 | 1001, R));                      /* the floor it raised turns away re-issues */
    all = 1;
    for (uint64_t i = 0; i < 1000; i++) all &= !applied_has(&a, A2 | (1001 + i), F);
    CHECKF(all, "a forged id far ahead silenced its origin's first attempts");
    applied_clear(&a);
    CHECK(!applied_has(&a, A | 1000, R) && !applied_has(&a, A | 1001, R));
    applied_fini(&a);
}

/* evalsum: rounds summed apart, reported whole or pushed out partial. */
static void test_evalsum(void)
{
    evalsum_t s;
    evalsum_init(&s);
    evalsum_round_t out[2];
    /* two rounds interleaved, and a second round of version 10 (another data-stage node's) */
    CHECK(evalsum_add(&s, 10, 0, 3, 0, 1.0, 0, 1.0, out) == 0);
    CHECK(evalsum_add(&s, 20, 0, 3, 0, 5.0, 0, 1.1, out) == 0);
    CHECK(evalsum_add(&s, 10, 0, 3, 0, 2.0, 0, 1.2, out) == 0);   /* index 0 again: another round */
    CHECK(evalsum_add(&s, 10, 0, 3, 1, 1.0, 0, 1.3, out) == 0);
    CHECK(evalsum_add(&s, 20, 0, 3, 1, 5.0, 0, 1.4, out) == 0);
    int k = evalsum_add(&s, 10, 0, 3, 2, 1.0, 2, 1.5, out);
    CHECKF(k == 1 && out[0].round == 10 && out[0].n == 3 && out[0].loss == 3.0 && out[0].correct == 2 && !out[0].seen,
           "k %d round %u n %d loss %g", k, out[0].round, out[0].n, out[0].loss);
    CHECK(evalsum_add(&s, 10, 0, 3, 1, 2.0, 0, 1.6, out) == 0);
    k = evalsum_add(&s, 10, 0, 3, 2, 2.0, 0, 1.7, out);
    CHECKF(k == 1 && out[0].loss == 6.0 && out[0].first_t == 1.2, "k %d loss %g", k, out[0].loss);
    CHECK(evalsum_final(&s) == NULL);
    /* the final round, the same version as an ordinary one: apart */
    CHECK(evalsum_add(&s, 20, 1, 2, 0, 4.0, 0, 2.0, out) == 0);
    const evalsum_round_t *f = evalsum_final(&s);
    CHECK(f && f->round == 20 && f->final && f->n == 1 && f->first_t == 2.0);
    /* a fourth and a fifth round: the one heard from least recently (20, at 1.4) is pushed out, partial */
    CHECK(evalsum_add(&s, 30, 0, 2, 0, 1.0, 0, 2.1, out) == 0);
    CHECK(evalsum_add(&s, 40, 0, 2, 1, 1.0, 0, 2.2, out) == 0);
    k = evalsum_add(&s, 50, 0, 1, 0, 7.0, 0, 2.3, out);
    CHECKF(k == 2 && out[0].round == 20 && !out[0].final && out[0].n == 2 && out[1].round == 50 && out[1].n == 1,
           "k %d: %u/%d %u/%d", k, out[0].round, out[0].n, out[1].round, out[1].n);
    /* stale rounds: heard from before 2.15 */
    evalsum_round_t r;
    CHECK(evalsum_stale(&s, 2.15, &r) == 1 && r.round == 20 && r.final);   /* the oldest first: the final (2.0), then 30 (2.1) */
    CHECK(evalsum_stale(&s, 2.15, &r) == 1 && r.round == 30);
    CHECK(evalsum_stale(&s, 2.15, &r) == 0);
    CHECK(evalsum_final(&s) == NULL);
    CHECK(evalsum_add(&s, 60, 1, 2, 0, 1.0, 0, 3.0, out) == 0);
    f = evalsum_final(&s);
    evalsum_take(&s, f, &r);
    CHECK(r.round == 60 && r.n == 1 && evalsum_final(&s) == NULL);
    CHECK(evalsum_add(&s, 70, 0, 2, 2, 1.0, 0, 3.0, out) == -1 && evalsum_add(&s, 70, 0, 0, 0, 1.0, 0, 3.0, out) == -1);
    evalsum_fini(&s);   /* round 40 still held: freed */
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

static void test_peers_completed(void)
{
    peers_t t;
    peers_init(&t, 1);
    CHECK(peers_completed(&t) == 0);
    uint64_t want = 0;
    for (uint64_t id = 1; id <= 5; id++) {
        peer_info_t p = s_info(id, 1, 1.0f);
        peers_upsert(&t, &p, 0);
        peers_find(&t, id)->completed = id * 1000003ull;
        peers_touch(&t, peers_find(&t, id));
        if (id != 1) want += id * 1000003ull;
    }
    s_health(&t, 4, PEER_GONE);  /* the work of a gone peer still counts */
    /* the snapshot for the compute side: self left out, its progress too */
    peer_view_t *v = peers_view(&t);
    CHECK(v && v->n == 4 && v->completed == want);
    CHECK(v && peer_view_find(v, 1) == NULL && peer_view_find(v, 4) && peer_view_find(v, 4)->health == PEER_GONE);
    free(v);
    /* the next snapshot: only touched records are read again; the sum follows a change */
    peers_find(&t, 3)->completed += 5;
    peers_find(&t, 5)->rtt_ms = 12.5;
    peers_touch(&t, peers_find(&t, 3));
    peers_touch(&t, peers_find(&t, 5));
    v = peers_view(&t);
    CHECK(v && v->n == 4 && v->completed == want + 5);
    CHECK(v && peer_view_find(v, 3) && peer_view_find(v, 3)->completed == 3 * 1000003ull + 5);
    CHECK(v && peer_view_find(v, 5) && peer_view_find(v, 5)->rtt_ms == 12.5f);
    CHECK(v && peer_view_find(v, 4) && peer_view_find(v, 4)->health == PEER_GONE);
    free(v);
    peers_fini(&t);
}

/* A record replaced in place (a full table's forgotten peer): its id is no
 * longer found, the new one is, in the table and in the next snapshot,
 * every other record stays where it was, and the work it completed still
 * counts. */
static void test_peers_replace(void)
{
    peers_t t;
    peers_init(&t, 1);
    uint64_t want = 0;
    for (uint64_t id = 1; id <= 6; id++) {
        peer_info_t p = s_info(id, 3, 1.0f);
        peers_upsert(&t, &p, 0);
        if (id == 1) continue;   /* self: its progress is the node's own, not the table's */
        peers_find(&t, id)->completed = id * 1000u;
        peers_touch(&t, peers_find(&t, id));
        want += id * 1000u;
    }
    peer_view_t *v = peers_view(&t);   /* the index over the snapshot exists before the change */
    CHECK(v && v->completed == want && peer_view_find(v, 4));
    free(v);
    int i4 = (int)(peers_find(&t, 4) - t.p), i5 = (int)(peers_find(&t, 5) - t.p);
    peer_info_t fresh = s_info(77, 2, 3.0f), known = s_info(5, 2, 3.0f), self = s_info(1, 2, 3.0f);
    CHECK(peers_replace(&t, i4, &known, 9.0) == -1 && peers_replace(&t, t.selfix, &fresh, 9.0) == -1);
    CHECK(peers_replace(&t, i4, &self, 9.0) == -1 && peers_replace(&t, t.n, &fresh, 9.0) == -1);
    CHECK(peers_find(&t, 4) == &t.p[i4]);   /* refused: nothing changed */
    CHECK(peers_replace(&t, i4, &fresh, 9.0) == 0);
    peer_t *p = peers_find(&t, 77);
    CHECK(peers_find(&t, 4) == NULL && p == &t.p[i4] && peers_find(&t, 5) == &t.p[i5] && t.n == 6);
    CHECK(p && p->info.stage == 2 && p->completed == 0 && p->last_heard == 9.0 && p->link == -1 && !p->announce);
    CHECKF(peers_completed(&t) == want, "progress %llu, want %llu", (unsigned long long)peers_completed(&t),
           (unsigned long long)want);
    v = peers_view(&t);
    CHECK(v && v->n == 5 && v->completed == want);
    CHECK(v && peer_view_find(v, 4) == NULL && peer_view_find(v, 77) && peer_view_find(v, 77)->stage == 2);
    CHECK(v && peer_view_find(v, 6) && peer_view_find(v, 6)->completed == 6000u);
    free(v);
    /* the new record's own work adds to the sum as any record's does */
    p->completed = 50;
    peers_touch(&t, p);
    v = peers_view(&t);
    CHECK(v && v->completed == want + 50 && peers_completed(&t) == want + 50);
    free(v);
    peers_fini(&t);
}

/* ---- queue ------------------------------------------------------------- */

typedef struct {
    queue_item_t link;
    int value;
} qitem_t;

static int s_freed;
static void s_free_item(queue_item_t *it) { s_freed++; free(it); }

static qitem_t *s_qitem(int v)
{
    qitem_t *it = calloc(1, sizeof *it);
    it->value = v;
    return it;
}

/* Tensor mail of n floats (no values: only its size counts here), mb as its id. */
static mail_t *s_tensor_mail(size_t n, uint64_t mb)
{
    mail_t *m = mail_new(MAIL_TENSOR);
    if (m) { m->n = n; m->hdr.mb = mb; }
    return m;
}

/* Pushes tensors of n floats (ids 0, 1, ...) until p refuses one (freed
 * here); how many it took. */
static int s_pending_fill(pending_t *p, size_t n)
{
    for (int k = 0;; k++) {
        mail_t *m = s_tensor_mail(n, (uint64_t)k);
        if (!m || pending_push(p, m) < 0) { mail_free(m); return k; }
    }
}

/* How many tensors of n floats a fresh queue takes before it refuses one,
 * cleared after. */
static int s_pending_takes(size_t n)
{
    pending_t *p = calloc(1, sizeof *p);
    if (!p) return -1;
    int k = s_pending_fill(p, n);
    pending_clear(p);
    int empty = p->n == 0 && p->bytes == 0;
    free(p);
    return empty ? k : -1;
}

/* The compute side's queues are bounded in tensors and in decoded bytes:
 * small tensors up to PENDING_MAX, large ones up to PENDING_BYTES, and at
 * least PENDING_MIN whatever their size; FIFO, and popping makes room. */
static void test_pending_bounds(void)
{
    CHECKF(s_pending_takes(1000) == PENDING_MAX, "4 KB tensors: %d taken", s_pending_takes(1000));
    CHECKF(s_pending_takes((size_t)1 << 20) == 64, "4 MiB tensors: %d taken (want 256 MiB worth)",
           s_pending_takes((size_t)1 << 20));
    CHECKF(s_pending_takes((size_t)4 << 20) == PENDING_MIN, "16 MiB tensors: %d taken", s_pending_takes((size_t)4 << 20));
    pending_t *p = calloc(1, sizeof *p);
    if (!p) { CHECK(0); return; }
    CHECK(s_pending_fill(p, (size_t)1 << 20) == 64);
    mail_t *extra = s_tensor_mail((size_t)1 << 20, 999);
    CHECK(pending_push(p, extra) < 0);
    mail_t *first = pending_peek(p);
    CHECK(first && first->hdr.mb == 0 && p->n == 64);
    mail_t *m = pending_pop(p);
    CHECK(m == first && p->bytes == (size_t)63 << 22);
    mail_free(m);
    CHECK(pending_push(p, extra) == 0);   /* room again, at the back */
    int order_ok = 1;
    for (uint64_t want = 1; (m = pending_pop(p)); want++) {
        if (m->hdr.mb != (want == 64 ? 999 : want)) order_ok = 0;
        mail_free(m);
    }
    CHECK(order_ok && p->n == 0 && p->bytes == 0 && pending_peek(p) == NULL);
    free(p);
}

static void test_queue_fifo(void)
{
    queue_t q;
    queue_init(&q);
    CHECK(queue_pop(&q, 0) == NULL);
    for (int i = 0; i < 100; i++) queue_push(&q, &s_qitem(i)->link);
    CHECK(queue_len(&q) == 100);
    int order_ok = 1;
    for (int i = 0; i < 60; i++) {
        qitem_t *it = (qitem_t *)queue_pop(&q, 0);
        if (!it || it->value != i) order_ok = 0;
        free(it);
    }
    CHECK(order_ok);
    CHECK(queue_len(&q) == 40);
    /* interleaved pushes keep the order */
    queue_push(&q, &s_qitem(1000)->link);
    qitem_t *it = (qitem_t *)queue_pop(&q, 0);
    CHECK(it && it->value == 60);
    free(it);
    s_freed = 0;
    queue_fini(&q, s_free_item);  /* 61..99 and 1000 */
    CHECK(s_freed == 40);
}

static void test_queue_timeout_empty(void)
{
    queue_t q;
    queue_init(&q);
    CHECK(queue_pop(&q, 150) == NULL);
    CHECK(queue_pop(&q, 1) == NULL);
    CHECK(queue_len(&q) == 0);
    /* still usable after a timeout */
    queue_push(&q, &s_qitem(5)->link);
    qitem_t *it = (qitem_t *)queue_pop(&q, 150);
    CHECK(it && it->value == 5);
    free(it);
    queue_fini(&q, NULL);
}

typedef struct {
    queue_t *q;
    int n;          /* items to push */
    int delay_ms;   /* before the first push */
} pusher_t;

static void *s_pusher(void *arg)
{
    pusher_t *p = arg;
    struct timespec ts = { 0, (long)p->delay_ms * 1000000L };
    nanosleep(&ts, NULL);
    for (int i = 0; i < p->n; i++) queue_push(p->q, &s_qitem(i)->link);
    return NULL;
}

static void test_queue_cross_thread(void)
{
    queue_t q;
    queue_init(&q);
    /* a pop waiting with a long timeout is woken by the push */
    pusher_t p = { &q, 1, 100 };
    pthread_t th;
    CHECK(pthread_create(&th, NULL, s_pusher, &p) == 0);
    qitem_t *it = (qitem_t *)queue_pop(&q, 20000);
    CHECK(it && it->value == 0);
    free(it);
    pthread_join(th, NULL);
    /* many items from another thread arrive complete and in order */
    pusher_t many = { &q, 20000, 0 };
    CHECK(pthread_create(&th, NULL, s_pusher, &many) == 0);
    int next = 0, bad = 0;
    while (next < many.n) {
        it = (qitem_t *)queue_pop(&q, 20000);
        if (!it) { bad++; break; }
        if (it->value != next) bad++;
        next++;
        free(it);
    }
    pthread_join(th, NULL);
    CHECKF(bad == 0 && next == many.n, "bad=%d next=%d", bad, next);
    CHECK(queue_len(&q) == 0);
    queue_fini(&q, s_free_item);
}

/* ---- options ----------------------------------------------------------- */

/* Parses a space-separated command line (after the command word). */
static int s_parse(opts_t *o, int which, const char *line, char *err, size_t errlen)
{
    char buf[1024];
    char *argv[64];
    int argc = 0;
    snprintf(buf, sizeof buf, "%s", line);
    argv[argc++] = "brigade";
    for (char *tok = strtok(buf, " "); tok && argc < 63; tok = strtok(NULL, " ")) argv[argc++] = tok;
    argv[argc] = NULL;
    opts_defaults(o, which);
    err[0] = 0;
    return opts_parse(o, which, argc, argv, 1, err, errlen);
}

/* The line must be refused by parse (or resolve when parse accepts it) with
 * a message containing frag. */
static int s_refused(int which, const char *line, const char *frag)
{
    opts_t o;
    char err[512];
    int rc = s_parse(&o, which, line, err, sizeof err);
    if (rc == 0) rc = opts_resolve(&o, err, sizeof err);
    if (rc != -1) { printf("  '%s' was accepted (rc %d)\n", line, rc); return 0; }
    if (!strstr(err, frag)) { printf("  '%s': message '%s' lacks '%s'\n", line, err, frag); return 0; }
    return 1;
}

static void test_opts_parse_good(void)
{
    opts_t o;
    char err[512];
    int rc = s_parse(&o, OPTS_NODE, "--model gpt-tiny --layers 2 --stages 2 --steps 30 --codec int4 "
                     "--grad-codec=fp16 --lr 3e-4 --seed 18446744073709551615 --stage auto --listen 127.0.0.1:1 "
                     "--schedule gpipe --stash 2bw", err, sizeof err);
    CHECKF(rc == 0, "%s", err);
    CHECK(opts_resolve(&o, err, sizeof err) == 0);
    CHECK(o.cfg.L == 2 && o.cfg.C == 128 && o.cfg.NH == 4 && o.cfg.V == 256 && o.cfg.maxT == 64);
    CHECK(o.stages == 2 && o.steps == 30);
    CHECK(strcmp(o.codec, "int4") == 0 && strcmp(o.grad_codec, "fp16") == 0);
    CHECK(o.optim.lr == 3e-4f);
    CHECK(o.seed == UINT64_MAX);
    CHECK(o.stage == -1);
    CHECK(o.schedule == SCHED_GPIPE && o.stash == STASH_2BW);
    CHECK(o.max_delay == 1);   /* 2bw's default budget: two versions */
    CHECK(o.optim.total == 30);
    CHECK(strcmp(o.listen, "127.0.0.1:1") == 0);
    CHECK(opts_given(&o, "codec") && opts_given(&o, "grad-codec") && opts_given(&o, "listen"));
    CHECK(!opts_given(&o, "batch") && !opts_given(&o, "join") && !opts_given(&o, "no-such"));
    CHECK(o.batch == 8);   /* gpt default */
    rc = s_parse(&o, OPTS_NODE, "--stage 3", err, sizeof err);
    CHECK(rc == 0 && o.stage == 3);
    rc = s_parse(&o, OPTS_SOLO, "--model mlp-fmnist --save /tmp/x.model", err, sizeof err);
    CHECK(rc == 0 && opts_resolve(&o, err, sizeof err) == 0);
    CHECK(o.batch == 64 && strcmp(o.save, "/tmp/x.model") == 0);
    CHECK(s_parse(&o, OPTS_SOLO, "--steps 3 --help", err, sizeof err) == 1);
    rc = s_parse(&o, OPTS_SOLO, "--metrics=--steps --steps 5 --checkpoint /tmp/ck --save-every 2", err, sizeof err);
    CHECK(rc == 0 && opts_resolve(&o, err, sizeof err) == 0);   /* joined, a value may start with -- */
    CHECK(strcmp(o.metrics, "--steps") == 0 && o.steps == 5 && o.save_every == 2);
    rc = s_parse(&o, OPTS_SOLO, "--stages 4 --delay 3,2,1,0 --staleness none", err, sizeof err);
    CHECK(rc == 0 && o.ndelay == 4 && o.delay[0] == 3 && o.delay[3] == 0 && o.staleness == 0);
    rc = s_parse(&o, OPTS_SOLO, "--delay 64", err, sizeof err);
    CHECK(rc == 0 && o.ndelay == 1 && o.delay[0] == 64 && o.staleness == STALE_DEFAULT);
    rc = s_parse(&o, OPTS_SOLO, "--staleness lr+predict+dc+ramp", err, sizeof err);
    CHECK(rc == 0 && o.staleness == STALE_ALL && o.ndelay == 0);
    rc = s_parse(&o, OPTS_NODE, "--model gpt-tiny", err, sizeof err);
    CHECK(rc == 0 && opts_resolve(&o, err, sizeof err) == 0 && o.max_delay == 2 && !o.max_delay_given);   /* the default budget */
    CHECK(o.split == SPLIT_AUTO && o.cfg.split == SPLIT_EVEN);   /* a swarm's default: the data stage chooses */
    rc = s_parse(&o, OPTS_NODE, "--stash 2bw --max-delay 0", err, sizeof err);
    CHECK(rc == 0 && opts_resolve(&o, err, sizeof err) == 0 && o.max_delay == 0 && o.max_delay_given);
    rc = s_parse(&o, OPTS_NODE, "--optim muon", err, sizeof err);
    CHECK(rc == 0 && opts_resolve(&o, err, sizeof err) == 0 && o.max_delay == 3 && o.optim.kind == OPTIM_MUON);
    rc = s_parse(&o, OPTS_NODE, "--optim muon --max-delay 2", err, sizeof err);
    CHECK(rc == 0 && opts_resolve(&o, err, sizeof err) == 0 && o.max_delay == 2);
    rc = s_parse(&o, OPTS_NODE, "--optim muon --stash 2bw", err, sizeof err);
    CHECK(rc == 0 && opts_resolve(&o, err, sizeof err) == 0 && o.max_delay == 1);
}

/* opts_take: the small commands' options (keygen, status, sample, assemble,
 * ticket) take values by opts_parse's rule. */
static void test_opts_take(void)
{
    char *argv[] = { "brigade", "assemble", "--out", "m.bin", "--out=--x", "--outer", "--out", "--prompt", "-1", NULL };
    int argc = 9, i = 2;
    const char *v = NULL;
    char err[256];
    CHECK(opts_take(argc, argv, &i, "out", "FILE", &v, err, sizeof err) == 1 && i == 3 && strcmp(v, "m.bin") == 0);
    i = 4;
    CHECK(opts_take(argc, argv, &i, "out", "FILE", &v, err, sizeof err) == 1 && i == 4 && strcmp(v, "--x") == 0);
    i = 5;
    CHECK(opts_take(argc, argv, &i, "out", "FILE", &v, err, sizeof err) == 0 && i == 5);   /* another option */
    i = 6;
    CHECK(opts_take(argc, argv, &i, "out", "FILE", &v, err, sizeof err) == -1 && i == 6);
    CHECKF(strstr(err, "--out needs a value (FILE): '--prompt' is the next option") != NULL, "%s", err);
    i = 7;
    CHECK(opts_take(argc, argv, &i, "prompt", "TEXT", &v, err, sizeof err) == 1 && i == 8 && strcmp(v, "-1") == 0);
    i = 8;
    CHECK(opts_value(argc, argv, &i, "seed", "S", err, sizeof err) == NULL && strstr(err, "--seed needs a value (S)"));
}

static void test_opts_parse_bad(void)
{
    CHECK(s_refused(OPTS_NODE, "--bogus 1", "unknown option"));
    CHECK(s_refused(OPTS_NODE, "--bogus", "bogus"));
    CHECK(s_refused(OPTS_SOLO, "--listen 127.0.0.1:1", "unknown option"));  /* node only */
    CHECK(s_refused(OPTS_NODE, "--save x", "unknown option"));              /* solo only */
    CHECK(s_refused(OPTS_NODE, "stray", "unexpected argument"));
    CHECK(s_refused(OPTS_NODE, "--steps", "needs a value"));
    /* a value apart that starts with -- is the next option, not the value (a file named --steps was written) */
    CHECK(s_refused(OPTS_SOLO, "--metrics --steps 5", "--metrics needs a value (FILE): '--steps' is the next option"));
    CHECK(s_refused(OPTS_NODE, "--metrics --no-listen", "written --metrics=--no-listen"));
    CHECK(s_refused(OPTS_SIM, "--data --steps 5", "'--steps' is the next option"));
    CHECK(s_refused(OPTS_SOLO, "--lr -0.1", "--lr -0.1: must be in"));   /* one dash: a value, as before */
    /* --save-every sets how often --checkpoint is written: alone it would be ignored */
    CHECK(s_refused(OPTS_SOLO, "--save-every 5", "--save-every 5: needs --checkpoint"));
    CHECK(s_refused(OPTS_NODE, "--steps 9 --save-every 5", "needs --checkpoint"));
    CHECK(s_refused(OPTS_NODE, "--model gpt-tiny --join", "--join"));
    CHECK(s_refused(OPTS_NODE, "--steps 12x", "not a valid integer"));
    CHECK(s_refused(OPTS_NODE, "--batch 99999999999", "not a valid integer"));
    CHECK(s_refused(OPTS_NODE, "--seed -1", "seed"));
    CHECK(s_refused(OPTS_NODE, "--lr abc", "not a valid number"));
    CHECK(s_refused(OPTS_NODE, "--lr nan", "lr"));
    CHECK(s_refused(OPTS_NODE, "--codec int3", "unknown codec"));
    CHECK(s_refused(OPTS_NODE, "--grad-codec zstd", "unknown codec"));
    /* a stage cut over FRAME_MAX_VALUES (2^16 x 64 x 128 = 2^29) could never be sent */
    CHECK(s_refused(OPTS_NODE, "--model gpt-tiny --stages 2 --batch 65536", "between stages 0 and 1"));
    CHECK(s_refused(OPTS_SOLO, "--model gpt-tiny --stages 2 --batch 65536 --codec int8", "more than a frame carries"));
    /* a cut of 2^25 values (4096 x 64 x 128) fits a frame's count, but not its bytes (WIRE_FRAME_BYTES_MAX,
     * 64 MiB) in fp32 or fp16: the receiver's transport reset the connection at each, the microbatch lost */
    CHECK(s_refused(OPTS_NODE, "--model gpt-tiny --stages 2 --batch 4096 --codec fp32 --grad-codec int8", "its --codec fp32"));
    CHECK(s_refused(OPTS_NODE, "--model gpt-tiny --stages 2 --batch 4096 --codec int8 --grad-codec fp16", "its --grad-codec fp16"));
    {
        opts_t o;
        char err[512];
        int rc = s_parse(&o, OPTS_NODE, "--model gpt-tiny --stages 2 --batch 4096 --codec int8 --grad-codec int8", err, sizeof err);
        CHECKF(rc == 0 && opts_resolve(&o, err, sizeof err) == 0, "a cut of 2^25 values in int8 both ways (32 MiB): %s", err);
    }
    CHECK(s_refused(OPTS_NODE, "--stage middle", "want auto"));
    CHECK(s_refused(OPTS_NODE, "--stage -1", "--stage"));
    CHECK(s_refused(OPTS_NODE, "--schedule sync", "async or gpipe"));
    CHECK(s_refused(OPTS_NODE, "--stash half", "full or 2bw"));
    CHECK(s_refused(OPTS_NODE, "--split lat", "even, late or auto"));
    CHECK(s_refused(OPTS_NODE, "--model mlp-fmnist --split late", "--split late"));
    CHECK(s_refused(OPTS_NODE, "--split late --stages 6", "--stages 6"));
    CHECK(s_refused(OPTS_NODE, "--staleness predictive", "--staleness"));
    CHECK(s_refused(OPTS_NODE, "--staleness predict+predict", "--staleness"));
    CHECK(s_refused(OPTS_NODE, "--optim sgd", "muon or adamw"));
    CHECK(s_refused(OPTS_SOLO, "--optim muon --staleness dc", "--optim adamw"));   /* dc reads AdamW's v */
    CHECK(s_refused(OPTS_SOLO, "--optim muon --staleness predict+dc", "--optim adamw"));
    CHECK(s_refused(OPTS_NODE, "--delay 1,0", "unknown option"));            /* solo only */
    CHECK(s_refused(OPTS_NODE, "--staleness predict+dc", "solo only"));        /* dc too */
    CHECK(s_refused(OPTS_SIM, "--staleness dc", "solo only"));
    CHECK(s_refused(OPTS_SOLO, "--delay 3,-1", "--delay"));
    CHECK(s_refused(OPTS_SOLO, "--delay 1.5,0", "--delay"));
    CHECK(s_refused(OPTS_SOLO, "--delay 1,,0", "--delay"));
    CHECK(s_refused(OPTS_SOLO, "--delay 2,", "--delay"));
    CHECK(s_refused(OPTS_SOLO, "--delay x", "--delay"));
    CHECK(s_refused(OPTS_SOLO, "--delay +1", "--delay"));
    CHECK(s_refused(OPTS_SOLO, "--delay 65", "--delay"));
    CHECK(s_refused(OPTS_SOLO, "--delay 99999999999999999999", "--delay"));
    /* resolve: values that parse but do not fit together */
    CHECK(s_refused(OPTS_NODE, "--model gpt-huge", "gpt-huge"));
    CHECK(s_refused(OPTS_NODE, "--heads 3", "--heads"));
    CHECK(s_refused(OPTS_NODE, "--layers 100000", "--layers"));
    CHECK(s_refused(OPTS_SOLO, "--layers 0", "--layers 0"));   /* not the preset's 4 */
    CHECK(s_refused(OPTS_SOLO, "--dim 0", "--dim 0"));
    CHECK(s_refused(OPTS_SOLO, "--heads 0", "--heads 0"));
    CHECK(s_refused(OPTS_SOLO, "--ctx 0", "--ctx 0"));
    CHECK(s_refused(OPTS_NODE, "--steps 0", "--steps"));
    CHECK(s_refused(OPTS_NODE, "--batch -3", "--batch"));
    CHECK(s_refused(OPTS_NODE, "--threads 0", "--threads"));
    CHECK(s_refused(OPTS_NODE, "--lr 0", "--lr"));
    CHECK(s_refused(OPTS_NODE, "--clip inf", "--clip"));
    CHECK(s_refused(OPTS_NODE, "--emu-loss 1.5", "--emu-loss"));
    CHECK(s_refused(OPTS_NODE, "--max-delay -1", "--max-delay"));
    CHECK(s_refused(OPTS_NODE, "--max-delay 65", "--max-delay"));
    CHECK(s_refused(OPTS_NODE, "--stash 2bw --max-delay 2", "--max-delay"));
}

/* A creator's options with every run field away from its default. */
#define S_CREATOR_LINE "--model gpt-tiny --layers 3 --dim 64 --heads 2 --ctx 32 --data synthetic " \
    "--stages 3 --steps 123 --batch 5 --micro 2 --lr 0.002 --wd 0.05 --warmup 7 --clip 0.5 " \
    "--codec int4 --grad-codec bf16 --schedule gpipe --split late --stash 2bw --max-inflight 6 --max-delay 0 --seed 99 " \
    "--eval-every 11 --eval-batches 5 --staleness lr+ramp --listen 127.0.0.1:40001 --metrics /tmp/creator.jsonl --threads 2"

static void s_creator(opts_t *o)
{
    char err[512];
    int rc = s_parse(o, OPTS_NODE, S_CREATOR_LINE, err, sizeof err);
    if (rc != 0 || opts_resolve(o, err, sizeof err) != 0) {
        printf("  creator options refused: %s\n", err);
        check_case_failed = 1;
    }
    o->closed = 1;
    for (int i = 0; i < 32; i++) o->owner_pub[i] = (uint8_t)(0xA0 + i);
}

/* A joiner's options: only local ones. */
static void s_joiner(opts_t *o)
{
    char err[512];
    s_parse(o, OPTS_NODE, "--listen 127.0.0.1:40002 --join 127.0.0.1:40001/abc --metrics /tmp/joiner.jsonl "
            "--threads 3 --stage 1 --checkpoint /tmp/ck --keys /tmp/keys --emu-latency-ms 5", err, sizeof err);
    opts_resolve(o, err, sizeof err);
}

static size_t s_encode(const opts_t *o, uint8_t *buf, size_t cap)
{
    wbuf_t w;
    wbuf_init_fixed(&w, buf, cap);
    proto_put_runcfg(&w, o);
    return wbuf_error(&w) ? 0 : w.len;
}

static void test_opts_run_roundtrip(void)
{
    opts_t c, j;
    s_creator(&c);
    s_joiner(&j);
    uint8_t buf[8192];
    size_t len = s_encode(&c, buf, sizeof buf);
    CHECK(len > 0);
    rbuf_t r;
    rbuf_init(&r, buf, len);
    char err[256] = "";
    int rc = proto_get_runcfg(&r, &j, err, sizeof err);
    CHECKF(rc == 0, "%s", err);
    if (rc != 0) return;
    CHECK(rbuf_remaining(&r) == 0);
    /* every run field */
    CHECK(memcmp(&j.cfg, &c.cfg, sizeof c.cfg) == 0);
    CHECK(strcmp(j.model, c.model) == 0);
    CHECK(strcmp(j.data, c.data) == 0);
    CHECK(j.stages == 3 && j.steps == 123 && j.batch == 5 && j.micro == 2);
    CHECK(j.optim.lr == c.optim.lr && j.optim.wd == c.optim.wd && j.optim.clip == c.optim.clip);
    CHECK(j.optim.warmup == 7 && j.optim.total == 123);
    CHECK(strcmp(j.codec, "int4") == 0 && strcmp(j.grad_codec, "bf16") == 0);
    CHECK(j.schedule == SCHED_GPIPE && j.stash == STASH_2BW);
    CHECK(j.split == SPLIT_LATE && j.cfg.split == SPLIT_LATE);
    CHECK(j.max_inflight == 6 && j.eval_every == 11 && j.eval_batches == 5 && j.seed == 99);
    CHECK(j.staleness == (STALE_LR | STALE_RAMP) && j.max_delay == 0 && j.max_delay_given == c.max_delay_given);
    CHECK(j.optim.kind == OPTIM_ADAMW);
    CHECK(j.closed == 1 && memcmp(j.owner_pub, c.owner_pub, 32) == 0);
    CHECK(opts_run_id(&j) == opts_run_id(&c));
    char a[2048], b[2048];
    opts_run_text(&c, a, sizeof a);
    opts_run_text(&j, b, sizeof b);
    CHECK(strcmp(a, b) == 0);
    /* the local ones stay the joiner's */
    CHECK(strcmp(j.listen, "127.0.0.1:40002") == 0);
    CHECK(strcmp(j.join, "127.0.0.1:40001/abc") == 0);
    CHECK(strcmp(j.metrics, "/tmp/joiner.jsonl") == 0);
    CHECK(strcmp(j.checkpoint, "/tmp/ck") == 0 && strcmp(j.keys, "/tmp/keys") == 0);
    CHECK(j.threads == 3 && j.stage == 1 && j.emu_latency_ms == 5.0);
}

static void test_opts_run_truncated(void)
{
    opts_t c, j, keep;
    s_creator(&c);
    s_joiner(&j);
    keep = j;
    uint8_t buf[8192];
    size_t len = s_encode(&c, buf, sizeof buf);
    CHECK(len > 0);
    int accepted = 0, changed = 0, noreason = 0;
    for (size_t n = 0; n < len; n++) {
        uint8_t *cut = malloc(n ? n : 1);  /* exact size: ASan sees any over-read */
        memcpy(cut, buf, n);
        rbuf_t r;
        rbuf_init(&r, cut, n);
        char err[256] = "";
        if (proto_get_runcfg(&r, &j, err, sizeof err) == 0) accepted++;
        else if (!err[0]) noreason++;
        if (memcmp(&j, &keep, sizeof j) != 0) { changed++; j = keep; }
        free(cut);
    }
    CHECKF(accepted == 0, "%d truncations accepted", accepted);
    CHECKF(changed == 0, "%d failed decodes changed the options", changed);
    CHECKF(noreason == 0, "%d failures without a reason", noreason);
}

/* Encodes c, decodes into a joiner: 0 when accepted. */
static int s_decode_of(const opts_t *c)
{
    opts_t j;
    s_joiner(&j);
    uint8_t buf[8192];
    size_t len = s_encode(c, buf, sizeof buf);
    if (!len) return -2;
    rbuf_t r;
    rbuf_init(&r, buf, len);
    char err[256];
    return proto_get_runcfg(&r, &j, err, sizeof err);
}

/* --split auto: the run config carries "auto" (the even layout until the
 * data stage chooses); a message's flags say the choice, and a starting
 * node takes its checkpoint's split first, then what the network heard. */
static void test_split_auto_plan(void)
{
    opts_t c, j;
    s_creator(&c);
    c.split = SPLIT_AUTO;
    c.cfg.split = SPLIT_EVEN;
    uint8_t buf[8192];
    size_t len = s_encode(&c, buf, sizeof buf);
    CHECK(len > 0);
    s_joiner(&j);
    rbuf_t r;
    rbuf_init(&r, buf, len);
    char err[256] = "";
    CHECKF(proto_get_runcfg(&r, &j, err, sizeof err) == 0, "%s", err);
    CHECK(j.split == SPLIT_AUTO && j.cfg.split == SPLIT_EVEN && opts_run_id(&j) == opts_run_id(&c));
    opts_t e = c;
    e.split = SPLIT_EVEN;
    CHECK(opts_run_id(&e) != opts_run_id(&c));   /* another run than the even one */
    opts_t g = c;
    g.max_delay_given = !c.max_delay_given;
    CHECK(opts_run_id(&g) != opts_run_id(&c));   /* the budget's extra update under auto hangs on it */
    CHECK(plan_of_flags(plan_flags(-1)) == -1 && plan_flags(-1) == 0);
    CHECK(plan_of_flags(plan_flags(SPLIT_EVEN)) == SPLIT_EVEN && plan_of_flags(plan_flags(SPLIT_LATE)) == SPLIT_LATE);
    CHECK(plan_of_flags(PLAN_FLAG_LATE) == -1);   /* not said without the known bit */
    uint32_t f = ACT_FLAG_EVAL | ACT_FLAG_FINAL | (0xffu << MB_ATTEMPT_SHIFT);
    CHECK((plan_flags(SPLIT_LATE) & f) == 0);     /* clear of every type's own bits */
    CHECK(compute_plan(&c, -1, -1) == -1 && compute_plan(&c, -1, SPLIT_LATE) == SPLIT_LATE);
    CHECK(compute_plan(&c, SPLIT_EVEN, SPLIT_LATE) == SPLIT_EVEN);   /* the checkpoint's first */
    CHECK(compute_plan(&e, SPLIT_LATE, SPLIT_LATE) == SPLIT_EVEN);   /* not auto: the run's */
    opts_t o;
    char *argv[] = { "node", "--split", "bogus" };
    opts_defaults(&o, OPTS_NODE);
    CHECK(opts_parse(&o, OPTS_NODE, 3, argv, 1, err, sizeof err) == -1 && strstr(err, "want even, late or auto"));
}

static void test_opts_run_out_of_range(void)
{
    opts_t base, c;
    s_creator(&base);
    CHECK(s_decode_of(&base) == 0);
    c = base; c.optim.clip = INFINITY;      CHECK(s_decode_of(&c) == -1);
    c = base; c.optim.lr = NAN;             CHECK(s_decode_of(&c) == -1);
    c = base; c.optim.lr = -1.0f;           CHECK(s_decode_of(&c) == -1);
    c = base; c.optim.wd = INFINITY;        CHECK(s_decode_of(&c) == -1);
    c = base; c.cfg.L = 1000000;            CHECK(s_decode_of(&c) == -1);
    c = base; c.cfg.C = 1 << 30;            CHECK(s_decode_of(&c) == -1);
    c = base; c.cfg.NH = 3;                 CHECK(s_decode_of(&c) == -1);
    c = base; c.cfg.V = -5;                 CHECK(s_decode_of(&c) == -1);
    c = base; c.cfg.kind = (model_kind_t)7; CHECK(s_decode_of(&c) == -1);
    c = base; snprintf(c.codec, sizeof c.codec, "int3");      CHECK(s_decode_of(&c) == -1);
    c = base; c.grad_codec[0] = 0; CHECK(s_decode_of(&c) == -1);
    c = base; snprintf(c.cfg.name, sizeof c.cfg.name, "gpt\x1b[2J"); CHECK(s_decode_of(&c) == -1);   /* printed by joiners */
    c = base; snprintf(c.data, sizeof c.data, "text:/a\rb");         CHECK(s_decode_of(&c) == -1);
    c = base; snprintf(c.data, sizeof c.data, "text:/home/jos\xc3\xa9/fortunes"); CHECK(s_decode_of(&c) == 0);   /* UTF-8 */
    c = base; c.stages = c.cfg.L + 2;       CHECK(s_decode_of(&c) == -1);   /* more stages than layers */
    c.split = SPLIT_EVEN; c.stages = c.cfg.L + 1; CHECK(s_decode_of(&c) == -1);   /* the late split has one more */
    c = base; c.split = 3;                  CHECK(s_decode_of(&c) == -1);
    c = base; c.split = SPLIT_AUTO; c.stages = c.cfg.L; CHECK(s_decode_of(&c) == 0);
    c.stages = c.cfg.L + 1;                 CHECK(s_decode_of(&c) == -1);   /* auto may choose even: its stage count */
    c = base; c.stages = 100000;            CHECK(s_decode_of(&c) == -1);
    c = base; c.stages = 0;                 CHECK(s_decode_of(&c) == -1);
    c = base; c.stages = -2;                CHECK(s_decode_of(&c) == -1);
    c = base; c.steps = 0;                  CHECK(s_decode_of(&c) == -1);
    c = base; c.batch = 0;                  CHECK(s_decode_of(&c) == -1);
    c = base; c.batch = 1 << 30;            CHECK(s_decode_of(&c) == -1);
    c = base; c.micro = -1;                 CHECK(s_decode_of(&c) == -1);
    c = base; c.schedule = 2;               CHECK(s_decode_of(&c) == -1);
    c = base; c.stash = 9;                  CHECK(s_decode_of(&c) == -1);
    c = base; c.max_inflight = -1;          CHECK(s_decode_of(&c) == -1);
    c = base; c.eval_every = -1;            CHECK(s_decode_of(&c) == -1);
    c = base; c.staleness = STALE_ALL + 1;  CHECK(s_decode_of(&c) == -1);
    c = base; c.staleness = 0;              CHECK(s_decode_of(&c) == 0);
    c = base; c.optim.kind = 2;             CHECK(s_decode_of(&c) == -1);
    c = base; c.staleness |= STALE_DC; c.optim.kind = OPTIM_MUON; CHECK(s_decode_of(&c) == -1);   /* dc with muon */
    c.staleness = STALE_LR;                 CHECK(s_decode_of(&c) == 0);
    /* a flag byte that is neither 0 nor 1 */
    uint8_t buf[8192];
    size_t len = s_encode(&base, buf, sizeof buf);
    CHECK(len > 38);
    buf[len - 38] = 2;   /* closed: before the owner key, the staleness flags, the delay budget, the optimizer, the split,
                            whether the budget was given */
    rbuf_t r;
    rbuf_init(&r, buf, len);
    opts_t j;
    s_joiner(&j);
    char err[256];
    CHECK(proto_get_runcfg(&r, &j, err, sizeof err) == -1);
    len = s_encode(&base, buf, sizeof buf);
    buf[len - 1] = 2;    /* whether the budget was given */
    rbuf_init(&r, buf, len);
    CHECK(proto_get_runcfg(&r, &j, err, sizeof err) == -1);
}

static void test_opts_run_id(void)
{
    opts_t base, c;
    s_creator(&base);
    uint64_t id = opts_run_id(&base);
    CHECK(id == opts_run_id(&base));
    int same = 0;
#define DIFF(stmt) do { c = base; stmt; if (opts_run_id(&c) == id) { same++; printf("  run id unchanged by: %s\n", #stmt); } } while (0)
    DIFF(snprintf(c.cfg.name, sizeof c.cfg.name, "gpt-small"));
    DIFF(c.cfg.L = 4);
    DIFF(c.cfg.C = 128);
    DIFF(c.cfg.NH = 4);
    DIFF(c.cfg.maxT = 64);
    DIFF(snprintf(c.data, sizeof c.data, "text:/tmp/x"));
    DIFF(c.stages = 2);
    DIFF(c.steps = 124);
    DIFF(c.batch = 6);
    DIFF(c.micro = 3);
    DIFF(c.optim.lr = 0.0021f);
    DIFF(c.optim.wd = 0.06f);
    DIFF(c.optim.warmup = 8);
    DIFF(c.optim.clip = 0.6f);
    DIFF(snprintf(c.codec, sizeof c.codec, "int8"));
    DIFF(snprintf(c.grad_codec, sizeof c.grad_codec, "int8"));
    DIFF(c.schedule = SCHED_ASYNC);
    DIFF(c.stash = STASH_FULL);
    DIFF(c.split = c.cfg.split = SPLIT_EVEN);
    DIFF(c.staleness = STALE_DEFAULT);
    DIFF(c.seed = 100);
    DIFF(c.closed = 0);
    DIFF(c.owner_pub[0] ^= 1);
    CHECKF(same == 0, "%d run fields do not change the run id", same);
#undef DIFF
    /* local options never change it */
    int moved = 0;
#define SAME(stmt) do { c = base; stmt; if (opts_run_id(&c) != id) { moved++; printf("  run id changed by: %s\n", #stmt); } } while (0)
    SAME(snprintf(c.listen, sizeof c.listen, "0.0.0.0:9"));
    SAME(snprintf(c.join, sizeof c.join, "127.0.0.1:1/x"));
    SAME(snprintf(c.metrics, sizeof c.metrics, "/tmp/other.jsonl"));
    SAME(snprintf(c.checkpoint, sizeof c.checkpoint, "/tmp/ck2"));
    SAME(snprintf(c.keys, sizeof c.keys, "/tmp/k2"));
    SAME(snprintf(c.ticket, sizeof c.ticket, "abc"));
    SAME(c.threads = 7);
    SAME(c.stage = 2);
    SAME(c.http = 8080);
    SAME(c.emu_latency_ms = 50);
    SAME(c.emu_slowdown = 3);
    SAME(c.save_every = 3);
#undef SAME
    CHECKF(moved == 0, "%d local options change the run id", moved);
}

/* The whole owner key and --max-inflight (sent to joiners and part of the
 * computation: 1 makes the swarm sequential) belong to the run identity. */
static void test_opts_run_id_all_run_fields(void)
{
    opts_t base, c;
    s_creator(&base);
    uint64_t id = opts_run_id(&base);
    c = base; c.owner_pub[31] ^= 1;
    CHECKF(opts_run_id(&c) != id, "owner key byte 31 does not change the run id");
    c = base; c.owner_pub[12] ^= 0x80;
    CHECKF(opts_run_id(&c) != id, "owner key byte 12 does not change the run id");
    c = base; c.max_inflight = 1;
    CHECKF(opts_run_id(&c) != id, "--max-inflight does not change the run id");
    c = base; c.eval_batches = 6;
    CHECKF(opts_run_id(&c) != id, "--eval-batches does not change the run id");
    c = base; c.optim.kind = OPTIM_MUON;
    CHECKF(opts_run_id(&c) != id, "--optim does not change the run id");
}

/* ---- checkpoints ------------------------------------------------------- */

static char s_dir[64];

static void s_path(char *out, size_t len, const char *name)
{
    snprintf(out, len, "%s/%s", s_dir, name);
}

static long s_file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

static int s_rewrite(const char *path, long off, uint8_t xor_mask, long truncate_to)
{
    FILE *fp = fopen(path, "r+b");
    if (!fp) return -1;
    if (xor_mask) {
        fseek(fp, off, SEEK_SET);
        int ch = fgetc(fp);
        fseek(fp, off, SEEK_SET);
        fputc((ch ^ xor_mask) & 0xFF, fp);
    }
    fclose(fp);
    if (truncate_to >= 0 && truncate(path, truncate_to) != 0) return -1;
    return 0;
}

typedef struct {
    checkpoint_info_t info;
    size_t n;
    float *p, *m, *v;
} ckpt_case_t;

static int s_ckpt_case(ckpt_case_t *k)
{
    memset(k, 0, sizeof *k);
    char err[256];
    if (model_preset(&k->info.cfg, "gpt-tiny", err, sizeof err) < 0) return -1;
    k->info.cfg.L = 3;
    k->info.cfg.split = SPLIT_LATE;
    stage_t s;
    if (stage_init(&s, &k->info.cfg, 1, 3, err, sizeof err) < 0) return -1;
    k->info.run = 0xFEDCBA9876543210ull;
    k->info.stage = 1;
    k->info.nstages = 3;
    k->info.version = 4242;
    k->info.cursor = 0x1122334455667788ull;
    k->info.completed = 987654321ull;
    k->n = s.nparams;
    k->p = malloc(sizeof(float) * k->n);
    k->m = malloc(sizeof(float) * k->n);
    k->v = malloc(sizeof(float) * k->n);
    for (size_t i = 0; i < k->n; i++) {
        k->p[i] = sinf((float)i) * 0.1f;
        k->m[i] = (float)i * 1e-7f - 0.25f;
        k->v[i] = 1.0f / (float)(i + 1);
    }
    k->p[0] = -0.0f;
    k->v[k->n - 1] = 1e-38f;
    return 0;
}

static void s_ckpt_free(ckpt_case_t *k)
{
    free(k->p); free(k->m); free(k->v);
}

static void test_checkpoint_roundtrip(void)
{
    ckpt_case_t k;
    CHECK(s_ckpt_case(&k) == 0);
    char path[128], err[512] = "";
    s_path(path, sizeof path, "stage.ckpt");
    CHECKF(checkpoint_save(path, &k.info, k.p, k.m, k.v, k.n, err, sizeof err) == 0, "%s", err);
    CHECK(s_file_size(path) > (long)(3 * k.n * sizeof(float)));
    checkpoint_info_t got;
    size_t n = 0;
    float *x = checkpoint_load(path, &got, &n, err, sizeof err);
    CHECKF(x != NULL, "%s", err);
    if (x) {
        CHECK(n == k.n);
        CHECK(memcmp(x, k.p, n * sizeof(float)) == 0);
        CHECK(memcmp(x + n, k.m, n * sizeof(float)) == 0);
        CHECK(memcmp(x + 2 * n, k.v, n * sizeof(float)) == 0);
        CHECK(got.run == k.info.run);
        CHECK(got.stage == 1 && got.nstages == 3 && got.cfg.split == SPLIT_LATE);
        CHECK(got.version == 4242);
        CHECK(got.cursor == k.info.cursor);
        CHECK(got.completed == k.info.completed);
        CHECK(got.cfg.kind == k.info.cfg.kind && got.cfg.L == 3 && got.cfg.C == k.info.cfg.C
              && got.cfg.NH == k.info.cfg.NH && got.cfg.maxT == k.info.cfg.maxT && got.cfg.V == k.info.cfg.V);
        CHECK(strcmp(got.cfg.name, "gpt-tiny") == 0);
        free(x);
    }
    /* overwriting is atomic: a second save replaces the first, no temp file left */
    k.info.version = 4243;
    CHECK(checkpoint_save(path, &k.info, k.p, k.m, k.v, k.n, err, sizeof err) == 0);
    x = checkpoint_load(path, &got, &n, err, sizeof err);
    CHECK(x && got.version == 4243);
    free(x);
    char tmpname[160];
    snprintf(tmpname, sizeof tmpname, "%s.tmp.%d", path, (int)getpid());
    CHECK(access(tmpname, F_OK) != 0);
    /* a version or completed count no run reaches, with a valid CRC (a rewritten file): refused (one restarted
     * a 3-step run as complete, or at update 2^63) */
    int64_t versions[] = { CKPT_VERSION_MAX + 1, 7 };
    uint64_t completed[] = { 0, UINT64_MAX };
    for (int i = 0; i < 2; i++) {
        k.info.version = versions[i];
        k.info.completed = completed[i];
        CHECK(checkpoint_save(path, &k.info, k.p, k.m, k.v, k.n, err, sizeof err) == 0);
        err[0] = 0;
        x = checkpoint_load(path, &got, &n, err, sizeof err);
        CHECKF(!x && strstr(err, "invalid weight version"), "version %lld, completed %llu: %s", (long long)versions[i],
               (unsigned long long)completed[i], x ? "loaded" : err);
        free(x);
    }
    s_ckpt_free(&k);
}

/* solo's extra state beside a checkpoint: read back as written; one of
 * another version or run, another size or with a flipped byte is refused
 * with a reason naming the file (a save cut short between the two files
 * leaves one of another version). */
static void test_checkpoint_extra(void)
{
    char path[128], err[512] = "";
    s_path(path, sizeof path, "stage.ckpt.solo");
    float x[100];
    for (int i = 0; i < 100; i++) x[i] = (float)i * 0.5f - 7.0f;
    CHECKF(ckpt_extra_save(path, 77, 12, 9, x, 100, err, sizeof err) == 0, "%s", err);
    int64_t floor = -1;
    float *y = ckpt_extra_load(path, 77, 12, &floor, 100, err, sizeof err);
    CHECKF(y && floor == 9 && memcmp(x, y, sizeof x) == 0, "read back: %s", y ? "other values" : err);
    free(y);
    const struct { uint64_t run; int64_t version; size_t n; const char *why; } bad[] = {
        { 77, 15, 100, "of another checkpoint" }, { 78, 12, 100, "of another checkpoint" }, { 77, 12, 99, "this run keeps 99" } };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        err[0] = '\0';
        y = ckpt_extra_load(path, bad[k].run, bad[k].version, &floor, bad[k].n, err, sizeof err);
        CHECKF(!y && strstr(err, path) && strstr(err, bad[k].why), "case %zu: '%s'", k, err);
        free(y);
    }
    FILE *f = fopen(path, "r+b");
    CHECK(f && fseek(f, 60, SEEK_SET) == 0 && fputc(0x55, f) != EOF);
    if (f) fclose(f);
    y = ckpt_extra_load(path, 77, 12, &floor, 100, err, sizeof err);
    CHECKF(!y && strstr(err, "checksum"), "a flipped byte: '%s'", y ? "read" : err);
    free(y);
}

static void test_checkpoint_damaged(void)
{
    ckpt_case_t k;
    CHECK(s_ckpt_case(&k) == 0);
    char path[128], err[512];
    s_path(path, sizeof path, "bad.ckpt");
    long size = 0;
    checkpoint_info_t got;
    size_t n;
    /* a flipped byte in the tensors, in a header counter, in the CRC itself */
    long offs[3] = { 0, 0, 0 };
    CHECK(checkpoint_save(path, &k.info, k.p, k.m, k.v, k.n, err, sizeof err) == 0);
    size = s_file_size(path);
    offs[0] = size - 4 - (long)(k.n * sizeof(float)) - 3;   /* inside m */
    offs[1] = 8 + 4 + 52 + 8 + 4 + 4 + 4 + 8 + 8 + 2;       /* inside `completed` */
    offs[2] = size - 2;                                     /* the CRC */
    for (int t = 0; t < 3; t++) {
        CHECK(checkpoint_save(path, &k.info, k.p, k.m, k.v, k.n, err, sizeof err) == 0);
        CHECK(s_rewrite(path, offs[t], 0x10, -1) == 0);
        err[0] = 0;
        float *x = checkpoint_load(path, &got, &n, err, sizeof err);
        CHECKF(x == NULL, "flip at %ld accepted", offs[t]);
        CHECKF(strstr(err, "checksum") != NULL, "flip at %ld: '%s'", offs[t], err);
        CHECK(strstr(err, path) != NULL);
        free(x);
    }
    /* truncated: in the body, in the CRC, in the header, empty */
    long cuts[4] = { size - 100, size - 1, 20, 0 };
    for (int t = 0; t < 4; t++) {
        CHECK(checkpoint_save(path, &k.info, k.p, k.m, k.v, k.n, err, sizeof err) == 0);
        CHECK(s_rewrite(path, 0, 0, cuts[t]) == 0);
        err[0] = 0;
        float *x = checkpoint_load(path, &got, &n, err, sizeof err);
        CHECKF(x == NULL, "cut at %ld accepted", cuts[t]);
        CHECKF(strstr(err, "truncated") != NULL, "cut at %ld: '%s'", cuts[t], err);
        free(x);
    }
    /* wrong magic: a model file, and garbage */
    CHECK(checkpoint_save(path, &k.info, k.p, k.m, k.v, k.n, err, sizeof err) == 0);
    CHECK(s_rewrite(path, 4, 0x01, -1) == 0);
    float *x = checkpoint_load(path, &got, &n, err, sizeof err);
    CHECK(x == NULL && strstr(err, "magic") != NULL);
    free(x);
    char mpath[128];
    s_path(mpath, sizeof mpath, "whole.model");
    CHECK(modelfile_save(mpath, &k.info.cfg, 3, 0, k.p, k.n, err, sizeof err) == 0);
    x = checkpoint_load(mpath, &got, &n, err, sizeof err);
    CHECK(x == NULL && strstr(err, "magic") != NULL);
    free(x);
    /* a missing file */
    s_path(path, sizeof path, "missing.ckpt");
    x = checkpoint_load(path, &got, &n, err, sizeof err);
    CHECK(x == NULL && strstr(err, "missing.ckpt") != NULL);
    free(x);
    s_ckpt_free(&k);
}

static void test_checkpoint_bad_values(void)
{
    /* a checkpoint whose split does not fit its config is refused even with
     * a valid checksum */
    ckpt_case_t k;
    CHECK(s_ckpt_case(&k) == 0);
    char path[128], err[512];
    s_path(path, sizeof path, "split.ckpt");
    checkpoint_info_t bad = k.info, got;
    bad.stage = 5;   /* of 3 */
    CHECK(checkpoint_save(path, &bad, k.p, k.m, k.v, k.n, err, sizeof err) == 0);
    size_t n;
    float *x = checkpoint_load(path, &got, &n, err, sizeof err);
    CHECK(x == NULL);
    free(x);
    bad = k.info;
    bad.stage = 0;   /* stage 0 holds a different number of parameters */
    CHECK(checkpoint_save(path, &bad, k.p, k.m, k.v, k.n, err, sizeof err) == 0);
    x = checkpoint_load(path, &got, &n, err, sizeof err);
    CHECK(x == NULL && strstr(err, "parameters") != NULL);
    free(x);
    s_ckpt_free(&k);
}

/* ---- one validator, both sides ------------------------------------------ */

/* Creator side: the creator's options with "--name value" added, through
 * parse and resolve.  Returns 0 or -1 with err. */
static int s_creator_with(const char *name, const char *value, char *err, size_t errlen)
{
    opts_t o;
    char line[1024];
    snprintf(line, sizeof line, "%s --%s %s", S_CREATOR_LINE, name, value);
    int rc = s_parse(&o, OPTS_NODE, line, err, errlen);
    if (rc == 0) rc = opts_resolve(&o, err, errlen);
    return rc;
}

/* Joiner side: a creator whose run config holds value for option name,
 * sent as a WELCOME would carry it and decoded by a joiner.  Returns 0 or
 * -1 with err. */
static int s_joiner_gets(const char *name, const char *value, char *err, size_t errlen)
{
    opts_t c;
    s_creator(&c);
    char opt[64];
    snprintf(opt, sizeof opt, "--%s", name);
    char *argv[4] = {"brigade", opt, (char *)value, NULL};
    if (opts_parse(&c, OPTS_NODE, 3, argv, 1, err, errlen) != 0) return -2;   /* no range checks here */
    if (c.layers) c.cfg.L = c.layers;
    if (c.dim) c.cfg.C = c.dim;
    if (c.ctx) c.cfg.maxT = c.ctx;
    opts_t j;
    s_joiner(&j);
    uint8_t buf[8192];
    size_t len = s_encode(&c, buf, sizeof buf);
    if (!len) return -2;
    rbuf_t r;
    rbuf_init(&r, buf, len);
    return proto_get_runcfg(&r, &j, err, errlen);
}

/* Every bounded run option: the values just outside are refused, the bounds
 * themselves accepted, by the creator (solo uses the same opts_resolve) and
 * by a joiner receiving them, with the same message naming the option. */
static void test_opts_same_bounds_both_sides(void)
{
    static const struct { const char *name, *v[4]; } cases[] = {   /* below, lowest, highest, above; NULL: skip */
        {"steps",        {"0", "1", "100000000", "100000001"}},
        {"batch",        {"0", "1", NULL, "65537"}},            /* 65536 x 32 x 64 values: more than a frame's bytes */
        {"micro",        {"0", "1", "65536", "65537"}},
        {"lr",           {"0", "1e-9", "10", "10.001"}},
        {"wd",           {"-0.001", "0", "10", "10.001"}},
        {"warmup",       {"-1", "0", "100000000", "100000001"}},
        {"clip",         {"-0.001", "0", "1000000", "1000001"}},
        {"max-inflight", {"-1", "0", "4096", "4097"}},
        {"eval-every",   {"-1", "0", "100000000", "100000001"}},
        {"eval-batches", {"-1", "0", "65535", "65536"}},
        {"stages",       {"0", "1", "4", "5"}},                 /* the creator's 3 blocks, split late */
        {"ctx",          {"1", "2", "4096", "4097"}},
        {"layers",       {NULL, "3", "128", "129"}},            /* 0 means the preset's, on the command line */
        {"dim",          {NULL, "2", NULL, "8194"}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        for (int k = 0; k < 4; k++) {
            const char *v = cases[i].v[k];
            if (!v) continue;
            char ec[512] = "", ej[512] = "";
            int rc = s_creator_with(cases[i].name, v, ec, sizeof ec);
            int rj = s_joiner_gets(cases[i].name, v, ej, sizeof ej);
            int bad = k == 0 || k == 3;
            if (!bad) {
                CHECKF(rc == 0, "creator --%s %s refused: %s", cases[i].name, v, ec);
                CHECKF(rj == 0, "joiner refused --%s %s: %s", cases[i].name, v, ej);
                continue;
            }
            char opt[64], want[600];
            snprintf(opt, sizeof opt, "--%s ", cases[i].name);
            snprintf(want, sizeof want, "run config: %s", ec);
            CHECKF(rc == -1 && strstr(ec, opt) == ec, "creator --%s %s: rc %d '%s'", cases[i].name, v, rc, ec);
            CHECKF(rj == -1 && strcmp(ej, want) == 0, "joiner --%s %s: rc %d '%s', creator said '%s'", cases[i].name, v, rj, ej, ec);
        }
    }
    /* the case that started it: a run the creator starts, every joiner refuses */
    char err[512];
    CHECK(s_creator_with("steps", "100000001", err, sizeof err) == -1);
    CHECKF(strcmp(err, "--steps 100000001: must be 1..100000000") == 0, "%s", err);
}

/* The stage count has one bound (MODEL_STAGES_MAX): a model that could be
 * cut finer (an mlp of 128 hidden layers has 129 units) is refused past it
 * on both sides, with the same message; --stage N likewise. */
static void test_opts_stages_max(void)
{
    char ec[512] = "", ej[512] = "";
    opts_t o;
    int rc = s_parse(&o, OPTS_NODE, "--model mlp-fmnist --layers 128 --dim 8 --stages 129", ec, sizeof ec);
    if (rc == 0) rc = opts_resolve(&o, ec, sizeof ec);
    CHECKF(rc == -1 && strcmp(ec, "--stages 129: must be 1..128") == 0, "rc %d: %s", rc, ec);
    CHECK(s_parse(&o, OPTS_NODE, "--model mlp-fmnist --layers 128 --dim 8 --stages 128", ec, sizeof ec) == 0);
    CHECKF(opts_resolve(&o, ec, sizeof ec) == 0, "%s", ec);
    o.stages = 129;   /* a creator's config past the bound, as a joiner would receive it */
    opts_t j;
    s_joiner(&j);
    uint8_t buf[8192];
    size_t len = s_encode(&o, buf, sizeof buf);
    rbuf_t r;
    rbuf_init(&r, buf, len);
    CHECK(proto_get_runcfg(&r, &j, ej, sizeof ej) == -1);
    CHECKF(strcmp(ej, "run config: --stages 129: must be 1..128") == 0, "%s", ej);
    CHECK(s_refused(OPTS_NODE, "--stage 128", "--stage 128: want auto or a stage number 0..127"));
    CHECK(s_parse(&o, OPTS_NODE, "--stage 127", ec, sizeof ec) == 0 && o.stage == 127);
}

/* --eval-batches: one default for solo and node (by model kind), and the
 * batches an evaluation runs over. */
static void test_opts_eval_batches(void)
{
    opts_t o;
    char err[512];
    for (int which = OPTS_SOLO; which <= OPTS_NODE; which++) {
        CHECK(s_parse(&o, which, "--model gpt-tiny", err, sizeof err) == 0 && opts_resolve(&o, err, sizeof err) == 0);
        CHECKF(o.eval_batches == 32, "%s: gpt default %d", which == OPTS_SOLO ? "solo" : "node", o.eval_batches);
        CHECK(s_parse(&o, which, "--model mlp-fmnist", err, sizeof err) == 0 && opts_resolve(&o, err, sizeof err) == 0);
        CHECKF(o.eval_batches == 0, "%s: mlp default %d", which == OPTS_SOLO ? "solo" : "node", o.eval_batches);
        CHECK(s_parse(&o, which, "--model mlp-fmnist --eval-batches 7", err, sizeof err) == 0 && opts_resolve(&o, err, sizeof err) == 0);
        CHECK(o.eval_batches == 7);
    }
    o.eval_batches = 7;
    CHECK(opts_eval_batches(&o, 100) == 7);
    CHECK(opts_eval_batches(&o, 3) == 3);        /* never more than the data holds */
    o.eval_batches = 0;                          /* all */
    CHECK(opts_eval_batches(&o, 156) == 156);
    CHECK(opts_eval_batches(&o, 1 << 20) == OPTS_EVAL_BATCHES_MAX);
}

/* The node's own options: bounds of the table, checked by opts_resolve. */
static void test_opts_local_bounds(void)
{
    CHECK(s_refused(OPTS_NODE, "--threads 0", "--threads 0: must be 1..256"));
    CHECK(s_refused(OPTS_NODE, "--threads 257", "--threads 257"));
    CHECK(s_refused(OPTS_NODE, "--save-every 0", "--save-every 0"));
    CHECK(s_refused(OPTS_NODE, "--http 65536", "--http 65536"));
    CHECK(s_refused(OPTS_NODE, "--emu-latency-ms -1", "--emu-latency-ms -1"));
    CHECK(s_refused(OPTS_NODE, "--emu-slowdown 0.5", "--emu-slowdown 0.5: must be in [1, 1000]"));
    CHECK(s_refused(OPTS_NODE, "--emu-loss 1.5", "--emu-loss 1.5"));
    CHECK(s_refused(OPTS_NODE, "--advertise *:7000", "--advertise"));
    CHECK(s_refused(OPTS_NODE, "--advertise h\"x:7000", "--advertise"));
    CHECK(s_refused(OPTS_SOLO, "--stages 0", "--stages 0"));
    opts_t o;
    char err[512];
    CHECK(s_parse(&o, OPTS_NODE, "--threads 256 --http 65535 --emu-slowdown 1000 --advertise example.org:7000", err, sizeof err) == 0);
    CHECKF(opts_resolve(&o, err, sizeof err) == 0, "%s", err);
    /* the commands' own defaults */
    CHECK(s_parse(&o, OPTS_SOLO, "", err, sizeof err) == 0 && opts_resolve(&o, err, sizeof err) == 0);
    CHECK(o.stages == 1 && strcmp(o.codec, "fp32") == 0 && strcmp(o.grad_codec, "fp32") == 0);
    CHECK(s_parse(&o, OPTS_NODE, "", err, sizeof err) == 0 && opts_resolve(&o, err, sizeof err) == 0);
    CHECK(o.stages == 4 && strcmp(o.codec, "int8") == 0 && strcmp(o.grad_codec, "int8") == 0);
}

/* ---- metrics: JSON always ---------------------------------------------- */

/* Reads path's lines into lines[] (at most max, each NUL-terminated, no
 * newline); returns their count, or -1 when a line lacks its newline. */
static int s_read_lines(const char *path, char lines[][8192], int max)
{
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int n = 0;
    while (n < max && fgets(lines[n], 8192, f)) {
        size_t l = strlen(lines[n]);
        if (l == 0 || lines[n][l - 1] != '\n') { fclose(f); return -1; }
        lines[n][l - 1] = '\0';
        n++;
    }
    fclose(f);
    return n;
}

static void test_json_quote(void)
{
    char q[JSON_QUOTE_LEN(16)];
    CHECK(json_quote(q, sizeof q, "a\"b\\c\n\r\t", 64) == strlen(q));
    CHECK(strcmp(q, "\"a\\\"b\\\\c\\n\\r\\t\"") == 0);
    json_quote(q, sizeof q, "\x01\x1f\x7f\xff z", 64);
    CHECK(strcmp(q, "\"\\u0001\\u001f\\u007f\\u00ff z\"") == 0);
    json_quote(q, sizeof q, NULL, 64);
    CHECK(strcmp(q, "\"\"") == 0);
    json_quote(q, sizeof q, "abcdef", 3);   /* maxlen cuts the input */
    CHECK(strcmp(q, "\"abc\"") == 0);
    /* output too small: cut before the escape that does not fit, still closed */
    for (size_t cap = 3; cap <= 16; cap++) {
        char small[16];
        size_t k = json_quote(small, cap, "\"\"\"\"\"\"\"\"", 64);
        CHECKF(k < cap && json_valid(small, k), "cap %zu: %s", cap, small);
    }
    char b[32];
    CHECK(strcmp(json_number(b, sizeof b, NAN), "null") == 0);
    CHECK(strcmp(json_number(b, sizeof b, -INFINITY), "null") == 0);
    CHECK(strcmp(json_number(b, sizeof b, 0.25), "0.25") == 0);
}

static void test_metrics_lines_are_json(void)
{
    char path[300], err[256];
    snprintf(path, sizeof path, "%s/m.jsonl", s_dir);
    metrics_t *m = metrics_open(path, "n\"1", err, sizeof err);
    CHECK(m != NULL);
    if (!m) return;
    metrics_set_stage(m, 2);
    /* what a hostile peer controls: an address, a reason built from its bytes */
    const char *evil = "a\",\"event\":\"forged\",\"x\":\"\\\n\x01\xc3\xa9";
    metrics_event(m, "peer", "\"peer\":%s,\"what\":\"joined\",\"why\":%s,\"peer_stage\":%d,\"addr\":%s",
                  "abcd1234", "gossip", 1, evil);
    metrics_event(m, "update", "\"loss\":%.9g,\"acc\":%.6f,\"lr\":%g,\"n\":%llu,\"z\":%zu,\"d\":%d",
                  NAN, INFINITY, -INFINITY, 18446744073709551615ULL, (size_t)7, -3);
    metrics_event(m, "drop", "\"why\":\"silent %.1f s\",\"from\":\"%08llx\",\"p\":%s,\"pct\":\"100%%\"",
                  NAN, 0xdeadbeefULL, "");
    metrics_event(m, "end", NULL);
    char long_s[3000];
    memset(long_s, '"', sizeof long_s - 1);
    long_s[sizeof long_s - 1] = '\0';
    metrics_event(m, "long", "\"s\":%s", long_s);
    metrics_set_stage(m, -1);
    metrics_event(m, "ev\"il", "\"k\":1");
    metrics_close(&m);
    CHECK(m == NULL);

    static char lines[8][8192];
    int n = s_read_lines(path, lines, 8);
    CHECKF(n == 6, "%d lines", n);
    for (int i = 0; i < n; i++) {
        CHECKF(json_valid(lines[i], strlen(lines[i])), "line %d: %s", i + 1, lines[i]);
        CHECKF(lines[i][0] == '{' && strstr(lines[i], "\"t\":") && strstr(lines[i], "\"event\":")
               && strstr(lines[i], "\"node\":\"n\\\"1\"") && strstr(lines[i], "\"stage\":"), "line %d: %s", i + 1, lines[i]);
    }
    if (n < 6) return;
    CHECK(strstr(lines[0], "\"stage\":2,") != NULL);
    CHECK(strstr(lines[0], "\"addr\":\"a\\\",\\\"event\\\":\\\"forged\\\",\\\"x\\\":\\\"\\\\\\n\\u0001\\u00c3\\u00a9\"}") != NULL);
    CHECK(strstr(lines[0], "\"event\":\"forged\"") == NULL);
    CHECK(strstr(lines[1], "\"loss\":null,\"acc\":null,\"lr\":null,\"n\":18446744073709551615,\"z\":7,\"d\":-3}") != NULL);
    CHECK(strstr(lines[2], "\"why\":\"silent null s\",\"from\":\"deadbeef\",\"p\":\"\",\"pct\":\"100%\"}") != NULL);
    CHECK(strstr(lines[3], "\"event\":\"end\"") != NULL && strstr(lines[3], "\"stage\":2}") != NULL);
    CHECKF(strlen(lines[4]) < 2 * METRICS_STR_MAX + 100, "%zu bytes", strlen(lines[4]));   /* cut at METRICS_STR_MAX */
    CHECK(strstr(lines[5], "\"event\":\"ev\\\"il\"") != NULL && strstr(lines[5], "\"stage\":null") != NULL);
}

/* 1 when metrics_event(fields, arg) in a child process dies by an assert
 * (SIGABRT); its message goes to /dev/null. */
static int s_metrics_refuses(const char *fields, int arg)
{
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
        if (!freopen("/dev/null", "w", stderr)) _exit(3);
        char path[300], err[256];
        snprintf(path, sizeof path, "%s/refused.jsonl", s_dir);
        metrics_t *m = metrics_open(path, "n", err, sizeof err);
        if (!m) _exit(3);
        metrics_event(m, "x", fields, arg);
        metrics_close(&m);
        _exit(0);
    }
    int st = 0;
    if (child < 0 || waitpid(child, &st, 0) != child) return 0;
    return WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT;
}

/* A bare value that printf would write as "+1", "ff", "1." or "007" is not
 * JSON: the format is refused; inside the format's quotes it is a string. */
static void test_metrics_refuses_non_json_conversions(void)
{
    const char *bad[] = {"\"n\":%+d", "\"n\":%x", "\"n\":%X", "\"n\":%#x", "\"n\":%05d", "\"n\":%+.1f",
                         "\"n\":%#.0f"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECKF(s_metrics_refuses(bad[i], 1), "%s written", bad[i]);
    const char *good[] = {"\"n\":%d", "\"n\":\"%x\"", "\"n\":\"%+05d\"", "\"n\":% d", "\"n\":%-4d"};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++)
        CHECKF(!s_metrics_refuses(good[i], 1), "%s refused", good[i]);
    char path[300], err[256];
    snprintf(path, sizeof path, "%s/quoted.jsonl", s_dir);
    unlink(path);
    metrics_t *m = metrics_open(path, "n", err, sizeof err);
    CHECK(m != NULL);
    if (!m) return;
    metrics_event(m, "x", "\"h\":\"%X\",\"p\":\"%+d\",\"z\":\"%03d\",\"s\":% d", 255, 5, 7, 2);
    metrics_close(&m);
    static char lines[2][8192];
    CHECK(s_read_lines(path, lines, 2) == 1);
    CHECKF(json_valid(lines[0], strlen(lines[0])), "%s", lines[0]);
    CHECKF(strstr(lines[0], "\"h\":\"FF\",\"p\":\"+5\",\"z\":\"007\",\"s\": 2}") != NULL, "%s", lines[0]);
}

/* ---- sim's random fault plans --------------------------------------------- */

/* A random partition names 1..64 nodes (the size of plan_ev_t's set), each
 * one of the swarm's, however many nodes it has: with --nodes 200 one side
 * could be drawn up to 100 nodes long and was read past its set. */
static void test_sim_plan_random_partitions(void)
{
    for (int nodes = 2; nodes <= 1000; nodes = nodes * 3 + 1) {
        plan_ev_t *ev = NULL;
        int n = sim_plan_random(7, nodes, 300, 60.0, &ev), bad = 0, parts = 0;
        CHECK(n > 0 && ev != NULL);
        for (int i = 0; i < n; i++) {
            if (ev[i].kind != PLAN_PARTITION) continue;
            parts++;
            if (ev[i].nset < 1 || ev[i].nset > 64) { bad++; continue; }
            for (int j = 0; j < ev[i].nset; j++) {
                bad += ev[i].set[j] < 0 || ev[i].set[j] >= nodes;
                for (int k = 0; k < j; k++) bad += ev[i].set[k] == ev[i].set[j];   /* a node twice: a smaller side than drawn */
            }
        }
        CHECKF(parts > 0 && bad == 0, "%d nodes: %d members of %d partitions out of bounds or repeated", nodes, bad, parts);
        free(ev);
    }
}

/* ---- the compute side, driven by hand ------------------------------------ */

typedef struct {
    double now;
    mail_t *out[256];      /* mail posted to the network side */
    int nout;
    char said[8][256];     /* the last lines for the user */
    int nsaid;
} hand_t;

static double s_hand_now(void *arg) { return ((hand_t *)arg)->now; }
static uint64_t s_hand_wall(void *arg) { return 1700000000000ULL + (uint64_t)(((hand_t *)arg)->now * 1000); }

static void s_hand_post(void *arg, mail_t *m)
{
    hand_t *h = arg;
    if (h->nout < (int)(sizeof h->out / sizeof h->out[0])) h->out[h->nout++] = m;
    else mail_free(m);
}

static void s_hand_say(void *arg, const char *line)
{
    hand_t *h = arg;
    snprintf(h->said[h->nsaid % 8], sizeof h->said[0], "%s", line);
    h->nsaid++;
}

static void s_hand_clear(hand_t *h)
{
    for (int i = 0; i < h->nout; i++) mail_free(h->out[i]);
    h->nout = 0;
}

/* Node options of a small gpt cut into `stages` stages of one layer each. */
static void s_hand_opts(opts_t *o, char *stages)
{
    char err[256];
    char *argv[] = { "node", "--stages", stages, "--layers", stages, "--dim", "16", "--heads", "1", "--ctx", "8", "--batch", "1" };
    opts_defaults(o, OPTS_NODE);
    CHECKF(opts_parse(o, OPTS_NODE, 13, argv, 1, err, sizeof err) == 0 && opts_resolve(o, err, sizeof err) == 0, "%s", err);
}

/* A compute side on cc driven by hand: its clock, mail and lines go to h,
 * its counters to net, its metrics (named name) to *mt; flushed once, and
 * the tensor sizes it said it takes into *in_n and *out_n (either NULL).
 * NULL (a failed check) when it cannot be made. */
static compute_t *s_hand_compute(hand_t *h, net_counters_t *net, metrics_t **mt, compute_cfg_t cc, const char *name,
                                 size_t *in_n, size_t *out_n)
{
    char err[256];
    memset(net, 0, sizeof *net);
    *mt = metrics_open(NULL, name, err, sizeof err);
    cc.net = net;
    cc.metrics = *mt;
    cc.clock = (rt_clock_t){.arg = h, .now = s_hand_now, .wall_ms = s_hand_wall};
    cc.post = s_hand_post;
    cc.post_arg = h;
    cc.obs = (node_observer_t){.arg = h, .say = s_hand_say};
    compute_t *c = compute_new(&cc, err, sizeof err);
    CHECKF(c != NULL, "%s", err);
    if (!c) { metrics_close(mt); return NULL; }
    compute_flush(c);
    for (int i = 0; i < h->nout; i++)
        if (h->out[i]->kind == MAIL_SELF) {
            if (in_n) *in_n = h->out[i]->self.in_n;
            if (out_n) *out_n = h->out[i]->self.out_n;
        }
    return c;
}

/* Ends what s_hand_compute started. */
static void s_hand_end(hand_t *h, compute_t **c, metrics_t **mt)
{
    s_hand_clear(h);
    compute_destroy(c);
    metrics_close(mt);
}

/* The peer a MAIL_FETCH among the posted mail asks (0: a backup), or -1. */
static int64_t s_hand_fetch(const hand_t *h)
{
    int64_t donor = -1;
    for (int i = 0; i < h->nout; i++)
        if (h->out[i]->kind == MAIL_FETCH) donor = (int64_t)h->out[i]->peer;
    return donor;
}

/* A checked tensor (ACT or GRAD) from the network side, as a compute side driven by hand gets it:
 * mb's attempt, n floats, targets bytes of targets (ACT). */
static mail_t *s_hand_tensor(int type, uint64_t mb, int stage, unsigned attempt, uint64_t from, size_t n, size_t targets)
{
    mail_t *m = mail_new(MAIL_TENSOR);
    wire_hdr_init(&m->hdr, (uint8_t)type);
    m->hdr.mb = mb;
    m->hdr.stage = (uint16_t)stage;
    m->hdr.flags = attempt << MB_ATTEMPT_SHIFT;
    m->peer = m->hdr.sender = from;
    m->n = n;
    m->aux_len = targets;
    m->aux = targets ? calloc(targets, 1) : NULL;
    return m;
}

/* The network side ends a fetch of stage's state from donor with nothing. */
static void s_hand_fetch_fails(compute_t *c, hand_t *h, int stage, uint64_t donor)
{
    s_hand_clear(h);
    mail_t *m = mail_new(MAIL_STATE);
    m->hdr.stage = (uint16_t)stage;
    m->peer = donor;
    compute_on_mail(c, m);   /* ownership passes */
    compute_flush(c);
}

/* A node moved to the slowest stage whose download from a peer of it ends
 * with nothing asks the stage's peers again (three tries in all), then a
 * backup, before it serves the stage from its initial weights (a mover went
 * straight to them, at version 0 beside trained replicas, where a joiner
 * asked elsewhere). */
static void test_mover_fetches_elsewhere(void)
{
    opts_t o;
    s_hand_opts(&o, "4");
    const struct { uint64_t id; int stage; float rate; uint32_t version; } ps[] = {
        {10, 0, 10.0f, 0}, {50, 1, 1.0f, 0}, {60, 2, 0.05f, 500}, {61, 2, 0.05f, 499}, {70, 3, 10.0f, 0}};
    peer_view_t *v = peer_view_new(5);
    for (int i = 0; i < 5; i++) {
        v->p[i] = (view_peer_t){.id = ps[i].id, .stage = ps[i].stage, .health = PEER_ALIVE, .rtt_ms = 20,
                                .rtt_min_ms = 20, .rate = ps[i].rate, .loss = NAN, .version = ps[i].version};
    }
    v->plan = SPLIT_EVEN;
    peer_view_index(v);
    hand_t h = {.now = 100.0};
    net_counters_t net;
    metrics_t *mt;
    size_t in_n = 0;   /* the activation size the node said it takes */
    compute_t *c = s_hand_compute(&h, &net, &mt, (compute_cfg_t){.o = &o, .id = 99, .run = 1, .stage = 1, .plan = SPLIT_EVEN,
                                                                 .view = v, .modelled = 1}, "mover", &in_n, NULL);
    if (!c) return;
    s_hand_clear(&h);
    /* one microbatch in a second here: stage 2 is the slowest by far */
    compute_on_mail(c, s_hand_tensor(WIRE_ACT, 12345, 1, 1, 10, in_n, (size_t)o.batch * (size_t)o.cfg.maxT));
    compute_step(c, NULL);
    compute_account(c, 1.0);
    compute_flush(c);
    s_hand_clear(&h);
    h.now += 130.0;            /* moves for speed wait for rates to settle */
    compute_tick(c);
    compute_flush(c);
    /* every fetch ends with nothing: the donors asked, in order */
    int64_t asked[8];
    int n = 0;
    for (int64_t d; n < 8 && (d = s_hand_fetch(&h)) >= 0; n++) {
        asked[n] = d;
        s_hand_fetch_fails(c, &h, 2, (uint64_t)d);
    }
    CHECKF(n == 4 && asked[0] == 60 && asked[1] == 61 && asked[2] == 60 && asked[3] == 0,
           "the mover asked %d times (want 60, 61, 60, then a backup: 0); the first %lld, the last %lld",
           n, n ? (long long)asked[0] : -1LL, n ? (long long)asked[n - 1] : -1LL);
    CHECKF(h.nsaid > 0 && strstr(h.said[(h.nsaid - 1) % 8], "initial weights"),
           "after every fetch failed: '%s' (want the initial weights)", h.nsaid ? h.said[(h.nsaid - 1) % 8] : "");
    compute_result_t r;
    compute_result(c, &r);
    CHECK(r.stage == 2);
    s_hand_end(&h, &c, &mt);
}

/* A view of n alive peers, ids[i] serving stages[i], 20 ms away, even plan. */
static peer_view_t *s_hand_view(int n, const uint64_t *ids, const int *stages)
{
    peer_view_t *v = peer_view_new(n);
    for (int i = 0; i < n; i++)
        v->p[i] = (view_peer_t){.id = ids[i], .stage = stages[i], .health = PEER_ALIVE, .rtt_ms = 20, .rtt_min_ms = 20,
                                .rate = 1, .loss = NAN};
    v->plan = SPLIT_EVEN;
    peer_view_index(v);
    return v;
}

/* A re-issued activation of a microbatch held here that does not fit this
 * stage (another stage or size) is dropped, and the held one stays: its
 * gradient is still taken (the held record was freed before the check, so
 * a bad copy cost a good microbatch). */
static void test_bad_reissue_keeps_held(void)
{
    opts_t o;
    s_hand_opts(&o, "3");
    peer_view_t *v = s_hand_view(2, (uint64_t[]){10, 70}, (int[]){0, 2});
    hand_t h = {.now = 100.0};
    net_counters_t net;
    metrics_t *mt;
    size_t in_n = 0, out_n = 0, targets = (size_t)o.batch * (size_t)o.cfg.maxT;
    compute_t *c = s_hand_compute(&h, &net, &mt, (compute_cfg_t){.o = &o, .id = 99, .run = 1, .stage = 1, .plan = SPLIT_EVEN,
                                                                 .view = v, .modelled = 1}, "reissue", &in_n, &out_n);
    if (!c) return;
    s_hand_clear(&h);
    compute_on_mail(c, s_hand_tensor(WIRE_ACT, 777, 1, 1, 10, in_n, targets));
    compute_step(c, NULL);
    compute_flush(c);
    int sent_on = 0;
    for (int i = 0; i < h.nout; i++) sent_on += h.out[i]->kind == MAIL_SEND && h.out[i]->hdr.type == WIRE_ACT && h.out[i]->peer == 70;
    CHECKF(sent_on == 1, "the activation went on to stage 2 %d times", sent_on);
    s_hand_clear(&h);
    /* attempt 2 of the same microbatch, one float short, then of another stage */
    compute_on_mail(c, s_hand_tensor(WIRE_ACT, 777, 1, 2, 10, in_n - 1, targets));
    compute_on_mail(c, s_hand_tensor(WIRE_ACT, 777, 2, 3, 10, in_n, targets));
    compute_step(c, NULL);
    compute_flush(c);
    s_hand_clear(&h);
    compute_on_mail(c, s_hand_tensor(WIRE_GRAD, 777, 1, 1, 70, out_n, 0));
    compute_step(c, NULL);
    compute_flush(c);
    int sent_back = 0;
    for (int i = 0; i < h.nout; i++)
        sent_back += h.out[i]->kind == MAIL_SEND && h.out[i]->hdr.type == WIRE_GRAD && h.out[i]->peer == 10 && h.out[i]->hdr.mb == 777;
    CHECKF(sent_back == 1, "the held microbatch's gradient went back %d times (want 1)", sent_back);
    s_hand_end(&h, &c, &mt);
}

/* A second copy of the attempt held here (from another previous-stage peer:
 * ids are easy to guess) is dropped: taking it forwarded the microbatch
 * again, possibly to another next-stage peer that applied it too, and sent
 * the honest gradient to the copy's sender. */
static void test_same_attempt_copy_dropped(void)
{
    opts_t o;
    s_hand_opts(&o, "3");
    peer_view_t *v = s_hand_view(4, (uint64_t[]){10, 11, 70, 71}, (int[]){0, 0, 2, 2});
    hand_t h = {.now = 100.0};
    net_counters_t net;
    metrics_t *mt;
    size_t in_n = 0, out_n = 0, targets = (size_t)o.batch * (size_t)o.cfg.maxT;
    compute_t *c = s_hand_compute(&h, &net, &mt, (compute_cfg_t){.o = &o, .id = 99, .run = 1, .stage = 1, .plan = SPLIT_EVEN,
                                                                 .view = v, .modelled = 1}, "copy", &in_n, &out_n);
    if (!c) return;
    uint64_t first_to = 0, again = 0;
    for (int k = 0; k < 3; k++) {   /* the held copy from 10, then twice the same attempt from 11 */
        s_hand_clear(&h);
        compute_on_mail(c, s_hand_tensor(WIRE_ACT, 777, 1, 1, k ? 11 : 10, in_n, targets));
        compute_step(c, NULL);
        compute_flush(c);
        for (int i = 0; i < h.nout; i++)
            if (h.out[i]->kind == MAIL_SEND && h.out[i]->hdr.type == WIRE_ACT) *(k ? &again : &first_to) = h.out[i]->peer;
    }
    compute_result_t r;
    compute_result(c, &r);
    CHECKF(first_to != 0 && again == 0 && r.drops == 2, "held copy sent to %llu; the same attempt again sent to %llu, drops %llu (want 2)",
           (unsigned long long)first_to, (unsigned long long)again, (unsigned long long)r.drops);
    s_hand_clear(&h);
    compute_on_mail(c, s_hand_tensor(WIRE_GRAD, 777, 1, 1, first_to, out_n, 0));
    compute_step(c, NULL);
    compute_flush(c);
    uint64_t back_to = 0;
    for (int i = 0; i < h.nout; i++) if (h.out[i]->kind == MAIL_SEND && h.out[i]->hdr.type == WIRE_GRAD) back_to = h.out[i]->peer;
    CHECKF(back_to == 10, "the gradient went back to %llu, want the held copy's sender 10", (unsigned long long)back_to);
    s_hand_end(&h, &c, &mt);
}

/* An evaluation activation whose id names no batch of its round (index at
 * or past the round's count) is dropped and counted, before any forward. */
static void test_bad_eval_act_counted(void)
{
    opts_t o;
    s_hand_opts(&o, "3");
    peer_view_t *v = s_hand_view(2, (uint64_t[]){10, 50}, (int[]){0, 1});
    hand_t h = {.now = 100.0};
    net_counters_t net;
    metrics_t *mt;
    size_t in_n = 0, targets = (size_t)o.batch * (size_t)o.cfg.maxT;
    compute_t *c = s_hand_compute(&h, &net, &mt, (compute_cfg_t){.o = &o, .id = 99, .run = 1, .stage = 2, .plan = SPLIT_EVEN,
                                                                 .view = v, .modelled = 1}, "evalbad", &in_n, NULL);
    if (!c) return;
    uint64_t ids[] = {(5ull << 32) | (0 << 16) | 3, (5ull << 32) | (4 << 16) | 9, (5ull << 32) | (4 << 16) | 4};
    for (int k = 0; k < 3; k++) {
        mail_t *m = s_hand_tensor(WIRE_ACT, ids[k], 2, 1, 50, in_n, targets);
        m->hdr.flags |= ACT_FLAG_EVAL;
        compute_on_mail(c, m);
        compute_step(c, NULL);
    }
    compute_flush(c);
    compute_result_t r;
    compute_result(c, &r);
    CHECKF(r.drops == 3, "3 evaluation activations naming no batch (count 0; index 9 and 4 of 4): %llu drops counted",
           (unsigned long long)r.drops);
    s_hand_end(&h, &c, &mt);
}

/* A node restarted from its checkpoint (version 630) while a peer of its
 * stage is further ahead downloads from that peer; when no download comes
 * it keeps its checkpoint's state, and refuses a backup older than it (it
 * once fell to its initial weights, which its next save wrote over the
 * checkpoint). */
static void test_restart_keeps_checkpoint(void)
{
    opts_t o;
    char err[256];
    s_hand_opts(&o, "2");
    peer_view_t *v = peer_view_new(2);
    v->p[0] = (view_peer_t){.id = 10, .stage = 0, .health = PEER_ALIVE, .rtt_ms = 20, .rtt_min_ms = 20, .rate = 1, .loss = NAN};
    v->p[1] = (view_peer_t){.id = 60, .stage = 1, .health = PEER_ALIVE, .rtt_ms = 20, .rtt_min_ms = 20, .rate = 1, .loss = NAN,
                            .version = 700};
    v->plan = SPLIT_EVEN;
    peer_view_index(v);
    int use_ck;
    uint64_t donor;
    int start = compute_choose_start(v, 1, 630, 1, &donor, &use_ck);
    CHECK(start == START_DOWNLOAD && donor == 60 && !use_ck);
    stage_state_t *st = stage_state_new(&o.cfg, 1, 2, o.seed, err, sizeof err);
    CHECKF(st != NULL, "%s", err);
    if (!st) { free(v); return; }
    size_t np = st->s.nparams;
    for (size_t i = 0; i < np; i++) st->params[i] = 0.25f;   /* the checkpoint's weights */
    st->version = 630;
    hand_t h = {.now = 100.0};
    net_counters_t net;
    metrics_t *mt;
    compute_t *c = s_hand_compute(&h, &net, &mt, (compute_cfg_t){.o = &o, .id = 99, .run = 1, .stage = 1, .plan = SPLIT_EVEN,
                                                                 .view = v, .st = st, .start = start, .donor = donor},
                                  "restart", NULL, NULL);
    if (!c) return;
    /* every download ends with nothing; every backup that comes is older than the checkpoint */
    int downloads = 0, backups = 0;
    for (int64_t d; downloads + backups < 12 && (d = s_hand_fetch(&h)) >= 0;) {
        if (d > 0) { downloads++; s_hand_fetch_fails(c, &h, 1, (uint64_t)d); continue; }
        backups++;
        s_hand_clear(&h);
        mail_t *m = mail_new(MAIL_STATE);
        m->hdr.stage = 1;
        m->state = state_blob_new(1, np);
        m->state->version = 100;
        m->state->backup = 1;
        m->state->nparams = np;
        compute_on_mail(c, m);
        compute_flush(c);
    }
    CHECKF(downloads >= 1 && backups >= 1 && s_hand_fetch(&h) == -1, "%d downloads, %d backups asked for, still fetching: %d",
           downloads, backups, s_hand_fetch(&h) != -1);
    compute_result_t r;
    compute_result(c, &r);
    const stage_state_t *now = compute_state(c);
    CHECKF(r.version == 630 && now && now->params[0] == 0.25f && now->params[np - 1] == 0.25f,
           "after the downloads failed and an older backup came: version %lld, weights %g (want 630, the checkpoint's 0.25)",
           (long long)r.version, now ? now->params[0] : -1.0);
    CHECKF(h.nsaid > 0 && strstr(h.said[(h.nsaid - 1) % 8], "resumes from its checkpoint at version 630"),
           "said: '%s'", h.nsaid ? h.said[(h.nsaid - 1) % 8] : "");
    s_hand_end(&h, &c, &mt);
}

int main(void)
{
    snprintf(s_dir, sizeof s_dir, "/tmp/brigade-runtime.XXXXXX");
    if (!mkdtemp(s_dir)) { perror("mkdtemp"); return 1; }
    RUN(test_stash_full_keeps_versions_in_use);
    RUN(test_stash_full_many_rounds);
    RUN(test_stash_2bw_keeps_two);
    RUN(test_stash_2bw_many_rounds);
    RUN(test_peers_upsert);
    RUN(test_peers_pick_stage);
    RUN(test_router_pick);
    RUN(test_router_prune);
    RUN(test_router_pick_lowest);
    RUN(test_evalsum);
    RUN(test_applied_floor);
    RUN(test_router_explores);
    RUN(test_router_unknown_priced);
    RUN(test_router_silent);
    RUN(test_router_reach);
    RUN(test_peers_completed);
    RUN(test_peers_replace);
    RUN(test_queue_fifo);
    RUN(test_pending_bounds);
    RUN(test_queue_timeout_empty);
    RUN(test_queue_cross_thread);
    RUN(test_opts_parse_good);
    RUN(test_opts_take);
    RUN(test_opts_parse_bad);
    RUN(test_opts_run_roundtrip);
    RUN(test_opts_run_truncated);
    RUN(test_opts_run_out_of_range);
    RUN(test_opts_run_id);
    RUN(test_opts_run_id_all_run_fields);
    RUN(test_opts_same_bounds_both_sides);
    RUN(test_opts_local_bounds);
    RUN(test_opts_stages_max);
    RUN(test_opts_eval_batches);
    RUN(test_checkpoint_roundtrip);
    RUN(test_checkpoint_extra);
    RUN(test_checkpoint_damaged);
    RUN(test_checkpoint_bad_values);
    RUN(test_sim_plan_random_partitions);
    RUN(test_split_auto_plan);
    RUN(test_mover_fetches_elsewhere);
    RUN(test_restart_keeps_checkpoint);
    RUN(test_bad_reissue_keeps_held);
    RUN(test_same_attempt_copy_dropped);
    RUN(test_bad_eval_act_counted);
    RUN(test_json_quote);
    RUN(test_metrics_lines_are_json);
    RUN(test_metrics_refuses_non_json_conversions);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", s_dir);
    if (system(cmd) != 0) printf("  could not remove %s\n", s_dir);
    CHECK_EXIT();
}
