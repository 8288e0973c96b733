/* layers.c: forward/backward kernels of brigade's models (see layers.h).
 *
 * Matrix products go through gemm() (gemm.h).  The element-wise and row-wise
 * kernels use the vectorizable helpers of vecmath.h.
 *
 * Outputs never alias inputs (the pointers are restrict-qualified), except
 * in the element-wise forwards gelu, relu and residual, which may also run
 * exactly in place (out == inp, out == a or out == b; no partial overlap).
 */
#include "node/engine/layers.h"
#include "node/engine/gemm.h"
#include "node/engine/vecmath.h"

#include <assert.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define S_GELU_K 0.7978845608028654f     /* sqrt(2/pi) */
#define S_GELU_C 0.044715f

/* gelu(x) = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3).  Since
 * 0.5 (1 + tanh(u)) = sigmoid(2u) = 1 / (1 + e^-2u), it is computed as
 * x * sigmoid(2u), which has no cancellation in the negative tail.  The
 * sigmoid is one division, shared with the derivative in s_gelu_both (a
 * vector division costs more than the rest of the element). */
static inline float s_gelu(float x) {
    float u = S_GELU_K * (x + S_GELU_C * x * x * x);
    float s = 1.0f / (1.0f + s_expf(-2.0f * u));
    return x * s;
}

/* gelu'(x) = s + 2 x s (1 - s) u', s = sigmoid(2u).  For |u| > 40 the second
 * term is below 1e-30 * |x|^3 and is taken as 0 (s_expf is clamped there). */
static inline float s_gelu_grad(float x) {
    float u = S_GELU_K * (x + S_GELU_C * x * x * x);
    float e = s_expf(-2.0f * u);
    float s = 1.0f / (1.0f + e);
    float sp = s_select(fabsf(u) > 40.0f, 0.0f, e * s * s);     /* s (1 - s) */
    return s + 2.0f * x * sp * S_GELU_K * (1.0f + 3.0f * S_GELU_C * x * x);
}

/* ---------------------------------------------------------------------------
 * Linear. */

/* What the linear forwards do to each finished block of their product
 * (gemm_epi), with the block's rows and columns of every operand. */
typedef struct {
    const float *bias;   /* (OC) */
    const float *res;    /* (N,OC), rows OC apart: s_epi_bias_residual */
    float *out;          /* (N,OC): s_epi_bias_gelu's gelu */
} s_epi_t;

/* the passes on a product's blocks are defined with the element-wise layers below */
static void s_epi_bias(void *ctx, float *c, int ldc, int rows, int cols, int i0, int j0);

/* out (N,OC) = inp (N,C) @ weight^T (OC,C), then epi on its blocks; C == 0:
 * out = 0, then epi on all of it. */
static void s_linear_epi(float *restrict out, const float *restrict inp, const float *restrict weight,
                         int N, int C, int OC, gemm_epi_fn epi, s_epi_t *ctx) {
    assert(N >= 0 && C >= 0 && OC >= 0);
    if (N == 0 || OC == 0) return;
    gemm_epi(0, 1, N, OC, C, 1.0f, inp, C, weight, C, 0.0f, out, OC, epi, ctx);
}

/* out (N,OC) = inp (N,C) @ weight^T (OC,C) + bias (OC). */
void linear_forward(float *restrict out, const float *restrict inp,
                    const float *restrict weight, const float *restrict bias,
                    int N, int C, int OC) {
    s_epi_t e = {.bias = bias};
    s_linear_epi(out, inp, weight, N, C, OC, bias ? s_epi_bias : NULL, &e);
}

/* dinp (N,C) (+)= dout (N,OC) @ weight (OC,C). */
void linear_backward_input(float *restrict dinp, const float *restrict dout,
                           const float *restrict weight, int N, int C, int OC, int accumulate) {
    assert(N >= 0 && C >= 0 && OC >= 0);
    if (N == 0 || C == 0) return;
    if (OC == 0) {
        if (!accumulate) memset(dinp, 0, (size_t)N * C * sizeof(float));
        return;
    }
    gemm(0, 0, N, C, OC, 1.0f, dout, OC, weight, C, accumulate ? 1.0f : 0.0f, dinp, C);
}

static void s_epi_times_grad(void *ctx, float *c, int ldc, int rows, int cols, int i0, int j0);

/* dinp (N,C) = (dout (N,OC) @ weight (OC,C)) * grad (N,C), element by element. */
void linear_backward_input_times(float *restrict dinp, const float *restrict dout, const float *restrict weight,
                                 const float *restrict grad, int N, int C, int OC) {
    assert(N >= 0 && C >= 0 && OC >= 0);
    if (N == 0 || C == 0) return;
    gemm_epi(0, 0, N, C, OC, 1.0f, dout, OC, weight, C, 0.0f, dinp, C, s_epi_times_grad, (void *)grad);
}

static void s_column_sums(float *restrict dbias, const float *restrict d, int N, int width, size_t ld);

/* dweight rows [oc0, oc1) += dout[:, oc0:oc1]^T @ inp; dbias [oc0, oc1) +=
 * column sums of dout, row by row in order. */
void linear_backward_params(float *restrict dweight, float *restrict dbias,
                            const float *restrict dout, const float *restrict inp,
                            int N, int C, int OC, int oc0, int oc1) {
    assert(N >= 0 && C >= 0 && 0 <= oc0 && oc0 <= oc1 && oc1 <= OC);
    int m = oc1 - oc0;
    if (N == 0 || m == 0) return;
    if (C > 0)
        gemm(1, 0, m, C, N, 1.0f, dout + oc0, OC, inp, C, 1.0f, dweight + (size_t)oc0 * C, C);
    if (dbias) s_column_sums(dbias + oc0, dout + oc0, N, m, (size_t)OC);
}

/* dinp (N,C) += dout (N,OC) @ weight (OC,C); dweight (OC,C) += dout^T @ inp;
 * dbias (OC) += column sums of dout. */
void linear_backward(float *restrict dinp, float *restrict dweight, float *restrict dbias,
                     const float *restrict dout, const float *restrict inp,
                     const float *restrict weight, int N, int C, int OC) {
    if (dinp) linear_backward_input(dinp, dout, weight, N, C, OC, 1);
    linear_backward_params(dweight, dbias, dout, inp, N, C, OC, 0, OC);
}

/* ---------------------------------------------------------------------------
 * Embedding. */

/* out (B,T,C) = wte[tokens[b,t]] + wpe[t]. */
void embedding_forward(float *restrict out, const int *restrict tokens,
                       const float *restrict wte, const float *restrict wpe,
                       int B, int T, int C) {
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            int tok = tokens[b * T + t];
            assert(tok >= 0);
            float *o = out + ((size_t)b * T + t) * C;
            const float *e = wte + (size_t)tok * C;
            const float *p = wpe + (size_t)t * C;
            int i = 0;
            for (; i + S_LANES <= C; i += S_LANES)
                for (int j = 0; j < S_LANES; j++) o[i + j] = e[i + j] + p[i + j];
            for (; i < C; i++) o[i] = e[i] + p[i];
        }
}

/* dwte[tokens[b,t]] += dout[b,t]; dwpe[t] += dout[b,t]. */
void embedding_backward(float *restrict dwte, float *restrict dwpe,
                        const float *restrict dout, const int *restrict tokens,
                        int B, int T, int C) {
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            int tok = tokens[b * T + t];
            assert(tok >= 0);
            const float *d = dout + ((size_t)b * T + t) * C;
            s_add(dwte + (size_t)tok * C, d, C);
            s_add(dwpe + (size_t)t * C, d, C);
        }
}

/* ---------------------------------------------------------------------------
 * LayerNorm. */

/* Each layernorm kernel is an S_BODY loop over rows with AVX2 and AVX-512
 * copies (vecmath.h: the same bits at every level); the backward's whole
 * form does a row's input gradient and its parameter-gradient terms in one
 * visit, in the order of the two halves, so it gives their bits. */

/* o (C) = (x - m) * s * weight + bias: one row of the forward's output, the
 * one expression both the forward and layernorm_apply use. */
S_BODY void s_ln_apply_row(float *restrict o, const float *restrict x, const float *restrict weight,
                           const float *restrict bias, float m, float s, int C) {
    int i = 0;
    for (; i + S_LANES <= C; i += S_LANES)
        for (int j = 0; j < S_LANES; j++)
            o[i + j] = (x[i + j] - m) * s * weight[i + j] + bias[i + j];
    for (; i < C; i++) o[i] = (x[i] - m) * s * weight[i] + bias[i];
}

/* out (N,C) = (inp - mean) * rstd * weight + bias per row; mean, rstd (N). */
S_BODY void s_layernorm_forward(float *restrict out, float *restrict mean, float *restrict rstd,
                                const float *restrict inp, const float *restrict weight,
                                const float *restrict bias, int N, int C) {
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        float *o = out + (size_t)n * C;
        float m = s_sum(x, C) / (float)C;
        float acc[S_LANES] = {0};
        int i = 0;
        for (; i + S_LANES <= C; i += S_LANES)
            for (int j = 0; j < S_LANES; j++) {
                float d = x[i + j] - m;
                acc[j] += d * d;
            }
        float v = 0.0f;
        for (; i < C; i++) v += (x[i] - m) * (x[i] - m);
        for (int j = 0; j < S_LANES; j++) v += acc[j];
        float s = 1.0f / sqrtf(v / (float)C + 1e-5f);
        s_ln_apply_row(o, x, weight, bias, m, s, C);
        mean[n] = m;
        rstd[n] = s;
    }
}

S_COPIES(s_layernorm_forward, (float *restrict out, float *restrict mean, float *restrict rstd,
                               const float *restrict inp, const float *restrict weight, const float *restrict bias,
                               int N, int C), (out, mean, rstd, inp, weight, bias, N, C))

void layernorm_forward(float *restrict out, float *restrict mean, float *restrict rstd,
                       const float *restrict inp, const float *restrict weight,
                       const float *restrict bias, int N, int C) {
    assert(C > 0);
    S_CALL_BEST(s_layernorm_forward, (out, mean, rstd, inp, weight, bias, N, C));
}

S_BODY void s_layernorm_apply(float *restrict out, const float *restrict inp, const float *restrict mean,
                              const float *restrict rstd, const float *restrict weight,
                              const float *restrict bias, int N, int C) {
    for (int n = 0; n < N; n++)
        s_ln_apply_row(out + (size_t)n * C, inp + (size_t)n * C, weight, bias, mean[n], rstd[n], C);
}

S_COPIES(s_layernorm_apply, (float *restrict out, const float *restrict inp, const float *restrict mean,
                             const float *restrict rstd, const float *restrict weight, const float *restrict bias,
                             int N, int C), (out, inp, mean, rstd, weight, bias, N, C))

void layernorm_apply(float *restrict out, const float *restrict inp, const float *restrict mean,
                     const float *restrict rstd, const float *restrict weight, const float *restrict bias,
                     int N, int C) {
    assert(C > 0);
    S_CALL_BEST(s_layernorm_apply, (out, inp, mean, rstd, weight, bias, N, C));
}

/* dx (C) += the input gradient of one row (x, d its input and output gradient). */
S_BODY void s_ln_input_row(float *restrict dx, const float *restrict d, const float *restrict x,
                           const float *restrict weight, float m, float s, int C) {
    /* mean of dnorm = w*d, and of dnorm * norm */
    float a1[S_LANES] = {0}, a2[S_LANES] = {0};
    int i = 0;
    for (; i + S_LANES <= C; i += S_LANES)
        for (int j = 0; j < S_LANES; j++) {
            float dn = weight[i + j] * d[i + j];
            a1[j] += dn;
            a2[j] += dn * (x[i + j] - m) * s;
        }
    float dmean = 0.0f, dnmean = 0.0f;
    for (; i < C; i++) {
        float dn = weight[i] * d[i];
        dmean += dn;
        dnmean += dn * (x[i] - m) * s;
    }
    for (int j = 0; j < S_LANES; j++) { dmean += a1[j]; dnmean += a2[j]; }
    dmean /= (float)C;
    dnmean /= (float)C;
    i = 0;
    for (; i + S_LANES <= C; i += S_LANES)
        for (int j = 0; j < S_LANES; j++) {
            float nrm = (x[i + j] - m) * s;
            float dn = weight[i + j] * d[i + j];
            dx[i + j] += (dn - dmean - nrm * dnmean) * s;
        }
    for (; i < C; i++) {
        float nrm = (x[i] - m) * s;
        float dn = weight[i] * d[i];
        dx[i] += (dn - dmean - nrm * dnmean) * s;
    }
}

/* dw, db (w) += one row's terms: norm * d and d. */
S_BODY void s_ln_params_row(float *restrict dw, float *restrict db, const float *restrict d,
                            const float *restrict x, float m, float s, int w) {
    int i = 0;
    for (; i + S_WIDE <= w; i += S_WIDE)
        for (int j = 0; j < S_WIDE; j++) {
            dw[i + j] += (x[i + j] - m) * s * d[i + j];
            db[i + j] += d[i + j];
        }
    for (; i < w; i++) {
        dw[i] += (x[i] - m) * s * d[i];
        db[i] += d[i];
    }
}

S_BODY void s_layernorm_backward(float *restrict dinp, float *restrict dweight, float *restrict dbias,
                                 const float *restrict dout, const float *restrict inp,
                                 const float *restrict weight, const float *restrict mean,
                                 const float *restrict rstd, int N, int C) {
    for (int n = 0; n < N; n++) {
        const float *d = dout + (size_t)n * C, *x = inp + (size_t)n * C;
        s_ln_input_row(dinp + (size_t)n * C, d, x, weight, mean[n], rstd[n], C);
        s_ln_params_row(dweight, dbias, d, x, mean[n], rstd[n], C);
    }
}

S_COPIES(s_layernorm_backward, (float *restrict dinp, float *restrict dweight, float *restrict dbias,
                                const float *restrict dout, const float *restrict inp, const float *restrict weight,
                                const float *restrict mean, const float *restrict rstd, int N, int C),
         (dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C))

/* dinp, dweight (C), dbias (C) += layernorm gradients. */
void layernorm_backward(float *restrict dinp, float *restrict dweight, float *restrict dbias,
                        const float *restrict dout, const float *restrict inp,
                        const float *restrict weight, const float *restrict mean,
                        const float *restrict rstd, int N, int C) {
    assert(C > 0);
    S_CALL_BEST(s_layernorm_backward, (dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C));
}

/* ---------------------------------------------------------------------------
 * Element-wise layers. */

/* Each element-wise forward dispatches to a restrict-qualified loop, in place
 * or out of place, so that both vectorize. */
static void s_gelu_to(float *restrict out, const float *restrict inp, int N) {
    int i = 0;
    for (; i + S_LANES <= N; i += S_LANES)
        for (int j = 0; j < S_LANES; j++) out[i + j] = s_gelu(inp[i + j]);
    for (; i < N; i++) out[i] = s_gelu(inp[i]);
}

static void s_gelu_inplace(float *restrict x, int N) {
    int i = 0;
    for (; i + S_LANES <= N; i += S_LANES)
        for (int j = 0; j < S_LANES; j++) x[i + j] = s_gelu(x[i + j]);
    for (; i < N; i++) x[i] = s_gelu(x[i]);
}

void gelu_forward(float *out, const float *inp, int N) {
    if (out == inp) s_gelu_inplace(out, N);
    else s_gelu_to(out, inp, N);
}

/* gelu and its derivative from one exp (s_gelu and s_gelu_grad, operation
 * for operation). */
static inline void s_gelu_both(float x, float *y, float *dy) {
    float u = S_GELU_K * (x + S_GELU_C * x * x * x);
    float e = s_expf(-2.0f * u);
    float s = 1.0f / (1.0f + e);
    *y = x * s;
    float sp = s_select(fabsf(u) > 40.0f, 0.0f, e * s * s);
    *dy = s + 2.0f * x * sp * S_GELU_K * (1.0f + 3.0f * S_GELU_C * x * x);
}

S_BODY void s_gelu_forward_grad(float *restrict out, float *restrict xg, int N) {
    int i = 0;
    for (; i + S_WIDE <= N; i += S_WIDE)
        for (int j = 0; j < S_WIDE; j++) s_gelu_both(xg[i + j], &out[i + j], &xg[i + j]);
    for (; i < N; i++) s_gelu_both(xg[i], &out[i], &xg[i]);
}

S_COPIES(s_gelu_forward_grad, (float *restrict out, float *restrict xg, int N), (out, xg, N))

void gelu_forward_grad(float *restrict out, float *restrict xg, int N) {
    S_CALL_BEST(s_gelu_forward_grad, (out, xg, N));
}

void gelu_backward_grad(float *restrict d, const float *restrict grad, int N) {
    int i = 0;
    for (; i + S_LANES <= N; i += S_LANES)
        for (int j = 0; j < S_LANES; j++) d[i + j] *= grad[i + j];
    for (; i < N; i++) d[i] *= grad[i];
}

S_BODY void s_bias_gelu_forward_grad(float *restrict out, float *restrict xg, const float *restrict bias,
                                     int N, int OC, size_t ld) {
    for (int n = 0; n < N; n++) {
        float *o = out + (size_t)n * ld, *g = xg + (size_t)n * ld;
        int i = 0;
        for (; i + S_WIDE <= OC; i += S_WIDE)
            for (int j = 0; j < S_WIDE; j++) s_gelu_both(g[i + j] + bias[i + j], &o[i + j], &g[i + j]);
        for (; i < OC; i++) s_gelu_both(g[i] + bias[i], &o[i], &g[i]);
    }
}

S_COPIES(s_bias_gelu_forward_grad,
         (float *restrict out, float *restrict xg, const float *restrict bias, int N, int OC, size_t ld),
         (out, xg, bias, N, OC, ld))

void bias_gelu_forward_grad(float *restrict out, float *restrict xg, const float *restrict bias, int N, int OC) {
    S_CALL_BEST(s_bias_gelu_forward_grad, (out, xg, bias, N, OC, (size_t)OC));
}

/* out may be a or b: each block of S_LANES is read whole before it is written. */
void bias_residual_forward(float *out, const float *a, const float *restrict bias, const float *b, int N, int OC) {
    for (int n = 0; n < N; n++) {
        const float *x = a + (size_t)n * OC, *y = b + (size_t)n * OC;
        float *o = out + (size_t)n * OC;
        int i = 0;
        for (; i + S_LANES <= OC; i += S_LANES) {
            float t[S_LANES];
            for (int j = 0; j < S_LANES; j++) t[j] = (x[i + j] + bias[i + j]) + y[i + j];
            for (int j = 0; j < S_LANES; j++) o[i + j] = t[j];
        }
        for (; i < OC; i++) o[i] = (x[i] + bias[i]) + y[i];
    }
}

/* The element-wise passes on a block of a product (gemm_epi): rows ld
 * floats apart, cols wide, the other operands laid out as the product.  The
 * same operations as bias_residual_forward and gelu_backward_grad. */
S_BODY void s_rows_bias(float *restrict c, size_t ld, const float *restrict bias, int rows, int cols) {
    for (int r = 0; r < rows; r++) {
        float *o = c + (size_t)r * ld;
        int i = 0;
        for (; i + S_WIDE <= cols; i += S_WIDE)
            for (int j = 0; j < S_WIDE; j++) o[i + j] = o[i + j] + bias[i + j];
        for (; i < cols; i++) o[i] = o[i] + bias[i];
    }
}

S_BODY void s_rows_bias_res(float *restrict c, size_t ld, const float *restrict bias, const float *restrict res,
                            int rows, int cols) {
    for (int r = 0; r < rows; r++) {
        float *o = c + (size_t)r * ld;
        const float *y = res + (size_t)r * ld;
        int i = 0;
        for (; i + S_WIDE <= cols; i += S_WIDE)
            for (int j = 0; j < S_WIDE; j++) o[i + j] = (o[i + j] + bias[i + j]) + y[i + j];
        for (; i < cols; i++) o[i] = (o[i] + bias[i]) + y[i];
    }
}

S_BODY void s_rows_times(float *restrict c, size_t ld, const float *restrict g, int rows, int cols) {
    for (int r = 0; r < rows; r++) {
        float *o = c + (size_t)r * ld;
        const float *x = g + (size_t)r * ld;
        int i = 0;
        for (; i + S_WIDE <= cols; i += S_WIDE)
            for (int j = 0; j < S_WIDE; j++) o[i + j] *= x[i + j];
        for (; i < cols; i++) o[i] *= x[i];
    }
}

S_COPIES(s_rows_bias, (float *restrict c, size_t ld, const float *restrict bias, int rows, int cols),
         (c, ld, bias, rows, cols))
S_COPIES(s_rows_bias_res,
         (float *restrict c, size_t ld, const float *restrict bias, const float *restrict res, int rows, int cols),
         (c, ld, bias, res, rows, cols))
S_COPIES(s_rows_times, (float *restrict c, size_t ld, const float *restrict g, int rows, int cols),
         (c, ld, g, rows, cols))

static void s_epi_bias(void *ctx, float *c, int ldc, int rows, int cols, int i0, int j0) {
    (void)i0;
    S_CALL_BEST(s_rows_bias, (c, (size_t)ldc, ((const s_epi_t *)ctx)->bias + j0, rows, cols));
}

static void s_epi_bias_residual(void *ctx, float *c, int ldc, int rows, int cols, int i0, int j0) {
    const s_epi_t *e = ctx;
    S_CALL_BEST(s_rows_bias_res, (c, (size_t)ldc, e->bias + j0, e->res + (size_t)i0 * ldc + j0, rows, cols));
}

/* c (a block of dinp) *= the same block of grad (ctx) */
static void s_epi_times_grad(void *ctx, float *c, int ldc, int rows, int cols, int i0, int j0) {
    S_CALL_BEST(s_rows_times, (c, (size_t)ldc, (const float *)ctx + (size_t)i0 * ldc + j0, rows, cols));
}

static void s_epi_bias_gelu(void *ctx, float *c, int ldc, int rows, int cols, int i0, int j0) {
    const s_epi_t *e = ctx;
    S_CALL_BEST(s_bias_gelu_forward_grad, (e->out + (size_t)i0 * ldc + j0, c, e->bias + j0, rows, cols, (size_t)ldc));
}

void linear_bias_residual_forward(float *out, const float *inp, const float *weight, const float *bias,
                                  const float *res, int N, int C, int OC) {
    s_epi_t e = {.bias = bias, .res = res};
    s_linear_epi(out, inp, weight, N, C, OC, s_epi_bias_residual, &e);
}

void linear_bias_gelu_forward_grad(float *out, float *xg, const float *inp, const float *weight,
                                   const float *bias, int N, int C, int OC) {
    s_epi_t e = {.bias = bias, .out = out};
    s_linear_epi(xg, inp, weight, N, C, OC, s_epi_bias_gelu, &e);
}

/* dbias (width) += the column sums of d (N rows ld floats apart), row by
 * row in order. */
S_BODY void s_bias_backward(float *restrict dbias, const float *restrict d, int N, int width, size_t ld) {
    for (int n = 0; n < N; n++) {
        const float *x = d + (size_t)n * ld;
        int i = 0;
        for (; i + S_WIDE <= width; i += S_WIDE)
            for (int j = 0; j < S_WIDE; j++) dbias[i + j] += x[i + j];
        for (; i < width; i++) dbias[i] += x[i];
    }
}

S_COPIES(s_bias_backward, (float *restrict dbias, const float *restrict d, int N, int width, size_t ld),
         (dbias, d, N, width, ld))

static void s_column_sums(float *restrict dbias, const float *restrict d, int N, int width, size_t ld) {
    S_CALL_BEST(s_bias_backward, (dbias, d, N, width, ld));
}

void bias_backward(float *restrict dbias, const float *restrict d, int N, int OC) {
    s_column_sums(dbias, d, N, OC, (size_t)OC);
}

S_BODY void s_gelu_backward(float *restrict dinp, const float *restrict inp,
                            const float *restrict dout, int N) {
    int i = 0;
    for (; i + S_LANES <= N; i += S_LANES)
        for (int j = 0; j < S_LANES; j++) dinp[i + j] += s_gelu_grad(inp[i + j]) * dout[i + j];
    for (; i < N; i++) dinp[i] += s_gelu_grad(inp[i]) * dout[i];
}

S_COPIES(s_gelu_backward, (float *restrict dinp, const float *restrict inp, const float *restrict dout, int N),
         (dinp, inp, dout, N))

void gelu_backward(float *restrict dinp, const float *restrict inp,
                   const float *restrict dout, int N) {
    S_CALL_BEST(s_gelu_backward, (dinp, inp, dout, N));
}

static void s_relu_to(float *restrict out, const float *restrict inp, int N) {
    int i = 0;
    for (; i + S_LANES <= N; i += S_LANES)
        for (int j = 0; j < S_LANES; j++) out[i + j] = s_select(inp[i + j] < 0.0f, 0.0f, inp[i + j]);
    for (; i < N; i++) out[i] = s_select(inp[i] < 0.0f, 0.0f, inp[i]);
}

static void s_relu_inplace(float *restrict x, int N) {
    int i = 0;
    for (; i + S_LANES <= N; i += S_LANES)
        for (int j = 0; j < S_LANES; j++) x[i + j] = s_select(x[i + j] < 0.0f, 0.0f, x[i + j]);
    for (; i < N; i++) x[i] = s_select(x[i] < 0.0f, 0.0f, x[i]);
}

void relu_forward(float *out, const float *inp, int N) {
    if (out == inp) s_relu_inplace(out, N);
    else s_relu_to(out, inp, N);
}

void relu_backward(float *restrict dinp, const float *restrict out,
                   const float *restrict dout, int N) {
    int i = 0;
    for (; i + S_LANES <= N; i += S_LANES)
        for (int j = 0; j < S_LANES; j++) dinp[i + j] += s_select(out[i + j] > 0.0f, dout[i + j], 0.0f);
    for (; i < N; i++) dinp[i] += s_select(out[i] > 0.0f, dout[i], 0.0f);
}

static void s_add_to(float *restrict out, const float *restrict a, const float *restrict b, int N) {
    int i = 0;
    for (; i + S_LANES <= N; i += S_LANES)
        for (int j = 0; j < S_LANES; j++) out[i + j] = a[i + j] + b[i + j];
    for (; i < N; i++) out[i] = a[i] + b[i];
}

void residual_forward(float *out, const float *a, const float *b, int N) {
    if (out == a && out == b) {
        for (int i = 0; i < N; i++) out[i] += out[i];
    } else if (out == a) {
        s_add(out, b, N);
    } else if (out == b) {
        s_add(out, a, N);
    } else {
        s_add_to(out, a, b, N);
    }
}

void residual_backward(float *restrict da, float *restrict db, const float *restrict dout, int N) {
    s_add(da, dout, N);
    s_add(db, dout, N);
}

/* ---------------------------------------------------------------------------
 * Softmax cross-entropy. */

/* The loss is computed in log space: -log p[y] = (max - x[y]) + log(sum of
 * e^(x - max)), so it is exact however small p[y] is (a diverged model's loss
 * is reported as it is, and becomes +inf only when it exceeds the float
 * range); a NaN logit gives a NaN loss. */
float crossentropy_forward(float *restrict losses, float *restrict probs,
                           const float *restrict logits, const int *restrict targets,
                           int N, int V) {
    assert(V > 0);
    double total = 0.0;
    for (int n = 0; n < N; n++) {
        const float *x = logits + (size_t)n * V;
        int y = targets[n];
        assert(y >= 0 && y < V);
        float *p = probs + (size_t)n * V, mx;
        memcpy(p, x, (size_t)V * sizeof(float));
        float sum = s_softmax_inplace(p, V, &mx);
        losses[n] = (mx - x[y]) + logf(sum);
        total += losses[n];
    }
    return N > 0 ? (float)(total / N) : 0.0f;
}

void crossentropy_backward(float *restrict dlogits, const float *restrict probs,
                           const int *restrict targets, float scale, int N, int V) {
    for (int n = 0; n < N; n++) {
        float *d = dlogits + (size_t)n * V;
        s_axpy(d, scale, probs + (size_t)n * V, V);
        int y = targets[n];
        assert(y >= 0 && y < V);
        d[y] -= scale;
    }
}
