/* test_muon.c: the Newton-Schulz orthogonalization (node/engine/muon.h). */
#include "tests/check.h"
#include "node/engine/muon.h"
#include "node/engine/rng.h"
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static float *s_random(int rows, int cols, uint64_t seed)
{
    float *x = malloc(sizeof(float) * (size_t)rows * cols);
    rng_t r;
    rng_seed(&r, seed, 3);
    for (size_t i = 0; i < (size_t)rows * cols; i++) x[i] = rng_normal(&r);
    return x;
}

/* The gemm() version against the reference, for wide, square and tall shapes. */
static void test_matches_reference(void)
{
    const int shapes[4][2] = { {8, 24}, {16, 16}, {36, 12}, {1, 9} };
    for (int k = 0; k < 4; k++) {
        int rows = shapes[k][0], cols = shapes[k][1];
        size_t n = (size_t)rows * cols;
        float *a = s_random(rows, cols, 10 + (uint64_t)k), *b = malloc(sizeof(float) * n);
        float *scratch = malloc(sizeof(float) * muon_scratch_floats(rows, cols));
        memcpy(b, a, sizeof(float) * n);
        muon_orthogonalize(a, scratch, rows, cols);
        CHECK(muon_orthogonalize_ref(b, rows, cols) == 0);
        double worst = 0.0;
        for (size_t i = 0; i < n; i++) worst = check_worst(worst, fabs((double)a[i] - b[i]));
        CHECKF(worst < 1e-5, "%d x %d: worst difference %.3g", rows, cols, worst);
        free(a); free(b); free(scratch);
    }
}

/* Largest and smallest singular value of x (rows x cols, rows <= cols) from
 * the eigenvalues of x x^T by power iteration (on x x^T, then on s I - x x^T
 * with s just above the largest). */
static void s_extremes(const float *x, int rows, int cols, double *lo, double *hi)
{
    float *A = malloc(sizeof(float) * (size_t)rows * rows);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, rows, cols, 1.0f, x, cols, x, cols, 0.0f, A, rows);
    double *z = malloc(sizeof(double) * rows * 2), *y = z + rows;
    double shift = 0.0;   /* the second pass iterates on shift I - x x^T */
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < rows; i++) z[i] = 1.0 + 0.01 * i;
        double lambda = 0.0;
        for (int it = 0; it < 2000; it++) {
            double norm = 0.0;
            for (int i = 0; i < rows; i++) {
                double acc = pass ? shift * z[i] : 0.0;
                for (int j = 0; j < rows; j++) acc += (pass ? -1.0 : 1.0) * A[(size_t)i * rows + j] * z[j];
                y[i] = acc;
                norm += acc * acc;
            }
            norm = sqrt(norm);
            double dot = 0.0;
            for (int i = 0; i < rows; i++) dot += y[i] * z[i];
            lambda = dot;   /* Rayleigh quotient of the unit z */
            for (int i = 0; i < rows; i++) z[i] = y[i] / norm;
        }
        if (pass) *lo = sqrt(fmax(0.0, shift - lambda));
        else { *hi = sqrt(lambda); shift = 1.01 * lambda; }
    }
    free(A);
    free(z);
}

/* A well-conditioned matrix and one with a 100 : 1 spread of singular
 * values both come out with every singular value near 1 (the quintic's
 * band). */
static void test_singular_values_near_one(void)
{
    int rows = 24, cols = 56;
    for (int spread = 0; spread < 2; spread++) {
        float *x = s_random(rows, cols, 7);
        for (int i = 0; i < rows && spread; i++)   /* row i scaled by 100^(-i / (rows - 1)) */
            for (int j = 0; j < cols; j++) x[(size_t)i * cols + j] *= (float)pow(100.0, -(double)i / (rows - 1));
        double lo0, hi0, lo, hi;
        s_extremes(x, rows, cols, &lo0, &hi0);
        float *scratch = malloc(sizeof(float) * muon_scratch_floats(rows, cols));
        muon_orthogonalize(x, scratch, rows, cols);
        s_extremes(x, rows, cols, &lo, &hi);
        printf("  spread %d: singular values %.3g..%.3g before, %.3f..%.3f after\n", spread, lo0, hi0, lo, hi);
        CHECKF(lo > 0.6 && hi < 1.25, "singular values %.3f..%.3f", lo, hi);
        free(x);
        free(scratch);
    }
}

/* The transpose of a tall matrix's factor is the factor of its transpose
 * (the tall path iterates on X^T X), and zero stays zero. */
static void test_tall_is_transposed_wide(void)
{
    int rows = 30, cols = 10;
    float *x = s_random(rows, cols, 5), *xt = malloc(sizeof(float) * rows * cols);
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) xt[(size_t)j * rows + i] = x[(size_t)i * cols + j];
    float *scratch = malloc(sizeof(float) * muon_scratch_floats(rows, cols));
    muon_orthogonalize(x, scratch, rows, cols);
    muon_orthogonalize(xt, scratch, cols, rows);
    double worst = 0.0;
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++)
            worst = check_worst(worst, fabs((double)xt[(size_t)j * rows + i] - x[(size_t)i * cols + j]));
    CHECKF(worst < 1e-5, "tall against transposed wide: %.3g", worst);
    memset(x, 0, sizeof(float) * rows * cols);
    muon_orthogonalize(x, scratch, rows, cols);
    int zero = 1;
    for (int i = 0; i < rows * cols; i++) zero &= x[i] == 0.0f;
    CHECK(zero);
    free(x); free(xt); free(scratch);
}

int main(void)
{
    RUN(test_matches_reference);
    RUN(test_singular_values_near_one);
    RUN(test_tall_is_transposed_wide);
    CHECK_EXIT();
}
