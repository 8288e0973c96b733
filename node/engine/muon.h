/* muon.h: the orthogonalization at the heart of the Muon optimizer.
 *
 * Muon replaces a matrix's momentum M by (approximately) its orthogonal
 * polar factor U V^T (M = U S V^T): every singular direction of the step gets
 * the same size, so no direction of a matrix, noisy or stale, dominates the
 * update.  The factor is approximated by five Newton-Schulz iterations of the
 * quintic X <- a X + (b A + c A^2) X, A = X X^T, (a, b, c) = (3.4445, -4.7750,
 * 2.0315), from X = M / ||M||_F: singular values that are not tiny against
 * the Frobenius norm end near 1 (0.68 to 1.2 in tests/test_muon.c, for a
 * 100 : 1 spread; the quintic trades exactness for speed), tiny ones are
 * scaled up about 3.4445^5 = 480 times.  A tall matrix
 * (rows > cols) is iterated on its transpose (A = X^T X, X <- a X + X B), so
 * the Gram matrix is min(rows, cols) square.
 *
 * Cost: 5 x (4 r^2 c + 2 r^3) flops for r = min(rows, cols), c = max; for a
 * gpt block of width C, 5 x 56 C^3 in all.
 *
 * muon_orthogonalize_ref is the plain reference (loops, sums in double) the
 * gemm() version is tested against. */
#ifndef BRIGADE_MUON_H
#define BRIGADE_MUON_H
#include <stddef.h>

#define MUON_STEPS 5   /* Newton-Schulz iterations */

/* Floats of scratch muon_orthogonalize needs besides x: a copy of x and two
 * Gram-sized matrices, rows x cols + 2 min(rows, cols)^2. */
size_t muon_scratch_floats(int rows, int cols);

/* Replaces x (rows x cols, row-major) by its approximate orthogonal polar
 * factor, with gemm() products (gemm.h) in the calling thread; scratch holds
 * muon_scratch_floats(rows, cols) floats.  An all-zero x stays zero. */
void muon_orthogonalize(float *x, float *scratch, int rows, int cols);

/* The reference: the same iteration with plain loops, products summed in
 * double.  Allocates its scratch; returns 0, or -1 when out of memory (x is
 * then left as it was). */
int muon_orthogonalize_ref(float *x, int rows, int cols);
#endif
