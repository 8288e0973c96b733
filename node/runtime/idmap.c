/* idmap.c: id -> index map (idmap.h). */
#include "node/runtime/idmap.h"
#include <stdlib.h>
#include <string.h>

static uint64_t s_hash(uint64_t id)
{
    id ^= id >> 33;
    id *= 0xff51afd7ed558ccdULL;
    id ^= id >> 33;
    return id;
}

void idmap_init(idmap_t *m)
{
    memset(m, 0, sizeof *m);
}

void idmap_fini(idmap_t *m)
{
    free(m->key);
    free(m->val);
    memset(m, 0, sizeof *m);
}

int idmap_get(const idmap_t *m, uint64_t key)
{
    if (!m->cap) return -1;
    size_t mask = (size_t)m->cap - 1;
    for (size_t h = (size_t)s_hash(key) & mask; m->val[h]; h = (h + 1) & mask)
        if (m->key[h] == key) return m->val[h] - 1;
    return -1;
}

/* Puts without growing (there is room). */
static void s_put(idmap_t *m, uint64_t key, int val)
{
    size_t mask = (size_t)m->cap - 1, h = (size_t)s_hash(key) & mask;
    while (m->val[h] && m->key[h] != key) h = (h + 1) & mask;
    if (!m->val[h]) m->n++;
    m->key[h] = key;
    m->val[h] = val + 1;
}

int idmap_put(idmap_t *m, uint64_t key, int val)
{
    if (2 * (m->n + 1) > m->cap) {
        idmap_t g = { .cap = m->cap ? 2 * m->cap : 16 };
        g.key = calloc((size_t)g.cap, sizeof *g.key);
        g.val = calloc((size_t)g.cap, sizeof *g.val);
        if (!g.key || !g.val) { free(g.key); free(g.val); return -1; }
        for (int i = 0; i < m->cap; i++)
            if (m->val[i]) s_put(&g, m->key[i], m->val[i] - 1);
        idmap_fini(m);
        *m = g;
    }
    s_put(m, key, val);
    return 0;
}

void idmap_clear(idmap_t *m)
{
    if (m->cap) memset(m->val, 0, sizeof(int) * (size_t)m->cap);
    m->n = 0;
}
