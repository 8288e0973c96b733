/* applied.c: microbatches applied here (applied.h). */
#include "node/runtime/applied.h"
#include <stdlib.h>
#include <string.h>

#define SEQ_MASK ((UINT64_C(1) << APPLIED_SEQ_BITS) - 1)
#define SEQ_HALF (UINT64_C(1) << (APPLIED_SEQ_BITS - 1))

void applied_init(applied_t *a)
{
    memset(a, 0, sizeof *a);
    idmap_init(&a->gen[0]);
    idmap_init(&a->gen[1]);
    idmap_init(&a->origin_ix);
}

void applied_fini(applied_t *a)
{
    idmap_fini(&a->gen[0]);
    idmap_fini(&a->gen[1]);
    idmap_fini(&a->origin_ix);
    free(a->floor);
    memset(a, 0, sizeof *a);
}

void applied_clear(applied_t *a)
{
    idmap_clear(&a->gen[0]);
    idmap_clear(&a->gen[1]);
    idmap_clear(&a->origin_ix);
    a->nfloor = 0;
}

/* Sequence number s is not after f, modulo 2^APPLIED_SEQ_BITS (serial order). */
static int s_not_after(uint64_t s, uint64_t f)
{
    return ((f - s) & SEQ_MASK) < SEQ_HALF;
}

int applied_has(const applied_t *a, uint64_t mb, int reissue)
{
    if (idmap_get(&a->gen[0], mb) >= 0 || idmap_get(&a->gen[1], mb) >= 0) return 1;
    if (!reissue) return 0;
    int i = idmap_get(&a->origin_ix, mb >> APPLIED_SEQ_BITS);
    return i >= 0 && s_not_after(mb & SEQ_MASK, a->floor[i]);
}

/* Raises the floor of mb's origin to mb's sequence number.  0, or -1 when out of memory. */
static int s_forget(applied_t *a, uint64_t mb)
{
    uint64_t origin = mb >> APPLIED_SEQ_BITS, seq = mb & SEQ_MASK;
    int i = idmap_get(&a->origin_ix, origin);
    if (i >= 0) {
        if (!s_not_after(seq, a->floor[i])) a->floor[i] = seq;
        return 0;
    }
    if (a->nfloor == a->capfloor) {
        int cap = a->capfloor ? 2 * a->capfloor : 16;
        uint64_t *f = realloc(a->floor, sizeof(uint64_t) * (size_t)cap);
        if (!f) return -1;
        a->floor = f;
        a->capfloor = cap;
    }
    if (idmap_put(&a->origin_ix, origin, a->nfloor) < 0) return -1;
    a->floor[a->nfloor++] = seq;
    return 0;
}

/* Raises the floors by every id of generation g (about to be forgotten).  0, or -1 when out of memory. */
static int s_forget_all(applied_t *a, const idmap_t *g)
{
    for (int k = 0; k < g->cap; k++)
        if (g->slot[k].val && s_forget(a, g->slot[k].key) < 0) return -1;
    return 0;
}

int applied_mark(applied_t *a, uint64_t mb)
{
    if (a->gen[0].n >= APPLIED_GEN && s_forget_all(a, &a->gen[1]) == 0) {   /* else the generations grow */
        idmap_t t = a->gen[1];
        a->gen[1] = a->gen[0];
        a->gen[0] = t;
        idmap_clear(&a->gen[0]);
    }
    return idmap_put(&a->gen[0], mb, 0);
}
