/* pca.h: the low-rank transform codec, pure kernels (no allocation, no I/O).
 *
 * The n values are m rows of w (a row is one sample's or one position's
 * vector: w must not span two positions of a sequence, or a position would
 * see its neighbours' values in the coding error).  The encoder finds the
 * rows' principal directions (the top eigenvectors of the w x w Gram
 * matrix X^T X, by subspace iteration from a fixed start and a Jacobi
 * Rayleigh-Ritz step), keeps at most PCA_MAX_RANK of them, codes each
 * direction's basis vector in int8 (one fp16 scale per direction) and every
 * row's coefficient on it (on the exact basis) as an int8 multiple of one
 * step for the whole tensor.  One uniform step over the directions spends
 * bits where the energy is (reverse water-filling): a weak direction's
 * coefficients round to zero, and trailing directions whose codes are all
 * zero are not sent.  The step is sqrt(12 * eps * mean square) (eps the
 * coefficients' coding error's share of the mean square, about), raised so
 * that no code passes 127.  A direction's basis step is at least what
 * keeps its error near a quarter of its coefficients' (weaker directions
 * get coarser bases, whose small codes zstd then packs), and at least
 * 1/127 of its largest entry.
 *
 * As in quant.h the kernels work on x * 2^-e (p2ne) and the decoder
 * multiplies by 2^e (p2e).
 *
 * Raw layout (r directions, 0 <= r <= min(m, w, PCA_MAX_RANK)):
 *   off  size
 *     0  2      step, fp16 (finite, >= 0)
 *     2  r*(2+w+m)  per direction j: its basis scale (fp16, finite,
 *                   >= 0), w int8 basis codes, m int8 coefficient codes;
 *                   codes in [-127,127] (-128 is refused)
 * so r = (raw length - 2) / (2 + w + m).  Decoded value (i, c) =
 * sum over j of (coef code * step) * (basis code * basis scale), summed in
 * j order, times p2e.  Every fp16 field is little-endian.
 */
#ifndef BRIGADE_PCA_H
#define BRIGADE_PCA_H
#include <stddef.h>
#include <stdint.h>

#define PCA_MAX_RANK 64
#define PCA_E_SCALE (-1)     /* a NaN, Inf or negative step or scale */
#define PCA_E_CODE (-2)      /* a code -128 */
#define PCA_E_NONFINITE (-3) /* values that decode to NaN/Inf */

/* Directions the encoder searches for rows of w: min(w, PCA_MAX_RANK). */
int pca_width_rank(int w);

/* Raw bytes for r directions. */
size_t pca_raw_len(size_t m, int w, int r);

/* The r a raw length stands for, or -1 when it fits none (or r exceeds
 * min(m, w, PCA_MAX_RANK)). */
int pca_rank_of(uint64_t raw_len, size_t m, int w);

/* Floats of scratch pca_encode needs. */
size_t pca_scratch_floats(size_t m, int w);

/* Encodes x (m rows of w, |x| * p2ne < 2^15) into raw (room for
 * pca_raw_len(m, w, min(m, w, PCA_MAX_RANK))) at eps in (0, 1).  scratch
 * holds pca_scratch_floats(m, w) floats.  Returns the raw length. */
size_t pca_encode(uint8_t *raw, const float *x, size_t m, int w, float p2ne, float eps, float *scratch);

/* Decodes raw (raw_len bytes, a length pca_rank_of accepts) into y (m*w).
 * Returns 0, or PCA_E_SCALE (y untouched), PCA_E_CODE (y untouched) or
 * PCA_E_NONFINITE (y written). */
int pca_decode(float *y, const uint8_t *raw, size_t raw_len, size_t m, int w, float p2e);

/* The plain reference decoder: the same sum in double, no checks. */
void pca_decode_ref(float *y, const uint8_t *raw, size_t raw_len, size_t m, int w, float p2e);

#endif
