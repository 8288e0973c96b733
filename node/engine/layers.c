/* layers.c: forward/backward kernels of brigade's models (see layers.h).
 *
 * Matrix products go through cblas_sgemm.  The element-wise and row-wise
 * kernels are written for gcc -O2, whose vectorizer only takes loops with a
 * fixed trip count: each loop runs over blocks of S_LANES elements with a
 * fixed inner loop, then a scalar tail.  Float selects use bit masks
 * (s_select) because a float comparison under a `?:` is a possible trap for
 * gcc and blocks vectorization.  exp is a branch-free polynomial (s_expf) so
 * that softmax and gelu vectorize too; its error is below 1 ulp on [-87, 88].
 *
 * Outputs never alias inputs (the pointers are restrict-qualified), except
 * in the element-wise forwards gelu, relu and residual, which may also run
 * exactly in place (out == inp, out == a or out == b; no partial overlap).
 */
#include "node/engine/layers.h"

#include <assert.h>
#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define S_LANES 8          /* block width of the vectorizable loops */
#define S_ATT_BLOCK 64     /* attention rows per causal block */

/* ---------------------------------------------------------------------------
 * Scalar helpers, all branch-free so that loops calling them vectorize. */

static inline uint32_t s_bits(float x) { uint32_t b; memcpy(&b, &x, 4); return b; }
static inline float s_float(uint32_t b) { float x; memcpy(&x, &b, 4); return x; }

/* cond ? a : b, without a branch. */
static inline float s_select(int cond, float a, float b) {
    uint32_t m = 0u - (uint32_t)(cond != 0);
    return s_float((s_bits(a) & m) | (s_bits(b) & ~m));
}

/* e^x for x in float range; inputs are clamped to [-87, 88] so results stay
 * normal: e^x below e^-87 (1.6e-38) returns about 1.6e-38, above e^88 about
 * 1.65e38.  NaN stays NaN. */
static inline float s_expf(float x) {
    x = s_select(x < -87.0f, -87.0f, x);
    x = s_select(x > 88.0f, 88.0f, x);
    /* x = n ln2 + r, |r| <= ln2/2; n rounded by the 1.5*2^23 trick, which
     * also leaves n in the low bits of t. */
    float t = x * 1.44269504088896341f + 12582912.0f;
    float n = t - 12582912.0f;
    float r = x - n * 0.693359375f;          /* ln2 split in two parts */
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;              /* minimax on [-ln2/2, ln2/2] */
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * (r * r) + r + 1.0f;
    int32_t k = (int32_t)s_bits(t) - 0x4B400000;   /* n as an integer */
    return p * s_float((uint32_t)(k + 127) << 23);
}

#define S_GELU_K 0.7978845608028654f     /* sqrt(2/pi) */
#define S_GELU_C 0.044715f

/* gelu(x) = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3).  Since
 * 0.5 (1 + tanh(u)) = sigmoid(2u) = 1 / (1 + e^-2u), it is computed as
 * x * sigmoid(2u), which has no cancellation in the negative tail. */
static inline float s_gelu(float x) {
    float u = S_GELU_K * (x + S_GELU_C * x * x * x);
    return x / (1.0f + s_expf(-2.0f * u));
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
 * Vector helpers over n floats. */

/* y += x */
static void s_add(float *restrict y, const float *restrict x, int n) {
    int i = 0;
    for (; i + S_LANES <= n; i += S_LANES)
        for (int j = 0; j < S_LANES; j++) y[i + j] += x[i + j];
    for (; i < n; i++) y[i] += x[i];
}

/* y += a * x */
static void s_axpy(float *restrict y, float a, const float *restrict x, int n) {
    int i = 0;
    for (; i + S_LANES <= n; i += S_LANES)
        for (int j = 0; j < S_LANES; j++) y[i + j] += a * x[i + j];
    for (; i < n; i++) y[i] += a * x[i];
}

static float s_sum(const float *restrict x, int n) {
    float acc[S_LANES] = {0};
    int i = 0;
    for (; i + S_LANES <= n; i += S_LANES)
        for (int j = 0; j < S_LANES; j++) acc[j] += x[i + j];
    float s = 0.0f;
    for (; i < n; i++) s += x[i];
    for (int j = 0; j < S_LANES; j++) s += acc[j];
    return s;
}

static float s_dot(const float *restrict x, const float *restrict y, int n) {
    float acc[S_LANES] = {0};
    int i = 0;
    for (; i + S_LANES <= n; i += S_LANES)
        for (int j = 0; j < S_LANES; j++) acc[j] += x[i + j] * y[i + j];
    float s = 0.0f;
    for (; i < n; i++) s += x[i] * y[i];
    for (int j = 0; j < S_LANES; j++) s += acc[j];
    return s;
}

/* max of n >= 1 floats (NaNs are skipped). */
static float s_max(const float *restrict x, int n) {
    float acc[S_LANES];
    for (int j = 0; j < S_LANES; j++) acc[j] = x[0];
    int i = 0;
    for (; i + S_LANES <= n; i += S_LANES)
        for (int j = 0; j < S_LANES; j++) acc[j] = s_select(x[i + j] > acc[j], x[i + j], acc[j]);
    float m = x[0];
    for (; i < n; i++) m = s_select(x[i] > m, x[i], m);
    for (int j = 0; j < S_LANES; j++) m = s_select(acc[j] > m, acc[j], m);
    return m;
}

/* x (n >= 1) = softmax(x), with the row max subtracted first.  Returns the
 * sum of e^(x - max) (>= 1) and stores the max in *mx, so that
 * log-sum-exp(x) = *mx + log(sum). */
static float s_softmax_inplace(float *restrict x, int n, float *mx) {
    float m = s_max(x, n);
    float acc[S_LANES] = {0};
    int i = 0;
    for (; i + S_LANES <= n; i += S_LANES)
        for (int j = 0; j < S_LANES; j++) {
            float e = s_expf(x[i + j] - m);
            x[i + j] = e;
            acc[j] += e;
        }
    float sum = 0.0f;
    for (; i < n; i++) {
        float e = s_expf(x[i] - m);
        x[i] = e;
        sum += e;
    }
    for (int j = 0; j < S_LANES; j++) sum += acc[j];
    float inv = 1.0f / sum;
    i = 0;
    for (; i + S_LANES <= n; i += S_LANES)
        for (int j = 0; j < S_LANES; j++) x[i + j] *= inv;
    for (; i < n; i++) x[i] *= inv;
    *mx = m;
    return sum;
}

/* ---------------------------------------------------------------------------
 * Linear. */

/* out (N,OC) = inp (N,C) @ weight^T (OC,C) + bias (OC). */
void linear_forward(float *restrict out, const float *restrict inp,
                    const float *restrict weight, const float *restrict bias,
                    int N, int C, int OC) {
    assert(N >= 0 && C >= 0 && OC >= 0);
    if (N == 0 || OC == 0) return;
    if (C == 0) {
        for (int n = 0; n < N; n++) {
            if (bias) memcpy(out + (size_t)n * OC, bias, (size_t)OC * sizeof(float));
            else memset(out + (size_t)n * OC, 0, (size_t)OC * sizeof(float));
        }
        return;
    }
    float beta = 0.0f;
    if (bias) {
        for (int n = 0; n < N; n++) memcpy(out + (size_t)n * OC, bias, (size_t)OC * sizeof(float));
        beta = 1.0f;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, OC, C,
                1.0f, inp, C, weight, C, beta, out, OC);
}

/* dinp (N,C) += dout (N,OC) @ weight (OC,C); dweight (OC,C) += dout^T @ inp;
 * dbias (OC) += column sums of dout. */
void linear_backward(float *restrict dinp, float *restrict dweight, float *restrict dbias,
                     const float *restrict dout, const float *restrict inp,
                     const float *restrict weight, int N, int C, int OC) {
    assert(N >= 0 && C >= 0 && OC >= 0);
    if (N == 0 || OC == 0) return;
    if (C > 0) {
        if (dinp)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, C, OC,
                        1.0f, dout, OC, weight, C, 1.0f, dinp, C);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, C, N,
                    1.0f, dout, OC, inp, C, 1.0f, dweight, C);
    }
    if (dbias)
        for (int n = 0; n < N; n++) s_add(dbias, dout + (size_t)n * OC, OC);
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

/* out (N,C) = (inp - mean) * rstd * weight + bias per row; mean, rstd (N). */
void layernorm_forward(float *restrict out, float *restrict mean, float *restrict rstd,
                       const float *restrict inp, const float *restrict weight,
                       const float *restrict bias, int N, int C) {
    assert(C > 0);
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
        i = 0;
        for (; i + S_LANES <= C; i += S_LANES)
            for (int j = 0; j < S_LANES; j++)
                o[i + j] = (x[i + j] - m) * s * weight[i + j] + bias[i + j];
        for (; i < C; i++) o[i] = (x[i] - m) * s * weight[i] + bias[i];
        mean[n] = m;
        rstd[n] = s;
    }
}

/* dinp (N,C), dweight (C), dbias (C) += layernorm gradients. */
void layernorm_backward(float *restrict dinp, float *restrict dweight, float *restrict dbias,
                        const float *restrict dout, const float *restrict inp,
                        const float *restrict weight, const float *restrict mean,
                        const float *restrict rstd, int N, int C) {
    assert(C > 0);
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        const float *d = dout + (size_t)n * C;
        float *dx = dinp + (size_t)n * C;
        float m = mean[n], s = rstd[n];
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
                dweight[i + j] += nrm * d[i + j];
                dbias[i + j] += d[i + j];
            }
        for (; i < C; i++) {
            float nrm = (x[i] - m) * s;
            float dn = weight[i] * d[i];
            dx[i] += (dn - dmean - nrm * dnmean) * s;
            dweight[i] += nrm * d[i];
            dbias[i] += d[i];
        }
    }
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

void gelu_backward(float *restrict dinp, const float *restrict inp,
                   const float *restrict dout, int N) {
    int i = 0;
    for (; i + S_LANES <= N; i += S_LANES)
        for (int j = 0; j < S_LANES; j++) dinp[i + j] += s_gelu_grad(inp[i + j]) * dout[i + j];
    for (; i < N; i++) dinp[i] += s_gelu_grad(inp[i]) * dout[i];
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
 * Causal self-attention.  Per (b, head), q, k, v are strided views of qkv
 * (leading dimension 3C) and the output a view of out (leading dimension C).
 * Rows are processed in blocks of S_ATT_BLOCK: rows [r0, r1) only see
 * columns [0, r1), so the products skip most of the upper triangle. */

void attention_forward(float *restrict out, float *restrict att, const float *restrict qkv,
                       int B, int T, int C, int NH) {
    assert(NH > 0 && C % NH == 0);
    const int hs = C / NH, C3 = 3 * C;
    const float scale = 1.0f / sqrtf((float)hs);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const float *q = qkv + (size_t)b * T * C3 + (size_t)h * hs;
            const float *k = q + C;
            const float *v = q + 2 * C;
            float *a = att + ((size_t)b * NH + h) * T * T;
            float *o = out + (size_t)b * T * C + (size_t)h * hs;
            for (int r0 = 0; r0 < T; r0 += S_ATT_BLOCK) {
                int r1 = r0 + S_ATT_BLOCK < T ? r0 + S_ATT_BLOCK : T;
                int m = r1 - r0;
                /* scores[r0:r1, 0:r1] = scale * q[r0:r1] @ k[0:r1]^T */
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, r1, hs,
                            scale, q + (size_t)r0 * C3, C3, k, C3, 0.0f, a + (size_t)r0 * T, T);
                for (int t = r0; t < r1; t++) {
                    float *row = a + (size_t)t * T;
                    float mx;
                    s_softmax_inplace(row, t + 1, &mx);
                    memset(row + t + 1, 0, (size_t)(T - t - 1) * sizeof(float));
                }
                /* out[r0:r1] = att[r0:r1, 0:r1] @ v[0:r1] */
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, hs, r1,
                            1.0f, a + (size_t)r0 * T, T, v, C3, 0.0f, o + (size_t)r0 * C, C);
            }
        }
}

void attention_backward(float *restrict dqkv, float *restrict scratch, const float *restrict dout,
                        const float *restrict qkv, const float *restrict att,
                        int B, int T, int C, int NH) {
    assert(NH > 0 && C % NH == 0);
    const int hs = C / NH, C3 = 3 * C;
    const float scale = 1.0f / sqrtf((float)hs);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const size_t off = (size_t)b * T * C3 + (size_t)h * hs;
            const float *q = qkv + off, *k = q + C, *v = q + 2 * C;
            float *dq = dqkv + off, *dk = dq + C, *dv = dq + 2 * C;
            const float *a = att + ((size_t)b * NH + h) * T * T;
            const float *dO = dout + (size_t)b * T * C + (size_t)h * hs;
            for (int r0 = 0; r0 < T; r0 += S_ATT_BLOCK) {
                int r1 = r0 + S_ATT_BLOCK < T ? r0 + S_ATT_BLOCK : T;
                int m = r1 - r0;
                float *ds = scratch + (size_t)r0 * T;
                /* datt[r0:r1, 0:r1] = dout[r0:r1] @ v[0:r1]^T */
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, r1, hs,
                            1.0f, dO + (size_t)r0 * C, C, v, C3, 0.0f, ds, T);
                /* dv[0:r1] += att[r0:r1, 0:r1]^T @ dout[r0:r1] */
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, r1, hs, m,
                            1.0f, a + (size_t)r0 * T, T, dO + (size_t)r0 * C, C, 1.0f, dv, C3);
                /* softmax backward on the causal part; zero above the diagonal */
                for (int t = r0; t < r1; t++) {
                    const float *p = a + (size_t)t * T;
                    float *d = scratch + (size_t)t * T;
                    int n = t + 1;
                    float dot = s_dot(p, d, n);
                    int i = 0;
                    for (; i + S_LANES <= n; i += S_LANES)
                        for (int j = 0; j < S_LANES; j++) d[i + j] = p[i + j] * (d[i + j] - dot);
                    for (; i < n; i++) d[i] = p[i] * (d[i] - dot);
                    if (r1 > n) memset(d + n, 0, (size_t)(r1 - n) * sizeof(float));
                }
                /* dq[r0:r1] += scale * dscores[r0:r1, 0:r1] @ k[0:r1] */
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, hs, r1,
                            scale, ds, T, k, C3, 1.0f, dq + (size_t)r0 * C3, C3);
                /* dk[0:r1] += scale * dscores[r0:r1, 0:r1]^T @ q[r0:r1] */
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, r1, hs, m,
                            scale, ds, T, q + (size_t)r0 * C3, C3, 1.0f, dk, C3);
            }
        }
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
