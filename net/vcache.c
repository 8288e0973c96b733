/* vcache.c: the verified-blob cache (vcache.h). */
#include "net/vcache.h"
#include <stdlib.h>
#include <string.h>

#define S_WAYS 4

typedef struct {
    uint64_t hash;          /* s_hash of the blob; 0 with len 0: empty */
    uint16_t len;           /* bytes held, 0 empty */
    uint8_t blob[VCACHE_BLOB_MAX];
} entry_t;

struct vcache {
    entry_t *e;             /* sets x S_WAYS entries */
    uint32_t *age;          /* per entry: the add counter when it was filled (oldest goes) */
    uint32_t sets;          /* a power of two */
    uint32_t clock;         /* adds so far */
    uint64_t hits, misses;  /* lookups */
};

/* 64-bit hash of the bytes (FNV-1a over 8-byte words, then a finalizer). */
static uint64_t s_hash(const uint8_t *p, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ULL ^ len;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 0x100000001b3ULL;
        h ^= h >> 29;
    }
    for (; i < len; i++) h = (h ^ p[i]) * 0x100000001b3ULL;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return h;
}

vcache_t *vcache_new(int entries)
{
    vcache_t *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    uint32_t sets = 1;
    while ((int64_t)sets * S_WAYS < entries && sets < (1u << 24)) sets <<= 1;
    c->sets = sets;
    c->e = calloc((size_t)sets * S_WAYS, sizeof(entry_t));
    c->age = calloc((size_t)sets * S_WAYS, sizeof(uint32_t));
    if (!c->e || !c->age) vcache_destroy(&c);
    return c;
}

void vcache_destroy(vcache_t **self_p)
{
    vcache_t *c = *self_p;
    if (!c) return;
    free(c->e);
    free(c->age);
    free(c);
    *self_p = NULL;
}

/* The index of the entry holding blob, or -1; *set_out: its set's first entry. */
static long s_find(const vcache_t *c, const void *blob, size_t len, uint64_t h, size_t *set_out)
{
    size_t set = (size_t)(h & (c->sets - 1)) * S_WAYS;
    *set_out = set;
    for (size_t w = 0; w < S_WAYS; w++) {
        const entry_t *e = &c->e[set + w];
        if (e->len == len && e->hash == h && memcmp(e->blob, blob, len) == 0) return (long)(set + w);
    }
    return -1;
}

int vcache_has(vcache_t *c, const void *blob, size_t len)
{
    if (!c || len == 0 || len > VCACHE_BLOB_MAX) return 0;
    size_t set;
    int hit = s_find(c, blob, len, s_hash(blob, len), &set) >= 0;
    if (hit) c->hits++;
    else c->misses++;
    return hit;
}

void vcache_add(vcache_t *c, const void *blob, size_t len)
{
    if (!c || len == 0 || len > VCACHE_BLOB_MAX) return;
    uint64_t h = s_hash(blob, len);
    size_t set;
    if (s_find(c, blob, len, h, &set) >= 0) return;
    size_t victim = set;
    for (size_t w = 0; w < S_WAYS; w++) {
        if (c->e[set + w].len == 0) { victim = set + w; break; }
        if ((uint32_t)(c->clock - c->age[set + w]) > (uint32_t)(c->clock - c->age[victim])) victim = set + w;
    }
    entry_t *e = &c->e[victim];
    e->hash = h;
    e->len = (uint16_t)len;
    memcpy(e->blob, blob, len);
    c->age[victim] = c->clock++;
}

void vcache_stats(const vcache_t *c, uint64_t *hits, uint64_t *misses)
{
    *hits = c ? c->hits : 0;
    *misses = c ? c->misses : 0;
}
