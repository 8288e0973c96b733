/* frame.c: the tensor frame: quantize, zstd, checksum, and the checked
 * decoder.  Wire format and error bounds: compress/codec.h. */
#include "compress/codec.h"
#include "compress/quant.h"
#include "compress/pca.h"
#include "compress/rotq.h"

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "compress/: payload scales are read as native uint16; port for big-endian"
#endif

#define S_MAX_LEVEL 19
#define S_MIN_EXP (-126)
#define S_MAX_EXP 126
#define S_PCA_EPS 0.02f   /* pca: the coefficients' coding error about 1/50 of the mean square (pca.h) */

struct codec_ctx_t {
    ZSTD_CCtx *cctx;        /* reused compression context */
    ZSTD_DCtx *dctx;        /* reused decompression context */
    int level;              /* zstd level */
    uint8_t *raw;           /* payload before zstd */
    size_t raw_cap;         /* bytes allocated in raw */
    float *tmp;             /* x + residual for error feedback */
    size_t tmp_cap;         /* floats allocated in tmp */
    float *work;            /* pca's scratch */
    size_t work_cap;        /* bytes allocated in work */
    uint8_t *frame;         /* frame buffer for codec_roundtrip */
    size_t frame_cap;       /* bytes allocated in frame */
    frame_error_t error;    /* last error */
};

static const char *s_names[CODEC_COUNT] = {"fp32", "fp16", "bf16", "int8", "int4", "hq1", "hq2", "hq3", "hq4", "pca"};

int codec_from_name(const char *name)
{
    if (!name)
        return -1;
    for (int i = 0; i < CODEC_COUNT; i++)
        if (strcmp(name, s_names[i]) == 0)
            return i;
    return -1;
}

const char *codec_name(int id)
{
    return id >= 0 && id < CODEC_COUNT ? s_names[id] : "?";
}

/* The largest power of two from hi down to lo that divides row; 0 when none does. */
static int s_pow2_dividing(size_t row, int hi, int lo)
{
    for (int bs = hi; bs >= lo; bs /= 2)
        if (row % (size_t)bs == 0)
            return bs;
    return 0;
}

int codec_block_for_rows(int codec, size_t row)
{
    if (codec == CODEC_PCA)
        return row >= FRAME_MIN_BLOCK && row <= FRAME_MAX_BLOCK ? (int)row : 0;
    if (codec == CODEC_INT8 || codec == CODEC_INT4)   /* 0 (the default block) where that divides the row */
        return row % FRAME_DEFAULT_BLOCK == 0 ? 0 : s_pow2_dividing(row, FRAME_DEFAULT_BLOCK / 2, FRAME_MIN_BLOCK);
    if (codec < CODEC_HQ1 || codec > CODEC_HQ4)
        return 0;
    return s_pow2_dividing(row, FRAME_DEFAULT_TILE, ROTQ_MIN_TILE);
}

/* ------------------------------------------------------------ helpers */

static int s_fail(frame_error_t *slot, frame_error_t code, char *err, size_t errlen,
                  const char *fmt, ...)
{
    if (slot)
        *slot = code;
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static void s_put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static void s_put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static void s_put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static uint16_t s_get16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static uint32_t s_get32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static uint64_t s_get64(const uint8_t *p)
{
    return (uint64_t)s_get32(p) | ((uint64_t)s_get32(p + 4) << 32);
}

static int s_is_int(int codec) { return codec == CODEC_INT8 || codec == CODEC_INT4; }

/* Bits per code of a rotated codec (hq1..hq4), 0 for the others. */
static int s_hq_bits(int codec) { return codec >= CODEC_HQ1 && codec <= CODEC_HQ4 ? codec - CODEC_HQ1 + 1 : 0; }

/* Codecs with a block (tile) size and per-block scales. */
static int s_is_blocked(int codec) { return s_is_int(codec) || s_hq_bits(codec) || codec == CODEC_PCA; }

/* Whether bs is a block size the codec takes. */
static int s_block_ok(int codec, int bs)
{
    if (s_hq_bits(codec))
        return rotq_tile_ok(bs);
    if (codec == CODEC_PCA)
        return bs >= FRAME_MIN_BLOCK && bs <= FRAME_MAX_BLOCK;
    return bs >= FRAME_MIN_BLOCK && bs <= FRAME_MAX_BLOCK && bs % 8 == 0;
}

/* Raw payload bytes for n values (n <= FRAME_MAX_VALUES, so no overflow);
 * for pca the most it can be (its length says its rank), 0 when bs does not
 * divide n. */
static uint64_t s_raw_len(int codec, uint64_t n, int bs)
{
    uint64_t nb = bs > 0 ? (n + (uint64_t)bs - 1) / (uint64_t)bs : 0;
    switch (codec) {
    case CODEC_FP32: return 4 * n;
    case CODEC_FP16:
    case CODEC_BF16: return 2 * n;
    case CODEC_INT8: return 2 * nb + n;
    case CODEC_INT4: return 2 * nb + (n + 1) / 2;
    case CODEC_HQ1: case CODEC_HQ2: case CODEC_HQ3: case CODEC_HQ4:
        return 2 * nb + nb * (uint64_t)bs * (uint64_t)s_hq_bits(codec) / 8;
    case CODEC_PCA: {
        if (bs <= 0 || n % (uint64_t)bs)
            return 0;
        uint64_t m = n / (uint64_t)bs, r = (uint64_t)pca_width_rank(bs);
        return pca_raw_len((size_t)m, bs, (int)(r < m ? r : m));
    }
    default: return 0;
    }
}

static int s_grow(void **buf, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    size_t want = need + need / 4 + 64;
    void *p = realloc(*buf, want);
    if (!p)
        return -1;
    *buf = p;
    *cap = want;
    return 0;
}

/* ------------------------------------------------------------ checksum */

#define S_P1 0x9e3779b185ebca87ull
#define S_P2 0xc2b2ae3d27d4eb4full
#define S_P3 0x165667b19e3779f9ull

static inline uint64_t s_rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

uint32_t frame_checksum(const void *p, size_t n, uint32_t seed)
{
    const uint8_t *b = p;
    size_t i = 0;
    uint64_t h = seed + S_P3 + (uint64_t)n;
    if (n >= 32) {
        uint64_t a0 = seed + S_P1, a1 = seed ^ S_P2, a2 = seed + 1, a3 = seed - S_P1;
        for (; i + 32 <= n; i += 32) {
            a0 = s_rotl(a0 + s_get64(b + i) * S_P2, 31) * S_P1;
            a1 = s_rotl(a1 + s_get64(b + i + 8) * S_P2, 31) * S_P1;
            a2 = s_rotl(a2 + s_get64(b + i + 16) * S_P2, 31) * S_P1;
            a3 = s_rotl(a3 + s_get64(b + i + 24) * S_P2, 31) * S_P1;
        }
        h += s_rotl(a0, 1) + s_rotl(a1, 7) + s_rotl(a2, 12) + s_rotl(a3, 18);
        h = h * S_P1 + S_P3;
    }
    for (; i + 8 <= n; i += 8) {
        h ^= s_rotl(s_get64(b + i) * S_P2, 31) * S_P1;
        h = s_rotl(h, 27) * S_P1 + S_P3;
    }
    for (; i < n; i++) {
        h ^= b[i] * S_P3;
        h = s_rotl(h, 11) * S_P1;
    }
    h ^= h >> 33;
    h *= S_P2;
    h ^= h >> 29;
    h *= S_P3;
    h ^= h >> 32;
    return (uint32_t)h;
}

/* ------------------------------------------------------------ context */

codec_ctx_t *codec_ctx_new(int zstd_level)
{
    if (zstd_level == 0)
        zstd_level = 1;
    if (zstd_level < ZSTD_minCLevel() || zstd_level > S_MAX_LEVEL)
        return NULL;
    codec_ctx_t *self = calloc(1, sizeof *self);
    if (!self)
        return NULL;
    self->level = zstd_level;
    self->cctx = ZSTD_createCCtx();
    self->dctx = ZSTD_createDCtx();
    if (!self->cctx || !self->dctx ||
        ZSTD_isError(ZSTD_CCtx_setParameter(self->cctx, ZSTD_c_compressionLevel, zstd_level)) ||
        ZSTD_isError(ZSTD_CCtx_setParameter(self->cctx, ZSTD_c_checksumFlag, 0)) ||
        ZSTD_isError(ZSTD_CCtx_setParameter(self->cctx, ZSTD_c_contentSizeFlag, 1))) {
        codec_ctx_destroy(&self);
        return NULL;
    }
    return self;
}

void codec_ctx_destroy(codec_ctx_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    codec_ctx_t *self = *self_p;
    ZSTD_freeCCtx(self->cctx);
    ZSTD_freeDCtx(self->dctx);
    free(self->raw);
    free(self->tmp);
    free(self->work);
    free(self->frame);
    free(self);
    *self_p = NULL;
}

frame_error_t codec_ctx_error(const codec_ctx_t *self)
{
    return self ? self->error : FRAME_E_ARG;
}

size_t frame_bound(size_t n_values, int codec)
{
    if (codec < 0 || codec >= CODEC_COUNT || n_values > FRAME_MAX_VALUES)
        return 0;
    uint64_t raw = s_raw_len(codec, n_values, FRAME_MIN_BLOCK);
    if (s_hq_bits(codec))   /* the last tile's padding: at most a tile of codes */
        raw += (uint64_t)ROTQ_MAX_TILE * (uint64_t)s_hq_bits(codec) / 8;
    if (codec == CODEC_PCA)  /* r <= min(w, 64): r*m <= n, r*w <= 64*4096, so 2 + r*(2 + w + m) is below */
        raw = (uint64_t)n_values + (uint64_t)PCA_MAX_RANK * FRAME_MAX_BLOCK + 2 + 2 * PCA_MAX_RANK;
    return FRAME_HEADER_MAX + ZSTD_compressBound((size_t)raw);
}

size_t frame_typical_len(size_t n_values, int codec)
{
    if (codec == CODEC_PCA && n_values <= FRAME_MAX_VALUES)
        return FRAME_HEADER_MAX + n_values / 4;
    return frame_bound(n_values, codec);
}

/* ------------------------------------------------------------ encode */

/* Per-tensor exponent e: the largest fp16 number the codec stores (the
 * block scale, or the value for fp16) becomes amax*2^-e in [2^14, 2^15). */
static int s_choose_exp(int codec, float amax)
{
    if (amax == 0.0f || codec == CODEC_FP32 || codec == CODEC_BF16)
        return 0;
    double t = codec == CODEC_INT8 ? amax / 127.0 : codec == CODEC_INT4 ? amax / 7.0 : amax;   /* hq: amax */
    int e = ilogb(t) - 14;                        /* double: no underflow for denormals */
    return e < S_MIN_EXP ? S_MIN_EXP : e > S_MAX_EXP ? S_MAX_EXP : e;
}

/* The codec's raw payload of x into raw (raw_len bytes at most); work is
 * pca's scratch.  Returns the raw length (less than raw_len for pca at a
 * lower rank). */
static size_t s_quantize(uint8_t *raw, float *work, const float *x, size_t n, int codec, int bs,
                         float p2ne, uint64_t seed, size_t raw_len)
{
    size_t nb = bs > 0 ? (n + (size_t)bs - 1) / (size_t)bs : 0;
    switch (codec) {
    case CODEC_FP32: quant_f32_planes(raw, x, n); break;
    case CODEC_FP16: quant_f16_planes(raw, x, n, p2ne); break;
    case CODEC_BF16: quant_bf16_planes(raw, x, n); break;
    case CODEC_INT8: quant_q8((uint16_t *)raw, (int8_t *)(raw + 2 * nb), x, n, bs, p2ne, seed); break;
    case CODEC_INT4: quant_q4((uint16_t *)raw, raw + 2 * nb, x, n, bs, p2ne, seed); break;
    case CODEC_HQ1: case CODEC_HQ2: case CODEC_HQ3: case CODEC_HQ4:
        rotq_quant((uint16_t *)raw, raw + 2 * nb, x, n, bs, s_hq_bits(codec), p2ne);
        break;
    case CODEC_PCA: return pca_encode(raw, x, n / (size_t)bs, bs, p2ne, S_PCA_EPS, work);
    default: assert(0);
    }
    return raw_len;
}

/* fp16 planes whose value x 2^e rounded past FLT_MAX: one step toward zero. */
static void s_f16_clip_top(uint8_t *raw, size_t n, float p2e)
{
    for (size_t i = 0; i < n; i++) {
        uint16_t h = (uint16_t)(raw[i] | (raw[n + i] << 8));
        if (isinf(quant_f16_to_f32(h) * p2e)) {
            h = (uint16_t)(h - 1);
            raw[i] = (uint8_t)h;
            raw[n + i] = (uint8_t)(h >> 8);
        }
    }
}

/* A rotated codec's frame whose values decode to NaN or Inf. */
#define S_E_NONFINITE (-3)

/* raw must be 2-byte aligned.  Returns 0; for int8/int4 QUANT_E_SCALE or
 * QUANT_E_CODE (quant.h); for hq1..hq4 QUANT_E_SCALE or S_E_NONFINITE; for
 * pca any of the three; for
 * the float codecs -1 for a NaN/Inf value. */
static int s_dequantize(float *y, const uint8_t *raw, size_t raw_len, size_t n, int codec, int bs, float p2e)
{
    size_t nb = bs > 0 ? (n + (size_t)bs - 1) / (size_t)bs : 0;
    switch (codec) {
    case CODEC_FP32: return dequant_f32_planes(y, raw, n);
    case CODEC_FP16: return dequant_f16_planes(y, raw, n, p2e);
    case CODEC_BF16: return dequant_bf16_planes(y, raw, n);
    case CODEC_INT8: return dequant_q8(y, (const uint16_t *)raw, (const int8_t *)(raw + 2 * nb), n, bs, p2e);
    case CODEC_INT4: return dequant_q4(y, (const uint16_t *)raw, raw + 2 * nb, n, bs, p2e);
    case CODEC_HQ1: case CODEC_HQ2: case CODEC_HQ3: case CODEC_HQ4: {
        int rc = rotq_dequant(y, (const uint16_t *)raw, raw + 2 * nb, n, bs, s_hq_bits(codec), p2e);
        return rc == -1 ? QUANT_E_SCALE : rc == -2 ? S_E_NONFINITE : 0;
    }
    case CODEC_PCA: {
        int rc = pca_decode(y, raw, raw_len, n / (size_t)bs, bs, p2e);
        return rc == PCA_E_SCALE ? QUANT_E_SCALE : rc == PCA_E_CODE ? QUANT_E_CODE : rc == PCA_E_NONFINITE ? S_E_NONFINITE : 0;
    }
    default: return -1;
    }
}

/* Checks encode's arguments; *n gets the values and *bs the block size (0
 * for float codecs).  0, or the s_fail code. */
static int s_encode_check(codec_ctx_t *ctx, const uint8_t *out, const float *x, const uint32_t *shape, int ndim,
                          int codec, const encode_opts_t *opts, uint64_t *n, int *bs, char *err, size_t errlen)
{
    frame_error_t *slot = ctx ? &ctx->error : NULL;
    if (!ctx || !out || !shape)
        return s_fail(slot, FRAME_E_ARG, err, errlen, "encode: NULL argument");
    if (codec < 0 || codec >= CODEC_COUNT)
        return s_fail(slot, FRAME_E_CODEC, err, errlen, "encode: unknown codec %d", codec);
    if (ndim < 1 || ndim > FRAME_MAX_NDIM)
        return s_fail(slot, FRAME_E_NDIM, err, errlen, "encode: ndim %d not in 1..%d", ndim, FRAME_MAX_NDIM);
    *n = 1;
    for (int i = 0; i < ndim; i++) {
        *n *= shape[i];
        if (*n > FRAME_MAX_VALUES)
            return s_fail(slot, FRAME_E_SHAPE, err, errlen, "encode: more than %u values", FRAME_MAX_VALUES);
    }
    if (*n > 0 && !x)
        return s_fail(slot, FRAME_E_ARG, err, errlen, "encode: NULL input");
    *bs = 0;
    if (s_is_blocked(codec)) {
        *bs = opts->block_size ? opts->block_size : s_hq_bits(codec) ? FRAME_DEFAULT_TILE : FRAME_DEFAULT_BLOCK;
        if (!s_block_ok(codec, *bs))
            return s_fail(slot, FRAME_E_BLOCK, err, errlen, "encode: block size %d not %s in %d..%d", *bs,
                          s_hq_bits(codec) ? "a power of two" : "a multiple of 8", FRAME_MIN_BLOCK, FRAME_MAX_BLOCK);
    }
    if (codec == CODEC_PCA && *n % (uint64_t)*bs)
        return s_fail(slot, FRAME_E_BLOCK, err, errlen, "encode: pca rows of %d do not divide %llu values", *bs,
                      (unsigned long long)*n);
    if (opts->zstd < 0 || opts->zstd > 2)
        return s_fail(slot, FRAME_E_ARG, err, errlen, "encode: zstd mode %d not in 0..2", opts->zstd);
    return 0;
}

/* The payload after hdr bytes of out: ctx->raw (raw_len bytes) through zstd
 * when opts->zstd asks for it and, in auto mode, the z bytes it gives save at
 * least FRAME_ZSTD_MIN_SAVING_PCT percent (z * 100 <= raw_len * (100 - pct),
 * exactly), else as it is.  zstd gets all of cap - hdr: with less room it
 * can fail on output that would fit.  Returns the payload length; *flags
 * gains FRAME_FLAG_ZSTD when compressed. */
static size_t s_encode_payload(codec_ctx_t *ctx, uint8_t *out, size_t cap, size_t hdr, size_t raw_len, int zstd,
                               unsigned *flags)
{
    if (zstd != 1 && raw_len > 0) {
        size_t z = ZSTD_compress2(ctx->cctx, out + hdr, cap - hdr, ctx->raw, raw_len);
        if (!ZSTD_isError(z) && (zstd == 2 || z * 100 <= raw_len * (100 - FRAME_ZSTD_MIN_SAVING_PCT))) {
            *flags |= FRAME_FLAG_ZSTD;
            return z;
        }
    }
    if (raw_len > 0)
        memcpy(out + hdr, ctx->raw, raw_len);
    return raw_len;
}

/* The header (hdr bytes, its checksum over header and payload last). */
static void s_encode_header(uint8_t *out, size_t hdr, int codec, int ndim, const uint32_t *shape, unsigned flags,
                            int e, int bs, size_t raw_len, size_t payload_len)
{
    s_put32(out, FRAME_MAGIC);
    out[4] = FRAME_VERSION;
    out[5] = (uint8_t)codec;
    out[6] = 0;
    out[7] = (uint8_t)ndim;
    out[8] = (uint8_t)flags;
    out[9] = (uint8_t)(int8_t)e;
    s_put16(out + 10, (uint16_t)bs);
    s_put64(out + 12, raw_len);
    s_put64(out + 20, payload_len);
    for (int i = 0; i < ndim; i++)
        s_put32(out + 28 + 4 * i, shape[i]);
    uint32_t ck = frame_checksum(out, hdr - 4, 0);
    ck = frame_checksum(out + hdr, payload_len, ck);
    s_put32(out + hdr - 4, ck);
}

long frame_encode(codec_ctx_t *ctx, uint8_t *out, size_t cap, const float *x,
                  const uint32_t *shape, int ndim, int codec,
                  const encode_opts_t *opts, char *err, size_t errlen)
{
    encode_opts_t def = {0};
    if (!opts)
        opts = &def;
    uint64_t n = 0;
    int bs = 0;
    int bad = s_encode_check(ctx, out, x, shape, ndim, codec, opts, &n, &bs, err, errlen);
    if (bad < 0)
        return bad;
    frame_error_t *slot = &ctx->error;
    size_t hdr = 32 + 4 * (size_t)ndim;
    size_t raw_len = (size_t)s_raw_len(codec, n, bs);
    if (cap < hdr + raw_len)
        return s_fail(slot, FRAME_E_CAP, err, errlen, "encode: output capacity %zu < %zu", cap, hdr + raw_len);

    const float *src = x;
    if (opts->residual && n > 0) {
        if (s_grow((void **)&ctx->tmp, &ctx->tmp_cap, n * sizeof(float)) < 0)
            return s_fail(slot, FRAME_E_NOMEM, err, errlen, "encode: out of memory");
        for (size_t i = 0; i < n; i++)
            ctx->tmp[i] = x[i] + opts->residual[i];
        src = ctx->tmp;
    }
    uint32_t amax_bits = quant_absmax_bits(src, n);
    if (amax_bits >= 0x7f800000u) {
        size_t i = 0;
        while (i < n && isfinite(src[i]))
            i++;
        return s_fail(slot, FRAME_E_NONFINITE_INPUT, err, errlen, "encode: non-finite input at index %zu%s",
                      i, src == x ? "" : " (input + residual)");
    }
    float amax;
    memcpy(&amax, &amax_bits, 4);
    if (s_hq_bits(codec) && (double)amax * rotq_gain(bs, s_hq_bits(codec)) >= 0.5 * FLT_MAX)
        return s_fail(slot, FRAME_E_RANGE, err, errlen, "encode: %s: largest |value| %g out of its range", codec_name(codec),
                      (double)amax);
    if (codec == CODEC_PCA && (double)amax * 4.0 * sqrt((double)bs) >= 0.5 * FLT_MAX)
        return s_fail(slot, FRAME_E_RANGE, err, errlen, "encode: pca: largest |value| %g out of its range", (double)amax);
    if (s_grow((void **)&ctx->raw, &ctx->raw_cap, raw_len + 1) < 0)
        return s_fail(slot, FRAME_E_NOMEM, err, errlen, "encode: out of memory");
    if (codec == CODEC_PCA && s_grow((void **)&ctx->work, &ctx->work_cap,
                                     sizeof(float) * pca_scratch_floats((size_t)n / (size_t)bs, bs)) < 0)
        return s_fail(slot, FRAME_E_NOMEM, err, errlen, "encode: out of memory");

    int e = s_choose_exp(codec, amax);
    float p2ne = ldexpf(1.0f, -e), p2e = ldexpf(1.0f, e);
    if (n > 0)
        raw_len = s_quantize(ctx->raw, ctx->work, src, n, codec, bs, p2ne, opts->sr_seed, raw_len);
    if (codec == CODEC_FP16 && e > 127 - 16)
        s_f16_clip_top(ctx->raw, n, p2e);
    if (opts->residual && n > 0) {
        float *r = opts->residual;
        int rc = s_dequantize(r, ctx->raw, raw_len, n, codec, bs, p2e);
        assert(rc == 0);
        (void)rc;
        for (size_t i = 0; i < n; i++)
            r[i] = src[i] - r[i];
    }

    unsigned flags = s_is_blocked(codec) ? 0 : FRAME_FLAG_PLANES;
    size_t payload_len = s_encode_payload(ctx, out, cap, hdr, raw_len, opts->zstd, &flags);
    s_encode_header(out, hdr, codec, ndim, shape, flags, e, bs, raw_len, payload_len);
    ctx->error = FRAME_OK;
    return (long)(hdr + payload_len);
}

/* ------------------------------------------------------------ decode */

/* The length fields of a frame against what its shape and codec say
 * (want_raw), the bytes after its header (have) and its flags.  0, or -1
 * with the error in slot and err. */
static int s_check_lengths(frame_error_t *slot, char *err, size_t errlen, uint64_t raw_len, uint64_t want_raw,
                           uint64_t payload_len, size_t have, unsigned flags)
{
    if (raw_len != want_raw)
        return s_fail(slot, FRAME_E_RAWLEN, err, errlen, "frame: raw length %llu, shape and codec say %llu",
                      (unsigned long long)raw_len, (unsigned long long)want_raw);
    if (payload_len != have)
        return s_fail(slot, FRAME_E_PAYLOADLEN, err, errlen, "frame: payload length %llu, frame holds %zu",
                      (unsigned long long)payload_len, have);
    if (flags & FRAME_FLAG_ZSTD) {
        if (payload_len == 0 || payload_len > ZSTD_compressBound((size_t)raw_len))
            return s_fail(slot, FRAME_E_PAYLOADLEN, err, errlen, "frame: zstd payload length %llu for raw %llu",
                          (unsigned long long)payload_len, (unsigned long long)raw_len);
    } else if (payload_len != raw_len) {
        return s_fail(slot, FRAME_E_PAYLOADLEN, err, errlen, "frame: payload length %llu != raw length %llu",
                      (unsigned long long)payload_len, (unsigned long long)raw_len);
    }
    return 0;
}

int frame_peek(frame_info_t *info, const uint8_t *in, size_t len, char *err, size_t errlen)
{
    frame_info_t tmp;
    if (!info)
        info = &tmp;
    memset(info, 0, sizeof *info);
    frame_error_t *slot = &info->error;
    if (!in)
        return s_fail(slot, FRAME_E_ARG, err, errlen, "frame: NULL buffer");
    if (len < 36)
        return s_fail(slot, FRAME_E_SHORT, err, errlen, "frame too short: %zu bytes", len);
    uint32_t magic = s_get32(in);
    if (magic != FRAME_MAGIC)
        return s_fail(slot, FRAME_E_MAGIC, err, errlen, "frame: bad magic 0x%08x", magic);
    if (in[4] != FRAME_VERSION)
        return s_fail(slot, FRAME_E_VERSION, err, errlen, "frame: unsupported version %u", in[4]);
    int codec = in[5];
    if (codec >= CODEC_COUNT)
        return s_fail(slot, FRAME_E_CODEC, err, errlen, "frame: unknown codec %d", codec);
    if (in[6] != 0)
        return s_fail(slot, FRAME_E_DTYPE, err, errlen, "frame: unknown dtype %u", in[6]);
    int ndim = in[7];
    if (ndim < 1 || ndim > FRAME_MAX_NDIM)
        return s_fail(slot, FRAME_E_NDIM, err, errlen, "frame: ndim %d not in 1..%d", ndim, FRAME_MAX_NDIM);
    size_t hdr = 32 + 4 * (size_t)ndim;
    if (len < hdr)
        return s_fail(slot, FRAME_E_SHORT, err, errlen, "frame too short: %zu bytes < header %zu", len, hdr);
    unsigned flags = in[8];
    unsigned want_planes = s_is_blocked(codec) ? 0 : FRAME_FLAG_PLANES;
    if ((flags & ~(FRAME_FLAG_ZSTD | FRAME_FLAG_PLANES)) || (flags & FRAME_FLAG_PLANES) != want_planes)
        return s_fail(slot, FRAME_E_FLAGS, err, errlen, "frame: bad flags 0x%02x for %s", flags, codec_name(codec));
    int e = (int8_t)in[9];
    if (((codec == CODEC_FP32 || codec == CODEC_BF16) && e != 0) || e < S_MIN_EXP || e > S_MAX_EXP)
        return s_fail(slot, FRAME_E_EXPONENT, err, errlen, "frame: bad scale exponent %d for %s", e, codec_name(codec));
    int bs = s_get16(in + 10);
    if (s_is_blocked(codec) ? !s_block_ok(codec, bs) : bs != 0)
        return s_fail(slot, FRAME_E_BLOCK, err, errlen, "frame: bad block size %d for %s", bs, codec_name(codec));
    uint64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        info->shape[i] = s_get32(in + 28 + 4 * i);
        n *= info->shape[i];
        if (n > FRAME_MAX_VALUES)
            return s_fail(slot, FRAME_E_SHAPE, err, errlen, "frame: shape holds more than %u values", FRAME_MAX_VALUES);
    }
    uint64_t raw_len = s_get64(in + 12), payload_len = s_get64(in + 20), want_raw = s_raw_len(codec, n, bs);
    if (codec == CODEC_PCA) {
        if (n % (uint64_t)bs)
            return s_fail(slot, FRAME_E_BLOCK, err, errlen, "frame: pca rows of %d do not divide %llu values", bs,
                          (unsigned long long)n);
        if (pca_rank_of(raw_len, (size_t)(n / (uint64_t)bs), bs) >= 0)
            want_raw = raw_len;   /* any rank the shape allows */
    }
    if (s_check_lengths(slot, err, errlen, raw_len, want_raw, payload_len, len - hdr, flags))
        return -1;
    info->codec = codec;
    info->dtype = 0;
    info->ndim = ndim;
    info->n_values = n;
    info->block_size = bs;
    info->scale_exp = e;
    info->flags = flags;
    info->raw_len = raw_len;
    info->payload_len = payload_len;
    info->header_len = hdr;
    info->frame_len = hdr + (size_t)payload_len;
    return 0;
}

/* The zstd payload p[0..len) into ctx->raw (raw_len bytes).  It must
 * be exactly one zstd frame whose header says raw_len: ZSTD_decompressDCtx
 * alone would also decode frames after it and skip skippable ones.  Memory
 * is bounded by raw_len (checked against the shape): the one-shot decoder
 * writes into ctx->raw directly and allocates no window buffer, whatever
 * window size the zstd frame header announces (zstd.h, ZSTD_d_windowLogMax:
 * "only useful in streaming mode").  Returns 0, or the s_fail code. */
static int s_unzstd(codec_ctx_t *ctx, const uint8_t *p, size_t len, size_t raw_len, char *err, size_t errlen)
{
    frame_error_t *slot = &ctx->error;
    size_t flen = ZSTD_findFrameCompressedSize(p, len);
    if (ZSTD_isError(flen) || flen != len)
        return s_fail(slot, FRAME_E_ZSTD, err, errlen, "decode: zstd payload of %zu bytes is not one zstd frame (%s)",
                      len, ZSTD_isError(flen) ? ZSTD_getErrorName(flen) : "bytes after it");
    unsigned long long fcs = ZSTD_getFrameContentSize(p, len);
    if (fcs == ZSTD_CONTENTSIZE_ERROR || fcs == ZSTD_CONTENTSIZE_UNKNOWN || fcs != raw_len)
        return s_fail(slot, FRAME_E_ZSTD, err, errlen, "decode: zstd content size %s (want %zu)",
                      fcs == ZSTD_CONTENTSIZE_ERROR ? "unreadable" :
                      fcs == ZSTD_CONTENTSIZE_UNKNOWN ? "unknown" : "mismatch", raw_len);
    if (s_grow((void **)&ctx->raw, &ctx->raw_cap, raw_len + 1) < 0)
        return s_fail(slot, FRAME_E_NOMEM, err, errlen, "decode: out of memory");
    size_t r = ZSTD_decompressDCtx(ctx->dctx, ctx->raw, raw_len, p, len);
    if (ZSTD_isError(r))
        return s_fail(slot, FRAME_E_ZSTD, err, errlen, "decode: zstd: %s", ZSTD_getErrorName(r));
    if (r != raw_len)
        return s_fail(slot, FRAME_E_ZSTD, err, errlen, "decode: zstd gave %zu bytes, want %zu", r, raw_len);
    return 0;
}

/* The fi->n_values > 0 values of the raw payload raw (2-byte aligned) into
 * out.  Refuses NaN/Inf/negative scales, int codes outside the format,
 * NaN/Inf float values and values that overflow.  0, or the s_fail code. */
static int s_decode_values(codec_ctx_t *ctx, float *out, const uint8_t *raw, const frame_info_t *fi,
                           char *err, size_t errlen)
{
    frame_error_t *slot = &ctx->error;
    size_t n = (size_t)fi->n_values;
    int bs = fi->block_size, near_top = 0, is_int = s_is_int(fi->codec);
    if (is_int) {
        size_t nb = (n + (size_t)bs - 1) / (size_t)bs;
        float ms = quant_max_scale((const uint16_t *)raw, nb);
        if (!isfinite(ms))
            return s_fail(slot, FRAME_E_SCALE, err, errlen, "decode: NaN/Inf scale");
        /* codes are at most qmax in magnitude (dequantize refuses others):
         * only near the top of the float range can a decoded value overflow,
         * and only then is it checked */
        double qmax = fi->codec == CODEC_INT8 ? 127.0 : 7.0;
        near_top = (double)ms * qmax * ldexp(1.0, fi->scale_exp) >= (double)FLT_MAX;
    }
    int rc = s_dequantize(out, raw, (size_t)fi->raw_len, n, fi->codec, bs, ldexpf(1.0f, fi->scale_exp));
    if (is_int && rc == QUANT_E_SCALE)
        return s_fail(slot, FRAME_E_SCALE, err, errlen, "decode: NaN/Inf/negative scale");
    if (is_int && rc == QUANT_E_CODE)
        return s_fail(slot, FRAME_E_VALUE, err, errlen, "decode: %s code out of range", codec_name(fi->codec));
    int other = s_hq_bits(fi->codec) || fi->codec == CODEC_PCA;
    if (other && rc == QUANT_E_SCALE)
        return s_fail(slot, FRAME_E_SCALE, err, errlen, "decode: NaN/Inf/negative scale");
    if (fi->codec == CODEC_PCA && rc == QUANT_E_CODE)
        return s_fail(slot, FRAME_E_VALUE, err, errlen, "decode: pca code out of range");
    if (other && rc == S_E_NONFINITE)
        return s_fail(slot, FRAME_E_VALUE, err, errlen, "decode: %s values decode to NaN/Inf", codec_name(fi->codec));
    if (rc < 0)
        return s_fail(slot, FRAME_E_VALUE, err, errlen, "decode: NaN/Inf value");
    if (near_top && quant_absmax_bits(out, n) >= 0x7f800000u)
        return s_fail(slot, FRAME_E_SCALE, err, errlen, "decode: scale x 2^%d overflows float", fi->scale_exp);
    return 0;
}

long frame_decode(codec_ctx_t *ctx, float *out, size_t cap_values,
                  uint32_t *shape, int *ndim, const uint8_t *in, size_t len,
                  char *err, size_t errlen)
{
    if (!ctx)
        return s_fail(NULL, FRAME_E_ARG, err, errlen, "decode: NULL context");
    frame_error_t *slot = &ctx->error;
    frame_info_t fi;
    if (frame_peek(&fi, in, len, err, errlen) < 0) {
        ctx->error = fi.error;
        return -1;
    }
    size_t n = (size_t)fi.n_values, hdr = fi.header_len, raw_len = (size_t)fi.raw_len;
    if (n > cap_values)
        return s_fail(slot, FRAME_E_CAP, err, errlen, "decode: %zu values over capacity %zu", n, cap_values);
    if (n > 0 && !out)
        return s_fail(slot, FRAME_E_ARG, err, errlen, "decode: NULL output");
    uint32_t ck = frame_checksum(in, hdr - 4, 0);
    ck = frame_checksum(in + hdr, (size_t)fi.payload_len, ck);
    uint32_t stored = s_get32(in + hdr - 4);
    if (ck != stored)
        return s_fail(slot, FRAME_E_CHECKSUM, err, errlen, "decode: checksum mismatch (0x%08x != 0x%08x)", ck, stored);

    const uint8_t *raw = in + hdr;
    if (fi.flags & FRAME_FLAG_ZSTD) {
        if (s_unzstd(ctx, raw, (size_t)fi.payload_len, raw_len, err, errlen) < 0)
            return -1;
        raw = ctx->raw;
    } else if (((uintptr_t)raw & 1u) && raw_len > 0) {
        if (s_grow((void **)&ctx->raw, &ctx->raw_cap, raw_len + 1) < 0)
            return s_fail(slot, FRAME_E_NOMEM, err, errlen, "decode: out of memory");
        memcpy(ctx->raw, raw, raw_len);
        raw = ctx->raw;
    }
    if (n > 0 && s_decode_values(ctx, out, raw, &fi, err, errlen) < 0)
        return -1;
    if (shape)
        memcpy(shape, fi.shape, sizeof(uint32_t) * (size_t)fi.ndim);
    if (ndim)
        *ndim = fi.ndim;
    ctx->error = FRAME_OK;
    return (long)n;
}

int codec_roundtrip(codec_ctx_t *ctx, float *x, size_t n, int codec, const encode_opts_t *opts)
{
    return codec_roundtrip_len(ctx, x, n, codec, opts) < 0 ? -1 : 0;
}

long codec_roundtrip_len(codec_ctx_t *ctx, float *x, size_t n, int codec, const encode_opts_t *opts)
{
    if (!ctx || n > FRAME_MAX_VALUES || codec < 0 || codec >= CODEC_COUNT)
        return -1;
    size_t bound = frame_bound(n, codec);
    if (s_grow((void **)&ctx->frame, &ctx->frame_cap, bound) < 0)
        return -1;
    uint32_t shape[1] = {(uint32_t)n};
    long len = frame_encode(ctx, ctx->frame, ctx->frame_cap, x, shape, 1, codec, opts, NULL, 0);
    if (len < 0)
        return -1;
    long got = frame_decode(ctx, x, n, NULL, NULL, ctx->frame, (size_t)len, NULL, 0);
    return got == (long)n ? len : -1;
}
