/* test_proto.c: every body codec of proto.h reads back what it wrote, and
 * refuses a body cut short. */
#include "tests/check.h"
#include "net/keys.h"
#include "node/runtime/proto.h"
#include <string.h>

/* Every cut of buf[0..len) short of full is refused by get (a decoder of
 * (buf, len) returning 0 or -1). */
static int s_cuts_refused(int (*get)(void *out, const uint8_t *buf, size_t len), void *out, const uint8_t *buf, size_t len)
{
    for (size_t n = 0; n < len; n++)
        if (get(out, buf, n) == 0) return 0;
    return 1;
}

static int s_get_join(void *o, const uint8_t *b, size_t n) { return proto_get_join(o, b, n); }
static int s_get_state_pre(void *o, const uint8_t *b, size_t n) { return proto_get_state_pre(o, b, n); }
static int s_get_modelled(void *o, const uint8_t *b, size_t n) { return proto_get_modelled(o, b, n); }

static void test_join_roundtrip(void)
{
    uint8_t ticket[TICKET_LEN];
    for (int i = 0; i < TICKET_LEN; i++) ticket[i] = (uint8_t)(i * 7);
    wbuf_t w;
    wbuf_init(&w, 4096);
    proto_put_join(&w, "10.0.0.7:6001", 2, ticket, 0x1122334455667788ULL);
    CHECK(!wbuf_error(&w));
    proto_join_t j;
    CHECK(proto_get_join(&j, w.data, w.len) == 0);
    CHECK(strcmp(j.adv, "10.0.0.7:6001") == 0);
    CHECK(j.want == 2);
    CHECK(j.tlen == TICKET_LEN && j.ticket && memcmp(j.ticket, ticket, TICKET_LEN) == 0);
    CHECK(j.has_hint && j.hint_run == 0x1122334455667788ULL);
    wbuf_free(&w);
    /* no ticket, no stage wanted: no hint either, and the body ends at the ticket */
    wbuf_init(&w, 4096);
    proto_put_join(&w, "h:1", -1, NULL, 99);
    CHECK(proto_get_join(&j, w.data, w.len) == 0);
    CHECK(j.want == -1 && j.tlen == 0 && !j.has_hint);
    CHECK(w.len == 4 + 3 + 4 + 4);
    CHECK(s_cuts_refused(s_get_join, &j, w.data, w.len));
    wbuf_free(&w);
}

static void test_welcome_roundtrip(void)
{
    wbuf_t w;
    wbuf_init(&w, 64);
    proto_welcome_t a = { .stage = 3, .shard = 17, .done = 1, .reachable = 0 }, b;
    proto_put_welcome(&w, &a);
    CHECK(w.len == 10);
    CHECK(proto_get_welcome(&b, w.data, w.len) == 0);
    CHECK(b.stage == 3 && b.shard == 17 && b.done == 1 && b.reachable == 0);
    /* an older bootstrap's, without the reachability byte: reachable */
    CHECK(proto_get_welcome(&b, w.data, 9) == 0 && b.reachable == 1);
    CHECK(proto_get_welcome(&b, w.data, 8) == -1);
    wbuf_free(&w);
}

static void test_runcfg_roundtrip(void)
{
    opts_t o, j;
    char err[256];
    opts_defaults(&o, OPTS_NODE);
    CHECKF(opts_resolve(&o, err, sizeof err) == 0, "%s", err);
    o.seed = 12345;
    o.closed = 1;
    for (int i = 0; i < 32; i++) o.owner_pub[i] = (uint8_t)i;
    opts_defaults(&j, OPTS_NODE);
    wbuf_t w;
    wbuf_init(&w, 1 << 16);
    proto_put_runcfg(&w, &o);
    rbuf_t r;
    rbuf_init(&r, w.data, w.len);
    CHECKF(proto_get_runcfg(&r, &j, err, sizeof err) == 0, "%s", err);
    CHECK(rbuf_remaining(&r) == 0);
    CHECK(opts_run_id(&j) == opts_run_id(&o));
    CHECK(j.seed == 12345 && j.closed == 1 && memcmp(j.owner_pub, o.owner_pub, 32) == 0);
    rbuf_init(&r, w.data, w.len - 1);
    CHECK(proto_get_runcfg(&r, &j, err, sizeof err) == -1);
    wbuf_free(&w);
}

static void test_table_roundtrip(void)
{
    peer_info_t recs[2];
    memset(recs, 0, sizeof recs);
    for (int i = 0; i < 2; i++) {
        keypair_t kp;
        char err[200];
        CHECKF(keypair_generate(&kp, err, sizeof err) == 0, "%s", err);
        memcpy(recs[i].pubkey, kp.pub, 32);
        recs[i].id = node_id_from_pubkey(kp.pub);
        snprintf(recs[i].addr, sizeof recs[i].addr, "10.0.0.%d:6000", i + 1);
        recs[i].stage = (int16_t)i;
    }
    uint8_t blob[ANNOUNCE_LEN];
    memset(blob, 0x5a, sizeof blob);
    const uint8_t *blobs[2] = { blob, NULL };
    wbuf_t w;
    wbuf_init(&w, 1 << 16);
    proto_put_table(&w, recs, blobs, 2);
    rbuf_t r;
    rbuf_init(&r, w.data, w.len);
    peer_info_t got[4];
    int k = 0;
    char err[200];
    CHECKF(peers_decode(&r, got, 4, &k, err, sizeof err) == 0, "%s", err);
    CHECK(k == 2 && got[1].id == recs[1].id && strcmp(got[0].addr, recs[0].addr) == 0);
    const uint8_t *gb[2];
    size_t gl[2];
    CHECK(proto_get_announces(&r, k, gb, gl) == 0);
    CHECK(gl[0] == ANNOUNCE_LEN && memcmp(gb[0], blob, ANNOUNCE_LEN) == 0 && gl[1] == 0);
    CHECK(rbuf_remaining(&r) == 0);
    CHECK(proto_table_count(w.data, w.len) == 2 && proto_table_count(w.data, 3) == 0);
    /* a count other than the records' is refused */
    rbuf_init(&r, w.data, w.len);
    CHECK(peers_decode(&r, got, 4, &k, err, sizeof err) == 0);
    CHECK(proto_get_announces(&r, 1, NULL, NULL) == -1);
    wbuf_free(&w);
}

static void test_peers_tail_roundtrip(void)
{
    static proto_peers_tail_t t, g;
    t.completed = 1000;
    t.loss = 2.5f;
    t.done = 1;
    t.np = 2;
    t.id[0] = 11; t.done_by[0] = 111;
    t.id[1] = 22; t.done_by[1] = 222;
    t.said = 1;
    t.progress = 5000;
    wbuf_t w;
    wbuf_init(&w, 1 << 16);
    proto_put_peers_tail(&w, &t);
    CHECK(w.len == 17 + 2 * 16 + 8);
    rbuf_t r;
    rbuf_init(&r, w.data, w.len);
    CHECK(proto_get_peers_tail(&r, &g) == 0);
    CHECK(g.completed == 1000 && g.loss == 2.5f && g.done == 1 && g.np == 2);
    CHECK(g.id[1] == 22 && g.done_by[1] == 222 && g.said && g.progress == 5000);
    /* an older sender's, without the run's progress */
    rbuf_init(&r, w.data, w.len - 8);
    CHECK(proto_get_peers_tail(&r, &g) == 0 && !g.said);
    rbuf_init(&r, w.data, w.len - 9);
    CHECK(proto_get_peers_tail(&r, &g) == -1);
    wbuf_free(&w);
}

static void test_state_pre_roundtrip(void)
{
    uint8_t pre[PROTO_STATE_PRE_LEN];
    uint64_t total = 3 * (uint64_t)STATE_CHUNK + 5;
    proto_put_state_pre(pre, total, 0xdeadbeefu, 42);
    proto_state_pre_t p;
    CHECK(proto_get_state_pre(&p, pre, sizeof pre) == 0);
    CHECK(p.total == total && p.checksum == 0xdeadbeefu && p.version == 42 && p.nchunks == 4);
    CHECK(s_cuts_refused(s_get_state_pre, &p, pre, sizeof pre));
}

static void test_status_roundtrip(void)
{
    proto_status_t s = { .nstages = 4, .target = 800, .completed = 123, .loss = 1.25f }, g;
    snprintf(s.model, sizeof s.model, "gpt-tiny");
    wbuf_t w;
    wbuf_init(&w, 1 << 16);
    proto_put_status(&w, &s);
    proto_put_table(&w, NULL, NULL, 0);
    uint8_t links[1] = { STATUS_LINK_RELAY };
    proto_put_links(&w, links, 1);
    rbuf_t r;
    rbuf_init(&r, w.data, w.len);
    CHECK(proto_get_status(&r, &g) == 0);
    CHECK(g.nstages == 4 && g.target == 800 && g.completed == 123 && g.loss == 1.25f);
    CHECK(strcmp(g.model, "gpt-tiny") == 0);
    peer_info_t recs[1];
    int k = -1;
    char err[200];
    CHECKF(peers_decode(&r, recs, 1, &k, err, sizeof err) == 0, "%s", err);
    CHECK(k == 0);
    const uint8_t *blobs[1];
    size_t lens[1];
    uint8_t got[1];
    proto_get_status_rest(&r, k, blobs, lens, got);
    CHECK(!rbuf_error(&r));   /* (links past the k records are not read) */
    rbuf_init(&r, w.data, 10);
    CHECK(proto_get_status(&r, &g) == -1);
    wbuf_free(&w);
}

static void test_status_links(void)
{
    /* one record's links part, read back; an older node's (no links part) reads as unknown */
    wbuf_t w;
    wbuf_init(&w, 1024);
    wbuf_put_u32(&w, 1);
    wbuf_put_bytes(&w, NULL, 0);
    uint8_t links[1] = { STATUS_LINK_REVERSE };
    proto_put_links(&w, links, 1);
    const uint8_t *blobs[1];
    size_t lens[1];
    uint8_t got[1];
    rbuf_t r;
    rbuf_init(&r, w.data, w.len);
    proto_get_status_rest(&r, 1, blobs, lens, got);
    CHECK(got[0] == STATUS_LINK_REVERSE);
    CHECK(lens[0] == 0);
    rbuf_init(&r, w.data, 8);
    proto_get_status_rest(&r, 1, blobs, lens, got);
    CHECK(got[0] == STATUS_LINK_UNKNOWN);
    wbuf_free(&w);
}

static void test_modelled_roundtrip(void)
{
    uint8_t b[PROTO_MODELLED_LEN];
    proto_put_modelled(b, 123456789012ULL);
    uint64_t n = 0;
    CHECK(proto_get_modelled(&n, b, sizeof b) == 0 && n == 123456789012ULL);
    CHECK(s_cuts_refused(s_get_modelled, &n, b, sizeof b));
}

/* The targets of an ACT: one byte each up to vocabulary 256, then 2, then
 * 4, little-endian; a wrong length or a target not below V is refused. */
static void test_targets_roundtrip(void)
{
    static const struct { int V, w; } widths[] = { { 2, 1 }, { 256, 1 }, { 257, 2 }, { 50257, 2 }, { 65536, 2 },
                                                   { 65537, 4 }, { 1 << 30, 4 } };
    for (size_t k = 0; k < sizeof widths / sizeof widths[0]; k++) {
        int V = widths[k].V, w = proto_target_width(V);
        CHECK(w == widths[k].w);
        int t[5] = { 0, 1, V / 2, V - 2, V - 1 }, back[5];
        uint8_t buf[5 * 4];
        proto_put_targets(buf, t, 5, w);
        CHECK(proto_get_targets(back, buf, 5 * (size_t)w, 5, w, V) == 0);
        CHECK(memcmp(back, t, sizeof t) == 0);
        CHECK(proto_get_targets(NULL, buf, 5 * (size_t)w, 5, w, V) == 0);
        CHECK(proto_get_targets(back, buf, 5 * (size_t)w - 1, 5, w, V) == -1);
        CHECK(proto_get_targets(back, buf, 5 * (size_t)w, 4, w, V) == -1);
        CHECK(proto_get_targets(back, buf, 5 * (size_t)w, 5, w, V - 1) == -1);   /* V - 1 is out of range there */
    }
    /* the byte offsets of proto.h: target i at i*w, low byte first */
    int t[2] = { 0x1234, 0x0201 };
    uint8_t b2[4], b4[8];
    proto_put_targets(b2, t, 2, 2);
    CHECK(b2[0] == 0x34 && b2[1] == 0x12 && b2[2] == 0x01 && b2[3] == 0x02);
    proto_put_targets(b4, t, 2, 4);
    CHECK(b4[0] == 0x34 && b4[1] == 0x12 && b4[2] == 0 && b4[3] == 0 && b4[4] == 0x01 && b4[5] == 0x02);
    uint8_t b1[2] = { 7, 255 };
    int back[2];
    CHECK(proto_get_targets(back, b1, 2, 2, 1, 256) == 0 && back[0] == 7 && back[1] == 255);
    CHECK(proto_get_targets(back, b1, 2, 2, 3, 256) == -1);   /* no such width */
}

static void test_plan_flags(void)
{
    CHECK(plan_of_flags(plan_flags(-1)) == -1);
    CHECK(plan_of_flags(plan_flags(SPLIT_EVEN)) == SPLIT_EVEN);
    CHECK(plan_of_flags(plan_flags(SPLIT_LATE) | ACT_FLAG_EVAL) == SPLIT_LATE);
    CHECK(plan_of_flags(plan_flags(SPLIT_FRONT) | ACT_FLAG_AHEAD) == SPLIT_FRONT);
    CHECK((plan_flags(SPLIT_FRONT) & 0xffffu) == 0);   /* clear of every type's own bits and the attempt */
}

/* Splits chosen apart: every flags word says one split or none, and of any
 * two different splits exactly one takes precedence, none over itself or
 * from an unchosen word, so a node that only ever takes a split of
 * precedence over its own never returns to one it left. */
static void test_plan_outranks(void)
{
    for (uint32_t bits = 0; bits < 8; bits++) {
        plan_t a = plan_of_flags(bits << 16);
        CHECK(a == PLAN_UNCHOSEN || plan_of_flags(plan_flags(a)) == a);
        CHECK(!plan_outranks(a, a) && !plan_outranks(PLAN_UNCHOSEN, a));
        for (uint32_t other = 0; other < 8; other++) {
            plan_t b = plan_of_flags(other << 16);
            CHECK(!(plan_outranks(a, b) && plan_outranks(b, a)));
            CHECK(a == b || plan_outranks(a, b) || plan_outranks(b, a));
            for (uint32_t third = 0; third < 8; third++) {   /* transitive: no cycle of three */
                plan_t c = plan_of_flags(third << 16);
                CHECK(!(plan_outranks(a, b) && plan_outranks(b, c)) || plan_outranks(a, c));
            }
        }
    }
    CHECK(plan_outranks(SPLIT_FRONT, SPLIT_LATE) && plan_outranks(SPLIT_LATE, SPLIT_EVEN));   /* the choosing rule's order */
}

int main(void)
{
    RUN(test_join_roundtrip);
    RUN(test_welcome_roundtrip);
    RUN(test_runcfg_roundtrip);
    RUN(test_table_roundtrip);
    RUN(test_peers_tail_roundtrip);
    RUN(test_state_pre_roundtrip);
    RUN(test_status_roundtrip);
    RUN(test_status_links);
    RUN(test_modelled_roundtrip);
    RUN(test_targets_roundtrip);
    RUN(test_plan_flags);
    RUN(test_plan_outranks);
    CHECK_EXIT();
}
