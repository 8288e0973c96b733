/* train.c: stage training state (train.h). */
#include "node/engine/train.h"
#include "node/engine/bigbuf.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

stage_state_t *stage_state_new(const model_config_t *cfg, int stage, int nstages, uint64_t seed,
                               char *err, size_t errlen)
{
    stage_state_t *st = calloc(1, sizeof *st);
    if (!st) { snprintf(err, errlen, "out of memory"); return NULL; }
    if (stage_init(&st->s, cfg, stage, nstages, err, errlen) < 0) { free(st); return NULL; }
    size_t n = st->s.nparams;
    st->params = bigbuf_new(4 * n);
    if (!st->params) {
        snprintf(err, errlen, "out of memory for %zu parameters", n);
        free(st);
        return NULL;
    }
    st->grads = st->params + n;
    st->m = st->grads + n;
    st->v = st->m + n;
    stage_init_params(&st->s, st->params, seed);
    return st;
}

void stage_state_destroy(stage_state_t **self_p)
{
    if (!*self_p) return;
    bigbuf_free((*self_p)->params);
    free(*self_p);
    *self_p = NULL;
}

void stage_state_step_adjusted(stage_state_t *st, const optim_config_t *o, const optim_adjust_t *adj)
{
    st->last_norm = optim_step(&st->s, o, adj, (int)st->version, st->params, st->grads, st->m, st->v);
    st->version++;
}

void stage_state_step(stage_state_t *st, const optim_config_t *o)
{
    stage_state_step_adjusted(st, o, NULL);
}
