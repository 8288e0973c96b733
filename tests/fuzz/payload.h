/* payload.h: for the fuzz targets of one codec's decoder: a frame of that
 * codec (made by frame_encode, so its header is valid) takes the fuzzer's
 * bytes as its payload and exponent, is resealed, and must decode to
 * finite values or be refused with a reason. */
#ifndef BRIGADE_FUZZ_PAYLOAD_H
#define BRIGADE_FUZZ_PAYLOAD_H
#include "compress/codec.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* f[0..len) gets data (cycled) as its payload and e as its exponent byte,
 * then a right checksum; decodes it into out (cap floats) and aborts on a
 * refusal without a reason or a non-finite decoded value. */
static void fuzz_payload_check(codec_ctx_t *ctx, uint8_t *f, size_t len, const uint8_t *data, size_t size,
                               uint8_t e, float *out, size_t cap)
{
    size_t hdr = 32 + 4 * (size_t)f[7];
    for (size_t i = hdr; i < len && size > 0; i++)
        f[i] = data[(i - hdr) % size];
    f[9] = e;
    uint32_t ck = frame_checksum(f, hdr - 4, 0);
    ck = frame_checksum(f + hdr, len - hdr, ck);
    for (int i = 0; i < 4; i++)
        f[hdr - 4 + i] = (uint8_t)(ck >> (8 * i));
    uint8_t *copy = malloc(len);                  /* exact size: ASan sees overreads */
    memcpy(copy, f, len);
    char err[256] = "";
    long n = frame_decode(ctx, out, cap, NULL, NULL, copy, len, err, sizeof err);
    if (n < 0 && err[0] == 0)
        abort();
    for (long i = 0; i < n; i++)
        if (!isfinite(out[i]))
            abort();
    free(copy);
}

#endif
