/* test_net: keys on disk, addresses, and the CurveZMQ transport over
 * 127.0.0.1 (ports picked by binding port 0). */
#include "tests/check.h"
#include "net/keys.h"
#include "net/linkemu.h"
#include "net/transport.h"
#include "net/wire.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

static int64_t s_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static keypair_t s_keys(void)
{
    keypair_t kp;
    char err[128];
    if (keypair_generate(&kp, err, sizeof err) != 0) { printf("keygen: %s\n", err); exit(1); }
    return kp;
}

static transport_t *s_transport(const keypair_t *kp, transport_opts_t *o)
{
    transport_opts_t d = {0};
    if (!o) o = &d;
    o->listen_host = "127.0.0.1";
    o->keys = kp;
    char err[256];
    transport_t *t = transport_new(o, err, sizeof err);
    if (!t) printf("  transport_new: %s\n", err);
    return t;
}

/* Polls t for up to ms until a message arrives, polling the others with
 * timeout 0 meanwhile (their queued sends go out; their arrivals are
 * discarded).  Returns 1 with *m, or 0. */
static int s_recv_within(transport_t *t, transport_t **others, int nothers, int ms,
                         transport_msg_t *m)
{
    int64_t end = s_ms() + ms;
    while (s_ms() < end) {
        for (int i = 0; i < nothers; i++) {
            transport_msg_t junk;
            if (others[i] && transport_poll(others[i], 0, &junk) == 1) transport_msg_close(&junk);
        }
        int rc = transport_poll(t, 5, m);
        if (rc == 1) return 1;
        if (rc < 0) return 0;
    }
    return 0;
}

static int s_send(transport_t *t, int link, wire_type_t type, uint64_t mb, const char *payload)
{
    wire_hdr_t h;
    wire_hdr_init(&h, type);
    h.mb = mb;
    h.run = 42;
    const void *f[1] = {payload};
    size_t l[1] = {payload ? strlen(payload) : 0};
    return transport_send(t, link, &h, f, l, payload ? 1 : 0);
}

/* ---- addresses and keys ---- */

static void test_addr_parse(void)
{
    keypair_t kp = s_keys();
    char s[ADDR_TEXT_MAX], host[ADDR_HOST_MAX], err[256];
    int port = 0;
    uint8_t pub[32];
    CHECK(addr_format(s, sizeof s, "127.0.0.1", 7000, kp.pub) > 0);
    CHECK(addr_parse(s, host, sizeof host, &port, pub, err, sizeof err) == 0);
    CHECK(strcmp(host, "127.0.0.1") == 0 && port == 7000 && memcmp(pub, kp.pub, 32) == 0);
    CHECK(strlen(s) == strlen("127.0.0.1:7000/") + 40);

    CHECK(addr_format(s, sizeof s, "::1", 65535, kp.pub) > 0);
    CHECK(strncmp(s, "[::1]:65535/", 12) == 0);
    CHECK(addr_parse(s, host, sizeof host, &port, pub, err, sizeof err) == 0);
    CHECK(strcmp(host, "::1") == 0 && port == 65535 && memcmp(pub, kp.pub, 32) == 0);

    CHECK(addr_format(s, sizeof s, "node-1.example.org", 1, kp.pub) > 0);
    CHECK(addr_parse(s, host, sizeof host, &port, pub, err, sizeof err) == 0 && port == 1);
    CHECK(addr_format(s, 20, "127.0.0.1", 7000, kp.pub) == -1);

    struct { const char *in; const char *why; } bad[] = {
        {"1.2.3.4:99", "missing /KEY part"},
        {"1.2.3.4:99/", "key is not 40 Z85 characters"},
        {"1.2.3.4:99/abc", "key is not 40 Z85 characters"},
        {"1.2.3.4:0/KEY", "port out of range"},
        {"1.2.3.4:65536/KEY", "port out of range"},
        {"1.2.3.4:999999999999/KEY", "port out of range"},
        {"1.2.3.4/KEY", "missing :PORT"},
        {"1.2.3.4:x/KEY", "port is not a number"},
        {"1.2.3.4:12x/KEY", "port is not a number"},
        {":99/KEY", "missing host"},
        {"", "empty address"},
        {"bad host:1/KEY", "bad character in host"},
        {"[::1", "missing ]"},
        {"[::1/x]:5/KEY", "bad IPv6 host"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        CHECKF(addr_parse(bad[i].in, host, sizeof host, &port, pub, err, sizeof err) == -1, "%s", bad[i].in);
        CHECKF(strstr(err, bad[i].why) != NULL, "%s -> '%s'", bad[i].in, err);
    }
    /* a key with a non-Z85 character (40 chars) */
    char k41[64];
    snprintf(k41, sizeof k41, "h:1/%.39s~", kp.pub_z85);
    CHECK(addr_parse(k41, host, sizeof host, &port, pub, err, sizeof err) == -1);
    CHECK(strstr(err, "Z85") != NULL);
    /* the input is named in the message */
    addr_parse("1.2.3.4:99", host, sizeof host, &port, pub, err, sizeof err);
    CHECK(strncmp(err, "1.2.3.4:99: ", 12) == 0);

    /* plain HOST:PORT */
    CHECK(hostport_parse("0.0.0.0:0", host, sizeof host, &port, 1, err, sizeof err) == 0 && port == 0);
    CHECK(hostport_parse("0.0.0.0:0", host, sizeof host, &port, 0, err, sizeof err) == -1);
    CHECK(hostport_parse("example.org:7000", host, sizeof host, &port, 0, err, sizeof err) == 0);
    CHECK(strcmp(host, "example.org") == 0 && port == 7000);
    CHECK(hostport_parse("*:7000", host, sizeof host, &port, 0, err, sizeof err) == 0 && !strcmp(host, "*"));
    CHECK(hostport_parse("h:7000/KEY", host, sizeof host, &port, 0, err, sizeof err) == -1);
    CHECK(hostport_parse("h", host, sizeof host, &port, 0, err, sizeof err) == -1);
    char tiny[4];
    CHECK(hostport_parse("longhost:1", tiny, sizeof tiny, &port, 0, err, sizeof err) == -1);
    CHECK(strstr(err, "too long") != NULL);
}

static void test_keys_files(void)
{
    char dir[] = "/tmp/brigade-test-keys-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char sub[128], path[160], err[512];
    snprintf(sub, sizeof sub, "%s/id", dir);
    keypair_t kp = s_keys(), back;
    CHECK(keypair_save(&kp, sub, err, sizeof err) == 0);
    snprintf(path, sizeof path, "%s/node.key", sub);
    struct stat st;
    CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600);
    CHECK(keypair_load(&back, sub, err, sizeof err) == 0);
    CHECK(memcmp(back.pub, kp.pub, 32) == 0 && memcmp(back.sec, kp.sec, 32) == 0);
    CHECK(strcmp(back.pub_z85, kp.pub_z85) == 0 && strcmp(back.sec_z85, kp.sec_z85) == 0);
    /* never overwrite an identity */
    keypair_t other = s_keys();
    CHECK(keypair_save(&other, sub, err, sizeof err) == -1 && strstr(err, "exists"));
    /* a secret readable by others is refused, with the fix in the message */
    CHECK(chmod(path, 0644) == 0);
    CHECK(keypair_load(&back, sub, err, sizeof err) == -1);
    CHECKF(strstr(err, "chmod 600") != NULL, "%s", err);
    CHECK(back.sec[0] == 0 && back.sec_z85[0] == 0);
    CHECK(chmod(path, 0600) == 0);
    /* a public file that does not match */
    char pubpath[160];
    snprintf(pubpath, sizeof pubpath, "%s/node.pub", sub);
    FILE *f = fopen(pubpath, "w");
    fprintf(f, "%s\n", other.pub_z85);
    fclose(f);
    CHECK(keypair_load(&back, sub, err, sizeof err) == -1 && strstr(err, "does not match"));
    unlink(pubpath);
    CHECK(keypair_load(&back, sub, err, sizeof err) == 0 && memcmp(back.pub, kp.pub, 32) == 0);
    /* a missing directory says how to make one */
    snprintf(path, sizeof path, "%s/nothing", dir);
    CHECK(keypair_load(&back, path, err, sizeof err) == -1 && strstr(err, "keygen"));
    /* ids */
    uint8_t same[32];
    memcpy(same, kp.pub, 32);
    CHECK(node_id_from_pubkey(kp.pub) == node_id_from_pubkey(same));
    CHECK(node_id_from_pubkey(kp.pub) != node_id_from_pubkey(other.pub));
    char sid[9];
    node_id_short(0x0123456789abcdefull, sid);
    CHECK(strcmp(sid, "01234567") == 0);

    snprintf(path, sizeof path, "%s/node.key", sub);
    unlink(path);
    rmdir(sub);
    rmdir(dir);
    keypair_wipe(&kp);
    CHECK(kp.sec[0] == 0 && kp.sec[31] == 0);
}

/* ---- transport ---- */

static void test_exchange(void)
{
    keypair_t ka = s_keys(), kb = s_keys();
    transport_t *a = s_transport(&ka, NULL), *b = s_transport(&kb, NULL);
    CHECK(a && b);
    if (!a || !b) goto out;
    CHECK(transport_port(a) > 0 && transport_port(b) > 0 && transport_port(a) != transport_port(b));
    CHECK(transport_id(a) == node_id_from_pubkey(ka.pub));
    char err[256];
    int lb = transport_connect(b, "127.0.0.1", transport_port(a), ka.pub, err, sizeof err);
    int la = transport_connect(a, "127.0.0.1", transport_port(b), kb.pub, err, sizeof err);
    CHECK(lb >= 0 && la >= 0);

    /* b -> a over b's link; a sees b's key */
    CHECK(s_send(b, lb, WIRE_PING, 7, "hello") == 0);
    transport_msg_t m = {0};
    transport_t *ob[1] = {b}, *oa[1] = {a};
    CHECK(s_recv_within(a, ob, 1, 3000, &m) == 1);
    CHECK(m.hdr.type == WIRE_PING && m.hdr.mb == 7 && m.hdr.run == 42);
    CHECK(m.link == -1 && m.nframes == 1 && m.len[0] == 5 && memcmp(m.frame[0], "hello", 5) == 0);
    CHECK(memcmp(m.sender_pub, kb.pub, 32) == 0);
    CHECK(m.sender == node_id_from_pubkey(kb.pub) && m.hdr.sender == m.sender);

    /* a replies through its listening socket; b gets it on its link */
    transport_msg_t copy = m;   /* the message may be moved by value */
    wire_hdr_t h;
    wire_hdr_init(&h, WIRE_PONG);
    h.mb = 7;
    const void *f[2] = {"x", "yz"};
    size_t l[2] = {1, 2};
    CHECK(transport_reply(a, &copy, &h, f, l, 2) == 0);
    transport_msg_close(&copy);
    transport_msg_close(&copy);   /* idempotent */
    CHECK(s_recv_within(b, oa, 1, 3000, &m) == 1);
    CHECK(m.hdr.type == WIRE_PONG && m.link == lb && m.nframes == 2);
    CHECK(m.len[1] == 2 && memcmp(m.frame[1], "yz", 2) == 0);
    CHECK(memcmp(m.sender_pub, ka.pub, 32) == 0 && m.sender == transport_id(a));
    transport_msg_close(&m);

    /* a -> b over a's own link, many messages, order kept */
    for (int i = 0; i < 50; i++) CHECK(s_send(a, la, WIRE_ACT, (uint64_t)i, "act") == 0);
    int got = 0, inorder = 1;
    while (got < 50 && s_recv_within(b, oa, 1, 3000, &m) == 1) {
        if (m.hdr.type == WIRE_ACT) {
            inorder &= m.hdr.mb == (uint64_t)got;
            CHECK(memcmp(m.sender_pub, ka.pub, 32) == 0 && m.link == -1);
            got++;
        }
        transport_msg_close(&m);
    }
    CHECK(got == 50 && inorder);
    /* a frame of 1 MiB goes through intact */
    size_t big = 1 << 20;
    uint8_t *buf = malloc(big);
    for (size_t i = 0; i < big; i++) buf[i] = (uint8_t)(i * 31 + 7);
    wire_hdr_init(&h, WIRE_GRAD);
    const void *bf[1] = {buf};
    size_t bl[1] = {big};
    CHECK(transport_send(a, la, &h, bf, bl, 1) == 0);
    CHECK(s_recv_within(b, oa, 1, 3000, &m) == 1);
    CHECK(m.nframes == 1 && m.len[0] == big && memcmp(m.frame[0], buf, big) == 0);
    transport_msg_close(&m);
    free(buf);

    transport_stats_t sa, sb;
    transport_stats(a, &sa);
    transport_stats(b, &sb);
    CHECK(sa.msgs_sent == 52 && sb.msgs_recv == 52);
    CHECK(sa.bytes_sent == sb.bytes_recv && sa.bytes_sent == 52 * WIRE_HDR_LEN + 3 + 50 * 3 + (1 << 20));
    CHECK(sa.zap_admitted >= 1 && sb.zap_admitted >= 1 && sa.drops == 0 && sb.drops == 0);
    /* bad arguments */
    CHECK(transport_send(a, 99, &h, NULL, NULL, 0) == -1);
    CHECK(transport_send(a, la, &h, NULL, NULL, TRANSPORT_MAX_FRAMES + 1) == -1);
    transport_disconnect(a, la);
    CHECK(transport_send(a, la, &h, NULL, NULL, 0) == -1);
    CHECK(transport_pending(a, la) == -1);
out:
    transport_destroy(&a);
    transport_destroy(&b);
    CHECK(a == NULL && b == NULL);
}

static int s_admit_not(void *arg, const uint8_t pub[32], char *why, size_t whylen)
{
    if (memcmp(pub, arg, 32) == 0) {
        snprintf(why, whylen, "no ticket");
        return 0;
    }
    return 1;
}

static int s_drops_seen;
static char s_drop_why[200];
static void s_on_drop(void *arg, const char *why, const uint8_t *pub)
{
    (void)arg; (void)pub;
    s_drops_seen++;
    snprintf(s_drop_why, sizeof s_drop_why, "%s", why);
}

/* A node that is not reachable opens the link; the other side sends back
 * over it (an adopted link: its ROUTER, by the connection's routing id),
 * with and without emulation; a new connection of the same peer takes over. */
static void test_adopted_link(void)
{
    for (int emu = 0; emu < 2; emu++) {
        keypair_t ka = s_keys(), kb = s_keys();
        transport_opts_t oa = {0};
        oa.emu_latency_ms = emu ? 5 : 0;
        transport_t *a = s_transport(&ka, &oa), *b = s_transport(&kb, NULL);
        CHECK(a && b);
        if (!a || !b) { transport_destroy(&a); transport_destroy(&b); return; }
        char err[256];
        int lb = transport_connect(b, "127.0.0.1", transport_port(a), ka.pub, err, sizeof err);
        CHECK(lb >= 0);
        transport_t *ob[1] = {b}, *oa1[1] = {a};
        transport_msg_t m = {0};
        CHECK(s_send(b, lb, WIRE_PING, 1, "hi") == 0);
        CHECK(s_recv_within(a, ob, 1, 3000, &m) == 1 && m.link == -1);
        CHECK(transport_adopt(a, -1, NULL) == -1);
        int back = transport_adopt(a, -1, &m);
        CHECK(back >= 0);
        CHECK(transport_adopt(a, back, &m) == back);   /* the same connection: the same link */
        transport_msg_close(&m);
        for (int i = 0; i < 20; i++) CHECK(s_send(a, back, WIRE_ACT, (uint64_t)i, "act") == 0);
        int got = 0, inorder = 1;
        while (got < 20 && s_recv_within(b, oa1, 1, 3000, &m) == 1) {
            inorder &= m.hdr.mb == (uint64_t)got && m.link == lb && memcmp(m.sender_pub, ka.pub, 32) == 0;
            got++;
            transport_msg_close(&m);
        }
        CHECKF(got == 20 && inorder, "emu %d: %d of 20 back over the adopted link", emu, got);
        /* the peer comes back on a new connection: adopting brings the route up to date */
        transport_disconnect(b, lb);
        int lb2 = transport_connect(b, "127.0.0.1", transport_port(a), ka.pub, err, sizeof err);
        CHECK(s_send(b, lb2, WIRE_PING, 2, "again") == 0);
        CHECK(s_recv_within(a, ob, 1, 3000, &m) == 1);
        CHECK(transport_adopt(a, back, &m) == back);
        transport_msg_close(&m);
        CHECK(s_send(a, back, WIRE_PONG, 9, "x") == 0);
        CHECK(s_recv_within(b, oa1, 1, 3000, &m) == 1 && m.hdr.mb == 9 && m.link == lb2);
        transport_msg_close(&m);
        /* closing an adopted link leaves the listening socket alone */
        transport_disconnect(a, back);
        CHECK(transport_send(a, back, &(wire_hdr_t){0}, NULL, NULL, 0) == -1);
        CHECK(s_send(b, lb2, WIRE_PING, 3, "still") == 0);
        CHECK(s_recv_within(a, ob, 1, 3000, &m) == 1 && m.hdr.mb == 3);
        transport_msg_close(&m);
        transport_destroy(&a);
        transport_destroy(&b);
    }
}

static void test_admit_refuses(void)
{
    keypair_t ka = s_keys(), kb = s_keys(), kc = s_keys();
    transport_opts_t o = {0};
    o.admit = s_admit_not;
    o.admit_arg = kb.pub;
    o.on_drop = s_on_drop;
    s_drops_seen = 0;
    transport_t *a = s_transport(&ka, &o), *b = s_transport(&kb, NULL), *c = s_transport(&kc, NULL);
    CHECK(a && b && c);
    if (!a || !b || !c) goto out;
    char err[256];
    int lb = transport_connect(b, "127.0.0.1", transport_port(a), ka.pub, err, sizeof err);
    int lc = transport_connect(c, "127.0.0.1", transport_port(a), ka.pub, err, sizeof err);
    for (int i = 0; i < 5; i++) CHECK(s_send(b, lb, WIRE_JOIN, 1, "refused") == 0);
    transport_msg_t m = {0};
    transport_t *others[2] = {b, c};
    int from_b = 0, from_c = 0;
    /* b keeps sending while we wait for c: b never gets through */
    int64_t end = s_ms() + 3000;
    while (s_ms() < end && from_c < 3) {
        if (from_c == 0) s_send(c, lc, WIRE_JOIN, 2, "admitted"), s_send(b, lb, WIRE_JOIN, 1, "refused");
        if (s_recv_within(a, others, 2, 100, &m) == 1) {
            if (memcmp(m.sender_pub, kb.pub, 32) == 0) from_b++;
            if (memcmp(m.sender_pub, kc.pub, 32) == 0) from_c++;
            transport_msg_close(&m);
        }
    }
    /* and a little longer, to give b's messages every chance */
    while (s_recv_within(a, others, 2, 300, &m) == 1) {
        if (memcmp(m.sender_pub, kb.pub, 32) == 0) from_b++;
        transport_msg_close(&m);
    }
    CHECK(from_c >= 1);
    CHECK(from_b == 0);
    transport_stats_t s;
    transport_stats(a, &s);
    CHECK(s.zap_refused >= 1 && s.zap_admitted >= 1);
    CHECKF(strstr(s.last_drop, "no ticket") != NULL, "%s", s.last_drop);
    CHECK(s_drops_seen >= 1 && strstr(s_drop_why, "refused"));
out:
    transport_destroy(&a);
    transport_destroy(&b);
    transport_destroy(&c);
}

/* Raw ZeroMQ peers: a plaintext client, and a CURVE client sending a
 * forged sender id and a garbage header. */
static void test_hostile_clients(void)
{
    keypair_t ka = s_keys(), kc = s_keys();
    transport_t *a = s_transport(&ka, NULL), *c = s_transport(&kc, NULL);
    CHECK(a && c);
    if (!a || !c) { transport_destroy(&a); transport_destroy(&c); return; }
    char ep[64];
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", transport_port(a));
    void *ctx = zmq_ctx_new();
    int zero = 0;

    /* plaintext DEALER: a well-formed header claiming to be c */
    void *plain = zmq_socket(ctx, ZMQ_DEALER);
    zmq_setsockopt(plain, ZMQ_LINGER, &zero, sizeof zero);
    CHECK(zmq_connect(plain, ep) == 0);
    wire_hdr_t h;
    wire_hdr_init(&h, WIRE_ACT);
    h.sender = node_id_from_pubkey(kc.pub);
    uint8_t hb[WIRE_HDR_LEN];
    wire_hdr_encode(hb, &h);
    for (int i = 0; i < 5; i++) zmq_send(plain, hb, sizeof hb, ZMQ_DONTWAIT);

    /* CURVE DEALER with c's keys, sending junk and a forged sender */
    void *raw = zmq_socket(ctx, ZMQ_DEALER);
    zmq_setsockopt(raw, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(raw, ZMQ_CURVE_SERVERKEY, ka.pub, 32);
    zmq_setsockopt(raw, ZMQ_CURVE_PUBLICKEY, kc.pub, 32);
    zmq_setsockopt(raw, ZMQ_CURVE_SECRETKEY, kc.sec, 32);
    CHECK(zmq_connect(raw, ep) == 0);
    zmq_send(raw, "garbage", 7, 0);
    wire_hdr_t forged = h;
    forged.sender = node_id_from_pubkey(ka.pub);   /* pretends to be a */
    uint8_t fb[WIRE_HDR_LEN];
    wire_hdr_encode(fb, &forged);
    zmq_send(raw, fb, sizeof fb, 0);
    uint8_t badmagic[WIRE_HDR_LEN];
    memcpy(badmagic, hb, sizeof hb);
    badmagic[0] ^= 0xff;
    zmq_send(raw, badmagic, sizeof badmagic, 0);
    /* then a genuine message through the real transport of c */
    char err[256];
    int lc = transport_connect(c, "127.0.0.1", transport_port(a), ka.pub, err, sizeof err);
    CHECK(s_send(c, lc, WIRE_ACT, 99, "real") == 0);

    transport_msg_t m = {0};
    transport_t *others[1] = {c};
    int got_real = 0, got_other = 0;
    int64_t end = s_ms() + 3000;
    while (s_ms() < end && !got_real) {
        if (s_recv_within(a, others, 1, 100, &m) == 1) {
            if (m.hdr.mb == 99 && m.nframes == 1 && memcmp(m.frame[0], "real", 4) == 0) got_real = 1;
            else got_other++;
            transport_msg_close(&m);
        }
    }
    while (s_recv_within(a, others, 1, 300, &m) == 1) { got_other++; transport_msg_close(&m); }
    CHECK(got_real == 1);
    CHECK(got_other == 0);
    transport_stats_t s;
    transport_stats(a, &s);
    CHECKF(s.drops == 3, "drops %llu", (unsigned long long)s.drops);
    CHECK(s.msgs_recv == 1);
    CHECKF(s.handshake_failed >= 1, "plaintext client not counted: %s", s.last_drop);

    zmq_close(plain);
    zmq_close(raw);
    zmq_ctx_term(ctx);
    transport_destroy(&a);
    transport_destroy(&c);
}

/* A client holding a wrong key for the server, and a frame above the size
 * limit: neither is delivered, and the server keeps serving others. */
static void test_wrong_key_and_oversize(void)
{
    keypair_t ka = s_keys(), kb = s_keys(), kc = s_keys();
    transport_opts_t o = {0};
    o.max_msg_bytes = 4096;
    transport_t *a = s_transport(&ka, &o), *b = s_transport(&kb, NULL), *c = s_transport(&kc, NULL);
    CHECK(a && b && c);
    if (!a || !b || !c) goto out;
    char err[256];
    int wrong = transport_connect(b, "127.0.0.1", transport_port(a), kc.pub, err, sizeof err);
    CHECK(s_send(b, wrong, WIRE_ACT, 1, "wrong key") == 0);
    int lc = transport_connect(c, "127.0.0.1", transport_port(a), ka.pub, err, sizeof err);
    uint8_t *big = calloc(1, 8192);
    wire_hdr_t h;
    wire_hdr_init(&h, WIRE_ACT);
    h.mb = 2;
    const void *f[1] = {big};
    size_t l[1] = {8192};
    CHECK(transport_send(c, lc, &h, f, l, 1) == 0);

    transport_t *others[2] = {b, c};
    transport_msg_t m = {0};
    int got = 0;
    while (s_recv_within(a, others, 2, 500, &m) == 1) { got++; transport_msg_close(&m); }
    CHECK(got == 0);
    transport_stats_t s;
    transport_stats(a, &s);
    CHECKF(s.handshake_failed >= 1, "%s", s.last_drop);
    /* a fresh, well-behaved client still gets through */
    transport_destroy(&c);
    kc = s_keys();
    c = s_transport(&kc, NULL);
    others[1] = c;
    lc = c ? transport_connect(c, "127.0.0.1", transport_port(a), ka.pub, err, sizeof err) : -1;
    CHECK(lc >= 0 && s_send(c, lc, WIRE_ACT, 3, "small") == 0);
    CHECK(s_recv_within(a, others, 2, 3000, &m) == 1 && m.hdr.mb == 3);
    transport_msg_close(&m);
    free(big);
out:
    transport_destroy(&a);
    transport_destroy(&b);
    transport_destroy(&c);
}

static void test_emulated_latency(void)
{
    keypair_t ka = s_keys(), kb = s_keys();
    transport_opts_t o = {0};
    o.emu_latency_ms = 100;
    o.emu_jitter_ms = 30;
    o.emu_seed = 7;
    transport_t *a = s_transport(&ka, &o), *b = s_transport(&kb, NULL);
    CHECK(a && b);
    if (!a || !b) goto out;
    char err[256];
    int la = transport_connect(a, "127.0.0.1", transport_port(b), kb.pub, err, sizeof err);
    transport_t *oa[1] = {a};
    transport_msg_t m = {0};
    /* warm the connection up, so only the emulated delay is measured below */
    CHECK(s_send(a, la, WIRE_PING, 0, NULL) == 0);
    CHECK(s_recv_within(b, oa, 1, 3000, &m) == 1);
    transport_msg_close(&m);

    int64_t t0 = s_ms();
    for (int i = 1; i <= 20; i++) CHECK(s_send(a, la, WIRE_ACT, (uint64_t)i, "x") == 0);
    CHECK(transport_pending(a, la) == 20 * (WIRE_HDR_LEN + 1));
    int got = 0, inorder = 1;
    int64_t first_ms = -1;
    while (got < 20 && s_recv_within(b, oa, 1, 3000, &m) == 1) {
        if (first_ms < 0) first_ms = s_ms() - t0;
        inorder &= m.hdr.mb == (uint64_t)(got + 1);
        got++;
        transport_msg_close(&m);
    }
    CHECK(got == 20 && inorder);
    CHECKF(first_ms >= 100, "first message after %lld ms", (long long)first_ms);
    CHECK(transport_pending(a, la) == 0);
out:
    transport_destroy(&a);
    transport_destroy(&b);
}

static void test_emulated_bandwidth(void)
{
    keypair_t ka = s_keys(), kb = s_keys();
    transport_opts_t o = {0};
    o.emu_bandwidth_mbit = 8;   /* 1 byte per µs */
    transport_t *a = s_transport(&ka, &o), *b = s_transport(&kb, NULL);
    CHECK(a && b);
    if (!a || !b) goto out;
    char err[256];
    int la = transport_connect(a, "127.0.0.1", transport_port(b), kb.pub, err, sizeof err);
    transport_t *oa[1] = {a};
    transport_msg_t m = {0};
    /* 3 messages of 50 kB: the third leaves after >= 150 ms of serialization */
    size_t n = 50000 - WIRE_HDR_LEN;
    uint8_t *buf = calloc(1, n);
    wire_hdr_t h;
    wire_hdr_init(&h, WIRE_ACT);
    const void *f[1] = {buf};
    size_t l[1] = {n};
    int64_t t0 = s_ms();
    for (int i = 0; i < 3; i++) CHECK(transport_send(a, la, &h, f, l, 1) == 0);
    int got = 0;
    while (got < 3 && s_recv_within(b, oa, 1, 3000, &m) == 1) { got++; transport_msg_close(&m); }
    int64_t dt = s_ms() - t0;
    CHECK(got == 3);
    CHECKF(dt >= 150, "3 x 50 kB at 8 Mbit took %lld ms", (long long)dt);
    transport_stats_t s;
    transport_stats(a, &s);
    CHECK(s.bytes_sent == 150000 && s.msgs_sent == 3);
    free(buf);
out:
    transport_destroy(&a);
    transport_destroy(&b);
}

/* The uplink model alone, on given times (8 Mbit/s: 1 byte per µs). */
static void test_linkemu_uplink(void)
{
    /* one busy flow of 100 kB: 100 ms */
    double one[1] = {100000};
    CHECK(linkemu_share(8, one, 1, 0, INT64_MAX) == 100000 && one[0] == 0);

    /* two flows of 100 kB each share the uplink: both take 200 ms, twice one */
    double two[2] = {100000, 100000};
    int64_t t = linkemu_share(8, two, 2, 0, INT64_MAX);
    CHECKF(t == 200000 && two[0] == 0 && two[1] == 0, "two flows done at %lld us", (long long)t);

    /* a busy flow does not hold a small message of another flow back: with
     * 250 kB queued on one flow, 100 bytes on another leave after 200 µs */
    double mixed[2] = {250000, 100};
    CHECK(linkemu_next_finish(8, mixed, 2, 0) == 200);
    t = linkemu_share(8, mixed, 2, 0, INT64_MAX);
    CHECK(t == 200 && mixed[1] == 0 && fabs(mixed[0] - 249900) < 1e-6);
    /* then the big one has the uplink to itself */
    CHECK(linkemu_share(8, mixed, 2, t, INT64_MAX) == 200 + 249900 && mixed[0] == 0);

    /* stopping at to_us: each active flow sent half the elapsed bytes */
    double part[3] = {1000, 0, 1000};
    CHECK(linkemu_share(8, part, 3, 0, 500) == 500);
    CHECK(fabs(part[0] - 750) < 1e-9 && part[1] == 0 && fabs(part[2] - 750) < 1e-9);
    /* no busy flow: time just passes; unlimited: everything leaves at once */
    double idle[2] = {0, 0};
    CHECK(linkemu_share(8, idle, 2, 10, 99) == 99 && linkemu_next_finish(8, idle, 2, 10) == INT64_MAX);
    double inf[2] = {1e9, 5};
    CHECK(linkemu_share(0, inf, 2, 10, 99) == 10 && inf[0] == 0 && inf[1] == 0);

    /* the wire: framing per frame, 66 bytes of headers per 1448-byte segment */
    CHECK(linkemu_wire_bytes(1448 - LINKEMU_FRAME_HDR, 1) == 1448 + 66);
    CHECK(linkemu_wire_bytes(1449 - LINKEMU_FRAME_HDR, 1) == 1449 + 2 * 66);
    CHECK(linkemu_ack_bytes(4 * 1514) == 2 * 66 && linkemu_ack_bytes(1) == 66);

    /* the downlink: one queue in arrival order */
    linkemu_queue_t q = linkemu_queue(8);
    CHECK(linkemu_serialize(&q, 0, 1000) == 1000 && linkemu_serialize(&q, 10, 1000) == 2000);
    CHECK(linkemu_serialize(&q, 5000, 1) == 5001);
    linkemu_queue_t u = linkemu_queue(0);
    CHECK(linkemu_serialize(&u, 1234, 1e9) == 1234);
}

/* Polls every transport once (timeout 0, the last one with 2 ms) and counts
 * the messages each received; for each, remembers the mb of the first one
 * and when the first and the last arrived. */
typedef struct { int got; int64_t first_ms, last_ms; uint64_t first_mb; int inorder; uint64_t next_mb; } s_tally_t;
static void s_poll_all(transport_t **t, s_tally_t *tl, int n, int64_t t0)
{
    for (int i = 0; i < n; i++) {
        transport_msg_t m;
        while (transport_poll(t[i], i == n - 1 ? 2 : 0, &m) == 1) {
            int64_t now = s_ms() - t0;
            if (tl[i].got == 0) { tl[i].first_ms = now; tl[i].first_mb = m.hdr.mb; tl[i].next_mb = m.hdr.mb; }
            tl[i].inorder &= m.hdr.mb == tl[i].next_mb;
            tl[i].next_mb = m.hdr.mb + 1;
            tl[i].last_ms = now;
            tl[i].got++;
            transport_msg_close(&m);
        }
    }
}

/* Sends `count` messages of `bytes` (header included) on link, mb from mb0. */
static void s_send_big(transport_t *t, int link, int count, size_t bytes, uint64_t mb0)
{
    uint8_t *buf = calloc(1, bytes);
    wire_hdr_t h;
    wire_hdr_init(&h, WIRE_ACT);
    const void *f[1] = {buf};
    size_t l[1] = {bytes - WIRE_HDR_LEN};
    for (int i = 0; i < count; i++) {
        h.mb = mb0 + (uint64_t)i;
        CHECK(transport_send(t, link, &h, f, l, 1) == 0);
    }
    free(buf);
}

/* Two links of one node share its emulated uplink: what each sends takes
 * twice as long as it would alone. */
static void test_emulated_uplink_shared(void)
{
    keypair_t ka = s_keys(), kb = s_keys(), kc = s_keys();
    transport_opts_t o = {0};
    o.emu_bandwidth_mbit = 8;   /* 1 byte per µs */
    transport_t *a = s_transport(&ka, &o), *b = s_transport(&kb, NULL), *c = s_transport(&kc, NULL);
    CHECK(a && b && c);
    if (!a || !b || !c) goto out;
    char err[256];
    int lb = transport_connect(a, "127.0.0.1", transport_port(b), kb.pub, err, sizeof err);
    int lc = transport_connect(a, "127.0.0.1", transport_port(c), kc.pub, err, sizeof err);
    CHECK(lb >= 0 && lc >= 0);
    transport_t *all[3] = {a, b, c};
    s_tally_t tl[3] = {{.inorder = 1}, {.inorder = 1}, {.inorder = 1}};
    /* warm both connections up with one byte-sized message each */
    s_send_big(a, lb, 1, WIRE_HDR_LEN + 1, 100);
    s_send_big(a, lc, 1, WIRE_HDR_LEN + 1, 100);
    int64_t w0 = s_ms();
    while ((tl[1].got < 1 || tl[2].got < 1) && s_ms() - w0 < 3000) s_poll_all(all, tl, 3, w0);
    CHECK(tl[1].got == 1 && tl[2].got == 1);
    memset(tl, 0, sizeof tl);
    for (int i = 0; i < 3; i++) tl[i].inorder = 1;

    /* 3 x 50 kB to b, then 3 x 50 kB to c: 300 kB through one 1 byte/µs uplink */
    int64_t t0 = s_ms();
    s_send_big(a, lb, 3, 50000, 1);
    s_send_big(a, lc, 3, 50000, 1);
    while ((tl[1].got < 3 || tl[2].got < 3) && s_ms() - t0 < 5000) s_poll_all(all, tl, 3, t0);
    CHECK(tl[1].got == 3 && tl[2].got == 3 && tl[1].inorder && tl[2].inorder);
    /* a pipe per link would deliver both in 150 ms (first messages after
     * 50 ms); one shared uplink (plus the wire's headers) needs >= 300 ms
     * for each, their first messages after >= 100 ms */
    CHECKF(tl[1].last_ms >= 300 && tl[2].last_ms >= 300, "b's last message after %lld ms, c's after %lld ms",
           (long long)tl[1].last_ms, (long long)tl[2].last_ms);
    CHECKF(tl[1].first_ms >= 100 && tl[2].first_ms >= 100, "first messages after %lld and %lld ms",
           (long long)tl[1].first_ms, (long long)tl[2].first_ms);
    transport_stats_t s;
    transport_stats(a, &s);
    CHECK(s.msgs_sent == 8 && s.bytes_sent == 300000 + 2 * (WIRE_HDR_LEN + 1));
out:
    transport_destroy(&a);
    transport_destroy(&b);
    transport_destroy(&c);
}

/* The emulated downlink: what two senders send to one node arrives at the
 * downlink's rate, each sender's messages in order. */
static void test_emulated_downlink(void)
{
    keypair_t ka = s_keys(), kb = s_keys(), kc = s_keys();
    transport_opts_t o = {0};
    o.emu_downlink_mbit = 8;    /* 1 byte per µs */
    transport_t *a = s_transport(&ka, NULL), *c = s_transport(&kc, NULL), *b = s_transport(&kb, &o);
    CHECK(a && b && c);
    if (!a || !b || !c) goto out;
    char err[256];
    int la = transport_connect(a, "127.0.0.1", transport_port(b), kb.pub, err, sizeof err);
    int lc = transport_connect(c, "127.0.0.1", transport_port(b), kb.pub, err, sizeof err);
    CHECK(la >= 0 && lc >= 0);
    transport_t *all[3] = {a, c, b};
    s_tally_t tl[3] = {{.inorder = 1}, {.inorder = 1}, {.inorder = 1}};
    s_send_big(a, la, 1, WIRE_HDR_LEN + 1, 0);
    s_send_big(c, lc, 1, WIRE_HDR_LEN + 1, 0);
    int64_t w0 = s_ms();
    while (tl[2].got < 2 && s_ms() - w0 < 3000) s_poll_all(all, tl, 3, w0);
    CHECK(tl[2].got == 2);

    memset(tl, 0, sizeof tl);
    tl[2].inorder = 1;
    int64_t t0 = s_ms();
    s_send_big(a, la, 3, 50000, 1);
    s_send_big(c, lc, 3, 50000, 1);
    int order_a = 1, order_c = 1;
    uint64_t next_a = 1, next_c = 1;
    int got = 0;
    int64_t last_ms = 0;
    while (got < 6 && s_ms() - t0 < 5000) {
        transport_msg_t m;
        transport_poll(a, 0, &m);
        transport_msg_close(&m);
        transport_poll(c, 0, &m);
        transport_msg_close(&m);
        if (transport_poll(b, 2, &m) != 1) continue;
        if (m.sender == transport_id(a)) { order_a &= m.hdr.mb == next_a; next_a = m.hdr.mb + 1; }
        else { order_c &= m.hdr.mb == next_c; next_c = m.hdr.mb + 1; }
        got++;
        last_ms = s_ms() - t0;
        transport_msg_close(&m);
    }
    CHECK(got == 6 && order_a && order_c);
    CHECKF(last_ms >= 300, "6 x 50 kB through an 8 Mbit/s downlink in %lld ms", (long long)last_ms);
out:
    transport_destroy(&a);
    transport_destroy(&b);
    transport_destroy(&c);
}

static void test_emulated_loss(void)
{
    keypair_t ka = s_keys(), kb = s_keys();
    transport_opts_t o = {0};
    o.emu_loss = 1.0;
    transport_t *a = s_transport(&ka, &o), *b = s_transport(&kb, NULL);
    CHECK(a && b);
    if (!a || !b) goto out;
    char err[256];
    int la = transport_connect(a, "127.0.0.1", transport_port(b), kb.pub, err, sizeof err);
    for (int i = 0; i < 20; i++) CHECK(s_send(a, la, WIRE_ACT, (uint64_t)i, "gone") == 0);
    transport_t *oa[1] = {a};
    transport_msg_t m = {0};
    CHECK(s_recv_within(b, oa, 1, 500, &m) == 0);
    transport_stats_t s;
    transport_stats(a, &s);
    CHECK(s.emu_lost == 20 && s.msgs_sent == 0 && s.bytes_sent == 0);
out:
    transport_destroy(&a);
    transport_destroy(&b);
}

static void test_port_in_use(void)
{
    keypair_t ka = s_keys(), kb = s_keys();
    transport_t *a = s_transport(&ka, NULL);
    CHECK(a != NULL);
    if (!a) return;
    transport_opts_t o = {0};
    o.listen_host = "127.0.0.1";
    o.listen_port = transport_port(a);
    o.keys = &kb;
    char err[256] = "", want[128];
    transport_t *b = transport_new(&o, err, sizeof err);
    CHECK(b == NULL);
    snprintf(want, sizeof want, "cannot listen on 127.0.0.1:%d: Address already in use", transport_port(a));
    CHECKF(strcmp(err, want) == 0, "'%s'", err);
    transport_destroy(&b);
    transport_destroy(&a);
}

/* A link to a port where nobody listens fills up and says so instead of
 * blocking. */
static void test_send_never_blocks(void)
{
    keypair_t ka = s_keys(), kb = s_keys();
    transport_t *b = s_transport(&kb, NULL);
    int dead_port = b ? transport_port(b) : 1;
    transport_destroy(&b);   /* its port is now closed */
    transport_opts_t o = {0};
    o.sndhwm = 10;
    transport_t *a = s_transport(&ka, &o);
    CHECK(a != NULL);
    if (!a) return;
    char err[256];
    int la = transport_connect(a, "127.0.0.1", dead_port, kb.pub, err, sizeof err);
    CHECK(la >= 0);
    int full = 0, sent = 0;
    for (int i = 0; i < 100000 && !full; i++) {
        int rc = s_send(a, la, WIRE_ACT, (uint64_t)i, "x");
        if (rc == 1) full = 1;
        else if (rc == 0) sent++;
        else break;
    }
    CHECK(full && sent >= 1 && sent < 100000);
    transport_destroy(&a);
}

/* Links opened and closed over and over (a bootstrap probing every JOIN)
 * reuse the closed indices: the link table stays as large as the most
 * links open at once. */
static void test_link_reuse(void)
{
    keypair_t ka = s_keys(), kb = s_keys();
    transport_t *a = s_transport(&ka, NULL);
    CHECK(a != NULL);
    if (!a) return;
    char err[256];
    int keep = transport_connect(a, "127.0.0.1", 9, kb.pub, err, sizeof err);
    CHECK(keep == 0);
    int most = -1, first = -1;
    for (int i = 0; i < 1000; i++) {
        int l = transport_connect(a, "127.0.0.1", 9, kb.pub, err, sizeof err);
        if (l < 0) { CHECKF(0, "connect %d: %s", i, err); break; }
        if (first < 0) first = l;
        if (l > most) most = l;
        transport_disconnect(a, l);
        usleep(1000);   /* ZeroMQ reaps closed sockets in the background (at most 1023 per context) */
    }
    CHECKF(first == 1 && most == 1, "1000 connect/disconnect pairs: first link %d, highest %d (want 1)", first, most);
    CHECK(transport_pending(a, keep) == 0);   /* the link kept open is untouched */
    /* a closed index in the middle is the one taken next */
    int l1 = transport_connect(a, "127.0.0.1", 9, kb.pub, err, sizeof err);
    int l2 = transport_connect(a, "127.0.0.1", 9, kb.pub, err, sizeof err);
    CHECK(l1 == 1 && l2 == 2);
    transport_disconnect(a, l1);
    CHECK(transport_pending(a, l1) == -1);
    CHECK(transport_connect(a, "127.0.0.1", 9, kb.pub, err, sizeof err) == 1);
    CHECK(transport_connect(a, "127.0.0.1", 9, kb.pub, err, sizeof err) == 3);
    transport_destroy(&a);
}

/* A message received on a link but still held by the emulated downlink
 * when the link is closed is never delivered: its index may already name
 * a new link, to another peer. */
static void test_closed_link_inbox(void)
{
    keypair_t ka = s_keys(), kb = s_keys(), kc = s_keys();
    transport_opts_t o = {0};
    o.emu_downlink_mbit = 0.2;   /* 20 kB: about 0.8 s */
    transport_t *a = s_transport(&ka, NULL), *c = s_transport(&kc, NULL), *b = s_transport(&kb, &o);
    CHECK(a && b && c);
    if (!a || !b || !c) goto out;
    char err[256];
    int lb = transport_connect(b, "127.0.0.1", transport_port(a), ka.pub, err, sizeof err);
    CHECK(lb >= 0);
    CHECK(s_send(b, lb, WIRE_PING, 1, "hi") == 0);
    transport_msg_t m = {0};
    transport_t *ob[1] = {b};
    CHECK(s_recv_within(a, ob, 1, 3000, &m) == 1);
    char big[20000];
    memset(big, 'x', sizeof big - 1);
    wire_hdr_t h;
    wire_hdr_init(&h, WIRE_PONG);
    const void *f[1] = {big};
    size_t l[1] = {sizeof big - 1};
    CHECK(transport_reply(a, &m, &h, f, l, 1) == 0);
    transport_msg_close(&m);
    /* b reads it off the socket (msgs_recv counts it) but the downlink holds it */
    transport_stats_t s = {0};
    int64_t end = s_ms() + 3000;
    while (s.msgs_recv == 0 && s_ms() < end) {
        CHECK(transport_poll(b, 1, &m) == 0);
        transport_msg_close(&m);
        transport_stats(b, &s);
    }
    CHECK(s.msgs_recv == 1);
    transport_disconnect(b, lb);
    int lc = transport_connect(b, "127.0.0.1", transport_port(c), kc.pub, err, sizeof err);
    CHECK(lc == lb);   /* the closed index is reused */
    int late = 0;
    end = s_ms() + 1500;
    while (s_ms() < end) {
        if (transport_poll(b, 10, &m) == 1) {
            CHECKF(0, "delivered after its link was closed: link %d, from %s", m.link,
                   m.sender == transport_id(a) ? "a" : "someone else");
            late++;
        }
        transport_msg_close(&m);
    }
    CHECK(late == 0);
out:
    transport_destroy(&a);
    transport_destroy(&b);
    transport_destroy(&c);
}

static void test_wake(void)
{
    keypair_t ka = s_keys();
    transport_t *a = s_transport(&ka, NULL);
    CHECK(a != NULL);
    if (!a) return;
    transport_msg_t m = {0};
    transport_wake(a);
    CHECK(transport_poll(a, 5000, &m) == 0);
    transport_stats_t s;
    transport_stats(a, &s);
    CHECK(s.wakeups == 1);
    CHECK(transport_poll(a, 0, &m) == 0);
    transport_destroy(&a);
}

int main(void)
{
    RUN(test_addr_parse);
    RUN(test_keys_files);
    RUN(test_exchange);
    RUN(test_adopted_link);
    RUN(test_admit_refuses);
    RUN(test_hostile_clients);
    RUN(test_wrong_key_and_oversize);
    RUN(test_emulated_latency);
    RUN(test_emulated_bandwidth);
    RUN(test_linkemu_uplink);
    RUN(test_emulated_uplink_shared);
    RUN(test_emulated_downlink);
    RUN(test_emulated_loss);
    RUN(test_port_in_use);
    RUN(test_send_never_blocks);
    RUN(test_wake);
    RUN(test_link_reuse);
    RUN(test_closed_link_inbox);
    CHECK_EXIT();
}
