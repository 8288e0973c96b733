/* test_stash: the weight stash (node/runtime/stash.h): every backward pass
 * gets the weights its forward used, with full stashing and with 2BW's two
 * versions, and copies are freed as microbatches finish. */
#include "tests/check.h"
#include "node/runtime/stash.h"

#include <stdint.h>
#include <string.h>

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

int main(void)
{
    RUN(test_stash_full_keeps_versions_in_use);
    RUN(test_stash_full_many_rounds);
    RUN(test_stash_2bw_keeps_two);
    RUN(test_stash_2bw_many_rounds);
    CHECK_EXIT();
}
