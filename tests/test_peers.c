/* test_peers: the peer table (node/runtime/peers.h): records added and
 * refreshed, the stage a newcomer picks, the snapshot the compute side
 * reads, and records replaced in place. */
#include "tests/check.h"
#include "node/runtime/peers.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    CHECK(peers_pick_stage(&t, 3, 7, NULL) == 0);   /* empty: the first */
    peer_info_t p;
    p = s_info(10, 0, 5.0f); peers_upsert(&t, &p, 0);
    p = s_info(11, 1, 2.0f); peers_upsert(&t, &p, 0);
    p = s_info(12, 2, 1.0f); peers_upsert(&t, &p, 0);
    p = s_info(13, 2, 1.0f); peers_upsert(&t, &p, 0);
    /* counts 1,1,2: two stages drawn, the less served of them: stage 2 only when drawn with itself (never) */
    int hits[3] = {0};
    for (uint64_t salt = 1; salt <= 200; salt++) {
        int s = peers_pick_stage(&t, 3, salt, NULL);
        CHECK(s >= 0 && s < 3);
        if (s >= 0 && s < 3) hits[s]++;
        CHECK(peers_pick_stage(&t, 3, salt, NULL) == s);   /* the same for the same table and salt */
    }
    CHECKF(hits[0] > 50 && hits[1] > 50 && hits[2] == 0, "drawn %d %d %d", hits[0], hits[1], hits[2]);
    int count[3];
    peers_stage_counts(&t, 3, count);
    CHECK(count[0] == 1 && count[1] == 1 && count[2] == 2);
    /* one more on stage 1 (1,2,2): stage 0 whenever drawn, which with two of three is most of the time */
    p = s_info(14, 1, 0.1f); peers_upsert(&t, &p, 0);
    int zero = 0;
    for (uint64_t salt = 1; salt <= 90; salt++) zero += peers_pick_stage(&t, 3, salt, NULL) == 0;
    CHECKF(zero > 45, "stage 0 drawn %d of 90 times", zero);
    /* a stage nobody serves beats everything */
    CHECK(peers_pick_stage(&t, 4, 9, NULL) == 3);
    /* gone peers do not count: stage 2 drops to one peer, the least served (2,2,1) */
    s_health(&t, 12, PEER_GONE);
    s_health(&t, 10, PEER_GONE);
    p = s_info(15, 0, 1.0f); peers_upsert(&t, &p, 0);
    p = s_info(16, 0, 1.0f); peers_upsert(&t, &p, 0);
    int two = 0;
    for (uint64_t salt = 1; salt <= 90; salt++) two += peers_pick_stage(&t, 3, salt, NULL) == 2;
    CHECKF(two > 45, "stage 2 drawn %d of 90 times", two);
    peers_stage_counts(&t, 3, count);
    CHECK(count[0] == 2 && count[1] == 2 && count[2] == 1);
    /* by work: stage 0 holding 6 of 8 shares, its 2 peers serve it less than stage 2's 1 its single share */
    const double work[3] = {6, 1, 1};
    int zero_w = 0, two_w = 0;
    for (uint64_t salt = 1; salt <= 90; salt++) {
        int s = peers_pick_stage(&t, 3, salt, work);
        zero_w += s == 0;
        two_w += s == 2;
    }
    CHECKF(zero_w > 45 && two_w < zero_w, "by work: stage 0 drawn %d of 90 times, stage 2 %d", zero_w, two_w);
    peers_fini(&t);
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

int main(void)
{
    RUN(test_peers_upsert);
    RUN(test_peers_pick_stage);
    RUN(test_peers_completed);
    RUN(test_peers_replace);
    CHECK_EXIT();
}
