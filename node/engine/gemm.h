/* gemm.h: the engine's single-precision matrix product.
 *
 * gemm() has cblas_sgemm's row-major contract.  On a CPU with AVX-512
 * (cpu_level(), compress/cpu.h) it runs this module's own packed,
 * register-blocked AVX-512 kernel, elsewhere cblas_sgemm.  In a training
 * step, whose operands come from memory, the own kernel ran gpt-small's
 * step 1.06 x and gpt-tiny's 1.11 x faster than OpenBLAS's AVX-512 kernel
 * (SkylakeX), and 1.9 x its AVX2 one on the gpt-small shapes (which
 * OpenBLAS runs on an AVX-512 machine when OPENBLAS_CORETYPE names an older
 * core or its build predates the CPU).
 *
 * The own kernel's rounding: each C entry is the sum over k in ascending
 * order, in blocks of GEMM_KC terms, each block's sum added to C in turn; it
 * depends on K and on the entry's own row of op(A) and column of op(B) only,
 * never on M, N, the tile an entry falls in or the thread that computes it,
 * so a product split by rows or columns among callers gives the same bits as
 * one call.  The bits
 * differ from cblas_sgemm's (another order of the sums, fused multiply-adds).
 * Stateless; safe to call from several threads at once. */
#ifndef BRIGADE_GEMM_H
#define BRIGADE_GEMM_H

#define GEMM_KC 256   /* terms of k summed per block */

/* C (M,N) = alpha op(A) op(B) + beta C, row-major, op(X) = X or X^T as
 * trans_x is 0 or 1: op(A) is M x K (A[i*lda + k], or A[k*lda + i]
 * transposed), op(B) K x N (B[k*ldb + j], or B[j*ldb + k] transposed).
 * With beta == 0, C is written and not read (NaNs in it do not spread).
 * M, N, K >= 0; K == 0 scales C by beta. */
void gemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
          const float *B, int ldb, float beta, float *C, int ldc);

/* What gemm_epi() does to each finished block of C: rows [i0, i0 + rows)
 * and columns [j0, j0 + cols) of C, whose entry (i0 + r, j0 + c) is at
 * c[r*ldc + c] and holds its final sum.  Each entry of C is in exactly one
 * block; the blocks come in no promised order. */
typedef void (*gemm_epi_fn)(void *ctx, float *c, int ldc, int rows, int cols, int i0, int j0);

/* gemm(), then epi(ctx, ...) on every block of C: the own kernel calls it
 * on each block of rows and columns as soon as the block's sums are done,
 * while it is still in cache (an element-wise pass there costs no trip to
 * memory); cblas_sgemm's path calls it once on the whole of C.  An
 * element-wise epi gives the same result either way.  epi NULL: gemm(). */
void gemm_epi(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
              const float *B, int ldb, float beta, float *C, int ldc, gemm_epi_fn epi, void *ctx);

/* 1 when gemm() runs its own kernel here (the CPU has AVX-512), 0 when it
 * calls cblas_sgemm.  Fixed for a process: BRIGADE_CPU=avx2 (or lower) or
 * BRIGADE_GEMM=blas forces cblas_sgemm. */
int gemm_fast(void);
/* 0 when BRIGADE_GEMM is unset, empty, `own` (the default: the own kernel
 * where the CPU has AVX-512) or `blas` (cblas_sgemm on any CPU); else -1
 * with a one-line message in err. */
int gemm_env_check(char *err, int errlen);
/* "own" or "blas": which kernel gemm() runs (the metrics' start event). */
const char *gemm_name(void);

/* The own kernel, whatever gemm_fast() says: the same contract as gemm();
 * returns 0, or -1 (C untouched) on a CPU without AVX-512 or when its
 * packing buffers (a few hundred KiB) cannot be allocated. */
int gemm_own(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
             const float *B, int ldb, float beta, float *C, int ldc);

/* The reference gemm() is tested against: cblas_sgemm with the same
 * arguments. */
void gemm_ref(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
              const float *B, int ldb, float beta, float *C, int ldc);
#endif
