/* tokenizer.c: llm.c's tokenizer file (tokenizer.h). */
#include "node/engine/tokenizer.h"
#include "net/wire.h"   /* le_get32 */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOKENIZER_VOCAB_MAX (1 << 20)
#define TOKENIZER_FILE_MAX ((size_t)1 << 28)

struct tokenizer {
    int V;              /* vocabulary size */
    int eot;            /* end-of-text token, or -1 */
    uint8_t *bytes;     /* every piece, one after the other */
    size_t *off;        /* V + 1 offsets into bytes */
};

tokenizer_t *tokenizer_parse(const uint8_t *buf, size_t len, const char *name, char *err, size_t errlen)
{
    if (len < 1024) {
        snprintf(err, errlen, "%s: cut short: %zu bytes, less than the 1024-byte header", name, len);
        return NULL;
    }
    uint32_t magic = le_get32(buf), version = le_get32(buf + 4), V = le_get32(buf + 8), eot = le_get32(buf + 12);
    if (magic != TOKENIZER_MAGIC) {
        snprintf(err, errlen, "%s: not an llm.c tokenizer: magic %u (want %u)", name, magic, TOKENIZER_MAGIC);
        return NULL;
    }
    if (version != 1 && version != 2) {
        snprintf(err, errlen, "%s: tokenizer version %u, this brigade reads 1 and 2", name, version);
        return NULL;
    }
    if (V < 1 || V > TOKENIZER_VOCAB_MAX || (version == 2 && eot >= V)) {
        snprintf(err, errlen, "%s: vocabulary %u%s out of range", name, V, version == 2 ? " or its end-of-text token" : "");
        return NULL;
    }
    tokenizer_t *t = calloc(1, sizeof *t);
    if (t) { t->off = malloc(sizeof(size_t) * (V + 1)); t->bytes = malloc(len - 1024 + 1); }
    if (!t || !t->off || !t->bytes) {
        tokenizer_destroy(&t);
        snprintf(err, errlen, "%s: out of memory", name);
        return NULL;
    }
    t->V = (int)V;
    t->eot = version == 2 ? (int)eot : -1;
    size_t at = 1024, used = 0;
    for (uint32_t i = 0; i < V; i++) {
        size_t n = at < len ? buf[at] : 0;
        if (at >= len || n == 0 || n > len - at - 1) {
            snprintf(err, errlen, "%s: %s at token %u of %u", name, at >= len || n > len - at - 1 ? "cut short" :
                     "an entry of length 0", i, V);
            tokenizer_destroy(&t);
            return NULL;
        }
        t->off[i] = used;
        memcpy(t->bytes + used, buf + at + 1, n);
        used += n;
        at += 1 + n;
    }
    t->off[V] = used;
    if (at != len) {
        snprintf(err, errlen, "%s: %zu bytes after the last of its %u tokens", name, len - at, V);
        tokenizer_destroy(&t);
        return NULL;
    }
    return t;
}

tokenizer_t *tokenizer_load(const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return NULL;
    }
    uint8_t *buf = malloc(TOKENIZER_FILE_MAX);
    size_t len = buf ? fread(buf, 1, TOKENIZER_FILE_MAX, f) : 0;
    int bad = !buf || ferror(f) || len == TOKENIZER_FILE_MAX;
    fclose(f);
    tokenizer_t *t = NULL;
    if (bad) snprintf(err, errlen, "%s: %s", path, !buf ? "out of memory" : len == TOKENIZER_FILE_MAX ? "too large" : "read error");
    else t = tokenizer_parse(buf, len, path, err, errlen);
    free(buf);
    return t;
}

void tokenizer_destroy(tokenizer_t **self_p)
{
    tokenizer_t *t = *self_p;
    if (!t) return;
    free(t->bytes);
    free(t->off);
    free(t);
    *self_p = NULL;
}

int tokenizer_size(const tokenizer_t *self)
{
    return self->V;
}

int tokenizer_eot(const tokenizer_t *self)
{
    return self->eot;
}

const uint8_t *tokenizer_piece(const tokenizer_t *self, int id, size_t *len)
{
    *len = self->off[id + 1] - self->off[id];
    return self->bytes + self->off[id];
}

int tokenizer_encode(const tokenizer_t *self, const char *text, int *out, int max)
{
    size_t n = strlen(text), at = 0;
    int k = 0;
    while (at < n && k < max) {
        int best = -1;
        size_t bestlen = 0;
        for (int id = 0; id < self->V; id++) {
            size_t l;
            const uint8_t *p = tokenizer_piece(self, id, &l);
            if (l > bestlen && l <= n - at && memcmp(p, text + at, l) == 0) { best = id; bestlen = l; }
        }
        if (best < 0) { at++; continue; }
        out[k++] = best;
        at += bestlen;
    }
    return k;
}
