/* test_layers.c: every layer's backward against central finite differences,
 * the accumulate (+=) semantics of every backward, forward passes against
 * plain double-precision references, and the causality of attention. */
#include "node/engine/attention.h"
#include "node/engine/gemm.h"
#include "node/engine/layers.h"
#include "node/engine/split.h"
#include "node/engine/team.h"
#include "compress/cpu.h"
/* RUN() in check.h puts two statements after an else on one line. */
#pragma GCC diagnostic ignored "-Wmisleading-indentation"
#include "tests/check.h"

#include <stdint.h>
#include <string.h>
#include <unistd.h>

/* ---------------------------------------------------------------------------
 * Random numbers (splitmix64), deterministic per seed. */

static uint64_t s_rng;

static uint64_t s_next(void) {
    uint64_t z = (s_rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static float s_unif(void) {                 /* [-1, 1) */
    return (float)((double)(s_next() >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static int s_randint(int lo, int hi) {      /* [lo, hi] */
    return lo + (int)(s_next() % (uint64_t)(hi - lo + 1));
}

static float *s_rand(int n, float scale) {
    float *x = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    for (int i = 0; i < n; i++) x[i] = scale * s_unif();
    return x;
}

static float *s_zeros(int n) { return calloc((size_t)(n > 0 ? n : 1), sizeof(float)); }

static double s_dot_d(const float *a, const float *b, int n) {
    double s = 0.0;
    for (int i = 0; i < n; i++) s += (double)a[i] * (double)b[i];
    return s;
}

/* ---------------------------------------------------------------------------
 * Generic finite-difference and accumulate check.  A layer case holds the
 * tensors to differentiate; objective() runs the forward at their current
 * values and returns L = sum(out * R) in double; backward() accumulates the
 * analytic gradients of L (dout = R) using the state of the last forward. */

#define MAX_TENSORS 4

typedef struct layer_case layer_case_t;
struct layer_case {
    int ntensors;                       /* tensors to check */
    float *x[MAX_TENSORS];              /* the tensors */
    float *g[MAX_TENSORS];              /* their gradient buffers */
    int n[MAX_TENSORS];                 /* their sizes */
    const char *xname[MAX_TENSORS];     /* their names, for messages */
    double (*objective)(layer_case_t *self);
    void (*backward)(layer_case_t *self);
};

typedef struct {
    const char *name;   /* layer */
    double eps;         /* perturbation */
    double rtol, atol;  /* pass if |fd - an| <= atol + rtol * max(|fd|, |an|) */
    long checked;       /* elements compared */
    double max_rel;     /* max |fd - an| / max(|fd|, |an|) where that is > 10 atol */
    double max_abs;     /* max |fd - an| */
} fd_stat_t;

enum { S_FD_ALL = 200, S_FD_SUBSET = 50 };

static void s_check_layer(layer_case_t *L, fd_stat_t *st, const char *shape) {
    float *g1[MAX_TENSORS];
    L->objective(L);
    for (int t = 0; t < L->ntensors; t++) memset(L->g[t], 0, (size_t)L->n[t] * sizeof(float));
    L->backward(L);
    for (int t = 0; t < L->ntensors; t++) {
        g1[t] = malloc((size_t)L->n[t] * sizeof(float));
        memcpy(g1[t], L->g[t], (size_t)L->n[t] * sizeof(float));
    }

    /* accumulate: g0 + backward + backward == g0 + 2 g1 */
    for (int t = 0; t < L->ntensors; t++) {
        float *g0 = s_rand(L->n[t], 1.0f);
        memcpy(L->g[t], g0, (size_t)L->n[t] * sizeof(float));
        L->backward(L);
        L->backward(L);
        int bad = 0;
        for (int i = 0; i < L->n[t] && !bad; i++) {
            double want = (double)g0[i] + 2.0 * g1[t][i];
            double tol = 1e-5 * (fabs(g0[i]) + 2.0 * fabs(g1[t][i])) + 1e-6;
            bad = !(fabs(L->g[t][i] - want) <= tol);
            CHECKF(!bad, "%s %s: d%s[%d] after two backwards = %.9g, want %.9g (accumulate)",
                   st->name, shape, L->xname[t], i, L->g[t][i], want);
        }
        free(g0);
    }

    /* central finite differences, sums in double */
    for (int t = 0; t < L->ntensors; t++) {
        int n = L->n[t];
        int count = n <= S_FD_ALL ? n : S_FD_SUBSET;
        int fails = 0;
        for (int s = 0; s < count; s++) {
            int i = n <= S_FD_ALL ? s : s_randint(0, n - 1);
            float orig = L->x[t][i];
            float xp = orig + (float)st->eps, xm = orig - (float)st->eps;
            L->x[t][i] = xp;
            double lp = L->objective(L);
            L->x[t][i] = xm;
            double lm = L->objective(L);
            L->x[t][i] = orig;
            double fd = (lp - lm) / ((double)xp - (double)xm);
            double an = g1[t][i];
            double err = fabs(fd - an), mag = fmax(fabs(fd), fabs(an));
            st->checked++;
            if (err > st->max_abs) st->max_abs = err;
            if (mag > 10.0 * st->atol && err / mag > st->max_rel) st->max_rel = err / mag;
            /* every element is checked; only the first three misses are shown */
            int ok = err <= st->atol + st->rtol * mag;
            if (ok || fails++ < 3)
                CHECKF(ok, "%s %s: d%s[%d] analytic %.9g vs finite difference %.9g",
                       st->name, shape, L->xname[t], i, an, fd);
            else
                check_case_failed = 1;
        }
    }
    for (int t = 0; t < L->ntensors; t++) free(g1[t]);
}

static void s_print_stat(const fd_stat_t *st) {
    printf("  # %-12s eps %-6g rtol %-6g atol %-6g  %6ld elements  max rel err %.3g  max abs err %.3g\n",
           st->name, st->eps, st->rtol, st->atol, st->checked, st->max_rel, st->max_abs);
}

enum { S_SEEDS = 8 };

/* ---------------------------------------------------------------------------
 * Linear. */

typedef struct {
    layer_case_t base;
    float *out, *R;
    int N, C, OC, use_bias;
} linear_case_t;

static double s_linear_obj(layer_case_t *self) {
    linear_case_t *c = (linear_case_t *)self;
    linear_forward(c->out, c->base.x[0], c->base.x[1], c->use_bias ? c->base.x[2] : NULL,
                   c->N, c->C, c->OC);
    return s_dot_d(c->out, c->R, c->N * c->OC);
}

static void s_linear_bwd(layer_case_t *self) {
    linear_case_t *c = (linear_case_t *)self;
    linear_backward(c->base.g[0], c->base.g[1], c->use_bias ? c->base.g[2] : NULL, c->R,
                    c->base.x[0], c->base.x[1], c->N, c->C, c->OC);
}

static fd_stat_t s_linear_stat = {"linear", 0.25, 1e-4, 1e-5, 0, 0, 0};

static void test_linear_backward(void) {
    for (int seed = 1; seed <= S_SEEDS; seed++) {
        s_rng = 1000 + seed;
        int N = s_randint(1, 3) * s_randint(1, 7), C = s_randint(1, 13), OC = s_randint(1, 11);
        linear_case_t c = {0};
        c.N = N; c.C = C; c.OC = OC; c.use_bias = seed % 4 != 0;
        c.base.ntensors = c.use_bias ? 3 : 2;
        int sizes[3] = {N * C, OC * C, OC};
        const char *names[3] = {"inp", "weight", "bias"};
        for (int t = 0; t < 3; t++) {
            c.base.x[t] = s_rand(sizes[t], 1.0f);
            c.base.g[t] = s_zeros(sizes[t]);
            c.base.n[t] = sizes[t];
            c.base.xname[t] = names[t];
        }
        c.out = s_zeros(N * OC);
        c.R = s_rand(N * OC, 1.0f);
        c.base.objective = s_linear_obj;
        c.base.backward = s_linear_bwd;
        char shape[64];
        snprintf(shape, sizeof shape, "N=%d C=%d OC=%d bias=%d", N, C, OC, c.use_bias);
        s_check_layer(&c.base, &s_linear_stat, shape);
        for (int t = 0; t < 3; t++) { free(c.base.x[t]); free(c.base.g[t]); }
        free(c.out); free(c.R);
    }
    s_print_stat(&s_linear_stat);
}

/* linear_forward against a naive triple loop in double, with and without
 * bias, on sizes that reach the BLAS kernels' edge cases. */
static void test_linear_forward_naive(void) {
    const int shapes[][3] = {{1, 1, 1}, {3, 5, 7}, {37, 53, 29}, {64, 64, 64}, {130, 17, 65}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int N = shapes[s][0], C = shapes[s][1], OC = shapes[s][2];
        s_rng = 77 + s;
        float *inp = s_rand(N * C, 1.0f), *w = s_rand(OC * C, 1.0f), *bias = s_rand(OC, 1.0f);
        float *out = s_zeros(N * OC);
        for (int with_bias = 0; with_bias < 2; with_bias++) {
            for (int i = 0; i < N * OC; i++) out[i] = NAN;   /* must be overwritten */
            linear_forward(out, inp, w, with_bias ? bias : NULL, N, C, OC);
            double worst = 0.0;
            for (int n = 0; n < N; n++)
                for (int o = 0; o < OC; o++) {
                    double ref = with_bias ? bias[o] : 0.0, mag = fabs(ref);
                    for (int i = 0; i < C; i++) {
                        ref += (double)inp[n * C + i] * w[o * C + i];
                        mag += fabs((double)inp[n * C + i] * w[o * C + i]);
                    }
                    double err = fabs(out[n * OC + o] - ref) / (mag + 1e-30);
                    if (!(err <= worst)) worst = err;
                }
            CHECKF(worst <= 1e-6, "N=%d C=%d OC=%d bias=%d: relative error %.3g", N, C, OC, with_bias, worst);
        }
        free(inp); free(w); free(bias); free(out);
    }
}

/* dinp NULL and dbias NULL are allowed and give the same other gradients. */
static void test_linear_backward_nulls(void) {
    s_rng = 5;
    int N = 6, C = 5, OC = 3;
    float *inp = s_rand(N * C, 1.0f), *w = s_rand(OC * C, 1.0f), *dout = s_rand(N * OC, 1.0f);
    float *dinp = s_zeros(N * C), *dw1 = s_zeros(OC * C), *dw2 = s_zeros(OC * C), *db = s_zeros(OC);
    linear_backward(dinp, dw1, db, dout, inp, w, N, C, OC);
    linear_backward(NULL, dw2, NULL, dout, inp, w, N, C, OC);
    CHECK(memcmp(dw1, dw2, (size_t)OC * C * sizeof(float)) == 0);
    double nz = 0.0;
    for (int i = 0; i < OC * C; i++) nz += fabs(dw1[i]);
    CHECK(nz > 0.0);
    free(inp); free(w); free(dout); free(dinp); free(dw1); free(dw2); free(db);
}

/* The halves of linear_backward: the input gradient written (accumulate 0)
 * equals linear_backward into zeros, and the parameter gradients over output
 * channel ranges, in any order, equal one call over all of them. */
static void test_linear_backward_parts(void) {
    const int shapes[][3] = {{1, 1, 1}, {7, 5, 3}, {64, 48, 96}, {130, 17, 65}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int N = shapes[s][0], C = shapes[s][1], OC = shapes[s][2];
        s_rng = 1300 + s;
        float *inp = s_rand(N * C, 1.0f), *w = s_rand(OC * C, 1.0f), *dout = s_rand(N * OC, 1.0f);
        float *g0 = s_rand(OC * C + OC, 1.0f);   /* gradients already accumulated */
        float *dinp_ref = s_zeros(N * C), *dinp = s_rand(N * C, 5.0f);   /* garbage: must be overwritten */
        float *dw_ref = s_zeros(OC * C + OC), *dw = s_zeros(OC * C + OC);
        memcpy(dw_ref, g0, (size_t)(OC * C + OC) * sizeof(float));
        memcpy(dw, g0, (size_t)(OC * C + OC) * sizeof(float));
        linear_backward(dinp_ref, dw_ref, dw_ref + OC * C, dout, inp, w, N, C, OC);
        linear_backward_input(dinp, dout, w, N, C, OC, 0);
        int cuts[4] = {0, OC / 3, OC / 3 + (OC > 2), OC};
        for (int k = 2; k >= 0; k--)
            linear_backward_params(dw, dw + OC * C, dout, inp, N, C, OC, cuts[k], cuts[k + 1]);
        double dd = 0, dwd = 0;
        for (int i = 0; i < N * C; i++) dd = check_worst(dd, fabs(dinp[i] - dinp_ref[i]));
        for (int i = 0; i < OC * C + OC; i++) dwd = check_worst(dwd, fabs(dw[i] - dw_ref[i]));
        CHECKF(dd <= 1e-5 && dwd <= 1e-5, "N=%d C=%d OC=%d: dinp diff %.3g, dweight/dbias diff %.3g", N, C, OC, dd, dwd);
        free(inp); free(w); free(dout); free(g0); free(dinp_ref); free(dinp); free(dw_ref); free(dw);
    }
}

/* ---------------------------------------------------------------------------
 * Embedding. */

typedef struct {
    layer_case_t base;
    float *out, *R;
    int *tokens;
    int B, T, C;
} embedding_case_t;

static double s_embedding_obj(layer_case_t *self) {
    embedding_case_t *c = (embedding_case_t *)self;
    embedding_forward(c->out, c->tokens, c->base.x[0], c->base.x[1], c->B, c->T, c->C);
    return s_dot_d(c->out, c->R, c->B * c->T * c->C);
}

static void s_embedding_bwd(layer_case_t *self) {
    embedding_case_t *c = (embedding_case_t *)self;
    embedding_backward(c->base.g[0], c->base.g[1], c->R, c->tokens, c->B, c->T, c->C);
}

static fd_stat_t s_embedding_stat = {"embedding", 0.25, 1e-5, 2e-6, 0, 0, 0};

static void test_embedding_backward(void) {
    for (int seed = 1; seed <= S_SEEDS; seed++) {
        s_rng = 2000 + seed;
        embedding_case_t c = {0};
        c.B = s_randint(1, 3); c.T = s_randint(1, 7); c.C = s_randint(1, 13);
        int V = s_randint(2, 6), maxT = c.T + 1;   /* row maxT-1 of wpe gets no gradient */
        c.tokens = malloc((size_t)c.B * c.T * sizeof(int));
        for (int i = 0; i < c.B * c.T; i++) c.tokens[i] = s_randint(0, V - 1);
        int sizes[2] = {V * c.C, maxT * c.C};
        const char *names[2] = {"wte", "wpe"};
        c.base.ntensors = 2;
        for (int t = 0; t < 2; t++) {
            c.base.x[t] = s_rand(sizes[t], 1.0f);
            c.base.g[t] = s_zeros(sizes[t]);
            c.base.n[t] = sizes[t];
            c.base.xname[t] = names[t];
        }
        c.out = s_zeros(c.B * c.T * c.C);
        c.R = s_rand(c.B * c.T * c.C, 1.0f);
        c.base.objective = s_embedding_obj;
        c.base.backward = s_embedding_bwd;
        char shape[64];
        snprintf(shape, sizeof shape, "B=%d T=%d C=%d V=%d", c.B, c.T, c.C, V);
        s_check_layer(&c.base, &s_embedding_stat, shape);
        /* forward is exact */
        s_embedding_obj(&c.base);
        for (int b = 0; b < c.B; b++)
            for (int t = 0; t < c.T; t++)
                for (int i = 0; i < c.C; i++) {
                    float want = c.base.x[0][c.tokens[b * c.T + t] * c.C + i] + c.base.x[1][t * c.C + i];
                    if (c.out[(b * c.T + t) * c.C + i] != want) {
                        CHECKF(0, "%s: out[%d,%d,%d] wrong", shape, b, t, i);
                        b = c.B; t = c.T; break;
                    }
                }
        for (int t = 0; t < 2; t++) { free(c.base.x[t]); free(c.base.g[t]); }
        free(c.out); free(c.R); free(c.tokens);
    }
    s_print_stat(&s_embedding_stat);
}

/* ---------------------------------------------------------------------------
 * LayerNorm. */

typedef struct {
    layer_case_t base;
    float *out, *R, *mean, *rstd;
    int N, C;
} layernorm_case_t;

static double s_layernorm_obj(layer_case_t *self) {
    layernorm_case_t *c = (layernorm_case_t *)self;
    layernorm_forward(c->out, c->mean, c->rstd, c->base.x[0], c->base.x[1], c->base.x[2], c->N, c->C);
    return s_dot_d(c->out, c->R, c->N * c->C);
}

static void s_layernorm_bwd(layer_case_t *self) {
    layernorm_case_t *c = (layernorm_case_t *)self;
    layernorm_backward(c->base.g[0], c->base.g[1], c->base.g[2], c->R, c->base.x[0], c->base.x[1],
                       c->mean, c->rstd, c->N, c->C);
}

static fd_stat_t s_layernorm_stat = {"layernorm", 2e-3, 1e-2, 1e-3, 0, 0, 0};

static void test_layernorm_backward(void) {
    for (int seed = 1; seed <= S_SEEDS; seed++) {
        s_rng = 3000 + seed;
        layernorm_case_t c = {0};
        c.N = s_randint(1, 3) * s_randint(1, 7);
        c.C = s_randint(3, 21);
        int sizes[3] = {c.N * c.C, c.C, c.C};
        const char *names[3] = {"inp", "weight", "bias"};
        c.base.ntensors = 3;
        for (int t = 0; t < 3; t++) {
            c.base.x[t] = s_rand(sizes[t], t == 0 ? 2.0f : 1.0f);
            c.base.g[t] = s_zeros(sizes[t]);
            c.base.n[t] = sizes[t];
            c.base.xname[t] = names[t];
        }
        for (int i = 0; i < c.N * c.C; i++) c.base.x[0][i] += 0.5f;   /* a non-zero mean */
        c.out = s_zeros(c.N * c.C);
        c.R = s_rand(c.N * c.C, 1.0f);
        c.mean = s_zeros(c.N);
        c.rstd = s_zeros(c.N);
        c.base.objective = s_layernorm_obj;
        c.base.backward = s_layernorm_bwd;
        char shape[64];
        snprintf(shape, sizeof shape, "N=%d C=%d", c.N, c.C);
        s_check_layer(&c.base, &s_layernorm_stat, shape);
        for (int t = 0; t < 3; t++) { free(c.base.x[t]); free(c.base.g[t]); }
        free(c.out); free(c.R); free(c.mean); free(c.rstd);
    }
    s_print_stat(&s_layernorm_stat);
}

/* layernorm_forward against a double reference, including widths past the
 * vector block. */
static void test_layernorm_forward_ref(void) {
    const int Cs[] = {1, 3, 8, 17, 64, 200};
    for (size_t s = 0; s < sizeof Cs / sizeof Cs[0]; s++) {
        int N = 5, C = Cs[s];
        s_rng = 31 + s;
        float *inp = s_rand(N * C, 3.0f), *w = s_rand(C, 1.0f), *b = s_rand(C, 1.0f);
        float *out = s_zeros(N * C), *mean = s_zeros(N), *rstd = s_zeros(N);
        for (int i = 0; i < N * C; i++) inp[i] += 10.0f;
        layernorm_forward(out, mean, rstd, inp, w, b, N, C);
        for (int n = 0; n < N; n++) {
            double m = 0.0, v = 0.0;
            for (int i = 0; i < C; i++) m += inp[n * C + i];
            m /= C;
            for (int i = 0; i < C; i++) v += (inp[n * C + i] - m) * (inp[n * C + i] - m);
            double r = 1.0 / sqrt(v / C + 1e-5);
            CHECK_NEAR(mean[n], m, 1e-6);
            CHECK_NEAR(rstd[n], r, 1e-5);
            for (int i = 0; i < C; i++)
                CHECK_NEAR(out[n * C + i], (inp[n * C + i] - m) * r * w[i] + b[i], 1e-4);
        }
        free(inp); free(w); free(b); free(out); free(mean); free(rstd);
    }
}

static void s_slow_part(void *ctx, int i, int worker)
{
    (void)worker;
    if (i == *(const int *)ctx) usleep(2000);
}

/* A team of t threads whose last worker has been slow at its parts for a
 * while, so that its share is the least the team gives (team.h) and the
 * split kernels cut unequal parts. */
static team_t *s_team_skewed(int t)
{
    team_t *team = team_start(t);
    int slow = t - 1;
    for (int k = 0; k < 20 && team; k++) team_run_parts(team, s_slow_part, &slow);
    if (team) {
        int a, b;
        team_part(team, 600, 1, slow, &a, &b);
        CHECKF(b - a < 600 / t, "threads %d: the slow worker's part is %d of 600", t, b - a);
    }
    return team;
}

/* The split kernels that sum parameter gradients by row blocks
 * (split_layernorm_backward, split_bias_backward): the same bits
 * alone and with teams of 2 and 3 threads (cut unequally), close to the serial kernels that
 * add row by row, the row-wise outputs bit for bit equal to theirs. */
static void test_split_row_blocks(void) {
    const int Ns[] = {1, 64, 150}, Cs[] = {7, 64, 200};
    for (size_t si = 0; si < sizeof Ns / sizeof Ns[0]; si++) {
        int N = Ns[si], C = Cs[si], n = N * C;
        s_rng = 1400 + si;
        float *inp = s_rand(n, 2.0f), *w = s_rand(C, 1.0f), *b = s_rand(C, 1.0f), *dout = s_rand(n, 1.0f);
        float *out = s_zeros(n), *mean = s_zeros(N), *rstd = s_zeros(N);
        float *dx0 = s_rand(n, 1.0f), *g0 = s_rand(2 * C, 1.0f), *part = s_zeros(split_part_floats(N, 2 * C));
        float *dx[4], *g[4];
        layernorm_forward(out, mean, rstd, inp, w, b, N, C);
        for (int t = 0; t < 4; t++) {   /* 0: the serial kernel; 1, 2, 3: split with that many threads */
            dx[t] = s_zeros(n);
            g[t] = s_zeros(2 * C);
            memcpy(dx[t], dx0, (size_t)n * sizeof(float));
            memcpy(g[t], g0, (size_t)2 * C * sizeof(float));
            if (t == 0) { layernorm_backward(dx[t], g[t], g[t] + C, dout, inp, w, mean, rstd, N, C); continue; }
            team_t *team = s_team_skewed(t);
            split_layernorm_backward(team, dx[t], g[t], g[t] + C, part, dout, inp, w, mean, rstd, N, C);
            team_stop(&team);
            CHECKF(memcmp(dx[t], dx[0], (size_t)n * sizeof(float)) == 0, "N=%d C=%d threads %d: layernorm dinp", N, C, t);
            CHECKF(t == 1 || memcmp(g[t], g[1], (size_t)2 * C * sizeof(float)) == 0,
                   "N=%d C=%d threads %d: layernorm dweight/dbias differ from one thread's", N, C, t);
            for (int i = 0; i < 2 * C; i++) CHECK_NEAR(g[t][i], g[0][i], 1e-4 * (1.0 + fabs(g[0][i])));
        }
        /* the column sums of a bias gradient (split_bias_backward) */
        float *bpart = s_zeros(split_part_floats(N, C)), *db[4];
        for (int t = 0; t < 4; t++) {
            db[t] = s_zeros(C);
            memcpy(db[t], g0, (size_t)C * sizeof(float));
            if (t == 0) { bias_backward(db[t], dout, N, C); continue; }
            team_t *team = s_team_skewed(t);
            split_bias_backward(team, db[t], bpart, dout, N, C);
            team_stop(&team);
            CHECKF(t == 1 || memcmp(db[t], db[1], (size_t)C * sizeof(float)) == 0,
                   "N=%d C=%d threads %d: the bias gradient differs from one thread's", N, C, t);
            for (int i = 0; i < C; i++) CHECK_NEAR(db[t][i], db[0][i], 1e-4 * (1.0 + fabs(db[0][i])));
        }
        for (int t = 0; t < 4; t++) { free(dx[t]); free(g[t]); free(db[t]); }
        free(bpart);
        free(inp); free(w); free(b); free(dout); free(out); free(mean); free(rstd);
        free(dx0); free(g0); free(part);
    }
}

/* A linear backward whose input gradient is multiplied by gelu' on each
 * block of the product (split_linear_backward_times) gives the bits of the
 * product followed by gelu_backward_grad, alone and split among 1-3
 * threads cut unequally (bit for bit where gemm() runs the own kernel, which promises
 * the same bits for any split; close with cblas_sgemm), and the weight and
 * bias gradients of split_linear_backward.  Shapes of several blocks of
 * rows and columns. */
static void test_linear_backward_times(void) {
    const int shapes[][3] = {{5, 7, 9}, {150, 600, 300}, {64, 1024, 256}};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        int N = shapes[si][0], C = shapes[si][1], OC = shapes[si][2], n = N * C;
        s_rng = 1450 + si;
        float *inp = s_rand(n, 1.0f), *w = s_rand(OC * C, 0.2f), *dout = s_rand(N * OC, 1.0f);
        float *grad = s_rand(n, 1.0f), *dw0 = s_rand(OC * C, 1.0f), *db0 = s_rand(OC, 1.0f);
        float *want = s_zeros(n), *dw_want = s_zeros(OC * C), *db_want = s_zeros(OC);
        linear_backward_input(want, dout, w, N, C, OC, 0);
        gelu_backward_grad(want, grad, n);
        memcpy(dw_want, dw0, (size_t)OC * C * sizeof(float));
        memcpy(db_want, db0, (size_t)OC * sizeof(float));
        split_linear_backward(NULL, NULL, dw_want, db_want, dout, inp, w, N, C, OC, 0);
        float *d = s_zeros(n), *dw = s_zeros(OC * C), *db = s_zeros(OC);
        for (int t = 0; t < 4; t++) {   /* 0: no team; 1, 2, 3: a team of that many threads */
            memcpy(dw, dw0, (size_t)OC * C * sizeof(float));
            memcpy(db, db0, (size_t)OC * sizeof(float));
            team_t *team = t ? s_team_skewed(t) : NULL;
            split_linear_backward_times(team, d, dw, db, dout, inp, w, grad, N, C, OC);
            team_stop(&team);
            int exact = t == 0 || gemm_fast();
            double worst = 0;
            for (int i = 0; i < n; i++) worst = check_worst(worst, fabs((double)d[i] - want[i]) / (1.0 + fabs(want[i])));
            CHECKF(exact ? memcmp(d, want, (size_t)n * sizeof(float)) == 0 : worst < 1e-5,
                   "%dx%dx%d threads %d: dinp (worst %g)", N, C, OC, t, worst);
            CHECKF(!exact || (memcmp(dw, dw_want, (size_t)OC * C * sizeof(float)) == 0 &&
                              memcmp(db, db_want, (size_t)OC * sizeof(float)) == 0),
                   "%dx%dx%d threads %d: dweight or dbias", N, C, OC, t);
        }
        free(inp); free(w); free(dout); free(grad); free(dw0); free(db0); free(want); free(dw_want);
        free(db_want); free(d); free(dw); free(db);
    }
}

/* 1 when the n floats of a and b are the same bits. */
static int s_same(const float *a, const float *b, size_t n) { return memcmp(a, b, n * sizeof(float)) == 0; }

/* The other split kernels (the linear forwards, layernorm's forward and
 * apply, attention's passes, cross-entropy's) give the serial call's bits
 * with teams of 2 and 3 threads cut unequally: rows, heads and output rows
 * are independent (a product's rows bit for bit where gemm() runs the own
 * kernel, close with cblas_sgemm). */
static void test_split_unequal_cuts(void) {
    enum { B = 5, T = 30, C = 64, NH = 4, V = 37, N = B * T };
    s_rng = 1470;
    float *x = s_rand(N * C, 1.0f), *w = s_rand(3 * C * C, 0.2f), *bias = s_rand(3 * C, 0.5f);
    float *res = s_rand(N * 3 * C, 1.0f), *lw = s_rand(C, 1.0f), *lb = s_rand(C, 1.0f);
    float *dout = s_rand(N * C, 1.0f), *logits = s_rand(N * V, 3.0f);
    int targets[N];
    for (int n = 0; n < N; n++) targets[n] = (n * 7) % V;
    size_t stride = attention_scratch_floats(T, C, NH);
    float *scratch = s_zeros((int)(3 * stride));
    enum { LIN, GELU_O, GELU_G, RES, LN, MEAN, RSTD, APPLY, ATT_O, ATT_A, DQKV, LOSS, PROBS, DLOG, NOUT };
    const size_t len[NOUT] = {N * 3 * C, N * 3 * C, N * 3 * C, N * 3 * C, N * C, N, N, N * C,
                              N * C, B * NH * T * T, N * 3 * C, N, N * V, N * V};
    float *o[4][NOUT];
    for (int t = 0; t < 4; t++) {   /* 0: no team; 1, 2, 3: a team of that many threads */
        for (int k = 0; k < NOUT; k++) o[t][k] = s_zeros((int)len[k]);
        team_t *team = t ? s_team_skewed(t) : NULL;
        float **y = o[t];
        split_linear_forward(team, y[LIN], x, w, bias, N, C, 3 * C);
        split_linear_bias_gelu_forward_grad(team, y[GELU_O], y[GELU_G], x, w, bias, N, C, 3 * C);
        split_linear_bias_residual_forward(team, y[RES], x, w, bias, res, N, C, 3 * C);
        split_layernorm_forward(team, y[LN], y[MEAN], y[RSTD], x, lw, lb, N, C);
        split_layernorm_apply(team, y[APPLY], x, y[MEAN], y[RSTD], lw, lb, N, C);
        split_attention_forward(team, y[ATT_O], y[ATT_A], scratch, stride, res, B, T, C, NH);
        split_attention_backward(team, y[DQKV], scratch, stride, dout, res, y[ATT_A], B, T, C, NH, 0);
        split_crossentropy_forward(team, y[LOSS], y[PROBS], logits, targets, N, V);
        split_crossentropy_backward(team, y[DLOG], y[PROBS], targets, 1.0f / N, N, V);
        team_stop(&team);
        if (t == 0) continue;
        for (int k = 0; k < NOUT; k++) {
            int product = k == LIN || k == GELU_O || k == GELU_G || k == RES;
            double worst = 0;
            for (size_t i = 0; i < len[k]; i++)
                worst = check_worst(worst, fabs((double)y[k][i] - o[0][k][i]) / (1.0 + fabs(o[0][k][i])));
            CHECKF(product && !gemm_fast() ? worst < 1e-5 : s_same(y[k], o[0][k], len[k]),
                   "threads %d: output %d differs from the serial call's (worst %g)", t, k, worst);
        }
    }
    for (int t = 0; t < 4; t++)
        for (int k = 0; k < NOUT; k++) free(o[t][k]);
    free(x); free(w); free(bias); free(res); free(lw); free(lb); free(dout); free(logits); free(scratch);
}

/* The layernorm kernels' AVX2 and AVX-512 copies give the bits of the plain
 * C loops (forward, the whole backward and its two halves), tails included;
 * layernorm_apply gives the forward's output bit for bit at every level. */
static void test_layernorm_every_level(void) {
    const int Cs[] = {1, 7, 64, 203};
    for (size_t si = 0; si < sizeof Cs / sizeof Cs[0]; si++) {
        int N = 11, C = Cs[si], n = N * C;
        s_rng = 1500 + si;
        float *inp = s_rand(n, 3.0f), *w = s_rand(C, 1.0f), *b = s_rand(C, 1.0f), *dout = s_rand(n, 1.0f);
        float *dx0 = s_rand(n, 1.0f), *g0 = s_rand(2 * C, 1.0f), *re = s_zeros(n);
        float *out[2], *mean[2], *rstd[2], *dx[2], *g[2];
        for (int k = 0; k < 2; k++) {
            out[k] = s_zeros(n); mean[k] = s_zeros(N); rstd[k] = s_zeros(N);
            dx[k] = s_zeros(n); g[k] = s_zeros(2 * C);
        }
        for (int l = CPU_GENERIC; l <= (int)cpu_hw_level(); l++) {
            int k = l == CPU_GENERIC ? 0 : 1;   /* 0: the plain loops, 1: this level */
            setenv("BRIGADE_CPU", cpu_level_name((cpu_level_t)l), 1);
            layernorm_forward(out[k], mean[k], rstd[k], inp, w, b, N, C);
            layernorm_apply(re, inp, mean[k], rstd[k], w, b, N, C);   /* the forward's output again */
            CHECKF(memcmp(re, out[k], (size_t)n * sizeof(float)) == 0, "C=%d level %s: layernorm_apply",
                   C, cpu_level_name((cpu_level_t)l));
            memcpy(dx[k], dx0, (size_t)n * sizeof(float));
            memcpy(g[k], g0, (size_t)2 * C * sizeof(float));
            layernorm_backward(dx[k], g[k], g[k] + C, dout, inp, w, mean[0], rstd[0], N, C);
            if (k == 0) continue;
            const char *lv = cpu_level_name((cpu_level_t)l);
            CHECKF(memcmp(out[1], out[0], (size_t)n * sizeof(float)) == 0 && memcmp(mean[1], mean[0], (size_t)N * sizeof(float)) == 0
                   && memcmp(rstd[1], rstd[0], (size_t)N * sizeof(float)) == 0, "C=%d level %s: forward", C, lv);
            CHECKF(memcmp(dx[1], dx[0], (size_t)n * sizeof(float)) == 0 && memcmp(g[1], g[0], (size_t)2 * C * sizeof(float)) == 0,
                   "C=%d level %s: backward", C, lv);
        }
        unsetenv("BRIGADE_CPU");
        for (int k = 0; k < 2; k++) { free(out[k]); free(mean[k]); free(rstd[k]); free(dx[k]); free(g[k]); }
        free(inp); free(w); free(b); free(dout); free(dx0); free(g0); free(re);
    }
}

/* ---------------------------------------------------------------------------
 * Element-wise layers: gelu, relu, residual. */

typedef struct {
    layer_case_t base;
    float *out, *R;
    int N, kind;   /* 0 gelu, 1 relu, 2 residual */
} eltwise_case_t;

static double s_eltwise_obj(layer_case_t *self) {
    eltwise_case_t *c = (eltwise_case_t *)self;
    if (c->kind == 0) gelu_forward(c->out, c->base.x[0], c->N);
    else if (c->kind == 1) relu_forward(c->out, c->base.x[0], c->N);
    else residual_forward(c->out, c->base.x[0], c->base.x[1], c->N);
    return s_dot_d(c->out, c->R, c->N);
}

static void s_eltwise_bwd(layer_case_t *self) {
    eltwise_case_t *c = (eltwise_case_t *)self;
    if (c->kind == 0) gelu_backward(c->base.g[0], c->base.x[0], c->R, c->N);
    else if (c->kind == 1) relu_backward(c->base.g[0], c->out, c->R, c->N);
    else residual_backward(c->base.g[0], c->base.g[1], c->R, c->N);
}

static fd_stat_t s_gelu_stat = {"gelu", 1e-2, 5e-3, 1e-4, 0, 0, 0};
static fd_stat_t s_relu_stat = {"relu", 1e-2, 1e-5, 1e-6, 0, 0, 0};
static fd_stat_t s_residual_stat = {"residual", 0.25, 1e-5, 2e-6, 0, 0, 0};

static void s_eltwise_run(int kind, fd_stat_t *st) {
    for (int seed = 1; seed <= S_SEEDS; seed++) {
        s_rng = 4000 + 100 * kind + seed;
        eltwise_case_t c = {0};
        c.kind = kind;
        c.N = s_randint(1, 3) * s_randint(1, 7) * s_randint(1, 9);
        c.base.ntensors = kind == 2 ? 2 : 1;
        const char *names[2] = {kind == 2 ? "a" : "inp", "b"};
        for (int t = 0; t < c.base.ntensors; t++) {
            c.base.x[t] = s_rand(c.N, 3.0f);
            c.base.g[t] = s_zeros(c.N);
            c.base.n[t] = c.N;
            c.base.xname[t] = names[t];
        }
        if (kind == 1)   /* keep relu inputs away from the kink */
            for (int i = 0; i < c.N; i++)
                if (fabsf(c.base.x[0][i]) < 0.05f) c.base.x[0][i] = c.base.x[0][i] < 0 ? -0.05f : 0.05f;
        c.out = s_zeros(c.N);
        c.R = s_rand(c.N, 1.0f);
        c.base.objective = s_eltwise_obj;
        c.base.backward = s_eltwise_bwd;
        char shape[32];
        snprintf(shape, sizeof shape, "N=%d", c.N);
        s_check_layer(&c.base, st, shape);
        for (int t = 0; t < c.base.ntensors; t++) { free(c.base.x[t]); free(c.base.g[t]); }
        free(c.out); free(c.R);
    }
    s_print_stat(st);
}

static void test_gelu_backward(void) { s_eltwise_run(0, &s_gelu_stat); }
static void test_relu_backward(void) { s_eltwise_run(1, &s_relu_stat); }
static void test_residual_backward(void) { s_eltwise_run(2, &s_residual_stat); }

/* gelu against the tanh formula in double, over a wide range and odd length;
 * also the tanh form itself, where it does not cancel. */
static void test_gelu_forward_ref(void) {
    enum { N = 1001 };
    float *x = malloc(N * sizeof(float)), *y = malloc(N * sizeof(float));
    for (int i = 0; i < N; i++) x[i] = -12.0f + 24.0f * i / (N - 1);
    x[0] = -60.0f; x[1] = 60.0f; x[2] = 0.0f; x[3] = 1e-6f;
    gelu_forward(y, x, N);
    double worst = 0.0;
    for (int i = 0; i < N; i++) {
        double v = x[i];
        /* 0.5 v (1 + tanh(u)) written as v / (1 + e^-2u), which does not cancel */
        double a = 2.0 * sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v);
        double ref = v / (1.0 + exp(-a));
        double err = fabs(y[i] - ref) / fmax(fabs(ref), 1e-30);
        if (!(err <= worst)) worst = err;
        /* float rounding of the exponent argument costs |a| ulp in the tail */
        CHECKF(err <= 3e-7 * (2.0 + fmin(fabs(a), 90.0)), "gelu(%g) = %.9g, want %.9g", v, y[i], ref);
        if (v > -3.0) {
            double th = 0.5 * v * (1.0 + tanh(sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
            CHECK_NEAR(y[i], th, 1e-6);
        }
    }
    printf("  # gelu forward max relative error vs double: %.3g\n", worst);
    CHECK(y[1] == 60.0f);
    CHECK(fabsf(y[0]) < 1e-30f);
    /* the derivative far out: 0 on the left, 1 on the right, finite */
    float big[4] = {-1e13f, -60.0f, 60.0f, 1e13f}, d[4] = {0}, one[4] = {1, 1, 1, 1};
    gelu_backward(d, big, one, 4);
    CHECK(fabsf(d[0]) < 1e-20f && fabsf(d[1]) < 1e-20f);
    CHECK(d[2] == 1.0f && d[3] == 1.0f);
    free(x); free(y);
}

/* gelu_forward_grad and gelu_backward_grad give the same bits as gelu_forward
 * and gelu_backward into zeros, over the whole range (tails included). */
static void test_gelu_grad_pair(void) {
    enum { N = 1003 };
    float *x = malloc(N * sizeof(float)), *xg = malloc(N * sizeof(float));
    float *y1 = s_zeros(N), *y2 = s_zeros(N), *d = s_rand(N, 2.0f), *dx1 = s_zeros(N), *dx2 = s_zeros(N);
    for (int i = 0; i < N; i++) x[i] = -30.0f + 60.0f * i / (N - 1);
    x[0] = -1e13f; x[1] = 1e13f; x[2] = 0.0f; x[3] = -0.0f;
    memcpy(xg, x, N * sizeof(float));
    gelu_forward(y1, x, N);
    gelu_backward(dx1, x, d, N);
    gelu_forward_grad(y2, xg, N);
    memcpy(dx2, d, N * sizeof(float));
    gelu_backward_grad(dx2, xg, N);
    CHECK(memcmp(y1, y2, N * sizeof(float)) == 0);
    CHECK(memcmp(dx1, dx2, N * sizeof(float)) == 0);
    free(x); free(xg); free(y1); free(y2); free(d); free(dx1); free(dx2);
}

/* The bias folded into the pass after the product gives the bits of the
 * plain passes it replaces: adding the bias, then gelu_forward_grad or a
 * residual add, on any column range; bias_backward the bias gradient of
 * linear_backward_params; at every instruction level this CPU runs.  And a product without a bias
 * followed by the residual add with it matches linear_forward with the bias
 * (OpenBLAS adds C to the product once: measured equal here; allowed a
 * rounding). */
static void test_bias_passes(void) {
    const int shapes[][2] = {{1, 1}, {3, 7}, {5, 16}, {9, 33}, {17, 256}};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        int N = shapes[si][0], OC = shapes[si][1], n = N * OC;
        s_rng = 900 + si;
        float *acc = s_rand(n, 6.0f), *bias = s_rand(OC, 2.0f), *res = s_rand(n, 1.0f);
        float *x = s_zeros(n), *y_want = s_zeros(n), *g_want = s_zeros(n), *r_want = s_zeros(n);
        float *y = s_zeros(n), *g = s_zeros(n), *r = s_zeros(n);
        for (int i = 0; i < n; i++) {
            x[i] = acc[i] + bias[i % OC];
            r_want[i] = x[i] + res[i];
        }
        memcpy(g_want, x, (size_t)n * sizeof(float));
        gelu_forward_grad(y_want, g_want, n);
        for (int l = CPU_GENERIC; l <= (int)cpu_hw_level(); l++) {
            setenv("BRIGADE_CPU", cpu_level_name((cpu_level_t)l), 1);
            memcpy(g, acc, (size_t)n * sizeof(float));
            bias_gelu_forward_grad(y, g, bias, N, OC);
            CHECKF(memcmp(y, y_want, (size_t)n * sizeof(float)) == 0 && memcmp(g, g_want, (size_t)n * sizeof(float)) == 0,
                   "N=%d OC=%d level %s: bias_gelu_forward_grad", N, OC, cpu_level_name((cpu_level_t)l));
        }
        unsetenv("BRIGADE_CPU");
        /* the bias gradient's column sums: linear_backward_params's, with only a bias */
        float no_weight[1] = {0}, *db_want = s_rand(OC, 1.0f), *db = s_zeros(OC), *db0 = s_zeros(OC);
        memcpy(db0, db_want, (size_t)OC * sizeof(float));
        linear_backward_params(no_weight, db_want, acc, NULL, N, 0, OC, 0, OC);
        for (int l = CPU_GENERIC; l <= (int)cpu_hw_level(); l++) {
            setenv("BRIGADE_CPU", cpu_level_name((cpu_level_t)l), 1);
            memcpy(db, db0, (size_t)OC * sizeof(float));
            bias_backward(db, acc, N, OC);
            CHECKF(memcmp(db, db_want, (size_t)OC * sizeof(float)) == 0, "N=%d OC=%d level %s: bias_backward", N,
                   OC, cpu_level_name((cpu_level_t)l));
        }
        unsetenv("BRIGADE_CPU");
        free(db_want); free(db); free(db0);
        bias_residual_forward(r, acc, bias, res, N, OC);
        CHECK(memcmp(r, r_want, (size_t)n * sizeof(float)) == 0);
        memcpy(r, acc, (size_t)n * sizeof(float));
        bias_residual_forward(r, r, bias, res, N, OC);           /* in place on a */
        CHECK(memcmp(r, r_want, (size_t)n * sizeof(float)) == 0);
        memcpy(r, res, (size_t)n * sizeof(float));
        bias_residual_forward(r, acc, bias, r, N, OC);           /* in place on b */
        CHECK(memcmp(r, r_want, (size_t)n * sizeof(float)) == 0);
        free(acc); free(bias); free(res); free(x); free(y_want); free(g_want); free(r_want);
        free(y); free(g); free(r);
    }
    /* the product: bias in the sgemm vs added after it */
    const int N = 37, C = 48, OC = 40;
    s_rng = 950;
    float *inp = s_rand(N * C, 1.0f), *w = s_rand(OC * C, 1.0f), *bias = s_rand(OC, 1.0f), *res = s_rand(N * OC, 1.0f);
    float *want = s_zeros(N * OC), *got = s_zeros(N * OC);
    linear_forward(want, inp, w, bias, N, C, OC);
    residual_forward(want, want, res, N * OC);
    linear_forward(got, inp, w, NULL, N, C, OC);
    bias_residual_forward(got, got, bias, res, N, OC);
    double worst = 0.0;
    for (int i = 0; i < N * OC; i++) worst = check_worst(worst, fabs((double)got[i] - want[i]) / fmax(1.0, fabs(want[i])));
    printf("  # product + bias after it vs linear_forward with the bias: worst %.3g\n", worst);
    CHECK(worst <= 1e-6);
    free(inp); free(w); free(bias); free(res); free(want); free(got);
}

/* The linear forwards that run their element-wise pass on each finished
 * block of the product give the bits of the product followed by the whole
 * pass, with the own kernel (shapes of several blocks of rows, columns and
 * terms, so that a pass run on a block before its last terms shows) and
 * with cblas_sgemm (BRIGADE_GEMM=blas: the pass after the whole product). */
static void test_linear_fused_forwards(void) {
    const int shapes[][3] = {{5, 7, 9}, {200, 300, 600}, {90, 256, 1024}};
    for (int blas = 0; blas < 2; blas++) {
        if (blas) setenv("BRIGADE_GEMM", "blas", 1);
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            int N = shapes[si][0], C = shapes[si][1], OC = shapes[si][2], n = N * OC;
            s_rng = 970 + si;
            float *inp = s_rand(N * C, 1.0f), *w = s_rand(OC * C, 0.2f), *bias = s_rand(OC, 1.0f);
            float *res = s_rand(n, 1.0f), *want = s_zeros(n), *got = s_zeros(n), *gw = s_zeros(n), *g = s_zeros(n);
            linear_forward(gw, inp, w, NULL, N, C, OC);
            for (int i = 0; i < n; i++) want[i] = gw[i] + bias[i % OC];
            linear_forward(got, inp, w, bias, N, C, OC);
            CHECKF(memcmp(got, want, (size_t)n * sizeof(float)) == 0, "%dx%dx%d %s: linear_forward's bias", N, C,
                   OC, blas ? "blas" : "gemm()");
            bias_residual_forward(want, gw, bias, res, N, OC);
            linear_bias_residual_forward(got, inp, w, bias, res, N, C, OC);
            CHECKF(memcmp(got, want, (size_t)n * sizeof(float)) == 0, "%dx%dx%d %s: linear_bias_residual_forward",
                   N, C, OC, blas ? "blas" : "gemm()");
            bias_gelu_forward_grad(want, gw, bias, N, OC);
            linear_bias_gelu_forward_grad(got, g, inp, w, bias, N, C, OC);
            CHECKF(memcmp(got, want, (size_t)n * sizeof(float)) == 0 && memcmp(g, gw, (size_t)n * sizeof(float)) == 0,
                   "%dx%dx%d %s: linear_bias_gelu_forward_grad", N, C, OC, blas ? "blas" : "gemm()");
            free(inp); free(w); free(bias); free(res); free(want); free(got); free(gw); free(g);
        }
    }
    unsetenv("BRIGADE_GEMM");
}

static void test_relu_forward_exact(void) {
    float x[11] = {-3, -0.5f, -0.0f, 0, 1e-30f, 0.25f, 7, -1e30f, 1e30f, -1e-30f, 2};
    float y[11];
    relu_forward(y, x, 11);
    for (int i = 0; i < 11; i++) CHECK(y[i] == (x[i] > 0 ? x[i] : 0.0f));
}

/* gelu, relu and residual forwards may run in place; the results are the
 * same bits as out of place. */
static void test_eltwise_inplace(void) {
    const int Ns[] = {1, 7, 8, 29, 64};
    for (size_t s = 0; s < sizeof Ns / sizeof Ns[0]; s++) {
        int N = Ns[s];
        s_rng = 800 + s;
        float *a = s_rand(N, 3.0f), *b = s_rand(N, 3.0f), *want = s_zeros(N), *x = s_zeros(N);
        size_t bytes = (size_t)N * sizeof(float);
        gelu_forward(want, a, N);
        memcpy(x, a, bytes);
        gelu_forward(x, x, N);
        CHECKF(memcmp(x, want, bytes) == 0, "gelu in place, N=%d", N);
        relu_forward(want, a, N);
        memcpy(x, a, bytes);
        relu_forward(x, x, N);
        CHECKF(memcmp(x, want, bytes) == 0, "relu in place, N=%d", N);
        residual_forward(want, a, b, N);
        memcpy(x, a, bytes);
        residual_forward(x, x, b, N);
        CHECKF(memcmp(x, want, bytes) == 0, "residual out == a, N=%d", N);
        memcpy(x, b, bytes);
        residual_forward(x, a, x, N);
        CHECKF(memcmp(x, want, bytes) == 0, "residual out == b, N=%d", N);
        residual_forward(want, a, a, N);
        memcpy(x, a, bytes);
        residual_forward(x, x, x, N);
        CHECKF(memcmp(x, want, bytes) == 0, "residual out == a == b, N=%d", N);
        for (int i = 0; i < N; i++) CHECK(want[i] == 2.0f * a[i]);
        free(a); free(b); free(want); free(x);
    }
}

/* ---------------------------------------------------------------------------
 * Attention. */

typedef struct {
    layer_case_t base;
    float *out, *att, *R, *scratch;
    int B, T, C, NH;
} attention_case_t;

static double s_attention_obj(layer_case_t *self) {
    attention_case_t *c = (attention_case_t *)self;
    attention_forward(c->out, c->att, c->scratch, c->base.x[0], c->B, c->T, c->C, c->NH);
    return s_dot_d(c->out, c->R, c->B * c->T * c->C);
}

static void s_attention_bwd(layer_case_t *self) {
    attention_case_t *c = (attention_case_t *)self;
    attention_backward(c->base.g[0], c->scratch, c->R, c->base.x[0], c->att, c->B, c->T, c->C, c->NH);
}

static fd_stat_t s_attention_stat = {"attention", 5e-3, 1e-2, 5e-4, 0, 0, 0};

static void s_attention_case(int B, int T, int NH, int hs, float amp) {
    attention_case_t c = {0};
    c.B = B; c.T = T; c.NH = NH; c.C = NH * hs;
    int n = B * T * 3 * c.C;
    c.base.ntensors = 1;
    c.base.x[0] = s_rand(n, amp);
    c.base.g[0] = s_zeros(n);
    c.base.n[0] = n;
    c.base.xname[0] = "qkv";
    c.out = s_zeros(B * T * c.C);
    c.att = s_zeros(B * NH * T * T);
    c.R = s_rand(B * T * c.C, 1.0f);
    c.scratch = s_rand((int)attention_scratch_floats(T, c.C, NH), 100.0f);   /* garbage: must not leak into results */
    c.base.objective = s_attention_obj;
    c.base.backward = s_attention_bwd;
    char shape[64];
    snprintf(shape, sizeof shape, "B=%d T=%d NH=%d hs=%d", B, T, NH, hs);
    s_check_layer(&c.base, &s_attention_stat, shape);
    free(c.base.x[0]); free(c.base.g[0]); free(c.out); free(c.att); free(c.R); free(c.scratch);
}

static void test_attention_backward(void) {
    for (int seed = 1; seed <= 2 * S_SEEDS; seed++) {
        s_rng = 5000 + seed;
        int B = s_randint(1, 3), T = s_randint(1, 7), NH = s_randint(1, 3), hs = s_randint(1, 5);
        s_attention_case(B, T, NH, hs, 1.5f);
    }
    /* longer sequences: several causal row blocks, random subset of elements */
    s_rng = 5100;
    s_attention_case(1, 70, 2, 3, 1.5f);
    s_attention_case(2, 131, 3, 2, 1.5f);
    /* head sizes that take the fast kernels (multiples of 16) */
    s_attention_case(1, 1, 1, 16, 0.5f);
    s_attention_case(2, 5, 2, 16, 0.5f);
    s_attention_case(1, 13, 1, 32, 0.5f);
    s_attention_case(1, 37, 2, 48, 0.4f);
    s_attention_case(1, 70, 1, 16, 0.5f);
    s_print_stat(&s_attention_stat);
}

/* attention_forward against a plain double implementation. */
static void test_attention_forward_ref(void) {
    const int shapes[][4] = {{1, 1, 1, 1}, {2, 5, 2, 3}, {1, 64, 2, 4}, {1, 65, 1, 5}, {2, 130, 3, 3},
                             {1, 1, 1, 16}, {2, 5, 2, 16}, {1, 17, 2, 32}, {1, 64, 2, 32}, {1, 70, 1, 48},
                             {2, 131, 2, 16}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int B = shapes[s][0], T = shapes[s][1], NH = shapes[s][2], hs = shapes[s][3], C = NH * hs;
        s_rng = 600 + s;
        float *qkv = s_rand(B * T * 3 * C, 2.0f);
        float *out = s_rand(B * T * C, 1.0f), *att = s_rand(B * NH * T * T, 1.0f);
        float *scratch = s_rand((int)attention_scratch_floats(T, C, NH), 100.0f);
        attention_forward(out, att, scratch, qkv, B, T, C, NH);
        double *p = malloc((size_t)T * sizeof(double));
        double worst_att = 0.0, worst_out = 0.0;
        int upper_ok = 1;
        for (int b = 0; b < B; b++)
            for (int h = 0; h < NH; h++)
                for (int t = 0; t < T; t++) {
                    const float *q = qkv + (size_t)(b * T + t) * 3 * C + h * hs;
                    double mx = -INFINITY, sum = 0.0;
                    for (int j = 0; j <= t; j++) {
                        const float *k = qkv + (size_t)(b * T + j) * 3 * C + C + h * hs;
                        double d = 0.0;
                        for (int i = 0; i < hs; i++) d += (double)q[i] * k[i];
                        p[j] = d / sqrt((double)hs);
                        if (p[j] > mx) mx = p[j];
                    }
                    for (int j = 0; j <= t; j++) { p[j] = exp(p[j] - mx); sum += p[j]; }
                    const float *arow = att + ((size_t)(b * NH + h) * T + t) * T;
                    for (int j = 0; j <= t; j++) {
                        p[j] /= sum;
                        worst_att = check_worst(worst_att, fabs(arow[j] - p[j]));
                    }
                    for (int j = t + 1; j < T; j++) upper_ok &= arow[j] == 0.0f;
                    for (int i = 0; i < hs; i++) {
                        double o = 0.0;
                        for (int j = 0; j <= t; j++) o += p[j] * qkv[(size_t)(b * T + j) * 3 * C + 2 * C + h * hs + i];
                        worst_out = check_worst(worst_out, fabs(out[(size_t)(b * T + t) * C + h * hs + i] - o));
                    }
                }
        CHECKF(worst_att <= 1e-6, "B=%d T=%d NH=%d hs=%d: att error %.3g", B, T, NH, hs, worst_att);
        CHECKF(worst_out <= 1e-5, "B=%d T=%d NH=%d hs=%d: out error %.3g", B, T, NH, hs, worst_out);
        CHECKF(upper_ok, "B=%d T=%d: att above the diagonal is not 0", B, T);
        free(p); free(qkv); free(out); free(att); free(scratch);
    }
}

/* Changing q, k or v of a later position leaves every earlier output and
 * attention row bit-identical; the later positions do change. */
static void test_attention_causal(void) {
    const int shapes[][4] = {{2, 7, 2, 3}, {1, 100, 3, 4}, {2, 7, 2, 16}, {1, 100, 3, 32}};
    for (size_t s = 0; s < 4; s++) {
        int B = shapes[s][0], T = shapes[s][1], NH = shapes[s][2], hs = shapes[s][3], C = NH * hs;
        s_rng = 700 + s;
        float *qkv = s_rand(B * T * 3 * C, 1.0f);
        float *out1 = s_zeros(B * T * C), *out2 = s_zeros(B * T * C);
        float *att1 = s_zeros(B * NH * T * T), *att2 = s_zeros(B * NH * T * T);
        float *scratch = s_zeros((int)attention_scratch_floats(T, C, NH));
        attention_forward(out1, att1, scratch, qkv, B, T, C, NH);
        for (int t0 = 0; t0 < T; t0 += (T > 10 ? 17 : 1)) {
            float *q2 = malloc((size_t)B * T * 3 * C * sizeof(float));
            memcpy(q2, qkv, (size_t)B * T * 3 * C * sizeof(float));
            int b = t0 % B;
            for (int i = 0; i < 3 * C; i++) q2[(size_t)(b * T + t0) * 3 * C + i] += 5.0f * s_unif() + 1.0f;
            attention_forward(out2, att2, scratch, q2, B, T, C, NH);
            int earlier_same = 1, later_changed = 0;
            for (int t = 0; t < T; t++)
                for (int i = 0; i < C; i++) {
                    float a = out1[(size_t)(b * T + t) * C + i], z = out2[(size_t)(b * T + t) * C + i];
                    if (t < t0) earlier_same &= a == z;
                    else later_changed |= a != z;
                }
            for (int h = 0; h < NH; h++)
                for (int t = 0; t < t0; t++)
                    earlier_same &= memcmp(att1 + ((size_t)(b * NH + h) * T + t) * T,
                                           att2 + ((size_t)(b * NH + h) * T + t) * T,
                                           (size_t)T * sizeof(float)) == 0;
            CHECKF(earlier_same, "T=%d: changing position %d changed an earlier output", T, t0);
            CHECKF(later_changed, "T=%d: changing position %d changed nothing", T, t0);
            free(q2);
        }
        free(qkv); free(out1); free(out2); free(att1); free(att2); free(scratch);
    }
}

/* The fast kernels (hs a multiple of 16) against the reference that runs the
 * same causal blocks through cblas_sgemm: att, out and the accumulated dqkv,
 * on shapes around the kernels' 4-, 8- and 16-wide blocks; and the _heads
 * variants over a split of the (b, h) pairs give the same bits as one call. */
static void test_attention_fast_vs_ref(void) {
    const int shapes[][4] = {{1, 1, 1, 16}, {1, 3, 2, 16}, {2, 9, 1, 32}, {1, 16, 2, 16}, {1, 33, 1, 48},
                             {2, 64, 4, 32}, {1, 77, 2, 64}, {1, 128, 2, 32}, {1, 150, 1, 16}};
    double worst_att = 0, worst_out = 0, worst_d = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int B = shapes[s][0], T = shapes[s][1], NH = shapes[s][2], hs = shapes[s][3], C = NH * hs;
        int nq = B * T * 3 * C, no = B * T * C, na = B * NH * T * T, ns = (int)attention_scratch_floats(T, C, NH);
        s_rng = 1700 + s;
        float *qkv = s_rand(nq, 1.5f), *dout = s_rand(no, 1.0f), *d0 = s_rand(nq, 1.0f);
        float *out_r = s_rand(no, 9.0f), *att_r = s_rand(na, 9.0f), *out_f = s_rand(no, 9.0f), *att_f = s_rand(na, 9.0f);
        float *dq_r = s_zeros(nq), *dq_f = s_zeros(nq), *dq_h = s_zeros(nq);
        float *scr_r = s_rand(T * T, 50.0f), *scr_f = s_rand(ns, 50.0f);
        float *out_h = s_zeros(no), *att_h = s_zeros(na);
        memcpy(dq_r, d0, (size_t)nq * sizeof(float));   /* backward accumulates */
        memcpy(dq_f, d0, (size_t)nq * sizeof(float));
        memcpy(dq_h, d0, (size_t)nq * sizeof(float));
        attention_forward_ref(out_r, att_r, qkv, B, T, C, NH);
        attention_forward(out_f, att_f, scr_f, qkv, B, T, C, NH);
        attention_backward_ref(dq_r, scr_r, dout, qkv, att_r, B, T, C, NH);
        attention_backward(dq_f, scr_f, dout, qkv, att_f, B, T, C, NH);
        for (int i = 0; i < na; i++) worst_att = check_worst(worst_att, fabs(att_f[i] - att_r[i]));
        for (int i = 0; i < no; i++) worst_out = check_worst(worst_out, fabs(out_f[i] - out_r[i]));
        double dw = 0;
        for (int i = 0; i < nq; i++) dw = check_worst(dw, fabs(dq_f[i] - dq_r[i]) / fmax(1.0, fabs(dq_r[i])));
        worst_d = check_worst(worst_d, dw);
        int zero_above = 1;
        for (int bh = 0; bh < B * NH; bh++)
            for (int t = 0; t < T; t++)
                for (int j = t + 1; j < T; j++) zero_above &= att_f[((size_t)bh * T + t) * T + j] == 0.0f;
        CHECKF(zero_above, "B=%d T=%d NH=%d hs=%d: att above the diagonal is not 0", B, T, NH, hs);
        /* the pairs in two unequal parts, in reverse order */
        int cut = (B * NH) / 3;
        attention_forward_heads(out_h, att_h, scr_f, qkv, B, T, C, NH, cut, B * NH);
        attention_forward_heads(out_h, att_h, scr_f, qkv, B, T, C, NH, 0, cut);
        attention_backward_heads(dq_h, scr_f, dout, qkv, att_h, B, T, C, NH, cut, B * NH, 1);
        attention_backward_heads(dq_h, scr_f, dout, qkv, att_h, B, T, C, NH, 0, cut, 1);
        CHECKF(memcmp(out_h, out_f, (size_t)no * sizeof(float)) == 0 && memcmp(att_h, att_f, (size_t)na * sizeof(float)) == 0
               && memcmp(dq_h, dq_f, (size_t)nq * sizeof(float)) == 0, "B=%d T=%d NH=%d hs=%d: _heads differ", B, T, NH, hs);
        /* accumulate 0 writes: over garbage, the same bits as accumulating into zeros */
        float *dq_w = s_rand(nq, 7.0f), *dq_z = s_zeros(nq);
        attention_backward_heads(dq_w, scr_f, dout, qkv, att_f, B, T, C, NH, 0, B * NH, 0);
        attention_backward(dq_z, scr_f, dout, qkv, att_f, B, T, C, NH);
        CHECKF(memcmp(dq_w, dq_z, (size_t)nq * sizeof(float)) == 0, "B=%d T=%d NH=%d hs=%d: written dqkv differs", B, T, NH, hs);
        free(dq_w); free(dq_z);
        free(qkv); free(dout); free(d0); free(out_r); free(att_r); free(out_f); free(att_f);
        free(dq_r); free(dq_f); free(dq_h); free(scr_r); free(scr_f); free(out_h); free(att_h);
    }
    printf("  # fast vs reference (fast kernels %s in this build): max |att| diff %.3g, max |out| diff %.3g, "
           "max dqkv rel diff %.3g\n", attention_fast(32, 1) ? "on" : "off", worst_att, worst_out, worst_d);
    CHECKF(worst_att <= 1e-6 && worst_out <= 1e-5 && worst_d <= 1e-4, "fast attention differs from the reference");
    /* accumulate 0 on the reference path too (head size 3) */
    int B = 2, T = 21, NH = 2, C = 6, nq = B * T * 3 * C;
    float *qkv = s_rand(nq, 1.0f), *dout = s_rand(B * T * C, 1.0f), *out = s_zeros(B * T * C);
    float *att = s_zeros(B * NH * T * T), *scr = s_zeros((int)attention_scratch_floats(T, C, NH));
    float *dq_w = s_rand(nq, 7.0f), *dq_z = s_zeros(nq);
    attention_forward(out, att, scr, qkv, B, T, C, NH);
    attention_backward_heads(dq_w, scr, dout, qkv, att, B, T, C, NH, 0, B * NH, 0);
    attention_backward(dq_z, scr, dout, qkv, att, B, T, C, NH);
    CHECKF(memcmp(dq_w, dq_z, (size_t)nq * sizeof(float)) == 0, "reference path: written dqkv differs");
    free(qkv); free(dout); free(out); free(att); free(scr); free(dq_w); free(dq_z);
}

/* The kernels picked by instruction level (BRIGADE_CPU): gelu's AVX2 and
 * AVX-512 copies give the bits of the plain C loop at every level this CPU
 * runs; with the fast paths off (generic) attention is its reference, bit
 * for bit, whatever the head size. */
static void test_engine_every_level(void) {
    const int N = 4099;
    s_rng = 4242;
    float *x = s_rand(N, 6.0f), *dout = s_rand(N, 1.0f), *acc0 = s_rand(N, 1.0f);
    float *y_want = s_zeros(N), *g_want = s_zeros(N), *b_want = s_zeros(N);
    float *y = s_zeros(N), *g = s_zeros(N), *b = s_zeros(N);
    x[7] = 0.0f; x[8] = -100.0f; x[9] = 100.0f; x[10] = 1e-30f;   /* edges of the exp clamp */
    setenv("BRIGADE_CPU", "generic", 1);
    memcpy(g_want, x, N * sizeof(float));
    gelu_forward_grad(y_want, g_want, N);
    memcpy(b_want, acc0, N * sizeof(float));
    gelu_backward(b_want, x, dout, N);
    for (int l = CPU_SSE41; l <= (int)cpu_hw_level(); l++) {
        setenv("BRIGADE_CPU", cpu_level_name((cpu_level_t)l), 1);
        for (int n = N; n >= N - 9; n -= 3) {   /* tails of every length mod 8 */
            memcpy(g, x, N * sizeof(float));
            memcpy(b, acc0, N * sizeof(float));
            gelu_forward_grad(y, g, n);
            gelu_backward(b, x, dout, n);
            CHECKF(memcmp(y, y_want, (size_t)n * sizeof(float)) == 0 && memcmp(g, g_want, (size_t)n * sizeof(float)) == 0,
                   "level %s n %d: gelu_forward_grad differs from generic", cpu_level_name((cpu_level_t)l), n);
            CHECKF(memcmp(b, b_want, (size_t)n * sizeof(float)) == 0,
                   "level %s n %d: gelu_backward differs from generic", cpu_level_name((cpu_level_t)l), n);
        }
    }
    free(x); free(dout); free(acc0); free(y_want); free(g_want); free(b_want); free(y); free(g); free(b);

    setenv("BRIGADE_CPU", "generic", 1);
    CHECK(!attention_fast(64, 2));
    const int B = 2, T = 37, NH = 2, hs = 32, C = NH * hs, nq = B * T * 3 * C, no = B * T * C, na = B * NH * T * T;
    float *qkv = s_rand(nq, 1.5f), *d_out = s_rand(no, 1.0f);
    float *out_r = s_zeros(no), *att_r = s_zeros(na), *out_g = s_zeros(no), *att_g = s_zeros(na);
    float *dq_r = s_zeros(nq), *dq_g = s_zeros(nq);
    float *scr = s_rand((int)attention_scratch_floats(T, C, NH), 50.0f), *scr_r = s_zeros(T * T);
    attention_forward_ref(out_r, att_r, qkv, B, T, C, NH);
    attention_backward_ref(dq_r, scr_r, d_out, qkv, att_r, B, T, C, NH);
    attention_forward(out_g, att_g, scr, qkv, B, T, C, NH);
    attention_backward(dq_g, scr, d_out, qkv, att_g, B, T, C, NH);
    CHECKF(memcmp(out_g, out_r, (size_t)no * sizeof(float)) == 0 && memcmp(att_g, att_r, (size_t)na * sizeof(float)) == 0
           && memcmp(dq_g, dq_r, (size_t)nq * sizeof(float)) == 0, "BRIGADE_CPU=generic: attention is not its reference");
    unsetenv("BRIGADE_CPU");
    CHECK(attention_fast(64, 2) == (cpu_hw_level() >= CPU_AVX512));
    free(qkv); free(d_out); free(out_r); free(att_r); free(out_g); free(att_g); free(dq_r); free(dq_g);
    free(scr); free(scr_r);
}

/* ---------------------------------------------------------------------------
 * Cross-entropy.  L = scale * sum(losses), whose gradient is what
 * crossentropy_backward accumulates. */

typedef struct {
    layer_case_t base;
    float *losses, *probs;
    int *targets;
    int N, V;
    float scale;
} ce_case_t;

static double s_ce_obj(layer_case_t *self) {
    ce_case_t *c = (ce_case_t *)self;
    crossentropy_forward(c->losses, c->probs, c->base.x[0], c->targets, c->N, c->V);
    double s = 0.0;
    for (int n = 0; n < c->N; n++) s += c->losses[n];
    return c->scale * s;
}

static void s_ce_bwd(layer_case_t *self) {
    ce_case_t *c = (ce_case_t *)self;
    crossentropy_backward(c->base.g[0], c->probs, c->targets, c->scale, c->N, c->V);
}

static fd_stat_t s_ce_stat = {"crossentropy", 1e-2, 5e-3, 1e-4, 0, 0, 0};

static void test_crossentropy_backward(void) {
    for (int seed = 1; seed <= S_SEEDS; seed++) {
        s_rng = 6000 + seed;
        ce_case_t c = {0};
        c.N = s_randint(1, 3) * s_randint(1, 7);
        c.V = s_randint(2, 23);
        c.scale = (0.2f + 0.5f * (s_unif() + 1.0f)) / (float)c.N;
        c.targets = malloc((size_t)c.N * sizeof(int));
        for (int n = 0; n < c.N; n++) c.targets[n] = s_randint(0, c.V - 1);
        c.base.ntensors = 1;
        c.base.x[0] = s_rand(c.N * c.V, 3.0f);
        c.base.g[0] = s_zeros(c.N * c.V);
        c.base.n[0] = c.N * c.V;
        c.base.xname[0] = "logits";
        c.losses = s_zeros(c.N);
        c.probs = s_zeros(c.N * c.V);
        c.base.objective = s_ce_obj;
        c.base.backward = s_ce_bwd;
        char shape[32];
        snprintf(shape, sizeof shape, "N=%d V=%d", c.N, c.V);
        s_check_layer(&c.base, &s_ce_stat, shape);
        free(c.targets); free(c.base.x[0]); free(c.base.g[0]); free(c.losses); free(c.probs);
    }
    s_print_stat(&s_ce_stat);
}

/* losses, probs and the mean against a double log-sum-exp, including logits
 * far from 0 (stability) and targets of probability ~0 (loss up to ~1300). */
static void test_crossentropy_forward_ref(void) {
    const int Vs[] = {1, 2, 7, 9, 10, 33, 256};
    for (size_t s = 0; s < sizeof Vs / sizeof Vs[0]; s++) {
        int N = 6, V = Vs[s];
        s_rng = 900 + s;
        float *logits = s_rand(N * V, 4.0f), *probs = s_zeros(N * V), *losses = s_zeros(N);
        int *targets = malloc(N * sizeof(int));
        for (int n = 0; n < N; n++) targets[n] = s_randint(0, V - 1);
        for (int i = 0; i < V; i++) logits[1 * V + i] += 1000.0f;     /* row 1: large */
        for (int i = 0; i < V; i++) logits[2 * V + i] -= 1000.0f;     /* row 2: very negative */
        logits[3 * V + V - 1] = 300.0f;                               /* rows 3, 4: dominant logits */
        if (V > 1) logits[3 * V + V - 2] = 299.0f;
        logits[4 * V + V / 2] = 300.0f;
        float mean = crossentropy_forward(losses, probs, logits, targets, N, V);
        double total = 0.0;
        for (int n = 0; n < N; n++) {
            const float *x = logits + n * V;
            double mx = -INFINITY, sum = 0.0, psum = 0.0;
            for (int i = 0; i < V; i++) mx = fmax(mx, x[i]);
            for (int i = 0; i < V; i++) sum += exp(x[i] - mx);
            for (int i = 0; i < V; i++) {
                double p = exp(x[i] - mx) / sum;
                CHECK_NEAR(probs[n * V + i], p, 2e-6);
                psum += probs[n * V + i];
            }
            CHECK_NEAR(psum, 1.0, 1e-5);
            double ref = log(sum) - (x[targets[n]] - mx);
            CHECK_NEAR(losses[n], ref, 1e-5);
            total += losses[n];
        }
        CHECK_NEAR(mean, total / N, 1e-6);
        free(logits); free(probs); free(losses); free(targets);
    }
}

/* A target far below the other logits: the true loss per position is above
 * 100 (p[target] underflows float), and is reported exactly, not capped near
 * -log(FLT_MIN) = 87.3; past the float range the loss is +inf, so a
 * "loss is not finite" check can see a diverged model. */
static void test_crossentropy_large_loss(void) {
    float logits[4] = {200.0f, -200.0f, 0.0f, 150.0f}, probs[4], loss;
    int target = 1;
    float mean = crossentropy_forward(&loss, probs, logits, &target, 1, 4);
    double ref = 200.0 + log(1.0 + exp(-200.0) + exp(-50.0)) + 200.0;   /* 400 */
    CHECKF(fabs(loss - ref) <= 1e-6 * ref, "loss %.9g, want %.9g", loss, ref);
    CHECK(mean == loss);
    /* many positions, each with a loss in (100, 1000): the mean is their mean */
    enum { N = 37, V = 256 };
    float *lg = s_zeros(N * V), *pr = s_zeros(N * V), *ls = s_zeros(N);
    int tg[N];
    double total = 0.0;
    s_rng = 4242;
    for (int n = 0; n < N; n++) {
        for (int i = 0; i < V; i++) lg[n * V + i] = 3.0f * s_unif();
        tg[n] = s_randint(0, V - 1);
        float gap = 100.0f + 900.0f * (s_unif() + 1.0f) / 2.0f;
        lg[n * V + tg[n]] = -gap;
        double mx = -INFINITY, sum = 0.0;
        for (int i = 0; i < V; i++) mx = fmax(mx, lg[n * V + i]);
        for (int i = 0; i < V; i++) sum += exp((double)lg[n * V + i] - mx);
        total += mx + log(sum) - lg[n * V + tg[n]];
    }
    mean = crossentropy_forward(ls, pr, lg, tg, N, V);
    for (int n = 0; n < N; n++) CHECKF(ls[n] > 100.0f, "position %d: loss %g", n, ls[n]);
    CHECKF(fabs(mean - total / N) <= 1e-6 * (total / N), "mean %.9g, want %.9g", mean, total / N);
    free(lg); free(pr); free(ls);
    /* beyond the float range: +inf, not a capped finite number */
    float huge[2] = {3e38f, -3e38f};
    mean = crossentropy_forward(&loss, probs, huge, &target, 1, 2);
    CHECK(isinf(loss) && loss > 0.0f);
    CHECK(!isfinite(mean));
    /* a NaN logit: NaN loss */
    float withnan[3] = {1.0f, NAN, 2.0f};
    target = 2;
    mean = crossentropy_forward(&loss, probs, withnan, &target, 1, 3);
    CHECK(isnan(loss) && isnan(mean));
}

int main(void) {
    RUN(test_linear_forward_naive);
    RUN(test_linear_backward);
    RUN(test_linear_backward_nulls);
    RUN(test_linear_backward_parts);
    RUN(test_embedding_backward);
    RUN(test_layernorm_forward_ref);
    RUN(test_layernorm_backward);
    RUN(test_split_row_blocks);
    RUN(test_linear_backward_times);
    RUN(test_split_unequal_cuts);
    RUN(test_layernorm_every_level);
    RUN(test_gelu_forward_ref);
    RUN(test_gelu_backward);
    RUN(test_gelu_grad_pair);
    RUN(test_bias_passes);
    RUN(test_linear_fused_forwards);
    RUN(test_relu_forward_exact);
    RUN(test_relu_backward);
    RUN(test_residual_backward);
    RUN(test_eltwise_inplace);
    RUN(test_attention_forward_ref);
    RUN(test_attention_backward);
    RUN(test_attention_causal);
    RUN(test_attention_fast_vs_ref);
    RUN(test_engine_every_level);
    RUN(test_crossentropy_forward_ref);
    RUN(test_crossentropy_large_loss);
    RUN(test_crossentropy_backward);
    CHECK_EXIT();
}
