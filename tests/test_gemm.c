/* test_gemm.c: the engine's matrix product (node/engine/gemm.h), its own
 * AVX-512 kernel (where the CPU has AVX-512, whichever kernel gemm() picks)
 * and gemm() itself, against a plain double-precision product and against
 * cblas_sgemm, on every transpose, edge shapes, padded leading dimensions,
 * alpha and beta, and the promise that splitting a product by rows or
 * columns changes no bit. */
#include "check.h"
#include "node/engine/gemm.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

typedef void (*s_gemm_fn)(int, int, int, int, int, float, const float *, int, const float *, int, float,
                          float *, int);
static void s_own(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                  int ldb, float beta, float *C, int ldc)
{
    CHECK(gemm_own(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc) == 0);
}
static s_gemm_fn s_fn;   /* the product under test */

static uint64_t s_rng = 0x9e3779b97f4a7c15ULL;
static float s_uniform(void)
{
    s_rng = s_rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((double)(s_rng >> 40) / (double)(1ULL << 24)) * 2.0f - 1.0f;
}
static float *s_random(size_t n)
{
    float *x = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) x[i] = s_uniform();
    return x;
}

/* The largest |gemm - exact| / (|alpha| sum |a||b| + |beta c|) over C. */
static double s_error(int ta, int tb, int M, int N, int K, float alpha, float beta, int pad)
{
    int lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + pad, ldc = N + pad;
    float *A = s_random((size_t)(ta ? K : M) * lda), *B = s_random((size_t)(tb ? N : K) * ldb);
    float *C = s_random((size_t)M * ldc), *C0 = malloc((size_t)M * ldc * sizeof(float));
    memcpy(C0, C, (size_t)M * ldc * sizeof(float));
    s_fn(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    double worst = 0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0, mag = 0;
            for (int k = 0; k < K; k++) {
                double a = ta ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k];
                double b = tb ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j];
                s += a * b;
                mag += fabs(a * b);
            }
            double c0 = C0[(size_t)i * ldc + j];
            double want = alpha * s + (beta != 0 ? beta * c0 : 0);
            double e = fabs(C[(size_t)i * ldc + j] - want) / (fabs(alpha) * mag + fabs(beta * c0) + 1e-30);
            worst = check_worst(worst, e);
        }
    /* the padding past column N stays as it was */
    for (int i = 0; i < M; i++)
        for (int j = N; j < ldc; j++) CHECK(C[(size_t)i * ldc + j] == C0[(size_t)i * ldc + j]);
    free(A); free(B); free(C); free(C0);
    return worst;
}

static void test_matches_exact_product(void)
{
    static const int shapes[][3] = { { 1, 1, 1 }, { 12, 32, 256 }, { 13, 33, 257 }, { 5, 7, 3 },
                                     { 150, 70, 300 }, { 37, 600, 513 }, { 290, 17, 64 } };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int t = 0; t < 4; t++) {
            int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
            double e = s_error(t & 1, t >> 1, M, N, K, 1.0f, 0.0f, 0);
            CHECKF(e < 1e-6, "%dx%dx%d trans %d: relative error %g", M, N, K, t, e);
        }
}

static void test_alpha_beta_and_strides(void)
{
    double e = s_error(0, 1, 29, 45, 270, 1.0f, 1.0f, 3);
    CHECKF(e < 1e-6, "beta 1: %g", e);
    e = s_error(1, 0, 31, 40, 100, -0.5f, 0.25f, 5);
    CHECKF(e < 1e-6, "alpha -0.5 beta 0.25: %g", e);
    e = s_error(0, 0, 17, 19, 600, 2.0f, -1.0f, 1);
    CHECKF(e < 1e-6, "alpha 2 beta -1, three blocks of k: %g", e);
}

/* beta 0 writes C without reading it: NaNs there do not come out */
static void test_beta_zero_ignores_c(void)
{
    int M = 14, N = 35, K = 9;
    float *A = s_random((size_t)M * K), *B = s_random((size_t)K * N), *C = malloc((size_t)M * N * sizeof(float));
    for (int i = 0; i < M * N; i++) C[i] = NAN;
    s_fn(0, 0, M, N, K, 1.0f, A, K, B, N, 0.0f, C, N);
    int nans = 0;
    for (int i = 0; i < M * N; i++) nans += isnan(C[i]) != 0;
    CHECKF(nans == 0, "%d NaNs", nans);
    free(A); free(B); free(C);
}

/* the own kernel's promise (gemm.h; cblas_sgemm makes none): rows or
 * columns computed in separate calls give the same bits as one call, and
 * agree with cblas_sgemm to rounding */
static void test_split_gives_same_bits(void)
{
    int M = 100, N = 96, K = 520;
    float *A = s_random((size_t)M * K), *B = s_random((size_t)N * K);
    float *C1 = calloc((size_t)M * N, sizeof(float)), *C2 = calloc((size_t)M * N, sizeof(float));
    float *C3 = calloc((size_t)M * N, sizeof(float)), *R = calloc((size_t)M * N, sizeof(float));
    s_fn(0, 1, M, N, K, 1.0f, A, K, B, K, 0.0f, C1, N);
    s_fn(0, 1, 37, N, K, 1.0f, A, K, B, K, 0.0f, C2, N);
    s_fn(0, 1, M - 37, N, K, 1.0f, A + (size_t)37 * K, K, B, K, 0.0f, C2 + (size_t)37 * N, N);
    s_fn(0, 1, M, 50, K, 1.0f, A, K, B, K, 0.0f, C3, N);
    s_fn(0, 1, M, N - 50, K, 1.0f, A, K, B + (size_t)50 * K, K, 0.0f, C3 + 50, N);
    gemm_ref(0, 1, M, N, K, 1.0f, A, K, B, K, 0.0f, R, N);
    CHECK(memcmp(C1, C2, (size_t)M * N * sizeof(float)) == 0);
    CHECK(memcmp(C1, C3, (size_t)M * N * sizeof(float)) == 0);
    double worst = 0;
    for (int i = 0; i < M * N; i++) worst = check_worst(worst, fabs(C1[i] - R[i]));
    CHECKF(worst < 1e-4, "vs cblas_sgemm: %g", worst);
    free(A); free(B); free(C1); free(C2); free(C3); free(R);
}

/* a tile at a product's bottom edge runs a kernel of only the rows it has
 * (gemm.c): every height from 1 to 2 tiles gives each row the bits it has
 * in a taller product, on both layouts of op(A) */
static void test_edge_rows_same_bits(void)
{
    enum { MMAX = 28, N = 40, K = 300 };
    float *A = s_random((size_t)MMAX * K), *B = s_random((size_t)N * K);
    for (int ta = 0; ta < 2; ta++) {
        int lda = ta ? MMAX : K;
        float *full = calloc((size_t)MMAX * N, sizeof(float)), *C = calloc((size_t)MMAX * N, sizeof(float));
        s_fn(ta, 1, MMAX, N, K, 1.0f, A, lda, B, K, 0.0f, full, N);
        for (int M = 1; M <= MMAX; M++) {
            memset(C, 0, (size_t)MMAX * N * sizeof(float));
            s_fn(ta, 1, M, N, K, 1.0f, A, lda, B, K, 0.0f, C, N);
            CHECKF(memcmp(C, full, (size_t)M * N * sizeof(float)) == 0, "ta=%d M=%d: rows differ from M=%d's", ta, M, MMAX);
        }
        free(full); free(C);
    }
    free(A); free(B);
}

/* op(A) with rows contiguous in k (or, transposed, its rows' terms side by
 * side) is read where it lies unless its rows are a multiple of 4 KiB apart,
 * where it is packed (gemm.c): both ways give the same bits, on both
 * layouts and at every k block */
static void test_in_place_same_bits(void)
{
    enum { M = 70, N = 48, K = 600, FAR = 1024 };
    float *B = s_random((size_t)N * K), *src = s_random((size_t)M * K);
    for (int ta = 0; ta < 2; ta++) {
        int rows = ta ? K : M, cols = ta ? M : K;   /* A as stored */
        float *near = malloc((size_t)rows * cols * sizeof(float)), *far = calloc((size_t)rows * FAR, sizeof(float));
        for (int r = 0; r < rows; r++)
            for (int c = 0; c < cols; c++) near[(size_t)r * cols + c] = far[(size_t)r * FAR + c] = src[(size_t)r * cols + c];
        float *C1 = calloc((size_t)M * N, sizeof(float)), *C2 = calloc((size_t)M * N, sizeof(float));
        s_fn(ta, 1, M, N, K, 1.0f, near, cols, B, K, 0.0f, C1, N);
        s_fn(ta, 1, M, N, K, 1.0f, far, FAR, B, K, 0.0f, C2, N);
        CHECKF(memcmp(C1, C2, (size_t)M * N * sizeof(float)) == 0, "ta=%d: lda %d and %d differ", ta, cols, FAR);
        free(near); free(far); free(C1); free(C2);
    }
    free(B); free(src);
}

static void s_run_all(void)
{
    RUN(test_matches_exact_product);
    RUN(test_alpha_beta_and_strides);
    RUN(test_beta_zero_ignores_c);
}

/* K == 0 scales C by beta (beta 0: zeros, whatever C held) */
static void test_empty_sum_scales_c(void)
{
    float c[6] = { 1, 2, 3, NAN, 5, 6 }, one = 1;
    s_fn(0, 0, 2, 2, 0, 1.0f, &one, 1, &one, 1, 2.0f, c, 3);
    CHECK(c[0] == 2 && c[1] == 4 && c[2] == 3 && c[4] == 10);
    s_fn(0, 0, 2, 2, 0, 1.0f, &one, 1, &one, 1, 0.0f, c, 3);
    CHECK(c[0] == 0 && c[1] == 0 && c[3] == 0 && c[4] == 0 && c[5] == 6);
}

int main(void)
{
    float x = 1, y = 0;
    if (gemm_own(0, 0, 1, 1, 1, 1.0f, &x, 1, &x, 1, 0.0f, &y, 1) == 0) {
        printf("# the own kernel\n");
        s_fn = s_own;
        s_run_all();
        RUN(test_split_gives_same_bits);
        RUN(test_edge_rows_same_bits);
        RUN(test_in_place_same_bits);
        RUN(test_empty_sum_scales_c);
    } else {
        printf("# no AVX-512 here: the own kernel is not tested\n");
    }
    printf("# gemm(): %s\n", gemm_fast() ? "the own kernel" : "cblas_sgemm");
    s_fn = gemm;
    s_run_all();
    if (gemm_fast()) RUN(test_split_gives_same_bits);
    CHECK_EXIT();
}
