/* test_rogue.c: a hostile peer for the integration tests.
 *
 * Without arguments it runs the in-process cases: a node's network side
 * (netside) fed hand-made messages from hostile keys, with a port that
 * records what it sends.
 *
 *   test_rogue --target HOST:PORT/KEY --run RUNID_HEX --seconds S
 *              [--rate MSGS_PER_S] [--seed N] [--attack-avg] [--attack-control]
 *              [--only KIND]
 *
 * connects to the target with a fresh CurveZMQ identity (so it passes the
 * handshake of an open swarm), listens on 127.0.0.1 so that the swarm can
 * reach it, JOINs like a real joiner (header run = RUNID, body = its address
 * and a wanted stage) and reads the WELCOME: the run config and the peer
 * table tell it the target's stage and tensor sizes.  Then, for S seconds,
 * it sends a mix of hostile messages: random header bytes, truncated
 * headers, an oversized frame, wrong run / magic / version / sender, unknown
 * types, ACT/GRAD with garbage frames, wrong shapes, lying frame headers,
 * well-formed int8 frames of the right shape holding 1e30, frames whose
 * scale was made NaN/Inf (checksum fixed), replays of its own messages,
 * PEERS with forged records, PEERS introducing a new identity (properly
 * signed) whose address would break out of a JSON string if written
 * unescaped, and STATE_REQ floods.  It re-JOINs now and then
 * asking for the stage next to the target's, so that its tensors pass the
 * stage checks.  --attack-avg adds AVG messages of huge finite weights (a
 * member of the target's stage poisoning its weights); --attack-control adds
 * DONE and PEERS claiming the run's progress is complete.  Both are off by
 * default: they test defenses beyond the message checks.  --only KIND (a
 * name of the "rogue: sent" lines, e.g. wrong_magic) sends that kind alone.
 *
 * It never waits on a send (everything is non-blocking), bounds its run
 * time to S + 12 seconds, and prints one line per kind "rogue: sent KIND N"
 * and a summary "rogue: admitted=yes|no sent=N blocked=N received=N".
 * Exit 0 after a run; 2 for bad arguments or when it cannot start. */
#include "compress/codec.h"
#include "net/keys.h"
#include "net/ticket.h"
#include "net/wire.h"
#include "node/engine/model.h"
#include "node/runtime/mail.h"
#include "node/runtime/netside.h"
#include "node/runtime/options.h"
#include "tests/check.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

enum {
    K_RANDOM_HDR, K_TRUNC_HDR, K_OVERSIZE, K_WRONG_RUN, K_WRONG_MAGIC, K_WRONG_VERSION,
    K_WRONG_SENDER, K_UNKNOWN_TYPE, K_GARBAGE_TENSOR, K_WRONG_SHAPE, K_LYING_FRAME,
    K_HUGE, K_NAN_SCALE, K_REPLAY, K_FORGED_PEERS, K_STOLEN_RECORD, K_STATE_REQ,
    K_NO_FRAMES, K_TOO_MANY_FRAMES, K_JOIN, K_AVG, K_CONTROL, K_HOSTILE_ADDR, K_COUNT
};
static const char *s_kind[K_COUNT] = {
    "random_header", "truncated_header", "oversized_frame", "wrong_run", "wrong_magic",
    "wrong_version", "wrong_sender", "unknown_type", "garbage_tensor", "wrong_shape",
    "lying_frame_header", "huge_values", "nan_scale", "replay", "forged_peers",
    "stolen_record", "state_req", "no_frames", "too_many_frames", "join", "avg_poison",
    "control", "hostile_addr"
};

#define S_MAX_FRAMES 20
#define S_REPLAYS 16

typedef struct {
    void *ctx, *dealer, *router;  /* zmq */
    keypair_t kp;                 /* our fresh identity */
    uint64_t id;                  /* our node id */
    uint64_t run;                 /* the run we attack */
    uint64_t target_id;           /* the target's node id */
    char adv[PEER_ADDR_MAX];      /* where we listen */
    int admitted;                 /* WELCOME seen */
    int nstages, tstage;          /* run's stages, target's stage (-1 unknown) */
    size_t in_n, out_n, targets_n, nparams;  /* target stage's sizes */
    int V;                        /* vocabulary (targets) */
    peer_info_t others[64];       /* peers from the WELCOME table */
    int nothers;
    uint64_t rng;                 /* xorshift state */
    uint64_t sent[K_COUNT];
    uint64_t blocked, received;
    codec_ctx_t *codec;
    /* replay buffer: copies of earlier messages */
    uint8_t *rep[S_REPLAYS][3];
    size_t rep_len[S_REPLAYS][3];
    int rep_n[S_REPLAYS];
    int rep_count;
} rogue_t;

static double s_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t s_rand(rogue_t *r)
{
    uint64_t x = r->rng;
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    return r->rng = x;
}

static void s_fill(rogue_t *r, uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)s_rand(r);
}

/* Sends frames without blocking; keeps a copy for replay when keep.
 * Returns 0 when queued. */
static int s_sendv(rogue_t *r, int kind, const void *const *f, const size_t *l, int n, int keep)
{
    for (int i = 0; i < n; i++) {
        if (zmq_send(r->dealer, f[i], l[i], ZMQ_DONTWAIT | (i + 1 < n ? ZMQ_SNDMORE : 0)) < 0) {
            if (i == 0) { r->blocked++; return -1; }
            /* a multipart message is atomic: later parts never fail after the first */
            r->blocked++;
            return -1;
        }
    }
    r->sent[kind]++;
    if (keep && n <= 3) {
        int k = r->rep_count++ % S_REPLAYS;
        for (int i = 0; i < r->rep_n[k]; i++) free(r->rep[k][i]);
        r->rep_n[k] = 0;
        for (int i = 0; i < n; i++) {
            r->rep[k][i] = malloc(l[i] ? l[i] : 1);
            if (!r->rep[k][i]) break;
            memcpy(r->rep[k][i], f[i], l[i]);
            r->rep_len[k][i] = l[i];
            r->rep_n[k] = i + 1;
        }
    }
    return 0;
}

static void s_hdr(rogue_t *r, uint8_t out[WIRE_HDR_LEN], int type, int stage, uint64_t mb)
{
    wire_hdr_t h;
    wire_hdr_init(&h, (wire_type_t)type);
    h.run = r->run;
    h.sender = r->id;
    h.mb = mb;
    h.stage = stage < 0 ? WIRE_STAGE_NONE : (uint16_t)stage;
    wire_hdr_encode(out, &h);
}

static void s_join(rogue_t *r, int want)
{
    uint8_t h[WIRE_HDR_LEN], body[256];
    s_hdr(r, h, WIRE_JOIN, -1, 0);
    wbuf_t w;
    wbuf_init_fixed(&w, body, sizeof body);
    proto_put_join(&w, r->adv, want, NULL, 0);   /* no ticket (an open swarm) */
    const void *f[2] = { h, body };
    size_t l[2] = { WIRE_HDR_LEN, w.len };
    s_sendv(r, K_JOIN, f, l, 2, 0);
}

/* Reads a WELCOME: run config, our assignment, the table. */
static void s_welcome(rogue_t *r, zmq_msg_t *parts, int n)
{
    if (n < 4 || zmq_msg_size(&parts[0]) != WIRE_HDR_LEN) return;
    wire_hdr_t h;
    char err[256];
    if (wire_hdr_decode(&h, zmq_msg_data(&parts[0]), WIRE_HDR_LEN, err, sizeof err) < 0 || h.type != WIRE_WELCOME) return;
    opts_t o;
    opts_defaults(&o, OPTS_NODE);
    rbuf_t rc, rt;
    rbuf_init(&rc, zmq_msg_data(&parts[1]), zmq_msg_size(&parts[1]));
    if (proto_get_runcfg(&rc, &o, err, sizeof err) < 0) return;
    static peer_info_t recs[256];
    int k = 0;
    rbuf_init(&rt, zmq_msg_data(&parts[3]), zmq_msg_size(&parts[3]));
    if (peers_decode(&rt, recs, 256, &k, err, sizeof err) < 0) return;
    r->run = h.run;
    r->nstages = o.stages;
    r->V = o.cfg.V;
    r->nothers = 0;
    for (int i = 0; i < k; i++) {
        if (recs[i].id == r->target_id) r->tstage = recs[i].stage;
        if (recs[i].id != r->id && r->nothers < 64) r->others[r->nothers++] = recs[i];
    }
    if (r->tstage >= 0 && r->tstage < o.stages) {
        stage_t st;
        if (stage_init(&st, &o.cfg, r->tstage, o.stages, err, sizeof err) == 0) {
            int T = o.cfg.kind == MODEL_GPT ? o.cfg.maxT : 1;
            r->in_n = stage_in_size(&st, o.batch, T);
            r->out_n = stage_out_size(&st, o.batch, T);
            r->targets_n = (size_t)o.batch * T;
            r->nparams = st.nparams;
        }
    }
    r->admitted = 1;
}

/* Drains both sockets; WELCOMEs are read, the rest counted and dropped. */
static void s_drain(rogue_t *r, int timeout_ms)
{
    zmq_pollitem_t items[2] = { { r->dealer, 0, ZMQ_POLLIN, 0 }, { r->router, 0, ZMQ_POLLIN, 0 } };
    if (zmq_poll(items, 2, timeout_ms) <= 0) return;
    for (int s = 0; s < 2; s++) {
        void *sock = s == 0 ? r->dealer : r->router;
        for (int budget = 0; budget < 200; budget++) {
            zmq_msg_t parts[S_MAX_FRAMES];
            int n = 0, more = 1, ok = 1;
            while (more) {
                zmq_msg_t m;
                zmq_msg_init(&m);
                if (zmq_msg_recv(&m, sock, ZMQ_DONTWAIT) < 0) { zmq_msg_close(&m); ok = n > 0; break; }
                more = zmq_msg_more(&m);
                if (n < S_MAX_FRAMES) parts[n++] = m;
                else zmq_msg_close(&m);
            }
            if (n == 0 || !ok) { for (int i = 0; i < n; i++) zmq_msg_close(&parts[i]); break; }
            r->received++;
            if (s == 0) s_welcome(r, parts, n);
            for (int i = 0; i < n; i++) zmq_msg_close(&parts[i]);
        }
    }
}

/* A tensor frame of n values all equal to v (n == 0: 16 values). */
static long s_frame(rogue_t *r, uint8_t **out, size_t n, float v, int codec)
{
    if (n == 0) n = 16;
    float *x = malloc(n * sizeof(float));
    size_t cap = frame_bound(n, codec);
    *out = malloc(cap);
    if (!x || !*out) { free(x); free(*out); *out = NULL; return -1; }
    for (size_t i = 0; i < n; i++) x[i] = v * (float)((i % 7) + 1) / 7.0f * ((i & 1) ? -1.0f : 1.0f);
    uint32_t shape[1] = { (uint32_t)n };
    encode_opts_t eo = { 0 };
    eo.zstd = 1;   /* never: the payload stays raw, scales at a known place */
    char err[200];
    long len = frame_encode(r->codec, *out, cap, x, shape, 1, codec, &eo, err, sizeof err);
    free(x);
    if (len < 0) { free(*out); *out = NULL; }
    return len;
}

/* ACT (to the target's stage, from the stage before) or GRAD (from after). */
static void s_tensor(rogue_t *r, int kind, int type, const uint8_t *frame, size_t len)
{
    uint8_t h[WIRE_HDR_LEN];
    s_hdr(r, h, type, r->tstage < 0 ? 0 : r->tstage, s_rand(r) & 0xffffff);
    size_t nt = r->targets_n ? r->targets_n : 64;
    int V = r->V > 0 ? r->V : 256, w = proto_target_width(V);
    int *t = calloc(nt, sizeof *t);
    uint8_t *tg = calloc(nt, (size_t)w);
    if (!t || !tg) { free(t); free(tg); return; }
    for (size_t i = 0; i < nt; i++) t[i] = (int)(s_rand(r) % (uint64_t)V);
    proto_put_targets(tg, t, nt, w);
    const void *f[3] = { h, frame, tg };
    size_t l[3] = { WIRE_HDR_LEN, len, nt * (size_t)w };
    s_sendv(r, kind, f, l, type == WIRE_ACT ? 3 : 2, 1);
    free(t);
    free(tg);
}

static void s_attack(rogue_t *r, int kind, int allow_avg, int allow_control)
{
    uint8_t h[WIRE_HDR_LEN], buf[512];
    int act = s_rand(r) & 1;
    int type = act ? WIRE_ACT : WIRE_GRAD;
    size_t want_n = act ? r->in_n : r->out_n;
    const void *f[S_MAX_FRAMES];
    size_t l[S_MAX_FRAMES];
    switch (kind) {
    case K_RANDOM_HDR: {
        size_t n = s_rand(r) % 80;
        s_fill(r, buf, n);
        f[0] = buf; l[0] = n;
        s_sendv(r, kind, f, l, 1, 0);
        break;
    }
    case K_TRUNC_HDR:
        s_hdr(r, h, WIRE_PING, r->tstage, 1);
        f[0] = h; l[0] = s_rand(r) % WIRE_HDR_LEN;
        s_sendv(r, kind, f, l, 1, 0);
        break;
    case K_OVERSIZE: {
        /* beyond the transport's 64 MiB frame limit: ZeroMQ drops the connection */
        size_t n = (65u << 20);
        uint8_t *big = calloc(n, 1);
        if (!big) break;
        s_hdr(r, h, WIRE_ACT, r->tstage, 2);
        f[0] = h; l[0] = WIRE_HDR_LEN; f[1] = big; l[1] = n;
        s_sendv(r, kind, f, l, 2, 0);
        free(big);
        break;
    }
    case K_WRONG_RUN: case K_WRONG_MAGIC: case K_WRONG_VERSION: case K_WRONG_SENDER: case K_UNKNOWN_TYPE: {
        s_hdr(r, h, WIRE_PING, r->tstage, 3);
        if (kind == K_WRONG_RUN) { uint64_t bad = r->run ^ (s_rand(r) | 1); for (int i = 0; i < 8; i++) h[8 + i] = (uint8_t)(bad >> (8 * i)); }
        if (kind == K_WRONG_MAGIC) h[s_rand(r) % 4] ^= 0x20;
        if (kind == K_WRONG_VERSION) { h[4] = (uint8_t)(2 + s_rand(r) % 200); h[5] = (uint8_t)s_rand(r); }
        if (kind == K_WRONG_SENDER) {
            uint64_t other = r->nothers ? r->others[s_rand(r) % (uint64_t)r->nothers].id : s_rand(r);
            for (int i = 0; i < 8; i++) h[16 + i] = (uint8_t)(other >> (8 * i));
        }
        if (kind == K_UNKNOWN_TYPE) { uint16_t t = (uint16_t)(s_rand(r) & 1 ? 0 : WIRE_TYPE_END + s_rand(r) % 1000); h[6] = (uint8_t)t; h[7] = (uint8_t)(t >> 8); }
        f[0] = h; l[0] = WIRE_HDR_LEN;
        s_sendv(r, kind, f, l, 1, 0);
        break;
    }
    case K_GARBAGE_TENSOR: {
        size_t n = 1 + s_rand(r) % sizeof buf;
        s_fill(r, buf, n);
        if (s_rand(r) & 1) { buf[0] = 'B'; buf[1] = 'T'; buf[2] = 'F'; buf[3] = '1'; }   /* right magic */
        s_tensor(r, kind, type, buf, n);
        break;
    }
    case K_WRONG_SHAPE: {
        uint8_t *fr;
        size_t n = want_n ? want_n + 1 + s_rand(r) % 100 : 1 + s_rand(r) % 1000;
        if (s_rand(r) & 1 && want_n > 2) n = want_n / 2;
        long len = s_frame(r, &fr, n, 1.0f, CODEC_INT8);
        if (len > 0) s_tensor(r, kind, type, fr, (size_t)len);
        free(fr);
        break;
    }
    case K_LYING_FRAME: {
        /* a valid header that claims far more values / payload than it carries */
        uint8_t *fr;
        long len = s_frame(r, &fr, 64, 1.0f, CODEC_FP32);
        if (len <= 0) break;
        uint32_t lie = (uint32_t)(want_n ? want_n : 1u << 27);
        for (int i = 0; i < 4; i++) fr[28 + i] = (uint8_t)(lie >> (8 * i));
        if (s_rand(r) & 1) for (int i = 0; i < 8; i++) fr[20 + i] = 0xff;   /* payload length */
        s_tensor(r, kind, type, fr, (size_t)len);
        free(fr);
        break;
    }
    case K_HUGE: case K_NAN_SCALE: {
        uint8_t *fr;
        long len = s_frame(r, &fr, want_n, kind == K_HUGE ? 1e30f : 1.0f, CODEC_INT8);
        if (len <= 0) break;
        if (kind == K_NAN_SCALE) {
            int ndim = fr[7];
            size_t hdr = 32 + 4 * (size_t)ndim;
            uint16_t bad = (s_rand(r) & 1) ? 0x7E00 : 0x7C00;   /* fp16 NaN, Inf */
            if ((size_t)len >= hdr + 2) {
                fr[hdr] = (uint8_t)bad; fr[hdr + 1] = (uint8_t)(bad >> 8);
                uint32_t ck = frame_checksum(fr, hdr - 4, 0);
                ck = frame_checksum(fr + hdr, (size_t)len - hdr, ck);
                for (int i = 0; i < 4; i++) fr[hdr - 4 + i] = (uint8_t)(ck >> (8 * i));
            }
        }
        s_tensor(r, kind, type, fr, (size_t)len);
        free(fr);
        break;
    }
    case K_REPLAY: {
        if (r->rep_count == 0) break;
        int k = (int)(s_rand(r) % (uint64_t)(r->rep_count < S_REPLAYS ? r->rep_count : S_REPLAYS));
        if (r->rep_n[k] == 0) break;
        for (int i = 0; i < r->rep_n[k]; i++) { f[i] = r->rep[k][i]; l[i] = r->rep_len[k][i]; }
        s_sendv(r, kind, f, l, r->rep_n[k], 0);
        break;
    }
    case K_FORGED_PEERS: case K_STOLEN_RECORD: case K_CONTROL: {
        /* forged: another node's id with our key (peers_decode must refuse);
         * stolen: another node's real id and key with our address and a
         * different stage (only a signed announcement can refuse it);
         * control: a record of ourselves and a claim that the run is done */
        peer_info_t p;
        memset(&p, 0, sizeof p);
        if (r->nothers && kind != K_CONTROL) p = r->others[s_rand(r) % (uint64_t)r->nothers];
        else { p.id = r->id; memcpy(p.pubkey, r->kp.pub, 32); }
        if (kind == K_FORGED_PEERS) memcpy(p.pubkey, r->kp.pub, 32);
        if (kind == K_FORGED_PEERS && !r->nothers) p.id ^= 1;
        snprintf(p.addr, sizeof p.addr, "%s", r->adv);
        p.stage = (int16_t)(r->nstages > 0 ? (int)(s_rand(r) % (uint64_t)r->nstages) : 0);
        wbuf_t w;
        wbuf_init(&w, 4096);
        peers_encode(&w, &p, 1);
        wbuf_put_u64(&w, kind == K_CONTROL ? UINT64_C(1) << 40 : 0);   /* completed */
        wbuf_put_f32(&w, kind == K_CONTROL ? 0.0f : NAN);               /* loss */
        wbuf_put_u8(&w, kind == K_CONTROL ? 1 : 0);                     /* done */
        s_hdr(r, h, WIRE_PEERS, r->tstage, 0);
        f[0] = h; l[0] = WIRE_HDR_LEN; f[1] = w.data; l[1] = w.len;
        if (!wbuf_error(&w)) s_sendv(r, kind, f, l, 2, 0);
        wbuf_free(&w);
        if (kind == K_CONTROL) {
            s_hdr(r, h, WIRE_DONE, r->tstage, 0);
            f[0] = h; l[0] = WIRE_HDR_LEN;
            s_sendv(r, kind, f, l, 1, 0);
        }
        break;
    }
    case K_HOSTILE_ADDR: {
        /* a fresh identity with a valid signed announcement of an address
         * that carries quotes and a backslash: a receiver that logs it
         * unescaped writes a forged metrics line */
        keypair_t kp;
        char err[200];
        if (keypair_generate(&kp, err, sizeof err) < 0) break;
        peer_info_t p;
        memset(&p, 0, sizeof p);
        p.id = node_id_from_pubkey(kp.pub);
        memcpy(p.pubkey, kp.pub, 32);
        snprintf(p.addr, sizeof p.addr, "x\",\"event\":\"forged\",\"y\":\"\\:7000");
        p.stage = (int16_t)(r->nstages > 0 ? (int)(s_rand(r) % (uint64_t)r->nstages) : 0);
        announce_t a;
        uint8_t blob[ANNOUNCE_LEN];
        int signed_ok = announce_sign(&a, &p, 1, &kp, err, sizeof err) == 0;
        keypair_wipe(&kp);
        if (!signed_ok) break;
        announce_encode(blob, &a);
        wbuf_t w;
        wbuf_init(&w, 1 << 16);
        const uint8_t *blobs[1] = { blob };
        proto_put_table(&w, &p, blobs, 1);
        static const proto_peers_tail_t tail = { .loss = NAN };
        proto_put_peers_tail(&w, &tail);
        s_hdr(r, h, WIRE_PEERS, r->tstage, 0);
        f[0] = h; l[0] = WIRE_HDR_LEN; f[1] = w.data; l[1] = w.len;
        if (!wbuf_error(&w)) s_sendv(r, kind, f, l, 2, 0);
        wbuf_free(&w);
        break;
    }
    case K_STATE_REQ:
        for (int i = 0; i < 20; i++) {
            s_hdr(r, h, WIRE_STATE_REQ, r->tstage, (uint64_t)i);
            f[0] = h; l[0] = WIRE_HDR_LEN;
            s_sendv(r, kind, f, l, 1, 0);
        }
        break;
    case K_NO_FRAMES:
        s_hdr(r, h, (int)(WIRE_JOIN + s_rand(r) % (WIRE_TYPE_END - 1)), r->tstage, 4);
        f[0] = h; l[0] = WIRE_HDR_LEN;
        s_sendv(r, kind, f, l, 1, 0);
        break;
    case K_TOO_MANY_FRAMES:
        s_hdr(r, h, WIRE_PEERS, r->tstage, 5);
        f[0] = h; l[0] = WIRE_HDR_LEN;
        for (int i = 1; i < S_MAX_FRAMES; i++) { f[i] = buf; l[i] = 8; }
        s_sendv(r, kind, f, l, S_MAX_FRAMES, 0);
        break;
    case K_AVG: {
        if (!allow_avg || !r->nparams) break;
        uint8_t *fr;
        long len = s_frame(r, &fr, r->nparams, 1e30f, CODEC_INT8);
        if (len > 0) {
            s_hdr(r, h, WIRE_AVG, r->tstage, 0);
            f[0] = h; l[0] = WIRE_HDR_LEN; f[1] = fr; l[1] = (size_t)len;
            s_sendv(r, kind, f, l, 2, 0);
        }
        free(fr);
        break;
    }
    default: break;
    }
    (void)allow_control;
}

static int s_usage(const char *why)
{
    fprintf(stderr, "test_rogue: %s\nusage: test_rogue --target HOST:PORT/KEY --run RUNID_HEX --seconds S "
            "[--rate N] [--seed N] [--attack-avg] [--attack-control] [--only KIND]\n", why);
    return 2;
}

static int s_setup(rogue_t *r, const char *target, char *err, size_t errlen)
{
    char host[ADDR_HOST_MAX];
    int port;
    uint8_t tkey[32];
    if (addr_parse(target, host, sizeof host, &port, tkey, err, errlen) < 0) return -1;
    r->target_id = node_id_from_pubkey(tkey);
    if (keypair_generate(&r->kp, err, errlen) < 0) return -1;
    r->id = node_id_from_pubkey(r->kp.pub);
    r->ctx = zmq_ctx_new();
    r->router = zmq_socket(r->ctx, ZMQ_ROUTER);
    r->dealer = zmq_socket(r->ctx, ZMQ_DEALER);
    if (!r->ctx || !r->router || !r->dealer) { snprintf(err, errlen, "zmq: %s", zmq_strerror(errno)); return -1; }
    int zero = 0, one = 1, hwm = 2000;
    char tz85[KEY_Z85_LEN + 1];
    key_to_z85(tz85, tkey);
    zmq_setsockopt(r->router, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(r->router, ZMQ_CURVE_SERVER, &one, sizeof one);
    zmq_setsockopt(r->router, ZMQ_CURVE_SECRETKEY, r->kp.sec_z85, KEY_Z85_LEN);
    zmq_setsockopt(r->dealer, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(r->dealer, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt(r->dealer, ZMQ_CURVE_SERVERKEY, tz85, KEY_Z85_LEN);
    zmq_setsockopt(r->dealer, ZMQ_CURVE_PUBLICKEY, r->kp.pub_z85, KEY_Z85_LEN);
    zmq_setsockopt(r->dealer, ZMQ_CURVE_SECRETKEY, r->kp.sec_z85, KEY_Z85_LEN);
    if (zmq_bind(r->router, "tcp://127.0.0.1:*") != 0) { snprintf(err, errlen, "cannot listen: %s", zmq_strerror(errno)); return -1; }
    char ep[256];
    size_t eplen = sizeof ep;
    zmq_getsockopt(r->router, ZMQ_LAST_ENDPOINT, ep, &eplen);
    const char *colon = strrchr(ep, ':');
    snprintf(r->adv, sizeof r->adv, "127.0.0.1:%s", colon ? colon + 1 : "0");
    char url[400];
    int v6 = strchr(host, ':') != NULL;
    snprintf(url, sizeof url, v6 ? "tcp://[%s]:%d" : "tcp://%s:%d", host, port);
    if (v6) zmq_setsockopt(r->dealer, ZMQ_IPV6, &one, sizeof one);
    if (zmq_connect(r->dealer, url) != 0) { snprintf(err, errlen, "cannot connect to %s: %s", url, zmq_strerror(errno)); return -1; }
    r->codec = codec_ctx_new(1);
    if (!r->codec) { snprintf(err, errlen, "out of memory"); return -1; }
    return 0;
}

/* ---- in-process cases (no arguments) -------------------------------------
 * A netside driven as the node's network thread drives it, with hand-made
 * messages from hostile or honest keys, a clock of our own and a port that
 * records what the netside sends instead of sending it. */

#define B_TYPES 32
#define B_LINKS 256

typedef struct {
    int nconn;                  /* links opened (and adopted) */
    int ndisc;                  /* links closed */
    uint8_t route[B_LINKS];     /* link i is an adopted connection (transport_adopt) */
    int sent[B_TYPES];          /* messages sent, by type */
    int last_type;              /* of the last message sent */
    uint8_t *keep[B_TYPES][3];  /* the frames of the last message of each type */
    size_t keep_len[B_TYPES][3];
    int keep_n[B_TYPES];
    int refuse_type;            /* nonzero: sends of this type fail, as to a link whose queue is full */
} box_t;

/* The clock of one test node: a double of seconds the test moves by hand. */
static double s_clk(void *a) { return *(const double *)a; }
static uint64_t s_wall(void *a) { return 1700000000000ull + (uint64_t)(*(const double *)a * 1000); }

static int s_box_connect(void *a, const char *addr, const uint8_t pub[32], char *e, size_t el)
{
    (void)addr; (void)pub; (void)e; (void)el;
    return ((box_t *)a)->nconn++;
}

static void s_box_disconnect(void *a, int link) { (void)link; ((box_t *)a)->ndisc++; }

/* As transport_adopt: an adopted link is kept, any other is not one: a new link. */
static int s_box_adopt(void *a, int link, const transport_msg_t *from)
{
    box_t *b = a;
    (void)from;
    if (link >= 0 && link < B_LINKS && b->route[link]) return link;
    if (b->nconn >= B_LINKS) return -1;
    b->route[b->nconn] = 1;
    return b->nconn++;
}

static int s_box_send(void *a, int link, const transport_msg_t *to, const wire_hdr_t *h,
                      const void *const *f, const size_t *l, int nf, uint64_t virt)
{
    box_t *b = a;
    (void)link; (void)to; (void)virt;
    int t = h->type < B_TYPES ? h->type : 0;
    if (b->refuse_type && t == b->refuse_type) return 1;
    b->sent[t]++;
    b->last_type = t;
    for (int i = 0; i < b->keep_n[t]; i++) free(b->keep[t][i]);
    b->keep_n[t] = 0;
    for (int i = 0; i < nf && i < 3; i++) {
        b->keep[t][i] = malloc(l[i] ? l[i] : 1);
        if (!b->keep[t][i]) break;
        if (l[i]) memcpy(b->keep[t][i], f[i], l[i]);
        b->keep_len[t][i] = l[i];
        b->keep_n[t] = i + 1;
    }
    return 0;
}

static void s_box_free(box_t *b)
{
    for (int t = 0; t < B_TYPES; t++)
        for (int i = 0; i < b->keep_n[t]; i++) free(b->keep[t][i]);
    memset(b, 0, sizeof *b);
}

/* A node: its options, keys, port and netside. */
typedef struct {
    opts_t o;
    keypair_t kp;
    box_t box;
    netside_t *ns;
    double clock;               /* its seconds (s_clk) */
    char adv[PEER_ADDR_MAX];
    int states;                 /* MAIL_STATEs posted to the compute side with a state in them */
    int tensors;                /* MAIL_TENSORs posted to it */
} tnode_t;

/* The compute side of a test node: counts the states that come, drops the rest. */
static void s_post_tally(void *a, mail_t *m)
{
    tnode_t *n = a;
    n->states += m->kind == MAIL_STATE && m->state != NULL;
    n->tensors += m->kind == MAIL_TENSOR;
    mail_free(m);
}

enum { TN_ADOPT = 1, TN_RELAY = 2, TN_YOUNG = 4, TN_VOCAB512 = 8 };

/* A node serving `stage` of a 4-stage gpt-tiny run (the creator when stage >= 0,
 * a joiner waiting for its WELCOME when stage < 0); modelled: tensors and
 * state are sizes only (no buffers of the stage's size go by); flags TN_ADOPT:
 * its port adopts the connections outward-only peers open to it
 * (s_box_adopt); TN_RELAY: it relays for outward-only peers; TN_YOUNG: its
 * clock (seconds since its process started) begins at 2 s, not 100 s;
 * TN_VOCAB512: the run's vocabulary is 512 (targets of 2 bytes). */
static int s_tnode_as(tnode_t *n, int stage, int modelled, const char *adv, int flags)
{
    char err[300];
    memset(n, 0, sizeof *n);
    opts_defaults(&n->o, OPTS_NODE);
    n->o.stages = 4;
    n->o.stage = stage;
    char *vocab[] = { "brigade", "node", "--vocab", "512" };
    if ((flags & TN_VOCAB512) && opts_parse(&n->o, OPTS_NODE, 4, vocab, 2, err, sizeof err) < 0) return -1;
    if (opts_resolve(&n->o, err, sizeof err) < 0) { printf("  opts: %s\n", err); return -1; }
    if (keypair_generate(&n->kp, err, sizeof err) < 0) return -1;
    snprintf(n->adv, sizeof n->adv, "%s", adv);
    n->clock = (flags & TN_YOUNG) ? 2.0 : 100.0;
    netside_cfg_t c;
    memset(&c, 0, sizeof c);
    c.o = &n->o;
    c.keys = &n->kp;
    c.adv = n->adv;
    c.clock = (rt_clock_t){ &n->clock, s_clk, s_wall };
    c.port = (rt_port_t){ &n->box, s_box_connect, s_box_disconnect, s_box_send, (flags & TN_ADOPT) ? s_box_adopt : NULL };
    c.post = s_post_tally;
    c.post_arg = n;
    c.modelled = modelled;
    c.relay = (flags & TN_RELAY) != 0;
    n->ns = netside_new(&c, err, sizeof err);
    if (!n->ns) { printf("  netside: %s\n", err); return -1; }
    if (stage >= 0) {
        self_info_t si;
        memset(&si, 0, sizeof si);
        si.stage = stage;
        netside_set_self(n->ns, &si);
    }
    return 0;
}

/* The same, on a port that does not adopt the connections peers open to us. */
static int s_tnode(tnode_t *n, int stage, int modelled, const char *adv)
{
    return s_tnode_as(n, stage, modelled, adv, 0);
}

static void s_tnode_free(tnode_t *n)
{
    netside_destroy(&n->ns);
    s_box_free(&n->box);
}

/* Delivers a message of `type` from the holder of kp to ns, as the
 * listening socket would (link -1). */
static void s_deliver(netside_t *ns, const keypair_t *kp, int type, int stage, uint32_t flags, uint64_t mb,
                      const void *const *f, const size_t *l, int nf)
{
    transport_msg_t m;
    memset(&m, 0, sizeof m);
    wire_hdr_init(&m.hdr, (wire_type_t)type);
    m.hdr.run = netside_run(ns);
    m.hdr.stage = stage < 0 ? WIRE_STAGE_NONE : (uint16_t)stage;
    m.hdr.flags = flags;
    m.hdr.mb = mb;
    m.sender = node_id_from_pubkey(kp->pub);
    m.hdr.sender = m.sender;
    memcpy(m.sender_pub, kp->pub, 32);
    m.link = -1;
    m.route_len = 1;
    m.route[0] = 1;
    m.nframes = nf;
    for (int i = 0; i < nf; i++) { m.frame[i] = f[i]; m.len[i] = l[i]; }
    netside_on_msg(ns, &m, 0);
}

/* A JOIN with flags (JOIN_FLAG_INTRO: an introduction) from kp advertising
 * adv, wanting stage want; ck_run != 0: want is the stage of a checkpoint of
 * that run. */
static void s_send_join_as(netside_t *ns, const keypair_t *kp, const char *adv, int want, uint32_t flags,
                           uint64_t ck_run)
{
    wbuf_t w;
    wbuf_init(&w, 256);
    proto_put_join(&w, adv, want, NULL, ck_run);
    const void *f[1] = { w.data };
    size_t l[1] = { w.len };
    s_deliver(ns, kp, WIRE_JOIN, -1, flags, 0, f, l, 1);
    wbuf_free(&w);
}

static void s_send_join(netside_t *ns, const keypair_t *kp, const char *adv, int want, int intro)
{
    s_send_join_as(ns, kp, adv, want, intro ? JOIN_FLAG_INTRO : 0, 0);
}

static uint64_t s_drops(const tnode_t *n) { return atomic_load(&netside_counters(n->ns)->drops); }

static int s_knows(tnode_t *n, const keypair_t *kp)
{
    return peers_find((peers_t *)netside_peers(n->ns), node_id_from_pubkey(kp->pub)) != NULL;
}

/* 1 when the table at the start of frame (WELCOME's third frame) decodes. */
static int s_table_ok(const uint8_t *frame, size_t len, int *k, char *err, size_t errlen)
{
    static peer_info_t recs[64];
    rbuf_t r;
    rbuf_init(&r, frame, len);
    return peers_decode(&r, recs, 64, k, err, errlen) == 0;
}

/* An introduction carrying ticket t (NULL: none) from kp. */
static void s_send_intro_ticket(netside_t *ns, const keypair_t *kp, const char *adv, int want, const ticket_t *t)
{
    uint8_t tb[TICKET_LEN];
    if (t) ticket_encode(tb, t);
    wbuf_t w;
    wbuf_init(&w, 512);
    proto_put_join(&w, adv, want, t ? tb : NULL, 0);
    const void *f[1] = { w.data };
    size_t l[1] = { w.len };
    s_deliver(ns, kp, WIRE_JOIN, -1, JOIN_FLAG_INTRO, 0, f, l, 1);
    wbuf_free(&w);
}

/* 1 when a PING from kp is answered (not dropped). */
static int s_ping_answered(tnode_t *n, const keypair_t *kp)
{
    int pongs = n->box.sent[WIRE_PONG];
    uint64_t d = s_drops(n);
    s_deliver(n->ns, kp, WIRE_PING, 1, 0, 123, NULL, NULL, 0);
    return n->box.sent[WIRE_PONG] == pongs + 1 && s_drops(n) == d;
}

/* Closed swarm: a key admitted with a ticket stays admitted only until the
 * ticket expires (on every link, with or without an introduction), and a
 * ticket refused later takes the admission back; a key never admitted is
 * refused throughout. */
static void t_closed_ticket_expires(void)
{
    char err[300];
    tnode_t n;
    owner_keys_t owner;
    keypair_t alice, bob, mallory;
    CHECK(owner_keys_generate(&owner, err, sizeof err) == 0);
    CHECK(keypair_generate(&alice, err, sizeof err) == 0 && keypair_generate(&bob, err, sizeof err) == 0 &&
          keypair_generate(&mallory, err, sizeof err) == 0);
    if (s_tnode(&n, 0, 1, "127.0.0.1:7000") < 0) { CHECK(0); return; }
    n.o.closed = 1;
    memcpy(n.o.owner_pub, owner.pub, 32);
    uint64_t now_s = s_wall(&n.clock) / 1000;
    ticket_t ta, tb_bad;
    CHECK(ticket_issue(&ta, &owner, alice.pub, now_s + 60, err, sizeof err) == 0);   /* 60 s */
    CHECK(ticket_issue(&tb_bad, &owner, mallory.pub, 0, err, sizeof err) == 0);     /* mallory's, not bob's */
    CHECK(!s_ping_answered(&n, &mallory));
    s_send_intro_ticket(n.ns, &alice, "127.0.0.1:7001", 1, &ta);
    CHECK(s_knows(&n, &alice) && s_ping_answered(&n, &alice));
    s_send_intro_ticket(n.ns, &bob, "127.0.0.1:7002", 1, &ta);       /* alice's ticket: refused */
    CHECK(!s_ping_answered(&n, &bob));
    n.clock += 3600;
    netside_tick(n.ns);
    CHECKF(!s_ping_answered(&n, &alice), "a PING from a key whose ticket expired was answered");
    uint64_t d = s_drops(&n);
    s_deliver(n.ns, &alice, WIRE_STATE_REQ, 0, 0, 0, NULL, NULL, 0);
    CHECKF(s_drops(&n) == d + 1, "a STATE_REQ from a key whose ticket expired was taken");
    /* a refused ticket takes an admission back: bob admitted for good, then showing another's */
    ticket_t tbob;
    CHECK(ticket_issue(&tbob, &owner, bob.pub, 0, err, sizeof err) == 0);
    s_send_intro_ticket(n.ns, &bob, "127.0.0.1:7002", 1, &tbob);
    CHECK(s_ping_answered(&n, &bob));
    s_send_intro_ticket(n.ns, &bob, "127.0.0.1:7002", 1, &tb_bad);
    CHECKF(!s_ping_answered(&n, &bob), "a key whose new ticket was refused stayed admitted");
    s_tnode_free(&n);
}

/* An advertised address that peers_decode refuses ("*", the wildcard) is
 * refused at the JOIN and at an introduction: a node that stored it would
 * put it in every table it sends, and every receiver would refuse the
 * whole table (and strike, then ban, the honest sender). */
static void t_wildcard_address_refused(void)
{
    tnode_t a;
    keypair_t ev1, ev2, good;
    char err[300];
    if (s_tnode(&a, 0, 1, "127.0.0.1:7000") < 0) { CHECK(0); return; }
    CHECK(keypair_generate(&ev1, err, sizeof err) == 0);
    CHECK(keypair_generate(&ev2, err, sizeof err) == 0);
    CHECK(keypair_generate(&good, err, sizeof err) == 0);
    uint64_t d0 = s_drops(&a);
    s_send_join(a.ns, &ev1, "*:5555", 1, 1);           /* an introduction */
    CHECKF(!s_knows(&a, &ev1), "the introduction of \"*:5555\" was stored");
    CHECK(s_drops(&a) == d0 + 1);
    int welcomes = a.box.sent[WIRE_WELCOME];
    s_send_join(a.ns, &ev2, "*:6000", -1, 0);          /* a JOIN */
    CHECKF(!s_knows(&a, &ev2), "the JOIN of \"*:6000\" was stored");
    CHECK(s_drops(&a) == d0 + 2);
    CHECK(a.box.sent[WIRE_WELCOME] == welcomes);
    /* an honest joiner's WELCOME: its table decodes */
    s_send_join(a.ns, &good, "127.0.0.1:7001", -1, 0);
    CHECK(s_knows(&a, &good));
    CHECK(a.box.sent[WIRE_WELCOME] == welcomes + 1);
    int k = 0;
    CHECK(a.box.keep_n[WIRE_WELCOME] == 3);
    if (a.box.keep_n[WIRE_WELCOME] == 3)
        CHECKF(s_table_ok(a.box.keep[WIRE_WELCOME][2], a.box.keep_len[WIRE_WELCOME][2], &k, err, sizeof err),
               "the WELCOME's table is refused: %s", err);
    CHECK(k == 2);   /* the bootstrap and the joiner */
    s_tnode_free(&a);
}

/* Bytes of stage s's state (params, m, v) in a 4-stage gpt-tiny run. */
static size_t s_state_bytes(const opts_t *o, int s)
{
    stage_t st;
    char err[200];
    return stage_init(&st, &o->cfg, s, o->stages, err, sizeof err) < 0 ? 0 : 3 * st.nparams * sizeof(float);
}

/* Chunk idx of a backup push (a snapshot of total bytes with checksum sum and
 * version) from kp to ns, carrying len bytes at payload (0: a modelled one's). */
static void s_push_part(netside_t *ns, const keypair_t *kp, int stage, size_t total, uint32_t sum, int64_t version,
                        uint32_t idx, const uint8_t *payload, size_t len)
{
    uint8_t pre[PROTO_STATE_PRE_LEN];
    proto_put_state_pre(pre, total, sum, version);
    const void *f[2] = { pre, payload ? (const void *)payload : pre };
    size_t l[2] = { sizeof pre, len };
    s_deliver(ns, kp, WIRE_STATE, stage, STATE_FLAG_BACKUP, idx, f, l, 2);
}

/* Chunk idx of a modelled backup push (total bytes, version; no checksum) from kp to ns. */
static void s_push_chunk(netside_t *ns, const keypair_t *kp, int stage, size_t total, int64_t version, uint32_t idx)
{
    s_push_part(ns, kp, stage, total, 0, version, idx, NULL, 0);
}

/* A held backup is served only to a known peer, at most once per
 * STATE_REQ_EVERY_S (2 s) per peer: each answer queues the whole snapshot. */
static void t_backup_serving_limited(void)
{
    tnode_t a;
    keypair_t alone, repl, stranger;
    char err[300];
    if (s_tnode(&a, 0, 1, "127.0.0.1:7000") < 0) { CHECK(0); return; }
    CHECK(keypair_generate(&alone, err, sizeof err) == 0);
    CHECK(keypair_generate(&repl, err, sizeof err) == 0);
    CHECK(keypair_generate(&stranger, err, sizeof err) == 0);
    size_t total = s_state_bytes(&a.o, 1);
    uint32_t nchunks = (uint32_t)((total + STATE_CHUNK - 1) / STATE_CHUNK);
    CHECK(nchunks >= 2);
    /* stage 1's only node pushes its backup here */
    s_send_join(a.ns, &alone, "127.0.0.1:7001", 1, 1);
    for (uint32_t i = 0; i < nchunks; i++) s_push_chunk(a.ns, &alone, 1, total, 7, i);
    uint64_t d0 = s_drops(&a);
    /* a key the node does not know asks for it: silence */
    int sent = a.box.sent[WIRE_STATE];
    s_deliver(a.ns, &stranger, WIRE_STATE_REQ, 1, STATE_FLAG_BACKUP, 0, NULL, NULL, 0);
    CHECKF(a.box.sent[WIRE_STATE] == sent, "%d STATE chunks went to an unknown key", a.box.sent[WIRE_STATE] - sent);
    CHECK(s_drops(&a) == d0 + 1);
    /* stage 1's replacement introduces itself and asks: served once */
    s_send_join(a.ns, &repl, "127.0.0.1:7002", 1, 1);
    s_deliver(a.ns, &repl, WIRE_STATE_REQ, 1, STATE_FLAG_BACKUP, 0, NULL, NULL, 0);
    CHECKF(a.box.sent[WIRE_STATE] == sent + (int)nchunks, "%d chunks, want %u", a.box.sent[WIRE_STATE] - sent, nchunks);
    /* at once again: refused, counted */
    s_deliver(a.ns, &repl, WIRE_STATE_REQ, 1, STATE_FLAG_BACKUP, 0, NULL, NULL, 0);
    CHECKF(a.box.sent[WIRE_STATE] == sent + (int)nchunks, "a repeated request was served (%d chunks in all)",
           a.box.sent[WIRE_STATE] - sent);
    CHECK(s_drops(&a) == d0 + 2);
    /* after the limit's period: served again */
    a.clock += 2.5;
    s_deliver(a.ns, &repl, WIRE_STATE_REQ, 1, STATE_FLAG_BACKUP, 0, NULL, NULL, 0);
    CHECK(a.box.sent[WIRE_STATE] == sent + 2 * (int)nchunks);
    s_tnode_free(&a);
}

/* A whole snapshot (total bytes at buf, version) pushed as a backup from kp to ns, chunk by chunk. */
static void s_push_snapshot(netside_t *ns, const keypair_t *kp, int stage, const uint8_t *buf, size_t total, int64_t version)
{
    uint32_t sum = frame_checksum(buf, total, 0), nchunks = (uint32_t)((total + STATE_CHUNK - 1) / STATE_CHUNK);
    for (uint32_t k = 0; k < nchunks; k++) {
        size_t off = (size_t)k * STATE_CHUNK;
        s_push_part(ns, kp, stage, total, sum, version, k, buf + off, total - off < STATE_CHUNK ? total - off : STATE_CHUNK);
    }
}

/* A snapshot whose version the optimizer cannot count from, or whose values
 * it cannot step from (a NaN weight, a negative second moment), is dropped
 * and counted, not kept as a backup to hand a replacement (which then
 * trained on NaN weights: UB in the step count, or every weight NaN). */
static void t_backup_bad_values_refused(void)
{
    tnode_t a;
    keypair_t alone, repl;
    char err[300];
    if (s_tnode(&a, 0, 0, "127.0.0.1:7000") < 0) { CHECK(0); return; }
    CHECK(keypair_generate(&alone, err, sizeof err) == 0);
    CHECK(keypair_generate(&repl, err, sizeof err) == 0);
    size_t total = s_state_bytes(&a.o, 1), n = total / (3 * sizeof(float));
    float *x = calloc(3 * n, sizeof(float));
    if (!x) { CHECK(0); s_tnode_free(&a); return; }
    s_send_join(a.ns, &alone, "127.0.0.1:7001", 1, 1);
    uint64_t d0 = s_drops(&a);
    uint64_t nchunks = (total + STATE_CHUNK - 1) / STATE_CHUNK;
    s_push_snapshot(a.ns, &alone, 1, (const uint8_t *)x, total, -1);                /* every chunk refused */
    s_push_snapshot(a.ns, &alone, 1, (const uint8_t *)x, total, (int64_t)1 << 40);
    CHECKF(s_drops(&a) == d0 + 2 * nchunks, "versions -1 and 2^40: drops %llu, want %llu",
           (unsigned long long)(s_drops(&a) - d0), (unsigned long long)(2 * nchunks));
    d0 = s_drops(&a);
    x[n + 5] = NAN;   /* m */
    s_push_snapshot(a.ns, &alone, 1, (const uint8_t *)x, total, 7);
    x[n + 5] = 0;
    x[2 * n + 9] = -1e-3f;   /* v */
    s_push_snapshot(a.ns, &alone, 1, (const uint8_t *)x, total, 7);
    CHECKF(s_drops(&a) == d0 + 2, "a NaN and a negative moment: drops %llu, want 2", (unsigned long long)(s_drops(&a) - d0));
    /* nothing held: a replacement's request gets no chunk */
    s_send_join(a.ns, &repl, "127.0.0.1:7002", 1, 1);
    int sent = a.box.sent[WIRE_STATE];
    s_deliver(a.ns, &repl, WIRE_STATE_REQ, 1, STATE_FLAG_BACKUP, 0, NULL, NULL, 0);
    CHECKF(a.box.sent[WIRE_STATE] == sent, "a refused snapshot was served (%d chunks)", a.box.sent[WIRE_STATE] - sent);
    /* the same snapshot mended is kept and served */
    x[2 * n + 9] = 1e-3f;
    s_push_snapshot(a.ns, &alone, 1, (const uint8_t *)x, total, 7);
    CHECK(s_drops(&a) == d0 + 2);
    a.clock += 2.5;
    s_deliver(a.ns, &repl, WIRE_STATE_REQ, 1, STATE_FLAG_BACKUP, 0, NULL, NULL, 0);
    CHECKF(a.box.sent[WIRE_STATE] > sent, "the good snapshot was not served");
    free(x);
    s_tnode_free(&a);
}

/* A joiner takes WELCOME and BYE only from the node it joins through (the
 * key in --join), and nothing once its join has failed. */
static void t_join_answers_from_bootstrap_only(void)
{
    tnode_t boot, j, j2;
    keypair_t stranger;
    char err[300], addr[200], z[KEY_Z85_LEN + 1];
    if (s_tnode(&boot, 0, 1, "127.0.0.1:7000") < 0) { CHECK(0); return; }
    if (s_tnode(&j, -1, 1, "127.0.0.1:7001") < 0) { CHECK(0); s_tnode_free(&boot); return; }
    if (s_tnode(&j2, -1, 1, "127.0.0.1:7002") < 0) { CHECK(0); s_tnode_free(&boot); s_tnode_free(&j); return; }
    CHECK(keypair_generate(&stranger, err, sizeof err) == 0);
    key_to_z85(z, boot.kp.pub);
    snprintf(addr, sizeof addr, "127.0.0.1:7000/%s", z);
    CHECK(netside_join(j.ns, addr, -1, err, sizeof err) == 0);
    CHECK(netside_join(j2.ns, addr, -1, err, sizeof err) == 0);
    /* the bootstrap answers j2's JOIN: a WELCOME for a stranger to replay */
    CHECK(j2.box.keep_n[WIRE_JOIN] == 1);
    s_deliver(boot.ns, &j2.kp, WIRE_JOIN, -1, 0, 0, (const void *const *)j2.box.keep[WIRE_JOIN],
              j2.box.keep_len[WIRE_JOIN], 1);
    CHECK(boot.box.keep_n[WIRE_WELCOME] == 3);
    const void *const *wf = (const void *const *)boot.box.keep[WIRE_WELCOME];
    const size_t *wl = boot.box.keep_len[WIRE_WELCOME];
    const char *no = "go away";
    const void *bf[1] = { no };
    size_t bl[1] = { strlen(no) };
    /* a stranger's BYE and WELCOME change nothing */
    s_deliver(j.ns, &stranger, WIRE_BYE, -1, 0, 0, bf, bl, 1);
    CHECKF(netside_join_state(j.ns, err, sizeof err) == 0, "a stranger's BYE: %s", err);
    s_deliver(j.ns, &stranger, WIRE_WELCOME, -1, 0, 0, wf, wl, 3);
    CHECKF(netside_join_state(j.ns, err, sizeof err) == 0, "a stranger's WELCOME ended the join");
    s_deliver(j.ns, &stranger, WIRE_WELCOME, -1, 0, 0, NULL, NULL, 0);
    CHECKF(netside_join_state(j.ns, err, sizeof err) == 0, "a stranger's empty WELCOME: %s", err);
    /* the bootstrap's BYE ends it; its WELCOME after that changes nothing */
    s_deliver(j.ns, &boot.kp, WIRE_BYE, -1, 0, 0, bf, bl, 1);
    CHECK(netside_join_state(j.ns, err, sizeof err) == -1);
    CHECKF(strstr(err, "go away") != NULL, "err: %s", err);
    s_deliver(j.ns, &boot.kp, WIRE_WELCOME, -1, 0, 0, wf, wl, 3);
    CHECKF(netside_join_state(j.ns, err, sizeof err) == -1, "a WELCOME after the join failed was taken");
    /* the bootstrap's WELCOME to j2 is taken; a second one (the answer to a JOIN sent again) is no strike */
    s_deliver(j2.ns, &boot.kp, WIRE_WELCOME, -1, 0, 0, wf, wl, 3);
    CHECKF(netside_join_state(j2.ns, err, sizeof err) == 1, "the bootstrap's WELCOME: %s", err);
    s_deliver(j2.ns, &boot.kp, WIRE_WELCOME, -1, 0, 0, wf, wl, 3);
    const peer_t *bp = peers_find((peers_t *)netside_peers(j2.ns), node_id_from_pubkey(boot.kp.pub));
    CHECK(bp != NULL);
    if (bp) CHECKF(bp->strikes == 0, "a second WELCOME from the bootstrap: %d strikes against it", bp->strikes);
    s_tnode_free(&j2);
    s_tnode_free(&j);
    s_tnode_free(&boot);
}

/* A chunk of another snapshot, refused while one is arriving, is counted. */
static void t_backup_other_snapshot_counted(void)
{
    tnode_t a;
    keypair_t alone;
    char err[300];
    if (s_tnode(&a, 0, 1, "127.0.0.1:7000") < 0) { CHECK(0); return; }
    CHECK(keypair_generate(&alone, err, sizeof err) == 0);
    size_t total = s_state_bytes(&a.o, 1);
    s_send_join(a.ns, &alone, "127.0.0.1:7001", 1, 1);
    uint64_t d0 = s_drops(&a);
    s_push_chunk(a.ns, &alone, 1, total, 7, 0);
    CHECK(s_drops(&a) == d0);
    s_push_chunk(a.ns, &alone, 1, total, 8, 1);   /* version 8 while 7 arrives */
    CHECKF(s_drops(&a) == d0 + 1, "drops %llu, want %llu", (unsigned long long)s_drops(&a), (unsigned long long)d0 + 1);
    s_tnode_free(&a);
}

/* The stage a WELCOME that boot sent last names (-1: none sent). */
static int s_welcome_stage(const tnode_t *boot)
{
    proto_welcome_t a;
    if (boot->box.keep_n[WIRE_WELCOME] != 3
        || proto_get_welcome(&a, boot->box.keep[WIRE_WELCOME][1], boot->box.keep_len[WIRE_WELCOME][1]) < 0) return -1;
    return a.stage;
}

/* A joiner's wanted stage that comes from a checkpoint binds only in the
 * checkpoint's run: from another run's, the joiner gets the least served
 * stage (stage 0 again would leave the others unserved). */
static void t_join_checkpoint_of_other_run(void)
{
    tnode_t boot;
    keypair_t a, b;
    char err[300];
    if (s_tnode(&boot, 0, 1, "127.0.0.1:7000") < 0) { CHECK(0); return; }
    CHECK(keypair_generate(&a, err, sizeof err) == 0);
    CHECK(keypair_generate(&b, err, sizeof err) == 0);
    uint64_t run = netside_run(boot.ns);
    s_send_join_as(boot.ns, &a, "127.0.0.1:7001", 0, 0, run ^ 0x5a5a);
    CHECKF(s_welcome_stage(&boot) == 1, "another run's stage 0: welcomed to stage %d, want 1", s_welcome_stage(&boot));
    s_send_join_as(boot.ns, &b, "127.0.0.1:7002", 0, 0, run);
    CHECKF(s_welcome_stage(&boot) == 0, "this run's stage 0: welcomed to stage %d, want 0", s_welcome_stage(&boot));
    s_tnode_free(&boot);
}

/* A modelled stage-1 node a (s_tnode_as flags) with its sizes set (si), and
 * a stage-0 peer up that introduced itself to it.  0, or -1 (a is then not
 * made). */
static int s_stage1_fed(tnode_t *a, int flags, keypair_t *up, self_info_t *si)
{
    char err[300];
    if (s_tnode_as(a, 1, 1, "127.0.0.1:7000", flags) < 0) return -1;
    stage_t st;
    if (keypair_generate(up, err, sizeof err) < 0 || stage_init(&st, &a->o.cfg, 1, a->o.stages, err, sizeof err) < 0) {
        s_tnode_free(a);
        return -1;
    }
    memset(si, 0, sizeof *si);
    si->stage = 1;
    si->in_n = stage_in_size(&st, a->o.batch, a->o.cfg.maxT);
    si->out_n = stage_out_size(&st, a->o.batch, a->o.cfg.maxT);
    si->nparams = st.nparams;
    netside_set_self(a->ns, si);
    s_send_join(a->ns, up, "127.0.0.1:7001", 0, 1);   /* the stage-0 peer introduces itself */
    return 0;
}

/* Tensors that reach a node after its compute side ended (its peers have
 * not heard yet) are not bad messages: no drop, no strike. */
static void t_tensor_after_leave_not_dropped(void)
{
    tnode_t a;
    keypair_t up;
    self_info_t si;
    if (s_stage1_fed(&a, 0, &up, &si) < 0) { CHECK(0); return; }
    uint8_t cnt[PROTO_MODELLED_LEN], targets[4096];
    proto_put_modelled(cnt, si.in_n);
    size_t ntarg = (size_t)a.o.batch * (size_t)a.o.cfg.maxT;
    CHECK(ntarg <= sizeof targets);
    memset(targets, 0, sizeof targets);
    const void *f[2] = { cnt, targets };
    size_t l[2] = { sizeof cnt, ntarg };
    uint64_t d0 = s_drops(&a);
    s_deliver(a.ns, &up, WIRE_ACT, 1, 0, 7, f, l, 2);
    CHECKF(s_drops(&a) == d0, "an ACT while running was dropped");
    mail_t *leave = mail_new(MAIL_LEAVE);
    CHECK(leave != NULL);
    if (leave) {
        leave->self.stage = 1;
        leave->self.done = 1;
        netside_on_mail(a.ns, leave);
    }
    s_deliver(a.ns, &up, WIRE_ACT, 1, 0, 8, f, l, 2);
    CHECKF(s_drops(&a) == d0, "an ACT after the compute side ended counted as %llu drops",
           (unsigned long long)(s_drops(&a) - d0));
    s_tnode_free(&a);
}

/* A run of vocabulary 512: an ACT's targets are 2 bytes each.  Targets up
 * to 511 are taken; a frame of one byte per target, or a target of 512, is
 * dropped and counted, and nothing of it reaches the compute side. */
static void t_wide_targets_checked(void)
{
    tnode_t a;
    keypair_t up;
    self_info_t si;
    if (s_stage1_fed(&a, TN_VOCAB512, &up, &si) < 0) { CHECK(0); return; }
    CHECK(a.o.cfg.V == 512 && proto_target_width(a.o.cfg.V) == 2);
    size_t ntarg = (size_t)a.o.batch * (size_t)a.o.cfg.maxT;
    int *t = calloc(ntarg, sizeof *t);
    uint8_t *wide = calloc(ntarg, 2), cnt[PROTO_MODELLED_LEN];
    if (!t || !wide) { CHECK(0); free(t); free(wide); s_tnode_free(&a); return; }
    for (size_t i = 0; i < ntarg; i++) t[i] = (int)((i * 37) % 512);
    t[ntarg - 1] = 511;
    proto_put_modelled(cnt, si.in_n);
    const void *f[2] = { cnt, wide };
    size_t l[2] = { sizeof cnt, 2 * ntarg };
    uint64_t d0 = s_drops(&a);
    proto_put_targets(wide, t, ntarg, 2);
    s_deliver(a.ns, &up, WIRE_ACT, 1, 0, 7, f, l, 2);
    CHECKF(s_drops(&a) == d0 && a.tensors == 1, "targets up to 511: %llu drops, %d posted",
           (unsigned long long)(s_drops(&a) - d0), a.tensors);
    l[1] = ntarg;   /* one byte each, as a run of vocabulary 256 sends */
    s_deliver(a.ns, &up, WIRE_ACT, 1, 0, 8, f, l, 2);
    t[ntarg / 2] = 512;
    proto_put_targets(wide, t, ntarg, 2);
    l[1] = 2 * ntarg;
    s_deliver(a.ns, &up, WIRE_ACT, 1, 0, 9, f, l, 2);
    CHECKF(s_drops(&a) == d0 + 2 && a.tensors == 1, "a short frame and a target of 512: %llu drops, %d posted",
           (unsigned long long)(s_drops(&a) - d0), a.tensors);
    free(t);
    free(wide);
    s_tnode_free(&a);
}

/* Peers that come and go, each with a fresh identity: once they have been
 * gone long enough, no link to any of them stays open (each was a socket
 * and a file descriptor reconnecting to a dead address, one per peer ever
 * seen, until the process ran out of descriptors) and none is pinged. */
static void t_links_of_long_gone_peers_closed(void)
{
    tnode_t a;
    char err[300];
    if (s_tnode(&a, 0, 1, "127.0.0.1:7000") < 0) { CHECK(0); return; }
    enum { GONERS = 40 };
    for (int i = 0; i < GONERS; i++) {
        keypair_t kp;
        char adv[32];
        CHECK(keypair_generate(&kp, err, sizeof err) == 0);
        snprintf(adv, sizeof adv, "127.0.0.1:%d", 8000 + i);
        s_send_join(a.ns, &kp, adv, 1 + i % 3, 1);   /* an introduction, then silence */
        netside_tick(a.ns);
        a.clock += 0.25;
    }
    int pings = 0;
    for (int s = 0; s < 2000; s++) {   /* 1000 s of silence */
        if (s == 1800) pings = a.box.sent[WIRE_PING];
        netside_tick(a.ns);
        a.clock += 0.5;
    }
    CHECKF(a.box.nconn >= GONERS, "%d links opened to %d peers", a.box.nconn, GONERS);
    CHECKF(a.box.nconn - a.box.ndisc == 0, "%d links still open to peers gone for 15 minutes (%d opened)",
           a.box.nconn - a.box.ndisc, a.box.nconn);
    CHECKF(a.box.sent[WIRE_PING] == pings, "%d pings to peers gone for 15 minutes", a.box.sent[WIRE_PING] - pings);
    s_tnode_free(&a);
}

/* A MAIL_SEND of an int8 GRAD of x[n] to peer, with error feedback, as the compute side sends it. */
static void s_send_grad(netside_t *ns, uint64_t peer, const float *x, size_t n)
{
    mail_t *m = mail_new(MAIL_SEND);
    if (!m || !(m->x = malloc(sizeof(float) * n))) { mail_free(m); return; }
    memcpy(m->x, x, sizeof(float) * n);
    wire_hdr_init(&m->hdr, WIRE_GRAD);
    m->hdr.stage = 0;
    m->peer = peer;
    m->n = n;
    m->codec = codec_from_name("int8");
    m->feedback = 1;
    netside_on_mail(ns, m);
}

/* Upstream peers come and go, each with a fresh identity: a gradient stream
 * to a peer met after the first 64 still carries its quantization error
 * forward (the 64 first streams were held for good: every later peer got
 * int8 gradients without error feedback). */
static void t_feedback_streams_of_gone_peers_reused(void)
{
    tnode_t a;
    char err[300];
    if (s_tnode(&a, 1, 0, "127.0.0.1:7000") < 0) { CHECK(0); return; }
    enum { UPSTREAM = 70, N = 512 };
    float x[N];
    for (int i = 0; i < N; i++) x[i] = (float)sin(0.37 * i) * (1.0f + (float)(i % 7));
    uint64_t last = 0;
    for (int k = 0; k < UPSTREAM; k++) {
        keypair_t kp;
        char adv[32];
        CHECK(keypair_generate(&kp, err, sizeof err) == 0);
        snprintf(adv, sizeof adv, "127.0.0.1:%d", 8000 + k);
        s_send_join(a.ns, &kp, adv, 0, 1);   /* a stage-0 peer introduces itself */
        last = node_id_from_pubkey(kp.pub);
        s_send_grad(a.ns, last, x, N);
        a.clock += 0.1;
    }
    /* the same gradient again to the last one: with its error carried forward, it is encoded differently */
    CHECK(a.box.keep_n[WIRE_GRAD] >= 1);
    size_t len1 = a.box.keep_len[WIRE_GRAD][0];
    uint8_t *f1 = malloc(len1 ? len1 : 1);
    if (f1 && a.box.keep_n[WIRE_GRAD] >= 1) memcpy(f1, a.box.keep[WIRE_GRAD][0], len1);
    s_send_grad(a.ns, last, x, N);
    CHECKF(a.box.sent[WIRE_GRAD] == UPSTREAM + 1, "%d GRADs sent", a.box.sent[WIRE_GRAD]);
    CHECKF(f1 && (a.box.keep_len[WIRE_GRAD][0] != len1 || memcmp(f1, a.box.keep[WIRE_GRAD][0], len1) != 0),
           "the %dth upstream peer's gradients are encoded without error feedback", UPSTREAM);
    free(f1);
    for (int t = 0; t < 2000; t++) {   /* 1000 s: every stream's peer is long gone, its residual freed */
        netside_tick(a.ns);
        a.clock += 0.5;
    }
    keypair_t kp;
    CHECK(keypair_generate(&kp, err, sizeof err) == 0);
    s_send_join(a.ns, &kp, "127.0.0.1:9000", 0, 1);
    s_send_grad(a.ns, node_id_from_pubkey(kp.pub), x, N);
    s_send_grad(a.ns, node_id_from_pubkey(kp.pub), x, N);
    CHECKF(a.box.sent[WIRE_GRAD] == UPSTREAM + 3, "%d GRADs sent", a.box.sent[WIRE_GRAD]);
    s_tnode_free(&a);
}

/* The RTT estimate (ms) of the holder of kp, 0 unknown, -1 no such peer. */
static double s_rtt_of(tnode_t *n, const keypair_t *kp)
{
    peer_t *p = peers_find((peers_t *)netside_peers(n->ns), node_id_from_pubkey(kp->pub));
    return p ? p->rtt_ms : -1;
}

/* A PONG from kp to our PING sent at clock time `sent`, delivered at `now`. */
static void s_pong_at(tnode_t *n, const keypair_t *kp, double sent, double now)
{
    n->clock = now;
    s_deliver(n->ns, kp, WIRE_PONG, -1, 0, (uint64_t)(sent * 1e6 + 0.5), NULL, NULL, 0);
}

/* A round trip that spans a peer's silence is not its RTT, not even the
 * first one: a peer paused right after its introduction answered a PING
 * of the pause 4 s late, and that first estimate priced it out of the
 * router's choice for the rest of the run.  A slow link that was never
 * silent still gets its first estimate, however long. */
static void t_first_rtt_not_a_pause(void)
{
    tnode_t a;
    keypair_t p, q;
    char err[300];
    if (s_tnode(&a, 0, 1, "127.0.0.1:7000") < 0) { CHECK(0); return; }
    CHECK(keypair_generate(&p, err, sizeof err) == 0);
    CHECK(keypair_generate(&q, err, sizeof err) == 0);
    s_send_join(a.ns, &p, "127.0.0.1:7001", 1, 1);   /* introduced at 100 s, then paused */
    s_pong_at(&a, &p, 100.2, 104.2);                  /* our PING of 100.2 s, answered after the pause */
    CHECKF(s_rtt_of(&a, &p) == 0, "a round trip across the pause was taken: %.0f ms", s_rtt_of(&a, &p));
    s_pong_at(&a, &p, 104.3, 104.32);
    CHECKF(fabs(s_rtt_of(&a, &p) - 20) < 0.01, "RTT %.3f ms, want 20", s_rtt_of(&a, &p));
    /* q is heard from every 0.4 s over a link with a 2 s round trip: its first estimate is 2 s */
    a.clock = 110.0;
    s_send_join(a.ns, &q, "127.0.0.1:7002", 1, 1);
    for (double t = 110.0; t < 112.05; t += 0.4) {
        a.clock = t;
        s_deliver(a.ns, &q, WIRE_PING, -1, 0, 1, NULL, NULL, 0);
    }
    s_pong_at(&a, &q, 110.1, 112.1);
    CHECKF(fabs(s_rtt_of(&a, &q) - 2000) < 0.01, "RTT %.3f ms, want 2000", s_rtt_of(&a, &q));
    s_tnode_free(&a);
}

/* STATUS_REQs (`brigade status`; each answer holds the peer table) are
 * answered at most 10 per second, all keys together; the rest are dropped
 * and counted, and a peer banned for them is not answered at all. */
static void t_status_req_rate_limited(void)
{
    tnode_t a;
    keypair_t up, tool;
    char err[300];
    if (s_tnode(&a, 0, 1, "127.0.0.1:7000") < 0) { CHECK(0); return; }
    CHECK(keypair_generate(&up, err, sizeof err) == 0 && keypair_generate(&tool, err, sizeof err) == 0);
    s_send_join(a.ns, &up, "127.0.0.1:7001", 1, 1);   /* a stage-1 peer: in the table, so it can be banned */
    uint64_t d0 = s_drops(&a);
    for (int i = 0; i < 40; i++) s_deliver(a.ns, &up, WIRE_STATUS_REQ, -1, 0, 0, NULL, NULL, 0);
    int answered = a.box.sent[WIRE_STATUS];
    uint64_t dropped = s_drops(&a) - d0;
    CHECKF(answered == 10 && dropped == 30, "40 at once: %d answered, %llu dropped (want 10 and 30)",
           answered, (unsigned long long)dropped);
    a.clock += 5.0;   /* the bucket is full again; 20 refused got `up` banned for longer */
    s_deliver(a.ns, &up, WIRE_STATUS_REQ, -1, 0, 0, NULL, NULL, 0);
    CHECKF(a.box.sent[WIRE_STATUS] == answered, "a banned peer's STATUS_REQ was answered");
    s_deliver(a.ns, &tool, WIRE_STATUS_REQ, -1, 0, 0, NULL, NULL, 0);
    CHECKF(a.box.sent[WIRE_STATUS] == answered + 1, "a STATUS_REQ 5 s later was not answered");
    s_tnode_free(&a);
}

/* Refused messages spread over a long run (an honest peer's, now and then)
 * do not add up to a ban: one strike is forgiven per 10 s (they did, 20 in
 * any length of time); twenty in a burst still ban. */
static void t_strikes_forgiven(void)
{
    tnode_t a;
    keypair_t up;
    char err[300];
    if (s_tnode(&a, 0, 1, "127.0.0.1:7000") < 0) { CHECK(0); return; }
    CHECK(keypair_generate(&up, err, sizeof err) == 0);
    s_send_join(a.ns, &up, "127.0.0.1:7001", 1, 1);
    const peer_t *p = peers_find((peers_t *)netside_peers(a.ns), node_id_from_pubkey(up.pub));
    CHECK(p != NULL);
    if (!p) { s_tnode_free(&a); return; }
    uint64_t d0 = s_drops(&a);
    for (int i = 0; i < 60; i++) {   /* a STATE without its body: refused, a strike */
        s_deliver(a.ns, &up, WIRE_STATE, -1, 0, 0, NULL, NULL, 0);
        a.clock += 12.0;
    }
    CHECKF(s_drops(&a) - d0 == 60 && p->banned_until == 0 && p->strikes <= 1,
           "60 refused 12 s apart: %llu dropped, banned until %.0f, %d strikes (want 60, no ban, at most 1)",
           (unsigned long long)(s_drops(&a) - d0), p->banned_until, p->strikes);
    for (int i = 0; i < 19; i++) s_deliver(a.ns, &up, WIRE_STATE, -1, 0, 0, NULL, NULL, 0);
    CHECKF(p->banned_until == 0, "19 refused at once got the peer banned");
    s_deliver(a.ns, &up, WIRE_STATE, -1, 0, 0, NULL, NULL, 0);
    CHECKF(p->banned_until > a.clock, "20 refused at once did not get the peer banned");
    s_tnode_free(&a);
}

/* A node that has seen PEERS_CAP peers (each restart of an ephemeral
 * identity is a new one): a newcomer takes the place of a peer taken for
 * gone and silent for more than 10 minutes, never of one alive or lately
 * heard from; with nothing to forget it stays unknown, as before. */
static void t_full_table_forgets_long_gone(void)
{
    tnode_t a;
    char err[300];
    if (s_tnode(&a, 0, 1, "127.0.0.1:7000") < 0) { CHECK(0); return; }
    enum { OLD = PEERS_CAP - 1 - 8 };   /* self, these, and 8 that stay alive */
    keypair_t alive[8], late, later;
    for (int i = 0; i < OLD; i++) {
        keypair_t kp;
        char adv[32];
        CHECK(keypair_generate(&kp, err, sizeof err) == 0);
        snprintf(adv, sizeof adv, "127.0.0.%d:%d", 2 + i / 10000, 10000 + i % 10000);
        s_send_join(a.ns, &kp, adv, 1 + i % 3, 1);   /* an introduction, then silence */
    }
    for (int i = 0; i < 8; i++) {
        char adv[32];
        CHECK(keypair_generate(&alive[i], err, sizeof err) == 0);
        snprintf(adv, sizeof adv, "127.0.1.1:%d", 9000 + i);
        s_send_join(a.ns, &alive[i], adv, 1 + i % 3, 1);
    }
    CHECK(keypair_generate(&late, err, sizeof err) == 0 && keypair_generate(&later, err, sizeof err) == 0);
    s_send_join(a.ns, &late, "127.0.1.2:9100", 1, 1);
    CHECKF(!s_knows(&a, &late), "a newcomer was taken into a full table of peers heard from just now");
    /* 85 minutes: the 8 keep talking, the others are silent (in a table this large a silent peer is taken
     * for gone after about 68 minutes, 4 sweeps of the PINGs to non-partners, then forgotten 10 minutes on) */
    for (int s = 0; s < 10200; s++) {
        if (s % 4 == 0)
            for (int i = 0; i < 8; i++) s_deliver(a.ns, &alive[i], WIRE_PING, -1, 0, (uint64_t)s, NULL, NULL, 0);
        netside_tick(a.ns);
        a.clock += 0.5;
    }
    s_send_join(a.ns, &later, "127.0.1.2:9101", 2, 1);
    int alive_known = 0;
    for (int i = 0; i < 8; i++) alive_known += s_knows(&a, &alive[i]);
    CHECKF(s_knows(&a, &later), "a newcomer stayed unknown in a table full of peers silent for 85 minutes");
    CHECKF(alive_known == 8, "%d of the 8 peers alive all along are still known", alive_known);
    s_tnode_free(&a);
}

/* kp's record with its signed announcement (sequence seq) of addr, as a
 * PEERS from `from` carries it (from's own record first, on its word). */
enum { SPOIL_NONE, SPOIL_SIGNATURE, SPOIL_CUT };   /* s_send_announce_as: a valid PEERS, or one spoilt so */

static void s_send_announce_as(netside_t *ns, const keypair_t *from, const char *from_adv, const keypair_t *kp,
                               const char *addr, int stage, uint64_t seq, int spoil)
{
    char err[200];
    peer_info_t recs[2];
    memset(recs, 0, sizeof recs);
    const keypair_t *who[2] = { from, kp };
    const char *adv[2] = { from_adv, addr };
    for (int i = 0; i < 2; i++) {
        recs[i].id = node_id_from_pubkey(who[i]->pub);
        memcpy(recs[i].pubkey, who[i]->pub, 32);
        snprintf(recs[i].addr, sizeof recs[i].addr, "%s", adv[i]);
        recs[i].stage = (int16_t)stage;
    }
    announce_t a;
    uint8_t blob[ANNOUNCE_LEN];
    if (announce_sign(&a, &recs[1], seq, kp, err, sizeof err) != 0) return;
    announce_encode(blob, &a);
    if (spoil == SPOIL_SIGNATURE) blob[ANNOUNCE_LEN - 1] ^= 1;   /* its signature no longer checks */
    wbuf_t w;
    wbuf_init(&w, 1 << 16);
    const uint8_t *blobs[2] = { NULL, blob };
    proto_put_table(&w, recs, blobs, 2);
    static const proto_peers_tail_t tail;   /* nothing done, no progress records */
    proto_put_peers_tail(&w, &tail);
    const void *f[1] = { w.data };
    size_t l[1] = { w.len - (spoil == SPOIL_CUT ? 3 : 0) };   /* cut: its progress records' count short */
    if (!wbuf_error(&w)) s_deliver(ns, from, WIRE_PEERS, stage, 0, 0, f, l, 1);
    wbuf_free(&w);
}

static void s_send_announce(netside_t *ns, const keypair_t *from, const char *from_adv, const keypair_t *kp,
                            const char *addr, int stage, uint64_t seq)
{
    s_send_announce_as(ns, from, from_adv, kp, addr, stage, seq, SPOIL_NONE);
}

/* An outward-only peer whose adopted link was closed (its announcement
 * named a new address), which then got a link we opened and said again
 * that it is outward-only: that link is closed, not kept open beside the
 * newly adopted one.  Repeated, it used to leave one open link per round
 * (a socket reconnecting to an address of the peer's choice). */
static void t_adopted_link_not_leaked(void)
{
    tnode_t a;
    keypair_t ka, kb;
    char err[300];
    if (s_tnode_as(&a, 0, 1, "127.0.0.1:7000", TN_ADOPT) < 0) { CHECK(0); return; }
    CHECK(keypair_generate(&ka, err, sizeof err) == 0 && keypair_generate(&kb, err, sizeof err) == 0);
    s_send_join(a.ns, &kb, "127.0.0.1:7101", 1, 1);
    s_send_join_as(a.ns, &ka, "127.0.0.1:7200", 1, JOIN_FLAG_INTRO | JOIN_FLAG_OUTWARD, 0);
    for (int i = 0; i < 20; i++) {
        char addr[32];
        snprintf(addr, sizeof addr, "127.0.0.1:%d", 8000 + i);
        s_send_announce(a.ns, &kb, "127.0.0.1:7101", &ka, addr, 1, (uint64_t)i + 1);   /* new address, not outward */
        s_deliver(a.ns, &ka, WIRE_PING, -1, 0, (uint64_t)i, NULL, NULL, 0);          /* a link we open to it */
        s_send_join_as(a.ns, &ka, addr, 1, JOIN_FLAG_INTRO | JOIN_FLAG_OUTWARD, 0);  /* outward-only again */
        a.clock += 0.01;
    }
    int open = a.box.nconn - a.box.ndisc;
    CHECKF(a.box.nconn >= 20 && open <= 2, "%d links open after 20 rounds (%d opened or adopted)", open, a.box.nconn);
    s_tnode_free(&a);
}

/* A changed record goes first in the next few gossip rounds; answering
 * STATUS_REQs (anyone may send 10 a second) spends none of those rounds. */
static void t_status_keeps_rumors(void)
{
    tnode_t a;
    keypair_t x, tool;
    char err[300];
    if (s_tnode(&a, 0, 1, "127.0.0.1:7000") < 0) { CHECK(0); return; }
    CHECK(keypair_generate(&x, err, sizeof err) == 0 && keypair_generate(&tool, err, sizeof err) == 0);
    s_send_join(a.ns, &x, "127.0.0.1:7001", 1, 1);
    peer_t *p = peers_find((peers_t *)netside_peers(a.ns), node_id_from_pubkey(x.pub));
    int before = p ? p->rumor : -1;
    for (int i = 0; i < 10; i++) s_deliver(a.ns, &tool, WIRE_STATUS_REQ, -1, 0, 0, NULL, NULL, 0);
    CHECKF(a.box.sent[WIRE_STATUS] == 10, "%d of 10 STATUS_REQs answered", a.box.sent[WIRE_STATUS]);
    CHECKF(p && before > 0 && p->rumor == before, "a new peer's gossip rounds went from %d to %d over 10 STATUS answers",
           before, p ? p->rumor : -1);
    s_tnode_free(&a);
}

/* A backup fetch (from whichever holder answers) is not taken over by a
 * malformed STATE reply: the first one, from a key not even known here, made
 * every chunk of the real holder be discarded, and the stage fell to its
 * initial weights. */
static void t_backup_fetch_not_taken_over(void)
{
    tnode_t b;
    keypair_t holder, rogue;
    char err[300];
    if (s_tnode(&b, 1, 1, "127.0.0.1:7000") < 0) { CHECK(0); return; }
    CHECK(keypair_generate(&holder, err, sizeof err) == 0 && keypair_generate(&rogue, err, sizeof err) == 0);
    s_send_join(b.ns, &holder, "127.0.0.1:7001", 0, 1);
    mail_t *f = mail_new(MAIL_FETCH);   /* stage 2's state from any holder of its backup */
    f->hdr.stage = 2;
    f->peer = 0;
    f->hdr.mb = 30000;
    netside_on_mail(b.ns, f);
    uint8_t junk[3] = { 1, 2, 3 };
    const void *jf[2] = { junk, junk };
    size_t jl[2] = { sizeof junk, 0 };
    s_deliver(b.ns, &rogue, WIRE_STATE, 2, STATE_FLAG_BACKUP | STATE_FLAG_REPLY, 0, jf, jl, 2);
    size_t total = s_state_bytes(&b.o, 2);
    uint32_t chunks = (uint32_t)((total + STATE_CHUNK - 1) / STATE_CHUNK);
    for (uint32_t i = 0; i < chunks; i++) {
        uint8_t pre[PROTO_STATE_PRE_LEN];
        proto_put_state_pre(pre, total, 0, 7);
        const void *cf[2] = { pre, pre };
        size_t cl[2] = { sizeof pre, 0 };
        s_deliver(b.ns, &holder, WIRE_STATE, 2, STATE_FLAG_BACKUP | STATE_FLAG_REPLY, i, cf, cl, 2);
    }
    CHECKF(b.states == 1, "after one junk reply the holder's %u chunks gave %d states (want 1)", chunks, b.states);
    s_tnode_free(&b);
}

/* A relay forwards envelopes it cannot open: those that do not open at the
 * receiver are counted, not held against the relay (25 of a hostile
 * sealer's got an honest relay banned, cutting every pair it served). */
static void t_relay_not_blamed_for_sealer(void)
{
    tnode_t relay, recv;
    keypair_t evil;
    char err[300];
    if (s_tnode_as(&relay, 0, 1, "127.0.0.1:7000", TN_ADOPT | TN_RELAY) < 0 || s_tnode(&recv, 1, 1, "127.0.0.1:7002") < 0) {
        CHECK(0);
        return;
    }
    CHECK(keypair_generate(&evil, err, sizeof err) == 0);
    s_send_join_as(relay.ns, &recv.kp, "127.0.0.1:7002", 1, JOIN_FLAG_INTRO | JOIN_FLAG_OUTWARD, 0);
    s_send_join_as(relay.ns, &evil, "127.0.0.1:7003", 1, JOIN_FLAG_INTRO | JOIN_FLAG_OUTWARD, 0);
    s_send_join(recv.ns, &relay.kp, "127.0.0.1:7000", 0, 1);
    s_send_join_as(recv.ns, &evil, "127.0.0.1:7003", 1, JOIN_FLAG_INTRO | JOIN_FLAG_OUTWARD, 0);
    uint64_t recv_id = node_id_from_pubkey(recv.kp.pub), evil_id = node_id_from_pubkey(evil.pub);
    int forwarded = 0;
    uint64_t d0 = s_drops(&recv);
    for (int k = 0; k < 25; k++) {
        uint8_t env[200];
        for (size_t i = 0; i < sizeof env; i++) env[i] = (uint8_t)(i * 7 + (size_t)k);
        const void *ef[1] = { env };
        size_t el[1] = { sizeof env };
        int before = relay.box.sent[WIRE_RELAY];
        s_deliver(relay.ns, &evil, WIRE_RELAY, 1, 0, recv_id, ef, el, 1);
        if (relay.box.sent[WIRE_RELAY] == before) continue;
        forwarded++;
        s_deliver(recv.ns, &relay.kp, WIRE_RELAY, 0, RELAY_FLAG_FWD, evil_id,
                  (const void *const *)relay.box.keep[WIRE_RELAY], relay.box.keep_len[WIRE_RELAY], 1);
        recv.clock += 0.05;
        relay.clock += 0.05;
    }
    const peer_t *rp = peers_find((peers_t *)netside_peers(recv.ns), node_id_from_pubkey(relay.kp.pub));
    CHECKF(forwarded == 25 && s_drops(&recv) - d0 == 25, "%d forwarded, %llu dropped at the receiver (want 25, 25)",
           forwarded, (unsigned long long)(s_drops(&recv) - d0));
    CHECKF(rp && rp->banned_until == 0 && rp->strikes == 0, "the relay: banned until %.1f, %d strikes (want neither)",
           rp ? rp->banned_until : -1.0, rp ? rp->strikes : -1);
    s_tnode_free(&relay);
    s_tnode_free(&recv);
}

/* A send of ours that fails (the peer's link queue full: a slow or paused
 * peer) is counted, not held against that peer (20 got it banned, and its
 * messages were then ignored for 60 s). */
static void t_failed_send_not_blamed(void)
{
    tnode_t a;
    keypair_t next;
    char err[300];
    if (s_tnode(&a, 0, 1, "127.0.0.1:7000") < 0) { CHECK(0); return; }
    CHECK(keypair_generate(&next, err, sizeof err) == 0);
    s_send_join(a.ns, &next, "127.0.0.1:7001", 1, 1);
    uint64_t id = node_id_from_pubkey(next.pub), d0 = s_drops(&a);
    a.box.refuse_type = WIRE_ACT;
    for (int k = 0; k < 25; k++) {
        mail_t *m = mail_new(MAIL_SEND);
        wire_hdr_init(&m->hdr, WIRE_ACT);
        m->hdr.stage = 1;
        m->hdr.mb = (uint64_t)k;
        m->peer = id;
        m->n = 16;
        netside_on_mail(a.ns, m);
        a.clock += 0.05;
    }
    const peer_t *p = peers_find((peers_t *)netside_peers(a.ns), id);
    CHECKF(s_drops(&a) - d0 == 25, "%llu of 25 failed sends counted", (unsigned long long)(s_drops(&a) - d0));
    CHECKF(p && p->banned_until == 0 && p->strikes == 0, "the peer: banned until %.1f, %d strikes (want neither)",
           p ? p->banned_until : -1.0, p ? p->strikes : -1);
    s_tnode_free(&a);
}

/* A peer back at another address (restarted with its keys on another
 * port) is sent to there: the link opened to its old address is closed, by
 * its JOIN and by its own record in a PEERS alike (both took the new
 * address after the check for a change, so the link stayed on the dead
 * address until the peer was forgotten, and a restarted node got no work). */
static void t_new_address_closes_link(void)
{
    char err[300];
    for (int way = 0; way < 2; way++) {
        tnode_t a;
        if (s_tnode(&a, 0, 1, "127.0.0.1:7000") < 0) { CHECK(0); return; }
        keypair_t b, c;
        CHECK(keypair_generate(&b, err, sizeof err) == 0 && keypair_generate(&c, err, sizeof err) == 0);
        s_send_join(a.ns, &b, "127.0.0.1:7100", 1, 1);
        for (int t = 0; t < 40 && a.box.nconn == 0; t++) { netside_tick(a.ns); a.clock += 0.5; }
        int opened = a.box.nconn, closed = a.box.ndisc;
        if (way == 0) s_send_join(a.ns, &b, "127.0.0.1:7200", 1, 1);
        else s_send_announce(a.ns, &b, "127.0.0.1:7200", &c, "127.0.0.1:7300", 1, 1);
        const peer_t *p = peers_find((peers_t *)netside_peers(a.ns), node_id_from_pubkey(b.pub));
        CHECKF(opened == 1 && a.box.ndisc == closed + 1 && p && strcmp(p->info.addr, "127.0.0.1:7200") == 0,
               "%s: %d links opened, %d closed at the new address, address now %s", way ? "PEERS" : "JOIN", opened,
               a.box.ndisc - closed, p ? p->info.addr : "?");
        s_tnode_free(&a);
    }
}

/* An announcement whose signature does not check is the sender's doing (a
 * node passes on only those it checked): the PEERS is dropped and counted
 * at the first, and the records after it are not taken (each cost a
 * signature check, and none was counted).  A PEERS cut short is dropped
 * before any of it is taken. */
static void t_forged_announcement_dropped(void)
{
    tnode_t a;
    char err[300];
    if (s_tnode(&a, 0, 1, "127.0.0.1:7000") < 0) { CHECK(0); return; }
    keypair_t h, f;
    CHECK(keypair_generate(&h, err, sizeof err) == 0 && keypair_generate(&f, err, sizeof err) == 0);
    s_send_join(a.ns, &h, "127.0.0.1:7100", 1, 1);
    uint64_t d0 = s_drops(&a);
    s_send_announce_as(a.ns, &h, "127.0.0.1:7100", &f, "127.0.0.1:7200", 1, 1, SPOIL_SIGNATURE);
    CHECKF(s_drops(&a) == d0 + 1 && !s_knows(&a, &f), "a forged announcement: %llu drops counted (want 1), its peer %s",
           (unsigned long long)(s_drops(&a) - d0), s_knows(&a, &f) ? "taken" : "not taken");
    s_send_announce_as(a.ns, &h, "127.0.0.1:7100", &f, "127.0.0.1:7200", 1, 1, SPOIL_CUT);
    CHECKF(s_drops(&a) == d0 + 2 && !s_knows(&a, &f), "a PEERS cut short after its announcements: %llu drops counted (want 2), "
           "its peer %s", (unsigned long long)(s_drops(&a) - d0), s_knows(&a, &f) ? "taken" : "not taken");
    s_send_announce(a.ns, &h, "127.0.0.1:7100", &f, "127.0.0.1:7200", 1, 1);
    CHECKF(s_drops(&a) == d0 + 2 && s_knows(&a, &f), "the same announcement signed, the PEERS whole: %s, drops %llu",
           s_knows(&a, &f) ? "taken" : "not taken", (unsigned long long)(s_drops(&a) - d0));
    s_tnode_free(&a);
}

/* One PEERS from `from` (its own record first, at from_adv) with the
 * records of kp[0..n-1] at stage 1, each with its own signed announcement
 * (self-signed peers cost nothing to make). */
static void s_send_signed_many(netside_t *ns, const keypair_t *from, const char *from_adv, const keypair_t *kp, int n)
{
    char err[200];
    peer_info_t *recs = calloc((size_t)n + 1, sizeof *recs);
    uint8_t (*blob)[ANNOUNCE_LEN] = calloc((size_t)n + 1, ANNOUNCE_LEN);
    wbuf_t w;
    wbuf_init(&w, 1 << 22);
    for (int i = 0; recs && blob && i <= n; i++) {
        const keypair_t *k = i ? &kp[i - 1] : from;
        recs[i].id = node_id_from_pubkey(k->pub);
        memcpy(recs[i].pubkey, k->pub, 32);
        if (i) snprintf(recs[i].addr, sizeof recs[i].addr, "10.0.%d.%d:7000", i >> 8, i & 255);
        else snprintf(recs[i].addr, sizeof recs[i].addr, "%s", from_adv);
        recs[i].stage = 1;
        announce_t a;
        if (i && announce_sign(&a, &recs[i], 1, k, err, sizeof err) == 0) announce_encode(blob[i], &a);
    }
    if (recs && blob) {
        const uint8_t **blobs = malloc(sizeof *blobs * (size_t)(n + 1));
        for (int i = 0; blobs && i <= n; i++) blobs[i] = i ? blob[i] : NULL;
        static const proto_peers_tail_t tail;   /* nothing done, no progress records */
        if (blobs) proto_put_table(&w, recs, blobs, n + 1);
        else w.err = 1;
        proto_put_peers_tail(&w, &tail);
        free(blobs);
        const void *f[1] = { w.data };
        size_t l[1] = { w.len };
        if (!wbuf_error(&w)) s_deliver(ns, from, WIRE_PEERS, 1, 0, 0, f, l, 1);
    }
    wbuf_free(&w);
    free(recs);
    free(blob);
}

/* A member's gossip introduces new peers within a budget: one PEERS of 300
 * self-signed peers filled 300 records (4094 filled the table, and an
 * honest newcomer found no room), and opened a link to each. */
static void t_gossip_introduces_within_budget(void)
{
    enum { FAKES = 300 };
    tnode_t a;
    char err[300];
    if (s_tnode(&a, 0, 1, "127.0.0.1:7000") < 0) { CHECK(0); return; }
    keypair_t h, *fake = calloc(FAKES, sizeof *fake);
    CHECK(fake && keypair_generate(&h, err, sizeof err) == 0);
    for (int i = 0; fake && i < FAKES; i++) keypair_generate(&fake[i], err, sizeof err);
    s_send_join(a.ns, &h, "127.0.0.1:7100", 1, 1);
    int n0 = netside_peers(a.ns)->n;
    uint64_t d0 = s_drops(&a);
    if (fake) s_send_signed_many(a.ns, &h, "127.0.0.1:7100", fake, FAKES);
    int learnt = netside_peers(a.ns)->n - n0;
    CHECKF(learnt == 64 && s_drops(&a) == d0 + 1, "one PEERS of %d new peers: %d taken (want 64), %llu drops counted (want 1)",
           FAKES, learnt, (unsigned long long)(s_drops(&a) - d0));
    a.clock += 10;   /* 40 more may come */
    if (fake) s_send_signed_many(a.ns, &h, "127.0.0.1:7100", fake, FAKES);
    CHECKF(netside_peers(a.ns)->n - n0 == 64 + 40, "10 s later: %d taken in all (want 104)", netside_peers(a.ns)->n - n0);
    free(fake);
    s_tnode_free(&a);
}

/* Health of kp's record at a (-1 unknown). */
static int s_health_at(tnode_t *a, const keypair_t *kp)
{
    const peer_t *p = peers_find((peers_t *)netside_peers(a->ns), node_id_from_pubkey(kp->pub));
    return p ? (int)p->health : -1;
}

/* A node a (stage 0) that knows h at 127.0.0.1:7100 and d at :7200; for
 * `seconds`, h answers a every 2 s (and, with vouch, says it heard from d
 * just now) while d, dead, answers nothing.  0, or -1 (a failed check). */
static int s_with_dead_peer(tnode_t *a, keypair_t *h, keypair_t *d, int seconds, int vouch)
{
    char err[300];
    if (s_tnode(a, 0, 1, "127.0.0.1:7000") < 0) { CHECK(0); return -1; }
    CHECK(keypair_generate(h, err, sizeof err) == 0 && keypair_generate(d, err, sizeof err) == 0);
    s_send_join(a->ns, h, "127.0.0.1:7100", 1, 1);
    s_send_join(a->ns, d, "127.0.0.1:7200", 1, 1);
    for (int t = 0; t < 2 * seconds; t++) {
        if (t % 4 == 0) {
            s_deliver(a->ns, h, WIRE_PING, -1, 0, (uint64_t)t, NULL, NULL, 0);
            if (vouch) s_send_announce(a->ns, h, "127.0.0.1:7100", d, "127.0.0.1:7200", 1, 1);
        }
        netside_tick(a->ns);
        a->clock += 0.5;
    }
    return 0;
}

/* A member's word "heard from it just now" of a peer that answers our
 * pings nothing does not keep it alive here: it is taken for gone as
 * without that word (it stayed alive, drawing work, for as long as the
 * member said so). */
static void t_hearsay_keeps_no_dead_peer_alive(void)
{
    for (int lie = 0; lie < 2; lie++) {
        tnode_t a;
        keypair_t h, d;
        if (s_with_dead_peer(&a, &h, &d, 120, lie) < 0) return;
        CHECKF(s_health_at(&a, &d) == PEER_GONE, "%s: a peer silent to us for 120 s has health %d (want %d, gone)",
               lie ? "vouched for by a member" : "no word of it", s_health_at(&a, &d), PEER_GONE);
        s_tnode_free(&a);
    }
}

/* A node d that died (our pings unanswered) and was taken for gone comes
 * back: by its own JOIN (at its address or another), or in a member's
 * newer announcement of its new address.  Alive then, and it stays so: the
 * pings its dead self left unanswered made it gone again at once. */
static void t_restarted_peer_not_gone_again(void)
{
    for (int way = 0; way < 3; way++) {
        tnode_t a;
        keypair_t h, d;
        if (s_with_dead_peer(&a, &h, &d, 30, 0) < 0) return;
        int before = s_health_at(&a, &d);
        if (way < 2) s_send_join(a.ns, &d, way ? "127.0.0.1:7300" : "127.0.0.1:7200", 1, 0);
        else s_send_announce(a.ns, &h, "127.0.0.1:7100", &d, "127.0.0.1:7300", 1, 5000000000000ull);
        int back = s_health_at(&a, &d);
        a.clock += 0.3;
        netside_tick(a.ns);
        const char *how[] = { "its JOIN at its address", "its JOIN at a new address", "a member's word of its new address" };
        CHECKF(before == PEER_GONE && back != PEER_GONE && s_health_at(&a, &d) != PEER_GONE,
               "%s: health before %d, on its return %d, 0.3 s later %d (gone %d)", how[way], before, back,
               s_health_at(&a, &d), PEER_GONE);
        s_tnode_free(&a);
    }
}

/* A member's first gossip reaches a node 2 s into its process: its 30 new
 * peers are all taken (a peer's learn bucket starts full; it held 4 x the
 * process's age, and honest gossip was refused and counted). */
static void t_young_node_learns_first_gossip(void)
{
    enum { N = 30 };
    char err[300];
    tnode_t a;
    if (s_tnode_as(&a, 0, 1, "127.0.0.1:7000", TN_YOUNG) < 0) { CHECK(0); return; }
    keypair_t h, *k = calloc(N, sizeof *k);
    CHECK(k && keypair_generate(&h, err, sizeof err) == 0);
    for (int i = 0; k && i < N; i++) keypair_generate(&k[i], err, sizeof err);
    s_send_join(a.ns, &h, "127.0.0.1:7100", 1, 1);
    int n0 = netside_peers(a.ns)->n;
    uint64_t d0 = s_drops(&a);
    if (k) s_send_signed_many(a.ns, &h, "127.0.0.1:7100", k, N);
    CHECKF(netside_peers(a.ns)->n - n0 == N && s_drops(&a) == d0, "%d of %d new peers taken, %llu drops",
           netside_peers(a.ns)->n - n0, N, (unsigned long long)(s_drops(&a) - d0));
    free(k);
    s_tnode_free(&a);
}

int main(int argc, char **argv)
{
    if (argc == 1) {
        RUN(t_wildcard_address_refused);
        RUN(t_backup_serving_limited);
        RUN(t_backup_other_snapshot_counted);
        RUN(t_backup_bad_values_refused);
        RUN(t_join_answers_from_bootstrap_only);
        RUN(t_join_checkpoint_of_other_run);
        RUN(t_tensor_after_leave_not_dropped);
        RUN(t_wide_targets_checked);
        RUN(t_links_of_long_gone_peers_closed);
        RUN(t_closed_ticket_expires);
        RUN(t_feedback_streams_of_gone_peers_reused);
        RUN(t_first_rtt_not_a_pause);
        RUN(t_status_req_rate_limited);
        RUN(t_strikes_forgiven);
        RUN(t_full_table_forgets_long_gone);
        RUN(t_adopted_link_not_leaked);
        RUN(t_status_keeps_rumors);
        RUN(t_backup_fetch_not_taken_over);
        RUN(t_relay_not_blamed_for_sealer);
        RUN(t_failed_send_not_blamed);
        RUN(t_new_address_closes_link);
        RUN(t_forged_announcement_dropped);
        RUN(t_gossip_introduces_within_budget);
        RUN(t_hearsay_keeps_no_dead_peer_alive);
        RUN(t_restarted_peer_not_gone_again);
        RUN(t_young_node_learns_first_gossip);
        CHECK_EXIT();
    }
    const char *target = NULL, *runhex = NULL;
    double seconds = -1, rate = 200;
    uint64_t seed = 0;
    int allow_avg = 0, allow_control = 0, only = -1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--target") && i + 1 < argc) target = argv[++i];
        else if (!strcmp(argv[i], "--run") && i + 1 < argc) runhex = argv[++i];
        else if (!strcmp(argv[i], "--seconds") && i + 1 < argc) seconds = atof(argv[++i]);
        else if (!strcmp(argv[i], "--rate") && i + 1 < argc) rate = atof(argv[++i]);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--attack-avg")) allow_avg = 1;
        else if (!strcmp(argv[i], "--attack-control")) allow_control = 1;
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) {
            const char *name = argv[++i];
            for (int k = 0; k < K_COUNT; k++) if (!strcmp(name, s_kind[k])) only = k;
            if (only < 0 || only == K_JOIN) return s_usage("--only: not an attack kind");
        }
        else return s_usage("unknown option or missing value");
    }
    if (!target || !runhex || !(seconds >= 0 && seconds <= 3600) || !(rate > 0 && rate <= 1e5))
        return s_usage("--target, --run and --seconds (0..3600) are required");
    if ((only == K_AVG && !allow_avg) || (only == K_CONTROL && !allow_control))
        return s_usage("--only: that kind needs --attack-avg or --attack-control");
    char *end;
    errno = 0;
    uint64_t run = strtoull(runhex, &end, 16);
    if (errno || *end || end == runhex) return s_usage("--run: not a hex number");

    static rogue_t rg;
    rogue_t *r = &rg;
    memset(r, 0, sizeof *r);
    r->run = run;
    r->tstage = -1;
    r->rng = seed ? seed : ((uint64_t)time(NULL) << 20) ^ (uint64_t)(uintptr_t)r ^ 0x9E3779B97F4A7C15ull;
    char err[400];
    if (s_setup(r, target, err, sizeof err) < 0) { fprintf(stderr, "test_rogue: %s\n", err); return 2; }

    double t0 = s_now(), hard_end = t0 + seconds + 12.0;
    /* join like a real joiner, up to 10 s */
    s_join(r, -1);
    double resend = s_now() + 2.0;
    while (!r->admitted && s_now() < t0 + 10.0 && s_now() < hard_end) {
        s_drain(r, 50);
        if (s_now() > resend) { s_join(r, -1); resend = s_now() + 2.0; }
    }
    printf("rogue: admitted=%s target_stage=%d stages=%d in=%zu out=%zu\n", r->admitted ? "yes" : "no",
           r->tstage, r->nstages, r->in_n, r->out_n);
    fflush(stdout);

    double start = s_now(), stop = start + seconds, next_join = start, last_oversize = 0;
    double gap = 1.0 / rate, next_send = start;
    int kinds[K_COUNT], nk = 0;
    for (int k = 0; k < K_COUNT; k++) {
        if (k == K_JOIN || (only >= 0 && k != only)) continue;
        if (k == K_AVG && !allow_avg) continue;
        if (k == K_CONTROL && !allow_control) continue;
        kinds[nk++] = k;
    }
    /* first, before any refused message could get us banned: an identity
     * whose address is hostile to a metrics writer */
    if (only < 0 || only == K_HOSTILE_ADDR) s_attack(r, K_HOSTILE_ADDR, allow_avg, allow_control);
    int phase = 0;
    while (s_now() < stop && s_now() < hard_end) {
        double now = s_now();
        if (now >= next_join) {
            /* take the stage before, after, or at the target's, in turn, so that
             * ACT, GRAD and STATE_REQ/AVG pass the stage checks */
            int want = -1;
            if (r->tstage >= 0 && r->nstages > 0) {
                int cand[3] = { r->tstage - 1, r->tstage + 1, r->tstage };
                want = cand[phase++ % 3];
                if (want < 0 || want >= r->nstages) want = r->tstage;
            }
            s_join(r, want);
            next_join = now + 1.0;
        }
        if (now >= next_send) {
            int kind = kinds[s_rand(r) % (uint64_t)nk];
            if (kind == K_OVERSIZE && now - last_oversize < 5.0) kind = K_GARBAGE_TENSOR;
            if (kind == K_OVERSIZE) last_oversize = now;
            s_attack(r, kind, allow_avg, allow_control);
            next_send += gap;
            if (next_send < now - 1.0) next_send = now;   /* do not burst after a stall */
        }
        double wait = next_send - s_now();
        s_drain(r, wait > 0 ? (int)(wait * 1000) + 1 : 0);
    }
    uint64_t total = 0;
    for (int k = 0; k < K_COUNT; k++) {
        total += r->sent[k];
        printf("rogue: sent %s %" PRIu64 "\n", s_kind[k], r->sent[k]);
    }
    printf("rogue: admitted=%s sent=%" PRIu64 " blocked=%" PRIu64 " received=%" PRIu64 " seconds=%.1f\n",
           r->admitted ? "yes" : "no", total, r->blocked, r->received, s_now() - start);
    fflush(stdout);
    for (int k = 0; k < S_REPLAYS; k++)
        for (int i = 0; i < r->rep_n[k]; i++) free(r->rep[k][i]);
    codec_ctx_destroy(&r->codec);
    zmq_close(r->dealer);
    zmq_close(r->router);
    zmq_ctx_term(r->ctx);
    keypair_wipe(&r->kp);
    return 0;
}
