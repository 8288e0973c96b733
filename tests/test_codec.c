/* test_codec.c: quantizers against their reference (at every instruction
 * level this CPU runs), every codec's round trip within its error bound,
 * error feedback, and the frame decoder against bad frames (run it under
 * ASan too). */
#include "compress/codec.h"
#include "compress/cpu.h"
#include "compress/pca.h"
#include "compress/quant.h"
#include "compress/rotq.h"
#include "tests/check.h"

#include <float.h>
#include <stdint.h>
#include <string.h>
#include <zstd.h>

/* The codecs with a per-value error bound (codec.h): all before hq1. */
#define S_BOUNDED CODEC_HQ1

static uint64_t s_rng = 0x9e3779b97f4a7c15ull;

static uint32_t s_next(void)
{
    s_rng ^= s_rng << 13;
    s_rng ^= s_rng >> 7;
    s_rng ^= s_rng << 17;
    return (uint32_t)(s_rng >> 32);
}

static float s_unif(void) { return ((float)(s_next() >> 8) + 0.5f) * 0x1p-24f; }

/* Gaussian-ish with heavy tails: a normal times an occasional big factor. */
static float s_heavy(void)
{
    float g = 0.0f;
    for (int k = 0; k < 4; k++)
        g += s_unif() - 0.5f;
    g *= 1.7f;
    if (s_next() % 50 == 0)
        g *= 20.0f;
    return g;
}

static uint8_t *s_copy(const uint8_t *p, size_t n)
{
    uint8_t *c = malloc(n ? n : 1);
    if (n)
        memcpy(c, p, n);
    return c;
}

/* Recomputes the checksum of a frame after a test edited it. */
static void s_reseal(uint8_t *f, size_t len)
{
    size_t hdr = 32 + 4 * (size_t)f[7];
    uint32_t ck = frame_checksum(f, hdr - 4, 0);
    ck = frame_checksum(f + hdr, len - hdr, ck);
    for (int i = 0; i < 4; i++)
        f[hdr - 4 + i] = (uint8_t)(ck >> (8 * i));
}

/* ------------------------------------------------------------ names, halves */

static void test_names(void)
{
    const char *names[] = {"fp32", "fp16", "bf16", "int8", "int4", "hq1", "hq2", "hq3", "hq4", "pca"};
    for (int i = 0; i < 10; i++) {
        int id = codec_from_name(names[i]);
        CHECK(id >= 0);
        CHECK(strcmp(codec_name(id), names[i]) == 0);
    }
    CHECK(codec_from_name("int2") == -1);
    CHECK(codec_from_name("") == -1);
    CHECK(codec_from_name(NULL) == -1);
    CHECK(strcmp(codec_name(99), "?") == 0);
    CHECK(strcmp(codec_name(-1), "?") == 0);
}

static void test_half_conversion(void)
{
    /* every finite half survives half -> float -> half */
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        if ((h & 0x7c00u) == 0x7c00u)
            continue;
        bad += quant_f32_to_f16(quant_f16_to_f32((uint16_t)h)) != h;
    }
    CHECKF(bad == 0, "%d halves changed", bad);
    /* nearest: no neighbour is closer (ties: even) */
    bad = 0;
    for (int i = 0; i < 200000; i++) {
        float f = ldexpf(s_unif() * 2.0f - 1.0f, (int)(s_next() % 44) - 28);
        uint16_t h = quant_f32_to_f16(f);
        double e = fabs((double)quant_f16_to_f32(h) - f);
        uint16_t up = (uint16_t)(h + 1), dn = (uint16_t)(h - 1);
        if ((h & 0x7fffu) < 0x7bffu && fabs((double)quant_f16_to_f32(up) - f) < e)
            bad++;
        if ((h & 0x7fffu) > 0 && fabs((double)quant_f16_to_f32(dn) - f) < e)
            bad++;
    }
    CHECKF(bad == 0, "%d values not rounded to nearest", bad);
    CHECK(quant_f32_to_f16(65504.0f) == 0x7bff);
    CHECK(quant_f32_to_f16(65519.0f) == 0x7bff);
    CHECK(quant_f32_to_f16(65520.0f) == 0x7c00);
    CHECK(quant_f32_to_f16(0x1p-24f) == 1);
    CHECK(quant_f32_to_f16(0x1p-26f) == 0);
    CHECK(quant_f32_to_f16(-0.0f) == 0x8000);
    CHECK(quant_f32_to_bf16(1.0f) == 0x3f80);
    CHECK(quant_f32_to_bf16(FLT_MAX) == 0x7f7f);            /* no overflow to Inf */
    CHECK(quant_bf16_to_f32(quant_f32_to_bf16(3.0f)) == 3.0f);
}

/* ------------------------------------------------------------ fast vs ref */

/* Caps the kernels at `level` (the process's BRIGADE_CPU). */
static void s_set_level(cpu_level_t level)
{
    setenv("BRIGADE_CPU", cpu_level_name(level), 1);
}

/* A code outside the format (int8 -128, int4 nibble 0) at one place, in
 * the reference blocks and the planar arrays (same codes, QK-blocks, d the
 * scales of both): both decode the same values and say QUANT_E_CODE. */
static void s_bad_codes_match_reference(block_q8_t *b8, const uint16_t *d, int8_t *q8, block_q4_t *b4, uint8_t *q4,
                                        size_t nb)
{
    size_t n = nb * QK;
    float *y1 = malloc(n * sizeof *y1), *y2 = malloc(n * sizeof *y2);
    for (size_t b = 0; b < nb; b++)
        b8[b].d = d[b];                               /* the scales the planar call gets */
    const size_t at[] = {0, 15, 16, 3 * QK + 47, n - 1};
    for (size_t k = 0; k < sizeof at / sizeof at[0]; k++) {
        size_t i = at[k], b = i / QK, j = i % QK;
        int8_t c8 = q8[i];
        b8[b].q[j] = q8[i] = -128;
        CHECK(dequant_q8_ref(y1, b8, nb, 1.0f) == QUANT_E_CODE);
        CHECKF(dequant_q8(y2, d, q8, n, QK, 1.0f) == QUANT_E_CODE, "int8 code -128 at %zu accepted", i);
        CHECK(memcmp(y1, y2, n * sizeof *y1) == 0);
        b8[b].q[j] = q8[i] = c8;
        uint8_t c4 = q4[i / 2], mask = i & 1 ? 0x0f : 0xf0;
        b4[b].qs[j / 2] = q4[i / 2] = (uint8_t)(c4 & mask);
        CHECK(dequant_q4_ref(y1, b4, nb, 1.0f) == QUANT_E_CODE);
        CHECKF(dequant_q4(y2, d, q4, n, QK, 1.0f) == QUANT_E_CODE, "int4 nibble 0 at %zu accepted", i);
        CHECK(memcmp(y1, y2, n * sizeof *y1) == 0);
        b4[b].qs[j / 2] = q4[i / 2] = c4;
    }
    free(y1); free(y2);
}

static void s_planar_matches_reference(void)
{
    const size_t nb = 37, n = nb * QK;
    float *x = malloc(n * sizeof *x), *y1 = malloc(n * sizeof *y1), *y2 = malloc(n * sizeof *y2);
    block_q8_t *b8 = malloc(nb * sizeof *b8);
    block_q4_t *b4 = malloc(nb * sizeof *b4);
    uint16_t d[37];
    int8_t q8[37 * QK];
    uint8_t q4[37 * QK / 2];
    for (size_t i = 0; i < n; i++)
        x[i] = s_heavy();
    for (size_t i = 0; i < QK; i++)
        x[5 * QK + i] = 0.0f;                                 /* a zero block */
    x[7 * QK + 3] = 1e-41f;                                    /* a denormal */
    const float p2nes[] = {1.0f, 0x1p-3f, 0x1p4f};
    const uint64_t seeds[] = {0, 1, 0xdeadbeefcafeull};
    for (int pi = 0; pi < 3; pi++)
        for (int si = 0; si < 3; si++) {
            float p2ne = p2nes[pi], p2e = 1.0f / p2ne;
            quant_q8_ref(b8, x, nb, p2ne, seeds[si], 0);
            quant_q8(d, q8, x, n, QK, p2ne, seeds[si]);
            int diff = 0;
            for (size_t b = 0; b < nb; b++) {
                diff += b8[b].d != d[b];
                diff += memcmp(b8[b].q, q8 + b * QK, QK) != 0;
            }
            CHECKF(diff == 0, "int8 p2ne %g seed %llu: %d blocks differ", p2ne, (unsigned long long)seeds[si], diff);
            CHECK(dequant_q8_ref(y1, b8, nb, p2e) == 0);
            CHECK(dequant_q8(y2, d, q8, n, QK, p2e) == 0);
            CHECK(memcmp(y1, y2, n * sizeof *y1) == 0);

            quant_q4_ref(b4, x, nb, p2ne, seeds[si], 0);
            quant_q4(d, q4, x, n, QK, p2ne, seeds[si]);
            diff = 0;
            for (size_t b = 0; b < nb; b++) {
                diff += b4[b].d != d[b];
                diff += memcmp(b4[b].qs, q4 + b * QK / 2, QK / 2) != 0;
            }
            CHECKF(diff == 0, "int4 p2ne %g seed %llu: %d blocks differ", p2ne, (unsigned long long)seeds[si], diff);
            CHECK(dequant_q4_ref(y1, b4, nb, p2e) == 0);
            CHECK(dequant_q4(y2, d, q4, n, QK, p2e) == 0);
            CHECK(memcmp(y1, y2, n * sizeof *y1) == 0);
        }
    s_bad_codes_match_reference(b8, d, q8, b4, q4, nb);
    /* a partial last block (scalar tail) gives the codes of the zero-padded block */
    for (uint64_t seed = 0; seed < 2; seed++) {
        float pad[2 * QK] = {0};
        memcpy(pad, x, (QK + 13) * sizeof *x);
        quant_q8(d, q8, x, QK + 13, QK, 1.0f, seed);
        quant_q8_ref(b8, pad, 2, 1.0f, seed, 0);
        CHECK(d[1] == b8[1].d && memcmp(b8[0].q, q8, QK) == 0 && memcmp(b8[1].q, q8 + QK, 13) == 0);
        quant_q4(d, q4, x, QK + 13, QK, 1.0f, seed);
        quant_q4_ref(b4, pad, 2, 1.0f, seed, 0);
        CHECK(d[1] == b4[1].d && memcmp(b4[0].qs, q4, QK / 2) == 0 && memcmp(b4[1].qs, q4 + QK / 2, 6) == 0);
        CHECK((q4[QK / 2 + 6] & 0x0f) == (b4[1].qs[6] & 0x0f) && (q4[QK / 2 + 6] >> 4) == 0);
    }
    free(x); free(y1); free(y2); free(b8); free(b4);
}

/* The planar kernels at every level this CPU runs (the plain C ones at
 * generic, then SSE4.1, ...) give the bits of the struct reference. */
static void test_planar_matches_reference(void)
{
    char seen[64] = "";
    for (int l = CPU_GENERIC; l <= (int)cpu_hw_level(); l++) {
        s_set_level((cpu_level_t)l);
        CHECKF(cpu_level() == (cpu_level_t)l, "BRIGADE_CPU=%s gave level %s", cpu_level_name((cpu_level_t)l),
               cpu_level_name(cpu_level()));
        s_planar_matches_reference();
        snprintf(seen + strlen(seen), sizeof seen - strlen(seen), " %s", cpu_level_name((cpu_level_t)l));
    }
    unsetenv("BRIGADE_CPU");
    printf("  # levels checked:%s\n", seen);
}

/* BRIGADE_CPU: every name parses, native is the hardware level, a cap above
 * the hardware changes nothing, an unknown value means generic and is
 * reported by cpu_env_check. */
static void test_cpu_levels(void)
{
    cpu_level_t hw = cpu_hw_level(), l;
    for (int i = CPU_GENERIC; i <= CPU_AVX512; i++) {
        CHECK(cpu_level_parse(cpu_level_name((cpu_level_t)i), &l) == 0 && l == (cpu_level_t)i);
        s_set_level((cpu_level_t)i);
        CHECK(cpu_level() == ((cpu_level_t)i < hw ? (cpu_level_t)i : hw));
    }
    CHECK(cpu_level_parse("native", &l) == 0 && l == hw);
    CHECK(cpu_level_parse("avx9", &l) == -1 && cpu_level_parse("", &l) == -1);
    char err[128] = "";
    setenv("BRIGADE_CPU", "avx9", 1);
    CHECK(cpu_level() == CPU_GENERIC);
    CHECK(cpu_env_check(err, sizeof err) == -1 && strstr(err, "BRIGADE_CPU=avx9") && !strchr(err, '\n'));
    setenv("BRIGADE_CPU", "native", 1);
    CHECK(cpu_level() == hw && cpu_env_check(err, sizeof err) == 0);
    unsetenv("BRIGADE_CPU");
    CHECK(cpu_level() == hw && cpu_env_check(err, sizeof err) == 0);
    printf("  # this CPU: %s\n", cpu_level_name(hw));
}

/* x[i] -> fp16 planes through quant_f16_planes against quant_f32_to_f16
 * value by value; returns the number of values that differ. */
static size_t s_f16_planes_diff(const float *x, size_t n, float p2ne, uint8_t *out)
{
    quant_f16_planes(out, x, n, p2ne);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        uint16_t want = quant_f32_to_f16(x[i] * p2ne);
        bad += (uint16_t)(out[i] | (out[n + i] << 8)) != want;
    }
    return bad;
}

/* fp16 encoding at every level: float bit patterns 4093 apart over all 2^32
 * (every exponent, both signs, NaNs with payloads), every pattern whose low
 * 13 bits sit at a rounding boundary of the normal halves, the subnormal
 * range and the overflow edge, in groups that put NaNs beside finite
 * values; the same bits as the scalar conversion. */
static void test_f16_planes_every_level(void)
{
    const size_t n = (size_t)1 << 20;
    float *x = malloc(n * sizeof *x);
    uint8_t *out = malloc(2 * n);
    for (int l = CPU_GENERIC; l <= (int)cpu_hw_level(); l++) {
        s_set_level((cpu_level_t)l);
        size_t bad = 0;
        uint32_t u = 0;
        for (int pass = 0; pass < 5; pass++) {
            for (size_t i = 0; i < n; i++) {
                uint32_t b;
                switch (pass) {
                case 0: b = u; u += 4093u; break;                               /* a sweep */
                case 1: b = ((uint32_t)(i >> 3) << 13) + (uint32_t)(0xffeu + (i & 7)); break; /* ties */
                case 2: b = 0x33000000u + (uint32_t)i * 7u; break;              /* subnormal halves */
                case 3: b = (0x477fe000u + (uint32_t)i) | (uint32_t)(i & 1) << 31; break; /* overflow edge */
                default: b = i % 5 == 0 ? 0x7fa00000u + (uint32_t)i : s_next(); break;  /* NaNs among others */
                }
                memcpy(x + i, &b, 4);
            }
            bad += s_f16_planes_diff(x, n - (size_t)pass, 1.0f, out);   /* odd lengths: the tails */
        }
        for (size_t i = 0; i < n; i++)
            x[i] = s_heavy() * 3000.0f;
        bad += s_f16_planes_diff(x, n, 0x1p-4f, out);
        CHECKF(bad == 0, "level %s: %zu fp16 values differ from the scalar conversion", cpu_level_name((cpu_level_t)l), bad);
    }
    unsetenv("BRIGADE_CPU");
    free(x); free(out);
}

/* Whole frames of every codec (stochastic rounding too) are the same bytes
 * at every level. */
static void test_frames_same_at_every_level(void)
{
    const size_t n = 3 * 4096 + 77;
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++)
        x[i] = s_heavy();
    uint32_t shape[1] = {(uint32_t)n};
    char err[128];
    codec_ctx_t *ctx = codec_ctx_new(1);
    for (int codec = 0; codec < S_BOUNDED; codec++)   /* hq and pca have no CPU levels */
        for (uint64_t seed = 0; seed < 2; seed++) {
            size_t cap = frame_bound(n, codec);
            uint8_t *ref = malloc(cap), *buf = malloc(cap);
            encode_opts_t o = {.zstd = 2, .sr_seed = seed};
            s_set_level(CPU_GENERIC);
            long rlen = frame_encode(ctx, ref, cap, x, shape, 1, codec, &o, err, sizeof err);
            CHECK(rlen > 0);
            for (int l = CPU_SSE41; l <= (int)cpu_hw_level(); l++) {
                s_set_level((cpu_level_t)l);
                long len = frame_encode(ctx, buf, cap, x, shape, 1, codec, &o, err, sizeof err);
                CHECKF(len == rlen && memcmp(buf, ref, (size_t)rlen) == 0, "codec %d seed %llu: level %s frame differs",
                       codec, (unsigned long long)seed, cpu_level_name((cpu_level_t)l));
            }
            free(ref); free(buf);
        }
    unsetenv("BRIGADE_CPU");
    codec_ctx_destroy(&ctx);
    free(x);
}

/* ------------------------------------------------------------ round trips */

/* Max over i of |y-x| / bound(i); <= 1 passes.  bs: block size (int codecs). */
static double s_worst(int codec, const float *x, const float *y, size_t n, int bs, int sr)
{
    double amax = 0;
    for (size_t i = 0; i < n; i++)
        amax = fmax(amax, fabs((double)x[i]));
    double worst = 0;
    for (size_t b0 = 0; b0 < n; b0 += (size_t)bs) {
        size_t m = n - b0 < (size_t)bs ? n - b0 : (size_t)bs;
        double bmax = 0;
        for (size_t j = 0; j < m; j++)
            bmax = fmax(bmax, fabs((double)x[b0 + j]));
        for (size_t j = 0; j < m; j++) {
            double xi = x[b0 + j], err = fabs((double)y[b0 + j] - xi), bound;
            switch (codec) {
            case CODEC_FP32: bound = 0; break;
            case CODEC_BF16: bound = 0x1p-8 * fabs(xi) + 0x1p-133; break;
            case CODEC_FP16: bound = 0x1p-11 * fabs(xi) + amax * 0x1p-38 + 0x1p-140; break;
            default: {
                double d = bmax / (codec == CODEC_INT8 ? 127.0 : 7.0);
                bound = (sr ? 1.0 : 0.5) * d * (1 + 0x1p-10) + amax * 0x1p-36 + 0x1p-140;
            }
            }
            if (codec == CODEC_FP32) {
                if (memcmp(&x[b0 + j], &y[b0 + j], 4) != 0)
                    return INFINITY;
            } else if (err > bound) {
                return err / bound > 1e9 ? 1e9 : err / bound + 1.0;
            }
        }
    }
    return worst;
}

typedef void (*s_gen_fn)(float *x, size_t n);
static void s_gen_random(float *x, size_t n) { for (size_t i = 0; i < n; i++) x[i] = s_heavy(); }
static void s_gen_const(float *x, size_t n) { for (size_t i = 0; i < n; i++) x[i] = -0.3721f; }
static void s_gen_zero(float *x, size_t n) { memset(x, 0, n * sizeof *x); }
static void s_gen_huge(float *x, size_t n) { for (size_t i = 0; i < n; i++) x[i] = s_heavy() * 1e36f; x[0] = FLT_MAX; if (n > 1) x[1] = -FLT_MAX; }
static void s_gen_tiny(float *x, size_t n) { for (size_t i = 0; i < n; i++) x[i] = s_heavy() * 1e-30f; }
static void s_gen_denormal(float *x, size_t n) { for (size_t i = 0; i < n; i++) x[i] = s_heavy() * 1e-40f; x[0] = 0x1p-149f; }
static void s_gen_mixed(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = s_heavy() * ldexpf(1.0f, (int)(s_next() % 200) - 100);
}

static void test_roundtrip_all_codecs(void)
{
    struct { const char *name; s_gen_fn fn; } gens[] = {
        {"random", s_gen_random}, {"constant", s_gen_const}, {"zero", s_gen_zero},
        {"huge", s_gen_huge}, {"tiny", s_gen_tiny}, {"denormal", s_gen_denormal},
        {"mixed", s_gen_mixed},
    };
    const size_t sizes[] = {1, 2, 7, 63, 64, 65, 1001, 4096, 100003};
    const int blocks[] = {64, 8, 32, 136, 4096};
    codec_ctx_t *ctx = codec_ctx_new(1);
    CHECK(ctx);
    size_t nmax = 100003;
    float *x = malloc(nmax * sizeof *x), *y = malloc(nmax * sizeof *y);
    uint8_t *buf = malloc(frame_bound(nmax, CODEC_FP32));
    char err[256];
    for (int codec = 0; codec < S_BOUNDED; codec++)   /* per-value bounds (hq, pca: test_rotq_pca_roundtrip) */
        for (size_t g = 0; g < sizeof gens / sizeof gens[0]; g++)
            for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
                for (int bi = 0; bi < 5; bi++)
                    for (int sr = 0; sr < 2; sr++) {
                        int isint = codec == CODEC_INT8 || codec == CODEC_INT4;
                        if (!isint && (bi > 0 || sr))
                            continue;
                        size_t n = sizes[si];
                        gens[g].fn(x, n);
                        encode_opts_t o = {.block_size = blocks[bi], .sr_seed = sr ? 77 + si : 0};
                        uint32_t shape[1] = {(uint32_t)n};
                        size_t cap = frame_bound(n, codec);
                        long len = frame_encode(ctx, buf, cap, x, shape, 1, codec, &o, err, sizeof err);
                        CHECKF(len > 0, "%s %s n=%zu: %s", codec_name(codec), gens[g].name, n, err);
                        if (len <= 0)
                            continue;
                        uint8_t *f = s_copy(buf, (size_t)len);       /* exact size for ASan */
                        memset(y, 0xff, n * sizeof *y);
                        long got = frame_decode(ctx, y, n, NULL, NULL, f, (size_t)len, err, sizeof err);
                        free(f);
                        CHECKF(got == (long)n, "%s %s n=%zu decode: %s", codec_name(codec), gens[g].name, n, err);
                        double w = s_worst(codec, x, y, n, isint ? blocks[bi] : 1, sr);
                        CHECKF(w <= 1.0, "%s %s n=%zu bs=%d sr=%d: error %.3g x bound",
                               codec_name(codec), gens[g].name, n, blocks[bi], sr, w - 1.0);
                    }
    free(x); free(y); free(buf);
    codec_ctx_destroy(&ctx);
    CHECK(ctx == NULL);
}

static void test_roundtrip_exact_values(void)
{
    codec_ctx_t *ctx = codec_ctx_new(1);
    /* int8: a block whose values are multiples of amax/127 comes back exact */
    float x[64], y[64];
    for (int i = 0; i < 64; i++)
        x[i] = (float)(i - 32) * 2.0f;                        /* amax 64: d = 64/127 */
    x[0] = 127.0f;                                             /* amax 127: d = 1 */
    memcpy(y, x, sizeof x);
    CHECK(codec_roundtrip(ctx, y, 64, CODEC_INT8, NULL) == 0);
    for (int i = 0; i < 64; i++)
        CHECK(y[i] == x[i]);
    /* compressed size of an all-zero tensor is tiny */
    float *z = calloc(65536, sizeof *z);
    uint8_t *buf = malloc(frame_bound(65536, CODEC_INT8));
    uint32_t shape[2] = {256, 256};
    long len = frame_encode(ctx, buf, frame_bound(65536, CODEC_INT8), z, shape, 2, CODEC_INT8, NULL, NULL, 0);
    CHECKF(len > 0 && len < 200, "zero tensor frame %ld bytes", len);
    CHECK(buf[8] & FRAME_FLAG_ZSTD);
    uint32_t sh[FRAME_MAX_NDIM];
    int nd = 0;
    CHECK(frame_decode(ctx, z, 65536, sh, &nd, buf, (size_t)len, NULL, 0) == 65536);
    CHECK(nd == 2 && sh[0] == 256 && sh[1] == 256);
    free(z); free(buf);
    codec_ctx_destroy(&ctx);
}

/* ------------------------------------------------------------ options */

static void test_stochastic_rounding(void)
{
    codec_ctx_t *ctx = codec_ctx_new(1);
    const size_t n = 64 * 512;
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    /* per block: one value 7 (so d = 1 for int4), the rest 0.3: nearest gives 0 */
    for (size_t i = 0; i < n; i++)
        x[i] = i % 64 == 0 ? 7.0f : 0.3f;
    for (int codec = CODEC_INT8; codec <= CODEC_INT4; codec++) {
        double lim = codec == CODEC_INT4 ? 7.0 : 127.0;
        for (size_t i = 0; i < n; i++)
            x[i] = i % 64 == 0 ? (float)lim : 0.3f;
        memcpy(y, x, n * sizeof *x);
        CHECK(codec_roundtrip(ctx, y, n, codec, NULL) == 0);
        CHECK(y[1] == 0.0f);
        encode_opts_t o = {.sr_seed = 12345};
        memcpy(y, x, n * sizeof *x);
        CHECK(codec_roundtrip(ctx, y, n, codec, &o) == 0);
        double sum = 0;
        int cnt = 0, ones = 0;
        for (size_t i = 0; i < n; i++)
            if (i % 64) {
                sum += y[i];
                cnt++;
                ones += y[i] == 1.0f;
                CHECK(y[i] == 0.0f || y[i] == 1.0f);
            }
        double mean = sum / cnt, sd = sqrt(0.3 * 0.7 / cnt);
        CHECKF(fabs(mean - 0.3) < 5 * sd, "%s stochastic mean %.4f, want 0.3", codec_name(codec), mean);
        (void)ones;
        /* deterministic for a seed, different across seeds */
        float *y2 = malloc(n * sizeof *y2);
        memcpy(y2, x, n * sizeof *x);
        CHECK(codec_roundtrip(ctx, y2, n, codec, &o) == 0);
        CHECK(memcmp(y, y2, n * sizeof *y) == 0);
        o.sr_seed = 54321;
        memcpy(y2, x, n * sizeof *x);
        CHECK(codec_roundtrip(ctx, y2, n, codec, &o) == 0);
        CHECK(memcmp(y, y2, n * sizeof *y) != 0);
        free(y2);
    }
    free(x); free(y);
    codec_ctx_destroy(&ctx);
}

static void test_error_feedback(void)
{
    codec_ctx_t *ctx = codec_ctx_new(1);
    const size_t n = 1000;
    const int steps = 300;
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y), *r = calloc(n, sizeof *r);
    double *sx = calloc(n, sizeof *sx), *sy = calloc(n, sizeof *sy), *sy0 = calloc(n, sizeof *sy0);
    for (int codec = CODEC_INT8; codec <= CODEC_INT4; codec++) {
        memset(r, 0, n * sizeof *r);
        memset(sx, 0, n * sizeof *sx);
        memset(sy, 0, n * sizeof *sy);
        memset(sy0, 0, n * sizeof *sy0);
        double dmax = 0;
        for (int s = 0; s < steps; s++) {
            /* small values next to one big one per block: nearest rounds them to 0 */
            for (size_t i = 0; i < n; i++)
                x[i] = i % 64 == 0 ? 1.0f : 0.01f * (1.0f + s_unif());
            dmax = fmax(dmax, (1.0 + 0.02 * 2) / (codec == CODEC_INT8 ? 127.0 : 7.0));
            encode_opts_t o = {.residual = r, .sr_seed = (uint64_t)s + 1};
            memcpy(y, x, n * sizeof *x);
            CHECK(codec_roundtrip(ctx, y, n, codec, &o) == 0);
            for (size_t i = 0; i < n; i++) {
                sx[i] += x[i];
                sy[i] += y[i];
            }
            memcpy(y, x, n * sizeof *x);                    /* the same without feedback */
            CHECK(codec_roundtrip(ctx, y, n, codec, NULL) == 0);
            for (size_t i = 0; i < n; i++)
                sy0[i] += y[i];
        }
        double worst = 0, worst0 = 0;
        for (size_t i = 0; i < n; i++) {
            worst = check_worst(worst, fabs(sx[i] - sy[i]));
            worst0 = check_worst(worst0, fabs(sx[i] - sy0[i]));
            /* the residual is exactly what is still owed */
            CHECK_NEAR(sx[i] - sy[i], r[i], 1e-3);
        }
        CHECKF(worst <= 1.01 * dmax + 1e-3, "%s: sums drift by %g (bound %g)", codec_name(codec), worst, dmax);
        CHECKF(worst0 > 10 * dmax, "%s: without feedback the drift %g should be large", codec_name(codec), worst0);
    }
    free(x); free(y); free(r); free(sx); free(sy); free(sy0);
    codec_ctx_destroy(&ctx);
}

static void test_nonfinite_input(void)
{
    codec_ctx_t *ctx = codec_ctx_new(1);
    float x[100], keep[100], r[100];
    uint8_t buf[2048];
    char err[128];
    uint32_t shape[1] = {100};
    const float bad[] = {NAN, INFINITY, -INFINITY};
    for (int codec = 0; codec < CODEC_PCA; codec++)   /* pca: 100 values are no rows of 64 (test_pca_rows) */
        for (int k = 0; k < 3; k++) {
            for (int i = 0; i < 100; i++)
                x[i] = (float)i;
            x[42] = bad[k];
            err[0] = 0;
            long len = frame_encode(ctx, buf, sizeof buf, x, shape, 1, codec, NULL, err, sizeof err);
            CHECK(len == -1);
            CHECK(codec_ctx_error(ctx) == FRAME_E_NONFINITE_INPUT);
            CHECKF(strstr(err, "non-finite input at index 42") != NULL, "err: %s", err);
            memcpy(keep, x, sizeof x);
            CHECK(codec_roundtrip(ctx, x, 100, codec, NULL) == -1);
            CHECK(memcmp(keep, x, sizeof x) == 0 || isnan(bad[k]));
            /* error feedback: residual untouched on refusal */
            for (int i = 0; i < 100; i++)
                r[i] = 0.25f;
            encode_opts_t o = {.residual = r};
            CHECK(frame_encode(ctx, buf, sizeof buf, x, shape, 1, codec, &o, err, sizeof err) == -1);
            int same = 1;
            for (int i = 0; i < 100; i++)
                same &= r[i] == 0.25f;
            CHECK(same);
        }
    /* x finite but x + residual overflows: refused */
    for (int i = 0; i < 100; i++) {
        x[i] = FLT_MAX;
        r[i] = FLT_MAX;
    }
    encode_opts_t o = {.residual = r};
    CHECK(frame_encode(ctx, buf, sizeof buf, x, shape, 1, CODEC_INT8, &o, err, sizeof err) == -1);
    CHECK(strstr(err, "residual") != NULL);
    codec_ctx_destroy(&ctx);
}

static void test_args_and_context(void)
{
    CHECK(codec_ctx_new(100) == NULL);
    codec_ctx_t *ctx = codec_ctx_new(-3);
    CHECK(ctx != NULL);
    float x[16] = {1, 2, 3};
    uint8_t buf[512];
    char err[128];
    uint32_t shape[9] = {16, 1, 1, 1, 1, 1, 1, 1, 1};
    CHECK(frame_encode(ctx, buf, sizeof buf, x, shape, 0, CODEC_INT8, NULL, err, sizeof err) == -1);
    CHECK(frame_encode(ctx, buf, sizeof buf, x, shape, 9, CODEC_INT8, NULL, err, sizeof err) == -1);
    CHECK(frame_encode(ctx, buf, sizeof buf, x, shape, 1, CODEC_COUNT, NULL, err, sizeof err) == -1);
    CHECK(codec_ctx_error(ctx) == FRAME_E_CODEC);
    encode_opts_t o = {.block_size = 12};
    CHECK(frame_encode(ctx, buf, sizeof buf, x, shape, 1, CODEC_INT8, &o, err, sizeof err) == -1);
    CHECK(codec_ctx_error(ctx) == FRAME_E_BLOCK);
    CHECK(frame_encode(ctx, buf, 40, x, shape, 1, CODEC_FP32, NULL, err, sizeof err) == -1);
    CHECK(codec_ctx_error(ctx) == FRAME_E_CAP);
    CHECK(frame_encode(ctx, buf, sizeof buf, x, shape, 8, CODEC_INT4, NULL, err, sizeof err) > 0);
    uint32_t big[2] = {1u << 16, 1u << 16};
    CHECK(frame_encode(ctx, buf, sizeof buf, x, big, 2, CODEC_INT8, NULL, err, sizeof err) == -1);
    CHECK(codec_ctx_error(ctx) == FRAME_E_SHAPE);
    CHECK(frame_bound(10, CODEC_COUNT) == 0);
    CHECK(frame_bound(1000, CODEC_INT8) >= 32 + 4 * 8 + 1000 + 2 * 125);
    /* empty tensor */
    uint32_t zero[1] = {0};
    long len = frame_encode(ctx, buf, sizeof buf, NULL, zero, 1, CODEC_INT8, NULL, err, sizeof err);
    CHECK(len == 36);
    CHECK(frame_decode(ctx, NULL, 0, NULL, NULL, buf, (size_t)len, err, sizeof err) == 0);
    /* zstd modes */
    float *big_x = malloc(50000 * sizeof *big_x);
    uint8_t *fb = malloc(frame_bound(50000, CODEC_FP32));
    for (int i = 0; i < 50000; i++)
        big_x[i] = s_heavy();
    uint32_t bshape[1] = {50000};
    for (int mode = 0; mode < 3; mode++) {
        encode_opts_t om = {.zstd = mode};
        len = frame_encode(ctx, fb, frame_bound(50000, CODEC_INT8), big_x, bshape, 1, CODEC_INT8, &om, err, sizeof err);
        CHECK(len > 0);
        if (mode == 1)
            CHECK(!(fb[8] & FRAME_FLAG_ZSTD) && len == 36 + 50000 + 2 * 782);
        if (mode == 2)
            CHECK(fb[8] & FRAME_FLAG_ZSTD);
        if (mode == 0 && (fb[8] & FRAME_FLAG_ZSTD))
            CHECK(len < 36 + (50000 + 2 * 782) * 97 / 100 + 1);
        CHECK(frame_decode(ctx, big_x, 50000, NULL, NULL, fb, (size_t)len, err, sizeof err) == 50000);
    }
    /* scratch grows and shrinks in use: big, small, big on one context */
    for (int i = 0; i < 50000; i++)
        big_x[i] = s_heavy();
    float *y = malloc(50000 * sizeof *y);
    for (int round = 0; round < 3; round++) {
        size_t n = round == 1 ? 10 : 50000;
        memcpy(y, big_x, n * sizeof *y);
        CHECK(codec_roundtrip(ctx, y, n, CODEC_INT8, NULL) == 0);
        CHECK(s_worst(CODEC_INT8, big_x, y, n, 64, 0) <= 1.0);
    }
    free(y); free(big_x); free(fb);
    codec_ctx_destroy(&ctx);
    codec_ctx_destroy(&ctx);                                  /* NULL-safe */
}

/* ------------------------------------------------------------ hostile frames */

/* A valid frame of codec over a few hundred values, exactly sized. */
static uint8_t *s_frame(codec_ctx_t *ctx, int codec, int zstd, size_t *len_out)
{
    float x[300];
    for (int i = 0; i < 300; i++)
        x[i] = s_heavy();
    uint32_t shape[2] = {20, 15};
    uint8_t buf[4096];
    encode_opts_t o = {.zstd = zstd, .block_size = codec == CODEC_PCA ? 15 : 0};
    long len = frame_encode(ctx, buf, sizeof buf, x, shape, 2, codec, &o, NULL, 0);
    assert(len > 0);
    *len_out = (size_t)len;
    return s_copy(buf, (size_t)len);
}

static void test_decoder_refuses_damage(void)
{
    codec_ctx_t *ctx = codec_ctx_new(1);
    float out[300];
    char err[256];
    for (int codec = 0; codec < CODEC_COUNT; codec++)
        for (int zstd = 1; zstd <= 2; zstd++) {
            size_t len;
            uint8_t *f = s_frame(ctx, codec, zstd, &len);
            CHECK(frame_decode(ctx, out, 300, NULL, NULL, f, len, err, sizeof err) == 300);
            /* every truncation */
            int accepted = 0, noreason = 0;
            for (size_t l = 0; l < len; l++) {
                uint8_t *t = s_copy(f, l);
                err[0] = 0;
                accepted += frame_decode(ctx, out, 300, NULL, NULL, t, l, err, sizeof err) != -1;
                noreason += err[0] == 0;
                free(t);
            }
            CHECKF(accepted == 0 && noreason == 0, "%s: %d truncations accepted, %d without reason",
                   codec_name(codec), accepted, noreason);
            /* every single bit flip */
            accepted = noreason = 0;
            for (size_t bit = 0; bit < len * 8; bit++) {
                uint8_t *t = s_copy(f, len);
                t[bit / 8] ^= (uint8_t)(1u << (bit % 8));
                err[0] = 0;
                accepted += frame_decode(ctx, out, 300, NULL, NULL, t, len, err, sizeof err) != -1;
                noreason += err[0] == 0;
                free(t);
            }
            CHECKF(accepted == 0 && noreason == 0, "%s: %d bit flips accepted, %d without reason",
                   codec_name(codec), accepted, noreason);
            /* too small an output */
            CHECK(frame_decode(ctx, out, 299, NULL, NULL, f, len, err, sizeof err) == -1);
            CHECK(codec_ctx_error(ctx) == FRAME_E_CAP);
            free(f);
        }
    /* random frames, and random payloads behind a valid header */
    uint8_t *r = malloc(4096);
    int accepted = 0;
    for (int it = 0; it < 3000; it++) {
        size_t l = s_next() % 600;
        for (size_t i = 0; i < l; i++)
            r[i] = (uint8_t)s_next();
        if (it % 2 && l >= 40) {
            size_t fl;
            uint8_t *f = s_frame(ctx, it % CODEC_COUNT, 1 + it % 2, &fl);
            memcpy(r, f, 36 < fl ? 36 : fl);
            free(f);
            if (it % 4 == 1)
                s_reseal(r, l);   /* checksum right: the lengths must still catch it */
        }
        uint8_t *t = s_copy(r, l);
        accepted += frame_decode(ctx, out, 300, NULL, NULL, t, l, err, sizeof err) != -1;
        free(t);
    }
    CHECKF(accepted == 0, "%d random frames accepted", accepted);
    free(r);
    codec_ctx_destroy(&ctx);
}

enum { S_SET, S_XOR, S_OR };
typedef struct { int off, op; uint8_t val; } s_edit_t;

static void test_decoder_reasons(void)
{
    codec_ctx_t *ctx = codec_ctx_new(1);
    float out[300];
    char err[256];
    size_t len;
    /* frames of shape (20,15): header 40 bytes; int8/int4 scale 0 at 40..41
     * (41 the high byte); fp16/bf16 planes at 40 and 340; fp32 planes at
     * 40, 340, 640, 940 */
    struct { int codec, zstd; s_edit_t ed[2]; int reseal; frame_error_t want; const char *why; } cases[] = {
        {CODEC_INT8, 1, {{0, S_SET, 'X'}}, 1, FRAME_E_MAGIC, "magic"},
        {CODEC_INT8, 1, {{4, S_SET, 2}}, 1, FRAME_E_VERSION, "version"},
        {CODEC_INT8, 1, {{5, S_SET, CODEC_COUNT}}, 1, FRAME_E_CODEC, "codec"},
        {CODEC_INT8, 1, {{6, S_SET, 1}}, 1, FRAME_E_DTYPE, "dtype"},
        {CODEC_INT8, 1, {{7, S_SET, 0}}, 0, FRAME_E_NDIM, "ndim"},
        {CODEC_INT8, 1, {{7, S_SET, 9}}, 0, FRAME_E_NDIM, "ndim"},
        {CODEC_INT8, 1, {{8, S_SET, 0x80}}, 1, FRAME_E_FLAGS, "flags"},
        {CODEC_INT8, 1, {{8, S_SET, FRAME_FLAG_PLANES}}, 1, FRAME_E_FLAGS, "flags"},
        {CODEC_FP32, 1, {{9, S_SET, 3}}, 1, FRAME_E_EXPONENT, "exponent"},
        {CODEC_INT8, 1, {{9, S_SET, 0x80}}, 1, FRAME_E_EXPONENT, "exponent"},
        {CODEC_INT8, 1, {{10, S_SET, 7}}, 1, FRAME_E_BLOCK, "block"},
        {CODEC_FP16, 1, {{10, S_SET, 8}}, 1, FRAME_E_BLOCK, "block"},
        {CODEC_INT8, 1, {{31, S_SET, 0xff}}, 1, FRAME_E_SHAPE, "more than"},
        {CODEC_INT8, 1, {{28, S_SET, 21}}, 1, FRAME_E_RAWLEN, "raw length"},
        {CODEC_INT8, 1, {{12, S_XOR, 1}}, 1, FRAME_E_RAWLEN, "raw length"},
        {CODEC_INT8, 1, {{20, S_XOR, 1}}, 1, FRAME_E_PAYLOADLEN, "payload length"},
        {CODEC_INT8, 1, {{8, S_SET, FRAME_FLAG_ZSTD}}, 1, FRAME_E_ZSTD, "zstd"},
        {CODEC_INT8, 2, {{40, S_XOR, 0x5a}}, 1, FRAME_E_ZSTD, "zstd"},
        {CODEC_INT8, 1, {{60, S_XOR, 0x77}}, 0, FRAME_E_CHECKSUM, "checksum"},
        {CODEC_INT8, 1, {{41, S_SET, 0x7e}, {40, S_SET, 1}}, 1, FRAME_E_SCALE, "NaN/Inf scale"},
        {CODEC_INT4, 1, {{41, S_SET, 0x7c}, {40, S_SET, 0}}, 1, FRAME_E_SCALE, "NaN/Inf scale"},
        {CODEC_INT8, 1, {{41, S_OR, 0x80}}, 1, FRAME_E_SCALE, "negative scale"},
        {CODEC_INT8, 1, {{9, S_SET, 126}}, 1, FRAME_E_SCALE, "overflows"},
        {CODEC_FP16, 1, {{341, S_SET, 0x7c}, {41, S_SET, 0}}, 1, FRAME_E_VALUE, "NaN/Inf value"},
        {CODEC_BF16, 1, {{341, S_SET, 0x7f}, {41, S_SET, 0x80}}, 1, FRAME_E_VALUE, "NaN/Inf value"},
        {CODEC_FP32, 1, {{941, S_SET, 0x7f}, {641, S_OR, 0x80}}, 1, FRAME_E_VALUE, "NaN/Inf value"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        uint8_t *f = s_frame(ctx, cases[c].codec, cases[c].zstd, &len);
        CHECK(f[5] == cases[c].codec && (f[8] & 1) == (cases[c].zstd == 2));
        for (int k = 0; k < 2; k++) {
            s_edit_t e = cases[c].ed[k];
            if (k > 0 && e.off == 0)
                continue;
            assert((size_t)e.off < len);
            f[e.off] = (uint8_t)(e.op == S_SET ? e.val : e.op == S_XOR ? f[e.off] ^ e.val : f[e.off] | e.val);
        }
        if (cases[c].reseal)
            s_reseal(f, len);
        err[0] = 0;
        frame_info_t info;
        int peek = frame_peek(&info, f, len, NULL, 0);
        long rc = frame_decode(ctx, out, 300, NULL, NULL, f, len, err, sizeof err);
        CHECKF(rc == -1, "case %zu (%s) accepted", c, cases[c].why);
        CHECKF(codec_ctx_error(ctx) == cases[c].want, "case %zu (%s): error %d, want %d: %s",
               c, cases[c].why, codec_ctx_error(ctx), cases[c].want, err);
        CHECKF(strstr(err, cases[c].why) != NULL, "case %zu: reason '%s' lacks '%s'", c, err, cases[c].why);
        if (cases[c].want <= FRAME_E_PAYLOADLEN)
            CHECK(peek == -1 && info.error == cases[c].want);
        else
            CHECK(peek == 0);
        free(f);
    }
    codec_ctx_destroy(&ctx);
}

/* frame f (len bytes, header hdr) with tail[0..tl) appended to its payload,
 * the payload length and the checksum made right; *out_len its length. */
static uint8_t *s_append(const uint8_t *f, size_t len, size_t hdr, const uint8_t *tail, size_t tl, size_t *out_len)
{
    uint8_t *g = malloc(len + tl);
    memcpy(g, f, len);
    memcpy(g + len, tail, tl);
    uint64_t pl = len + tl - hdr;
    for (int i = 0; i < 8; i++)
        g[20 + i] = (uint8_t)(pl >> (8 * i));
    s_reseal(g, len + tl);
    *out_len = len + tl;
    return g;
}

/* A zstd payload is exactly one zstd frame: a skippable frame, an empty
 * zstd frame or a stray byte after it is refused (ZSTD_decompressDCtx alone
 * takes the first two); so is a lone skippable frame as the payload of a
 * frame of no values. */
static void test_decoder_one_zstd_frame(void)
{
    codec_ctx_t *ctx = codec_ctx_new(1);
    float out[300];
    char err[256];
    size_t len, glen;
    uint8_t *f = s_frame(ctx, CODEC_INT8, 2, &len);
    CHECK(frame_decode(ctx, out, 300, NULL, NULL, f, len, err, sizeof err) == 300);
    uint8_t skip[12] = {0x50, 0x2a, 0x4d, 0x18, 4, 0, 0, 0, 0xef, 0xbe, 0xad, 0xde}, empty[32], stray[1] = {0};
    size_t el = ZSTD_compress(empty, sizeof empty, "", 0, 1);
    CHECK(!ZSTD_isError(el));
    struct { const uint8_t *tail; size_t len; const char *what; } tails[] = {
        {skip, sizeof skip, "skippable frame"}, {empty, el, "empty zstd frame"}, {stray, 1, "stray byte"},
    };
    for (size_t t = 0; t < sizeof tails / sizeof tails[0]; t++) {
        uint8_t *g = s_append(f, len, 40, tails[t].tail, tails[t].len, &glen);
        err[0] = 0;
        CHECKF(frame_decode(ctx, out, 300, NULL, NULL, g, glen, err, sizeof err) == -1,
               "zstd payload with a %s after it accepted", tails[t].what);
        CHECKF(codec_ctx_error(ctx) == FRAME_E_ZSTD && strstr(err, "zstd"), "%s: error %d: %s", tails[t].what,
               codec_ctx_error(ctx), err);
        free(g);
    }
    free(f);
    uint32_t shape[1] = {0};
    uint8_t e[64];
    long elen = frame_encode(ctx, e, sizeof e, NULL, shape, 1, CODEC_INT8, NULL, err, sizeof err);
    CHECK(elen == 36 && e[8] == 0);
    e[8] = FRAME_FLAG_ZSTD;
    uint8_t *g = s_append(e, (size_t)elen, 36, skip, 8, &glen);   /* a skippable frame of 0 bytes */
    CHECK(frame_decode(ctx, out, 300, NULL, NULL, g, glen, err, sizeof err) == -1);
    CHECKF(codec_ctx_error(ctx) == FRAME_E_ZSTD, "skippable frame for 0 values: error %d: %s", codec_ctx_error(ctx), err);
    free(g);
    codec_ctx_destroy(&ctx);
}

/* int8 code -128, int4 nibble 0 (code -8) and, n odd, a set unused high
 * nibble are outside the format and refused (FRAME_E_VALUE) at every level,
 * in the vector body of a block and in its scalar tail; codes +-127 and
 * nibbles 1 and 15 pass. */
static void test_decoder_refuses_codes(void)
{
    enum { N = 301, NB = 5, HDR = 36 };             /* blocks of 64; the last 45 values: 32 vector, 13 tail */
    codec_ctx_t *ctx = codec_ctx_new(1);
    float x[N], out[N];
    for (int i = 0; i < N; i++)
        x[i] = i % 3 ? s_heavy() : (i % 2 ? 1.0f : -1.0f) * 100.0f;   /* every block holds +-qmax */
    uint32_t shape[1] = {N};
    uint8_t f[1024], g[1024];
    char err[256];
    encode_opts_t raw = {.zstd = 1};
    const size_t at[] = {0, 17, 63, 100, 261, 290, 299, 300};
    for (int l = CPU_GENERIC; l <= (int)cpu_hw_level(); l++) {
        s_set_level((cpu_level_t)l);
        for (int codec = CODEC_INT8; codec <= CODEC_INT4; codec++) {
            long len = frame_encode(ctx, f, sizeof f, x, shape, 1, codec, &raw, err, sizeof err);
            CHECK(len > 0 && frame_decode(ctx, out, N, NULL, NULL, f, (size_t)len, err, sizeof err) == N);
            uint8_t *q = g + HDR + 2 * NB;
            for (size_t k = 0; k <= sizeof at / sizeof at[0]; k++) {
                memcpy(g, f, (size_t)len);
                size_t i = k < sizeof at / sizeof at[0] ? at[k] : N;      /* N: the unused nibble */
                if (codec == CODEC_INT8 && i == N)
                    continue;
                if (codec == CODEC_INT8)
                    q[i] = 0x80;
                else if (i == N)
                    q[N / 2] |= 0x10;
                else
                    q[i / 2] &= i & 1 ? 0x0f : 0xf0;
                s_reseal(g, (size_t)len);
                err[0] = 0;
                long rc = frame_decode(ctx, out, N, NULL, NULL, g, (size_t)len, err, sizeof err);
                CHECKF(rc == -1 && codec_ctx_error(ctx) == FRAME_E_VALUE && strstr(err, "code out of range"),
                       "level %s %s: bad code at %zu: %ld %s", cpu_level_name((cpu_level_t)l), codec_name(codec),
                       i, rc, err);
            }
        }
    }
    unsetenv("BRIGADE_CPU");
    codec_ctx_destroy(&ctx);
}

/* zstd=0 keeps zstd's z bytes exactly when z * 100 <= raw * (100 -
 * FRAME_ZSTD_MIN_SAVING_PCT), z as zstd=2 gives it: small tensors of every
 * codec with a few distinct values, some of them just around the line. */
static void test_zstd_saving_rule(void)
{
    codec_ctx_t *ctx = codec_ctx_new(1);
    float x[96];
    uint8_t a[4096], b[4096];
    int wrong = 0, near = 0;
    for (int it = 0; it < 3000; it++) {
        int codec = it % CODEC_PCA, distinct = 1 + (int)(s_next() % 12);   /* pca: rows of 64 */
        size_t n = 1 + s_next() % 96;
        for (size_t i = 0; i < n; i++)
            x[i] = (float)(s_next() % (uint32_t)distinct) * 0.37f - 1.0f;
        uint32_t shape[1] = {(uint32_t)n};
        encode_opts_t always = {.zstd = 2}, autom = {.zstd = 0};
        long la = frame_encode(ctx, a, sizeof a, x, shape, 1, codec, &always, NULL, 0);
        long lb = frame_encode(ctx, b, sizeof b, x, shape, 1, codec, &autom, NULL, 0);
        frame_info_t ia, ib;
        CHECK(la > 0 && lb > 0 && frame_peek(&ia, a, (size_t)la, NULL, 0) == 0 && frame_peek(&ib, b, (size_t)lb, NULL, 0) == 0);
        uint64_t z = ia.payload_len, r = ia.raw_len;
        int keep = z * 100 <= r * (100 - FRAME_ZSTD_MIN_SAVING_PCT);
        near += z * 100 > r * (100 - FRAME_ZSTD_MIN_SAVING_PCT) && z * 100 <= r * (100 - FRAME_ZSTD_MIN_SAVING_PCT) + 100;
        wrong += ((ib.flags & FRAME_FLAG_ZSTD) != 0) != keep || ib.payload_len != (keep ? z : r);
    }
    CHECKF(wrong == 0, "%d of 3000 tensors: zstd kept or skipped against the rule", wrong);
    CHECKF(near > 0, "no tensor within a byte above the line");
    codec_ctx_destroy(&ctx);
}

static void test_peek_and_unaligned(void)
{
    codec_ctx_t *ctx = codec_ctx_new(1);
    size_t len;
    uint8_t *f = s_frame(ctx, CODEC_INT8, 1, &len);
    frame_info_t info;
    char err[128];
    CHECK(frame_peek(&info, f, len, err, sizeof err) == 0);
    CHECK(info.codec == CODEC_INT8 && info.ndim == 2 && info.shape[0] == 20 && info.shape[1] == 15);
    CHECK(info.n_values == 300 && info.block_size == 64 && info.header_len == 40 && info.frame_len == len);
    CHECK(info.raw_len == 300 + 2 * 5 && info.payload_len == info.raw_len);
    /* a frame at an odd address decodes the same */
    uint8_t *odd = malloc(len + 1);
    memcpy(odd + 1, f, len);
    float a[300], b[300];
    CHECK(frame_decode(ctx, a, 300, NULL, NULL, f, len, err, sizeof err) == 300);
    CHECK(frame_decode(ctx, b, 300, NULL, NULL, odd + 1, len, err, sizeof err) == 300);
    CHECK(memcmp(a, b, sizeof a) == 0);
    /* a frame followed by extra bytes is refused (payload length) */
    uint8_t *longer = malloc(len + 3);
    memcpy(longer, f, len);
    CHECK(frame_decode(ctx, a, 300, NULL, NULL, longer, len + 3, err, sizeof err) == -1);
    CHECK(codec_ctx_error(ctx) == FRAME_E_PAYLOADLEN);
    free(longer); free(odd); free(f);
    /* a receiver's fresh context decodes what a sender's encoded */
    codec_ctx_t *rx = codec_ctx_new(1);
    size_t n = 20000;
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    uint8_t *buf = malloc(frame_bound(n, CODEC_FP32));
    uint32_t shape[1] = {(uint32_t)n};
    for (int codec = 0; codec < S_BOUNDED; codec++) {
        for (size_t i = 0; i < n; i++)
            x[i] = s_heavy();
        encode_opts_t o = {.zstd = 2};
        long flen = frame_encode(ctx, buf, frame_bound(n, codec), x, shape, 1, codec, &o, err, sizeof err);
        CHECK(flen > 0);
        CHECK(frame_decode(rx, y, n, NULL, NULL, buf, (size_t)flen, err, sizeof err) == (long)n);
        CHECK(s_worst(codec, x, y, n, 64, 0) <= 1.0);
    }
    free(x); free(y); free(buf);
    codec_ctx_destroy(&rx);
    codec_ctx_destroy(&ctx);
}

/* ------------------------------------------------------------ hq, pca */

/* The fast rotated quantizer against its O(bs^2) double reference: the
 * same scales, the same codes but for values within rounding of a
 * threshold (at most 1 in 500), and the fast decoder's values within float
 * rounding of the reference decoder's on the same payload. */
static void test_rotq_matches_reference(void)
{
    const size_t sizes[] = {1, 100, 1000, 4097};
    const int tiles[] = {8, 64, 256};
    size_t nmax = 4097 + 256;
    float *x = malloc(nmax * sizeof *x), *y1 = malloc(nmax * sizeof *y1), *y2 = malloc(nmax * sizeof *y2);
    uint16_t *d1 = malloc(nmax * 2), *d2 = malloc(nmax * 2);
    uint8_t *q1 = malloc(nmax), *q2 = malloc(nmax), *c1 = malloc(nmax), *c2 = malloc(nmax);
    for (int bits = ROTQ_MIN_BITS; bits <= ROTQ_MAX_BITS; bits++)
        for (size_t si = 0; si < 4; si++)
            for (int ti = 0; ti < 3; ti++) {
                size_t n = sizes[si], bs = (size_t)tiles[ti], nb = (n + bs - 1) / bs;
                for (size_t i = 0; i < n; i++)
                    x[i] = s_heavy() * 1000.0f;      /* scaled by 2^-e = 2^-6 below: under 2^15 */
                rotq_quant_ref(d1, q1, x, n, (int)bs, bits, 0x1p-6f);
                rotq_quant(d2, q2, x, n, (int)bs, bits, 0x1p-6f);
                CHECKF(memcmp(d1, d2, nb * 2) == 0, "bits %d n %zu bs %zu: scales differ", bits, n, bs);
                size_t codes = nb * bs, diff = 0, mask = (1u << bits) - 1;
                for (size_t i = 0; i < codes; i++) {
                    size_t bit = i * (size_t)bits;
                    unsigned a = (unsigned)(q1[bit / 8] | (bit / 8 + 1 < rotq_code_bytes(n, (int)bs, bits) ? q1[bit / 8 + 1] << 8 : 0));
                    unsigned b = (unsigned)(q2[bit / 8] | (bit / 8 + 1 < rotq_code_bytes(n, (int)bs, bits) ? q2[bit / 8 + 1] << 8 : 0));
                    c1[0] = (uint8_t)((a >> (bit % 8)) & mask);
                    c2[0] = (uint8_t)((b >> (bit % 8)) & mask);
                    diff += c1[0] != c2[0];
                }
                CHECKF(diff * 500 <= codes + 500, "bits %d n %zu bs %zu: %zu of %zu codes differ", bits, n, bs, diff, codes);
                rotq_dequant_ref(y1, d2, q2, n, (int)bs, bits, 0x1p6f);
                CHECK(rotq_dequant(y2, d2, q2, n, (int)bs, bits, 0x1p6f) == 0);
                double amax = 0, worst = 0;
                for (size_t i = 0; i < n; i++)
                    amax = fmax(amax, fabs((double)y1[i]));
                for (size_t i = 0; i < n; i++)
                    worst = check_worst(worst, fabs((double)y1[i] - y2[i]));
                CHECKF(worst <= 1e-5 * amax, "bits %d n %zu bs %zu: decoders differ by %g (amax %g)", bits, n, bs, worst, amax);
            }
    free(x); free(y1); free(y2); free(d1); free(d2); free(q1); free(q2); free(c1); free(c2);
}

/* Mean squared error over the mean square of x. */
static double s_rel_mse(const float *x, const float *y, size_t n)
{
    double e = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        e += ((double)y[i] - x[i]) * ((double)y[i] - x[i]);
        s += (double)x[i] * x[i];
    }
    return s > 0 ? e / s : e;
}

/* Every hq codec through the frame: heavy-tailed data (outliers that the
 * rotation spreads) within 1.3 x the Lloyd-Max distortion of a normal,
 * zeros exactly, odd sizes, and any tile; error feedback leaves x - y. */
static void test_hq_roundtrip(void)
{
    const double dist[4] = {0.3634, 0.1175, 0.03454, 0.009497};
    codec_ctx_t *ctx = codec_ctx_new(1);
    size_t n = 30011;
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y), *r = calloc(n, sizeof *r);
    for (int codec = CODEC_HQ1; codec <= CODEC_HQ4; codec++) {
        for (int bs = 64; bs <= 4096; bs *= 4) {   /* smaller tiles keep the outliers' tails */
            for (size_t i = 0; i < n; i++)
                x[i] = y[i] = s_heavy();
            encode_opts_t o = {.block_size = bs};
            CHECK(codec_roundtrip(ctx, y, n, codec, &o) == 0);
            double e = s_rel_mse(x, y, n);
            CHECKF(e <= 1.3 * dist[codec - CODEC_HQ1] && e >= 0.5 * dist[codec - CODEC_HQ1],
                   "%s bs %d: relative error %.4f, Lloyd-Max %.4f", codec_name(codec), bs, e, dist[codec - CODEC_HQ1]);
        }
        memset(y, 0, n * sizeof *y);
        CHECK(codec_roundtrip(ctx, y, 77, codec, NULL) == 0);
        for (size_t i = 0; i < 77; i++)
            CHECK(y[i] == 0.0f);
        for (size_t i = 0; i < n; i++)
            x[i] = y[i] = s_heavy();
        memset(r, 0, n * sizeof *r);
        encode_opts_t fb = {.residual = r};
        CHECK(codec_roundtrip(ctx, y, n, codec, &fb) == 0);
        double worst = 0;
        for (size_t i = 0; i < n; i++)
            worst = check_worst(worst, fabs((double)r[i] - ((double)x[i] - y[i])));
        CHECKF(worst <= 1e-6, "%s: residual is not x - decoded (%g)", codec_name(codec), worst);
        float big[8] = {3e37f};
        CHECK(codec_roundtrip(ctx, big, 8, codec, NULL) == -1 && codec_ctx_error(ctx) == FRAME_E_RANGE);
    }
    free(x); free(y); free(r);
    codec_ctx_destroy(&ctx);
}

/* Rows of rank k plus a little noise: pca keeps about k directions, its
 * error is near the noise, its frame a fraction of fp32's; its decoder
 * gives the double reference's values within float rounding. */
static void test_pca_roundtrip(void)
{
    const size_t m = 512;
    const int w = 128, k = 6;
    size_t n = m * (size_t)w;
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y), *y2 = malloc(n * sizeof *y2);
    float basis[6][128];
    for (int j = 0; j < k; j++)
        for (int c = 0; c < w; c++)
            basis[j][c] = s_heavy();
    for (size_t i = 0; i < m; i++) {
        float a[6];
        for (int j = 0; j < k; j++)
            a[j] = (float)(j + 1) * (s_unif() - 0.5f);
        for (int c = 0; c < w; c++) {
            float v = 0.001f * s_heavy();
            for (int j = 0; j < k; j++)
                v += basis[j][c] * a[j];
            x[i * (size_t)w + c] = v * 1e-3f;
        }
    }
    codec_ctx_t *ctx = codec_ctx_new(1);
    uint8_t *f = malloc(frame_bound(n, CODEC_PCA));
    uint32_t shape[2] = {(uint32_t)m, (uint32_t)w};
    char err[200];
    encode_opts_t o = {.block_size = w};
    long len = frame_encode(ctx, f, frame_bound(n, CODEC_PCA), x, shape, 2, CODEC_PCA, &o, err, sizeof err);
    CHECKF(len > 0, "%s", err);
    frame_info_t fi;
    CHECK(frame_peek(&fi, f, (size_t)len, NULL, 0) == 0);
    int r = pca_rank_of(fi.raw_len, m, w);
    CHECKF(r >= k && r <= k + 2, "rank %d for data of rank %d", r, k);
    CHECKF((size_t)len * 16 < n * 4, "pca frame %ld bytes for %zu values", len, n);
    CHECK(frame_decode(ctx, y, n, NULL, NULL, f, (size_t)len, err, sizeof err) == (long)n);
    double e = s_rel_mse(x, y, n);
    CHECKF(e < 0.03, "pca relative error %.4f", e);
    /* the decoder against the reference, on the raw payload */
    uint8_t *raw = malloc(fi.raw_len);
    encode_opts_t plain = {.block_size = w, .zstd = 1};
    len = frame_encode(ctx, f, frame_bound(n, CODEC_PCA), x, shape, 2, CODEC_PCA, &plain, err, sizeof err);
    CHECK(len > 0 && frame_peek(&fi, f, (size_t)len, NULL, 0) == 0);
    memcpy(raw, f + fi.header_len, fi.raw_len);
    float p2e = ldexpf(1.0f, fi.scale_exp);
    CHECK(pca_decode(y, raw, fi.raw_len, m, w, p2e) == 0);
    pca_decode_ref(y2, raw, fi.raw_len, m, w, p2e);
    double amax = 0, worst = 0;
    for (size_t i = 0; i < n; i++)
        amax = fmax(amax, fabs((double)y2[i]));
    for (size_t i = 0; i < n; i++)
        worst = check_worst(worst, fabs((double)y[i] - y2[i]));
    CHECKF(worst <= 1e-5 * amax, "pca decoders differ by %g (amax %g)", worst, amax);
    /* zeros: rank 0; rows that do not divide the values: refused */
    memset(x, 0, n * sizeof *x);
    len = frame_encode(ctx, f, frame_bound(n, CODEC_PCA), x, shape, 2, CODEC_PCA, &o, err, sizeof err);
    CHECK(len > 0 && frame_peek(&fi, f, (size_t)len, NULL, 0) == 0 && pca_rank_of(fi.raw_len, m, w) == 0);
    CHECK(frame_decode(ctx, y, n, NULL, NULL, f, (size_t)len, err, sizeof err) == (long)n && y[0] == 0.0f);
    uint32_t odd[1] = {1000};
    CHECK(frame_encode(ctx, f, frame_bound(n, CODEC_PCA), x, odd, 1, CODEC_PCA, &o, err, sizeof err) == -1);
    CHECK(codec_ctx_error(ctx) == FRAME_E_BLOCK);
    x[5] = NAN;
    CHECK(frame_encode(ctx, f, frame_bound(n, CODEC_PCA), x, shape, 2, CODEC_PCA, &o, err, sizeof err) == -1);
    CHECK(codec_ctx_error(ctx) == FRAME_E_NONFINITE_INPUT);
    free(x); free(y); free(y2); free(f); free(raw);
    codec_ctx_destroy(&ctx);
}

/* Encodes n values of codec with block bs, no zstd, into f; its length. */
static size_t s_plain_frame(codec_ctx_t *ctx, uint8_t *f, size_t cap, int codec, size_t n, int bs)
{
    float x[512];
    for (size_t i = 0; i < n; i++)
        x[i] = s_heavy() + (float)(i % 5);
    uint32_t shape[1] = {(uint32_t)n};
    encode_opts_t o = {.block_size = bs, .zstd = 1};
    long len = frame_encode(ctx, f, cap, x, shape, 1, codec, &o, NULL, 0);
    assert(len > 0);
    return (size_t)len;
}

/* The hq and pca decoders refuse what their formats exclude: a tile that is
 * no power of two, a negative or NaN/Inf scale, a pca code -128, a pca
 * raw length no rank gives, and values that decode to Inf. */
static void test_hq_pca_refuse(void)
{
    enum { HDR = 36 };
    codec_ctx_t *ctx = codec_ctx_new(1);
    uint8_t f[4096];
    float out[512];
    char err[256];
    struct { int codec, bs, off, op; uint8_t val; frame_error_t want; const char *why; } cases[] = {
        {CODEC_HQ2, 64, 10, S_SET, 48, FRAME_E_BLOCK, "block"},          /* tile 48 */
        {CODEC_HQ3, 64, HDR + 1, S_OR, 0x80, FRAME_E_SCALE, "scale"},     /* negative */
        {CODEC_HQ1, 64, HDR + 1, S_SET, 0x7c, FRAME_E_SCALE, "scale"},    /* Inf */
        {CODEC_HQ4, 64, 9, S_SET, 126, FRAME_E_VALUE, "NaN/Inf"},        /* 2^126 x scale */
        {CODEC_PCA, 64, HDR + 1, S_OR, 0x80, FRAME_E_SCALE, "scale"},     /* negative step */
        {CODEC_PCA, 64, HDR + 3, S_SET, 0x7e, FRAME_E_SCALE, "scale"},    /* NaN basis scale */
        {CODEC_PCA, 64, HDR + 4, S_SET, 0x80, FRAME_E_VALUE, "code"},     /* basis code -128 */
        {CODEC_PCA, 64, HDR + 2 + 2 + 64 + 3, S_SET, 0x80, FRAME_E_VALUE, "code"},   /* coefficient code */
        {CODEC_PCA, 64, 9, S_SET, 126, FRAME_E_VALUE, "NaN/Inf"},
        {CODEC_PCA, 64, 12, S_XOR, 1, FRAME_E_RAWLEN, "raw length"},
        {CODEC_PCA, 64, 10, S_SET, 60, FRAME_E_BLOCK, "rows"},           /* rows of 60 do not divide 512 */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        size_t len = s_plain_frame(ctx, f, sizeof f, cases[c].codec, 512, cases[c].bs);
        CHECK(frame_decode(ctx, out, 512, NULL, NULL, f, len, err, sizeof err) == 512);
        uint8_t *p = f + cases[c].off;
        *p = (uint8_t)(cases[c].op == S_SET ? cases[c].val : cases[c].op == S_XOR ? *p ^ cases[c].val : *p | cases[c].val);
        s_reseal(f, len);
        err[0] = 0;
        long rc = frame_decode(ctx, out, 512, NULL, NULL, f, len, err, sizeof err);
        CHECKF(rc == -1 && codec_ctx_error(ctx) == cases[c].want && strstr(err, cases[c].why),
               "case %zu (%s): %ld, error %d: %s", c, codec_name(cases[c].codec), rc, codec_ctx_error(ctx), err);
    }
    codec_ctx_destroy(&ctx);
}

/* Blocks never span two rows. */
static void test_block_for_rows(void)
{
    CHECK(codec_block_for_rows(CODEC_PCA, 128) == 128);
    CHECK(codec_block_for_rows(CODEC_PCA, 784) == 784);
    CHECK(codec_block_for_rows(CODEC_PCA, 5000) == 0);
    CHECK(codec_block_for_rows(CODEC_HQ2, 128) == 128);
    CHECK(codec_block_for_rows(CODEC_HQ2, 768) == FRAME_DEFAULT_TILE);
    CHECK(codec_block_for_rows(CODEC_HQ2, 40) == 8);
    CHECK(codec_block_for_rows(CODEC_HQ2, 7) == 0);
    CHECK(codec_block_for_rows(CODEC_INT8, 128) == 0);
    CHECK(codec_block_for_rows(CODEC_INT8, 32) == 32);   /* a bottleneck's narrow rows: one position per scale */
    CHECK(codec_block_for_rows(CODEC_INT4, 16) == 16);
    CHECK(codec_block_for_rows(CODEC_INT8, 96) == 32);
    CHECK(codec_block_for_rows(CODEC_INT8, 768) == 0);
    CHECK(codec_block_for_rows(CODEC_INT8, 7) == 0);
}

int main(void)
{
    RUN(test_names);
    RUN(test_half_conversion);
    RUN(test_cpu_levels);
    RUN(test_planar_matches_reference);
    RUN(test_f16_planes_every_level);
    RUN(test_frames_same_at_every_level);
    RUN(test_roundtrip_all_codecs);
    RUN(test_roundtrip_exact_values);
    RUN(test_stochastic_rounding);
    RUN(test_error_feedback);
    RUN(test_nonfinite_input);
    RUN(test_args_and_context);
    RUN(test_decoder_refuses_damage);
    RUN(test_decoder_reasons);
    RUN(test_decoder_one_zstd_frame);
    RUN(test_decoder_refuses_codes);
    RUN(test_zstd_saving_rule);
    RUN(test_peek_and_unaligned);
    RUN(test_rotq_matches_reference);
    RUN(test_hq_roundtrip);
    RUN(test_pca_roundtrip);
    RUN(test_hq_pca_refuse);
    RUN(test_block_for_rows);
    CHECK_EXIT();
}
