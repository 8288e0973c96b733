/* gen_corpus.c: writes the seed corpora of the fuzz targets header, peers,
 * runcfg, ticket, proto and plan into tests/fuzz/corpus/<name>/ (valid
 * encodings made by the real encoders; fault plans checked by the parser).  Build and run from the repository root, after make:
 *   cc -std=c11 -D_GNU_SOURCE -I. tests/fuzz/gen_corpus.c build/libbrigade.a -o /tmp/gen_corpus \
 *      $(pkg-config --cflags --libs libzmq libzstd libsodium openblas zlib) -lm -pthread
 *   /tmp/gen_corpus */
#include "net/keys.h"
#include "net/ticket.h"
#include "net/wire.h"
#include "node/runtime/options.h"
#include "node/runtime/proto.h"
#include "node/runtime/sim.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void s_write(const char *name, const char *file, const void *p, size_t n)
{
    char path[512];
    snprintf(path, sizeof path, "tests/fuzz/corpus/%s", name);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "tests/fuzz/corpus/%s/%s", name, file);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n) { perror(path); exit(1); }
    fclose(f);
}

static void s_headers(void)
{
    int types[] = { WIRE_JOIN, WIRE_PEERS, WIRE_ACT, WIRE_GRAD, WIRE_STATE, WIRE_STATUS_REQ };
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        wire_hdr_t h;
        wire_hdr_init(&h, (wire_type_t)types[i]);
        h.run = 0x1122334455667788ull;
        h.sender = 0xdeadbeefcafef00dull;
        h.mb = i * 7;
        h.stage = (uint16_t)i;
        h.wversion = 3;
        uint8_t b[WIRE_HDR_LEN];
        wire_hdr_encode(b, &h);
        char file[64];
        snprintf(file, sizeof file, "hdr-%s", wire_type_name(types[i]));
        s_write("header", file, b, sizeof b);
    }
    /* reader programs: [nops][ops][data written by wbuf] */
    uint8_t ops[] = { 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x36, 0x57, 0x88, 0xF8, 0x17 };
    wbuf_t w;
    wbuf_init(&w, 4096);
    wbuf_put_u8(&w, (uint8_t)sizeof ops);
    wbuf_put_raw(&w, ops, sizeof ops);
    wbuf_put_u8(&w, 1);
    wbuf_put_u16(&w, 2);
    wbuf_put_u32(&w, 3);
    wbuf_put_u64(&w, 4);
    wbuf_put_f32(&w, 5.0f);
    wbuf_put_f64(&w, 6.0);
    uint8_t raw[51] = { 0 };
    wbuf_put_raw(&w, raw, sizeof raw);
    wbuf_put_bytes(&w, "hello bytes", 11);
    wbuf_put_str(&w, "127.0.0.1:7000");
    wbuf_put_str(&w, "a longer string that still fits the buffer");
    wbuf_put_bytes(&w, "x", 1);
    s_write("header", "reader-0", w.data, w.len);
    wbuf_free(&w);
}

static peer_info_t s_peer(int i, int stage, const char *addr)
{
    peer_info_t p;
    memset(&p, 0, sizeof p);
    uint8_t sec[32];
    for (int k = 0; k < 32; k++) sec[k] = (uint8_t)(i * 31 + k);
    crypto_scalarmult_base(p.pubkey, sec);
    p.id = node_id_from_pubkey(p.pubkey);
    snprintf(p.addr, sizeof p.addr, "%s", addr);
    p.stage = (int16_t)stage;
    p.rate = 1.5f * (float)i;
    p.rtt_ms = 0.25f * (float)i;
    p.version = (uint32_t)(i * 10);
    p.seen_ms = (uint64_t)(i * 100);
    return p;
}

static void s_peers(void)
{
    peer_info_t p[4] = { s_peer(1, 0, "127.0.0.1:7000"), s_peer(2, 1, "[::1]:7001"),
                         s_peer(3, -1, "node-3.example.org:65535"), s_peer(4, 2, "10.0.0.4:1") };
    int counts[] = { 0, 1, 4 };
    for (int c = 0; c < 3; c++) {
        wbuf_t w;
        wbuf_init(&w, 1 << 16);
        peers_encode(&w, p, counts[c]);
        char file[32];
        snprintf(file, sizeof file, "table-%d", counts[c]);
        s_write("peers", file, w.data, w.len);
        wbuf_free(&w);
    }
}

static void s_runcfg(void)
{
    const char *sets[][16] = {
        { NULL },
        { "--model", "gpt-tiny", "--stages", "2", "--codec", "int8", "--grad-codec", "int4", NULL },
        { "--model", "mlp-fmnist", "--stages", "3", "--data", "fmnist", "--batch", "32", NULL },
        { "--model", "gpt-tiny", "--layers", "2", "--dim", "32", "--heads", "2", "--ctx", "16", "--stages", "2", NULL },
        { "--schedule", "gpipe", "--stash", "2bw", "--max-inflight", "1", "--micro", "4", NULL },
        { "--data", "text:/tmp/some file.txt", "--lr", "0.01", "--seed", "77", "--eval-every", "5", "--eval-batches", "3", NULL },
        { "--staleness", "none", "--micro", "2", NULL },
        { "--staleness", "predict+ramp+lr", "--warmup", "0", NULL },   /* every flag a swarm takes: dc is solo only */
        { "--split", "late", "--stages", "5", "--max-delay", "3", NULL },
        { "--optim", "muon", "--max-delay", "2", "--split", "even", NULL },
    };
    for (size_t s = 0; s < sizeof sets / sizeof sets[0]; s++) {
        char *argv[20];
        int argc = 0;
        argv[argc++] = "brigade";
        argv[argc++] = "node";
        for (int k = 0; sets[s][k]; k++) argv[argc++] = (char *)sets[s][k];
        opts_t o;
        char err[256];
        opts_defaults(&o, OPTS_NODE);
        if (opts_parse(&o, OPTS_NODE, argc, argv, 2, err, sizeof err) != 0
            || opts_resolve(&o, err, sizeof err) < 0) {
            fprintf(stderr, "runcfg set %zu: %s\n", s, err);
            exit(1);
        }
        wbuf_t w;
        wbuf_init(&w, 1 << 16);
        proto_put_runcfg(&w, &o);
        char file[32];
        snprintf(file, sizeof file, "cfg-%zu", s);
        s_write("runcfg", file, w.data, w.len);
        wbuf_free(&w);
    }
}

static void s_tickets(void)
{
    /* the same fixed keys as fuzz_ticket.c */
    owner_keys_t o;
    uint8_t seed[32], sec[32], peer[32];
    for (int i = 0; i < 32; i++) seed[i] = (uint8_t)(i + 1);
    crypto_sign_seed_keypair(o.pub, o.sec, seed);
    for (int i = 0; i < 32; i++) sec[i] = (uint8_t)(100 + i);
    crypto_scalarmult_base(peer, sec);
    uint64_t exp[] = { 0, 5000, 999 };
    char err[256];
    for (int i = 0; i < 3; i++) {
        ticket_t t;
        if (ticket_issue(&t, &o, peer, exp[i], err, sizeof err) < 0) { fprintf(stderr, "%s\n", err); exit(1); }
        uint8_t b[TICKET_LEN];
        ticket_encode(b, &t);
        char file[32], text[TICKET_TEXT_LEN + 1];
        snprintf(file, sizeof file, "ticket-%d", i);
        s_write("ticket", file, b, sizeof b);
        ticket_encode_text(text, &t);
        snprintf(file, sizeof file, "text-%d", i);
        s_write("ticket", file, text, strlen(text));
    }
    keypair_t kp;
    memset(&kp, 0, sizeof kp);
    memcpy(kp.sec, sec, 32);
    memcpy(kp.pub, peer, 32);
    int stages[] = { -1, 0, 3 };
    const char *addrs[] = { "127.0.0.1:7000", "[::1]:7001", "volunteer.example.net:443" };
    for (int i = 0; i < 3; i++) {
        peer_info_t p;
        memset(&p, 0, sizeof p);
        p.id = node_id_from_pubkey(peer);
        memcpy(p.pubkey, peer, 32);
        snprintf(p.addr, sizeof p.addr, "%s", addrs[i]);
        p.stage = (int16_t)stages[i];
        announce_t a;
        if (announce_sign(&a, &p, 1000 + (uint64_t)i, &kp, err, sizeof err) < 0) { fprintf(stderr, "%s\n", err); exit(1); }
        uint8_t b[ANNOUNCE_LEN];
        announce_encode(b, &a);
        char file[32];
        snprintf(file, sizeof file, "announce-%d", i);
        s_write("ticket", file, b, sizeof b);
    }
}

/* proto: a selector byte (fuzz_proto.c), then one body made by its encoder. */
static void s_proto_one(const char *file, uint8_t sel, const void *p, size_t n)
{
    uint8_t *b = malloc(n + 1);
    if (!b) exit(1);
    b[0] = sel;
    memcpy(b + 1, p, n);
    s_write("proto", file, b, n + 1);
    free(b);
}

static void s_proto(void)
{
    wbuf_t w;
    wbuf_init(&w, 1 << 16);
    uint8_t ticket[TICKET_LEN] = { 1, 2, 3 };
    proto_put_join(&w, "10.0.0.1:6000", 1, ticket, 0x0102030405060708ull);
    s_proto_one("join", 0, w.data, w.len);
    w.len = 0;
    proto_put_welcome(&w, &(proto_welcome_t){ .stage = 2, .shard = 5, .done = 0, .reachable = 1 });
    s_proto_one("welcome", 1, w.data, w.len);
    uint8_t pre[PROTO_STATE_PRE_LEN];
    proto_put_state_pre(pre, 3u << 20, 0xabcdef01u, 42);
    s_proto_one("state-pre", 2, pre, sizeof pre);
    w.len = 0;
    static proto_peers_tail_t tail = { .completed = 100, .loss = 1.5f, .np = 2, .id = { 7, 8 },
                                       .done_by = { 70, 80 }, .said = 1, .progress = 150 };
    proto_put_peers_tail(&w, &tail);
    s_proto_one("peers-tail", 3, w.data, w.len);
    w.len = 0;
    proto_status_t st = { .nstages = 4, .target = 800, .completed = 12, .loss = 2.0f, .model = "gpt-tiny" };
    proto_put_status(&w, &st);
    wbuf_put_u32(&w, 1);
    wbuf_put_bytes(&w, NULL, 0);
    uint8_t links[1] = { STATUS_LINK_DIRECT };
    proto_put_links(&w, links, 1);
    s_proto_one("status", 4, w.data, w.len);
    w.len = 0;
    opts_t o;
    char err[256];
    opts_defaults(&o, OPTS_NODE);
    if (opts_resolve(&o, err, sizeof err) == 0) {
        proto_put_runcfg(&w, &o);
        s_proto_one("runcfg", 5, w.data, w.len);
    }
    int targets[4] = { 0, 300, 511, 7 };
    uint8_t tb[5 + 8] = { 1 };   /* width 2, vocabulary 512 */
    le_put32(tb + 1, 512);
    proto_put_targets(tb + 5, targets, 4, 2);
    s_proto_one("targets", 6, tb, sizeof tb);
    wbuf_free(&w);
}

/* plan: a byte giving the swarm's size (1 + byte nodes), then a fault plan's
 * text (fuzz_plan.c).  Each plan must parse (or be refused) as marked: a
 * seed the parser has come to refuse stops the generator. */
static void s_plans(void)
{
    static const struct { const char *file; int nodes, ok; const char *text; } plans[] = {
        { "every-event", 8, 1, "# every event the simulator knows\n1.5 kill 2\n20 restart 2\n3 slow 1 4\n"
                               "4 pause 3 2.5\n5 partition 0,1,2\n\n9 heal\n12 rogue 5   # after an event\n" },
        { "same-time", 4, 1, "10 kill 1\n10 restart 1\n10 heal\n2 partition 3\n" },
        { "tabs-crlf", 1, 1, "0\tkill\t0\r\n1e1 restart 0\r\n0x1p3 slow 0 1000\r\n7 pause 0 3600" },
        { "wide-partition", 200, 1, "1 partition 0,3,6,9,12,15,18,21,24,27,30,33,36,39,42,45,48,51,54,57,60,63,66,69,"
                                    "72,75,78,81,84,87,90,93,96,99,102,105,108,111,114,117,120,123,126,129,132,135,"
                                    "138,141,144,147,150,153,156,159,162,165,168,171,174,177,180,183,186,189\n30 heal\n" },
        { "refused-node", 8, 0, "5 kill 8\n" },
        { "refused-factor", 8, 0, "1 kill 0\n3 slow 1 0.5\n" },
        { "refused-event", 8, 0, "1 explode 0\n" },
    };
    for (size_t i = 0; i < sizeof plans / sizeof plans[0]; i++) {
        plan_ev_t *ev = NULL;
        char err[256] = "";
        int n = sim_plan_parse(plans[i].text, plans[i].nodes, &ev, err, sizeof err);
        free(ev);
        if ((n >= 0) != plans[i].ok) {
            fprintf(stderr, "plan %s: %s\n", plans[i].file, n >= 0 ? "accepted, want refused" : err);
            exit(1);
        }
        size_t len = strlen(plans[i].text);
        uint8_t *b = malloc(len + 1);
        if (!b) exit(1);
        b[0] = (uint8_t)(plans[i].nodes - 1);
        memcpy(b + 1, plans[i].text, len);
        s_write("plan", plans[i].file, b, len + 1);
        free(b);
    }
}

int main(void)
{
    if (sodium_init() < 0) return 1;
    mkdir("tests/fuzz/corpus", 0755);
    s_proto();
    s_headers();
    s_peers();
    s_runcfg();
    s_tickets();
    s_plans();
    printf("corpora written to tests/fuzz/corpus/{header,peers,runcfg,ticket,proto,plan}\n");
    return 0;
}
