// fuzz-sources: compress/*.c
/* fuzz_pca.c: libFuzzer target for the pca decoder: the input picks the
 * row width (byte 0: 8..71), the rows (byte 1: 1..16: at most 16
 * directions, so that encoding the start frame stays cheap), the exponent (byte
 * 2) and the values encoded first (their rank sets the raw length), and is
 * the payload of a frame with a valid header (tests/fuzz/payload.h). */
#include "tests/fuzz/payload.h"

#define S_CAP (71 * 16)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static float x[S_CAP], out[S_CAP];
    static uint8_t f[FRAME_HEADER_MAX + 2 * 4 * S_CAP + 4096];
    static codec_ctx_t *ctx;
    if (!ctx)
        ctx = codec_ctx_new(1);
    if (size < 4)
        return 0;
    int w = 8 + data[0] % 64;
    size_t m = 1 + data[1] % 16, n = m * (size_t)w;
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(int8_t)data[3 + i % (size - 3)] * (float)(1 + i % 3);
    uint32_t shape[2] = {(uint32_t)m, (uint32_t)w};
    encode_opts_t o = {.block_size = w, .zstd = 1};
    long len = frame_encode(ctx, f, sizeof f, x, shape, 2, CODEC_PCA, &o, NULL, 0);
    if (len < 0)
        abort();
    fuzz_payload_check(ctx, f, (size_t)len, data + 3, size - 3, data[2], out, S_CAP);
    return 0;
}
