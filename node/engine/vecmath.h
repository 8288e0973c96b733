/* vecmath.h: the small float helpers the kernels share (layers.c,
 * attention.c), written for gcc -O2, whose vectorizer only takes loops with
 * a fixed trip count: each loop runs over blocks of S_LANES elements with a
 * fixed inner loop, then a scalar tail.  Float selects use bit masks
 * (s_select) because a float comparison under a `?:` is a possible trap for
 * gcc and blocks vectorization.  exp is a branch-free polynomial (s_expf) so
 * that softmax and gelu vectorize too; its error is below 1 ulp on [-87, 88].
 * Internal to node/engine. */
#ifndef BRIGADE_VECMATH_H
#define BRIGADE_VECMATH_H
#include "compress/cpu.h"

#include <stdint.h>
#include <string.h>

#define S_LANES 8          /* block width of the vectorizable loops */
#define S_WIDE 16          /* block width of element-wise loops (no sums, so no bits depend on it):
                            * one AVX-512 vector, two AVX2 ones */

/* Loops compiled three times.  The build targets baseline x86-64 (SSE2,
 * 4 floats a vector); a loop whose work is arithmetic (gelu's exp, AdamW's
 * square root and division, sums of squares) also gets an AVX2 and an
 * AVX-512 copy: its body is an S_BODY function, S_COPIES(body, (params),
 * (args)) makes the copies, and the public function calls
 * S_CALL_BEST(body, (args)), which picks one by cpu_level()
 * (compress/cpu.h).  The copies are the same C, built without contraction
 * (-std=c11 means -ffp-contract=off; attention.c, built with contraction,
 * uses S_AVX512 for its own kernels only) and summing in the same order
 * (S_LANES accumulators), so they give the same bits; tests/test_layers.c
 * and tests/test_model.c check it.  The AVX-512 copies may use whole
 * 16-float registers (prefer-vector-width=512), which loops in blocks of
 * S_WIDE fill. */
#if defined(__x86_64__) && defined(__GNUC__)
#define S_HAVE_X86 1
#define S_AVX2 __attribute__((target("avx2,fma")))
#if defined(__clang__)   /* clang's spelling of the 512-bit preference (make fuzz builds with it) */
#define S_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma"), min_vector_width(512)))
#else
#define S_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma,prefer-vector-width=512")))
#endif
#define S_COPIES(name, params, args) \
    S_AVX2 static void name##_avx2 params { name args; } \
    S_AVX512 static void name##_avx512 params { name args; }
#define S_CALL_BEST(name, args) do {                 \
        cpu_level_t level_ = cpu_level();            \
        if (level_ >= CPU_AVX512) name##_avx512 args; \
        else if (level_ >= CPU_AVX2) name##_avx2 args; \
        else name args;                              \
    } while (0)
#else
#define S_HAVE_X86 0
#define S_COPIES(name, params, args)
#define S_CALL_BEST(name, args) name args
#endif
#define S_BODY static inline __attribute__((always_inline))

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

/* ---------------------------------------------------------------------------
 * Vector helpers over n floats. */

/* y += x */
static inline void s_add(float *restrict y, const float *restrict x, int n) {
    int i = 0;
    for (; i + S_LANES <= n; i += S_LANES)
        for (int j = 0; j < S_LANES; j++) y[i + j] += x[i + j];
    for (; i < n; i++) y[i] += x[i];
}

/* y += a * x */
static inline void s_axpy(float *restrict y, float a, const float *restrict x, int n) {
    int i = 0;
    for (; i + S_LANES <= n; i += S_LANES)
        for (int j = 0; j < S_LANES; j++) y[i + j] += a * x[i + j];
    for (; i < n; i++) y[i] += a * x[i];
}

static inline float s_sum(const float *restrict x, int n) {
    float acc[S_LANES] = {0};
    int i = 0;
    for (; i + S_LANES <= n; i += S_LANES)
        for (int j = 0; j < S_LANES; j++) acc[j] += x[i + j];
    float s = 0.0f;
    for (; i < n; i++) s += x[i];
    for (int j = 0; j < S_LANES; j++) s += acc[j];
    return s;
}

static inline float s_dot(const float *restrict x, const float *restrict y, int n) {
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
static inline float s_max(const float *restrict x, int n) {
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
static inline float s_softmax_inplace(float *restrict x, int n, float *mx) {
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
#endif
