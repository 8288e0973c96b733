/* test_relay.c: sealed envelopes of relayed messages (net/relay.h): what
 * the sealer put in comes out at the receiver, nothing readable or
 * alterable passes the relay, and hostile input is refused. */
#include "tests/check.h"
#include "net/keys.h"
#include "net/relay.h"
#include <stdlib.h>
#include <string.h>

static keypair_t s_keys(void)
{
    keypair_t k;
    char err[128];
    if (keypair_generate(&k, err, sizeof err) < 0) abort();
    return k;
}

static void test_roundtrip_and_secrecy(void)
{
    keypair_t a = s_keys(), b = s_keys(), c = s_keys();
    uint8_t kab[32], kba[32], kcb[32];
    CHECK(relay_key(kab, b.pub, a.sec) == 0 && relay_key(kba, a.pub, b.sec) == 0 && relay_key(kcb, b.pub, c.sec) == 0);
    CHECK(memcmp(kab, kba, 32) == 0);   /* one key for the pair, both ways */
    wire_hdr_t h;
    wire_hdr_init(&h, WIRE_ACT);
    h.run = 42;
    h.sender = node_id_from_pubkey(a.pub);
    h.mb = 777;
    uint8_t tensor[4096];
    for (size_t i = 0; i < sizeof tensor; i++) tensor[i] = (uint8_t)("a secret tensor "[i % 16]);
    const void *f[2] = { tensor, "targets" };
    size_t l[2] = { sizeof tensor, 7 };
    size_t cap = relay_sealed_len(l, 2);
    CHECK(cap == RELAY_OVERHEAD + 8 + sizeof tensor + 7);
    uint8_t *env = malloc(cap), *plain = malloc(cap);
    long n = relay_seal(env, cap, kab, 9, &h, f, l, 2);
    CHECK(n == (long)cap);
    CHECK(relay_seal(env, cap - 1, kab, 9, &h, f, l, 2) == -1);
    n = relay_seal(env, cap, kab, 9, &h, f, l, 2);
    /* the relay sees no plaintext: not the tensor, not the header */
    CHECK(memmem(env, (size_t)n, "a secret", 8) == NULL);
    uint8_t hb[WIRE_HDR_LEN];
    wire_hdr_encode(hb, &h);
    CHECK(memmem(env, (size_t)n, hb + 8, 16) == NULL);
    relay_msg_t m;
    char err[160];
    CHECK(relay_open(&m, plain, env, (size_t)n, kba, err, sizeof err) == 0);
    CHECK(m.seq == 9 && m.hdr.type == WIRE_ACT && m.hdr.mb == 777 && m.hdr.run == 42 && m.hdr.sender == h.sender);
    CHECK(m.nframes == 2 && m.len[0] == sizeof tensor && memcmp(m.frame[0], tensor, sizeof tensor) == 0);
    CHECK(m.len[1] == 7 && memcmp(m.frame[1], "targets", 7) == 0);
    /* another node cannot seal as a: its key for b is another one */
    uint8_t *forged = malloc(cap);
    CHECK(relay_seal(forged, cap, kcb, 10, &h, f, l, 2) == (long)cap);
    CHECKF(relay_open(&m, plain, forged, cap, kba, err, sizeof err) == -1 && strstr(err, "does not open"), "%s", err);
    /* every altered byte is refused */
    int opened = 0;
    for (long i = 0; i < n; i += 7) {
        env[i] ^= 0x01;
        if (relay_open(&m, plain, env, (size_t)n, kba, err, sizeof err) == 0) opened++;
        env[i] ^= 0x01;
    }
    CHECK(opened == 0);
    /* truncated */
    for (long k = 0; k < n; k += 97) CHECK(relay_open(&m, plain, env, (size_t)k, kba, err, sizeof err) == -1);
    free(env);
    free(plain);
    free(forged);
}

static void test_parse_hostile(void)
{
    relay_msg_t m;
    char err[160];
    uint8_t p[128];
    memset(p, 0, sizeof p);
    CHECK(relay_parse(&m, p, 0, err, sizeof err) == -1);
    CHECK(relay_parse(&m, p, sizeof p, err, sizeof err) == -1);   /* version 0 */
    wire_hdr_t h;
    wire_hdr_init(&h, WIRE_PING);
    p[0] = RELAY_VERSION;
    p[1] = 1;                                                      /* one frame ... */
    wire_hdr_encode(p + 10, &h);
    p[52] = 200;                                                   /* ... longer than what follows */
    CHECKF(relay_parse(&m, p, 60, err, sizeof err) == -1 && strstr(err, "truncated"), "%s", err);
    p[52] = 4;
    CHECK(relay_parse(&m, p, 60, err, sizeof err) == 0 && m.nframes == 1 && m.len[0] == 4);
    CHECKF(relay_parse(&m, p, 61, err, sizeof err) == -1 && strstr(err, "after"), "%s", err);
    p[1] = TRANSPORT_MAX_FRAMES + 1;
    CHECK(relay_parse(&m, p, 60, err, sizeof err) == -1);
    p[1] = 0;
    p[10] ^= 0xff;                                                 /* bad magic */
    CHECK(relay_parse(&m, p, 52, err, sizeof err) == -1);
}

int main(void)
{
    RUN(test_roundtrip_and_secrecy);
    RUN(test_parse_hostile);
    CHECK_EXIT();
}
