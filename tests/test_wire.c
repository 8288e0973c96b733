/* test_wire: header codec, bounded writer/reader, peer records. */
#include "tests/check.h"
#include "net/wire.h"
#include "net/keys.h"

#include <string.h>

static uint64_t s_rng = 0x9E3779B97F4A7C15ull;
static uint64_t s_rand(void)
{
    s_rng ^= s_rng << 13;
    s_rng ^= s_rng >> 7;
    s_rng ^= s_rng << 17;
    return s_rng;
}

static wire_hdr_t s_sample_hdr(void)
{
    wire_hdr_t h;
    wire_hdr_init(&h, WIRE_GRAD);
    h.run = 0x0102030405060708ull;
    h.sender = 0xF1E2D3C4B5A69788ull;
    h.mb = 123456789012ull;
    h.stage = 3;
    h.wversion = 0xDEADBEEF;
    h.flags = 0x80000001u;
    return h;
}

static void test_hdr_roundtrip(void)
{
    wire_hdr_t h = s_sample_hdr(), g;
    uint8_t buf[WIRE_HDR_LEN];
    wire_hdr_encode(buf, &h);
    char err[128];
    CHECK(wire_hdr_decode(&g, buf, sizeof buf, err, sizeof err) == 0);
    CHECK(g.magic == WIRE_MAGIC && g.version == WIRE_VERSION);
    CHECK(g.type == WIRE_GRAD && g.run == h.run && g.sender == h.sender);
    CHECK(g.mb == h.mb && g.stage == 3 && g.wversion == h.wversion && g.flags == h.flags);
    /* little-endian, field by field: magic bytes spell BRGD, run starts LSB */
    CHECK(memcmp(buf, "BRGD", 4) == 0);
    CHECK(buf[4] == WIRE_VERSION && buf[5] == 0);
    CHECK(buf[6] == WIRE_GRAD && buf[7] == 0);
    CHECK(buf[8] == 0x08 && buf[15] == 0x01);
    CHECK(buf[32] == 3 && buf[33] == 0);
    CHECK(buf[41] == 0x80 && buf[38] == 0x01);
    /* every type round-trips and has a name */
    for (int t = 1; t < WIRE_TYPE_END; t++) {
        wire_hdr_init(&h, (wire_type_t)t);
        wire_hdr_encode(buf, &h);
        CHECK(wire_hdr_decode(&g, buf, sizeof buf, err, sizeof err) == 0 && g.type == t);
        CHECK(strcmp(wire_type_name(t), "?") != 0);
    }
    CHECK(strcmp(wire_type_name(WIRE_ACT), "ACT") == 0);
    CHECK(strcmp(wire_type_name(WIRE_STATUS_REQ), "STATUS_REQ") == 0);
    CHECK(strcmp(wire_type_name(0), "?") == 0 && strcmp(wire_type_name(WIRE_TYPE_END), "?") == 0);
}

static void test_hdr_refusals(void)
{
    wire_hdr_t h = s_sample_hdr(), g;
    uint8_t buf[WIRE_HDR_LEN + 8];
    memset(buf, 0, sizeof buf);
    wire_hdr_encode(buf, &h);
    char err[128];
    for (size_t n = 0; n < WIRE_HDR_LEN; n++)
        CHECKF(wire_hdr_decode(&g, buf, n, err, sizeof err) == -1, "length %zu accepted", n);
    CHECK(wire_hdr_decode(&g, buf, WIRE_HDR_LEN + 1, err, sizeof err) == -1);
    CHECK(strstr(err, "expected 42") != NULL);

    uint8_t bad[WIRE_HDR_LEN];
    memcpy(bad, buf, WIRE_HDR_LEN);
    bad[0] = 'X';
    CHECK(wire_hdr_decode(&g, bad, WIRE_HDR_LEN, err, sizeof err) == -1 && strstr(err, "magic"));
    memcpy(bad, buf, WIRE_HDR_LEN);
    bad[4] = WIRE_VERSION + 1;
    CHECK(wire_hdr_decode(&g, bad, WIRE_HDR_LEN, err, sizeof err) == -1 && strstr(err, "version"));
    memcpy(bad, buf, WIRE_HDR_LEN);
    bad[6] = 0;
    CHECK(wire_hdr_decode(&g, bad, WIRE_HDR_LEN, err, sizeof err) == -1 && strstr(err, "type"));
    bad[6] = WIRE_TYPE_END;
    CHECK(wire_hdr_decode(&g, bad, WIRE_HDR_LEN, err, sizeof err) == -1);
    bad[6] = 1; bad[7] = 1;  /* type 257 */
    CHECK(wire_hdr_decode(&g, bad, WIRE_HDR_LEN, err, sizeof err) == -1);
    /* random headers: decode never succeeds with an invalid type */
    for (int i = 0; i < 10000; i++) {
        for (int k = 0; k < WIRE_HDR_LEN; k++) bad[k] = (uint8_t)s_rand();
        if (i & 1) memcpy(bad, buf, 6);
        if (wire_hdr_decode(&g, bad, WIRE_HDR_LEN, err, sizeof err) == 0)
            CHECK(g.magic == WIRE_MAGIC && g.type > 0 && g.type < WIRE_TYPE_END);
    }
}

static void test_wbuf_rbuf_roundtrip(void)
{
    wbuf_t w;
    wbuf_init(&w, 1 << 20);
    wbuf_put_u8(&w, 0xAB);
    wbuf_put_u16(&w, 0xBEEF);
    wbuf_put_u32(&w, 0xCAFEBABE);
    wbuf_put_u64(&w, 0x1122334455667788ull);
    wbuf_put_f32(&w, -1.5f);
    wbuf_put_f64(&w, 3.141592653589793);
    wbuf_put_str(&w, "hello");
    wbuf_put_bytes(&w, "\x00\x01\x02", 3);
    wbuf_put_raw(&w, "xyz", 3);
    for (int i = 0; i < 1000; i++) wbuf_put_u32(&w, (uint32_t)i);  /* forces growth */
    CHECK(!wbuf_error(&w));
    CHECK(w.len == 1 + 2 + 4 + 8 + 4 + 8 + 4 + 5 + 4 + 3 + 3 + 4000);
    CHECK(w.data[1] == 0xEF && w.data[2] == 0xBE);  /* little-endian */

    rbuf_t r;
    rbuf_init(&r, w.data, w.len);
    CHECK(rbuf_get_u8(&r) == 0xAB);
    CHECK(rbuf_get_u16(&r) == 0xBEEF);
    CHECK(rbuf_get_u32(&r) == 0xCAFEBABE);
    CHECK(rbuf_get_u64(&r) == 0x1122334455667788ull);
    CHECK(rbuf_get_f32(&r) == -1.5f);
    CHECK(rbuf_get_f64(&r) == 3.141592653589793);
    char s[16];
    rbuf_get_str(&r, s, sizeof s);
    CHECK(strcmp(s, "hello") == 0);
    size_t n;
    const uint8_t *b = rbuf_get_bytes(&r, 16, &n);
    CHECK(b && n == 3 && b[0] == 0 && b[2] == 2);
    char raw[3];
    rbuf_get_raw(&r, raw, 3);
    CHECK(memcmp(raw, "xyz", 3) == 0);
    int good = 1;
    for (int i = 0; i < 1000; i++) good &= rbuf_get_u32(&r) == (uint32_t)i;
    CHECK(good);
    CHECK(!rbuf_error(&r) && rbuf_remaining(&r) == 0);
    /* one byte more: sticky error, zero value */
    CHECK(rbuf_get_u8(&r) == 0 && rbuf_error(&r));
    wbuf_free(&w);
}

static void test_bounds(void)
{
    /* writer: max respected, sticky */
    wbuf_t w;
    wbuf_init(&w, 10);
    wbuf_put_u64(&w, 1);
    CHECK(!wbuf_error(&w));
    wbuf_put_u32(&w, 2);
    CHECK(wbuf_error(&w) && w.len == 8);
    wbuf_put_u8(&w, 3);
    CHECK(w.len == 8);
    wbuf_free(&w);

    uint8_t fixed[6];
    wbuf_init_fixed(&w, fixed, sizeof fixed);
    wbuf_put_u32(&w, 7);
    wbuf_put_u16(&w, 8);
    CHECK(!wbuf_error(&w) && w.len == 6);
    wbuf_put_u8(&w, 9);
    CHECK(wbuf_error(&w));

    /* reader: a blob longer than its bound, a string that does not fit */
    uint8_t buf[64];
    wbuf_init_fixed(&w, buf, sizeof buf);
    wbuf_put_str(&w, "0123456789");
    rbuf_t r;
    rbuf_init(&r, buf, w.len);
    char s[10];
    rbuf_get_str(&r, s, sizeof s);  /* needs 11 bytes */
    CHECK(rbuf_error(&r) && s[0] == '\0');
    rbuf_init(&r, buf, w.len);
    size_t n;
    CHECK(rbuf_get_bytes(&r, 9, &n) == NULL && n == 0 && rbuf_error(&r));
    /* a length prefix pointing past the end */
    rbuf_init(&r, buf, w.len - 1);
    CHECK(rbuf_get_bytes(&r, 100, &n) == NULL && rbuf_error(&r));
    /* a huge length prefix */
    uint8_t huge[8] = {0xff, 0xff, 0xff, 0xff, 'a', 'b', 'c', 'd'};
    rbuf_init(&r, huge, sizeof huge);
    CHECK(rbuf_get_bytes(&r, SIZE_MAX, &n) == NULL && rbuf_error(&r));
    /* a string with an embedded NUL */
    uint8_t nul[7] = {3, 0, 0, 0, 'a', 0, 'b'};
    rbuf_init(&r, nul, sizeof nul);
    char t[8];
    rbuf_get_str(&r, t, sizeof t);
    CHECK(rbuf_error(&r));
    /* an empty reader */
    rbuf_init(&r, NULL, 5);
    CHECK(rbuf_get_u16(&r) == 0 && rbuf_error(&r));
}

/* Random input through every reader call: never reads past the end (checked
 * by an exact-size heap copy under ASan) and positions stay in range. */
static void test_rbuf_random(void)
{
    int ok = 1;
    for (int it = 0; it < 20000; it++) {
        size_t len = s_rand() % 40;
        uint8_t *buf = malloc(len ? len : 1);
        for (size_t i = 0; i < len; i++) buf[i] = (uint8_t)s_rand();
        if (len >= 4 && (it & 3) == 0) buf[0] = (uint8_t)(s_rand() % 12), buf[1] = buf[2] = buf[3] = 0;
        rbuf_t r;
        rbuf_init(&r, buf, len);
        char s[8];
        uint8_t raw[5];
        size_t n;
        for (int k = 0; k < 12; k++) {
            switch (s_rand() % 9) {
            case 0: rbuf_get_u8(&r); break;
            case 1: rbuf_get_u16(&r); break;
            case 2: rbuf_get_u32(&r); break;
            case 3: rbuf_get_u64(&r); break;
            case 4: rbuf_get_f32(&r); break;
            case 5: rbuf_get_f64(&r); break;
            case 6: rbuf_get_str(&r, s, sizeof s); ok &= strlen(s) < sizeof s; break;
            case 7: { const uint8_t *p = rbuf_get_bytes(&r, 16, &n);
                      ok &= (p == NULL) || (p >= buf && p + n <= buf + len && n <= 16); break; }
            case 8: rbuf_get_raw(&r, raw, sizeof raw); break;
            }
            ok &= r.pos <= r.len;
        }
        free(buf);
    }
    CHECK(ok);
}

static void s_make_peers(peer_info_t *p, int n)
{
    memset(p, 0, sizeof *p * (size_t)n);
    for (int i = 0; i < n; i++) {
        for (int k = 0; k < 32; k++) p[i].pubkey[k] = (uint8_t)s_rand();
        p[i].id = node_id_from_pubkey(p[i].pubkey);
        snprintf(p[i].addr, sizeof p[i].addr, "10.0.0.%d:%d", i, 7000 + i);
        p[i].stage = (int16_t)(i % 5 - 1);
        p[i].rate = 1.5f * (float)i;
        p[i].rtt_ms = 0.25f * (float)i;
        p[i].version = (uint32_t)(100 + i);
        p[i].seen_ms = 1000ull * (uint64_t)i;
    }
}

static void test_peer_addr_valid(void)
{
    char longest[PEER_ADDR_MAX], too_long[PEER_ADDR_MAX + 1];
    memset(longest, 'h', sizeof longest);
    memcpy(longest + PEER_ADDR_MAX - 6, ":7000", 6);          /* PEER_ADDR_MAX - 1 characters */
    memset(too_long, 'h', sizeof too_long);
    memcpy(too_long + PEER_ADDR_MAX - 5, ":7000", 6);         /* PEER_ADDR_MAX characters */
    const char *good[] = {"10.0.0.1:7000", "example.org:1", "[::1]:65535", "[fe80::1]:7700",
                          "host_name-1.example:80", longest};
    const char *bad[] = {"", "h", ":7000", "h:", "h:0", "h:65536", "h:99999999999", "h:7000/KEY",
                         "h:7000 ", " h:7000", "a b:7000", "a\"b:7000", "a\\b:7000", "a,b:7000",
                         "*:7000", "[::1:7000", "[zz]:7000", "[]:7000", "h:-1", "h:+80", "h:7000\n",
                         "h\x01:7000", "h\xc3\xa9:7000", "a}{:1", too_long};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) CHECKF(peer_addr_valid(good[i]), "%s", good[i]);
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) CHECKF(!peer_addr_valid(bad[i]), "%s", bad[i]);
}

static void test_peers(void)
{
    enum { N = 5 };
    peer_info_t in[N], out[N];
    s_make_peers(in, N);
    wbuf_t w;
    wbuf_init(&w, 1 << 16);
    peers_encode(&w, in, N);
    CHECK(!wbuf_error(&w));

    rbuf_t r;
    int n = -1;
    char err[128] = "";
    rbuf_init(&r, w.data, w.len);
    CHECK(peers_decode(&r, out, N, &n, err, sizeof err) == 0 && n == N);
    CHECK(rbuf_remaining(&r) == 0);
    for (int i = 0; i < N && n == N; i++) {
        CHECK(out[i].id == in[i].id && strcmp(out[i].addr, in[i].addr) == 0);
        CHECK(memcmp(out[i].pubkey, in[i].pubkey, 32) == 0);
        CHECK(out[i].stage == in[i].stage && out[i].rate == in[i].rate);
        CHECK(out[i].rtt_ms == in[i].rtt_ms && out[i].version == in[i].version);
        CHECK(out[i].seen_ms == in[i].seen_ms);
    }
    /* bounded: more records than room */
    rbuf_init(&r, w.data, w.len);
    CHECK(peers_decode(&r, out, N - 1, &n, err, sizeof err) == -1 && n == 0);
    CHECK(strstr(err, "at most") != NULL);
    /* every truncation refused */
    int all = 1;
    for (size_t len = 0; len < w.len; len++) {
        rbuf_init(&r, w.data, len);
        all &= peers_decode(&r, out, N, &n, err, sizeof err) == -1 && n == 0;
    }
    CHECK(all);
    wbuf_free(&w);

    /* semantic checks: forged id, NaN rate, bad address */
    peer_info_t bad[1];
    const char *expect[3] = {"id does not match", "bad rate", "address"};
    for (int c = 0; c < 3; c++) {
        s_make_peers(bad, 1);
        if (c == 0) bad[0].id ^= 1;
        if (c == 1) bad[0].rate = NAN;
        if (c == 2) strcpy(bad[0].addr, "a b");
        wbuf_init(&w, 1 << 12);
        peers_encode(&w, bad, 1);
        rbuf_init(&r, w.data, w.len);
        CHECK(peers_decode(&r, out, 1, &n, err, sizeof err) == -1);
        CHECKF(strstr(err, expect[c]) != NULL, "case %d: %s", c, err);
        wbuf_free(&w);
    }
    /* addresses that would break out of a JSON string or name no peer */
    const char *hostile[] = {"a\"b:7000", "a\\b:7000", "*:7000", "h:0", "h:7000/KEY"};
    for (size_t c = 0; c < sizeof hostile / sizeof *hostile; c++) {
        s_make_peers(bad, 1);
        snprintf(bad[0].addr, sizeof bad[0].addr, "%s", hostile[c]);
        wbuf_init(&w, 1 << 12);
        peers_encode(&w, bad, 1);
        rbuf_init(&r, w.data, w.len);
        CHECKF(peers_decode(&r, out, 1, &n, err, sizeof err) == -1 && n == 0, "%s", hostile[c]);
        wbuf_free(&w);
    }
    /* random bytes never decode into more than max records */
    uint8_t junk[256];
    for (int it = 0; it < 5000; it++) {
        size_t len = s_rand() % sizeof junk;
        for (size_t i = 0; i < len; i++) junk[i] = (uint8_t)s_rand();
        rbuf_init(&r, junk, len);
        if (peers_decode(&r, out, N, &n, err, sizeof err) == 0) CHECK(n >= 0 && n <= N);
        else CHECK(n == 0);
    }
}

int main(void)
{
    RUN(test_hdr_roundtrip);
    RUN(test_hdr_refusals);
    RUN(test_wbuf_rbuf_roundtrip);
    RUN(test_bounds);
    RUN(test_rbuf_random);
    RUN(test_peer_addr_valid);
    RUN(test_peers);
    CHECK_EXIT();
}
