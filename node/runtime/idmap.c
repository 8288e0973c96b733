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
    free(m->slot);
    memset(m, 0, sizeof *m);
}

int idmap_get(const idmap_t *m, uint64_t key)
{
    if (!m->cap) return -1;
    size_t mask = (size_t)m->cap - 1;
    for (size_t h = (size_t)s_hash(key) & mask; m->slot[h].val; h = (h + 1) & mask)
        if (m->slot[h].key == key) return (int)(m->slot[h].val - 1);
    return -1;
}

/* Puts without growing (there is room). */
static void s_put(idmap_t *m, uint64_t key, int val)
{
    size_t mask = (size_t)m->cap - 1, h = (size_t)s_hash(key) & mask;
    while (m->slot[h].val && m->slot[h].key != key) h = (h + 1) & mask;
    if (!m->slot[h].val) m->n++;
    m->slot[h].key = key;
    m->slot[h].val = (int64_t)val + 1;
}

int idmap_put(idmap_t *m, uint64_t key, int val)
{
    if (2 * (m->n + 1) > m->cap) {
        idmap_t g = { .cap = m->cap ? 2 * m->cap : 16 };
        g.slot = calloc((size_t)g.cap, sizeof *g.slot);
        if (!g.slot) return -1;
        for (int i = 0; i < m->cap; i++)
            if (m->slot[i].val) s_put(&g, m->slot[i].key, (int)(m->slot[i].val - 1));
        idmap_fini(m);
        *m = g;
    }
    s_put(m, key, val);
    return 0;
}

void idmap_clear(idmap_t *m)
{
    if (m->cap) memset(m->slot, 0, sizeof *m->slot * (size_t)m->cap);
    m->n = 0;
}
