/* muon.c: Newton-Schulz orthogonalization (muon.h). */
#include "node/engine/muon.h"
#include "node/engine/gemm.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const float s_a = 3.4445f, s_b = -4.7750f, s_c = 2.0315f;

size_t muon_scratch_floats(int rows, int cols)
{
    size_t r = (size_t)(rows < cols ? rows : cols);
    return (size_t)rows * (size_t)cols + 2 * r * r;
}

/* Scales x[0, n) to unit Frobenius norm; returns 0 when x is all zero. */
static int s_normalize(float *x, size_t n)
{
    double ss = 0.0;
    for (size_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
    if (ss == 0.0) return 0;
    float inv = (float)(1.0 / (sqrt(ss) + 1e-7));
    for (size_t i = 0; i < n; i++) x[i] *= inv;
    return 1;
}

void muon_orthogonalize(float *x, float *scratch, int rows, int cols)
{
    size_t n = (size_t)rows * (size_t)cols;
    if (n == 0 || !s_normalize(x, n)) return;
    int wide = rows <= cols, r = wide ? rows : cols;
    float *y = scratch, *A = y + n, *B = A + (size_t)r * r;
    for (int it = 0; it < MUON_STEPS; it++) {
        /* A = X X^T (wide) or X^T X (tall): r x r */
        if (wide)
            gemm(0, 1, r, r, cols, 1.0f, x, cols, x, cols, 0.0f, A, r);
        else
            gemm(1, 0, r, r, rows, 1.0f, x, cols, x, cols, 0.0f, A, r);
        /* B = b A + c A A */
        memcpy(B, A, sizeof(float) * (size_t)r * r);
        gemm(0, 0, r, r, r, s_c, A, r, A, r, s_b, B, r);
        /* X = a X + B X (wide) or a X + X B (tall) */
        memcpy(y, x, sizeof(float) * n);
        if (wide)
            gemm(0, 0, rows, cols, rows, 1.0f, B, r, y, cols, s_a, x, cols);
        else
            gemm(0, 0, rows, cols, cols, 1.0f, y, cols, B, r, s_a, x, cols);
    }
}

/* out (p x q) = op(P) op(Q) summed in double, where op(P) is p x k: P is
 * p x k row-major (tp 0) or k x p (tp 1), likewise Q (k x q, or q x k with tq 1). */
static void s_product(float *out, const float *P, int tp, const float *Q, int tq, int p, int q, int k)
{
    for (int i = 0; i < p; i++)
        for (int j = 0; j < q; j++) {
            double acc = 0.0;
            for (int l = 0; l < k; l++) {
                float a = tp ? P[(size_t)l * p + i] : P[(size_t)i * k + l];
                float b = tq ? Q[(size_t)j * k + l] : Q[(size_t)l * q + j];
                acc += (double)a * b;
            }
            out[(size_t)i * q + j] = (float)acc;
        }
}

int muon_orthogonalize_ref(float *x, int rows, int cols)
{
    size_t n = (size_t)rows * (size_t)cols;
    int wide = rows <= cols, r = wide ? rows : cols;
    float *A = malloc(sizeof(float) * (3 * (size_t)r * r + n));
    if (!A) return -1;
    float *AA = A + (size_t)r * r, *B = AA + (size_t)r * r, *BX = B + (size_t)r * r;
    if (n == 0 || !s_normalize(x, n)) { free(A); return 0; }
    for (int it = 0; it < MUON_STEPS; it++) {
        if (wide) s_product(A, x, 0, x, 1, r, r, cols);
        else s_product(A, x, 1, x, 0, r, r, rows);
        s_product(AA, A, 0, A, 0, r, r, r);
        for (size_t i = 0; i < (size_t)r * r; i++) B[i] = s_b * A[i] + s_c * AA[i];
        if (wide) s_product(BX, B, 0, x, 0, rows, cols, rows);
        else s_product(BX, x, 0, B, 0, rows, cols, cols);
        for (size_t i = 0; i < n; i++) x[i] = s_a * x[i] + BX[i];
    }
    free(A);
    return 0;
}
