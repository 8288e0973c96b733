/* evalsum.c: sums of evaluation rounds in progress (evalsum.h). */
#include "node/runtime/evalsum.h"
#include <stdlib.h>
#include <string.h>

void evalsum_init(evalsum_t *s)
{
    memset(s, 0, sizeof *s);
}

void evalsum_fini(evalsum_t *s)
{
    for (int k = 0; k < EVALSUM_ROUNDS; k++) free(s->r[k].seen);
    memset(s, 0, sizeof *s);
}

static int s_has(const evalsum_round_t *e, int i)
{
    return (e->seen[i >> 3] >> (i & 7)) & 1;
}

/* Moves entry e into *out, leaving e free. */
static void s_take(evalsum_round_t *e, evalsum_round_t *out)
{
    free(e->seen);
    *out = *e;
    out->seen = NULL;
    memset(e, 0, sizeof *e);
}

/* The entry batch i of (round, final, nval) belongs to: the round's that
 * lacks it, else a free one (*pushed: a round moved out for it, or 0). */
static evalsum_round_t *s_entry(evalsum_t *s, uint32_t round, int final, int nval, int i, evalsum_round_t *pushed,
                                int *npushed)
{
    evalsum_round_t *free_e = NULL, *oldest = NULL;
    for (int k = 0; k < EVALSUM_ROUNDS; k++) {
        evalsum_round_t *e = &s->r[k];
        if (!e->seen) { if (!free_e) free_e = e; continue; }
        if (e->round == round && e->final == final && e->nval == nval && !s_has(e, i)) return e;
        if (!oldest || e->last_t < oldest->last_t) oldest = e;
    }
    if (!free_e) {
        s_take(oldest, pushed);
        *npushed = 1;
        free_e = oldest;
    }
    free_e->seen = calloc(((size_t)nval + 7) / 8, 1);
    if (!free_e->seen) return NULL;
    free_e->round = round;
    free_e->final = final;
    free_e->nval = nval;
    return free_e;
}

int evalsum_add(evalsum_t *s, uint32_t round, int final, int nval, int i, double loss, double correct, double t,
                evalsum_round_t out[2])
{
    if (nval <= 0 || i < 0 || i >= nval) return -1;
    int k = 0;
    evalsum_round_t *e = s_entry(s, round, final != 0, nval, i, &out[0], &k);
    if (!e) return k;   /* no memory: a pushed-out round is still reported */
    if (e->n == 0) e->first_t = t;
    e->seen[i >> 3] |= (uint8_t)(1u << (i & 7));
    e->n++;
    e->loss += loss;
    e->correct += correct;
    e->last_t = t;
    if (e->n >= e->nval) s_take(e, &out[k++]);
    return k;
}

const evalsum_round_t *evalsum_final(const evalsum_t *s)
{
    const evalsum_round_t *best = NULL;
    for (int k = 0; k < EVALSUM_ROUNDS; k++) {
        const evalsum_round_t *e = &s->r[k];
        if (e->seen && e->final && (!best || e->last_t > best->last_t)) best = e;
    }
    return best;
}

int evalsum_stale(evalsum_t *s, double before, evalsum_round_t *out)
{
    evalsum_round_t *oldest = NULL;
    for (int k = 0; k < EVALSUM_ROUNDS; k++)
        if (s->r[k].seen && s->r[k].last_t < before && (!oldest || s->r[k].last_t < oldest->last_t)) oldest = &s->r[k];
    if (!oldest) return 0;
    s_take(oldest, out);
    return 1;
}

void evalsum_take(evalsum_t *s, const evalsum_round_t *r, evalsum_round_t *out)
{
    s_take(&s->r[r - s->r], out);
}
