/* layers.h: the math kernels of brigade's models, one forward/backward pair per
 * layer.  Conventions (as in every kernel here):
 *   - outputs first, then inputs, then sizes;
 *   - size letters: B batch, T time (positions), C channels, OC output channels,
 *     V vocabulary, NH heads, N rows (usually B*T);
 *   - all tensors are row-major float arrays;
 *   - backward functions ACCUMULATE into their gradient outputs (+=); the
 *     caller zeroes gradient buffers once per update;
 *   - kernels are pure: no allocation, no I/O; scratch is passed in (the
 *     matrix products' packing space excepted, as in any BLAS: gemm.h);
 *   - every matrix product goes through gemm() (gemm.h: OpenBLAS, or the
 *     engine's own AVX-512 kernel where the CPU has AVX-512; attention,
 *     in attention.h, has its own small-product kernels).
 */
#ifndef BRIGADE_LAYERS_H
#define BRIGADE_LAYERS_H
#include <stddef.h>

/* out (N,OC) = inp (N,C) @ weight^T + bias.  weight is (OC,C), bias (OC) or NULL. */
void linear_forward(float *out, const float *inp, const float *weight, const float *bias,
                    int N, int C, int OC);
/* dinp (N,C) += dout @ weight; dweight (OC,C) += dout^T @ inp; dbias (OC) += sum_rows dout.
 * dinp may be NULL (first layer: no input gradient needed); bias/dbias may be NULL. */
void linear_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                     const float *inp, const float *weight, int N, int C, int OC);

/* The two halves of linear_backward, for callers that split the work:
 * dinp (N,C) = dout @ weight, or += when accumulate; and dweight rows
 * [oc0, oc1) += dout[:, oc0:oc1]^T @ inp, dbias [oc0, oc1) += column sums
 * (dbias may be NULL). */
void linear_backward_input(float *dinp, const float *dout, const float *weight, int N, int C, int OC,
                           int accumulate);
/* dinp (N,C) = (dout @ weight) * grad (N,C) element by element, the bits of
 * linear_backward_input (accumulate 0) then gelu_backward_grad(dinp, grad):
 * the product runs on each block of the product while it is in cache. */
void linear_backward_input_times(float *dinp, const float *dout, const float *weight, const float *grad,
                                 int N, int C, int OC);
void linear_backward_params(float *dweight, float *dbias, const float *dout, const float *inp,
                            int N, int C, int OC, int oc0, int oc1);

/* out (B,T,C) = wte[tokens[b,t]] + wpe[t].  wte (V,C), wpe (maxT,C); tokens in [0,V). */
void embedding_forward(float *out, const int *tokens, const float *wte, const float *wpe,
                       int B, int T, int C);
/* dwte += scatter of dout by token; dwpe[t] += sum_b dout[b,t]. */
void embedding_backward(float *dwte, float *dwpe, const float *dout, const int *tokens,
                        int B, int T, int C);

/* out (N,C) = (inp - mean) * rstd * weight + bias per row; saves mean (N), rstd (N). eps 1e-5. */
void layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                       const float *weight, const float *bias, int N, int C);
/* out (N,C) = layernorm_forward's output again, bit for bit, from its input
 * and the mean and rstd it saved (a backward recomputes it instead of
 * keeping it). */
void layernorm_apply(float *out, const float *inp, const float *mean, const float *rstd,
                     const float *weight, const float *bias, int N, int C);
/* dinp, dweight, dbias += the layernorm gradients given dout and the saved
 * mean/rstd; dweight and dbias add the rows' terms in row order. */
void layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                        const float *inp, const float *weight, const float *mean,
                        const float *rstd, int N, int C);

/* out (N) = gelu(inp), the tanh approximation. */
void gelu_forward(float *out, const float *inp, int N);
/* dinp += gelu'(inp) * dout. */
void gelu_backward(float *dinp, const float *inp, const float *dout, int N);
/* The pair a trainer uses, one exp per element for both passes: forward
 * out (N) = gelu(xg) and xg = gelu'(xg) (the input is replaced by the
 * derivative); backward d (N) *= that derivative, in place.  Same values
 * as gelu_forward and gelu_backward into zeros. */
void gelu_forward_grad(float *out, float *xg, int N);
void gelu_backward_grad(float *d, const float *grad, int N);

/* A linear layer's bias folded into the element-wise pass after it (the
 * product then runs without one): the same bits as adding the bias first
 * (linear_forward with the bias).
 *   bias_gelu_forward_grad: x = xg (N,OC) + bias (OC) per row, then as
 *     gelu_forward_grad: out = gelu(x), xg = gelu'(x).
 *   bias_residual_forward: out (N,OC) = (a + bias per row) + b; out may be
 *     a or b. */
void bias_gelu_forward_grad(float *out, float *xg, const float *bias, int N, int OC);
void bias_residual_forward(float *out, const float *a, const float *bias, const float *b, int N, int OC);
/* dbias (OC) += the column sums of d (N,OC), row by row in order. */
void bias_backward(float *dbias, const float *d, int N, int OC);
/* linear_forward without a bias, then bias_residual_forward(out, out, bias,
 * res) / bias_gelu_forward_grad(out, xg, bias) on the product (written to
 * xg), with the same bits: the element-wise pass runs on each block of the
 * product as soon as its sums are done, while it is in cache (gemm_epi). */
void linear_bias_residual_forward(float *out, const float *inp, const float *weight, const float *bias,
                                  const float *res, int N, int C, int OC);
void linear_bias_gelu_forward_grad(float *out, float *xg, const float *inp, const float *weight,
                                   const float *bias, int N, int C, int OC);

/* out (N) = max(inp, 0). */
void relu_forward(float *out, const float *inp, int N);
/* dinp += (out > 0) * dout; out is relu_forward's output. */
void relu_backward(float *dinp, const float *out, const float *dout, int N);

/* out (N) = a + b. */
void residual_forward(float *out, const float *a, const float *b, int N);
/* da += dout; db += dout. */
void residual_backward(float *da, float *db, const float *dout, int N);

/* Softmax cross-entropy over rows of logits (N,V) with integer targets (N) in [0,V).
 * probs (N,V) receives the softmax; losses (N) receives -log p[target],
 * computed in log space (max + log-sum-exp - logit[target]): exact for any
 * p[target], +inf only past the float range, NaN for NaN logits.
 * Returns the mean loss over the N rows. */
float crossentropy_forward(float *losses, float *probs, const float *logits,
                           const int *targets, int N, int V);
/* dlogits (N,V) += (probs - onehot(target)) * scale; scale is usually 1/N
 * for the mean loss. */
void crossentropy_backward(float *dlogits, const float *probs, const int *targets,
                           float scale, int N, int V);
#endif
