/* attention.c: causal multi-head self-attention (attention.h).
 *
 * Per (b, head) the work is four or six products of T x T x hs; at hs = 32
 * each is far too small for a BLAS call to reach its peak (OpenBLAS ran them
 * at 60-100 GFLOP/s against 180 for the model's linear layers).  The fast
 * path keeps a head's operands where they are (strided views of qkv) except
 * k^T (or v^T), packed once per head, and runs two register-blocked kernels
 * on 16-float vectors (gcc vector extensions, one AVX-512 register each; the
 * fast path is compiled for AVX-512 with target attributes and runs when
 * cpu_level() (compress/cpu.h) says AVX-512, since with 16 narrower
 * registers the 4 x 4 and 8 x 2 accumulator blocks spill and ran 3-4x slower
 * than the reference):
 *   s_abt: S (R x jn) = A (R x D) @ Bt (D x jn), rows of A broadcast, Bt the
 *          packed transpose: q k^T and dout v^T;
 *   s_pb:  O (R x D) (+)= P (R x [l0, l1)) @ X ([l0, l1) x D), entries of P
 *          broadcast through two strides (so P or P^T): att v, att^T dout,
 *          dS k and dS^T q.
 * Causality: query rows go in blocks of 4 (scores) or 8 (products), and a
 * block only visits the key columns up to its last row, rounded up to 16; the
 * masked softmax writes exact zeros above the diagonal, which the products
 * then add harmlessly.  This file is built with -ffp-contract=fast (Makefile)
 * so that the kernels' multiply-adds become FMAs: the fast path's results
 * differ from the reference's in rounding (FMAs and another order of the
 * sums), within the tolerances tests/test_layers.c states.
 *
 * A head's operands are strided rows (3C or C floats apart, too far apart
 * for the hardware's stride prefetcher), so that at T = 128 a head read them
 * cold from L3: while it computes, each head prefetches the next one's rows
 * into L2 (the block loop issues the rows of its own block of 4: q, k, v in
 * the forward; q, k, v, dout, att, and dqkv for writing in the backward).
 * At gpt-small's shape this took the backward from 20.5 to 14.5 ms and the
 * forward from 11.8 to 10.4 ms per 8 layers of batch 8.
 *
 * The reference (the _ref functions, and the path for hs not a multiple of
 * 16) runs the same blocks of 64 rows through cblas_sgemm. */
#include "node/engine/attention.h"
#include "node/engine/vecmath.h"

#include <assert.h>
#include <cblas.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define S_ATT_BLOCK 64     /* reference: rows per causal block */
#define S_VL 16            /* floats per kernel vector */

static int s_round16(int n) { return (n + 15) & ~15; }

/* ---------------------------------------------------------------------------
 * Reference. */

static void s_ref_forward_head(float *restrict out, float *restrict att, const float *restrict qkv,
                               int B, int T, int C, int NH, int bh)
{
    const int hs = C / NH, C3 = 3 * C, b = bh / NH, h = bh % NH;
    const float scale = 1.0f / sqrtf((float)hs);
    (void)B;
    const float *q = qkv + (size_t)b * T * C3 + (size_t)h * hs;
    const float *k = q + C;
    const float *v = q + 2 * C;
    float *a = att + (size_t)bh * T * T;
    float *o = out + (size_t)b * T * C + (size_t)h * hs;
    for (int r0 = 0; r0 < T; r0 += S_ATT_BLOCK) {
        int r1 = r0 + S_ATT_BLOCK < T ? r0 + S_ATT_BLOCK : T;
        int m = r1 - r0;
        /* scores[r0:r1, 0:r1] = scale * q[r0:r1] @ k[0:r1]^T */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, r1, hs,
                    scale, q + (size_t)r0 * C3, C3, k, C3, 0.0f, a + (size_t)r0 * T, T);
        for (int t = r0; t < r1; t++) {
            float *row = a + (size_t)t * T, mx;
            s_softmax_inplace(row, t + 1, &mx);
            memset(row + t + 1, 0, (size_t)(T - t - 1) * sizeof(float));
        }
        /* out[r0:r1] = att[r0:r1, 0:r1] @ v[0:r1] */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, hs, r1,
                    1.0f, a + (size_t)r0 * T, T, v, C3, 0.0f, o + (size_t)r0 * C, C);
    }
}

static void s_ref_backward_head(float *restrict dqkv, float *restrict scratch, const float *restrict dout,
                                const float *restrict qkv, const float *restrict att,
                                int B, int T, int C, int NH, int bh)
{
    const int hs = C / NH, C3 = 3 * C, b = bh / NH, h = bh % NH;
    const float scale = 1.0f / sqrtf((float)hs);
    (void)B;
    const size_t off = (size_t)b * T * C3 + (size_t)h * hs;
    const float *q = qkv + off, *k = q + C, *v = q + 2 * C;
    float *dq = dqkv + off, *dk = dq + C, *dv = dq + 2 * C;
    const float *a = att + (size_t)bh * T * T;
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

void attention_forward_ref(float *out, float *att, const float *qkv, int B, int T, int C, int NH)
{
    assert(NH > 0 && C % NH == 0);
    for (int bh = 0; bh < B * NH; bh++)
        s_ref_forward_head(out, att, qkv, B, T, C, NH, bh);
}

void attention_backward_ref(float *dqkv, float *scratch, const float *dout, const float *qkv,
                            const float *att, int B, int T, int C, int NH)
{
    assert(NH > 0 && C % NH == 0);
    for (int bh = 0; bh < B * NH; bh++)
        s_ref_backward_head(dqkv, scratch, dout, qkv, att, B, T, C, NH, bh);
}

#if defined(__x86_64__) && defined(__GNUC__)
#define S_FAST 1
/* Every function of the fast path is compiled for AVX-512 and FMA
 * (S_AVX512, vecmath.h). */
/* Without AVX-512 (a baseline build) gcc notes that passing these vectors by
 * value would change the ABI; all the functions that do are static. */
#pragma GCC diagnostic ignored "-Wpsabi"
typedef float s_vec __attribute__((vector_size(64)));
typedef float s_vecu __attribute__((vector_size(64), aligned(4), may_alias));
typedef int32_t s_ivec __attribute__((vector_size(64)));

S_AVX512 static inline s_vec s_ld(const float *p) { return *(const s_vecu *)p; }
S_AVX512 static inline void s_st(float *p, s_vec v) { *(s_vecu *)p = v; }
S_AVX512 static inline s_vec s_bc(float x) { return (s_vec){x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x}; }

#define S_INLINE S_AVX512 static inline __attribute__((always_inline))
#define S_UNROLL _Pragma("GCC unroll 8")


/* ---------------------------------------------------------------------------
 * Kernels of the fast path. */

/* s[r][0, jn) = sum_d a[r][d] bt[d][0, jn) for r < R (R <= 4); jn % 16 == 0.
 * Rows of s have stride lds, of a lda, of bt ldb. */
S_INLINE void s_abt(float *s, int lds, const float *a, int lda, const float *bt, int ldb,
                    int D, int jn, const int R)
{
    int j = 0;
    for (; j + 4 * S_VL <= jn; j += 4 * S_VL) {
        s_vec acc[4][4];
        S_UNROLL for (int r = 0; r < R; r++)
            S_UNROLL for (int x = 0; x < 4; x++) acc[r][x] = s_bc(0.0f);
        for (int d = 0; d < D; d++) {
            const float *bp = bt + (size_t)d * ldb + j;
            s_vec b0 = s_ld(bp), b1 = s_ld(bp + S_VL), b2 = s_ld(bp + 2 * S_VL), b3 = s_ld(bp + 3 * S_VL);
            S_UNROLL for (int r = 0; r < R; r++) {
                s_vec ar = s_bc(a[(size_t)r * lda + d]);
                acc[r][0] += ar * b0;
                acc[r][1] += ar * b1;
                acc[r][2] += ar * b2;
                acc[r][3] += ar * b3;
            }
        }
        S_UNROLL for (int r = 0; r < R; r++)
            S_UNROLL for (int x = 0; x < 4; x++) s_st(s + (size_t)r * lds + j + x * S_VL, acc[r][x]);
    }
    for (; j < jn; j += S_VL) {
        s_vec acc[4];
        S_UNROLL for (int r = 0; r < R; r++) acc[r] = s_bc(0.0f);
        for (int d = 0; d < D; d++) {
            s_vec b0 = s_ld(bt + (size_t)d * ldb + j);
            S_UNROLL for (int r = 0; r < R; r++) acc[r] += s_bc(a[(size_t)r * lda + d]) * b0;
        }
        S_UNROLL for (int r = 0; r < R; r++) s_st(s + (size_t)r * lds + j, acc[r]);
    }
}

/* o[i][0, D) (+)= sum over l in [l0, l1) of p[i*pi + l*pl] x[l][0, D), for
 * i < R (R <= 8); D % 16 == 0.  accumulate: add to o instead of writing it. */
S_INLINE void s_pb(float *o, int ldo, const float *p, int pi, int pl, const float *x, int ldx,
                   int D, int l0, int l1, const int R, int accumulate)
{
    int c = 0;
    for (; c + 2 * S_VL <= D; c += 2 * S_VL) {
        s_vec acc[8][2];
        S_UNROLL for (int i = 0; i < R; i++) { acc[i][0] = s_bc(0.0f); acc[i][1] = s_bc(0.0f); }
        for (int l = l0; l < l1; l++) {
            const float *xp = x + (size_t)l * ldx + c;
            s_vec x0 = s_ld(xp), x1 = s_ld(xp + S_VL);
            S_UNROLL for (int i = 0; i < R; i++) {
                s_vec pv = s_bc(p[(size_t)i * pi + (size_t)l * pl]);
                acc[i][0] += pv * x0;
                acc[i][1] += pv * x1;
            }
        }
        S_UNROLL for (int i = 0; i < R; i++) {
            float *op = o + (size_t)i * ldo + c;
            if (accumulate) { acc[i][0] += s_ld(op); acc[i][1] += s_ld(op + S_VL); }
            s_st(op, acc[i][0]);
            s_st(op + S_VL, acc[i][1]);
        }
    }
    if (c < D) {   /* one vector left */
        s_vec acc[8];
        S_UNROLL for (int i = 0; i < R; i++) acc[i] = s_bc(0.0f);
        for (int l = l0; l < l1; l++) {
            s_vec x0 = s_ld(x + (size_t)l * ldx + c);
            S_UNROLL for (int i = 0; i < R; i++) acc[i] += s_bc(p[(size_t)i * pi + (size_t)l * pl]) * x0;
        }
        S_UNROLL for (int i = 0; i < R; i++) {
            float *op = o + (size_t)i * ldo + c;
            if (accumulate) acc[i] += s_ld(op);
            s_st(op, acc[i]);
        }
    }
}

/* s_abt for any R in 1..4 with R a constant in each instance. */
S_AVX512 static void s_abt_rows(float *s, int lds, const float *a, int lda, const float *bt, int ldb,
                       int D, int jn, int R)
{
    switch (R) {
    case 4: s_abt(s, lds, a, lda, bt, ldb, D, jn, 4); break;
    case 3: s_abt(s, lds, a, lda, bt, ldb, D, jn, 3); break;
    case 2: s_abt(s, lds, a, lda, bt, ldb, D, jn, 2); break;
    default: s_abt(s, lds, a, lda, bt, ldb, D, jn, 1); break;
    }
}

/* s_pb over n rows (any n), in blocks of 8 and a single-row tail.  Row i of
 * the output sums l over [l0, l1(i)), with l1(i) = lend(i) given as
 * lstep * (i_block_end) + lbase: see the callers. */
typedef struct {
    int pi, pl;       /* strides of p along output rows and along l */
    int causal;       /* 1: row i sums l in [0, i_block_end); 2: l in [i_block_start, n) */
} s_pb_shape;

S_AVX512 static void s_pb_rows(float *o, int ldo, const float *p, const float *x, int ldx, int D, int n,
                      const s_pb_shape *sh, int accumulate)
{
    int i0 = 0;
    for (; i0 + 8 <= n; i0 += 8) {
        int l0 = sh->causal == 1 ? 0 : i0, l1 = sh->causal == 1 ? i0 + 8 : n;
        s_pb(o + (size_t)i0 * ldo, ldo, p + (size_t)i0 * sh->pi, sh->pi, sh->pl, x, ldx, D, l0, l1, 8, accumulate);
    }
    for (; i0 < n; i0++) {
        int l0 = sh->causal == 1 ? 0 : i0, l1 = sh->causal == 1 ? i0 + 1 : n;
        s_pb(o + (size_t)i0 * ldo, ldo, p + (size_t)i0 * sh->pi, sh->pi, sh->pl, x, ldx, D, l0, l1, 1, accumulate);
    }
}

/* dst[j][r] = src[r][j] for r < R, j < jn: R (<= 4) rows of src (stride
 * lds) stored as columns [0, R) of jn rows of dst (stride ldd).  Four rows
 * go 16 columns at a time: a 4 x 4 transpose in each 128-bit lane, then one
 * 16-byte store per column. */
S_AVX512 static void s_put_t4(float *restrict dst, int ldd, const float *restrict src, int lds, int R, int jn)
{
    int j0 = R == 4 ? jn - jn % S_VL : 0;
    for (int j = j0; j < jn; j++)
        for (int r = 0; r < R; r++) dst[(size_t)j * ldd + r] = src[(size_t)r * lds + j];
    /* interleave pairs of rows, then pairs of pairs (__builtin_shufflevector: gcc >= 12 and clang) */
#define S_LO(a, b) __builtin_shufflevector(a, b, 0, 16, 1, 17, 4, 20, 5, 21, 8, 24, 9, 25, 12, 28, 13, 29)
#define S_HI(a, b) __builtin_shufflevector(a, b, 2, 18, 3, 19, 6, 22, 7, 23, 10, 26, 11, 27, 14, 30, 15, 31)
#define S_LO2(a, b) __builtin_shufflevector(a, b, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29)
#define S_HI2(a, b) __builtin_shufflevector(a, b, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31)
    for (int j = 0; j < j0; j += S_VL) {
        s_vec a0 = s_ld(src + j), a1 = s_ld(src + (size_t)lds + j);
        s_vec a2 = s_ld(src + 2 * (size_t)lds + j), a3 = s_ld(src + 3 * (size_t)lds + j);
        s_vec u0 = S_LO(a0, a1), u1 = S_HI(a0, a1);
        s_vec u2 = S_LO(a2, a3), u3 = S_HI(a2, a3);
        s_vec t[4] = {S_LO2(u0, u2), S_HI2(u0, u2), S_LO2(u1, u3), S_HI2(u1, u3)};
        /* lane k of t[c] is column j + 4k + c */
        for (int k = 0; k < 4; k++)
            for (int c = 0; c < 4; c++)
                __builtin_memcpy(dst + (size_t)(j + 4 * k + c) * ldd, (const float *)&t[c] + 4 * k, 16);
    }
#undef S_LO
#undef S_HI
#undef S_LO2
#undef S_HI2
}

/* bt (D x ldb) = the transpose of x's first T rows of D floats (row stride
 * ldx); columns [T, ldb) zeroed. */
S_AVX512 static void s_pack_t(float *restrict bt, int ldb, const float *restrict x, int ldx, int T, int D)
{
    for (int t = 0; t < T; t += 4)
        s_put_t4(bt + t, ldb, x + (size_t)t * ldx, ldx, T - t < 4 ? T - t : 4, D);
    for (int d = 0; d < D; d++)
        memset(bt + (size_t)d * ldb + T, 0, (size_t)(ldb - T) * sizeof(float));
}

/* cond ? a : b lane by lane; cond lanes are -1 (true) or 0. */
S_AVX512 static inline s_vec s_vsel(s_ivec cond, s_vec a, s_vec b)
{
    return (s_vec)((cond & (s_ivec)a) | (~cond & (s_ivec)b));
}

/* e^x lane by lane: s_expf's algorithm (vecmath.h) on whole vectors. */
S_AVX512 static inline s_vec s_vexp(s_vec x)
{
    x = s_vsel(x < s_bc(-87.0f), s_bc(-87.0f), x);
    x = s_vsel(x > s_bc(88.0f), s_bc(88.0f), x);
    s_vec t = x * 1.44269504088896341f + 12582912.0f;
    s_vec n = t - 12582912.0f;
    s_vec r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    s_vec p = s_bc(1.9875691500e-4f);
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * (r * r) + r + 1.0f;
    s_ivec k = (s_ivec)t - 0x4B400000;
    return p * (s_vec)((k + 127) << 23);
}

S_AVX512 static inline float s_vsum(s_vec v)
{
    float s = 0.0f;
    for (int i = 0; i < S_VL; i++) s += v[i];
    return s;
}

/* Causal softmax of row t from its raw scores s[0, jn) (jn a multiple of 16,
 * jn > t): p[0, T) = softmax(scale * s[0, t]) then zeros.  s is overwritten. */
S_AVX512 static void s_causal_softmax(float *restrict p, float *restrict s, int t, int jn, int T, float scale)
{
    s_ivec lane = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    s_vec mx = s_bc(-FLT_MAX);
    for (int i = 0; i < jn; i += S_VL) {
        s_ivec valid = lane + i <= t;
        s_vec x = s_vsel(valid, s_ld(s + i) * scale, s_bc(-FLT_MAX));
        s_st(s + i, x);
        mx = s_vsel(x > mx, x, mx);
    }
    float m = mx[0];
    for (int j = 1; j < S_VL; j++) m = mx[j] > m ? mx[j] : m;
    s_vec sum = s_bc(0.0f);
    for (int i = 0; i < jn; i += S_VL) {
        s_ivec valid = lane + i <= t;
        s_vec e = s_vsel(valid, s_vexp(s_ld(s + i) - m), s_bc(0.0f));
        s_st(s + i, e);
        sum += e;
    }
    s_vec inv = s_bc(1.0f / s_vsum(sum));
    int n = jn < T ? jn : T, i = 0;
    for (; i + S_VL <= n; i += S_VL) s_st(p + i, s_ld(s + i) * inv);
    for (; i < n; i++) p[i] = s[i] * inv[0];
    if (n < T) memset(p + n, 0, (size_t)(T - n) * sizeof(float));
}

/* Softmax backward of row t, scaled: d[j] = scale * p[j] (d[j] - p . d) for
 * j <= t, 0 for t < j < jn (jn a multiple of S_LANES). */
S_AVX512 static void s_causal_softmax_back(float *restrict d, const float *restrict p, int t, int jn, int T,
                                  float scale)
{
    float dot = s_dot(p, d, t + 1);
    int n = jn < T ? jn : T;
    int i = 0;
    for (; i + S_LANES <= n; i += S_LANES)
        for (int j = 0; j < S_LANES; j++)
            d[i + j] = s_select(i + j <= t, scale * (p[i + j] * (d[i + j] - dot)), 0.0f);
    for (; i < jn; i++) d[i] = i <= t ? scale * (p[i] * (d[i] - dot)) : 0.0f;
}

/* Prefetch into L2 rows [r0, r0 + R) of nf row-major operands that share
 * the row stride ld: n floats from each base (one prefetch per 16 floats, a
 * cache line); write: for writing. */
S_INLINE void s_prefetch_rows(const float *const *base, int nf, int ld, int r0, int R, int n, const int write)
{
    for (int f = 0; f < nf; f++)
        for (int r = r0; r < r0 + R; r++)
            for (int d = 0; d < n; d += S_VL) {
                if (write) __builtin_prefetch(base[f] + (size_t)r * ld + d, 1, 2);
                else __builtin_prefetch(base[f] + (size_t)r * ld + d, 0, 2);
            }
}

/* ---------------------------------------------------------------------------
 * The fast path, one head.  Scratch (TP = T rounded up to 16): forward
 * k^T (hs x TP) and scores (4 x TP); backward v^T (hs x TP) and dscores
 * (T x TP).  (Packing dout, k, q or v contiguously too was measured: no
 * faster at gpt-small, 10% slower at gpt-tiny.) */

S_AVX512 static void s_fast_forward_head(float *restrict out, float *restrict att, float *restrict scratch,
                                const float *restrict qkv, int T, int C, int NH, int bh, int next)
{
    const int hs = C / NH, C3 = 3 * C, b = bh / NH, h = bh % NH, TP = s_round16(T);
    const float scale = 1.0f / sqrtf((float)hs);
    const float *q = qkv + (size_t)b * T * C3 + (size_t)h * hs, *k = q + C, *v = q + 2 * C;
    float *a = att + (size_t)bh * T * T;
    float *kt = scratch, *rows = kt + (size_t)hs * TP;
    s_pack_t(kt, TP, k, C3, T, hs);
    /* the next head's q, k, v, read cold otherwise, come in while this one computes
     * (the last head points at itself: no address past the arrays is formed) */
    const int bn = next ? bh + 1 : bh, nb = bn / NH, nh = bn % NH;
    const float *nq = qkv + (size_t)nb * T * C3 + (size_t)nh * hs;
    const float *npf[3] = {nq, nq + C, nq + 2 * C};
    for (int r0 = 0; r0 < T; r0 += 4) {
        int R = T - r0 < 4 ? T - r0 : 4, jn = s_round16(r0 + R);
        if (next) s_prefetch_rows(npf, 3, C3, r0, R, hs, 0);
        s_abt_rows(rows, TP, q + (size_t)r0 * C3, C3, kt, TP, hs, jn, R);
        for (int r = 0; r < R; r++)
            s_causal_softmax(a + (size_t)(r0 + r) * T, rows + (size_t)r * TP, r0 + r, jn, T, scale);
    }
    /* out[t] = sum over j <= t of att[t][j] v[j] */
    const s_pb_shape pv = {T, 1, 1};
    s_pb_rows(out + (size_t)b * T * C + (size_t)h * hs, C, a, v, C3, hs, T, &pv, 0);
}

S_AVX512 static void s_fast_backward_head(float *restrict dqkv, float *restrict scratch, const float *restrict dout,
                                 const float *restrict qkv, const float *restrict att,
                                 int T, int C, int NH, int bh, int accumulate, int next)
{
    const int hs = C / NH, C3 = 3 * C, b = bh / NH, h = bh % NH, TP = s_round16(T);
    const float scale = 1.0f / sqrtf((float)hs);
    const size_t off = (size_t)b * T * C3 + (size_t)h * hs;
    const float *q = qkv + off, *k = q + C, *v = q + 2 * C;
    float *dq = dqkv + off, *dk = dq + C, *dv = dq + 2 * C;
    const float *a = att + (size_t)bh * T * T;
    const float *dO = dout + (size_t)b * T * C + (size_t)h * hs;
    float *vt = scratch, *ds = vt + (size_t)hs * TP;
    s_pack_t(vt, TP, v, C3, T, hs);
    /* the next head's q, k, v and dout, read cold otherwise, come in while this one computes
     * (the last head points at itself: no address past the arrays is formed) */
    const int bn = next ? bh + 1 : bh, nb = bn / NH, nh = bn % NH;
    const float *nq = qkv + (size_t)nb * T * C3 + (size_t)nh * hs;
    const float *npf[3] = {nq, nq + C, nq + 2 * C}, *ndo[1] = {dout + (size_t)nb * T * C + (size_t)nh * hs};
    const float *nat[1] = {a + (size_t)(bn - bh) * T * T}, *ndq[3] = {dq + (nq - q), dk + (nq - q), dv + (nq - q)};
    /* ds = scale * softmax'(datt), datt = dout v^T, by blocks of 4 rows */
    for (int r0 = 0; r0 < T; r0 += 4) {
        int R = T - r0 < 4 ? T - r0 : 4, jn = s_round16(r0 + R);
        if (next) {
            s_prefetch_rows(npf, 3, C3, r0, R, hs, 0);
            s_prefetch_rows(ndo, 1, C, r0, R, hs, 0);
            s_prefetch_rows(nat, 1, T, r0, R, jn < T ? jn : T, 0);
            s_prefetch_rows(ndq, 3, C3, r0, R, hs, 1);
        }
        s_abt_rows(ds + (size_t)r0 * TP, TP, dO + (size_t)r0 * C, C, vt, TP, hs, jn, R);
        for (int r = 0; r < R; r++)
            s_causal_softmax_back(ds + (size_t)(r0 + r) * TP, a + (size_t)(r0 + r) * T, r0 + r, jn, T, scale);
    }
    /* dv[j] += sum over t >= j of att[t][j] dout[t] */
    const s_pb_shape atT = {1, T, 2};
    s_pb_rows(dv, C3, a, dO, C, hs, T, &atT, accumulate);
    /* dq[t] += sum over j <= t of ds[t][j] k[j] */
    const s_pb_shape dsk = {TP, 1, 1};
    s_pb_rows(dq, C3, ds, k, C3, hs, T, &dsk, accumulate);
    /* dk[j] += sum over t >= j of ds[t][j] q[t] */
    const s_pb_shape dsTq = {1, TP, 2};
    s_pb_rows(dk, C3, ds, q, C3, hs, T, &dsTq, accumulate);
}

#endif /* S_FAST */

/* ---------------------------------------------------------------------------
 * Public. */

int attention_fast(int C, int NH)
{
#ifdef S_FAST
    return NH > 0 && C % NH == 0 && (C / NH) % S_VL == 0 && cpu_level() >= CPU_AVX512;
#else
    (void)C; (void)NH;
    return 0;
#endif
}

size_t attention_scratch_floats(int T, int C, int NH)
{
    size_t TP = (size_t)s_round16(T), hs = (size_t)(C / NH);
    size_t fwd = hs * TP + 4 * TP, bwd = hs * TP + (size_t)T * TP, ref = (size_t)T * T;
    size_t n = fwd > bwd ? fwd : bwd;
    return n > ref ? n : ref;
}

void attention_forward_heads(float *out, float *att, float *scratch, const float *qkv,
                             int B, int T, int C, int NH, int bh0, int bh1)
{
    assert(NH > 0 && C % NH == 0 && 0 <= bh0 && bh1 <= B * NH);
    (void)scratch;   /* the reference forward needs none */
    const int fast = attention_fast(C, NH);
    for (int bh = bh0; bh < bh1; bh++) {
#ifdef S_FAST
        if (fast) { s_fast_forward_head(out, att, scratch, qkv, T, C, NH, bh, bh + 1 < bh1); continue; }
#endif
        (void)fast;
        s_ref_forward_head(out, att, qkv, B, T, C, NH, bh);
    }
}

void attention_backward_heads(float *dqkv, float *scratch, const float *dout, const float *qkv,
                              const float *att, int B, int T, int C, int NH, int bh0, int bh1,
                              int accumulate)
{
    assert(NH > 0 && C % NH == 0 && 0 <= bh0 && bh1 <= B * NH);
    const int hs = C / NH, C3 = 3 * C, fast = attention_fast(C, NH);
    for (int bh = bh0; bh < bh1; bh++) {
#ifdef S_FAST
        if (fast) {
            s_fast_backward_head(dqkv, scratch, dout, qkv, att, T, C, NH, bh, accumulate, bh + 1 < bh1);
            continue;
        }
#endif
        if (!accumulate) {   /* the reference adds: clear this head's q, k, v columns first */
            float *d = dqkv + (size_t)(bh / NH) * T * C3 + (size_t)(bh % NH) * hs;
            for (int t = 0; t < T; t++)
                for (int part = 0; part < 3; part++)
                    memset(d + (size_t)t * C3 + (size_t)part * C, 0, (size_t)hs * sizeof(float));
        }
        s_ref_backward_head(dqkv, scratch, dout, qkv, att, B, T, C, NH, bh);
    }
}

void attention_forward(float *out, float *att, float *scratch, const float *qkv,
                       int B, int T, int C, int NH)
{
    attention_forward_heads(out, att, scratch, qkv, B, T, C, NH, 0, B * NH);
}

void attention_backward(float *dqkv, float *scratch, const float *dout, const float *qkv,
                        const float *att, int B, int T, int C, int NH)
{
    attention_backward_heads(dqkv, scratch, dout, qkv, att, B, T, C, NH, 0, B * NH, 1);
}
