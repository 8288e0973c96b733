/* test_staleness.c: the delay corrections (node/engine/staleness.h) against
 * plain reference formulas and against real AdamW steps. */
#include "tests/check.h"
#include "node/engine/model.h"
#include "node/engine/optim.h"
#include "node/engine/staleness.h"
#include <stdint.h>
#include <string.h>

/* A small gpt stage (embedding and one block) with every tensor kind. */
static stage_t s_stage;

static int s_setup(void)
{
    model_config_t c;
    char err[256];
    if (model_preset(&c, "gpt-tiny", err, sizeof err) < 0) return -1;
    c.L = 2; c.C = 16; c.NH = 2; c.maxT = 8;
    return stage_init(&s_stage, &c, 0, 2, err, sizeof err);
}

/* Deterministic values in [-1, 1). */
static void s_fill(float *x, size_t n, uint32_t seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = (float)(seed >> 8) / (float)(1u << 23) - 1.0f;
    }
}

static void test_names(void)
{
    for (int f = 0; f <= STALE_ALL; f++) {
        char name[64];
        stale_name(f, name, sizeof name);
        int g = -1;
        CHECKF(stale_parse(name, &g) == 0 && g == f, "flags %d -> '%s' -> %d", f, name, g);
    }
    int g = 77;
    CHECK(stale_parse("none", &g) == 0 && g == 0);
    CHECK(stale_parse("ramp+predict", &g) == 0 && g == (STALE_PREDICT | STALE_RAMP));
    const char *bad[] = { "", "predictx", "predict+", "+ramp", "predict+predict", "none+lr", "PREDICT", "dc+lr+x" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        g = 77;
        CHECKF(stale_parse(bad[i], &g) == -1 && g == 77, "'%s' accepted", bad[i]);
    }
    char name[64];
    stale_name(STALE_DEFAULT, name, sizeof name);
    CHECK(strcmp(name, "predict+ramp") == 0);
}

static void test_delay_budget(void)
{
    optim_config_t o;
    optim_defaults(&o);   /* warmup 10, the rate's floor 0.1 x lr */
    o.total = 410;        /* cosine decay over updates 10..410 */
    CHECK(stale_ramp_updates(&o) == 30);
    /* no delay before 3 x warmup, then one late microbatch, whole updates more as the rate decays */
    CHECK(stale_budget_micro(&o, STALE_RAMP, 29, 1, 4) == 0);
    CHECK(stale_budget_micro(&o, STALE_RAMP, 30, 1, 4) == 1);
    CHECK(stale_budget_micro(&o, STALE_RAMP, 180, 1, 4) == 1);    /* 38% of the decay done: under half an update */
    CHECK(stale_budget_micro(&o, STALE_RAMP, 240, 1, 4) == 4);    /* 62%: the whole update */
    CHECK(stale_budget_micro(&o, STALE_RAMP, 150, 2, 4) == 4);    /* 27% of two updates: one */
    CHECK(stale_budget_micro(&o, STALE_RAMP, 300, 2, 4) == 8);    /* 82%: both */
    CHECK(stale_budget_micro(&o, STALE_RAMP, 409, 1, 4) == 4);
    CHECK(stale_budget_micro(&o, STALE_RAMP, 5000, 3, 1) == 3);
    int prev = 0, monotone = 1;
    for (int t = 0; t < 500; t++) {
        int b = stale_budget_micro(&o, STALE_RAMP | STALE_PREDICT, t, 2, 4);
        if (b < prev || b > 8) monotone = 0;
        prev = b;
    }
    CHECK(monotone && prev == 8);
    CHECK(stale_budget_micro(&o, STALE_PREDICT, 0, 3, 4) == 12);   /* no ramp: the steady-state delay at once */
    CHECK(stale_budget_micro(&o, STALE_RAMP, 10000, 0, 4) == 0);
    /* budget 6 of micro 4: two microbatches two updates late, two one update late */
    CHECK(stale_micro_delay(6, 4, 0) == 2 && stale_micro_delay(6, 4, 1) == 2);
    CHECK(stale_micro_delay(6, 4, 2) == 1 && stale_micro_delay(6, 4, 3) == 1);
    CHECK(stale_budget_updates(6, 4) == 2 && stale_budget_updates(4, 4) == 1 && stale_budget_updates(0, 4) == 0);
    o.warmup = 0;
    o.total = 0;          /* no known length: the whole budget after the ramp's first update */
    CHECK(stale_ramp_updates(&o) == 1 && stale_budget_micro(&o, STALE_RAMP, 0, 5, 2) == 0);
    CHECK(stale_budget_micro(&o, STALE_RAMP, 1, 5, 2) == 10);
}

/* The prediction against the formula written out element by element in double precision. */
static void test_predict_reference(void)
{
    size_t n = s_stage.nparams;
    float *p = malloc(sizeof(float) * n * 4), *m = p + n, *v = m + n, *out = v + n;
    s_fill(p, n, 1);
    s_fill(m, n, 2);
    s_fill(v, n, 3);
    for (size_t i = 0; i < n; i++) { m[i] *= 0.01f; v[i] = v[i] * v[i] * 1e-4f; }
    optim_config_t o;
    optim_defaults(&o);
    o.total = 100;
    int t = 7, d = 3;
    double worst = 0.0;
    for (int kind = OPTIM_ADAMW; kind <= OPTIM_MUON; kind++) {
        o.kind = kind;
        stale_forward_weights(out, &s_stage, &o, STALE_PREDICT, p, m, v, t, d);
        double c1 = 1.0 / (1.0 - pow(o.beta1, t)), c2 = 1.0 / (1.0 - pow(o.beta2, t));
        double keep = 1.0, lrs = 0.0;   /* the coming d rates' decays, multiplied, and the rates, summed */
        for (int s = 0; s < d; s++) {
            double lr = optim_lr(&o, t + s);
            keep *= 1.0 - lr * o.wd;
            lrs += lr;
        }
        for (int k = 0; k < s_stage.ntensors; k++) {
            const param_tensor_t *pt = &s_stage.tensors[k];
            for (size_t j = 0; j < pt->size; j++) {
                size_t i = pt->offset + j;
                /* AdamW's step per unit rate, or Muon's last one (kept in v) */
                double u = optim_is_muon(&o, pt) ? v[i] : m[i] * c1 / (sqrt(v[i] * c2) + o.eps);
                double w = p[i] * (pt->decay ? keep : 1.0) - lrs * u;
                double e = fabs(w - out[i]) / fmax(1e-3, fabs(w));
                worst = check_worst(worst, e);
            }
        }
    }
    CHECKF(worst < 1e-5, "worst relative error %.3g", worst);
    /* no prediction: a copy */
    memset(out, 0, sizeof(float) * n);
    stale_forward_weights(out, &s_stage, &o, STALE_RAMP | STALE_LR | STALE_DC, p, m, v, t, d);
    CHECK(memcmp(out, p, sizeof(float) * n) == 0);
    stale_forward_weights(out, &s_stage, &o, STALE_PREDICT, p, m, v, t, 0);
    CHECK(memcmp(out, p, sizeof(float) * n) == 0);
    stale_forward_weights(out, &s_stage, &o, STALE_PREDICT, p, m, v, 0, d);   /* no moments yet */
    CHECK(memcmp(out, p, sizeof(float) * n) == 0);
    free(p);
}

/* Where AdamW's moments sit at their fixed point (a constant gradient g:
 * m = g, v = g^2, late enough for the bias correction to be 1), the
 * prediction d updates ahead is where d real AdamW steps go. */
static void test_predict_matches_adamw(void)
{
    size_t n = s_stage.nparams;
    float *p = malloc(sizeof(float) * n * 6), *m = p + n, *v = m + n, *g = v + n, *out = g + n, *q = out + n;
    s_fill(p, n, 4);
    s_fill(g, n, 5);
    for (size_t i = 0; i < n; i++) { g[i] *= 1e-2f; m[i] = g[i]; v[i] = g[i] * g[i]; }
    optim_config_t o;
    optim_defaults(&o);
    o.total = 2000;
    int t = 900, d = 4;
    stale_forward_weights(out, &s_stage, &o, STALE_PREDICT, p, m, v, t, d);
    memcpy(q, p, sizeof(float) * n);
    for (int s = 0; s < d; s++) optim_adamw(&s_stage, &o, q, g, m, v, t + s);
    double worst = 0.0, moved = 0.0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)q[i] - out[i]);
        worst = check_worst(worst, e);
        if (fabs((double)q[i] - p[i]) > moved) moved = fabs((double)q[i] - p[i]);
    }
    CHECKF(moved > 1e-3 && worst < 1e-3 * moved, "moved %.3g, prediction off by %.3g", moved, worst);
    free(p);
}

/* Muon under a constant gradient g: once its momentum sits at its fixed
 * point (m = g / (1 - momentum)) every step is the same orthogonalized one,
 * so the prediction d updates ahead (along the last step, which the step
 * keeps in v) is where d real Muon steps go. */
static void test_predict_matches_muon(void)
{
    size_t n = s_stage.nparams;
    float *p = malloc(sizeof(float) * n * 6), *m = p + n, *v = m + n, *g = v + n, *out = g + n, *q = out + n;
    s_fill(p, n, 4);
    s_fill(g, n, 5);
    optim_config_t o;
    optim_defaults(&o);
    o.kind = OPTIM_MUON;
    o.total = 2000;
    int t = 900, d = 4, matrices = 0;
    for (size_t i = 0; i < n; i++) { g[i] *= 1e-2f; m[i] = g[i] / (1.0f - o.momentum); v[i] = 0.0f; }
    CHECK(optim_muon(&s_stage, &o, p, g, m, v, t - 1) == 0);   /* one step: v holds it */
    stale_forward_weights(out, &s_stage, &o, STALE_PREDICT, p, m, v, t, d);
    memcpy(q, p, sizeof(float) * n);
    for (int s = 0; s < d; s++) CHECK(optim_muon(&s_stage, &o, q, g, m, v, t + s) == 0);
    double worst = 0.0, moved = 0.0;
    for (int k = 0; k < s_stage.ntensors; k++) {
        const param_tensor_t *pt = &s_stage.tensors[k];
        if (!optim_is_muon(&o, pt)) continue;
        matrices++;
        for (size_t i = pt->offset; i < pt->offset + pt->size; i++) {
            double e = fabs((double)q[i] - out[i]);
            worst = check_worst(worst, e);
            if (fabs((double)q[i] - p[i]) > moved) moved = fabs((double)q[i] - p[i]);
        }
    }
    CHECKF(matrices > 0 && moved > 1e-3 && worst < 1e-3 * moved, "%d matrices moved %.3g, prediction off by %.3g",
           matrices, moved, worst);
    free(p);
}

static void test_dc(void)
{
    size_t n = s_stage.nparams;
    float *g = malloc(sizeof(float) * n * 5), *g0 = g + n, *wl = g0 + n, *wu = wl + n, *v = wu + n;
    s_fill(g0, n, 6);
    s_fill(wl, n, 7);
    s_fill(wu, n, 8);
    s_fill(v, n, 9);
    for (size_t i = 0; i < n; i++) { g0[i] *= 0.1f; v[i] = v[i] * v[i] * 0.01f; }
    optim_config_t o;
    optim_defaults(&o);
    int t = 5;
    optim_adjust_t adj;
    stale_dc_t dc;
    stale_adjust(&adj, &dc, &o, STALE_DC, t, 2, wl, wu, v);
    CHECK(adj.grad_fn == stale_dc_grad && adj.ctx == &dc && adj.lr_scale == 1.0f);
    memcpy(g, g0, sizeof(float) * n);
    adj.grad_fn(adj.ctx, &s_stage, 0, g, 0, n);
    double c2 = 1.0 / (1.0 - pow(o.beta2, t)), worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        double want = g0[i] + STALE_DC_LAMBDA * (double)g0[i] * g0[i] / (sqrt(v[i] * c2) + o.eps) * ((double)wl[i] - wu[i]);
        double e = fabs(want - g[i]) / fmax(1e-6, fabs(want));
        worst = check_worst(worst, e);
    }
    CHECKF(worst < 1e-4, "worst relative error %.3g", worst);
    /* no hook without the flag, without delay, before the first update and when nothing is stale */
    stale_adjust(&adj, &dc, &o, STALE_PREDICT | STALE_RAMP | STALE_LR, t, 2, wl, wu, v);
    CHECK(adj.grad_fn == NULL);
    stale_adjust(&adj, &dc, &o, STALE_DC, t, 0, wl, wu, v);
    CHECK(adj.grad_fn == NULL && adj.lr_scale == 1.0f);
    stale_adjust(&adj, &dc, &o, STALE_DC, 0, 2, wl, wu, v);
    CHECK(adj.grad_fn == NULL);
    stale_adjust(&adj, &dc, &o, STALE_DC, t, 2, wl, wl, v);
    CHECK(adj.grad_fn == NULL);
    free(g);
}

/* The optimizer's hook path (unit by unit, inside optim_step) is the same
 * computation as correcting the whole gradient first, bit for bit. */
static void test_dc_in_step(void)
{
    size_t n = s_stage.nparams;
    float *buf = malloc(sizeof(float) * n * 11);
    float *p1 = buf, *g1 = p1 + n, *m1 = g1 + n, *v1 = m1 + n, *p2 = v1 + n, *g2 = p2 + n, *m2 = g2 + n, *v2 = m2 + n;
    float *wu = v2 + n, *wl = wu + n, *vv = wl + n;
    s_fill(p1, n, 10);
    s_fill(g1, n, 11);
    s_fill(m1, n, 12);
    s_fill(v1, n, 13);
    s_fill(wu, n, 14);
    for (size_t i = 0; i < n; i++) { m1[i] *= 0.01f; v1[i] = v1[i] * v1[i] * 1e-4f; wu[i] = p1[i] + 1e-3f * wu[i]; }
    memcpy(p2, p1, sizeof(float) * n * 4);
    memcpy(wl, p1, sizeof(float) * n);
    memcpy(vv, v1, sizeof(float) * n);
    optim_config_t o;
    optim_defaults(&o);
    int t = 12;
    optim_adjust_t adj;
    stale_dc_t dc;
    stale_adjust(&adj, &dc, &o, STALE_DC | STALE_LR, t, 3, wl, wu, vv);
    optim_step(&s_stage, &o, &adj, t, p1, g1, m1, v1);
    stale_dc_grad(&dc, &s_stage, 0, g2, 0, n);
    optim_adjust_t rate = { .lr_scale = stale_lr_scale(&o, STALE_LR, t, 3) };
    optim_step(&s_stage, &o, &rate, t, p2, g2, m2, v2);
    CHECK(memcmp(p1, p2, sizeof(float) * n * 4) == 0);
    free(buf);
}

static void test_lr_scale(void)
{
    optim_config_t o;
    optim_defaults(&o);
    o.total = 300;
    CHECK_NEAR(stale_lr_scale(&o, STALE_LR, 0, 3), 0.25, 1e-6);
    CHECK_NEAR(stale_lr_scale(&o, STALE_LR, 150, 3), 0.5, 1e-6);
    CHECK(stale_lr_scale(&o, STALE_LR, 300, 3) == 1.0f && stale_lr_scale(&o, STALE_LR, 400, 3) == 1.0f);
    CHECK(stale_lr_scale(&o, STALE_LR, 0, 0) == 1.0f);
    CHECK(stale_lr_scale(&o, STALE_PREDICT | STALE_RAMP | STALE_DC, 0, 3) == 1.0f);
    /* the prediction steps at the rescheduled rates */
    size_t n = s_stage.nparams;
    float *p = malloc(sizeof(float) * n * 5), *m = p + n, *v = m + n, *a = v + n, *b = a + n;
    s_fill(p, n, 15);
    s_fill(m, n, 16);
    for (size_t i = 0; i < n; i++) { m[i] *= 0.01f; v[i] = m[i] * m[i] + 1e-6f; }
    stale_forward_weights(a, &s_stage, &o, STALE_PREDICT, p, m, v, 20, 3);
    stale_forward_weights(b, &s_stage, &o, STALE_PREDICT | STALE_LR, p, m, v, 20, 3);
    double da = 0.0, db = 0.0;
    for (size_t i = 0; i < n; i++) { da += fabs((double)a[i] - p[i]); db += fabs((double)b[i] - p[i]); }
    double want = stale_lr_scale(&o, STALE_LR, 21, 3);   /* about the middle rate's factor */
    CHECKF(fabs(db / da - want) < 0.02, "moved %.4g of the unscaled prediction, want about %.4g", db / da, want);
    free(p);
}

int main(void)
{
    if (s_setup() < 0) { printf("FAIL - setup\n"); return 1; }
    RUN(test_names);
    RUN(test_delay_budget);
    RUN(test_predict_reference);
    RUN(test_predict_matches_adamw);
    RUN(test_predict_matches_muon);
    RUN(test_dc);
    RUN(test_dc_in_step);
    RUN(test_lr_scale);
    CHECK_EXIT();
}
