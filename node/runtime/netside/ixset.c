/* ixset.c: sorted sets of record indices (ixset.h). */
#include "node/runtime/netside/ixset.h"
#include "node/runtime/invariant.h"
#include <stdlib.h>
#include <string.h>

/* Where ix is, or would go, in set. */
int ixset_pos(const ixset_t *set, int ix)
{
    int lo = 0, hi = set->n;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (set->ix[mid] < ix) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

void ixset_add(ixset_t *set, int ix)
{
    if (!set->ok) return;
    if (set->n == set->cap) {
        int cap = set->cap ? 2 * set->cap : 64;
        int *l = realloc(set->ix, sizeof(int) * (size_t)cap);
        if (!l) { set->ok = 0; return; }
        set->ix = l;
        set->cap = cap;
    }
    int at = ixset_pos(set, ix);
    if (at < set->n && set->ix[at] == ix) return;
    memmove(&set->ix[at + 1], &set->ix[at], sizeof(int) * (size_t)(set->n - at));
    set->ix[at] = ix;
    set->n++;
    /* ascending around it (the rest was, and is untouched): the set stays sorted */
    INVARIANT(set->n <= set->cap && (at == 0 || set->ix[at - 1] < ix) && (at + 1 == set->n || ix < set->ix[at + 1]));
}

void ixset_del_at(ixset_t *set, int at)
{
    INVARIANT(at >= 0 && at < set->n);
    memmove(&set->ix[at], &set->ix[at + 1], sizeof(int) * (size_t)(set->n - at - 1));
    set->n--;
}

void ixset_del(ixset_t *set, int ix)
{
    if (!set->ok) return;
    int at = ixset_pos(set, ix);
    if (at < set->n && set->ix[at] == ix) ixset_del_at(set, at);
}

void ixset_free(ixset_t *set)
{
    free(set->ix);
    *set = (ixset_t){ .ok = 1 };
}
