/* proto.c: the node protocol's bodies (proto.h). */
#include "node/runtime/proto.h"
#include <stdio.h>
#include <string.h>

void proto_put_join(wbuf_t *w, const char *adv, int want, const uint8_t *ticket, uint64_t hint_run)
{
    wbuf_put_str(w, adv);
    wbuf_put_u32(w, (uint32_t)(int32_t)want);
    wbuf_put_bytes(w, ticket, ticket ? TICKET_LEN : 0);
    if (hint_run && want >= 0) wbuf_put_u64(w, hint_run);
}

int proto_get_join(proto_join_t *j, const uint8_t *buf, size_t len)
{
    rbuf_t r;
    rbuf_init(&r, buf, len);
    rbuf_get_str(&r, j->adv, sizeof j->adv);
    j->want = (int32_t)rbuf_get_u32(&r);
    j->tlen = 0;
    j->ticket = rbuf_get_bytes(&r, TICKET_LEN, &j->tlen);
    j->has_hint = rbuf_remaining(&r) >= 8;
    j->hint_run = j->has_hint ? rbuf_get_u64(&r) : 0;
    return rbuf_error(&r) ? -1 : 0;
}

void proto_put_welcome(wbuf_t *w, const proto_welcome_t *a)
{
    wbuf_put_u32(w, (uint32_t)a->stage);
    wbuf_put_u32(w, (uint32_t)a->shard);
    wbuf_put_u8(w, (uint8_t)(a->done != 0));
    wbuf_put_u8(w, (uint8_t)(a->reachable != 0));   /* added later: older joiners read no further */
}

int proto_get_welcome(proto_welcome_t *a, const uint8_t *buf, size_t len)
{
    rbuf_t r;
    rbuf_init(&r, buf, len);
    a->stage = (int)rbuf_get_u32(&r);
    a->shard = (int)rbuf_get_u32(&r);
    a->done = rbuf_get_u8(&r);
    a->reachable = rbuf_remaining(&r) >= 1 ? rbuf_get_u8(&r) : 1;   /* an older bootstrap probes nobody */
    return rbuf_error(&r) ? -1 : 0;
}

void proto_put_runcfg(wbuf_t *w, const opts_t *o)
{
    const model_config_t *c = &o->cfg;
    wbuf_put_str(w, c->name);
    int32_t f[7] = { c->kind, c->V, c->maxT, c->C, c->L, c->NH, c->D };
    for (int i = 0; i < 7; i++) wbuf_put_u32(w, (uint32_t)f[i]);
    wbuf_put_str(w, o->data);
    int32_t g[8] = { o->stages, o->steps, o->batch, o->micro, o->optim.warmup, o->schedule, o->stash, o->max_inflight };
    for (int i = 0; i < 8; i++) wbuf_put_u32(w, (uint32_t)g[i]);
    wbuf_put_f32(w, o->optim.lr);
    wbuf_put_f32(w, o->optim.wd);
    wbuf_put_f32(w, o->optim.clip);
    wbuf_put_str(w, o->codec);
    wbuf_put_str(w, o->grad_codec);
    wbuf_put_u64(w, o->seed);
    wbuf_put_u32(w, (uint32_t)o->eval_every);
    wbuf_put_u32(w, (uint32_t)o->eval_batches);
    wbuf_put_u8(w, (uint8_t)(o->closed ? 1 : 0));
    wbuf_put_raw(w, o->owner_pub, 32);
    wbuf_put_u8(w, (uint8_t)o->staleness);
    wbuf_put_u8(w, (uint8_t)o->max_delay);
    wbuf_put_u8(w, (uint8_t)o->optim.kind);
    wbuf_put_u8(w, (uint8_t)o->split);
    wbuf_put_u8(w, (uint8_t)(o->max_delay_given ? 1 : 0));
    wbuf_put_u8(w, (uint8_t)o->recompute);
    if (o->bottleneck > 0) wbuf_put_u32(w, (uint32_t)o->bottleneck);   /* only a model with a bottleneck carries it */
    if (o->init_size > 0) {   /* a trailer only a run started from a checkpoint carries */
        wbuf_put_u64(w, o->init_size);
        wbuf_put_raw(w, o->init_hash, 32);
    }
}

/* 1 when s has no control bytes (below 0x20, or DEL; UTF-8 passes, as a
 * data path may be): names from the network that a node prints (model,
 * data, codecs) must not drive the terminal. */
static int s_plain(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || (unsigned char)*s == 0x7f) return 0;
    return 1;
}

int proto_get_runcfg(rbuf_t *r, opts_t *o, char *err, size_t errlen)
{
    opts_t n = *o;
    model_config_t *c = &n.cfg;
    memset(c, 0, sizeof *c);
    rbuf_get_str(r, c->name, sizeof c->name);
    int32_t f[7];
    for (int i = 0; i < 7; i++) f[i] = (int32_t)rbuf_get_u32(r);
    c->kind = (model_kind_t)f[0]; c->V = f[1]; c->maxT = f[2]; c->C = f[3]; c->L = f[4]; c->NH = f[5]; c->D = f[6];
    rbuf_get_str(r, n.data, sizeof n.data);
    int32_t g[8];
    for (int i = 0; i < 8; i++) g[i] = (int32_t)rbuf_get_u32(r);
    n.stages = g[0]; n.steps = g[1]; n.batch = g[2]; n.micro = g[3]; n.optim.warmup = g[4];
    n.schedule = g[5]; n.stash = g[6]; n.max_inflight = g[7];
    n.optim.lr = rbuf_get_f32(r);
    n.optim.wd = rbuf_get_f32(r);
    n.optim.clip = rbuf_get_f32(r);
    rbuf_get_str(r, n.codec, sizeof n.codec);
    rbuf_get_str(r, n.grad_codec, sizeof n.grad_codec);
    n.seed = rbuf_get_u64(r);
    n.eval_every = (int)rbuf_get_u32(r);
    n.eval_batches = (int)rbuf_get_u32(r);
    n.closed = rbuf_get_u8(r);
    rbuf_get_raw(r, n.owner_pub, 32);
    n.staleness = rbuf_get_u8(r);
    n.max_delay = rbuf_get_u8(r);
    n.optim.kind = rbuf_get_u8(r);
    n.split = rbuf_get_u8(r);
    n.max_delay_given = rbuf_get_u8(r);
    n.recompute = rbuf_get_u8(r);
    c->split = n.split == SPLIT_AUTO ? SPLIT_EVEN : (model_split_t)n.split;
    /* the optional tails: 4 bytes of bottleneck (never 0), 40 of checkpoint, or both, in that order */
    n.bottleneck = 0;
    if (rbuf_remaining(r) == 4 || rbuf_remaining(r) == 44) {
        n.bottleneck = (int)rbuf_get_u32(r);
        if (n.bottleneck == 0) r->err = 1;   /* a zero is never written */
    }
    c->bneck = n.bottleneck;
    c->bneck_k = n.bottleneck > 0 ? n.stages : 0;
    n.ndelay = 0;
    n.init_size = 0;
    memset(n.init_hash, 0, sizeof n.init_hash);
    if (rbuf_remaining(r) > 0) {
        n.init_size = rbuf_get_u64(r);
        rbuf_get_raw(r, n.init_hash, 32);
        if (n.init_size == 0 || rbuf_remaining(r) > 0) r->err = 1;
    }
    if (rbuf_error(r) || n.closed > 1 || n.max_delay_given > 1 || !s_plain(c->name) || !s_plain(n.data) || !s_plain(n.codec) || !s_plain(n.grad_codec)) {
        snprintf(err, errlen, "run config: truncated or malformed");
        return -1;
    }
    snprintf(n.model, sizeof n.model, "%s", c->name);
    char why[256];
    if (opts_check_run(&n, why, sizeof why) < 0) {
        snprintf(err, errlen, "run config: %s", why);
        return -1;
    }
    n.optim.total = n.steps;
    *o = n;
    return 0;
}

void proto_put_table(wbuf_t *w, const peer_info_t *recs, const uint8_t *const *blobs, int k)
{
    peers_encode(w, recs, k);
    wbuf_put_u32(w, (uint32_t)k);
    for (int i = 0; i < k; i++) wbuf_put_bytes(w, blobs[i], blobs[i] ? ANNOUNCE_LEN : 0);
}

uint32_t proto_table_count(const uint8_t *buf, size_t len)
{
    rbuf_t r;
    rbuf_init(&r, buf, len);
    return rbuf_get_u32(&r);
}

int proto_get_announces(rbuf_t *r, int k, const uint8_t **blobs, size_t *lens)
{
    if (rbuf_get_u32(r) != (uint32_t)k || rbuf_error(r)) return -1;
    for (int i = 0; i < k; i++) {
        size_t len = 0;
        const uint8_t *blob = rbuf_get_bytes(r, ANNOUNCE_LEN, &len);
        if (rbuf_error(r)) return -1;
        if (blobs) blobs[i] = blob;
        if (lens) lens[i] = len;
    }
    return 0;
}

void proto_put_peers_tail(wbuf_t *w, const proto_peers_tail_t *t)
{
    wbuf_put_u64(w, t->completed);
    wbuf_put_f32(w, t->loss);
    wbuf_put_u8(w, (uint8_t)(t->done != 0));
    uint32_t np = t->np < PROTO_PROGRESS_MAX ? t->np : PROTO_PROGRESS_MAX;
    wbuf_put_u32(w, np);
    for (uint32_t i = 0; i < np; i++) { wbuf_put_u64(w, t->id[i]); wbuf_put_u64(w, t->done_by[i]); }
    if (t->said) wbuf_put_u64(w, t->progress);
}

int proto_get_peers_tail(rbuf_t *r, proto_peers_tail_t *t)
{
    t->completed = rbuf_get_u64(r);
    t->loss = rbuf_get_f32(r);
    t->done = rbuf_get_u8(r);
    t->np = rbuf_get_u32(r);
    if (rbuf_error(r) || t->np > PROTO_PROGRESS_MAX) return -1;
    for (uint32_t i = 0; i < t->np; i++) { t->id[i] = rbuf_get_u64(r); t->done_by[i] = rbuf_get_u64(r); }
    t->said = rbuf_remaining(r) >= 8;   /* older senders end before it */
    t->progress = t->said ? rbuf_get_u64(r) : 0;
    return rbuf_error(r) ? -1 : 0;
}

void proto_put_state_pre(uint8_t out[PROTO_STATE_PRE_LEN], uint64_t total, uint32_t checksum, int64_t version)
{
    wbuf_t w;
    wbuf_init_fixed(&w, out, PROTO_STATE_PRE_LEN);
    wbuf_put_u64(&w, total);
    wbuf_put_u32(&w, checksum);
    wbuf_put_u64(&w, (uint64_t)version);
    wbuf_put_u32(&w, (uint32_t)((total + STATE_CHUNK - 1) / STATE_CHUNK));
}

int proto_get_state_pre(proto_state_pre_t *p, const uint8_t *buf, size_t len)
{
    rbuf_t r;
    rbuf_init(&r, buf, len);
    p->total = rbuf_get_u64(&r);
    p->checksum = rbuf_get_u32(&r);
    p->version = (int64_t)rbuf_get_u64(&r);
    p->nchunks = rbuf_get_u32(&r);
    return rbuf_error(&r) ? -1 : 0;
}

void proto_put_status(wbuf_t *w, const proto_status_t *s)
{
    wbuf_put_u32(w, s->nstages);
    wbuf_put_u64(w, s->target);
    wbuf_put_u64(w, s->completed);
    wbuf_put_f32(w, s->loss);
    wbuf_put_str(w, s->model);
}

int proto_get_status(rbuf_t *r, proto_status_t *s)
{
    s->nstages = rbuf_get_u32(r);
    s->target = rbuf_get_u64(r);
    s->completed = rbuf_get_u64(r);
    s->loss = rbuf_get_f32(r);
    rbuf_get_str(r, s->model, sizeof s->model);
    return rbuf_error(r) ? -1 : 0;
}

void proto_put_links(wbuf_t *w, const uint8_t *links, uint32_t n)
{
    wbuf_put_u32(w, n);
    for (uint32_t i = 0; i < n; i++) wbuf_put_u8(w, links[i]);
}

void proto_get_status_rest(rbuf_t *r, int k, const uint8_t **blobs, size_t *lens, uint8_t *links)
{
    for (int i = 0; i < k; i++) { blobs[i] = NULL; lens[i] = 0; links[i] = STATUS_LINK_UNKNOWN; }
    uint32_t nb = rbuf_get_u32(r);
    for (uint32_t i = 0; !rbuf_error(r) && i < nb && (int)i < k; i++) blobs[i] = rbuf_get_bytes(r, ANNOUNCE_LEN, &lens[i]);
    uint32_t nl = rbuf_remaining(r) >= 4 ? rbuf_get_u32(r) : 0;
    for (uint32_t i = 0; !rbuf_error(r) && i < nl && (int)i < k; i++) {
        uint8_t v = rbuf_get_u8(r);
        if (!rbuf_error(r) && v <= STATUS_LINK_RELAY) links[i] = v;
    }
}

void proto_put_modelled(uint8_t out[PROTO_MODELLED_LEN], uint64_t n)
{
    le_put64(out, n);
}

int proto_get_modelled(uint64_t *n, const uint8_t *buf, size_t len)
{
    rbuf_t r;
    rbuf_init(&r, buf, len);
    *n = rbuf_get_u64(&r);
    return rbuf_error(&r) ? -1 : 0;
}

int proto_target_width(int V)
{
    return V <= 256 ? 1 : V <= 65536 ? 2 : 4;
}

void proto_put_targets(uint8_t *out, const int *t, size_t n, int w)
{
    for (size_t i = 0; i < n; i++) {
        if (w == 1) out[i] = (uint8_t)t[i];
        else if (w == 2) le_put16(out + 2 * i, (uint16_t)t[i]);
        else le_put32(out + 4 * i, (uint32_t)t[i]);
    }
}

int proto_get_targets(int *t, const uint8_t *buf, size_t len, size_t n, int w, int V)
{
    if ((w != 1 && w != 2 && w != 4) || n > SIZE_MAX / 4 || len != n * (size_t)w) return -1;
    for (size_t i = 0; i < n; i++) {
        const uint8_t *p = buf + i * (size_t)w;
        uint32_t v = w == 1 ? p[0] : w == 2 ? le_get16(p) : le_get32(p);
        if (V < 0 || v >= (uint32_t)V) return -1;
        if (t) t[i] = (int)v;
    }
    return 0;
}
