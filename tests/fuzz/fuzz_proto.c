// fuzz-sources: node/runtime/proto.c node/runtime/options.c node/engine/*.c net/wire.c net/keys.c compress/*.c
/* fuzz_proto.c: libFuzzer target for the message bodies of proto.h.
 *
 * The first byte picks a body, the rest is its bytes.  No decoder may read
 * past its input; a body that decodes must encode to a body that decodes
 * to the same values. */
#include "node/runtime/proto.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void s_join(const uint8_t *d, size_t n)
{
    proto_join_t a, b;
    if (proto_get_join(&a, d, n) < 0) return;
    wbuf_t w;
    wbuf_init(&w, 4096);
    int full = a.tlen == TICKET_LEN;
    proto_put_join(&w, a.adv, a.want, full ? a.ticket : NULL, a.has_hint && a.want >= 0 ? a.hint_run : 0);
    if (wbuf_error(&w) || proto_get_join(&b, w.data, w.len) < 0) abort();
    if (strcmp(a.adv, b.adv) != 0 || a.want != b.want) abort();
    if (full && (b.tlen != TICKET_LEN || memcmp(a.ticket, b.ticket, TICKET_LEN) != 0)) abort();
    wbuf_free(&w);
}

static void s_welcome(const uint8_t *d, size_t n)
{
    proto_welcome_t a, b;
    if (proto_get_welcome(&a, d, n) < 0) return;
    uint8_t buf[16];
    wbuf_t w;
    wbuf_init_fixed(&w, buf, sizeof buf);
    proto_put_welcome(&w, &a);
    if (proto_get_welcome(&b, buf, w.len) < 0 || a.stage != b.stage || a.shard != b.shard
        || !a.done != !b.done || !a.reachable != !b.reachable)   /* (flags: any nonzero byte is 1) */
        abort();
}

static void s_state_pre(const uint8_t *d, size_t n)
{
    proto_state_pre_t a, b;
    if (proto_get_state_pre(&a, d, n) < 0) return;
    uint8_t buf[PROTO_STATE_PRE_LEN];
    proto_put_state_pre(buf, a.total, a.checksum, a.version);
    if (proto_get_state_pre(&b, buf, sizeof buf) < 0) abort();
    if (a.total != b.total || a.checksum != b.checksum || a.version != b.version) abort();
}

static void s_peers_tail(const uint8_t *d, size_t n)
{
    static proto_peers_tail_t a, b;
    rbuf_t r;
    rbuf_init(&r, d, n);
    if (proto_get_peers_tail(&r, &a) < 0) return;
    wbuf_t w;
    wbuf_init(&w, 1 << 16);
    proto_put_peers_tail(&w, &a);
    rbuf_init(&r, w.data, w.len);
    if (wbuf_error(&w) || proto_get_peers_tail(&r, &b) < 0) abort();
    if (a.completed != b.completed || !a.done != !b.done || a.np != b.np || a.said != b.said || a.progress != b.progress)
        abort();
    if (memcmp(a.id, b.id, sizeof a.id[0] * a.np) != 0 || memcmp(a.done_by, b.done_by, sizeof a.done_by[0] * a.np) != 0)
        abort();
    wbuf_free(&w);
}

static void s_status(const uint8_t *d, size_t n)
{
    proto_status_t a;
    rbuf_t r;
    rbuf_init(&r, d, n);
    if (proto_get_status(&r, &a) < 0) return;
    if (strnlen(a.model, sizeof a.model) >= sizeof a.model) abort();
    const uint8_t *blobs[8];
    size_t lens[8];
    uint8_t links[8];
    proto_get_status_rest(&r, 8, blobs, lens, links);
    for (int i = 0; i < 8; i++)
        if (links[i] > STATUS_LINK_UNKNOWN || (blobs[i] && lens[i] > ANNOUNCE_LEN)) abort();
}

static void s_runcfg(const uint8_t *d, size_t n)
{
    opts_t o, j;
    opts_defaults(&o, OPTS_NODE);
    rbuf_t r;
    rbuf_init(&r, d, n);
    char err[256];
    if (proto_get_runcfg(&r, &o, err, sizeof err) < 0) return;
    wbuf_t w;
    wbuf_init(&w, 1 << 16);
    proto_put_runcfg(&w, &o);
    opts_defaults(&j, OPTS_NODE);
    rbuf_init(&r, w.data, w.len);
    if (wbuf_error(&w) || proto_get_runcfg(&r, &j, err, sizeof err) < 0 || opts_run_id(&j) != opts_run_id(&o)) abort();
    wbuf_free(&w);
}

/* ACT targets: a byte picking the width (1, 2, 4), a u32 vocabulary, then
 * the targets; what decodes encodes to the same bytes. */
static void s_targets(const uint8_t *d, size_t n)
{
    if (n < 5) return;
    static const int widths[3] = { 1, 2, 4 };
    int w = widths[d[0] % 3], V = (int)(le_get32(d + 1) & 0x7fffffffu);
    size_t len = n - 5, count = len / (size_t)w;
    int *t = malloc((count ? count : 1) * sizeof *t);
    uint8_t *back = malloc(len ? len : 1);
    if (!t || !back) abort();
    int rc = proto_get_targets(t, d + 5, len, count, w, V);
    if (proto_get_targets(NULL, d + 5, len, count, w, V) != rc) abort();
    if (rc == 0) {
        if (len != count * (size_t)w) abort();
        for (size_t i = 0; i < count; i++)
            if (t[i] < 0 || t[i] >= V) abort();
        proto_put_targets(back, t, count, w);
        if (len && memcmp(back, d + 5, len) != 0) abort();
    }
    free(t);
    free(back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    size_t n = size - 1;
    uint8_t *copy = malloc(n ? n : 1);   /* exactly the body's bytes: ASan sees a read past them */
    if (n) memcpy(copy, data + 1, n);
    switch (data[0] % 7) {
    case 0: s_join(copy, n); break;
    case 1: s_welcome(copy, n); break;
    case 2: s_state_pre(copy, n); break;
    case 3: s_peers_tail(copy, n); break;
    case 4: s_status(copy, n); break;
    case 5: s_runcfg(copy, n); break;
    default: s_targets(copy, n); break;
    }
    free(copy);
    return 0;
}
