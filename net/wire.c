/* wire.c: header codec, bounded writer/reader, peer records. */
#include "net/wire.h"
#include "net/keys.h"

#include <assert.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void net_errf(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || errlen == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

void wire_hdr_init(wire_hdr_t *h, wire_type_t type)
{
    memset(h, 0, sizeof *h);
    h->magic = WIRE_MAGIC;
    h->version = WIRE_VERSION;
    h->type = (uint16_t)type;
    h->stage = WIRE_STAGE_NONE;
}

void wire_hdr_encode(uint8_t *out, const wire_hdr_t *h)
{
    le_put32(out + 0, h->magic);
    le_put16(out + 4, h->version);
    le_put16(out + 6, h->type);
    le_put64(out + 8, h->run);
    le_put64(out + 16, h->sender);
    le_put64(out + 24, h->mb);
    le_put16(out + 32, h->stage);
    le_put32(out + 34, h->wversion);
    le_put32(out + 38, h->flags);
}

int wire_hdr_decode(wire_hdr_t *h, const uint8_t *buf, size_t len,
                    char *err, size_t errlen)
{
    if (len != WIRE_HDR_LEN) {
        net_errf(err, errlen, "header is %zu bytes, expected %d", len, WIRE_HDR_LEN);
        return -1;
    }
    h->magic = le_get32(buf + 0);
    if (h->magic != WIRE_MAGIC) {
        net_errf(err, errlen, "bad magic 0x%08x", (unsigned)h->magic);
        return -1;
    }
    h->version = le_get16(buf + 4);
    if (h->version != WIRE_VERSION) {
        net_errf(err, errlen, "protocol version %u, expected %d", (unsigned)h->version, WIRE_VERSION);
        return -1;
    }
    h->type = le_get16(buf + 6);
    if (h->type == 0 || h->type >= WIRE_TYPE_END) {
        net_errf(err, errlen, "unknown message type %u", (unsigned)h->type);
        return -1;
    }
    h->run = le_get64(buf + 8);
    h->sender = le_get64(buf + 16);
    h->mb = le_get64(buf + 24);
    h->stage = le_get16(buf + 32);
    h->wversion = le_get32(buf + 34);
    h->flags = le_get32(buf + 38);
    return 0;
}

const char *wire_type_name(int type)
{
    static const char *names[WIRE_TYPE_END] = {
        [WIRE_JOIN] = "JOIN", [WIRE_WELCOME] = "WELCOME", [WIRE_PEERS] = "PEERS",
        [WIRE_PING] = "PING", [WIRE_PONG] = "PONG", [WIRE_ACT] = "ACT",
        [WIRE_GRAD] = "GRAD", [WIRE_STATE_REQ] = "STATE_REQ", [WIRE_STATE] = "STATE",
        [WIRE_AVG] = "AVG", [WIRE_BYE] = "BYE", [WIRE_DONE] = "DONE",
        [WIRE_STATUS_REQ] = "STATUS_REQ", [WIRE_STATUS] = "STATUS", [WIRE_DIAL] = "DIAL", [WIRE_RELAY] = "RELAY",
    };
    if (type <= 0 || type >= WIRE_TYPE_END) return "?";
    return names[type];
}

/* ---- writer ---- */

void wbuf_init(wbuf_t *w, size_t max)
{
    memset(w, 0, sizeof *w);
    w->max = max;
    w->owned = 1;
}

void wbuf_reserve(wbuf_t *w, size_t n)
{
    if (n > w->max) n = w->max;
    if (!w->owned || w->err || n <= w->cap) return;
    uint8_t *d = realloc(w->data, n);
    if (!d) return;
    w->data = d;
    w->cap = n;
}

void wbuf_init_fixed(wbuf_t *w, uint8_t *buf, size_t cap)
{
    memset(w, 0, sizeof *w);
    w->data = buf;
    w->cap = cap;
    w->max = cap;
}

void wbuf_free(wbuf_t *w)
{
    if (w->owned) free(w->data);
    w->data = NULL;
    w->len = w->cap = 0;
    w->err = 0;
}

int wbuf_error(const wbuf_t *w) { return w->err; }

/* Returns room for n more bytes at w->data + w->len, or NULL (sticky error). */
static uint8_t *s_reserve(wbuf_t *w, size_t n)
{
    if (w->err) return NULL;
    if (n > w->max || w->len > w->max - n) { w->err = 1; return NULL; }
    if (w->len + n > w->cap) {
        if (!w->owned) { w->err = 1; return NULL; }
        size_t cap = w->cap ? w->cap : 256;
        while (cap < w->len + n) cap = cap > SIZE_MAX / 2 ? SIZE_MAX : cap * 2;
        if (cap > w->max) cap = w->max;
        uint8_t *d = realloc(w->data, cap);
        if (!d) { w->err = 1; return NULL; }
        w->data = d;
        w->cap = cap;
    }
    uint8_t *p = w->data + w->len;
    w->len += n;
    return p;
}

void wbuf_put_u8(wbuf_t *w, uint8_t v) { uint8_t *p = s_reserve(w, 1); if (p) p[0] = v; }
void wbuf_put_u16(wbuf_t *w, uint16_t v) { uint8_t *p = s_reserve(w, 2); if (p) le_put16(p, v); }
void wbuf_put_u32(wbuf_t *w, uint32_t v) { uint8_t *p = s_reserve(w, 4); if (p) le_put32(p, v); }
void wbuf_put_u64(wbuf_t *w, uint64_t v) { uint8_t *p = s_reserve(w, 8); if (p) le_put64(p, v); }

void wbuf_put_f32(wbuf_t *w, float v)
{
    uint32_t u;
    memcpy(&u, &v, 4);
    wbuf_put_u32(w, u);
}

void wbuf_put_f64(wbuf_t *w, double v)
{
    uint64_t u;
    memcpy(&u, &v, 8);
    wbuf_put_u64(w, u);
}

void wbuf_put_raw(wbuf_t *w, const void *p, size_t n)
{
    if (n == 0) return;
    uint8_t *d = s_reserve(w, n);
    if (d) memcpy(d, p, n);
}

void wbuf_put_bytes(wbuf_t *w, const void *p, size_t n)
{
    if (n > UINT32_MAX) { w->err = 1; return; }
    wbuf_put_u32(w, (uint32_t)n);
    wbuf_put_raw(w, p, n);
}

void wbuf_put_str(wbuf_t *w, const char *s) { wbuf_put_bytes(w, s, strlen(s)); }

/* ---- reader ---- */

void rbuf_init(rbuf_t *r, const void *data, size_t len)
{
    r->data = data;
    r->len = data ? len : 0;
    r->pos = 0;
    r->err = 0;
}

int rbuf_error(const rbuf_t *r) { return r->err; }

size_t rbuf_remaining(const rbuf_t *r) { return r->err ? 0 : r->len - r->pos; }

/* Returns the next n bytes and advances, or NULL (sticky error). */
static const uint8_t *s_take(rbuf_t *r, size_t n)
{
    if (r->err) return NULL;
    if (n > r->len - r->pos) { r->err = 1; return NULL; }
    const uint8_t *p = r->data + r->pos;
    r->pos += n;
    return p;
}

uint8_t rbuf_get_u8(rbuf_t *r) { const uint8_t *p = s_take(r, 1); return p ? p[0] : 0; }
uint16_t rbuf_get_u16(rbuf_t *r) { const uint8_t *p = s_take(r, 2); return p ? le_get16(p) : 0; }
uint32_t rbuf_get_u32(rbuf_t *r) { const uint8_t *p = s_take(r, 4); return p ? le_get32(p) : 0; }
uint64_t rbuf_get_u64(rbuf_t *r) { const uint8_t *p = s_take(r, 8); return p ? le_get64(p) : 0; }

float rbuf_get_f32(rbuf_t *r)
{
    uint32_t u = rbuf_get_u32(r);
    float v;
    memcpy(&v, &u, 4);
    return v;
}

double rbuf_get_f64(rbuf_t *r)
{
    uint64_t u = rbuf_get_u64(r);
    double v;
    memcpy(&v, &u, 8);
    return v;
}

void rbuf_get_raw(rbuf_t *r, void *out, size_t n)
{
    const uint8_t *p = s_take(r, n);
    if (p) memcpy(out, p, n);
    else if (n) memset(out, 0, n);
}

const uint8_t *rbuf_get_bytes(rbuf_t *r, size_t max, size_t *n)
{
    *n = 0;
    uint32_t len = rbuf_get_u32(r);
    if (r->err) return NULL;
    if (len > max) { r->err = 1; return NULL; }
    const uint8_t *p = s_take(r, len);
    if (!p) return NULL;
    *n = len;
    return p;
}

void rbuf_get_str(rbuf_t *r, char *out, size_t outlen)
{
    assert(outlen > 0);
    out[0] = '\0';
    size_t n;
    const uint8_t *p = rbuf_get_bytes(r, outlen - 1, &n);
    if (!p) return;
    if (memchr(p, '\0', n)) { r->err = 1; return; }
    memcpy(out, p, n);
    out[n] = '\0';
}

/* ---- peer records ---- */

void peers_encode(wbuf_t *w, const peer_info_t *p, int n)
{
    assert(n >= 0);
    wbuf_put_u32(w, (uint32_t)n);
    for (int i = 0; i < n; i++) {
        wbuf_put_u64(w, p[i].id);
        wbuf_put_str(w, p[i].addr);
        wbuf_put_raw(w, p[i].pubkey, 32);
        wbuf_put_u16(w, (uint16_t)p[i].stage);
        wbuf_put_f32(w, p[i].rate);
        wbuf_put_f32(w, p[i].rtt_ms);
        wbuf_put_u32(w, p[i].version);
        wbuf_put_u64(w, p[i].seen_ms);
    }
}

int peer_addr_valid(const char *s)
{
    char host[ADDR_HOST_MAX];
    int port;
    if (strnlen(s, PEER_ADDR_MAX) >= PEER_ADDR_MAX) return 0;
    if (hostport_parse(s, host, sizeof host, &port, 0, NULL, 0) < 0) return 0;
    return strcmp(host, "*") != 0;
}

int peers_decode(rbuf_t *r, peer_info_t *out, int max, int *n,
                 char *err, size_t errlen)
{
    *n = 0;
    uint32_t count = rbuf_get_u32(r);
    if (rbuf_error(r)) { net_errf(err, errlen, "peer table truncated"); return -1; }
    if (max < 0 || count > (uint32_t)max) {
        net_errf(err, errlen, "peer table has %u records, at most %d allowed", (unsigned)count, max);
        return -1;
    }
    for (uint32_t i = 0; i < count; i++) {
        peer_info_t *p = &out[i];
        p->id = rbuf_get_u64(r);
        rbuf_get_str(r, p->addr, sizeof p->addr);
        rbuf_get_raw(r, p->pubkey, 32);
        p->stage = (int16_t)rbuf_get_u16(r);
        p->rate = rbuf_get_f32(r);
        p->rtt_ms = rbuf_get_f32(r);
        p->version = rbuf_get_u32(r);
        p->seen_ms = rbuf_get_u64(r);
        p->flags = 0;
        if (rbuf_error(r)) {
            net_errf(err, errlen, "peer record %u truncated or address too long", (unsigned)i);
            return -1;
        }
        const char *why = NULL;
        if (!peer_addr_valid(p->addr)) why = "address is not HOST:PORT";
        else if (p->stage < -1) why = "bad stage";
        else if (!isfinite(p->rate) || p->rate < 0) why = "bad rate";
        else if (!isfinite(p->rtt_ms) || p->rtt_ms < 0) why = "bad rtt";
        else if (p->id != node_id_from_pubkey(p->pubkey)) why = "id does not match its key";
        if (why) {
            net_errf(err, errlen, "peer record %u: %s", (unsigned)i, why);
            return -1;
        }
    }
    *n = (int)count;
    return 0;
}
