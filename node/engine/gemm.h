/* gemm.h: the engine's single-precision matrix product.
 *
 * gemm() has cblas_sgemm's row-major contract.  It calls cblas_sgemm,
 * except on a CPU with AVX-512 (cpu_level(), compress/cpu.h) whose OpenBLAS
 * runs a narrower kernel: OpenBLAS picks its kernel by the CPU or by
 * OPENBLAS_CORETYPE, which can name an AVX2 core (Haswell) on an AVX-512
 * machine, or its build may predate the CPU.  There gemm() runs this
 * module's own packed, register-blocked AVX-512 kernel (on the gpt-small
 * shapes 1.9 x OpenBLAS's Haswell kernel and 0.97-1.06 x its AVX-512 one,
 * which therefore stays in use where OpenBLAS runs it).
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

/* 1 when gemm() runs its own kernel here (AVX-512, and OpenBLAS's kernel is
 * not an AVX-512 one), 0 when it calls cblas_sgemm.  Fixed for a process:
 * BRIGADE_CPU=avx2 (or lower) forces cblas_sgemm. */
int gemm_fast(void);
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
