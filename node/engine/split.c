/* split.c: layer kernels shared among a team's threads (split.h). */
#include "node/engine/split.h"
#include "node/engine/attention.h"
#include "node/engine/gemm.h"
#include "node/engine/layers.h"

#include <assert.h>
#include <string.h>

/* [*a, *b): part i of `parts` of [0, n), boundaries on multiples of align
 * (the last part takes the rest). */
static void s_part(int n, int parts, int i, int align, int *a, int *b)
{
    long long lo = (long long)n * i / parts, hi = (long long)n * (i + 1) / parts;
    lo = lo / align * align;
    hi = i + 1 == parts ? n : hi / align * align;
    *a = (int)lo;
    *b = (int)(hi > lo ? hi : lo);
}

/* The team whose shares cut a loop of `parts` parts (s_cut), or NULL to cut
 * it in equal parts: the shares need one part per worker, and a cut that
 * changes no bits (exact): every loop here but a product's rows when
 * cblas_sgemm runs it (see split.h). */
static const team_t *s_shares(const team_t *team, int parts, int exact)
{
    return exact && parts == team_size(team) ? team : NULL;
}

/* Part i of a loop made by s_run: cut by shares' shares, or in equal parts. */
static void s_cut(const team_t *shares, int n, int parts, int i, int align, int *a, int *b)
{
    if (shares) team_part(shares, n, align, i, a, b);
    else s_part(n, parts, i, align, a, b);
}

/* Runs a loop: with shares, one part per worker (team_run_parts), else
 * `tasks` tasks handed to whichever worker is free. */
static void s_run(team_t *team, const team_t *shares, int tasks, team_fn fn, void *ctx)
{
    if (shares) team_run_parts(team, fn, ctx);
    else team_run(team, tasks, fn, ctx);
}

/* Parts for row-wise loops and heads: one per worker, the rows the
 * products' row parts give the same worker, so that a worker mostly reads
 * rows it wrote (with four parts per worker, for balance, these loops ran
 * about as fast on 2 threads as on 1 on a 2-core virtual machine). */
static int s_parts(const team_t *team, int n, int min_per_part)
{
    int p = team_size(team);
    if (min_per_part > 0 && n / min_per_part < p) p = n / min_per_part;
    return p < 1 ? 1 : p;
}

/* ---------------------------------------------------------------------------
 * Linear. */

typedef struct {
    float *out, *dinp, *dweight, *dbias, *xg;
    const float *inp, *weight, *bias, *dout, *res, *grad;
    const team_t *shares;
    int N, C, OC, parts, accumulate;
} s_linear_t;

/* Rows [a, b) of a linear forward: with xg, linear_bias_gelu_forward_grad;
 * with res, linear_bias_residual_forward; else linear_forward. */
static void s_linear_fwd_rows(const s_linear_t *x, int a, int b)
{
    size_t o = (size_t)a * x->OC;
    const float *inp = x->inp + (size_t)a * x->C;
    if (x->xg) linear_bias_gelu_forward_grad(x->out + o, x->xg + o, inp, x->weight, x->bias, b - a, x->C, x->OC);
    else if (x->res) linear_bias_residual_forward(x->out + o, inp, x->weight, x->bias, x->res + o, b - a, x->C, x->OC);
    else linear_forward(x->out + o, inp, x->weight, x->bias, b - a, x->C, x->OC);
}

static void s_linear_fwd_task(void *arg, int i, int worker)
{
    const s_linear_t *x = arg;
    int a, b;
    (void)worker;
    s_cut(x->shares, x->N, x->parts, i, 16, &a, &b);
    s_linear_fwd_rows(x, a, b);
}

static void s_linear_fwd(team_t *team, s_linear_t *x)
{
    if (!team) { s_linear_fwd_rows(x, 0, x->N); return; }
    x->parts = team_size(team);
    x->shares = s_shares(team, x->parts, gemm_fast());
    s_run(team, x->shares, x->parts, s_linear_fwd_task, x);
}

void split_linear_forward(team_t *team, float *out, const float *inp, const float *weight,
                          const float *bias, int N, int C, int OC)
{
    s_linear_t x = {.out = out, .inp = inp, .weight = weight, .bias = bias, .N = N, .C = C, .OC = OC};
    s_linear_fwd(team, &x);
}

void split_linear_bias_residual_forward(team_t *team, float *out, const float *inp, const float *weight,
                                        const float *bias, const float *res, int N, int C, int OC)
{
    s_linear_t x = {.out = out, .inp = inp, .weight = weight, .bias = bias, .res = res, .N = N, .C = C, .OC = OC};
    s_linear_fwd(team, &x);
}

void split_linear_bias_gelu_forward_grad(team_t *team, float *out, float *xg, const float *inp,
                                         const float *weight, const float *bias, int N, int C, int OC)
{
    s_linear_t x = {.out = out, .xg = xg, .inp = inp, .weight = weight, .bias = bias, .N = N, .C = C, .OC = OC};
    s_linear_fwd(team, &x);
}

/* Rows [a, b) of dinp: times grad when there is one */
static void s_linear_bwd_rows(const s_linear_t *x, int a, int b)
{
    size_t o = (size_t)a * x->C;
    const float *dout = x->dout + (size_t)a * x->OC;
    if (x->grad) linear_backward_input_times(x->dinp + o, dout, x->weight, x->grad + o, b - a, x->C, x->OC);
    else linear_backward_input(x->dinp + o, dout, x->weight, b - a, x->C, x->OC, x->accumulate);
}

/* Part i of dinp's rows (when there is one), then of dweight's and dbias's
 * output channels (when there is one). */
static void s_linear_bwd_part(const s_linear_t *x, int i, int dinp, int dweight)
{
    int a, b;
    if (dinp) {
        s_cut(x->shares, x->N, x->parts, i, 16, &a, &b);
        s_linear_bwd_rows(x, a, b);
    }
    if (dweight) {
        s_cut(x->shares, x->OC, x->parts, i, 16, &a, &b);
        linear_backward_params(x->dweight, x->dbias, x->dout, x->inp, x->N, x->C, x->OC, a, b);
    }
}

/* With shares, task i is worker i's part of both gradients; else tasks
 * [0, parts) are the parts of dinp (when there is one), the next parts
 * those of dweight (when there is one). */
static void s_linear_bwd_task(void *arg, int i, int worker)
{
    const s_linear_t *x = arg;
    (void)worker;
    if (x->shares) s_linear_bwd_part(x, i, x->dinp != NULL, x->dweight != NULL);
    else if (x->dinp && i < x->parts) s_linear_bwd_part(x, i, 1, 0);
    else s_linear_bwd_part(x, x->dinp ? i - x->parts : i, 0, 1);
}

static void s_linear_bwd(team_t *team, s_linear_t *x)
{
    if (!team) {
        if (x->dinp) s_linear_bwd_rows(x, 0, x->N);
        if (x->dweight) linear_backward_params(x->dweight, x->dbias, x->dout, x->inp, x->N, x->C, x->OC, 0, x->OC);
        return;
    }
    x->parts = team_size(team);
    x->shares = s_shares(team, x->parts, gemm_fast());
    s_run(team, x->shares, ((x->dinp ? 1 : 0) + (x->dweight ? 1 : 0)) * x->parts, s_linear_bwd_task, x);
}

void split_linear_backward(team_t *team, float *dinp, float *dweight, float *dbias, const float *dout,
                           const float *inp, const float *weight, int N, int C, int OC, int accumulate)
{
    s_linear_t x = {.dinp = dinp, .dweight = dweight, .dbias = dbias, .dout = dout, .inp = inp,
                    .weight = weight, .N = N, .C = C, .OC = OC, .accumulate = accumulate};
    s_linear_bwd(team, &x);
}

void split_linear_backward_times(team_t *team, float *dinp, float *dweight, float *dbias, const float *dout,
                                 const float *inp, const float *weight, const float *grad, int N, int C, int OC)
{
    s_linear_t x = {.dinp = dinp, .dweight = dweight, .dbias = dbias, .dout = dout, .inp = inp,
                    .weight = weight, .grad = grad, .N = N, .C = C, .OC = OC};
    s_linear_bwd(team, &x);
}

/* ---------------------------------------------------------------------------
 * Layernorm. */

typedef struct {
    float *out, *mean, *rstd, *dinp;
    const float *inp, *weight, *bias, *dout, *cmean, *crstd;
    const team_t *shares;
    int N, C, parts;
} s_ln_t;

static void s_ln_fwd_task(void *arg, int i, int worker)
{
    const s_ln_t *x = arg;
    int a, b;
    (void)worker;
    s_cut(x->shares, x->N, x->parts, i, 1, &a, &b);
    layernorm_forward(x->out + (size_t)a * x->C, x->mean + a, x->rstd + a, x->inp + (size_t)a * x->C,
                      x->weight, x->bias, b - a, x->C);
}

void split_layernorm_forward(team_t *team, float *out, float *mean, float *rstd, const float *inp,
                             const float *weight, const float *bias, int N, int C)
{
    if (!team) { layernorm_forward(out, mean, rstd, inp, weight, bias, N, C); return; }
    s_ln_t x = {.out = out, .mean = mean, .rstd = rstd, .inp = inp, .weight = weight, .bias = bias,
                .N = N, .C = C, .parts = s_parts(team, N, 16)};
    x.shares = s_shares(team, x.parts, 1);
    s_run(team, x.shares, x.parts, s_ln_fwd_task, &x);
}

static void s_ln_apply_task(void *arg, int i, int worker)
{
    const s_ln_t *x = arg;
    int a, b;
    (void)worker;
    s_cut(x->shares, x->N, x->parts, i, 1, &a, &b);
    layernorm_apply(x->out + (size_t)a * x->C, x->inp + (size_t)a * x->C, x->cmean + a, x->crstd + a,
                    x->weight, x->bias, b - a, x->C);
}

void split_layernorm_apply(team_t *team, float *out, const float *inp, const float *mean, const float *rstd,
                           const float *weight, const float *bias, int N, int C)
{
    if (!team) { layernorm_apply(out, inp, mean, rstd, weight, bias, N, C); return; }
    s_ln_t x = {.out = out, .inp = inp, .cmean = mean, .crstd = rstd, .weight = weight, .bias = bias,
                .N = N, .C = C, .parts = s_parts(team, N, 16)};
    x.shares = s_shares(team, x.parts, 1);
    s_run(team, x.shares, x.parts, s_ln_apply_task, &x);
}

/* ---------------------------------------------------------------------------
 * A parameter gradient summed over rows by blocks (split.h): block k covers
 * rows [k SPLIT_ROWS, (k + 1) SPLIT_ROWS) of N; fn adds the terms of rows
 * [n0, n1) into that block's width floats of part, zeroed before. */

typedef void (*s_block_fn)(const void *ctx, float *part, int n0, int n1);

typedef struct {
    s_block_fn fn;
    const void *ctx;
    float *part;
    const team_t *shares;
    int N, width, parts;
} s_rows_t;

/* Task i: the blocks of part i. */
static void s_rows_task(void *arg, int i, int worker)
{
    const s_rows_t *r = arg;
    int k0, k1;
    (void)worker;
    s_cut(r->shares, split_blocks(r->N), r->parts, i, 1, &k0, &k1);
    for (int k = k0; k < k1; k++) {
        float *p = r->part + (size_t)k * r->width;
        int n0 = k * SPLIT_ROWS, n1 = n0 + SPLIT_ROWS < r->N ? n0 + SPLIT_ROWS : r->N;
        memset(p, 0, sizeof(float) * (size_t)r->width);
        r->fn(r->ctx, p, n0, n1);
    }
}

/* Runs fn over every block of N rows, one part of the blocks per worker;
 * returns the number of blocks, whose sums are then in part. */
static int s_rows_run(team_t *team, s_block_fn fn, const void *ctx, float *part, int N, int width)
{
    s_rows_t r = {.fn = fn, .ctx = ctx, .part = part, .N = N, .width = width, .parts = team_size(team)};
    if (r.parts > split_blocks(N)) r.parts = split_blocks(N);
    r.shares = s_shares(team, r.parts, 1);
    s_run(team, r.shares, r.parts, s_rows_task, &r);
    return split_blocks(N);
}

/* dst[j] += part[k * stride + j] for every block k in order, j in [0, n). */
static void s_add_blocks(float *dst, const float *part, int nblocks, size_t stride, int n)
{
    for (int k = 0; k < nblocks; k++)
        for (int j = 0; j < n; j++) dst[j] += part[(size_t)k * stride + j];
}

/* Rows [n0, n1) of the layernorm backward: dinp added to, the dweight and
 * dbias terms into part[0, C) and part[C, 2C). */
static void s_ln_bwd_block(const void *ctx, float *part, int n0, int n1)
{
    const s_ln_t *x = ctx;
    size_t o = (size_t)n0 * x->C;
    layernorm_backward(x->dinp + o, part, part + x->C, x->dout + o, x->inp + o, x->weight, x->cmean + n0,
                       x->crstd + n0, n1 - n0, x->C);
}

void split_layernorm_backward(team_t *team, float *dinp, float *dweight, float *dbias, float *part,
                              const float *dout, const float *inp, const float *weight, const float *mean,
                              const float *rstd, int N, int C)
{
    if (N <= 0) return;
    s_ln_t x = {.dinp = dinp, .dout = dout, .inp = inp, .weight = weight, .cmean = mean, .crstd = rstd,
                .N = N, .C = C};
    int nb = s_rows_run(team, s_ln_bwd_block, &x, part, N, 2 * C);
    s_add_blocks(dweight, part, nb, 2 * (size_t)C, C);
    s_add_blocks(dbias, part + C, nb, 2 * (size_t)C, C);
}

/* ---------------------------------------------------------------------------
 * A bias gradient by row blocks. */

/* Rows [n0, n1) of a bias gradient: their column sums into part. */
static void s_bias_bwd_block(const void *ctx, float *part, int n0, int n1)
{
    const s_linear_t *x = ctx;
    bias_backward(part, x->dout + (size_t)n0 * x->OC, n1 - n0, x->OC);
}

void split_bias_backward(team_t *team, float *dbias, float *part, const float *d, int N, int OC)
{
    if (N <= 0) return;
    s_linear_t x = {.dout = d, .OC = OC};
    int nb = s_rows_run(team, s_bias_bwd_block, &x, part, N, OC);
    s_add_blocks(dbias, part, nb, (size_t)OC, OC);
}

/* ---------------------------------------------------------------------------
 * Attention: one task per worker, a run of consecutive (b, h) pairs, so that
 * a worker takes the sequences whose rows the products' row parts gave it,
 * and each head but a task's last has its next head's rows prefetched
 * (attention.c); heads are independent, so the cut changes no bits. */

typedef struct {
    float *out, *att, *dqkv, *scratch;
    const float *qkv, *catt, *dout;
    const team_t *shares;
    size_t stride;
    int B, T, C, NH, parts, accumulate;
} s_att_t;

static void s_att_fwd_task(void *arg, int i, int worker)
{
    const s_att_t *x = arg;
    int bh0, bh1;
    s_cut(x->shares, x->B * x->NH, x->parts, i, 1, &bh0, &bh1);
    attention_forward_heads(x->out, x->att, x->scratch + (size_t)worker * x->stride, x->qkv,
                            x->B, x->T, x->C, x->NH, bh0, bh1);
}

static void s_att_bwd_task(void *arg, int i, int worker)
{
    const s_att_t *x = arg;
    int bh0, bh1;
    s_cut(x->shares, x->B * x->NH, x->parts, i, 1, &bh0, &bh1);
    attention_backward_heads(x->dqkv, x->scratch + (size_t)worker * x->stride, x->dout, x->qkv, x->catt,
                             x->B, x->T, x->C, x->NH, bh0, bh1, x->accumulate);
}

void split_attention_forward(team_t *team, float *out, float *att, float *scratch, size_t stride,
                             const float *qkv, int B, int T, int C, int NH)
{
    if (!team) { attention_forward(out, att, scratch, qkv, B, T, C, NH); return; }
    assert(stride >= attention_scratch_floats(T, C, NH));
    s_att_t x = {.out = out, .att = att, .scratch = scratch, .qkv = qkv, .stride = stride,
                 .B = B, .T = T, .C = C, .NH = NH, .parts = s_parts(team, B * NH, 1)};
    x.shares = s_shares(team, x.parts, 1);
    s_run(team, x.shares, x.parts, s_att_fwd_task, &x);
}

void split_attention_backward(team_t *team, float *dqkv, float *scratch, size_t stride, const float *dout,
                              const float *qkv, const float *att, int B, int T, int C, int NH,
                              int accumulate)
{
    if (!team) {
        attention_backward_heads(dqkv, scratch, dout, qkv, att, B, T, C, NH, 0, B * NH, accumulate);
        return;
    }
    assert(stride >= attention_scratch_floats(T, C, NH));
    s_att_t x = {.dqkv = dqkv, .scratch = scratch, .dout = dout, .qkv = qkv, .catt = att, .stride = stride,
                 .B = B, .T = T, .C = C, .NH = NH, .parts = s_parts(team, B * NH, 1), .accumulate = accumulate};
    x.shares = s_shares(team, x.parts, 1);
    s_run(team, x.shares, x.parts, s_att_bwd_task, &x);
}

/* ---------------------------------------------------------------------------
 * Cross-entropy: rows. */

typedef struct {
    float *losses, *probs, *dlogits;
    const float *logits, *cprobs;
    const int *targets;
    const team_t *shares;
    float scale;
    int N, V, parts;
} s_ce_t;

static void s_ce_fwd_task(void *arg, int i, int worker)
{
    const s_ce_t *x = arg;
    int a, b;
    (void)worker;
    s_cut(x->shares, x->N, x->parts, i, 1, &a, &b);
    crossentropy_forward(x->losses + a, x->probs + (size_t)a * x->V, x->logits + (size_t)a * x->V,
                         x->targets + a, b - a, x->V);
}

float split_crossentropy_forward(team_t *team, float *losses, float *probs, const float *logits,
                                 const int *targets, int N, int V)
{
    if (!team) return crossentropy_forward(losses, probs, logits, targets, N, V);
    s_ce_t x = {.losses = losses, .probs = probs, .logits = logits, .targets = targets, .N = N, .V = V,
                .parts = s_parts(team, N, 16)};
    x.shares = s_shares(team, x.parts, 1);
    s_run(team, x.shares, x.parts, s_ce_fwd_task, &x);
    double total = 0.0;   /* as crossentropy_forward sums: in double, in row order */
    for (int n = 0; n < N; n++) total += losses[n];
    return N > 0 ? (float)(total / N) : 0.0f;
}

static void s_ce_bwd_task(void *arg, int i, int worker)
{
    const s_ce_t *x = arg;
    int a, b;
    (void)worker;
    s_cut(x->shares, x->N, x->parts, i, 1, &a, &b);
    crossentropy_backward(x->dlogits + (size_t)a * x->V, x->cprobs + (size_t)a * x->V, x->targets + a,
                          x->scale, b - a, x->V);
}

void split_crossentropy_backward(team_t *team, float *dlogits, const float *probs, const int *targets,
                                 float scale, int N, int V)
{
    if (!team) { crossentropy_backward(dlogits, probs, targets, scale, N, V); return; }
    s_ce_t x = {.dlogits = dlogits, .cprobs = probs, .targets = targets, .scale = scale, .N = N, .V = V,
                .parts = s_parts(team, N, 16)};
    x.shares = s_shares(team, x.parts, 1);
    s_run(team, x.shares, x.parts, s_ce_bwd_task, &x);
}
