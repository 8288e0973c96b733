/* split.h: the layer kernels of layers.h and attention.h shared among the
 * threads of a team (team.h).
 *
 * Each function cuts its work along a dimension where every output element
 * is still computed by exactly one kernel call, in the serial kernel's order
 * of operations: rows of a product's output (the input gradient, a forward
 * linear), output channels of a weight gradient, columns of a layernorm's
 * parameter gradients, attention heads, ranges of an element-wise layer.  So
 * the only difference two thread counts can make is inside cblas_sgemm, when
 * a BLAS kernel rounds a product of fewer rows differently; with team NULL
 * each function is one call of the serial kernel over everything.
 *
 * Sizes, shapes and accumulate semantics are those of the kernels they
 * split.  Attention takes per-worker scratch: worker w uses
 * scratch + w * stride, stride >= attention_scratch_floats(T, C, NH). */
#ifndef BRIGADE_SPLIT_H
#define BRIGADE_SPLIT_H
#include <stddef.h>
#include "node/engine/team.h"

void split_linear_forward(team_t *team, float *out, const float *inp, const float *weight,
                          const float *bias, int N, int C, int OC);
/* dinp (may be NULL) written (accumulate 0) or added to; dweight, dbias added to
 * (dweight NULL: the input gradient only). */
void split_linear_backward(team_t *team, float *dinp, float *dweight, float *dbias, const float *dout,
                           const float *inp, const float *weight, int N, int C, int OC, int accumulate);
void split_layernorm_forward(team_t *team, float *out, float *mean, float *rstd, const float *inp,
                             const float *weight, const float *bias, int N, int C);
void split_layernorm_apply(team_t *team, float *out, const float *inp, const float *mean, const float *rstd,
                           const float *weight, const float *bias, int N, int C);
void split_layernorm_backward(team_t *team, float *dinp, float *dweight, float *dbias, const float *dout,
                              const float *inp, const float *weight, const float *mean,
                              const float *rstd, int N, int C);
void split_gelu_forward_grad(team_t *team, float *out, float *xg, int N);
void split_gelu_backward_grad(team_t *team, float *d, const float *grad, int N);
void split_residual_forward(team_t *team, float *out, const float *a, const float *b, int N);
void split_bias_gelu_forward_grad(team_t *team, float *out, float *xg, const float *bias, int N, int OC);
void split_bias_residual_forward(team_t *team, float *out, const float *a, const float *bias, const float *b,
                                 int N, int OC);
/* Over all the columns [0, OC), cut by column ranges. */
void split_gelu_backward_grad_bias(team_t *team, float *d, float *dbias, const float *grad, int N, int OC);
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
