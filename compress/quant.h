/* quant.h: pure quantization kernels (no allocation, no I/O).
 *
 * Block formats, ggml style: one fp16 scale per QK values.  The *_ref
 * functions are the plain scalar reference on these structs (QK = 64); the
 * planar functions (scales in one array, codes in another, any block size)
 * are the fast versions used by the frame and are tested to produce the
 * same bits as the reference.
 *
 * Every quantizer works on x * 2^-e ("p2ne" = 2^-e, an exact power of two)
 * so that the fp16 block scales stay in range; the dequantizers multiply by
 * p2e = 2^e.  seed 0 means round to nearest even; any other seed means
 * stochastic rounding with a counter-based hash of (seed, global index).
 */
#ifndef BRIGADE_QUANT_H
#define BRIGADE_QUANT_H
#include <assert.h>
#include <stddef.h>
#include <stdint.h>

#define QK 64

/* Dequantizer results (0 = the input is well formed). */
#define QUANT_E_SCALE (-1)   /* a NaN, Inf or negative scale */
#define QUANT_E_CODE (-2)    /* a code outside [-127,127] (int8) or [-7,7] (int4) */

typedef struct {
    uint16_t d;        /* fp16 scale */
    int8_t q[QK];      /* codes in [-127,127] */
} block_q8_t;
static_assert(sizeof(block_q8_t) == 2 + QK, "block_q8_t must be packed");

typedef struct {
    uint16_t d;        /* fp16 scale */
    uint8_t qs[QK / 2];/* code+8 in nibbles: value 2j low, 2j+1 high */
} block_q4_t;
static_assert(sizeof(block_q4_t) == 2 + QK / 2, "block_q4_t must be packed");

/* IEEE half and bfloat16 conversions, round to nearest even (scalar). */
uint16_t quant_f32_to_f16(float f);
float quant_f16_to_f32(uint16_t h);
uint16_t quant_f32_to_bf16(float f);
float quant_bf16_to_f32(uint16_t h);

/* Largest |x[i]| as float bits (0x7f800000 or above: some x[i] is Inf/NaN). */
uint32_t quant_absmax_bits(const float *x, size_t n);

/* Stochastic rounding offset in [0,1) for value i under seed. */
float quant_sr_uniform(uint64_t seed, uint64_t i);

/* Reference: x is (nb*QK), y is (nb).  i0 is the global index of x[0]
 * (for the stochastic rounding hash).  The dequantizers decode every value
 * and return QUANT_E_CODE if any code is outside the format (int8 -128,
 * int4 nibble 0), else 0; they do not check the scales. */
void quant_q8_ref(block_q8_t *y, const float *x, size_t nb, float p2ne,
                  uint64_t seed, uint64_t i0);
int dequant_q8_ref(float *y, const block_q8_t *x, size_t nb, float p2e);
void quant_q4_ref(block_q4_t *y, const float *x, size_t nb, float p2ne,
                  uint64_t seed, uint64_t i0);
int dequant_q4_ref(float *y, const block_q4_t *x, size_t nb, float p2e);

/* Planar: x is (n), d is (ceil(n/bs)) fp16 scales, q is (n) int8 codes or
 * (ceil(n/2)) int4 bytes; bs a multiple of 8. */
void quant_q8(uint16_t *d, int8_t *q, const float *x, size_t n, int bs,
              float p2ne, uint64_t seed);
void quant_q4(uint16_t *d, uint8_t *q, const float *x, size_t n, int bs,
              float p2ne, uint64_t seed);
/* Dequantizers check the scales and the codes: they return QUANT_E_SCALE if
 * a scale is NaN, Inf or negative (y is then partly written), else
 * QUANT_E_CODE if a code is outside the format: int8 -128, int4 nibble 0
 * (code -8) or, n odd, a nonzero unused high nibble in the last byte (y is
 * then fully written); else 0.  y is (n). */
int dequant_q8(float *y, const uint16_t *d, const int8_t *q, size_t n, int bs,
               float p2e);
int dequant_q4(float *y, const uint16_t *d, const uint8_t *q, size_t n, int bs,
               float p2e);
/* Largest scale as a float (the d array has nb entries), to check that
 * decoded values stay finite; NaN/Inf scales give +Inf. */
float quant_max_scale(const uint16_t *d, size_t nb);

/* Float codecs.  out is (n*2) bytes as two byte planes (low bytes, then high
 * bytes); x is (n).  Decoders return -1 if any value is NaN/Inf. */
void quant_f16_planes(uint8_t *out, const float *x, size_t n, float p2ne);
int dequant_f16_planes(float *y, const uint8_t *in, size_t n, float p2e);
void quant_bf16_planes(uint8_t *out, const float *x, size_t n);
int dequant_bf16_planes(float *y, const uint8_t *in, size_t n);
/* fp32: out is (n*4) bytes as four byte planes. */
void quant_f32_planes(uint8_t *out, const float *x, size_t n);
int dequant_f32_planes(float *y, const uint8_t *in, size_t n);

#endif
