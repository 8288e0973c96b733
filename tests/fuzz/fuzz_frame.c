// fuzz-sources: compress/*.c
/* fuzz_frame.c: libFuzzer target for the tensor frame decoder.
 *
 * Every input is decoded as is (the checksum refuses most mutations), and
 * when its last byte is odd also with the checksum recomputed, so that the
 * fuzzer reaches the zstd and dequantization paths.  A decoded tensor must
 * hold only finite values and must encode again. */
#include "compress/codec.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define S_CAP (1u << 16)

static void s_check(codec_ctx_t *ctx, const uint8_t *f, size_t len)
{
    static float out[S_CAP];
    static uint8_t again[FRAME_HEADER_MAX + 2 * 4 * S_CAP];
    uint32_t shape[FRAME_MAX_NDIM];
    int ndim = 0;
    char err[256];
    frame_info_t info;
    int peek = frame_peek(&info, f, len, err, sizeof err);
    long n = frame_decode(ctx, out, S_CAP, shape, &ndim, f, len, err, sizeof err);
    if (n < 0) {
        if (err[0] == 0)
            abort();                              /* a refusal always says why */
        return;
    }
    if (peek != 0 || (uint64_t)n != info.n_values)
        abort();
    for (long i = 0; i < n; i++)
        if (!isfinite(out[i]))
            abort();
    long len2 = frame_encode(ctx, again, sizeof again, out, shape, ndim, info.codec, NULL, err, sizeof err);
    if (len2 < 0 || (size_t)len2 > frame_bound((size_t)n, info.codec))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static codec_ctx_t *ctx;
    if (!ctx)
        ctx = codec_ctx_new(1);
    uint8_t *copy = malloc(size ? size : 1);       /* exact size: ASan sees overreads */
    if (size)
        memcpy(copy, data, size);
    s_check(ctx, copy, size);
    if (size >= 36 && (data[size - 1] & 1) && data[7] >= 1 && data[7] <= FRAME_MAX_NDIM) {
        size_t hdr = 32 + 4 * (size_t)data[7];
        if (size >= hdr) {
            uint32_t ck = frame_checksum(copy, hdr - 4, 0);
            ck = frame_checksum(copy + hdr, size - hdr, ck);
            for (int i = 0; i < 4; i++)
                copy[hdr - 4 + i] = (uint8_t)(ck >> (8 * i));
            s_check(ctx, copy, size);
        }
    }
    free(copy);
    return 0;
}
