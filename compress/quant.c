/* quant.c: block quantizers and float conversions.  See quant.h.
 *
 * The build targets baseline x86-64; the SSE4.1 paths and the F16C fp16
 * conversion are compiled with target attributes and chosen per call by
 * cpu_level() (compress/cpu.h; BRIGADE_CPU=generic turns them off).  They
 * compute exactly the same float operations in the same order as the plain
 * C code, so the output bits do not depend on the CPU: tests/test_codec.c
 * checks every level this CPU runs against the *_ref functions. */
#include "compress/quant.h"
#include "compress/cpu.h"

#include <math.h>
#include <string.h>

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#define S_X86 1
#include <immintrin.h>
#define S_SSE41 __attribute__((target("sse4.1")))
#define S_F16C __attribute__((target("sse4.1,avx,f16c")))
#else
#define S_X86 0
#endif

#define S_RNE_MAGIC 12582912.0f   /* 1.5 * 2^23: (v + M) - M rounds to nearest even */

/* ---------------------------------------------------------------- scalars */

uint16_t quant_f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u)                       /* Inf or NaN */
        return (uint16_t)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0));
    if (ax >= 0x477ff000u)                       /* rounds to >= 65536: Inf */
        return (uint16_t)(sign | 0x7c00u);
    if (ax >= 0x38800000u) {                     /* normal half */
        uint32_t m = ax - 0x38000000u + 0xfffu + ((ax >> 13) & 1u);
        return (uint16_t)(sign | (m >> 13));
    }
    /* subnormal half or zero: adding 0.5 puts the half ulp (2^-24) at the
     * float's last mantissa bit and the FPU rounds to nearest even */
    float a;
    memcpy(&a, &ax, 4);
    a += 0.5f;
    uint32_t b;
    memcpy(&b, &a, 4);
    return (uint16_t)(sign | (b - 0x3f000000u));
}

float quant_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t em = h & 0x7fffu;
    uint32_t x;
    if (em >= 0x7c00u) {
        x = sign | 0x7f800000u | ((em & 0x3ffu) << 13);
    } else if (em >= 0x400u) {
        x = sign | ((em << 13) + 0x38000000u);
    } else {
        float f = (float)em * 0x1p-24f;
        memcpy(&x, &f, 4);
        x |= sign;
    }
    float f;
    memcpy(&f, &x, 4);
    return f;
}

uint16_t quant_f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u)         /* NaN stays NaN */
        return (uint16_t)((u >> 16) | 0x40u);
    uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    if ((r & 0x7f80u) == 0x7f80u && (u & 0x7f800000u) != 0x7f800000u)
        r = u >> 16;                             /* finite must not round to Inf */
    return (uint16_t)r;
}

float quant_bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* max(m, |x[i]| bits for i in [i, n)) */
static inline uint32_t s_absmax_bits_c(const float *x, size_t i, size_t n, uint32_t m)
{
    for (; i < n; i++) {
        uint32_t u;
        memcpy(&u, x + i, 4);
        u &= 0x7fffffffu;
        m = u > m ? u : m;
    }
    return m;
}

#if S_X86
S_SSE41 static uint32_t s_absmax_bits_sse41(const float *x, size_t n)
{
    size_t i = 0;
    __m128i vm = _mm_setzero_si128();
    const __m128i mask = _mm_set1_epi32(0x7fffffff);
    for (; i + 4 <= n; i += 4) {
        __m128i v = _mm_loadu_si128((const __m128i *)(x + i));
        vm = _mm_max_epu32(vm, _mm_and_si128(v, mask));
    }
    vm = _mm_max_epu32(vm, _mm_shuffle_epi32(vm, _MM_SHUFFLE(1, 0, 3, 2)));
    vm = _mm_max_epu32(vm, _mm_shuffle_epi32(vm, _MM_SHUFFLE(2, 3, 0, 1)));
    return s_absmax_bits_c(x, i, n, (uint32_t)_mm_cvtsi128_si32(vm));
}
#endif

uint32_t quant_absmax_bits(const float *x, size_t n)
{
#if S_X86
    if (cpu_level() >= CPU_SSE41)
        return s_absmax_bits_sse41(x, n);
#endif
    return s_absmax_bits_c(x, 0, n, 0);
}

static inline uint32_t s_sr_hash(uint32_t s, uint32_t i)
{
    uint32_t h = i * 0x9e3779b9u + s;
    h ^= h >> 16;
    h *= 0x7feb352du;
    h ^= h >> 15;
    h *= 0x846ca68bu;
    h ^= h >> 16;
    return h;
}

static inline uint32_t s_seed32(uint64_t seed)
{
    return (uint32_t)(seed ^ (seed >> 32)) * 0x85ebca6bu + 0x2545f491u;
}

float quant_sr_uniform(uint64_t seed, uint64_t i)
{
    return (float)(s_sr_hash(s_seed32(seed), (uint32_t)i) >> 8) * 0x1p-24f;
}

/* One code from v (already divided by the scale). */
static inline float s_round(float v, uint64_t seed, uint64_t i)
{
    if (seed == 0) {
        float r = v + S_RNE_MAGIC;
        return r - S_RNE_MAGIC;
    }
    float t = v + quant_sr_uniform(seed, i);
    return floorf(t);
}

static inline float s_clampf(float r, float lim)
{
    r = r > lim ? lim : r;
    return r < -lim ? -lim : r;
}

/* fp16 bits of d >= 0 rounded toward zero (d < 65536). */
static inline uint16_t s_f16_rtz(float d)
{
    uint32_t ax;
    memcpy(&ax, &d, 4);
    if (ax >= 0x477fe000u)
        return 0x7bffu;
    if (ax >= 0x38800000u)
        return (uint16_t)((ax - 0x38000000u) >> 13);
    return (uint16_t)(uint32_t)(d * 0x1p24f);
}

/* The block scale for amax (in x units): stored fp16 bits, and 1/scale.
 * The scale is rounded toward zero, so qmax * scale <= amax: a decoded value
 * never exceeds the block's amax (no overflow at the top of the float
 * range); the codes clamp instead, which costs at most qmax*2^-10 of d. */
static inline uint16_t s_scale(float amax, float p2ne, float qmax, float *id)
{
    float a = amax * p2ne;
    float d = a / qmax;
    uint16_t h = s_f16_rtz(d);
    float hd = quant_f16_to_f32(h);
    *id = hd > 0.0f ? 1.0f / hd : 0.0f;
    return h;
}

/* max(amax, |x[j]| for j in [j, m)) */
static inline float s_absmax_c(const float *x, size_t j, size_t m, float amax)
{
    for (; j < m; j++) {
        float a = fabsf(x[j]);
        amax = a > amax ? a : amax;
    }
    return amax;
}

#if S_X86
S_SSE41 static inline float s_absmax_sse41(const float *x, size_t m)
{
    size_t j = 0;
    const __m128 sign = _mm_set1_ps(-0.0f);
    __m128 va = _mm_setzero_ps();
    for (; j + 4 <= m; j += 4)
        va = _mm_max_ps(va, _mm_andnot_ps(sign, _mm_loadu_ps(x + j)));
    va = _mm_max_ps(va, _mm_movehl_ps(va, va));
    va = _mm_max_ss(va, _mm_shuffle_ps(va, va, 1));
    return s_absmax_c(x, j, m, _mm_cvtss_f32(va));
}
#endif

/* ------------------------------------------------------------ reference */

void quant_q8_ref(block_q8_t *y, const float *x, size_t nb, float p2ne,
                  uint64_t seed, uint64_t i0)
{
    for (size_t b = 0; b < nb; b++) {
        const float *xb = x + b * QK;
        float amax = 0.0f;
        for (int j = 0; j < QK; j++) {
            float a = fabsf(xb[j]);
            amax = a > amax ? a : amax;
        }
        float id;
        y[b].d = s_scale(amax, p2ne, 127.0f, &id);
        for (int j = 0; j < QK; j++) {
            float v = xb[j] * p2ne;
            v = v * id;
            float r = s_clampf(s_round(v, seed, i0 + b * QK + (uint64_t)j), 127.0f);
            y[b].q[j] = (int8_t)(int)r;
        }
    }
}

int dequant_q8_ref(float *y, const block_q8_t *x, size_t nb, float p2e)
{
    int bad = 0;
    for (size_t b = 0; b < nb; b++) {
        float d = quant_f16_to_f32(x[b].d);
        for (int j = 0; j < QK; j++) {
            bad |= x[b].q[j] == -128;
            float v = (float)x[b].q[j] * d;
            y[b * QK + j] = v * p2e;
        }
    }
    return bad ? QUANT_E_CODE : 0;
}

void quant_q4_ref(block_q4_t *y, const float *x, size_t nb, float p2ne,
                  uint64_t seed, uint64_t i0)
{
    for (size_t b = 0; b < nb; b++) {
        const float *xb = x + b * QK;
        float amax = 0.0f;
        for (int j = 0; j < QK; j++) {
            float a = fabsf(xb[j]);
            amax = a > amax ? a : amax;
        }
        float id;
        y[b].d = s_scale(amax, p2ne, 7.0f, &id);
        for (int j = 0; j < QK / 2; j++) {
            int c[2];
            for (int k = 0; k < 2; k++) {
                float v = xb[2 * j + k] * p2ne;
                v = v * id;
                float r = s_clampf(s_round(v, seed, i0 + b * QK + 2 * (uint64_t)j + k), 7.0f);
                c[k] = (int)r + 8;
            }
            y[b].qs[j] = (uint8_t)(c[0] | (c[1] << 4));
        }
    }
}

int dequant_q4_ref(float *y, const block_q4_t *x, size_t nb, float p2e)
{
    int bad = 0;
    for (size_t b = 0; b < nb; b++) {
        float d = quant_f16_to_f32(x[b].d);
        for (int j = 0; j < QK / 2; j++) {
            bad |= (x[b].qs[j] & 0x0f) == 0 || (x[b].qs[j] >> 4) == 0;
            float v0 = (float)((x[b].qs[j] & 0x0f) - 8) * d;
            float v1 = (float)((x[b].qs[j] >> 4) - 8) * d;
            y[b * QK + 2 * j] = v0 * p2e;
            y[b * QK + 2 * j + 1] = v1 * p2e;
        }
    }
    return bad ? QUANT_E_CODE : 0;
}

/* ---------------------------------------------------------------- planar */

/* 1 when the SSE4.1 paths run. */
static inline int s_sse41(void)
{
#if S_X86
    return cpu_level() >= CPU_SSE41;
#else
    return 0;
#endif
}

/* Codes of x[j, m) into q (int8); the plain path and the tail of the fast one. */
static void s_q8_block_c(int8_t *q, const float *x, size_t j, size_t m, float p2ne, float id,
                         uint64_t seed, uint64_t i0)
{
    for (; j < m; j++) {
        float v = x[j] * p2ne;
        v = v * id;
        q[j] = (int8_t)(int)s_clampf(s_round(v, seed, i0 + j), 127.0f);
    }
}

/* Codes of x[j, m) into q (int4 nibbles; j even). */
static void s_q4_block_c(uint8_t *q, const float *x, size_t j, size_t m, float p2ne, float id,
                         uint64_t seed, uint64_t i0)
{
    for (; j < m; j++) {
        float v = x[j] * p2ne;
        v = v * id;
        int c = (int)s_clampf(s_round(v, seed, i0 + j), 7.0f) + 8;
        if (j % 2 == 0)
            q[j / 2] = (uint8_t)c;                   /* high nibble 0 until set */
        else
            q[j / 2] = (uint8_t)(q[j / 2] | (c << 4));
    }
}

#if S_X86
/* 16 codes as int32x4 x4 from x[0..16): round(x * p2ne * id). */
S_SSE41 static inline void s_codes16(__m128i c[4], const float *x, __m128 vp, __m128 vid,
                                     uint64_t seed, uint32_t s32, uint32_t i)
{
    for (int k = 0; k < 4; k++) {
        __m128 v = _mm_mul_ps(_mm_mul_ps(_mm_loadu_ps(x + 4 * k), vp), vid);
        if (seed == 0) {
            c[k] = _mm_cvtps_epi32(v);           /* MXCSR: nearest even */
        } else {
            uint32_t ik = i + 4 * (uint32_t)k;
            __m128i h = _mm_add_epi32(
                _mm_mullo_epi32(_mm_setr_epi32((int)ik, (int)(ik + 1), (int)(ik + 2), (int)(ik + 3)),
                                _mm_set1_epi32((int)0x9e3779b9u)),
                _mm_set1_epi32((int)s32));
            h = _mm_xor_si128(h, _mm_srli_epi32(h, 16));
            h = _mm_mullo_epi32(h, _mm_set1_epi32(0x7feb352d));
            h = _mm_xor_si128(h, _mm_srli_epi32(h, 15));
            h = _mm_mullo_epi32(h, _mm_set1_epi32((int)0x846ca68bu));
            h = _mm_xor_si128(h, _mm_srli_epi32(h, 16));
            __m128 u = _mm_mul_ps(_mm_cvtepi32_ps(_mm_srli_epi32(h, 8)), _mm_set1_ps(0x1p-24f));
            c[k] = _mm_cvtps_epi32(_mm_floor_ps(_mm_add_ps(v, u)));
        }
    }
}

S_SSE41 static void s_q8_block_sse41(int8_t *q, const float *x, size_t m, float p2ne, float id,
                                     uint64_t seed, uint64_t i0)
{
    size_t j = 0;
    const __m128 vp = _mm_set1_ps(p2ne), vid = _mm_set1_ps(id);
    const __m128i lo = _mm_set1_epi8(-127);
    uint32_t s32 = s_seed32(seed);
    for (; j + 16 <= m; j += 16) {
        __m128i c[4];
        s_codes16(c, x + j, vp, vid, seed, s32, (uint32_t)(i0 + j));
        __m128i b = _mm_packs_epi16(_mm_packs_epi32(c[0], c[1]), _mm_packs_epi32(c[2], c[3]));
        _mm_storeu_si128((__m128i *)(q + j), _mm_max_epi8(b, lo));
    }
    s_q8_block_c(q, x, j, m, p2ne, id, seed, i0);
}

S_SSE41 static void s_q4_block_sse41(uint8_t *q, const float *x, size_t m, float p2ne, float id,
                                     uint64_t seed, uint64_t i0)
{
    size_t j = 0;
    const __m128 vp = _mm_set1_ps(p2ne), vid = _mm_set1_ps(id);
    const __m128i lo = _mm_set1_epi8(-7), hi = _mm_set1_epi8(7), off = _mm_set1_epi8(8);
    const __m128i m0f = _mm_set1_epi16(0x000f), mf0 = _mm_set1_epi16(0x00f0);
    uint32_t s32 = s_seed32(seed);
    for (; j + 16 <= m; j += 16) {
        __m128i c[4];
        s_codes16(c, x + j, vp, vid, seed, s32, (uint32_t)(i0 + j));
        __m128i b = _mm_packs_epi16(_mm_packs_epi32(c[0], c[1]), _mm_packs_epi32(c[2], c[3]));
        b = _mm_add_epi8(_mm_min_epi8(_mm_max_epi8(b, lo), hi), off);
        __m128i t = _mm_or_si128(_mm_and_si128(b, m0f), _mm_and_si128(_mm_srli_epi16(b, 4), mf0));
        _mm_storel_epi64((__m128i *)(q + j / 2), _mm_packus_epi16(t, t));
    }
    s_q4_block_c(q, x, j, m, p2ne, id, seed, i0);
}
#endif

void quant_q8(uint16_t *d, int8_t *q, const float *x, size_t n, int bs,
              float p2ne, uint64_t seed)
{
    assert(bs >= 8 && bs % 8 == 0);
    size_t nb = (n + (size_t)bs - 1) / (size_t)bs;
    int fast = s_sse41();
    for (size_t b = 0; b < nb; b++) {
        size_t i0 = b * (size_t)bs, m = n - i0 < (size_t)bs ? n - i0 : (size_t)bs;
        float id;
#if S_X86
        if (fast) {
            d[b] = s_scale(s_absmax_sse41(x + i0, m), p2ne, 127.0f, &id);
            s_q8_block_sse41(q + i0, x + i0, m, p2ne, id, seed, i0);
            continue;
        }
#endif
        (void)fast;
        d[b] = s_scale(s_absmax_c(x + i0, 0, m, 0.0f), p2ne, 127.0f, &id);
        s_q8_block_c(q + i0, x + i0, 0, m, p2ne, id, seed, i0);
    }
}

void quant_q4(uint16_t *d, uint8_t *q, const float *x, size_t n, int bs,
              float p2ne, uint64_t seed)
{
    assert(bs >= 8 && bs % 8 == 0);
    size_t nb = (n + (size_t)bs - 1) / (size_t)bs;
    int fast = s_sse41();
    for (size_t b = 0; b < nb; b++) {
        size_t i0 = b * (size_t)bs, m = n - i0 < (size_t)bs ? n - i0 : (size_t)bs;
        float id;
#if S_X86
        if (fast) {
            d[b] = s_scale(s_absmax_sse41(x + i0, m), p2ne, 7.0f, &id);
            s_q4_block_sse41(q + i0 / 2, x + i0, m, p2ne, id, seed, i0);
            continue;
        }
#endif
        (void)fast;
        d[b] = s_scale(s_absmax_c(x + i0, 0, m, 0.0f), p2ne, 7.0f, &id);
        s_q4_block_c(q + i0 / 2, x + i0, 0, m, p2ne, id, seed, i0);
    }
}

float quant_max_scale(const uint16_t *d, size_t nb)
{
    uint16_t m = 0;
    for (size_t b = 0; b < nb; b++) {
        uint16_t a = (uint16_t)(d[b] & 0x7fffu);
        m = a > m ? a : m;
    }
    return m >= 0x7c00u ? INFINITY : quant_f16_to_f32(m);
}

static inline int s_bad_scale(uint16_t h)
{
    return (h & 0x8000u) || (h & 0x7c00u) == 0x7c00u;
}

/* y[j, m) from int8 codes; the plain path and the tail of the fast one.
 * Returns 1 if a code is -128 (outside the format), else 0. */
static int s_dq8_block_c(float *y, const int8_t *q, size_t j, size_t m, float s, float p2e)
{
    int bad = 0;
    for (; j < m; j++) {
        bad |= q[j] + 127;                            /* negative only for -128 */
        float v = (float)q[j] * s;
        y[j] = v * p2e;
    }
    return bad < 0;
}

/* y[j, m) from int4 nibbles (j even).  Returns 1 if a nibble is 0 (code
 * -8, outside the format), else 0. */
static int s_dq4_block_c(float *y, const uint8_t *q, size_t j, size_t m, float s, float p2e)
{
    int bad = 0;
    for (; j + 2 <= m; j += 2) {
        int c0 = (q[j / 2] & 0x0f) - 8, c1 = (q[j / 2] >> 4) - 8;
        bad |= (c0 + 7) | (c1 + 7);                   /* negative only for -8 */
        float v0 = (float)c0 * s, v1 = (float)c1 * s;
        y[j] = v0 * p2e;
        y[j + 1] = v1 * p2e;
    }
    if (j < m) {
        int c = (q[j / 2] & 0x0f) - 8;
        bad |= c + 7;
        float v = (float)c * s;
        y[j] = v * p2e;
    }
    return bad < 0;
}

#if S_X86
/* The plain paths' values and result, 16 codes per step. */
S_SSE41 static int s_dq8_block_sse41(float *y, const int8_t *q, size_t m, float s, float p2e)
{
    size_t j = 0;
    const __m128 vs = _mm_set1_ps(s), vp = _mm_set1_ps(p2e);
    const __m128i lo = _mm_set1_epi8(-128);
    __m128i least = _mm_setzero_si128();
    for (; j + 16 <= m; j += 16) {
        __m128i c = _mm_loadu_si128((const __m128i *)(q + j));
        least = _mm_min_epi8(least, c);
        for (int k = 0; k < 4; k++) {
            __m128 v = _mm_cvtepi32_ps(_mm_cvtepi8_epi32(c));
            _mm_storeu_ps(y + j + 4 * k, _mm_mul_ps(_mm_mul_ps(v, vs), vp));
            c = _mm_srli_si128(c, 4);
        }
    }
    return (_mm_movemask_epi8(_mm_cmpeq_epi8(least, lo)) != 0) | s_dq8_block_c(y, q, j, m, s, p2e);
}

S_SSE41 static int s_dq4_block_sse41(float *y, const uint8_t *q, size_t m, float s, float p2e)
{
    size_t j = 0;
    const __m128 vs = _mm_set1_ps(s), vp = _mm_set1_ps(p2e);
    const __m128i m0f = _mm_set1_epi8(0x0f), off = _mm_set1_epi8(8);
    __m128i least = m0f;
    for (; j + 16 <= m; j += 16) {
        __m128i raw = _mm_loadl_epi64((const __m128i *)(q + j / 2));
        __m128i lo = _mm_and_si128(raw, m0f);
        __m128i hi = _mm_and_si128(_mm_srli_epi16(raw, 4), m0f);
        __m128i n = _mm_unpacklo_epi8(lo, hi);
        least = _mm_min_epu8(least, n);
        __m128i c = _mm_sub_epi8(n, off);
        for (int k = 0; k < 4; k++) {
            __m128 v = _mm_cvtepi32_ps(_mm_cvtepi8_epi32(c));
            _mm_storeu_ps(y + j + 4 * k, _mm_mul_ps(_mm_mul_ps(v, vs), vp));
            c = _mm_srli_si128(c, 4);
        }
    }
    return (_mm_movemask_epi8(_mm_cmpeq_epi8(least, _mm_setzero_si128())) != 0) | s_dq4_block_c(y, q, j, m, s, p2e);
}
#endif

int dequant_q8(float *y, const uint16_t *d, const int8_t *q, size_t n, int bs,
               float p2e)
{
    assert(bs >= 8 && bs % 8 == 0);
    size_t nb = (n + (size_t)bs - 1) / (size_t)bs;
    int fast = s_sse41(), bad = 0;
    for (size_t b = 0; b < nb; b++) {
        if (s_bad_scale(d[b]))
            return QUANT_E_SCALE;
        size_t i0 = b * (size_t)bs, m = n - i0 < (size_t)bs ? n - i0 : (size_t)bs;
        float s = quant_f16_to_f32(d[b]);
#if S_X86
        if (fast) {
            bad |= s_dq8_block_sse41(y + i0, q + i0, m, s, p2e);
            continue;
        }
#endif
        (void)fast;
        bad |= s_dq8_block_c(y + i0, q + i0, 0, m, s, p2e);
    }
    return bad ? QUANT_E_CODE : 0;
}

int dequant_q4(float *y, const uint16_t *d, const uint8_t *q, size_t n, int bs,
               float p2e)
{
    assert(bs >= 8 && bs % 8 == 0);
    size_t nb = (n + (size_t)bs - 1) / (size_t)bs;
    int fast = s_sse41(), bad = (n & 1) && (q[n / 2] >> 4) != 0;   /* the unused nibble is 0 */
    for (size_t b = 0; b < nb; b++) {
        if (s_bad_scale(d[b]))
            return QUANT_E_SCALE;
        size_t i0 = b * (size_t)bs, m = n - i0 < (size_t)bs ? n - i0 : (size_t)bs;
        float s = quant_f16_to_f32(d[b]);
#if S_X86
        if (fast) {
            bad |= s_dq4_block_sse41(y + i0, q + i0 / 2, m, s, p2e);
            continue;
        }
#endif
        (void)fast;
        bad |= s_dq4_block_c(y + i0, q + i0 / 2, 0, m, s, p2e);
    }
    return bad ? QUANT_E_CODE : 0;
}

/* ---------------------------------------------------------- float codecs */

/* fp16 planes (of n values) of x[i, end) * p2ne; the plain path and the
 * tail of the fast one. */
static void s_f16_planes_c(uint8_t *out, const float *x, size_t n, size_t i, size_t end, float p2ne)
{
    for (; i < end; i++) {
        uint16_t h = quant_f32_to_f16(x[i] * p2ne);
        out[i] = (uint8_t)h;
        out[n + i] = (uint8_t)(h >> 8);
    }
}

#if S_X86
/* The conversion instruction rounds as quant_f32_to_f16 does; only a NaN
 * differs (the instruction keeps payload bits), so a group of 8 holding a
 * NaN goes through the scalar conversion. */
S_F16C static void s_f16_planes_f16c(uint8_t *out, const float *x, size_t n, float p2ne)
{
    size_t i = 0;
    const __m256 vp = _mm256_set1_ps(p2ne);
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i), vp);
        if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q))) {
            s_f16_planes_c(out, x, n, i, i + 8, p2ne);
            continue;
        }
        __m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT);
        __m128i lo = _mm_shuffle_epi8(h, _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15));
        _mm_storel_epi64((__m128i *)(out + i), lo);
        _mm_storel_epi64((__m128i *)(out + n + i), _mm_unpackhi_epi64(lo, lo));
    }
    s_f16_planes_c(out, x, n, i, n, p2ne);
}
#endif

void quant_f16_planes(uint8_t *out, const float *x, size_t n, float p2ne)
{
#if S_X86
    if (cpu_level() >= CPU_AVX2) {
        s_f16_planes_f16c(out, x, n, p2ne);
        return;
    }
#endif
    s_f16_planes_c(out, x, n, 0, n, p2ne);
}

int dequant_f16_planes(float *y, const uint8_t *in, size_t n, float p2e)
{
    uint32_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        uint16_t h = (uint16_t)(in[i] | (in[n + i] << 8));
        float v = quant_f16_to_f32(h) * p2e;
        uint32_t u;
        memcpy(&u, &v, 4);
        bad |= (u & 0x7f800000u) == 0x7f800000u;
        y[i] = v;
    }
    return bad ? -1 : 0;
}

void quant_bf16_planes(uint8_t *out, const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint16_t h = quant_f32_to_bf16(x[i]);
        out[i] = (uint8_t)h;
        out[n + i] = (uint8_t)(h >> 8);
    }
}

int dequant_bf16_planes(float *y, const uint8_t *in, size_t n)
{
    uint32_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t u = ((uint32_t)in[i] << 16) | ((uint32_t)in[n + i] << 24);
        bad |= (u & 0x7f800000u) == 0x7f800000u;
        memcpy(y + i, &u, 4);
    }
    return bad ? -1 : 0;
}

void quant_f32_planes(uint8_t *out, const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, x + i, 4);
        out[i] = (uint8_t)u;
        out[n + i] = (uint8_t)(u >> 8);
        out[2 * n + i] = (uint8_t)(u >> 16);
        out[3 * n + i] = (uint8_t)(u >> 24);
    }
}

int dequant_f32_planes(float *y, const uint8_t *in, size_t n)
{
    uint32_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)in[i] | ((uint32_t)in[n + i] << 8) |
                     ((uint32_t)in[2 * n + i] << 16) | ((uint32_t)in[3 * n + i] << 24);
        bad |= (u & 0x7f800000u) == 0x7f800000u;
        memcpy(y + i, &u, 4);
    }
    return bad ? -1 : 0;
}
