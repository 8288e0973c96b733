/* step.c: one build of the engine as a shared library for tests/bench/ab_engine.sh.
 *
 * Compiled into one .so together with a tree's engine, so that two trees
 * (before and after a change) can be loaded side by side into one process
 * (run.c) and their training steps alternated.  The step is bench_train's:
 * the whole model in one stage, batch B of the preset's context on the
 * synthetic data, forward + backward + clip + AdamW, on 1 thread timed by
 * the calling thread's CPU clock, or on AB_THREADS threads (the engine's
 * own, as --threads) timed by the wall clock.
 *
 *   void *ab_new(const char *model, int B);   NULL with a message on stderr
 *   double ab_step(void *self, float *loss);  seconds (CPU or wall, as above)
 *   void ab_destroy(void **self_p);
 */
#include "node/engine/data.h"
#include "node/engine/model.h"
#include "node/engine/optim.h"
#include "node/engine/train.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    stage_state_t *st;      /* the whole model, one stage */
    acts_t *acts;           /* its activations */
    grad_scratch_t *gs;     /* its backward scratch */
    data_t *data;           /* synthetic tokens */
    batch_t batch;          /* the current microbatch */
    uint64_t cursor;        /* position in the data */
    optim_config_t optim;   /* defaults, a long run */
    int B, T;               /* batch and context */
    int threads;            /* the engine's threads */
} ab_t;

void ab_destroy(void **self_p)
{
    ab_t *p = *self_p;
    if (!p) return;
    stage_state_destroy(&p->st);
    acts_destroy(&p->acts);
    grad_scratch_destroy(&p->gs);
    data_batch_free(&p->batch);
    data_close(&p->data);
    free(p);
    *self_p = NULL;
}

void *ab_new(const char *model, int B)
{
    char err[512];
    model_config_t cfg;
    if (model_preset(&cfg, model, err, sizeof err) < 0) { fprintf(stderr, "%s\n", err); return NULL; }
    ab_t *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->B = B;
    p->T = cfg.maxT;
    const char *t = getenv("AB_THREADS");
    p->threads = t && atoi(t) > 1 ? atoi(t) : 1;
    p->st = stage_state_new(&cfg, 0, 1, 1, err, sizeof err);
    if (p->st) {
        p->st->s.threads = p->threads;   /* before the scratch is made */
        p->acts = acts_new(&p->st->s, B, p->T);
        p->gs = grad_scratch_new(&p->st->s, B, p->T);
    }
    p->data = data_open("synthetic", DATA_TOKENS, p->T, 1, err, sizeof err);
    if (!p->st || !p->acts || !p->gs || !p->data || data_batch_alloc(p->data, &p->batch, B) < 0) {
        fprintf(stderr, "ab_new %s: %s\n", model, p->st && p->data ? "out of memory" : err);
        void *vp = p;
        ab_destroy(&vp);
        return NULL;
    }
    optim_defaults(&p->optim);
    p->optim.kind = OPTIM_ADAMW;   /* the engine's step as bench_train times it */
    p->optim.total = 1000000;
    openblas_set_num_threads(1);
    return p;
}

/* the calling thread's CPU clock, or the wall clock when the step has helpers */
static double s_seconds(const ab_t *p)
{
    struct timespec ts;
    clock_gettime(p->threads > 1 ? CLOCK_MONOTONIC : CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double ab_step(void *self, float *loss)
{
    ab_t *p = self;
    size_t nt = (size_t)p->B * p->T;
    data_next_train(p->data, &p->batch, 0, 1, &p->cursor);
    memcpy(p->acts->tokens, p->batch.tokens, nt * sizeof(int));
    memcpy(p->acts->targets, p->batch.targets, nt * sizeof(int));
    double t0 = s_seconds(p);
    stage_forward(&p->st->s, p->st->params, p->acts);
    stage_backward(&p->st->s, p->st->params, p->st->grads, p->acts, p->gs, 1.0f / (float)nt);
    stage_state_step(p->st, &p->optim);
    double dt = s_seconds(p) - t0;
    *loss = p->acts->loss;
    return dt;
}
