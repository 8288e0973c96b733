/* test_model.c: whole-model gradients against finite differences, the stage
 * split (K stages compute what 1 stage computes), determinism, model files. */
#include "tests/check.h"
#include <zlib.h>
#include "compress/cpu.h"
#include "node/engine/bigbuf.h"
#include "node/engine/model.h"
#include "node/engine/gpt2file.h"
#include "node/engine/modelfile.h"
#include "node/engine/optim.h"
#include "node/engine/rng.h"
#include "node/engine/team.h"
#include "node/engine/train.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

/* A pipeline of K stages in one process, as solo runs it. */
typedef struct {
    int K, B, T;
    stage_state_t *st[8];
    acts_t *a[8];
    grad_scratch_t *g[8];
} pipe_t;

static void s_pipe_init(pipe_t *p, const model_config_t *cfg, int K, int B, uint64_t seed)
{
    char err[256];
    p->K = K; p->B = B; p->T = cfg->kind == MODEL_GPT ? cfg->maxT : 1;
    for (int k = 0; k < K; k++) {
        p->st[k] = stage_state_new(cfg, k, K, seed, err, sizeof err);
        CHECKF(p->st[k] != NULL, "%s", err);
        p->a[k] = acts_new(&p->st[k]->s, B, p->T);
        p->g[k] = grad_scratch_new(&p->st[k]->s, B, p->T);
    }
}

static void s_pipe_free(pipe_t *p)
{
    for (int k = 0; k < p->K; k++) {
        stage_state_destroy(&p->st[k]);
        acts_destroy(&p->a[k]);
        grad_scratch_destroy(&p->g[k]);
    }
}

/* Random inputs and targets for the first and last stage. */
static void s_pipe_batch(pipe_t *p, uint64_t seed)
{
    const model_config_t *c = &p->st[0]->s.cfg;
    rng_t r;
    rng_seed(&r, seed, 99);
    int n = p->B * p->T;
    if (c->kind == MODEL_GPT) {
        for (int i = 0; i < n; i++) p->a[0]->tokens[i] = (int)(rng_u64(&r) % c->V);
    } else {
        for (int i = 0; i < p->B * c->D; i++) p->a[0]->x[i] = rng_uniform(&r);
    }
    for (int i = 0; i < n; i++) p->a[p->K - 1]->targets[i] = (int)(rng_u64(&r) % c->V);
}

static float s_pipe_forward(pipe_t *p)
{
    for (int k = 0; k < p->K; k++) {
        if (k > 0)
            memcpy(p->a[k]->in, p->a[k - 1]->out, sizeof(float) * stage_in_size(&p->st[k]->s, p->B, p->T));
        stage_forward(&p->st[k]->s, p->st[k]->params, p->a[k]);
    }
    return p->a[p->K - 1]->loss;
}

static void s_pipe_backward(pipe_t *p)
{
    float scale = 1.0f / (float)(p->B * p->T);
    for (int k = p->K - 1; k >= 0; k--) {
        if (k < p->K - 1)
            memcpy(p->a[k]->dout, p->a[k + 1]->din, sizeof(float) * stage_out_size(&p->st[k]->s, p->B, p->T));
        stage_backward(&p->st[k]->s, p->st[k]->params, p->st[k]->grads, p->a[k], p->g[k], scale);
    }
}

/* Checks dLoss/dparam for a sample of parameters of every stage against
 * central differences. */
static void s_check_fd(const model_config_t *cfg, int K, int B, float eps, double tol)
{
    pipe_t p = {0};
    s_pipe_init(&p, cfg, K, B, 3);
    s_pipe_batch(&p, 5);
    s_pipe_forward(&p);
    s_pipe_backward(&p);
    rng_t r;
    rng_seed(&r, 11, 0);
    double worst = 0;
    int checked = 0;
    for (int k = 0; k < K; k++) {
        stage_state_t *st = p.st[k];
        for (int t = 0; t < st->s.ntensors; t++) {
            const param_tensor_t *pt = &st->s.tensors[t];
            for (int j = 0; j < 3; j++) {
                size_t i = pt->offset + rng_u64(&r) % pt->size;
                float keep = st->params[i];
                st->params[i] = keep + eps;
                double lp = s_pipe_forward(&p);
                st->params[i] = keep - eps;
                double lm = s_pipe_forward(&p);
                st->params[i] = keep;
                double fd = (lp - lm) / (2.0 * eps), an = st->grads[i];
                double e = fabs(fd - an) / (fabs(fd) + fabs(an) + 1e-3);
                worst = check_worst(worst, e);
                checked++;
                CHECKF(fabs(fd - an) <= tol * (fabs(fd) + fabs(an)) + 2e-4,
                       "stage %d tensor %d elem %zu: fd %.6g analytic %.6g", k, t, i - pt->offset, fd, an);
            }
        }
    }
    printf("  %s K=%d: %d parameters checked, worst relative error %.3g\n", cfg->name, K, checked, worst);
    s_pipe_free(&p);
}

static model_config_t s_small_gpt(void)
{
    model_config_t c;
    char err[128];
    model_preset(&c, "gpt-tiny", err, sizeof err);
    c.C = 16; c.NH = 2; c.L = 3; c.maxT = 6;
    return c;
}

static void test_gpt_gradients_fd(void)
{
    model_config_t c = s_small_gpt();
    s_check_fd(&c, 1, 2, 1e-2f, 0.05);
    s_check_fd(&c, 3, 2, 1e-2f, 0.05);
    c.C = 32; c.NH = 2; c.maxT = 19;    /* head size 16: attention's fast kernels */
    s_check_fd(&c, 1, 2, 1e-2f, 0.05);
    s_check_fd(&c, 2, 2, 1e-2f, 0.05);
}

static void test_mlp_gradients_fd(void)
{
    model_config_t c;
    char err[128];
    model_preset(&c, "mlp-fmnist", err, sizeof err);
    c.D = 12; c.C = 10; c.L = 2;
    s_check_fd(&c, 1, 4, 1e-3f, 0.05);
    s_check_fd(&c, 3, 4, 1e-3f, 0.05);
    c.V = 40;   /* more classes than inputs and width: the output gradient is the widest */
    s_check_fd(&c, 1, 4, 1e-3f, 0.05);
    s_check_fd(&c, 2, 4, 1e-3f, 0.05);
}

/* The learned bottleneck at the cuts (model.h): its gradients against
 * finite differences, split and whole, the narrow tensor at each cut,
 * K stages computing what 1 stage computes, a recomputed forward the same
 * bits as the forward, and the configs model_check refuses. */
static void s_check_split(const model_config_t *cfg, int K, int B);

static void test_bottleneck(void)
{
    model_config_t c = s_small_gpt();
    /* the cuts' unit-gain projections make the loss curve more at a
     * step of 1e-2 than the blocks' 0.02: a smaller step */
    c.bneck = 2; c.bneck_k = 3;
    s_check_fd(&c, 3, 2, 2e-3f, 0.05);
    s_check_fd(&c, 1, 2, 2e-3f, 0.05);   /* every cut inside the one stage */
    c.split = SPLIT_LATE; c.bneck = 4; c.bneck_k = 2;   /* a cut right after the embedding */
    s_check_fd(&c, 2, 2, 2e-3f, 0.05);
    s_check_fd(&c, 1, 2, 2e-3f, 0.05);
    char err[200];
    stage_t st;
    for (int k = 0; k < 2; k++) {
        CHECK(stage_init(&st, &c, k, 2, err, sizeof err) == 0);
        CHECK(stage_in_size(&st, 2, c.maxT) == (k ? (size_t)2 * c.maxT * (c.C / 4) : 0));
        CHECK(stage_out_size(&st, 2, c.maxT) == (k ? 0 : (size_t)2 * c.maxT * (c.C / 4)));
    }
    CHECK(stage_num_params(&c, 0, 2) + stage_num_params(&c, 1, 2) == stage_num_params(&c, 0, 1));
    CHECK(stage_init(&st, &c, 0, 3, err, sizeof err) < 0);   /* not the cuts' split */
    model_config_t w;
    model_preset(&w, "gpt-tiny", err, sizeof err);
    w.maxT = 16;
    w.bneck = 4;
    for (int K = 2; K <= 4; K++) {
        w.bneck_k = K;
        w.split = SPLIT_EVEN;
        s_check_split(&w, K, 2);
        w.split = SPLIT_FRONT;
        s_check_split(&w, K, 2);
    }
    /* stage_recompute saves what stage_backward reads, bit for bit */
    c = s_small_gpt();
    c.bneck = 2; c.bneck_k = 3;
    pipe_t p = {0};
    s_pipe_init(&p, &c, 3, 2, 3);
    s_pipe_batch(&p, 5);
    s_pipe_forward(&p);
    s_pipe_backward(&p);
    size_t n = p.st[1]->s.nparams;
    float *g1 = malloc(sizeof(float) * n);
    memcpy(g1, p.st[1]->grads, sizeof(float) * n);
    memset(p.st[1]->grads, 0, sizeof(float) * n);
    float *din = malloc(sizeof(float) * stage_in_size(&p.st[1]->s, 2, c.maxT));
    memcpy(din, p.a[1]->din, sizeof(float) * stage_in_size(&p.st[1]->s, 2, c.maxT));
    stage_recompute(&p.st[1]->s, p.st[1]->params, p.a[1]);
    stage_backward(&p.st[1]->s, p.st[1]->params, p.st[1]->grads, p.a[1], p.g[1], 1.0f / (2 * c.maxT));
    CHECK(memcmp(g1, p.st[1]->grads, sizeof(float) * n) == 0);
    CHECK(memcmp(din, p.a[1]->din, sizeof(float) * stage_in_size(&p.st[1]->s, 2, c.maxT)) == 0);
    free(g1);
    free(din);
    s_pipe_free(&p);
    /* refused: S not dividing the width, no cuts, a classifier */
    c = s_small_gpt();
    c.bneck = 3; c.bneck_k = 2;
    CHECK(model_check(&c, err, sizeof err) < 0 && strstr(err, "--bottleneck 3"));
    c.bneck = 2; c.bneck_k = 1;
    CHECK(model_check(&c, err, sizeof err) < 0);
    model_preset(&c, "mlp-fmnist", err, sizeof err);
    c.bneck = 2; c.bneck_k = 2;
    CHECK(model_check(&c, err, sizeof err) < 0 && strstr(err, "not a gpt"));
}

/* K-stage training equals 1-stage training update by update. */
static void s_check_split(const model_config_t *cfg, int K, int B)
{
    pipe_t one = {0}, many = {0};
    s_pipe_init(&one, cfg, 1, B, 7);
    s_pipe_init(&many, cfg, K, B, 7);
    optim_config_t o;
    optim_defaults(&o);
    o.total = 5;
    for (int step = 0; step < 5; step++) {
        s_pipe_batch(&one, 100 + step);
        s_pipe_batch(&many, 100 + step);
        float l1 = s_pipe_forward(&one), lk = s_pipe_forward(&many);
        CHECK_NEAR(l1, lk, 1e-5);
        s_pipe_backward(&one);
        s_pipe_backward(&many);
        stage_state_step(one.st[0], &o);
        for (int k = 0; k < K; k++) stage_state_step(many.st[k], &o);
    }
    size_t off = 0;
    double maxdiff = 0;
    for (int k = 0; k < K; k++) {
        for (size_t i = 0; i < many.st[k]->s.nparams; i++) {
            double d = fabs(many.st[k]->params[i] - one.st[0]->params[off + i]);
            maxdiff = check_worst(maxdiff, d);
        }
        off += many.st[k]->s.nparams;
    }
    CHECK(off == one.st[0]->s.nparams);
    CHECKF(maxdiff <= 1e-5, "parameters differ by %g after 5 updates", maxdiff);
    s_pipe_free(&one);
    s_pipe_free(&many);
}

static void test_split_equals_whole(void)
{
    model_config_t c;
    char err[128];
    model_preset(&c, "gpt-tiny", err, sizeof err);
    c.maxT = 16;
    s_check_split(&c, 3, 2);
    s_check_split(&c, 4, 2);
    c.split = SPLIT_LATE;
    s_check_split(&c, 2, 2);
    s_check_split(&c, 5, 2);
    c.split = SPLIT_FRONT;
    s_check_split(&c, 2, 2);   /* 3 blocks and 1 */
    model_preset(&c, "mlp-fmnist", err, sizeof err);
    c.C = 64;
    s_check_split(&c, 2, 8);
    s_check_split(&c, 4, 8);
}

static void test_split_rule(void)
{
    model_config_t c;
    char err[128];
    model_preset(&c, "gpt-small", err, sizeof err);
    int prev = 0;
    for (int k = 0; k < 3; k++) {
        int u0, u1;
        stage_units(&c, k, 3, &u0, &u1);
        CHECK(u0 == prev);
        CHECK(u1 > u0);
        prev = u1;
    }
    CHECK(prev == c.L + 2);
    stage_t s;
    CHECK(stage_init(&s, &c, 0, c.L + 1, err, sizeof err) < 0);   /* more stages than blocks */
    CHECK(stage_init(&s, &c, 3, 3, err, sizeof err) < 0);
    CHECK(model_preset(&c, "gpt-huge", err, sizeof err) < 0);
    CHECK(strstr(err, "gpt-huge") != NULL);
}

/* Under c's split rule, for every K of 1..kmax, the K stages' units are
 * contiguous, cover the model once, and hold all its parameters. */
static void s_check_split_covers(const model_config_t *c, int kmax)
{
    char err[128];
    for (int K = 1; K <= kmax; K++) {
        size_t total = 0;
        int prev = 0;
        for (int k = 0; k < K; k++) {
            stage_t s;
            CHECKF(stage_init(&s, c, k, K, err, sizeof err) == 0, "K=%d: %s", K, err);
            CHECK(s.unit0 == prev && s.unit1 > s.unit0);
            prev = s.unit1;
            total += s.nparams;
        }
        CHECK(prev == c->L + 2 && total == model_num_params(c));
    }
}

/* The late split: stage 0 the embedding alone, the blocks dealt out over the
 * later stages with the remainder on the last ones; contiguous, covering the
 * model once, and the same model (the split-equals-whole test runs it too). */
static void test_split_late(void)
{
    model_config_t c;
    char err[128];
    model_preset(&c, "gpt-small", err, sizeof err);   /* 8 blocks: units 0..9 */
    c.split = SPLIT_LATE;
    int want[4][2] = { { 0, 1 }, { 1, 3 }, { 3, 6 }, { 6, 10 } };
    for (int k = 0; k < 4; k++) {
        int u0, u1;
        stage_units(&c, k, 4, &u0, &u1);
        CHECKF(u0 == want[k][0] && u1 == want[k][1], "stage %d of 4: units %d..%d", k, u0, u1);
    }
    s_check_split_covers(&c, c.L + 1);
    stage_t s;
    CHECK(stage_init(&s, &c, 0, c.L + 2, err, sizeof err) < 0);   /* a block per later stage at most */
    CHECK(strstr(err, "--stages") != NULL);
    model_preset(&c, "mlp-fmnist", err, sizeof err);
    c.split = SPLIT_LATE;
    CHECK(stage_init(&s, &c, 0, 2, err, sizeof err) < 0);
    CHECK(strstr(err, "--split late") != NULL);
}

/* The front split: one block per later stage (the last the head too), the
 * rest at stage 0; contiguous and covering the model once at any K. */
static void test_split_front(void)
{
    model_config_t c;
    char err[128];
    model_preset(&c, "gpt-small", err, sizeof err);   /* 8 blocks: units 0..9 */
    c.split = SPLIT_FRONT;
    CHECK(strcmp(split_name(c.split), "front") == 0);
    int want[4][2] = { { 0, 6 }, { 6, 7 }, { 7, 8 }, { 8, 10 } };
    for (int k = 0; k < 4; k++) {
        int u0, u1;
        stage_units(&c, k, 4, &u0, &u1);
        CHECKF(u0 == want[k][0] && u1 == want[k][1], "stage %d of 4: units %d..%d", k, u0, u1);
    }
    s_check_split_covers(&c, c.L);
    stage_t s;
    CHECK(stage_init(&s, &c, 0, c.L + 1, err, sizeof err) < 0);   /* a block per stage at least */
    model_preset(&c, "mlp-fmnist", err, sizeof err);
    c.split = SPLIT_FRONT;
    CHECK(stage_init(&s, &c, 0, 2, err, sizeof err) < 0);
    CHECK(strstr(err, "--split front") != NULL);
}

/* One stage bound: an mlp of 128 hidden layers has 129 units, but no split
 * has more than MODEL_STAGES_MAX stages; the largest gpt still splits one
 * block per stage. */
static void test_stages_max(void)
{
    model_config_t c;
    char err[128];
    stage_t *s = malloc(sizeof *s);
    model_preset(&c, "mlp-fmnist", err, sizeof err);
    c.L = 128;
    c.C = 8;
    CHECKF(stage_init(s, &c, 0, MODEL_STAGES_MAX, err, sizeof err) == 0, "%s", err);
    CHECKF(stage_init(s, &c, MODEL_STAGES_MAX - 1, MODEL_STAGES_MAX, err, sizeof err) == 0, "%s", err);
    CHECK(stage_init(s, &c, 0, MODEL_STAGES_MAX + 1, err, sizeof err) < 0);
    CHECKF(strstr(err, "--stages 129: at most 128") != NULL, "%s", err);
    model_preset(&c, "gpt-tiny", err, sizeof err);
    c.L = 128;
    c.C = 8;
    c.NH = 2;
    CHECK(MODEL_STAGES_MAX >= c.L);
    CHECKF(stage_init(s, &c, c.L - 1, c.L, err, sizeof err) == 0, "%s", err);
    free(s);
}

static void test_determinism(void)
{
    model_config_t c = s_small_gpt();
    pipe_t a = {0}, b = {0};
    s_pipe_init(&a, &c, 2, 2, 42);
    s_pipe_init(&b, &c, 2, 2, 42);
    s_pipe_batch(&a, 1);
    s_pipe_batch(&b, 1);
    CHECK(s_pipe_forward(&a) == s_pipe_forward(&b));
    pipe_t d = {0};
    s_pipe_init(&d, &c, 2, 2, 43);
    s_pipe_batch(&d, 1);
    CHECK(s_pipe_forward(&a) != s_pipe_forward(&d));
    s_pipe_free(&a);
    s_pipe_free(&b);
    s_pipe_free(&d);
}

/* The loss of a diverged model is reported as it is: logits of +-1.9e38 make
 * a loss beyond the float range, +inf (not a capped ~87), so the trainers'
 * "loss is not finite" check can fire; a moderately large gap gives the exact
 * finite loss. */
static void test_loss_not_capped(void)
{
    model_config_t c = s_small_gpt();
    pipe_t p = {0};
    s_pipe_init(&p, &c, 1, 2, 3);
    s_pipe_batch(&p, 5);
    stage_state_t *st = p.st[0];
    int k = 0;
    while (st->s.tensors[k].unit != c.L + 1) k++;
    float *lnfw = st->params + st->s.tensors[k].offset, *lnfb = st->params + st->s.tensors[k + 1].offset;
    float *head = st->params + st->s.tensors[k + 2].offset;
    for (int i = 0; i < c.C; i++) { lnfw[i] = 0.0f; lnfb[i] = 1.0f; }   /* lnf output: all ones */
    for (int scale = 0; scale < 2; scale++) {
        /* logit of token v = C * head[v][*]: +g for even v, -g for odd v */
        float g = scale ? 1.2e37f : 10.0f;   /* 2 C g = 3.8e38 > FLT_MAX */
        for (int v = 0; v < c.V; v++)
            for (int i = 0; i < c.C; i++) head[(size_t)v * c.C + i] = v % 2 ? -g : g;
        float loss = s_pipe_forward(&p);
        /* per position: 0 + log(V / 2) for an even target, 2 C g + log(V / 2) for an odd one */
        double want = 0.0;
        for (int i = 0; i < p.B * p.T; i++)
            want += (p.a[0]->targets[i] % 2 ? 2.0 * c.C * g : 0.0) + log(c.V / 2.0);
        want /= p.B * p.T;
        if (scale == 0) CHECKF(fabs(loss - want) <= 1e-5 * want && loss > 100.0f, "loss %g, want %g", loss, want);
        else CHECKF(isinf(loss), "loss %g, want +inf", loss);
    }
    s_pipe_free(&p);
}

/* ---- the fused optimizer step against the reference (clip, AdamW, memset) ---- */

typedef struct {
    float *p, *g, *m, *v;   /* one allocation of 4 n floats */
    size_t n;
} opt_bufs_t;

static opt_bufs_t s_opt_bufs(const stage_t *s, uint64_t seed, float gscale)
{
    opt_bufs_t b = {0};
    b.n = s->nparams;
    b.p = malloc(4 * b.n * sizeof(float));
    b.g = b.p + b.n; b.m = b.g + b.n; b.v = b.m + b.n;
    rng_t r;
    rng_seed(&r, seed, 1);
    for (size_t i = 0; i < b.n; i++) {
        b.p[i] = rng_normal(&r) * 0.1f;
        b.g[i] = rng_normal(&r) * gscale;
        b.m[i] = rng_normal(&r) * 1e-3f;
        b.v[i] = fabsf(rng_normal(&r)) * 1e-5f;
    }
    return b;
}

static opt_bufs_t s_opt_copy(const opt_bufs_t *a)
{
    opt_bufs_t b = *a;
    b.p = malloc(4 * a->n * sizeof(float));
    memcpy(b.p, a->p, 4 * a->n * sizeof(float));
    b.g = b.p + b.n; b.m = b.g + b.n; b.v = b.m + b.n;
    return b;
}

/* Worst relative difference of params, m, v; counts the elements not bit-equal. */
static double s_opt_diff(const opt_bufs_t *a, const opt_bufs_t *b, size_t *unequal)
{
    double worst = 0.0;
    *unequal = 0;
    for (size_t i = 0; i < 4 * a->n; i++) {
        if (a->p[i] == b->p[i]) continue;
        (*unequal)++;
        double d = fabs((double)a->p[i] - b->p[i]) / fmax(1e-6, fabs(a->p[i]));
        if (!(d <= worst)) worst = d;
    }
    return worst;
}

/* The reference update: optim_clip, optim_adamw, optim_muon, then the gradients zeroed. */
static float s_opt_reference(const stage_t *s, const optim_config_t *o, opt_bufs_t *b, int t)
{
    float norm = optim_clip(s, b->g, o->clip);
    optim_adamw(s, o, b->p, b->g, b->m, b->v, t);
    CHECK(optim_muon(s, o, b->p, b->g, b->m, b->v, t) == 0);
    memset(b->g, 0, b->n * sizeof(float));
    return norm;
}

/* What node/README.md "The optimizer" states, checked against the code: defaults,
 * the schedule formula, which tensors decay, clipping unit by unit, and one
 * AdamW step of one element by the written formula. */
static void test_optim_as_documented(void)
{
    optim_config_t o;
    optim_defaults(&o);
    CHECK(o.beta1 == 0.9f && o.beta2 == 0.95f && o.eps == 1e-8f && o.lr_min_frac == 0.1f);
    CHECK(o.lr == 1e-3f && o.wd == 0.01f && o.warmup == 10 && o.clip == 1.0f);
    o.lr = 0.01f; o.warmup = 5; o.total = 25;
    for (int t = 0; t < 30; t++) {
        double want;
        if (t < o.warmup) want = 0.01 * (t + 1) / 5.0;
        else {
            double p = (double)(t - 5) / (25 - 5);
            if (p > 1) p = 1;
            want = 0.01 * (0.1 + 0.9 * 0.5 * (1 + cos(M_PI * p)));
        }
        CHECK_NEAR(optim_lr(&o, t), want, 1e-5);
    }
    CHECK(optim_lr(&o, 24) > 0.001f && fabsf(optim_lr(&o, 25) - 0.001f) < 1e-7f);

    /* decay: every matrix (embeddings and head included), never a bias or norm */
    model_config_t c = s_small_gpt();
    char err[128];
    stage_t s;
    CHECK(stage_init(&s, &c, 0, 1, err, sizeof err) == 0);
    int matrices = 0, others = 0;
    for (int k = 0; k < s.ntensors; k++) {
        const param_tensor_t *t = &s.tensors[k];
        int is_block = t->unit >= 1 && t->unit <= c.L, i = is_block ? (k - 2) % 12 : -1;
        int matrix = t->unit == 0 || (t->unit == c.L + 1 && k == s.ntensors - 1)
                     || (is_block && (i == 2 || i == 4 || i == 8 || i == 10));
        CHECKF(t->decay == matrix, "tensor %d of unit %d: decay %d", k, t->unit, t->decay);
        matrices += matrix;
        others += !matrix;
    }
    CHECK(matrices == 2 + 4 * c.L + 1 && others == 8 * c.L + 2);

    /* clipping is per unit: a huge gradient in one block leaves the others as they are */
    o = (optim_config_t){0};
    optim_defaults(&o);
    float *g = calloc(s.nparams, sizeof(float));
    for (size_t i = 0; i < s.nparams; i++) g[i] = 1e-4f;
    int k1 = 2;                                   /* first tensor of block 1 */
    g[s.tensors[k1].offset] = 100.0f;
    optim_clip(&s, g, 1.0f);
    CHECK(g[0] == 1e-4f);                                       /* embeddings untouched */
    CHECK(g[s.tensors[k1].offset + 1] < 1e-5f);                 /* block 1 scaled down */
    CHECK(g[s.tensors[s.ntensors - 1].offset] == 1e-4f);        /* head untouched */
    free(g);

    /* one element of AdamW at t = 3, by the formula */
    float w = 0.5f, m = 0.01f, v = 0.0004f, gr = 0.03f, lr = optim_lr(&o, 3);
    double mm = 0.9 * m + 0.1 * gr, vv = 0.95 * v + 0.05 * gr * gr;
    double want = w * (1 - lr * o.wd) - lr * (mm / (1 - pow(0.9, 4))) / (sqrt(vv / (1 - pow(0.95, 4))) + 1e-8);
    stage_t one;
    memset(&one, 0, sizeof one);
    one.ntensors = 1;
    one.nparams = 1;
    one.tensors[0] = (param_tensor_t){.offset = 0, .size = 1, .unit = 0, .decay = 1};
    float p1 = w, m1 = m, v1 = v, g1 = gr;
    optim_step(&one, &o, NULL, 3, &p1, &g1, &m1, &v1);
    CHECK_NEAR(p1, want, 1e-6);
    CHECK_NEAR(m1, mm, 1e-6);
    CHECK(g1 == 0.0f);
}

/* A NaN or Inf in any unit's gradient shows in the returned norm (a node
 * tells a diverged update by it), in the step and in the reference alike,
 * whichever unit holds it. */
static void test_optim_step_nonfinite_norm(void)
{
    model_config_t c = s_small_gpt();
    char err[128];
    stage_t s;
    CHECKF(stage_init(&s, &c, 0, 1, err, sizeof err) == 0, "%s", err);
    optim_config_t o;
    optim_defaults(&o);
    const float bad[2] = {NAN, INFINITY};
    for (int b = 0; b < 2; b++) {
        for (int k = 0; k < s.ntensors; k += s.ntensors - 1) {   /* the first unit's tensor and the last's */
            opt_bufs_t x = s_opt_bufs(&s, 3, 0.02f);
            rng_t r;
            rng_seed(&r, 5, 0);
            for (size_t i = 0; i < x.n; i++) x.g[i] = rng_normal(&r) * 0.02f;
            float *g2 = malloc(sizeof(float) * x.n);
            CHECK(g2 != NULL);
            if (!g2) { free(x.p); return; }
            x.g[s.tensors[k].offset + s.tensors[k].size / 2] = bad[b];
            memcpy(g2, x.g, sizeof(float) * x.n);
            float ref = optim_clip(&s, g2, o.clip);
            float norm = optim_step(&s, &o, NULL, 0, x.p, x.g, x.m, x.v);
            CHECKF(isnan(norm) || (b == 1 && isinf(norm)), "tensor %d holds %g: optim_step's norm %g", k, bad[b], norm);
            CHECKF(!isfinite(ref), "tensor %d holds %g: optim_clip's norm %g", k, bad[b], ref);
            free(g2);
            free(x.p);
        }
    }
}

static void test_optim_step_matches_reference(void)
{
    model_config_t c = s_small_gpt();
    c.C = 40; c.NH = 4; c.maxT = 9;     /* units past one norm chunk, odd sizes */
    c.L = 12;
    char err[128];
    for (int K = 1; K <= 3; K += 2) {
        for (int stage = 0; stage < K; stage++) {
            stage_t s;
            CHECKF(stage_init(&s, &c, stage, K, err, sizeof err) == 0, "%s", err);
            /* clip 0 (none), clip far above every norm, and clipping every unit */
            const float clips[3] = {0.0f, 1e6f, 0.05f};
            for (int ci = 0; ci < 3; ci++) {
                optim_config_t o;
                optim_defaults(&o);
                o.clip = clips[ci];
                o.total = 50;
                opt_bufs_t ref = s_opt_bufs(&s, 10 + stage, 0.02f), fast = s_opt_copy(&ref);
                float worst_ref = 0, worst_fast = 0;
                for (int t = 0; t < 15; t++) {
                    rng_t r;
                    rng_seed(&r, 77, (uint64_t)t);
                    for (size_t i = 0; i < ref.n; i++) ref.g[i] = fast.g[i] = rng_normal(&r) * 0.02f;
                    worst_ref = s_opt_reference(&s, &o, &ref, t);
                    worst_fast = optim_step(&s, &o, NULL, t, fast.p, fast.g, fast.m, fast.v);
                }
                size_t unequal;
                double d = s_opt_diff(&ref, &fast, &unequal);
                CHECK_NEAR(worst_fast, worst_ref, 1e-6);
                if (ci < 2)   /* no clipping: the same operations on every element, bit for bit */
                    CHECKF(unequal == 0, "K=%d stage %d clip %g: %zu floats differ (worst %.3g)", K, stage, clips[ci], unequal, d);
                else          /* clip factors from norms summed in another order */
                    CHECKF(d <= 1e-5, "K=%d stage %d clip %g: worst relative difference %.3g", K, stage, clips[ci], d);
                if (K == 3 && stage == 1)
                    printf("  clip %g: %zu of %zu floats differ from the reference, worst %.3g\n",
                           clips[ci], unequal, 4 * ref.n, d);
                free(ref.p);
                free(fast.p);
            }
        }
    }
}

/* Muon: optim_step against the reference (loops summed in
 * double for the orthogonalization, so the two differ by float rounding
 * only), on stages with and without block matrices, clipping every unit;
 * and 3 threads give the bits of 1 (one matrix per thread). */
static void test_optim_step_muon(void)
{
    model_config_t c = s_small_gpt();
    c.C = 24; c.NH = 4; c.maxT = 9; c.L = 4;
    char err[128];
    for (int stage = 0; stage < 3; stage++) {
        stage_t s;
        CHECKF(stage_init(&s, &c, stage, 3, err, sizeof err) == 0, "%s", err);
        optim_config_t o;
        optim_defaults(&o);
        CHECK(o.kind == OPTIM_ADAMW && o.momentum == 0.95f);   /* the defaults */
        o.kind = OPTIM_MUON;
        o.clip = 0.05f;
        o.total = 30;
        opt_bufs_t ref = s_opt_bufs(&s, 20 + stage, 0.02f), fast = s_opt_copy(&ref), three = s_opt_copy(&ref);
        for (int t = 0; t < 8; t++) {
            rng_t r;
            rng_seed(&r, 91, (uint64_t)t);
            for (size_t i = 0; i < ref.n; i++) ref.g[i] = fast.g[i] = three.g[i] = rng_normal(&r) * 0.02f;
            s_opt_reference(&s, &o, &ref, t);
            s.threads = 1;
            optim_step(&s, &o, NULL, t, fast.p, fast.g, fast.m, fast.v);
            s.threads = 3;
            optim_step(&s, &o, NULL, t, three.p, three.g, three.m, three.v);
        }
        CHECKF(memcmp(fast.p, three.p, 4 * ref.n * sizeof(float)) == 0, "stage %d: 3 threads differ from 1", stage);
        /* per buffer (params, m, v): the worst difference against the buffer's largest value
         * (an all-zero buffer, as v can be, must match exactly) */
        double d = 0.0;
        for (int buf = 0; buf < 3; buf++) {
            const float *x = ref.p + (size_t)buf * ref.n, *y = fast.p + (size_t)buf * ref.n;
            double big = 0.0, diff = 0.0;
            for (size_t i = 0; i < ref.n; i++) {
                big = fmax(big, fabs(x[i]));
                diff = check_worst(diff, fabs((double)x[i] - y[i]));
            }
            d = check_worst(d, big > 0 ? diff / big : diff);
        }
        int muon = 0;
        for (int k = 0; k < s.ntensors; k++) muon += optim_is_muon(&o, &s.tensors[k]);
        CHECKF(d <= 1e-5, "stage %d: worst difference %.3g of the buffer's scale", stage, d);
        printf("  stage %d (%d Muon matrices): worst difference %.3g of the buffer's scale\n", stage, muon, d);
        free(ref.p);
        free(fast.p);
        free(three.p);
    }
}

/* optim_step at every instruction level this CPU runs (BRIGADE_CPU; the
 * AVX2 and AVX-512 copies of the norm and AdamW loops) gives the bits of the
 * plain C loops, threads 1 and 2, clipping every unit. */
static void test_optim_step_every_level(void)
{
    model_config_t c = s_small_gpt();
    c.C = 40; c.NH = 4; c.maxT = 9; c.L = 6;
    char err[128];
    stage_t s;
    CHECKF(stage_init(&s, &c, 0, 1, err, sizeof err) == 0, "%s", err);
    optim_config_t o;
    optim_defaults(&o);
    o.clip = 0.05f;
    o.total = 20;
    opt_bufs_t base = s_opt_bufs(&s, 5, 0.02f);
    opt_bufs_t want = s_opt_copy(&base);
    float want_norm[6];
    setenv("BRIGADE_CPU", "generic", 1);
    for (int t = 0; t < 6; t++) {
        for (size_t i = 0; i < want.n; i++) want.g[i] = base.g[i] * (float)(t + 1);
        want_norm[t] = optim_step(&s, &o, NULL, t, want.p, want.g, want.m, want.v);
    }
    for (int l = CPU_SSE41; l <= (int)cpu_hw_level(); l++)
        for (int threads = 1; threads <= 2; threads++) {
            setenv("BRIGADE_CPU", cpu_level_name((cpu_level_t)l), 1);
            s.threads = threads;
            opt_bufs_t got = s_opt_copy(&base);
            int same_norm = 1;
            for (int t = 0; t < 6; t++) {
                for (size_t i = 0; i < got.n; i++) got.g[i] = base.g[i] * (float)(t + 1);
                same_norm &= optim_step(&s, &o, NULL, t, got.p, got.g, got.m, got.v) == want_norm[t];
            }
            CHECKF(same_norm && memcmp(got.p, want.p, 4 * want.n * sizeof(float)) == 0,
                   "level %s, %d threads: the step differs from generic", cpu_level_name((cpu_level_t)l), threads);
            free(got.p);
        }
    unsetenv("BRIGADE_CPU");
    s.threads = 1;
    free(base.p);
    free(want.p);
}

/* A gradient hook that doubles each unit's gradients and records what it saw. */
typedef struct {
    int calls, units[64];
    size_t next_offset;
    int contiguous;
} hook_log_t;

static void s_double_hook(void *ctx, const stage_t *s, int unit, float *grads, size_t offset, size_t n)
{
    hook_log_t *h = ctx;
    (void)s;
    if (h->calls < 64) h->units[h->calls] = unit;
    h->calls++;
    h->contiguous &= offset == h->next_offset;
    h->next_offset = offset + n;
    for (size_t i = 0; i < n; i++) grads[i] *= 2.0f;
}

/* optim_adjust_t: lr_scale matches a reference run at lr * scale, and the
 * gradient hook sees every unit once, in order, before the norm is taken. */
static void test_optim_step_adjust(void)
{
    model_config_t c = s_small_gpt();
    char err[128];
    stage_t s;
    CHECKF(stage_init(&s, &c, 1, 2, err, sizeof err) == 0, "%s", err);
    optim_config_t o, o_half;
    optim_defaults(&o);
    o.clip = 0.05f;
    o_half = o;
    o_half.lr = o.lr * 0.5f;
    opt_bufs_t ref = s_opt_bufs(&s, 3, 0.02f), fast = s_opt_copy(&ref);
    optim_adjust_t adj = {.lr_scale = 0.5f};
    for (int t = 0; t < 12; t++) {
        rng_t r;
        rng_seed(&r, 5, (uint64_t)t);
        for (size_t i = 0; i < ref.n; i++) ref.g[i] = fast.g[i] = rng_normal(&r) * 0.02f;
        s_opt_reference(&s, &o_half, &ref, t);
        optim_step(&s, &o, &adj, t, fast.p, fast.g, fast.m, fast.v);
    }
    size_t unequal;
    double d = s_opt_diff(&ref, &fast, &unequal);
    CHECKF(d <= 1e-5, "lr_scale 0.5: worst relative difference %.3g", d);
    free(ref.p);
    free(fast.p);

    /* the hook: doubled gradients, in the reference too */
    ref = s_opt_bufs(&s, 4, 0.02f);
    fast = s_opt_copy(&ref);
    hook_log_t log = {.next_offset = 0, .contiguous = 1};
    optim_adjust_t hook = {.grad_fn = s_double_hook, .ctx = &log};
    for (size_t i = 0; i < ref.n; i++) ref.g[i] *= 2.0f;
    float nref = s_opt_reference(&s, &o, &ref, 3);
    float nfast = optim_step(&s, &o, &hook, 3, fast.p, fast.g, fast.m, fast.v);
    CHECK_NEAR(nfast, nref, 1e-6);
    d = s_opt_diff(&ref, &fast, &unequal);
    CHECKF(d <= 1e-5, "grad_fn: worst relative difference %.3g", d);
    int nunits = s.unit1 - s.unit0;
    CHECKF(log.calls == nunits, "hook called %d times for %d units", log.calls, nunits);
    for (int i = 0; i < log.calls && i < 64; i++) CHECK(log.units[i] == s.unit0 + i);
    CHECK(log.contiguous && log.next_offset == s.nparams);
    free(ref.p);
    free(fast.p);
}

/* ---- threads ---- */

typedef struct {
    int hits[997];
    int bad_worker;
    int size;
} team_log_t;

static void s_team_task(void *ctx, int i, int worker)
{
    team_log_t *l = ctx;
    l->hits[i]++;
    if (worker < 0 || worker >= l->size) l->bad_worker = 1;
}

/* team_run runs every task exactly once, on workers 0..size-1, loop after
 * loop: back to back (helpers spinning), and after pauses long enough for
 * them to sleep. */
static void test_team_runs_every_task_once(void)
{
    for (int n = 1; n <= 4; n++) {
        team_t *t = team_start(n);
        CHECK(team_size(t) == n);
        CHECK((t == NULL) == (n == 1));
        for (int loop = 0; loop < 300; loop++) {
            team_log_t l = {.size = team_size(t)};
            int ntasks = 1 + (loop * 37) % 997;
            team_run(t, ntasks, s_team_task, &l);
            int ok = !l.bad_worker;
            for (int i = 0; i < 997; i++) ok &= l.hits[i] == (i < ntasks);
            CHECKF(ok, "threads %d loop %d: a task ran twice, never, or on a bad worker", n, loop);
            if (!ok) break;
            if (loop % 50 == 49) usleep(20000);   /* helpers fall asleep */
        }
        team_stop(&t);
        CHECK(t == NULL);
    }
}

/* Generations of few and more tiny tasks back to back: a helper still in
 * the last loop of a finished generation must not claim a task of the next
 * one (it once did, with the next loop's count, and ran a task twice). */
static void test_team_generations_back_to_back(void)
{
    team_t *t = team_start(2);
    int ok = 1, loop;
    for (loop = 0; loop < 200000 && ok; loop++) {
        team_log_t l = {.size = team_size(t)};
        int ntasks = loop % 2 ? 8 : 2;
        team_run(t, ntasks, s_team_task, &l);
        ok = !l.bad_worker;
        for (int i = 0; i < 8; i++) ok &= l.hits[i] == (i < ntasks);
    }
    CHECKF(ok, "loop %d: a task ran twice, never, or on a bad worker", loop - 1);
    team_stop(&t);
}

typedef struct {
    const team_t *team;
    int n, align, slow;   /* slow: the worker that sleeps in its part, or -1 */
    int bad, ran[TEAM_MAX], a[TEAM_MAX], b[TEAM_MAX];
} parts_log_t;

static void s_parts_task(void *ctx, int i, int worker)
{
    parts_log_t *l = ctx;
    if (i != worker || worker < 0 || worker >= TEAM_MAX) { l->bad = 1; return; }
    l->ran[worker]++;
    team_part(l->team, l->n, l->align, worker, &l->a[worker], &l->b[worker]);
    if (worker == l->slow) usleep(3000);
}

/* team_run_parts runs part w on worker w, once each, loop after loop with
 * loops of tasks between; the parts of team_part tile [0, n) in order on
 * multiples of align; a worker slow at its part gets a smaller one after a
 * few loops, never less than half an equal one. */
static void test_team_parts(void)
{
    for (int size = 1; size <= 3; size++) {
        team_t *t = team_start(size);
        int ok = 1;
        for (int loop = 0; loop < 40 && ok; loop++) {
            parts_log_t l = {.team = t, .n = 1000 + loop, .align = loop % 2 ? 16 : 1, .slow = size - 1};
            if (size == 1) l.slow = -1;
            team_run_parts(t, s_parts_task, &l);
            ok = !l.bad && l.a[0] == 0 && l.b[size - 1] == l.n;
            for (int w = 0; w < size; w++) {
                ok &= l.ran[w] == 1 && l.a[w] <= l.b[w];
                ok &= w == 0 || l.a[w] == l.b[w - 1];
                ok &= w == size - 1 || l.b[w] % l.align == 0;
            }
            CHECKF(ok, "threads %d loop %d: a part ran twice or never, or the parts do not tile [0, %d)",
                   size, loop, l.n);
            team_log_t tl = {.size = team_size(t)};
            team_run(t, 5, s_team_task, &tl);
            for (int i = 0; i < 5; i++) ok &= tl.hits[i] == 1 && !tl.bad_worker;
            CHECKF(ok, "threads %d loop %d: a loop of tasks after one of parts", size, loop);
        }
        int a, b;
        team_part(t, 3000, 1, size - 1, &a, &b);
        CHECKF(size == 1 ? a == 0 && b == 3000 : b - a < 3000 / size * 4 / 5 && b - a >= 3000 / size / 2 - 2,
               "threads %d: the slow worker's part is %d of 3000", size, b - a);
        team_stop(&t);
    }
}

/* Training with 2 and 3 threads computes what 1 thread computes: the same
 * losses, gradients and parameters over 3 updates, for a gpt (attention's
 * fast kernels included) and the MLP, cut in 1 and 2 stages.  Every output
 * element is computed by one kernel call in the serial order, so only the
 * BLAS's rounding of split products may differ (measured: no difference
 * with OpenBLAS's SkylakeX and Sandybridge kernels; with Haswell's, half the
 * values differ, by at most 8e-7 after 2 updates). */
static void test_threads_match_serial(void)
{
    model_config_t cfgs[2];
    char err[128];
    model_preset(&cfgs[0], "gpt-tiny", err, sizeof err);
    cfgs[0].C = 64; cfgs[0].NH = 2; cfgs[0].L = 2; cfgs[0].maxT = 37;
    model_preset(&cfgs[1], "mlp-fmnist", err, sizeof err);
    cfgs[1].C = 96; cfgs[1].D = 50;
    for (int ci = 0; ci < 2; ci++)
        for (int K = 1; K <= 2; K++) {
            pipe_t ref = {0};
            s_pipe_init(&ref, &cfgs[ci], K, 6, 9);
            optim_config_t o;
            optim_defaults(&o);
            o.clip = 0.5f;
            for (int threads = 2; threads <= 3; threads++) {
                pipe_t par = {0};
                for (int k = 0; k < K; k++) par.st[k] = NULL;
                /* the stage must say its threads before its scratch is made */
                par.K = K; par.B = 6; par.T = ref.T;
                for (int k = 0; k < K; k++) {
                    par.st[k] = stage_state_new(&cfgs[ci], k, K, 9, err, sizeof err);
                    par.st[k]->s.threads = threads;
                    par.a[k] = acts_new(&par.st[k]->s, par.B, par.T);
                    par.g[k] = grad_scratch_new(&par.st[k]->s, par.B, par.T);
                }
                if (threads == 2) {   /* the serial run once */
                    for (int step = 0; step < 3; step++) {
                        s_pipe_batch(&ref, 50 + step);
                        s_pipe_forward(&ref);
                        s_pipe_backward(&ref);
                        if (step < 2) for (int k = 0; k < K; k++) stage_state_step(ref.st[k], &o);
                    }
                }
                double worst = 0, worst_abs = 0;
                size_t differ = 0, total = 0;
                for (int step = 0; step < 3; step++) {
                    s_pipe_batch(&par, 50 + step);
                    float lp = s_pipe_forward(&par);
                    s_pipe_backward(&par);
                    if (step < 2) for (int k = 0; k < K; k++) stage_state_step(par.st[k], &o);
                    if (step == 2) CHECK_NEAR(lp, ref.a[K - 1]->loss, 1e-5);
                }
                for (int k = 0; k < K; k++)   /* params and the last step's gradients */
                    for (size_t i = 0; i < 2 * ref.st[k]->s.nparams; i++) {
                        float x = ref.st[k]->params[i], y = par.st[k]->params[i];
                        total++;
                        if (x == y) continue;
                        differ++;
                        double d = fabs((double)x - y) / fmax(1e-3, fabs(x));
                        worst = check_worst(worst, d);
                        if (fabs((double)x - y) > worst_abs) worst_abs = fabs((double)x - y);
                    }
                printf("  %s K=%d threads %d: %zu of %zu params+grads differ from 1 thread, worst %.3g (abs %.3g)\n",
                       cfgs[ci].name, K, threads, differ, total, worst, worst_abs);
                CHECKF(worst_abs <= 1e-5, "%s K=%d threads %d: worst difference %.3g (relative %.3g)",
                       cfgs[ci].name, K, threads, worst_abs, worst);
                s_pipe_free(&par);
            }
            s_pipe_free(&ref);
        }
}

/* A temporary file's name into path (a "/tmp/...XXXXXX" template), and the
 * parameters of c (*n of them) as i x step. */
static float *s_model_params(char *path, const model_config_t *c, size_t *n, float step)
{
    int fd = mkstemp(path);
    close(fd);
    *n = model_num_params(c);
    float *p = malloc(sizeof(float) * *n);
    for (size_t i = 0; i < *n; i++) p[i] = (float)i * step;
    return p;
}

static void test_modelfile_roundtrip(void)
{
    model_config_t c = s_small_gpt(), c2;
    char err[256], path[] = "/tmp/brigade-test-model-XXXXXX";
    size_t n, n2 = 0;
    float *p = s_model_params(path, &c, &n, 0.5f);
    CHECKF(modelfile_save(path, &c, 17, 0, p, n, err, sizeof err) == 0, "%s", err);
    int64_t upd = 0;
    float *q = modelfile_load(path, &c2, &upd, NULL, &n2, err, sizeof err);
    CHECKF(q != NULL, "%s", err);
    if (q) {
        CHECK(n2 == n && upd == 17 && memcmp(p, q, n * sizeof(float)) == 0);
        CHECK(c2.C == c.C && c2.L == c.L && c2.NH == c.NH && c2.maxT == c.maxT);
        free(q);
    }
    /* one flipped byte: checksum mismatch */
    FILE *f = fopen(path, "r+b");
    fseek(f, 100, SEEK_SET);
    int ch = fgetc(f);
    fseek(f, 100, SEEK_SET);
    fputc(ch ^ 0x40, f);
    fclose(f);
    q = modelfile_load(path, &c2, &upd, NULL, &n2, err, sizeof err);
    CHECK(q == NULL && strstr(err, "checksum") != NULL);
    free(q);
    /* truncated */
    CHECK(truncate(path, 60) == 0);
    q = modelfile_load(path, &c2, &upd, NULL, &n2, err, sizeof err);
    CHECK(q == NULL && strstr(err, "truncated") != NULL);
    free(q);
    unlink(path);
    q = modelfile_load(path, &c2, &upd, NULL, &n2, err, sizeof err);
    CHECK(q == NULL && strstr(err, path) != NULL);
    free(p);
}

/* A model file is read only when its header is sane: an update count below
 * 0 (solo --resume would start its weight rings at a negative version) is
 * refused with a reason naming the file. */
static void test_modelfile_negative_updates(void)
{
    model_config_t c = s_small_gpt(), c2;
    char err[256] = "", path[] = "/tmp/brigade-test-model-XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    size_t n = model_num_params(&c), n2 = 0;
    float *p = calloc(n, sizeof(float));
    CHECKF(modelfile_save(path, &c, -5, 0, p, n, err, sizeof err) == 0, "%s", err);
    int64_t upd = 0;
    float *q = modelfile_load(path, &c2, &upd, NULL, &n2, err, sizeof err);
    CHECKF(q == NULL && strstr(err, path) && strstr(err, "update count"), "loaded with updates %lld (%s)", (long long)upd, err);
    free(q);
    unlink(path);
    free(p);
}

/* A model name with a control byte (a crafted file: an escape sequence the
 * commands would print to the terminal) is refused like any bad config. */
static void test_modelfile_name_printable(void)
{
    model_config_t c = s_small_gpt(), c2;
    char err[256] = "", path[] = "/tmp/brigade-test-model-XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    size_t n = model_num_params(&c), n2 = 0;
    float *p = calloc(n, sizeof(float));
    snprintf(c.name, sizeof c.name, "gpt\x1b[2J");
    CHECKF(modelfile_save(path, &c, 3, 0, p, n, err, sizeof err) == 0, "%s", err);
    int64_t upd = 0;
    float *q = modelfile_load(path, &c2, &upd, NULL, &n2, err, sizeof err);
    CHECKF(q == NULL && strstr(err, "invalid model config"), "loaded a name with ESC (%s)", err);
    free(q);
    snprintf(c.name, sizeof c.name, "gpt-tiny");
    CHECKF(modelfile_save(path, &c, 3, 0, p, n, err, sizeof err) == 0, "%s", err);
    q = modelfile_load(path, &c2, &upd, NULL, &n2, err, sizeof err);
    CHECKF(q != NULL && strcmp(c2.name, "gpt-tiny") == 0, "%s", err);
    free(q);
    unlink(path);
    free(p);
}

/* A folder in place of a model file, or a file with bytes after its
 * checksum, is refused with a reason that says so. */
static void test_modelfile_not_a_model_file(void)
{
    model_config_t c = s_small_gpt(), c2;
    char err[256] = "", path[] = "/tmp/brigade-test-model-XXXXXX", dir[] = "/tmp/brigade-test-dir-XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    CHECK(mkdtemp(dir) != NULL);
    size_t n = model_num_params(&c), n2 = 0;
    float *p = calloc(n, sizeof(float));
    int64_t upd = 0;
    float *q = modelfile_load(dir, &c2, &upd, NULL, &n2, err, sizeof err);
    CHECKF(q == NULL && strstr(err, "not a file"), "a folder: %s", err);
    free(q);
    CHECKF(modelfile_save(path, &c, 3, 0, p, n, err, sizeof err) == 0, "%s", err);
    FILE *f = fopen(path, "ab");
    fputc(0, f);
    fclose(f);
    q = modelfile_load(path, &c2, &upd, NULL, &n2, err, sizeof err);
    CHECKF(q == NULL && strstr(err, "longer than its header"), "a byte appended: %s", q ? "loaded" : err);
    free(q);
    unlink(path);
    rmdir(dir);
    free(p);
}

/* A checkpoint writer killed with SIGKILL at a random moment leaves either
 * the previous checkpoint or the new one, whole: never a damaged file. */
static void test_checkpoint_kill_during_write(void)
{
    char dir[] = "/tmp/brigade-ckkill-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[256], err[256];
    snprintf(path, sizeof path, "%s/stage.ckpt", dir);
    checkpoint_info_t info = {0};
    char e2[128];
    model_preset(&info.cfg, "gpt-small", e2, sizeof e2);
    info.stage = 0;
    info.nstages = 1;
    size_t n = model_num_params(&info.cfg);  /* ~7M floats: each write takes a while */
    float *p = malloc(sizeof(float) * n);
    for (int round = 0; round < 3; round++) {
        info.version = 1;
        for (size_t i = 0; i < n; i++) p[i] = 1.0f;
        CHECKF(checkpoint_save(path, &info, p, p, p, n, err, sizeof err) == 0, "%s", err);
        pid_t child = fork();
        if (child == 0) {
            for (int v = 2; v < 1000; v++) {
                info.version = v;
                for (size_t i = 0; i < n; i++) p[i] = (float)v;
                checkpoint_save(path, &info, p, p, p, n, err, sizeof err);
            }
            _exit(0);
        }
        usleep(100000 + 150000 * round);
        kill(child, SIGKILL);
        waitpid(child, NULL, 0);
        checkpoint_info_t got;
        size_t gn = 0;
        float *st = checkpoint_load(path, &got, &gn, err, sizeof err);
        CHECKF(st != NULL, "after a kill mid-write: %s", err);
        if (st) {
            int consistent = gn == n;
            for (size_t i = 0; consistent && i < 3 * n; i += 4099) consistent = st[i] == (float)got.version;
            CHECKF(consistent, "checkpoint of version %lld holds other values", (long long)got.version);
            printf("  round %d: killed the writer, found version %lld intact\n", round, (long long)got.version);
            free(st);
        }
    }
    free(p);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
}

/* The engine's big buffers come zeroed, the large ones 2 MiB aligned (so
 * that huge pages can back them), and can be written end to end. */
static void test_bigbuf(void)
{
    size_t sizes[] = {0, 1, 1000, (size_t)1 << 19, ((size_t)3 << 20) + 7};
    for (int i = 0; i < 5; i++) {
        size_t n = sizes[i];
        float *p = bigbuf_new(n);
        CHECK(p != NULL);
        if (!p) continue;
        int zero = 1;
        for (size_t j = 0; j < n; j++) zero &= p[j] == 0.0f;
        CHECKF(zero, "%zu floats not zeroed", n);
        if (n * sizeof(float) >= ((size_t)2 << 20))
            CHECKF((uintptr_t)p % ((size_t)2 << 20) == 0, "%zu floats at %p", n, (void *)p);
        for (size_t j = 0; j < n; j++) p[j] = (float)j;
        bigbuf_free(p);
    }
    /* sizes no memory holds are refused, also where rounding up to whole
     * huge pages would wrap around */
    size_t huge[] = {SIZE_MAX / sizeof(float), SIZE_MAX / sizeof(float) - 1000, SIZE_MAX / sizeof(float) + 1, SIZE_MAX};
    for (int i = 0; i < 4; i++) {
        float *p = bigbuf_new(huge[i]);
        CHECKF(p == NULL, "bigbuf_new(%zu) gave a buffer", huge[i]);
        bigbuf_free(p);
    }
    bigbuf_free(NULL);
}

/* The head on chunks of rows computes what it computes on all rows at once:
 * the loss, the parameter gradients and the input gradient agree to float
 * rounding (the chunks only change how the head's weight gradient is summed),
 * with a vocabulary that is not the bytes', one and several threads, and a
 * last chunk shorter than the others. */
static void s_head_run(const model_config_t *c, int head_rows, int threads, int B, float *loss, float *grads,
                       float *din, const float *params)
{
    char err[200];
    stage_t s;
    CHECKF(stage_init(&s, c, 1, 2, err, sizeof err) == 0, "%s", err);
    s.head_rows = head_rows;
    s.threads = threads;
    int T = c->maxT;
    acts_t *a = acts_new(&s, B, T);
    grad_scratch_t *g = grad_scratch_new(&s, B, T);
    for (int i = 0; i < B * T; i++) {
        a->targets[i] = (i * 37 + 11) % c->V;
    }
    for (size_t i = 0; i < (size_t)B * T * c->C; i++) a->in[i] = (float)sin(0.37 * (double)i);
    memset(grads, 0, sizeof(float) * s.nparams);
    stage_forward(&s, params, a);
    stage_backward(&s, params, grads, a, g, 1.0f / (B * T));
    *loss = a->loss;
    memcpy(din, a->din, sizeof(float) * (size_t)B * T * c->C);
    grad_scratch_destroy(&g);
    acts_destroy(&a);
}

static void test_head_chunks_match_whole(void)
{
    model_config_t c = s_small_gpt();
    c.V = 300;
    char err[200];
    stage_t s;
    CHECKF(stage_init(&s, &c, 1, 2, err, sizeof err) == 0, "%s", err);
    float *params = malloc(sizeof(float) * s.nparams);
    stage_init_params(&s, params, 5);
    int B = 3, N = B * c.maxT;
    size_t np = s.nparams, nd = (size_t)N * c.C;
    float *g0 = malloc(sizeof(float) * np), *g1 = malloc(sizeof(float) * np);
    float *d0 = malloc(sizeof(float) * nd), *d1 = malloc(sizeof(float) * nd);
    int rows[] = { 1, 5, 7, N - 1 }, threads[] = { 1, 3 };
    for (int t = 0; t < 2; t++) {
        float l0, l1;
        s_head_run(&c, N, threads[t], B, &l0, g0, d0, params);   /* one chunk: every row at once */
        for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
            s_head_run(&c, rows[r], threads[t], B, &l1, g1, d1, params);
            CHECK_NEAR(l1, l0, 1e-6);
            double worst = 0, scale = 0;
            for (size_t i = 0; i < np; i++) scale = fmax(scale, fabs(g0[i]));
            for (size_t i = 0; i < np; i++) worst = check_worst(worst, fabs(g0[i] - g1[i]) / scale);
            for (size_t i = 0; i < nd; i++) worst = check_worst(worst, fabs(d0[i] - d1[i]) / scale);
            CHECKF(worst < 1e-5, "rows %d, %d threads: gradients differ by %.3g of the largest", rows[r], threads[t],
                   worst);
        }
    }
    free(params); free(g0); free(g1); free(d0); free(d1);
}

/* A gpt written as safetensors and as llm.c's file reads back bit for bit
 * (llm.c's only when tied: an untied model is refused), a safetensors
 * without the head count takes it from the caller, and a model of another
 * shape is refused with the tensor's name. */
static void test_gpt2file_roundtrip(void)
{
    model_config_t c = s_small_gpt(), c2;
    c.V = 300;
    char err[300], path[] = "/tmp/brigade-test-gpt2-XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    size_t n = model_num_params(&c);
    float *p = malloc(sizeof(float) * n);
    for (size_t i = 0; i < n; i++) p[i] = (float)sin((double)i);
    size_t head = n - (size_t)c.V * c.C;
    memcpy(p + head, p, sizeof(float) * (size_t)c.V * c.C);   /* tied */
    for (int fmt = GPT2_SAFETENSORS; fmt <= GPT2_LLMC; fmt++) {
        CHECKF(gpt2file_save(path, (gpt2_format_t)fmt, &c, p, 7, err, sizeof err) == 0, "%s", err);
        int tied = 0;
        float *q = gpt2file_load(path, 0, &c2, 0, &tied, err, sizeof err);
        CHECKF(q && tied && c2.V == c.V && c2.C == c.C && c2.L == c.L && c2.NH == c.NH && c2.maxT == c.maxT
               && memcmp(p, q, sizeof(float) * n) == 0, "format %d: %s", fmt, q ? "differs" : err);
        free(q);
        c2 = c;
        c2.C = 8; c2.NH = 2;
        q = gpt2file_load(path, 0, &c2, 1, NULL, err, sizeof err);
        CHECKF(!q && (strstr(err, "wte.weight") || strstr(err, "channels")), "format %d: %s", fmt, q ? "loaded" : err);
        free(q);
    }
    p[head] += 1.0f;   /* untied */
    CHECK(gpt2file_save(path, GPT2_LLMC, &c, p, 7, err, sizeof err) < 0 && strstr(err, "safetensors"));
    CHECKF(gpt2file_save(path, GPT2_SAFETENSORS, &c, p, 7, err, sizeof err) == 0, "%s", err);
    int tied = 1;
    float *q = gpt2file_load(path, 0, &c2, 0, &tied, err, sizeof err);
    CHECKF(q && !tied && memcmp(p, q, sizeof(float) * n) == 0, "untied: %s", q ? "differs" : err);
    free(q);
    unlink(path);
    free(p);
}

/* A model file of format version 1 (before the run id) is still read, with
 * run id 0; version 2 keeps the run id it was given. */
static void test_modelfile_version1(void)
{
    model_config_t c = s_small_gpt(), c2;
    char err[256], path[] = "/tmp/brigade-test-model-XXXXXX";
    size_t n, n2 = 0;
    float *p = s_model_params(path, &c, &n, 1.0f);
    CHECKF(modelfile_save(path, &c, 4, 0xabcdef12345ULL, p, n, err, sizeof err) == 0, "%s", err);
    int64_t upd = 0;
    uint64_t run = 0;
    float *q = modelfile_load(path, &c2, &upd, &run, &n2, err, sizeof err);
    CHECKF(q && run == 0xabcdef12345ULL && upd == 4, "%s", q ? "run id lost" : err);
    free(q);
    /* the same file as version 1: no run id after the count, the CRC over the rest */
    FILE *f = fopen(path, "rb");
    uint8_t *b = malloc(100 + 4 * n);
    size_t len = fread(b, 1, 100 + 4 * n, f);
    fclose(f);
    size_t h1 = 8 + 4 + 7 * 4 + 24 + 8 + 8;
    memmove(b + h1, b + h1 + 8, len - h1 - 8);
    len -= 8;
    b[8] = 1;
    uLong crc = crc32(0L, b, (uInt)(len - 4));
    for (int i = 0; i < 4; i++) b[len - 4 + i] = (uint8_t)(crc >> (8 * i));
    f = fopen(path, "wb");
    fwrite(b, 1, len, f);
    fclose(f);
    run = 7;
    q = modelfile_load(path, &c2, &upd, &run, &n2, err, sizeof err);
    CHECKF(q && run == 0 && upd == 4 && n2 == n && memcmp(p, q, sizeof(float) * n) == 0, "%s", q ? "differs" : err);
    free(q);
    free(b);
    free(p);
    unlink(path);
}

int main(void)
{
    RUN(test_bigbuf);
    RUN(test_split_rule);
    RUN(test_split_late);
    RUN(test_split_front);
    RUN(test_stages_max);
    RUN(test_gpt_gradients_fd);
    RUN(test_mlp_gradients_fd);
    RUN(test_split_equals_whole);
    RUN(test_bottleneck);
    RUN(test_determinism);
    RUN(test_loss_not_capped);
    RUN(test_optim_as_documented);
    RUN(test_optim_step_matches_reference);
    RUN(test_optim_step_nonfinite_norm);
    RUN(test_optim_step_muon);
    RUN(test_optim_step_adjust);
    RUN(test_optim_step_every_level);
    RUN(test_team_runs_every_task_once);
    RUN(test_team_generations_back_to_back);
    RUN(test_team_parts);
    RUN(test_threads_match_serial);
    RUN(test_head_chunks_match_whole);
    RUN(test_gpt2file_roundtrip);
    RUN(test_modelfile_roundtrip);
    RUN(test_modelfile_version1);
    RUN(test_modelfile_negative_updates);
    RUN(test_modelfile_name_printable);
    RUN(test_modelfile_not_a_model_file);
    RUN(test_checkpoint_kill_during_write);
    CHECK_EXIT();
}
