/* attention.h: causal multi-head self-attention, forward and backward (the
 * conventions of layers.h: outputs first, backward accumulates, pure).
 *
 * qkv (B,T,3C) holds q, k, v for each position (C = NH * hs, head h of q at
 * columns [h*hs, (h+1)*hs), of k at C + h*hs, of v at 2C + h*hs).
 * att (B,NH,T,T) receives the attention probabilities (row t attends to
 * positions <= t; entries above the diagonal are 0).
 * out (B,T,C) = concat over heads of att @ v.
 *
 * Heads are independent: the _heads variants do the (b, h) pairs
 * bh = b * NH + h in [bh0, bh1) only, so that callers can share the pairs
 * among threads (each with its own scratch).  When hs is a multiple of 16
 * the products run in this module's own register-blocked kernels (a head's
 * products are too small for a BLAS to run near its peak); otherwise, and in
 * the _ref functions the tests compare against, through cblas_sgemm. */
#ifndef BRIGADE_ATTENTION_H
#define BRIGADE_ATTENTION_H
#include <stddef.h>

/* 1 when the fast kernels run for this shape: head size a multiple of 16 on
 * an x86-64 CPU with AVX-512 (cpu_level(), compress/cpu.h: BRIGADE_CPU can
 * turn them off); 0 when the reference path does. */
int attention_fast(int C, int NH);

/* Floats of scratch one attention_forward or attention_backward call needs
 * (one thread's worth). */
size_t attention_scratch_floats(int T, int C, int NH);

/* out, att = causal attention of qkv. */
void attention_forward(float *out, float *att, float *scratch, const float *qkv,
                       int B, int T, int C, int NH);
/* dqkv (B,T,3C) += gradient given dout (B,T,C), the forward's qkv and att. */
void attention_backward(float *dqkv, float *scratch, const float *dout, const float *qkv,
                        const float *att, int B, int T, int C, int NH);
/* The same on the (b, h) pairs [bh0, bh1) only.  The backward writes those
 * heads' parts of dqkv instead of adding to them when accumulate is 0. */
void attention_forward_heads(float *out, float *att, float *scratch, const float *qkv,
                             int B, int T, int C, int NH, int bh0, int bh1);
void attention_backward_heads(float *dqkv, float *scratch, const float *dout, const float *qkv,
                              const float *att, int B, int T, int C, int NH, int bh0, int bh1,
                              int accumulate);

/* Reference: per head, causal blocks of 64 rows, products through
 * cblas_sgemm.  The backward's scratch holds T*T floats. */
void attention_forward_ref(float *out, float *att, const float *qkv, int B, int T, int C, int NH);
void attention_backward_ref(float *dqkv, float *scratch, const float *dout, const float *qkv,
                            const float *att, int B, int T, int C, int NH);
#endif
