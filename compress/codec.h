/* codec.h: tensor codecs for activations and gradients, and the tensor frame.
 *
 * A codec turns a float32 tensor into a self-describing frame:
 *
 *   fp32  passthrough (exact)
 *   fp16  IEEE half, with a per-tensor power-of-two scale so that tiny and
 *         huge tensors keep their precision (no overflow, no flush)
 *   bf16  bfloat16, round to nearest even
 *   int8  blockwise absmax: per block of B values (default 64) one fp16 scale
 *         d = amax/127 and B int8 codes in [-127,127]
 *   int4  the same with codes in [-7,7], two per byte
 *   hq1..hq4  rotated: per tile of B values (a power of two, default 128)
 *         a fixed sign pattern and the Walsh-Hadamard rotation, then 1..4
 *         bits per value, the Lloyd-Max levels of a unit normal times one
 *         fp16 scale per tile (the tile's RMS); compress/rotq.h
 *
 * and then always through zstd (the raw payload is stored instead when zstd
 * does not save at least FRAME_ZSTD_MIN_SAVING_PCT percent: zstd's z bytes
 * are kept only when z * 100 <= raw * (100 - FRAME_ZSTD_MIN_SAVING_PCT); a
 * header flag says which).  int8/int4 also carry a per-tensor power-of-two
 * exponent applied on top of the fp16 block scales, so any finite float32
 * tensor is representable.
 *
 * Error bounds (per value, x the input, y the decoded value, amax the
 * tensor's largest |x|, plus 2^-133 for values in float's denormal range):
 *   fp32: y == x (bit for bit).   bf16: |y-x| <= 2^-8 |x|.
 *   fp16: |y-x| <= 2^-11 |x| + amax*2^-38.
 *   int8/int4 with round to nearest: |y-x| <= 0.5*d*(1+2^-10) + amax*2^-36,
 *   d = block amax / 127 (int8) or / 7 (int4); with stochastic rounding the
 *   bound is d*(1+2^-10) + amax*2^-36.
 *   hq1..hq4: mean squared error about 0.363, 0.118, 0.0345, 0.0095 (1..4
 *   bits) of the tile's mean square for data that look normal after the
 *   rotation (the rotation makes most data so); no per-value bound.  The
 *   encoder refuses (FRAME_E_RANGE) a tensor whose amax times the largest
 *   level times sqrt(B) reaches FLT_MAX/2, so that what it sends decodes
 *   finite; stochastic rounding (sr_seed) does not apply to them.
 *   Block scales are rounded toward zero, so |y| never exceeds the block amax
 *   (FLT_MAX inputs decode finite).  The stored scale ds is then a little
 *   below d (ds > d*(1-2^-10) for a normal half), and values above qmax*ds
 *   (qmax = 127 or 7) clamp to +-qmax*ds.  So stochastic rounding is
 *   unbiased (E[y] = x, up to float rounding and the 2^-24 grain of its
 *   random offsets) only for |x| <= qmax*ds; a value between qmax*ds and the
 *   block amax decodes to qmax*ds every time, a bias toward zero of at most
 *   2^-10 of the block amax + amax*2^-36.
 *
 * NaN and Inf: the encoder refuses a tensor holding any NaN or Inf (returns
 * -1, "non-finite input at index i"): the caller must not send such a tensor.
 * The decoder refuses NaN/Inf/negative scales and any frame whose decoded
 * values could overflow to Inf, so a successful decode gives finite values.
 *
 * Wire format (little-endian, written field by field; see frame.c):
 *
 *   off size field
 *     0  4   magic "BTF1" (0x31465442)
 *     4  1   version (1)
 *     5  1   codec id (0 fp32, 1 fp16, 2 bf16, 3 int8, 4 int4, 5..8 hq1..hq4)
 *     6  1   dtype of the tensor (0 = float32)
 *     7  1   ndim (1..FRAME_MAX_NDIM)
 *     8  1   flags (bit0 payload is zstd, bit1 byte-plane layout)
 *     9  1   scale exponent e (int8; values are multiplied by 2^e)
 *    10  2   block size (int8/int4: 8..4096, multiple of 8; hq1..hq4: a
 *            power of two in 8..4096; float codecs: 0)
 *    12  8   raw length: payload bytes before zstd
 *    20  8   payload length: bytes that follow the header
 *    28 4*ndim  shape, one uint32 per dimension
 *  28+4*ndim 4  checksum: frame_checksum of all header bytes before it,
 *               continued over the payload
 *  32+4*ndim    payload
 *
 * Raw payload layouts:
 *   fp32/fp16/bf16: n elements split into byte planes (plane k = byte k of
 *                   every element, little-endian), which zstd compresses better.
 *   int8:  nb fp16 scales (2 bytes each), then n int8 codes (-127..127).
 *   int4:  nb fp16 scales, then ceil(n/2) bytes; value i is the nibble
 *          (i&1 ? high : low) of byte i/2, stored as code+8 (1..15); when
 *          n is odd the high nibble of the last byte is 0.
 *   hq1..hq4: nb fp16 scales, then nb*B codes of b = 1..4 bits (the last
 *          tile padded), packed little-endian: code i is bits i*b ..
 *          i*b+b-1 of the stream, stream bit k being bit k%8 of byte k/8.
 *          Every bit pattern is a code; the decoder refuses negative,
 *          NaN and Inf scales and a frame whose values decode to NaN/Inf.
 *   nb = ceil(n / block size).  The decoder refuses any other code.
 *
 * Threads: a codec_ctx_t is used by one thread at a time; make one per thread.
 */
#ifndef BRIGADE_CODEC_H
#define BRIGADE_CODEC_H
#include <stddef.h>
#include <stdint.h>

enum { CODEC_FP32 = 0, CODEC_FP16 = 1, CODEC_BF16 = 2, CODEC_INT8 = 3, CODEC_INT4 = 4,
       CODEC_HQ1 = 5, CODEC_HQ2 = 6, CODEC_HQ3 = 7, CODEC_HQ4 = 8, CODEC_PCA = 9, CODEC_COUNT = 10 };

#define FRAME_MAGIC 0x31465442u            /* "BTF1" little-endian */
#define FRAME_VERSION 1
#define FRAME_MAX_NDIM 8
#define FRAME_MAX_VALUES (1u << 28)       /* 1 GiB of float32 */
#define FRAME_DEFAULT_BLOCK 64
#define FRAME_DEFAULT_TILE 128            /* hq1..hq4 */
#define FRAME_MIN_BLOCK 8
#define FRAME_MAX_BLOCK 4096
#define FRAME_ZSTD_MIN_SAVING_PCT 3
#define FRAME_FLAG_ZSTD 0x01u
#define FRAME_FLAG_PLANES 0x02u
#define FRAME_HEADER_MAX (32 + 4 * FRAME_MAX_NDIM)

/* Why a frame was refused (frame_info_t.error, codec_ctx_error()). */
typedef enum {
    FRAME_OK = 0, FRAME_E_ARG, FRAME_E_SHORT, FRAME_E_MAGIC, FRAME_E_VERSION,
    FRAME_E_CODEC, FRAME_E_DTYPE, FRAME_E_NDIM, FRAME_E_FLAGS, FRAME_E_BLOCK,
    FRAME_E_EXPONENT, FRAME_E_SHAPE, FRAME_E_CAP, FRAME_E_RAWLEN,
    FRAME_E_PAYLOADLEN, FRAME_E_CHECKSUM, FRAME_E_ZSTD, FRAME_E_SCALE,
    FRAME_E_VALUE, FRAME_E_NONFINITE_INPUT, FRAME_E_NOMEM, FRAME_E_RANGE
} frame_error_t;

typedef struct {
    int block_size;     /* int8/int4 values per scale (0 = FRAME_DEFAULT_BLOCK);
                           hq1..hq4 tile (0 = FRAME_DEFAULT_TILE) */
    uint64_t sr_seed;   /* int8/int4 stochastic rounding seed; 0 = round to nearest.
                           Vary it per tensor (e.g. mix in step and stream). */
    float *residual;    /* error feedback: n floats, or NULL.  x + residual is
                           encoded and residual becomes (x + residual) - decoded.
                           Start it at zeros; one buffer per stream. */
    int zstd;           /* 0 auto (skip when it saves < FRAME_ZSTD_MIN_SAVING_PCT
                           percent), 1 never, 2 always */
} encode_opts_t;

/* What frame_peek() reads from a header. */
typedef struct {
    int codec;                        /* codec id */
    int dtype;                        /* 0 = float32 */
    int ndim;                         /* dimensions */
    uint32_t shape[FRAME_MAX_NDIM];   /* dimensions */
    uint64_t n_values;                /* product of shape */
    int block_size;                   /* int codecs; 0 otherwise */
    int scale_exp;                    /* per-tensor power of two */
    unsigned flags;                   /* FRAME_FLAG_* */
    uint64_t raw_len;                 /* payload bytes before zstd */
    uint64_t payload_len;             /* payload bytes in the frame */
    size_t header_len;                /* bytes before the payload */
    size_t frame_len;                 /* header_len + payload_len */
    frame_error_t error;              /* why the header was refused */
} frame_info_t;

typedef struct codec_ctx_t codec_ctx_t;

/* "fp32","fp16","bf16","int8","int4","hq1".."hq4" -> codec id >= 0;
 * anything else -> -1. */
int codec_from_name(const char *name);

/* The block size (encode_opts_t.block_size) for a tensor made of rows of
 * `row` values (one position's or one sample's vector) so that no block
 * spans two rows: pca takes the row itself, hq1..hq4 the largest power of
 * two up to FRAME_DEFAULT_TILE dividing it, int8 and int4 the largest power
 * of two from FRAME_MIN_BLOCK up to FRAME_DEFAULT_BLOCK dividing it (0, the
 * default, where FRAME_DEFAULT_BLOCK does: a block's scale would otherwise
 * tell one position of the next, as a narrow bottleneck's rows of 32 did);
 * 0 for the other codecs and for rows no block fits (pca: outside 8..4096;
 * hq: odd rows). */
int codec_block_for_rows(int codec, size_t row);

/* Codec id -> its name; "?" for an unknown id. */
const char *codec_name(int id);

/* Per-thread codec context: zstd compression/decompression contexts and
 * scratch buffers, reused across calls; scratch only grows when a larger
 * tensor comes.  zstd_level 0 means the default (1); valid levels are
 * ZSTD_minCLevel()..19 (negative levels are faster).  NULL on bad level or
 * out of memory. */
codec_ctx_t *codec_ctx_new(int zstd_level);

/* Frees the context and sets *self_p to NULL; NULL-safe. */
void codec_ctx_destroy(codec_ctx_t **self_p);

/* Error code of the last failed frame_encode/frame_decode on this context. */
frame_error_t codec_ctx_error(const codec_ctx_t *self);

/* Largest frame, in bytes, that frame_encode can produce for n_values values
 * of the codec with any block size; 0 for an unknown codec. */
size_t frame_bound(size_t n_values, int codec);

/* The bytes a frame of n values of the codec takes in a typical tensor, for
 * a simulator that models tensors by their size: frame_bound, but pca,
 * whose size depends on the values: a sixteenth of fp32's (what it gives
 * on gpt activations and gradients; tests/bench/RESULTS.md). */
size_t frame_typical_len(size_t n_values, int codec);

/* Encodes x (ndim dimensions given by shape, n = product of shape values)
 * into out (cap bytes, at least frame_bound(n, codec) is always enough).
 * opts may be NULL (defaults).  Returns the frame length, or -1 with the
 * reason in err (bad argument, non-finite input, cap too small).  On error
 * the residual, if any, is left unchanged. */
long frame_encode(codec_ctx_t *ctx, uint8_t *out, size_t cap, const float *x,
                  const uint32_t *shape, int ndim, int codec,
                  const encode_opts_t *opts, char *err, size_t errlen);

/* Parses and checks the header of the frame in[0..len): magic, version, ids,
 * block size, exponent, shape (product <= FRAME_MAX_VALUES), raw length
 * against the codec and shape, payload length against len.  Does not verify
 * the checksum nor touch the payload.  Returns 0 and fills info, or -1 with
 * info->error and err set.  in[0..len) must hold exactly one frame: its
 * payload_len must equal len - header_len (a frame followed by any other
 * byte is refused, FRAME_E_PAYLOADLEN). */
int frame_peek(frame_info_t *info, const uint8_t *in, size_t len,
               char *err, size_t errlen);

/* Decodes the frame in[0..len) into out (cap_values floats), writing its
 * shape (FRAME_MAX_NDIM entries are enough) and ndim when those are not
 * NULL.  Every length and id is checked before anything is allocated, the
 * checksum is verified, a zstd payload must be exactly one zstd frame
 * (nothing after it, FRAME_E_ZSTD), NaN/Inf scales and int codes outside
 * the format (FRAME_E_VALUE) are refused.  Returns the number of
 * values, or -1 with the reason in err and codec_ctx_error(ctx); out may be
 * partly written on error. */
long frame_decode(codec_ctx_t *ctx, float *out, size_t cap_values,
                  uint32_t *shape, int *ndim, const uint8_t *in, size_t len,
                  char *err, size_t errlen);

/* Encodes x[0..n) as a 1-d tensor through the real frame path and decodes it
 * back in place (what a receiver would see).  Returns 0, or -1 (e.g. NaN/Inf
 * in x, in which case x is unchanged). */
int codec_roundtrip(codec_ctx_t *ctx, float *x, size_t n, int codec,
                    const encode_opts_t *opts);
/* codec_roundtrip that returns the frame's length in bytes (what the wire
 * would carry of the tensor), or -1. */
long codec_roundtrip_len(codec_ctx_t *ctx, float *x, size_t n, int codec,
                         const encode_opts_t *opts);

/* The frame checksum: a 32-bit hash of p[0..n), continuing from seed
 * (0 to start). */
uint32_t frame_checksum(const void *p, size_t n, uint32_t seed);

#endif
