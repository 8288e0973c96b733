/* safetensors.c: the safetensors container (safetensors.h). */
#include "node/engine/safetensors.h"
#include "net/wire.h"   /* le_get16, le_get32, le_get64, le_put64 */

#include <assert.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ST_DEPTH_MAX 16          /* nesting of a value the parser skips */
#define ST_TENSORS_MAX 100000

/* A parser over the header's JSON text: sticky error, never past the end. */
typedef struct {
    const char *p, *end;
    int bad;                     /* sticky: malformed */
} s_json_t;

static void s_ws(s_json_t *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r')) j->p++;
}

/* Consumes character c (after blanks); 1 when it was there. */
static int s_eat(s_json_t *j, char c)
{
    s_ws(j);
    if (j->bad || j->p >= j->end || *j->p != c) return 0;
    j->p++;
    return 1;
}

static void s_expect(s_json_t *j, char c)
{
    if (!s_eat(j, c)) j->bad = 1;
}

/* A string into out (cap bytes, cut to fit; escapes other than \" \\ \/ and
 * the single letters become '?'). */
static void s_string(s_json_t *j, char *out, size_t cap)
{
    size_t k = 0;
    s_expect(j, '"');
    while (!j->bad) {
        if (j->p >= j->end) { j->bad = 1; break; }
        char c = *j->p++;
        if (c == '"') break;
        if ((unsigned char)c < 0x20) { j->bad = 1; break; }
        if (c == '\\') {
            if (j->p >= j->end) { j->bad = 1; break; }
            char e = *j->p++;
            if (e == 'u') {
                for (int i = 0; i < 4; i++)
                    if (j->p >= j->end || !strchr("0123456789abcdefABCDEF", *j->p++)) j->bad = 1;
                c = '?';
            } else {
                const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t", *q = strchr(from, e);
                if (!q || !e) { j->bad = 1; break; }
                c = to[q - from];
            }
        }
        if (out && k + 1 < cap) out[k++] = c;
    }
    if (out && cap) out[k] = '\0';
}

/* A whole number 0..2^53. */
static uint64_t s_uint(s_json_t *j)
{
    s_ws(j);
    uint64_t v = 0;
    int digits = 0;
    while (!j->bad && j->p < j->end && *j->p >= '0' && *j->p <= '9') {
        v = v * 10 + (uint64_t)(*j->p++ - '0');
        if (++digits > 16) j->bad = 1;
    }
    if (!digits) j->bad = 1;
    return v;
}

/* An array of at most max whole numbers into v; their count, or -1. */
static int s_uints(s_json_t *j, uint64_t *v, int max)
{
    int n = 0;
    s_expect(j, '[');
    if (s_eat(j, ']')) return 0;
    do {
        uint64_t x = s_uint(j);
        if (n < max) v[n] = x;
        n++;
    } while (!j->bad && s_eat(j, ','));
    s_expect(j, ']');
    return j->bad || n > max ? -1 : n;
}

/* Skips any JSON value. */
static void s_skip(s_json_t *j, int depth)
{
    s_ws(j);
    if (j->bad || j->p >= j->end || depth > ST_DEPTH_MAX) { j->bad = 1; return; }
    char c = *j->p;
    if (c == '"') { s_string(j, NULL, 0); return; }
    if (c == '{' || c == '[') {
        char close = c == '{' ? '}' : ']';
        j->p++;
        if (s_eat(j, close)) return;
        do {
            if (c == '{') { s_string(j, NULL, 0); s_expect(j, ':'); }
            s_skip(j, depth + 1);
        } while (!j->bad && s_eat(j, ','));
        s_expect(j, close);
        return;
    }
    const char *start = j->p;   /* a number, true, false, null */
    while (j->p < j->end && strchr("+-.0123456789eEtruefalsn", *j->p)) j->p++;
    if (j->p == start) j->bad = 1;
}

static int s_dtype(const char *s, int *size)
{
    if (!strcmp(s, "F32")) { *size = 4; return ST_F32; }
    if (!strcmp(s, "F16")) { *size = 2; return ST_F16; }
    if (!strcmp(s, "BF16")) { *size = 2; return ST_BF16; }
    *size = 0;
    return ST_OTHER;
}

/* One tensor's object into t. */
static void s_tensor(s_json_t *j, st_tensor_t *t)
{
    int have = 0;
    s_expect(j, '{');
    if (s_eat(j, '}')) { j->bad = 1; return; }
    do {
        char key[32];
        s_string(j, key, sizeof key);
        s_expect(j, ':');
        if (!strcmp(key, "dtype")) {
            char d[16];
            int size;
            s_string(j, d, sizeof d);
            t->dtype = s_dtype(d, &size);
            have |= 1;
        } else if (!strcmp(key, "shape")) {
            t->ndim = s_uints(j, t->shape, ST_DIMS_MAX);
            if (t->ndim < 0) j->bad = 1;
            have |= 2;
        } else if (!strcmp(key, "data_offsets")) {
            uint64_t r[2];
            if (s_uints(j, r, 2) != 2) j->bad = 1;
            t->begin = r[0];
            t->end = r[1];
            have |= 4;
        } else {
            s_skip(j, 1);
        }
    } while (!j->bad && s_eat(j, ','));
    s_expect(j, '}');
    if (have != 7) j->bad = 1;
}

/* The __metadata__ object into f. */
static void s_metadata(s_json_t *j, st_file_t *f)
{
    s_expect(j, '{');
    if (s_eat(j, '}')) return;
    do {
        if (f->nmeta >= 256) { j->bad = 1; return; }
        void *k = realloc(f->key, sizeof *f->key * (size_t)(f->nmeta + 1));
        if (k) f->key = k;
        void *v = realloc(f->val, sizeof *f->val * (size_t)(f->nmeta + 1));
        if (v) f->val = v;
        if (!k || !v) { j->bad = 1; return; }
        s_string(j, f->key[f->nmeta], sizeof f->key[0]);
        s_expect(j, ':');
        s_string(j, f->val[f->nmeta], sizeof f->val[0]);
        f->nmeta++;
    } while (!j->bad && s_eat(j, ','));
    s_expect(j, '}');
}

uint64_t st_numel(const st_tensor_t *t)
{
    uint64_t n = 1;
    for (int d = 0; d < t->ndim; d++) n = t->shape[d] && n > UINT64_MAX / t->shape[d] ? UINT64_MAX : n * t->shape[d];
    return n;
}

/* Checks each tensor's range against the data; 0 or -1 with a reason. */
static int s_check_ranges(const st_file_t *f, const char *name, char *err, size_t errlen)
{
    for (int i = 0; i < f->n; i++) {
        const st_tensor_t *t = &f->t[i];
        int size;
        s_dtype(t->dtype == ST_F32 ? "F32" : t->dtype == ST_F16 ? "F16" : t->dtype == ST_BF16 ? "BF16" : "", &size);
        uint64_t n = st_numel(t);
        if (t->begin > t->end || t->end > f->datalen) {
            snprintf(err, errlen, "%s: tensor %s: bytes [%llu, %llu) outside the %llu bytes of data (file cut short?)",
                     name, t->name, (unsigned long long)t->begin, (unsigned long long)t->end,
                     (unsigned long long)f->datalen);
            return -1;
        }
        if (size && (n > f->datalen || t->end - t->begin != n * (uint64_t)size)) {
            snprintf(err, errlen, "%s: tensor %s: %llu bytes of data for %llu elements of %d bytes", name, t->name,
                     (unsigned long long)(t->end - t->begin), (unsigned long long)n, size);
            return -1;
        }
    }
    return 0;
}

int st_parse(st_file_t *f, const uint8_t *buf, size_t len, const char *name, char *err, size_t errlen)
{
    memset(f, 0, sizeof *f);
    if (len < 8) {
        snprintf(err, errlen, "%s: cut short: %zu bytes, less than a safetensors header", name, len);
        return -1;
    }
    uint64_t hlen = le_get64(buf);
    if (hlen < 2 || hlen > ST_HEADER_MAX || hlen > len - 8) {
        snprintf(err, errlen, "%s: header length %llu does not fit the file's %zu bytes (not a safetensors file, or "
                 "cut short)", name, (unsigned long long)hlen, len);
        return -1;
    }
    f->data = buf + 8 + hlen;
    f->datalen = len - 8 - hlen;
    s_json_t j = { .p = (const char *)buf + 8, .end = (const char *)buf + 8 + hlen, .bad = 0 };
    s_expect(&j, '{');
    if (!s_eat(&j, '}')) {
        do {
            char key[ST_NAME_MAX];
            s_string(&j, key, sizeof key);
            s_expect(&j, ':');
            if (j.bad) break;
            if (!strcmp(key, "__metadata__")) { s_metadata(&j, f); continue; }
            st_tensor_t *t = f->n < ST_TENSORS_MAX ? realloc(f->t, sizeof *t * (size_t)(f->n + 1)) : NULL;
            if (!t) { j.bad = 1; break; }
            f->t = t;
            memset(&t[f->n], 0, sizeof *t);
            snprintf(t[f->n].name, sizeof t[f->n].name, "%s", key);
            s_tensor(&j, &t[f->n]);
            f->n++;
        } while (!j.bad && s_eat(&j, ','));
        s_expect(&j, '}');
    }
    s_ws(&j);
    if (j.bad || j.p != j.end) {
        snprintf(err, errlen, "%s: malformed safetensors header (JSON) near byte %ld", name,
                 (long)(j.p - (const char *)buf));
        return -1;
    }
    return s_check_ranges(f, name, err, errlen);
}

void st_free(st_file_t *f)
{
    free(f->t);
    free(f->key);
    free(f->val);
    memset(f, 0, sizeof *f);
}

const st_tensor_t *st_find(const st_file_t *f, const char *name)
{
    for (int i = 0; i < f->n; i++) {
        const char *n = f->t[i].name;
        if (!strncmp(n, "transformer.", 12)) n += 12;
        if (!strcmp(n, name)) return &f->t[i];
    }
    return NULL;
}

const char *st_meta(const st_file_t *f, const char *key)
{
    for (int i = 0; i < f->nmeta; i++)
        if (!strcmp(f->key[i], key)) return f->val[i];
    return NULL;
}

/* IEEE half to float. */
static float s_half(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 31, m = h & 1023, bits;
    if (e == 0) {
        if (m == 0) bits = sign;
        else {   /* subnormal: normalize */
            e = 113;
            while (!(m & 1024)) { m <<= 1; e--; }
            bits = sign | (e << 23) | ((m & 1023) << 13);
        }
    } else if (e == 31) {
        bits = sign | 0x7f800000u | (m << 13);
    } else {
        bits = sign | ((e + 112) << 23) | (m << 13);
    }
    float x;
    memcpy(&x, &bits, 4);
    return x;
}

float st_get(const st_file_t *f, const st_tensor_t *t, uint64_t i)
{
    const uint8_t *p = f->data + t->begin;
    uint32_t bits;
    float x;
    switch (t->dtype) {
    case ST_F32: bits = le_get32(p + 4 * i); break;
    case ST_F16: return s_half(le_get16(p + 2 * i));
    case ST_BF16: bits = (uint32_t)le_get16(p + 2 * i) << 16; break;
    default: return 0.0f;
    }
    memcpy(&x, &bits, 4);
    return x;
}

/* Appends s to the text (*buf, *len, *cap), in quotes when quote is set:
 * the names and values written here are brigade's own (tensor names,
 * numbers, hex), plain ASCII that needs no escape.  -1 when out of memory. */
static int s_cat(char **buf, size_t *len, size_t *cap, const char *s, int quote)
{
    size_t n = strlen(s), need = n + 3;
    for (const char *c = s; quote && *c; c++) assert(*c >= 0x20 && *c < 0x7f && *c != '"' && *c != '\\');
    if (*len + need > *cap) {
        size_t c = (*cap + need) * 2;
        char *b = realloc(*buf, c);
        if (!b) return -1;
        *buf = b;
        *cap = c;
    }
    *len += (size_t)snprintf(*buf + *len, *cap - *len, quote ? "\"%s\"" : "%s", s);
    return 0;
}

uint8_t *st_header_write(int n, const char *const *names, const int *ndims, const uint64_t (*shapes)[ST_DIMS_MAX],
                         int nmeta, const char *const *meta_kv, size_t *len)
{
    char *b = NULL, num[64];
    size_t l = 0, cap = 0;
    int rc = s_cat(&b, &l, &cap, "{", 0);
    if (nmeta > 0) {
        rc |= s_cat(&b, &l, &cap, "\"__metadata__\":{", 0);
        for (int i = 0; i < nmeta; i++) {
            rc |= s_cat(&b, &l, &cap, i ? "," : "", 0);
            rc |= s_cat(&b, &l, &cap, meta_kv[2 * i], 1);
            rc |= s_cat(&b, &l, &cap, ":", 0);
            rc |= s_cat(&b, &l, &cap, meta_kv[2 * i + 1], 1);
        }
        rc |= s_cat(&b, &l, &cap, "}", 0);
    }
    uint64_t off = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        rc |= s_cat(&b, &l, &cap, nmeta > 0 || i ? "," : "", 0);
        rc |= s_cat(&b, &l, &cap, names[i], 1);
        rc |= s_cat(&b, &l, &cap, ":{\"dtype\":\"F32\",\"shape\":[", 0);
        uint64_t numel = 1;
        for (int d = 0; d < ndims[i]; d++) {
            snprintf(num, sizeof num, "%s%llu", d ? "," : "", (unsigned long long)shapes[i][d]);
            rc |= s_cat(&b, &l, &cap, num, 0);
            numel *= shapes[i][d];
        }
        snprintf(num, sizeof num, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
                 (unsigned long long)(off + 4 * numel));
        rc |= s_cat(&b, &l, &cap, num, 0);
        off += 4 * numel;
    }
    rc |= s_cat(&b, &l, &cap, "}", 0);
    while (rc == 0 && l % 8) rc |= s_cat(&b, &l, &cap, " ", 0);
    uint8_t *out = rc == 0 ? malloc(8 + l) : NULL;
    if (out) {
        le_put64(out, l);
        memcpy(out + 8, b, l);
        *len = 8 + l;
    }
    free(b);
    return out;
}
