/* gemm.c: the engine's matrix product (gemm.h).
 *
 * The own kernel is the classic packed scheme: for each block of S_NC
 * columns and GEMM_KC terms, op(B) is packed into panels of S_NR columns
 * (term-major, so a panel's row k is S_NR consecutive floats); for each
 * block of S_MC rows, op(A) into panels of S_MR rows (term-major too); then
 * every pair of panels runs the micro-kernel, which keeps an S_MR x S_NR
 * tile of C in registers (14 rows x 2 AVX-512 vectors: 28 accumulators, 2
 * registers of B, one broadcast of A: 31 of the 32 registers) and adds it
 * to C at the end; a tile at the bottom edge of fewer rows runs a copy of
 * the kernel with only that many (rounded up to even): the 2 rows left at
 * the end of a 1024-row product, or the 4 of a 256-row one, had cost as much
 * as 14, and the step ran 4% faster without it (gpt-small and gpt-tiny,
 * tests/bench/ab_engine.sh).  Packing pads the edge panels with zeros and the store
 * masks the columns and skips the rows past the edge, so an edge entry goes
 * through the same operations as any other.  The packed blocks come from one malloc
 * per call (at most 596 KiB, which glibc serves from its heap once the first
 * one is freed).  Strided rows are packed 16 x 16 at a time through the
 * registers (s_gemm_t16): packed one element at a time they took a fifth of
 * the kernel's time.  The block sizes were picked on the gpt shapes: 12-row
 * tiles or 128-term blocks ran 5-15% slower.  In a training step the
 * operands come from memory, not cache (each product's inputs were written
 * by another pass): there the micro-kernel prefetches its tile of C, the
 * packing reads every source row in order, and blocks of 84 rows rather
 * than 140 keep the packed A nearer; together 1.13 x the products' speed
 * with cold operands (tests/bench/RESULTS.md, "The own matrix product with
 * operands from memory").
 *
 * op(A) is packed only where it must be: where its rows are contiguous in k
 * (A as stored) or its rows' terms lie side by side (A transposed), the
 * micro-kernel broadcasts them from where they lie (s_gemm_kernel_rows),
 * which saves the packing's pass (its copy, and the transposes of the rows
 * contiguous in k): a gpt-small step 3% and a gpt-tiny one 5% faster
 * (tests/bench/RESULTS.md).  Rows a multiple of 4 KiB apart (1024 floats)
 * are still packed: their lines share one set of the first-level cache, and
 * read in place they made the step 4% slower.  So is a block with an odd
 * number of rows, whose last tile would read one row past it.  The sums
 * are the same either way, so are the bits. */
#include "node/engine/gemm.h"
#include "compress/cpu.h"

#include <cblas.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void gemm_ref(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
              const float *B, int ldb, float beta, float *C, int ldc)
{
    if (M <= 0 || N <= 0) return;
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
                M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define S_FAST 1
#define S_TARGET __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma")))
/* The register kernels (s_gemm_t16, s_gemm_kernel) are not instrumented by
 * the sanitizers: they read the packed blocks this file sized and filled
 * (the filling copies stay checked) and move memory through masked vector
 * loads and stores, which the sanitizers do not see anyway; instrumented,
 * the product ran 12 x slower and swarm tests under `make asan` ran past
 * their time bounds.  test_gemm checks every entry against a plain product. */
#define S_UNCHECKED __attribute__((no_sanitize("address", "undefined", "thread")))

#define S_MR 14            /* rows of a micro-tile */
#define S_NR 32            /* columns of a micro-tile: two 16-float vectors */
#define S_MC 84            /* rows of op(A) packed at once (6 panels) */
#define S_NC 512           /* columns of op(B) packed at once (16 panels) */

/* A 16 x 16 transpose through the registers: for k in [0, kn) (kn <= 16),
 * dst[k*ds + i] = src[i*ss + k] for i in [0, rows), and 0 for i in
 * [rows, width) (rows <= width <= 16): `rows` strided rows of 16 terms become
 * kn term-major rows of a panel `ds` floats wide. */
S_TARGET S_UNCHECKED static void s_gemm_t16(float *dst, size_t ds, int width, const float *src, size_t ss,
                                            int rows, int kn)
{
    __mmask16 kmask = kn >= 16 ? 0xffff : (__mmask16)((1u << kn) - 1);
    __mmask16 wmask = width >= 16 ? 0xffff : (__mmask16)((1u << width) - 1);
    __m512 r[16], t[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++)
        r[i] = i < rows ? _mm512_maskz_loadu_ps(kmask, src + (size_t)i * ss) : _mm512_setzero_ps();
    /* pairs of rows interleaved, then quads: u[4g + c] holds, in its 128-bit
     * lane L, rows 4g..4g+3 of column 4L + c */
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
#pragma GCC unroll 4
    for (int g = 0; g < 4; g++) {
        r[4 * g] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], 0x44);
        r[4 * g + 1] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], 0xee);
        r[4 * g + 2] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0x44);
        r[4 * g + 3] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0xee);
    }
    /* then a 4 x 4 transpose of 128-bit lanes per c: column 4L + c whole */
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        __m512 v0 = _mm512_shuffle_f32x4(r[c], r[4 + c], 0x44);
        __m512 v1 = _mm512_shuffle_f32x4(r[c], r[4 + c], 0xee);
        __m512 v2 = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0x44);
        __m512 v3 = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0xee);
        __m512 o[4] = { _mm512_shuffle_f32x4(v0, v2, 0x88), _mm512_shuffle_f32x4(v0, v2, 0xdd),
                        _mm512_shuffle_f32x4(v1, v3, 0x88), _mm512_shuffle_f32x4(v1, v3, 0xdd) };
#pragma GCC unroll 4
        for (int l = 0; l < 4; l++)
            if (4 * l + c < kn) _mm512_mask_storeu_ps(dst + (size_t)(4 * l + c) * ds, wmask, o[l]);
    }
}

/* Packs nv vectors of kc terms (term k of vector v at x[v*sv + k*sk]) into
 * ceil(nv / width) panels of kc x width floats, term-major (panel p's row k
 * holds term k of vectors p*width .. p*width + width - 1), zeros past vector
 * nv: the rows of op(A) into panels of S_MR, the columns of op(B) into
 * panels of S_NR.  Vectors contiguous in k (sk 1) go through s_gemm_t16,
 * 16 at a time.  Vectors side by side (sv 1) go term by term: a term's nv
 * floats are read once, in order, and spread over the panels (read panel by
 * panel, in pieces of `width` floats, cold operands made a transposed op(A)
 * a fifth slower).  Other strides are copied one float at a time. */
S_TARGET static inline __attribute__((always_inline)) void
s_gemm_pack(float *restrict dst, int width, const float *restrict x, size_t sv, size_t sk, int nv, int kc)
{
    size_t pstride = (size_t)kc * width;   /* floats from one panel to the next */
    if (sk == 1) {
        for (int v0 = 0; v0 < nv; v0 += width, dst += pstride) {
            int n = nv - v0 < width ? nv - v0 : width;
            const float *src = x + (size_t)v0 * sv;
            for (int k0 = 0; k0 < kc; k0 += 16)
                for (int h = 0; h < width; h += 16)
                    s_gemm_t16(dst + (size_t)k0 * width + h, (size_t)width, width - h < 16 ? width - h : 16,
                               src + (size_t)h * sv + k0, sv, n - h < 0 ? 0 : n - h > 16 ? 16 : n - h,
                               kc - k0 < 16 ? kc - k0 : 16);
        }
        return;
    }
    for (int k = 0; k < kc; k++) {
        const float *row = x + (size_t)k * sk;
        float *d = dst + (size_t)k * width;
        int v0 = 0;
        if (sv == 1)   /* whole panels: constant-size copies (inlined) */
            for (; v0 + width <= nv; v0 += width, d += pstride) memcpy(d, row + v0, (size_t)width * sizeof(float));
        for (; v0 < nv; v0 += width, d += pstride)
            for (int v = 0; v < width; v++) d[v] = v0 + v < nv ? row[(size_t)(v0 + v) * sv] : 0.0f;
    }
}

/* c = alpha acc + beta c (beta 0: c not read) on the columns in mask. */
S_TARGET static inline void s_store(float *c, __mmask16 mask, __m512 acc, __m512 alpha, float beta)
{
    __m512 r = _mm512_mul_ps(acc, alpha);
    if (beta != 0.0f)
        r = _mm512_add_ps(r, _mm512_mul_ps(_mm512_maskz_loadu_ps(mask, c), _mm512_set1_ps(beta)));
    _mm512_mask_storeu_ps(c, mask, r);
}

/* C rows [0, mr) x columns [0, nr) (mr <= R <= S_MR, nr <= S_NR) = alpha
 * (op(A)'s rows times the B panel over kc terms) + beta C, with R rows of
 * accumulators (a constant in each copy below): an edge tile of a few rows
 * runs a kernel of a few rows, not all S_MR.  Term k of row i is
 * ap[i*as + k*ak]: a packed panel (as 1, ak S_MR) or op(A) where it lies
 * (as lda, ak 1); rows [0, R) must be readable. */
S_TARGET S_UNCHECKED static inline __attribute__((always_inline)) void
s_gemm_tile(int kc, const float *restrict ap, size_t as, size_t ak, const float *restrict bp, float *c,
            size_t ldc, int mr, int nr, float alpha, float beta, const int R)
{
    __m512 c0[S_MR], c1[S_MR];
    /* in a training step C's tile is rarely in cache: fetch it while the sums run */
    for (int i = 0; i < mr; i++) {
        const char *row = (const char *)(c + (size_t)i * ldc);
        _mm_prefetch(row, _MM_HINT_T0);
        _mm_prefetch(row + 64, _MM_HINT_T0);
        _mm_prefetch(row + (size_t)(nr - 1) * sizeof(float), _MM_HINT_T0);
    }
#pragma GCC unroll 14
    for (int i = 0; i < R; i++) c0[i] = c1[i] = _mm512_setzero_ps();
    for (int k = 0; k < kc; k++, ap += ak, bp += S_NR) {
        __m512 b0 = _mm512_loadu_ps(bp), b1 = _mm512_loadu_ps(bp + 16);
#pragma GCC unroll 14
        for (int i = 0; i < R; i++) {
            __m512 a = _mm512_set1_ps(ap[(size_t)i * as]);
            c0[i] = _mm512_fmadd_ps(a, b0, c0[i]);
            c1[i] = _mm512_fmadd_ps(a, b1, c1[i]);
        }
    }
    __mmask16 m0 = nr >= 16 ? 0xffff : (__mmask16)((1u << nr) - 1);
    __mmask16 m1 = nr >= 32 ? 0xffff : nr <= 16 ? 0 : (__mmask16)((1u << (nr - 16)) - 1);
    __m512 va = _mm512_set1_ps(alpha);
#pragma GCC unroll 14
    for (int i = 0; i < R; i++) {
        if (i >= mr) break;
        s_store(c + (size_t)i * ldc, m0, c0[i], va, beta);
        if (m1) s_store(c + (size_t)i * ldc + 16, m1, c1[i], va, beta);
    }
}

/* s_gemm_tile with mr rounded up to even rows (a tile at the bottom edge of
 * a product runs only the rows it has, within one; each entry's sums are the
 * same for every R). */
S_TARGET S_UNCHECKED static inline __attribute__((always_inline)) void
s_gemm_rows(int kc, const float *restrict ap, size_t as, size_t ak, const float *restrict bp, float *c,
            size_t ldc, int mr, int nr, float alpha, float beta)
{
    switch ((mr + 1) / 2) {
    case 1: s_gemm_tile(kc, ap, as, ak, bp, c, ldc, mr, nr, alpha, beta, 2); break;
    case 2: s_gemm_tile(kc, ap, as, ak, bp, c, ldc, mr, nr, alpha, beta, 4); break;
    case 3: s_gemm_tile(kc, ap, as, ak, bp, c, ldc, mr, nr, alpha, beta, 6); break;
    case 4: s_gemm_tile(kc, ap, as, ak, bp, c, ldc, mr, nr, alpha, beta, 8); break;
    case 5: s_gemm_tile(kc, ap, as, ak, bp, c, ldc, mr, nr, alpha, beta, 10); break;
    case 6: s_gemm_tile(kc, ap, as, ak, bp, c, ldc, mr, nr, alpha, beta, 12); break;
    default: s_gemm_tile(kc, ap, as, ak, bp, c, ldc, mr, nr, alpha, beta, S_MR); break;
    }
}

/* The micro-kernel on a packed panel of op(A). */
S_TARGET S_UNCHECKED static void s_gemm_kernel(int kc, const float *restrict ap, const float *restrict bp,
                                               float *c, size_t ldc, int mr, int nr, float alpha, float beta)
{
    s_gemm_rows(kc, ap, 1, S_MR, bp, c, ldc, mr, nr, alpha, beta);
}

/* The micro-kernel on op(A) read where it lies (no packing, no transpose):
 * term k of row i at a[i*as + k*ak], with either as or ak 1 (rows
 * contiguous in k, or their terms side by side); the rows up to mr rounded
 * up to even must exist. */
S_TARGET S_UNCHECKED static void s_gemm_kernel_rows(int kc, const float *restrict a, size_t as, size_t ak,
                                                    const float *restrict bp, float *c, size_t ldc, int mr,
                                                    int nr, float alpha, float beta)
{
    if (ak == 1) s_gemm_rows(kc, a, as, 1, bp, c, ldc, mr, nr, alpha, beta);
    else s_gemm_rows(kc, a, 1, ak, bp, c, ldc, mr, nr, alpha, beta);
}

/* The own product on an AVX-512 CPU (gemm_own's contract, the CPU taken as
 * checked). */
S_TARGET static int s_gemm_packed(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
                                  int lda, const float *B, int ldb, float beta, float *C, int ldc,
                                  gemm_epi_fn epi, void *ctx)
{
    if (M <= 0 || N <= 0) return 0;
    if (K <= 0) {   /* C = beta C */
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) C[(size_t)i * ldc + j] = beta != 0.0f ? beta * C[(size_t)i * ldc + j] : 0.0f;
        if (epi) epi(ctx, C, ldc, M, N, 0, 0);
        return 0;
    }
    int nc_max = N < S_NC ? N : S_NC, kc_max = K < GEMM_KC ? K : GEMM_KC;
    size_t npan = (size_t)(nc_max + S_NR - 1) / S_NR;
    size_t bfl = npan * S_NR * (size_t)kc_max, afl = (size_t)S_MC * kc_max;
    float *buf = malloc((bfl + afl) * sizeof(float));
    if (!buf) return -1;
    float *bpk = buf, *apk = buf + bfl;
    /* strides of op(A) (row i, term k) and op(B) (term k, column j) */
    size_t ai = trans_a ? 1 : (size_t)lda, ak = trans_a ? (size_t)lda : 1;
    size_t bk = trans_b ? 1 : (size_t)ldb, bj = trans_b ? (size_t)ldb : 1;
    for (int j0 = 0; j0 < N; j0 += S_NC) {
        int nc = N - j0 < S_NC ? N - j0 : S_NC;
        for (int p0 = 0; p0 < K; p0 += GEMM_KC) {
            int kc = K - p0 < GEMM_KC ? K - p0 : GEMM_KC;
            float bt = p0 == 0 ? beta : 1.0f;   /* later blocks add to what the first wrote */
            s_gemm_pack(bpk, S_NR, B + (size_t)p0 * bk + (size_t)j0 * bj, bj, bk, nc, kc);
            for (int i0 = 0; i0 < M; i0 += S_MC) {
                int mc = M - i0 < S_MC ? M - i0 : S_MC;
                const float *ablk = A + (size_t)i0 * ai + (size_t)p0 * ak;
                /* op(A) read where it lies, or packed (the file's comment) */
                int direct = mc % 2 == 0 && ((ak == 1 && ai % 1024 != 0) || (ai == 1 && ak % 1024 != 0));
                if (!direct) s_gemm_pack(apk, S_MR, ablk, ai, ak, mc, kc);
                for (int jr = 0; jr < nc; jr += S_NR)
                    for (int ir = 0; ir < mc; ir += S_MR) {
                        float *ct = C + (size_t)(i0 + ir) * ldc + j0 + jr;
                        int mr = mc - ir < S_MR ? mc - ir : S_MR, nr = nc - jr < S_NR ? nc - jr : S_NR;
                        if (direct)
                            s_gemm_kernel_rows(kc, ablk + (size_t)ir * ai, ai, ak, bpk + (size_t)jr * kc, ct,
                                               (size_t)ldc, mr, nr, alpha, bt);
                        else
                            s_gemm_kernel(kc, apk + (size_t)ir * kc, bpk + (size_t)jr * kc, ct, (size_t)ldc, mr,
                                          nr, alpha, bt);
                    }
                if (epi && p0 + kc == K)   /* the block is whole, and in cache */
                    epi(ctx, C + (size_t)i0 * ldc + j0, ldc, mc, nc, i0, j0);
            }
        }
    }
    free(buf);
    return 0;
}

#endif

/* 1 when BRIGADE_GEMM asks for OpenBLAS */
static int s_env_blas(void)
{
    const char *e = getenv("BRIGADE_GEMM");
    return e && !strcmp(e, "blas");
}

int gemm_env_check(char *err, int errlen)
{
    const char *e = getenv("BRIGADE_GEMM");
    if (!e || !*e || !strcmp(e, "own") || !strcmp(e, "blas")) return 0;
    snprintf(err, (size_t)errlen, "BRIGADE_GEMM=%s: must be own or blas", e);
    return -1;
}

int gemm_fast(void)
{
#ifdef S_FAST
    return cpu_level() >= CPU_AVX512 && !s_env_blas();
#else
    return 0;
#endif
}

int gemm_own(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
             const float *B, int ldb, float beta, float *C, int ldc)
{
#ifdef S_FAST
    if (cpu_level() < CPU_AVX512) return -1;
    return s_gemm_packed(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, NULL, NULL);
#else
    (void)trans_a; (void)trans_b; (void)M; (void)N; (void)K; (void)alpha; (void)A; (void)lda;
    (void)B; (void)ldb; (void)beta; (void)C; (void)ldc;
    return -1;
#endif
}

const char *gemm_name(void)
{
    return gemm_fast() ? "own" : "blas";
}

void gemm_epi(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
              const float *B, int ldb, float beta, float *C, int ldc, gemm_epi_fn epi, void *ctx)
{
#ifdef S_FAST
    if (gemm_fast() &&
        s_gemm_packed(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, epi, ctx) == 0)
        return;
#endif
    gemm_ref(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    if (epi && M > 0 && N > 0) epi(ctx, C, ldc, M, N, 0, 0);
}

void gemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
          const float *B, int ldb, float beta, float *C, int ldc)
{
    gemm_epi(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, NULL, NULL);
}
