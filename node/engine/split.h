/* split.h: the layer kernels of layers.h and attention.h shared among the
 * threads of a team (team.h).
 *
 * Each function cuts its work along a dimension where every output element
 * is still computed by exactly one kernel call, in the serial kernel's order
 * of operations: rows of a product's output (the input gradient, a forward
 * linear), output channels of a weight gradient, attention heads.  A
 * parameter gradient that sums over rows (a layernorm's weight and bias,
 * the fc bias after GELU) is summed by blocks of SPLIT_ROWS rows: each
 * block from zero, its rows in order, into the caller's part buffer, then
 * the blocks' sums are added to the gradient in block order; the blocks do
 * not depend on the thread count, so neither do the bits.  So the only
 * difference two thread counts can make is inside cblas_sgemm, when a BLAS
 * kernel rounds a product of fewer rows differently.  Workers take row
 * ranges in the order the products give them (one part per worker), so
 * that a worker mostly reads rows it wrote.
 *
 * Sizes, shapes and accumulate semantics are those of the kernels they
 * split.  Attention takes per-worker scratch: worker w uses
 * scratch + w * stride, stride >= attention_scratch_floats(T, C, NH). */
#ifndef BRIGADE_SPLIT_H
#define BRIGADE_SPLIT_H
#include <stddef.h>
#include "node/engine/team.h"

#define SPLIT_ROWS 64   /* rows of a block of a parameter gradient's sum over rows */

/* Blocks of SPLIT_ROWS rows (the last may be shorter) that cover N rows. */
static inline int split_blocks(int N)
{
    return N > 0 ? (N + SPLIT_ROWS - 1) / SPLIT_ROWS : 0;
}

/* Floats of the part buffer a sum over N rows of width columns needs. */
static inline size_t split_part_floats(int N, int width)
{
    return width > 0 ? (size_t)split_blocks(N) * (size_t)width : 0;
}

void split_linear_forward(team_t *team, float *out, const float *inp, const float *weight,
                          const float *bias, int N, int C, int OC);
void split_linear_bias_residual_forward(team_t *team, float *out, const float *inp, const float *weight,
                                        const float *bias, const float *res, int N, int C, int OC);
void split_linear_bias_gelu_forward_grad(team_t *team, float *out, float *xg, const float *inp,
                                         const float *weight, const float *bias, int N, int C, int OC);
/* dinp (may be NULL) written (accumulate 0) or added to; dweight, dbias added to
 * (dweight NULL: the input gradient only). */
void split_linear_backward(team_t *team, float *dinp, float *dweight, float *dbias, const float *dout,
                           const float *inp, const float *weight, int N, int C, int OC, int accumulate);
/* split_linear_backward with dinp written (not added to) as
 * linear_backward_input_times: multiplied by grad element by element. */
void split_linear_backward_times(team_t *team, float *dinp, float *dweight, float *dbias, const float *dout,
                                 const float *inp, const float *weight, const float *grad, int N, int C, int OC);
void split_layernorm_forward(team_t *team, float *out, float *mean, float *rstd, const float *inp,
                             const float *weight, const float *bias, int N, int C);
void split_layernorm_apply(team_t *team, float *out, const float *inp, const float *mean, const float *rstd,
                           const float *weight, const float *bias, int N, int C);
/* dinp, dweight, dbias += the layernorm gradients (layernorm_backward),
 * dweight and dbias by row blocks through part (split_part_floats(N, 2 C)). */
void split_layernorm_backward(team_t *team, float *dinp, float *dweight, float *dbias, float *part,
                              const float *dout, const float *inp, const float *weight, const float *mean,
                              const float *rstd, int N, int C);
/* dbias (OC) += the column sums of d (N,OC), by row blocks through part
 * (split_part_floats(N, OC)). */
void split_bias_backward(team_t *team, float *dbias, float *part, const float *d, int N, int OC);
void split_attention_forward(team_t *team, float *out, float *att, float *scratch, size_t stride,
                             const float *qkv, int B, int T, int C, int NH);
void split_attention_backward(team_t *team, float *dqkv, float *scratch, size_t stride, const float *dout,
                              const float *qkv, const float *att, int B, int T, int C, int NH,
                              int accumulate);
/* Returns the mean loss, summed over the rows in order as the kernel does. */
float split_crossentropy_forward(team_t *team, float *losses, float *probs, const float *logits,
                                 const int *targets, int N, int V);
void split_crossentropy_backward(team_t *team, float *dlogits, const float *probs, const int *targets,
                                 float scale, int N, int V);
#endif
