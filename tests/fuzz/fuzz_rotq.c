// fuzz-sources: compress/*.c
/* fuzz_rotq.c: libFuzzer target for the hq1..hq4 decoders: the input picks
 * the codec (byte 0, low 2 bits), the tile (byte 0, next 3 bits: 8..1024),
 * the size (bytes 1-2) and the exponent (byte 3), and is the payload of a
 * frame with a valid header (tests/fuzz/payload.h). */
#include "tests/fuzz/payload.h"

#define S_CAP 4096

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static float x[S_CAP], out[S_CAP];
    static uint8_t f[FRAME_HEADER_MAX + 4 * S_CAP + 4096];
    static codec_ctx_t *ctx;
    if (!ctx)
        ctx = codec_ctx_new(1);
    if (size < 4)
        return 0;
    int codec = CODEC_HQ1 + (data[0] & 3), tile = 8 << ((data[0] >> 2) & 7);
    size_t n = 1 + ((size_t)data[1] | (size_t)data[2] << 8) % S_CAP;
    for (size_t i = 0; i < n; i++)
        x[i] = (float)((int)(i * 37 % 23) - 11);
    uint32_t shape[1] = {(uint32_t)n};
    encode_opts_t o = {.block_size = tile, .zstd = 1};
    long len = frame_encode(ctx, f, sizeof f, x, shape, 1, codec, &o, NULL, 0);
    if (len < 0)
        abort();
    fuzz_payload_check(ctx, f, (size_t)len, data + 4, size - 4, data[3], out, S_CAP);
    return 0;
}
