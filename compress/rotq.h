/* rotq.h: rotated quantizers, pure kernels (no allocation, no I/O).
 *
 * The values are cut into tiles of bs (a power of two, 8..4096; the last
 * tile is padded with zeros).  Each tile is multiplied by a fixed pattern
 * of signs (rotq_sign), rotated by the orthonormal Walsh-Hadamard
 * transform (H/sqrt(bs), H[j][k] = (-1)^popcount(j&k)), which spreads an
 * outlier over the whole tile so that the rotated values look like a
 * normal sample, and each rotated value is coded in `bits` bits (1..4) as
 * the nearest of the 2^bits Lloyd-Max levels of a unit normal
 * (rotq_levels) times the tile's scale: its RMS as an fp16 number.  The
 * decoder takes level x scale per code and rotates back (the transform is
 * its own inverse).  Mean squared error per value, for normal data, is the
 * Lloyd-Max distortion: 0.363, 0.118, 0.0345, 0.0095 of the tile's
 * variance for 1..4 bits.
 *
 * Like quant.h, every kernel works on x * 2^-e (p2ne = 2^-e, an exact
 * power of two; the caller picks e so that scaled values stay below 2^15)
 * and the dequantizers multiply by p2e = 2^e.
 *
 * Layout: d is nb = ceil(n/bs) fp16 scales; q is nb*bs codes of `bits`
 * bits packed little-endian (code i is bits i*bits .. i*bits+bits-1 of the
 * stream, bit k of the stream being bit k%8 of byte k/8): nb*bs*bits/8
 * bytes.  Every bit pattern is a code: the format's checks are on the
 * scales and the tile size.
 *
 * The *_ref functions are the plain reference: the rotation as the
 * O(bs^2) matrix product, in double.  The fast functions use the O(bs log
 * bs) butterflies in float and are tested against the reference: the same
 * scales bit for bit, the same codes but where a rotated value lies within
 * float rounding of a threshold, decoded values within float rounding.
 */
#ifndef BRIGADE_ROTQ_H
#define BRIGADE_ROTQ_H
#include <stddef.h>
#include <stdint.h>

#define ROTQ_MIN_BITS 1
#define ROTQ_MAX_BITS 4
#define ROTQ_MIN_TILE 8
#define ROTQ_MAX_TILE 4096

/* The 2^bits levels for bits in 1..4, ascending (NULL for other bits). */
const float *rotq_levels(int bits);

/* +1 or -1: the sign the value at position j of a tile is multiplied by. */
float rotq_sign(int j);

/* 1 if bs is a power of two in ROTQ_MIN_TILE..ROTQ_MAX_TILE, else 0. */
int rotq_tile_ok(int bs);

/* Bytes of codes for n values in tiles of bs at bits each. */
size_t rotq_code_bytes(size_t n, int bs, int bits);

/* The largest |value| rotq_dequant can give per unit of scale: the
 * largest level times sqrt(bs). */
double rotq_gain(int bs, int bits);

/* Reference and fast quantizers: x is (n), d is (nb), q is
 * (rotq_code_bytes(n, bs, bits)).  bs must satisfy rotq_tile_ok, bits
 * 1..4, |x[i]| * p2ne < 2^15. */
void rotq_quant_ref(uint16_t *d, uint8_t *q, const float *x, size_t n, int bs, int bits, float p2ne);
void rotq_quant(uint16_t *d, uint8_t *q, const float *x, size_t n, int bs, int bits, float p2ne);

/* Dequantizers: y is (n).  The reference returns nothing checked; the fast
 * one returns -1 if a scale is NaN, Inf or negative (y then partly
 * written), -2 if a decoded value is not finite (y written), else 0. */
void rotq_dequant_ref(float *y, const uint16_t *d, const uint8_t *q, size_t n, int bs, int bits, float p2e);
int rotq_dequant(float *y, const uint16_t *d, const uint8_t *q, size_t n, int bs, int bits, float p2e);

#endif
