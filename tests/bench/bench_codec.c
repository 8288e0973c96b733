/* bench_codec.c: compression ratio, error and speed of every codec, beside
 * memcpy measured in the same run, on one core.
 *
 *   bench_codec [-n VALUES] [-l ZSTD_LEVEL] [-w ROW] [FILE]
 *
 * -n: values of synthetic data (default 4M), or at most that many from FILE.
 * -w: the values of one row (one position's vector: the model's width,
 * default 256), which hq and pca blocks never span; the values are cut to
 * whole rows.
 * FILE holds raw little-endian float32 values (e.g. dumped activations);
 * without it the data is synthetic: gaussian-ish with heavy tails.  Prints
 * markdown tables: the codecs, then what zstd and the payload layout add. */
#include "compress/codec.h"
#include "compress/quant.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zstd.h>

static double s_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t s_rng = 0x243f6a8885a308d3ull;
static double s_unif(void)
{
    s_rng ^= s_rng << 13;
    s_rng ^= s_rng >> 7;
    s_rng ^= s_rng << 17;
    return ((double)(s_rng >> 11) + 0.5) * 0x1p-53;
}

/* Normal via Box-Muller, times a Student-t-like heavy tail now and then. */
static void s_synthetic(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        double g = sqrt(-2.0 * log(s_unif())) * cos(6.283185307179586 * s_unif());
        if (s_unif() < 0.01)
            g /= sqrt(s_unif()) + 0.05;
        x[i] = (float)g;
    }
}

static float *s_load(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    size_t want = (size_t)sz / 4;
    if (*n && *n < want)
        want = *n;
    float *x = malloc(want * sizeof *x + 1);
    if (!x || fread(x, 4, want, f) != want) {
        fprintf(stderr, "%s: cannot read %zu floats\n", path, want);
        fclose(f);
        free(x);
        return NULL;
    }
    fclose(f);
    size_t k = 0;
    for (size_t i = 0; i < want; i++)
        if (isfinite(x[i]))
            x[k++] = x[i];
    *n = k;
    return x;
}

/* Best time of reps runs (at least 0.2 s of runs in total). */
#define S_TIME(best, body) do { \
    best = 1e30; double t_all = 0; \
    for (int r_ = 0; r_ < 50 && (r_ < 3 || t_all < 0.2); r_++) { \
        double t0_ = s_now(); body; double dt_ = s_now() - t0_; \
        t_all += dt_; if (dt_ < best) best = dt_; } } while (0)

typedef struct {
    const char *label;  /* row name */
    int codec;          /* codec id */
    int zstd;           /* encode_opts_t.zstd */
    uint64_t seed;      /* stochastic rounding */
} s_row_t;

int main(int argc, char **argv)
{
    size_t n = 1u << 22;
    int level = 1, n_given = 0, row = 256;
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-n") && i + 1 < argc)
            n = strtoul(argv[++i], NULL, 10), n_given = 1;
        else if (!strcmp(argv[i], "-l") && i + 1 < argc)
            level = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-w") && i + 1 < argc)
            row = atoi(argv[++i]);
        else if (argv[i][0] != '-')
            path = argv[i];
        else {
            fprintf(stderr, "usage: bench_codec [-n VALUES] [-l ZSTD_LEVEL] [-w ROW] [FILE.f32]\n");
            return 2;
        }
    }
    float *x;
    if (path) {
        size_t want = n_given ? n : 0;             /* 0: the whole file */
        x = s_load(path, &want);
        if (!x)
            return 1;
        n = want;
    } else {
        x = malloc(n * sizeof *x);
        s_synthetic(x, n);
    }
    if (row < 1) {
        fprintf(stderr, "bench_codec: -w %d: a row holds at least one value\n", row);
        return 2;
    }
    n -= n % (size_t)row;
    if (n == 0 || n > FRAME_MAX_VALUES) {
        fprintf(stderr, "bench_codec: %zu values: need 1..%u\n", n, FRAME_MAX_VALUES);
        return 1;
    }
    codec_ctx_t *ctx = codec_ctx_new(level);
    if (!ctx) {
        fprintf(stderr, "bench_codec: bad zstd level %d\n", level);
        return 1;
    }
    float *y = malloc(n * sizeof *y), *cp = malloc(n * sizeof *cp);
    uint8_t *frame = malloc(frame_bound(n, CODEC_FP32));
    uint32_t shape[1] = {(uint32_t)n};
    double raw = 4.0 * (double)n, t;

    S_TIME(t, memcpy(cp, x, n * sizeof *x); __asm__ volatile("" ::"r"(cp) : "memory"));
    double memcpy_gbs = raw / t / 1e9;

    printf("## codecs (%s, %zu values, rows of %d, zstd level %d, one core)\n\n",
           path ? path : "synthetic heavy-tailed gaussian", n, row, level);
    printf("| codec | ratio | rel L2 err | encode GB/s | decode GB/s | memcpy GB/s |\n");
    printf("|---|---:|---:|---:|---:|---:|\n");
    s_row_t rows[] = {
        {"fp32", CODEC_FP32, 0, 0}, {"fp16", CODEC_FP16, 0, 0}, {"bf16", CODEC_BF16, 0, 0},
        {"int8", CODEC_INT8, 0, 0}, {"int8 no zstd", CODEC_INT8, 1, 0},
        {"int8 zstd always", CODEC_INT8, 2, 0}, {"int8 stochastic", CODEC_INT8, 0, 7},
        {"int4", CODEC_INT4, 0, 0}, {"int4 no zstd", CODEC_INT4, 1, 0},
        {"int4 zstd always", CODEC_INT4, 2, 0}, {"int4 stochastic", CODEC_INT4, 0, 7},
        {"hq2", CODEC_HQ2, 0, 0}, {"hq3", CODEC_HQ3, 0, 0}, {"hq4", CODEC_HQ4, 0, 0}, {"pca", CODEC_PCA, 0, 0},
    };
    char err[256];
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        encode_opts_t o = {.zstd = rows[r].zstd, .sr_seed = rows[r].seed,
                           .block_size = codec_block_for_rows(rows[r].codec, (size_t)row)};
        size_t cap = frame_bound(n, rows[r].codec);
        long len = 0;
        double te, td;
        S_TIME(te, len = frame_encode(ctx, frame, cap, x, shape, 1, rows[r].codec, &o, err, sizeof err));
        if (len < 0) {
            fprintf(stderr, "%s: %s\n", rows[r].label, err);
            return 1;
        }
        long got = 0;
        S_TIME(td, got = frame_decode(ctx, y, n, NULL, NULL, frame, (size_t)len, err, sizeof err));
        if (got != (long)n) {
            fprintf(stderr, "%s: %s\n", rows[r].label, err);
            return 1;
        }
        double e2 = 0, x2 = 0;
        for (size_t i = 0; i < n; i++) {
            double d = (double)y[i] - x[i];
            e2 += d * d;
            x2 += (double)x[i] * x[i];
        }
        printf("| %s | %.2f | %.2e | %.2f | %.2f | %.2f |\n", rows[r].label, raw / (double)len,
               x2 > 0 ? sqrt(e2 / x2) : 0.0, raw / te / 1e9, raw / td / 1e9, memcpy_gbs);
        fflush(stdout);
    }

    /* What the layout does for zstd: interleaved ggml blocks vs planes. */
    size_t nb = n / QK, m = nb * QK;
    ZSTD_CCtx *cc = ZSTD_createCCtx();
    size_t zb = ZSTD_compressBound(m * 4);
    uint8_t *a = malloc(m * 4), *z = malloc(zb);
    printf("\n## payload layout under zstd (bytes per value, %zu values)\n\n", m);
    printf("| codec | layout | raw | zstd |\n|---|---|---:|---:|\n");
    block_q8_t *b8 = (block_q8_t *)a;
    quant_q8_ref(b8, x, nb, 1.0f, 0, 0);
    size_t r8 = nb * sizeof(block_q8_t), z8 = ZSTD_compressCCtx(cc, z, zb, a, r8, level);
    printf("| int8 | interleaved blocks {fp16 d; int8 q[64]} | %.4f | %.4f |\n", (double)r8 / m, (double)z8 / m);
    quant_q8((uint16_t *)a, (int8_t *)(a + 2 * nb), x, m, QK, 1.0f, 0);
    z8 = ZSTD_compressCCtx(cc, z, zb, a, r8, level);
    printf("| int8 | scales plane, codes plane | %.4f | %.4f |\n", (double)r8 / m, (double)z8 / m);
    block_q4_t *b4 = (block_q4_t *)a;
    quant_q4_ref(b4, x, nb, 1.0f, 0, 0);
    size_t r4 = nb * sizeof(block_q4_t), z4 = ZSTD_compressCCtx(cc, z, zb, a, r4, level);
    printf("| int4 | interleaved blocks {fp16 d; uint8 q[32]} | %.4f | %.4f |\n", (double)r4 / m, (double)z4 / m);
    quant_q4((uint16_t *)a, a + 2 * nb, x, m, QK, 1.0f, 0);
    z4 = ZSTD_compressCCtx(cc, z, zb, a, r4, level);
    printf("| int4 | scales plane, nibble plane | %.4f | %.4f |\n", (double)r4 / m, (double)z4 / m);
    for (size_t i = 0; i < m; i++) {
        uint16_t h = quant_f32_to_f16(x[i]);
        memcpy(a + 2 * i, &h, 2);
    }
    size_t zh = ZSTD_compressCCtx(cc, z, zb, a, 2 * m, level);
    printf("| fp16 | interleaved | 2 | %.4f |\n", (double)zh / m);
    quant_f16_planes(a, x, m, 1.0f);
    zh = ZSTD_compressCCtx(cc, z, zb, a, 2 * m, level);
    printf("| fp16 | byte planes | 2 | %.4f |\n", (double)zh / m);
    for (size_t i = 0; i < m; i++) {
        uint16_t h = quant_f32_to_bf16(x[i]);
        memcpy(a + 2 * i, &h, 2);
    }
    zh = ZSTD_compressCCtx(cc, z, zb, a, 2 * m, level);
    printf("| bf16 | interleaved | 2 | %.4f |\n", (double)zh / m);
    quant_bf16_planes(a, x, m);
    zh = ZSTD_compressCCtx(cc, z, zb, a, 2 * m, level);
    printf("| bf16 | byte planes | 2 | %.4f |\n", (double)zh / m);
    size_t zf = ZSTD_compressCCtx(cc, z, zb, x, 4 * m, level);
    printf("| fp32 | interleaved | 4 | %.4f |\n", (double)zf / m);
    quant_f32_planes(a, x, m);
    zf = ZSTD_compressCCtx(cc, z, zb, a, 4 * m, level);
    printf("| fp32 | byte planes | 4 | %.4f |\n", (double)zf / m);

    ZSTD_freeCCtx(cc);
    free(a); free(z); free(x); free(y); free(cp); free(frame);
    codec_ctx_destroy(&ctx);
    return 0;
}
