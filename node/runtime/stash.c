/* stash.c: weight versions for in-flight microbatches (stash.h). */
#include "node/runtime/stash.h"
#include "node/runtime/invariant.h"
#include <stdlib.h>
#include <string.h>

void stash_init(stash_t *s, size_t n, int two_bw)
{
    memset(s, 0, sizeof *s);
    s->n = n;
    s->two_bw = two_bw;
    s->peak = 1;
}

void stash_fini(stash_t *s)
{
    for (int i = 0; i < s->nslots; i++) free(s->slot[i].params);
    for (int i = 0; i < s->nspare; i++) free(s->spare[i]);
    memset(s, 0, sizeof *s);
}

static int s_find(const stash_t *s, int64_t v)
{
    for (int i = 0; i < s->nslots; i++)
        if (s->slot[i].version == v) return i;
    return -1;
}

static void s_remove(stash_t *s, int i)
{
    if (s->slot[i].params) {
        if (s->nspare < STASH_MAX) s->spare[s->nspare++] = s->slot[i].params;
        else free(s->slot[i].params);
    }
    s->slot[i] = s->slot[--s->nslots];
}

void stash_ref(stash_t *s, int64_t v)
{
    int i = s_find(s, v);
    if (i < 0) {
        INVARIANT(s->nslots < STASH_MAX);   /* versions are bounded by in-flight work */
        i = s->nslots++;
        s->slot[i].version = v;
        s->slot[i].refs = 0;
        s->slot[i].params = NULL;
    }
    s->slot[i].refs++;
}

/* The slot whose weights serve version v: itself, or (2bw) the oldest kept. */
static int s_serving(const stash_t *s, int64_t v)
{
    int i = s_find(s, v);
    if (i >= 0 && s->slot[i].params) return i;
    /* its copy was folded away (2bw): the oldest newer copy kept, else the live weights */
    int best = -1;
    for (int k = 0; k < s->nslots; k++)
        if (s->slot[k].params && s->slot[k].version > v && (best < 0 || s->slot[k].version < s->slot[best].version))
            best = k;
    return best;
}

const float *stash_params(const stash_t *s, int64_t v, int64_t live_version, const float *live)
{
    if (v == live_version) return live;
    int i = s_serving(s, v);
    return i >= 0 ? s->slot[i].params : live;
}

int stash_holds(const stash_t *s, int64_t v, int64_t live_version)
{
    if (v == live_version) return 1;
    int i = s_find(s, v);
    return i >= 0 && s->slot[i].params != NULL;
}

void stash_unref(stash_t *s, int64_t v, int64_t live_version)
{
    int i = s_find(s, v);
    if (i < 0) return;
    INVARIANT(s->slot[i].refs > 0);
    if (--s->slot[i].refs <= 0 && v != live_version) s_remove(s, i);
    else if (s->slot[i].refs <= 0 && !s->slot[i].params) s_remove(s, i);
}

int stash_before_update(stash_t *s, int64_t v, const float *live)
{
    for (int k = 0; k < s->nslots; k++) INVARIANT(s->slot[k].version <= v);   /* none newer than the live version */
    int i = s_find(s, v);
    if (i < 0 || s->slot[i].refs == 0) {
        if (i >= 0) s_remove(s, i);
        return 0;
    }
    if (s->two_bw) {
        /* keep one old version only: the older versions' microbatches
         * fold into this one and will use its weights */
        for (int k = s->nslots - 1; k >= 0; k--)
            if (k != i && s->slot[k].params) {
                float *p = s->slot[k].params;
                s->slot[k].params = NULL;
                if (s->nspare < STASH_MAX) s->spare[s->nspare++] = p;
                else free(p);
            }
        i = s_find(s, v);
    }
    float *copy = s->nspare ? s->spare[--s->nspare] : malloc(sizeof(float) * s->n);
    if (!copy) return -1;
    memcpy(copy, live, sizeof(float) * s->n);
    s->slot[i].params = copy;
    int held = stash_versions(s, v + 1);
    if (held > s->peak) s->peak = held;
    return 0;
}

int stash_versions(const stash_t *s, int64_t live_version)
{
    (void)live_version;
    int n = 1;
    for (int i = 0; i < s->nslots; i++)
        if (s->slot[i].params) n++;
    return n;
}
