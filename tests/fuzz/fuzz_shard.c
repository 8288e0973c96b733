// fuzz-sources: node/engine/shards.c
/* fuzz_shard.c: libFuzzer target for llm.c token shard headers
 * (shards_check_header).
 *
 * The input is a whole shard file.  A header that is accepted must say what
 * the bytes are: magic and version one of the two pairs, the width theirs,
 * and the file exactly 1024 + count x width bytes; a refused one leaves a
 * one-line reason. */
#include "node/engine/shards.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[300] = "";
    int width = 0;
    uint64_t count = 0;
    if (shards_check_header(data, size, "fuzz.bin", &width, &count, err, sizeof err) == 0) {
        uint32_t magic = (uint32_t)data[0] | (uint32_t)data[1] << 8 | (uint32_t)data[2] << 16 | (uint32_t)data[3] << 24;
        if (!((magic == SHARD_MAGIC_U16 && width == 2) || (magic == SHARD_MAGIC_U32 && width == 4))) abort();
        if ((uint64_t)size != SHARD_HEADER_BYTES + count * (uint64_t)width) abort();
    } else if (!err[0] || strchr(err, '\n')) {
        abort();
    }
    return 0;
}
